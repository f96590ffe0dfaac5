"""Byte-share cascades: runs of row-local ops band by band, each band a byte share of a tensor.

The scheduler can simulate them (`schedule_scratchpad(..., cascades=True)`),
but no IR runs them: what `pyocc run --scratchpad` runs is made with chain
cascades (chains.py) instead.
"""

from __future__ import annotations

import math

from ..npu_simulator import Piece
from . import tuning
from .program import KEEP, KEEP_STORE, WHOLE, _Make, _Need, NpuOp, NpuProgram, NpuTensor, _Unit, _split
from .tiling import _candidates


def _cascade_tensors(program: NpuProgram, start: int, stop: int) -> tuple[set[str], set[str], set[str]]:
    """(produced inside, read inside, needed after) the ops start..stop."""
    produced = {n for op in program.ops[start:stop] for n in op.outputs}
    read_inside = {n for op in program.ops[start:stop] for n in op.inputs}
    tensors = program.by_name()
    after = {n for op in program.ops[stop:] for n in op.inputs} | {n for n in produced if tensors[n].kind == "output"}
    return produced, read_inside, after


def _cascade_footprint(program: NpuProgram, start: int, stop: int, bands: int, sram: int) -> int | None:
    """SRAM a cascade of ops start..stop in `bands` row bands needs (its
    weights whole, about four bands of each tensor in flight), or None when
    a band would be thinner than a halo."""
    tensors = program.by_name()
    ops = program.ops[start:stop]
    produced, read_inside, after = _cascade_tensors(program, start, stop)
    small = sram // 8
    foot = sum(tensors[w].size for w in {w for op in ops for w in op.weights})
    names = {n for op in ops for n in (*op.inputs, *op.outputs)}
    reach: dict[str, int] = {}
    for op in ops:
        for n in op.inputs:
            if tensors[n].rows < bands:
                return None
            reach[n] = max(reach.get(n, 0), _reach(op, tensors[n], bands))
        if op.out_rows < bands:
            return None
    for n in names:
        t = tensors[n]
        band = math.ceil(t.size / bands)
        in_flight = (2 * reach.get(n, 0) + 2) * band
        if n in produced and n not in after:
            foot += in_flight
        else:
            foot += t.size if t.size <= small else in_flight
    return foot


def _reach(op: NpuOp, tensor: NpuTensor, bands: int) -> int:
    """How many neighbouring bands on each side a band of `op` reads of
    `tensor`: enough rows to cover the halo."""
    if not op.halo_rows:
        return 0
    return math.ceil(op.halo_rows / max(1, tensor.rows // bands))


def _cascades(program: NpuProgram, sram: int) -> list[tuple[int, int, int]]:
    """(first op, op after the last, row bands) of each cascade: a maximal
    run of consecutive row-splittable ops whose weights fit a quarter of the
    SRAM and whose bands fit half of it, kept when a tensor of it is too big
    to stay whole in SRAM."""
    tensors = program.by_name()
    ops = program.ops
    found: list[tuple[int, int, int]] = []
    start = 0
    while start < len(ops):
        best: tuple[int, int] | None = None
        stop = start
        weights: set[str] = set()
        fitting: list[tuple[int, int]] = []
        while stop < len(ops) and ops[stop].out_rows > 1:
            weights |= set(ops[stop].weights)
            if sum(tensors[w].size for w in weights) > sram // 4:
                break
            fits = next((b for b in _candidates(min(op.out_rows for op in ops[start:stop + 1]))
                         if (f := _cascade_footprint(program, start, stop + 1, b, sram)) is not None
                         and f <= sram * tuning.CASCADE_SHARE // 4),
                        None)
            if fits is None:
                break
            best = (stop + 1, fits)
            fitting.append(best)
            stop += 1
        if best:
            # end where the least data crosses to later ops (it goes through DRAM when big)
            stops = {stop: bands for stop, bands in fitting}
            cut = min(stops, key=lambda stop: (_crossing_bytes(program, start, stop, sram), -stop))
            best = (cut, stops[cut])
        names = {n for op in ops[start:best[0]] for n in (*op.inputs, *op.outputs)} if best else set()
        if best and best[1] > 1 and any(tensors[n].size > sram // 4 for n in names):
            found.append((start, best[0], best[1]))
            start = best[0]
        else:
            start += 1
    return found


def _crossing_bytes(program: NpuProgram, start: int, stop: int, sram: int) -> int:
    """Bytes of the big tensors ops start..stop leave to later ops: what a
    cascade ending there sends through DRAM."""
    produced, _, after = _cascade_tensors(program, start, stop)
    tensors = program.by_name()
    return sum(tensors[n].size for n in produced & after if tensors[n].size > sram // 8)


def _cascade_units(program: NpuProgram, start: int, stop: int, bands: int, sram: int) -> list[_Unit]:
    """The ops start..stop band by band: op k computes band i once its
    producers inside the cascade computed band i + 1 (its halo below), so
    a band of each tensor lives only while its consumers need it."""
    tensors = program.by_name()
    ops = program.ops[start:stop]
    produced, _, after = _cascade_tensors(program, start, stop)
    producer = {n: k for k, op in enumerate(ops) for n in op.outputs}
    small = sram // 8
    skew: list[int] = []
    for op in ops:
        lag = [skew[producer[n]] + _reach(op, tensors[n], bands) for n in op.inputs if n in producer]
        skew.append(max(lag, default=0))
    units: list[_Unit] = []
    for step in range(bands + max(skew)):
        for k, op in enumerate(ops):
            i = step - skew[k]
            if not 0 <= i < bands:
                continue
            reads: list[_Need] = []
            touched = 0
            for n in dict.fromkeys(op.inputs):
                t = tensors[n]
                band = _split(t.size, bands, i)
                halo = math.ceil(t.size * op.halo_rows / max(1, t.rows))
                touched += band + 2 * halo
                if t.size <= small and n not in produced:
                    reads.append(_Need(Piece(n, "all", t.size), False))
                    continue
                r = _reach(op, t, bands)
                near = [j for j in range(i - r, i + r + 1) if 0 <= j < bands]
                reads += [_Need(Piece(n, f"band{j}/{bands}", _split(t.size, bands, j)), True) for j in near]
            for w in dict.fromkeys(op.weights):
                reads.append(_Need(Piece(w, "all", tensors[w].size), False))
                touched += tensors[w].size
            writes = []
            for n in dict.fromkeys(op.outputs):
                t = tensors[n]
                piece = Piece(n, f"band{i}/{bands}", _split(t.size, bands, i))
                touched += piece.bytes
                if n not in after:
                    writes.append(_Make(piece, KEEP))
                elif t.size <= small:
                    writes.append(_Make(piece, WHOLE))
                else:
                    writes.append(_Make(piece, KEEP_STORE))
            units.append(_Unit(op.name, _split(op.macs, bands, i), tuple(reads), tuple(writes), i == bands - 1, touched))
    return units
