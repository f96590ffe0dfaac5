"""Where the memory of each light model goes, planner by planner.

For each of the nine light models (shipped in the onnx wheel) one table row:
the naive footprint (no reuse), the max-live lower bound, the pool size and
planning time of every planner in ``pyocc.planning.ALGORITHMS``, and the plan
``auto`` (the default) chooses. Measured on the ops' given order, lazy
lifetimes, before any fusion or coalescing (see ``baseline_options``), at
alignment 64 and at alignment 1. Then, with dnn-reorder's order: the
max-live bound and auto's pool, and the time dnn-reorder takes; the buffers and auto's pool after
dnn-coalesce, next to the two peers of issue 6.

    python bench/memory.py                       # all models, both alignments
    python bench/memory.py --models resnet50,densenet121 --alignments 1
    python bench/memory.py --markdown            # tables for docs/memory.md

Adding a column: write a function ``(ctx: ModelContext) -> value`` and append
a ``Column`` to ``COLUMNS`` (or extend it from another module). A column's
``unit`` says how to print it and in which table it appears: "bytes" (MiB
in the first table, exact in the second), "ms" (the third), "count" or
"text" (the first). ``ModelContext`` lowers the model on
demand, caches every artefact, and its ``lower(**overrides)`` lowers with
other ``Options`` (e.g. fusion on) for before/after columns. A column that
cannot be measured returns None (printed as "-").
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Measure the working tree this file belongs to, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyocc.pipelines import Options  # noqa: E402
from pyocc.planning import ALGORITHMS, Plan, PlanningError, Problem, plan_memory  # noqa: E402
from pyocc.testing.light_models import light_model_path  # noqa: E402

LIGHT_MODELS = [
    "bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
    "shufflenet", "squeezenet", "vgg19", "zfnet512",
]

REPEATS = 3
"""Every timed thing runs this many times; tables show the fastest, in CPU
milliseconds (on a shared machine wall time mostly measures the other
processes; the minimum is the least disturbed run)."""

PLAN_BUDGET_MS = 200.0
"""Time budget of the improving planners (hill-climb, exact, auto's search):
the budget `dnn-memory-pool` gives `auto`."""


def baseline_options(alignment: int) -> Options:
    """The flow the goals are measured on: lazy lifetimes, the given op order,
    no fusion, no coalescing. A helper who adds a pass that is on by default
    turns it off here (and measures it on with ``ctx.lower(...)``)."""
    return Options(memory="lazy", alignment=alignment, fuse=False, reorder="given", coalesce=False)


@dataclass
class Lowered:
    """One lowering of a model: buffer-form module, its liveness and the
    planning problem `dnn-memory-pool` would solve."""

    module: Any
    """The buffer-form (malloc/dealloc) xDSL ModuleOp."""
    tensor_liveness: Any
    """Liveness of the tensor form (before memory ops)."""
    liveness: Any
    """Liveness of the buffer form."""
    problem: Problem
    """The planner's input, built like `dnn-memory-pool` builds it."""


@dataclass
class ModelContext:
    """What a column function may ask about one model at one alignment.
    Everything is computed on first use and cached."""

    name: str
    path: Path
    alignment: int
    _lowered: dict[Options, Lowered] = field(default_factory=dict)
    _plans: dict[str, Plan | None] = field(default_factory=dict)

    @property
    def options(self) -> Options:
        """The baseline flow (see ``baseline_options``)."""
        return baseline_options(self.alignment)

    def lower(self, **overrides: Any) -> Lowered:
        """The model lowered to buffer form with the baseline options, with
        ``overrides`` replacing Options fields (``memory`` is forced to lazy:
        the planner's input)."""
        options = dataclasses.replace(self.options, **overrides, memory="lazy")
        if options not in self._lowered:
            self._lowered[options] = _lower(self.path, options)
        return self._lowered[options]

    @property
    def baseline(self) -> Lowered:
        """The baseline lowering."""
        return self.lower()

    def plan(self, algorithm: str) -> Plan | None:
        """The baseline problem planned by ``algorithm`` (None when the
        algorithm refuses it, e.g. ``exact`` above its size limit)."""
        if algorithm not in self._plans:
            try:
                plans, cpu_ms = [], []
                for _ in range(REPEATS):
                    start = time.process_time()
                    plans.append(plan_memory(self.baseline.problem, algorithm, time_budget_ms=PLAN_BUDGET_MS))
                    cpu_ms.append((time.process_time() - start) * 1000)
                # CPU time, like pool_pass_ms (the plan's own plan_ms is wall time).
                self._plans[algorithm] = dataclasses.replace(plans[0], plan_ms=min(cpu_ms))
            except PlanningError:
                self._plans[algorithm] = None
        return self._plans[algorithm]

    def pool_pass_ms(self) -> float:
        """CPU milliseconds of the whole `dnn-memory-pool` pass (liveness,
        problem, auto, rewrite; not the IR verifier) on the baseline lazy
        module."""
        from xdsl.context import Context

        from pyocc.rewrites.dnn_memory_pool import DnnMemoryPoolPass

        times = []
        for _ in range(REPEATS):
            module = self.baseline.module.clone()
            start = time.process_time()
            DnnMemoryPoolPass(alignment=self.alignment).apply(Context(), module)
            times.append((time.process_time() - start) * 1000)
        return min(times)


def _lower(path: Path, options: Options) -> Lowered:
    """Import ``path`` and run the tensor and buffer stages of ``options``."""
    from xdsl.context import Context
    from xdsl.dialects import func

    from pyocc.analysis.liveness import analyze_function
    from pyocc.frontend.onnx_import import import_model
    from pyocc.pipelines import buffer_passes, run_passes, tensor_passes
    from pyocc.rewrites.dnn_memory_pool import planning_problem

    module = import_model(path)
    ctx = Context()
    run_passes(ctx, module, tensor_passes(options))
    function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    tensor_liveness = analyze_function(function)
    run_passes(ctx, module, buffer_passes(options))
    function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    liveness = analyze_function(function)
    return Lowered(module, tensor_liveness, liveness, planning_problem(liveness, options.alignment))


# ---------------------------------------------------------------- columns


@dataclass(frozen=True)
class Column:
    """One table column: a header, a unit and how to measure it."""

    header: str
    unit: str
    """bytes, ms, count or text."""
    measure: Callable[[ModelContext], Any]


def _pool_size(algorithm: str) -> Callable[[ModelContext], int | None]:
    """Column function: pool bytes chosen by ``algorithm``."""

    def measure(ctx: ModelContext) -> int | None:
        plan = ctx.plan(algorithm)
        return None if plan is None else plan.pool_size

    return measure


def _plan_ms(algorithm: str) -> Callable[[ModelContext], float | None]:
    """Column function: planning milliseconds of ``algorithm``."""

    def measure(ctx: ModelContext) -> float | None:
        plan = ctx.plan(algorithm)
        return None if plan is None else plan.plan_ms

    return measure


def _max_live(ctx: ModelContext) -> int:
    """Max-live lower bound of the planning problem (alignment included)."""
    from pyocc.planning import lower_bound

    return lower_bound(ctx.baseline.problem)


def _auto_gap(ctx: ModelContext) -> str:
    """How far auto's pool is above the bound, in percent."""
    plan, bound = ctx.plan("auto"), _max_live(ctx)
    if plan is None or bound == 0:
        return "-"
    return f"{100.0 * (plan.pool_size - bound) / bound:+.2f}%"


COLUMNS: list[Column] = [
    Column("buffers", "count", lambda ctx: len(ctx.baseline.problem.buffers)),
    Column("naive", "bytes", lambda ctx: ctx.baseline.liveness.naive_bytes),
    Column("max-live", "bytes", _max_live),
    *[c for algorithm in ALGORITHMS for c in (
        Column(algorithm, "bytes", _pool_size(algorithm)),
        Column(algorithm, "ms", _plan_ms(algorithm)),
    )],
    Column("auto", "bytes", _pool_size("auto")),
    Column("auto", "ms", _plan_ms("auto")),
    Column("whole pool pass", "ms", lambda ctx: ctx.pool_pass_ms()),
    Column("auto winner", "text", lambda ctx: (ctx.plan("auto") or Plan({}, 0, "-", False, 0)).algorithm.removeprefix("auto:")),
    Column("auto vs bound", "text", _auto_gap),
]
"""The columns of the table, in order. Append to add one."""

# Layer fusion (bench/fusion_ops.py): kernel launches without and with it,
# onnxruntime's optimised node count, max-live and auto's pool with fusion.
from bench.fusion_ops import memory_columns  # noqa: E402

COLUMNS += memory_columns(Column)


# ---------------------------------------------------------------- op order (dnn-reorder)


def _reordered(ctx: ModelContext) -> Lowered:
    """The model lowered with dnn-reorder's default strategy."""
    return ctx.lower(reorder="auto")


def _max_live_reordered(ctx: ModelContext) -> int:
    """Max-live lower bound after dnn-reorder (compare with max-live: the
    given order's)."""
    from pyocc.planning import lower_bound

    return lower_bound(_reordered(ctx).problem)


def _auto_reordered(ctx: ModelContext) -> int | None:
    """The pool auto plans for the reordered model."""
    try:
        return plan_memory(_reordered(ctx).problem, "auto", time_budget_ms=PLAN_BUDGET_MS).pool_size
    except PlanningError:
        return None


def _reorder_cpu_ms(ctx: ModelContext) -> float:
    """CPU milliseconds of dnn-reorder on the tensor-form model (fastest of
    REPEATS, each on a fresh copy)."""
    import time

    from xdsl.context import Context

    from pyocc.frontend.onnx_import import import_model
    from pyocc.pipelines import run_passes
    from pyocc.lowering.convert_onnx_to_dnn import ConvertOnnxToDnnPass
    from pyocc.rewrites.dnn_reorder import DnnReorderPass

    tensor_form = import_model(ctx.path)
    run_passes(Context(), tensor_form, [ConvertOnnxToDnnPass()])
    times = []
    for _ in range(REPEATS):
        module = tensor_form.clone()
        start = time.process_time()
        DnnReorderPass().apply(Context(), module)
        times.append((time.process_time() - start) * 1000)
    return min(times)


COLUMNS += [
    Column("max-live reordered", "bytes", _max_live_reordered),
    Column("auto reordered", "bytes", _auto_reordered),
    Column("dnn-reorder CPU", "ms", _reorder_cpu_ms),
]


# issue 6, pool-mode activation bytes: (TVM Relax fused, onnxruntime
# ORT_ENABLE_ALL; ShuffleNet's 2.78 is ORT_ENABLE_EXTENDED)
PEERS_MIB: dict[str, tuple[float, float]] = {
    "bvlc_alexnet": (3.27, 2.14), "densenet121": (7.96, 11.87), "inception_v1": (9.47, 4.43),
    "inception_v2": (7.47, 3.83), "resnet50": (9.39, 6.89), "shufflenet": (3.95, 2.78),
    "squeezenet": (6.06, 3.75), "vgg19": (25.31, 24.50), "zfnet512": (13.21, 8.70),
}


def _coalesced_pool(ctx: ModelContext) -> int:
    """auto's pool after dnn-coalesce (the baseline's flow otherwise)."""
    return plan_memory(ctx.lower(coalesce=True).problem, "auto", time_budget_ms=PLAN_BUDGET_MS).pool_size


def _peer(which: int) -> Callable[[ModelContext], int | None]:
    """Column function: a peer's activation bytes from the issue (0 TVM, 1 onnxruntime)."""

    def measure(ctx: ModelContext) -> int | None:
        peers = PEERS_MIB.get(ctx.name)
        return None if peers is None else round(peers[which] * 2**20)

    return measure


COLUMNS += [
    Column("buffers coalesced", "count", lambda ctx: len(ctx.lower(coalesce=True).problem.buffers)),
    Column("auto coalesced", "bytes", _coalesced_pool),
    Column("TVM (issue 6)", "bytes", _peer(0)),
    Column("onnxruntime (issue 6)", "bytes", _peer(1)),
]


# ---------------------------------------------------------------- printing


def render(value: Any, unit: str, exact_bytes: bool) -> str:
    """One cell: bytes as MiB (or exact), ms with one decimal, '-' for None."""
    if value is None:
        return "-"
    if unit == "bytes":
        return f"{value:,d}" if exact_bytes else f"{value / 2**20:.2f}"
    if unit == "ms":
        return f"{value:.1f}"
    if unit == "count":
        return f"{value:,d}"
    return str(value)


def table(rows: list[list[str]], headers: list[str], markdown: bool) -> str:
    """Rows as an aligned text table or a markdown table (first column left)."""
    cells = [headers, *rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        parts = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        return ("| " + " | ".join(parts) + " |") if markdown else "  ".join(parts)

    out = [line(headers)]
    if markdown:
        out.append("|" + "|".join(":" + "-" * (w + 1) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|")
    else:
        out.append("  ".join("-" * w for w in widths))
    out += [line(r) for r in rows]
    return "\n".join(out)


def measure_all(models: list[str], alignment: int, columns: list[Column]) -> list[list[Any]]:
    """Per model, the raw value of every column (models lowered one at a
    time, so memory stays small)."""
    values = []
    for name in models:
        ctx = ModelContext(name, light_model_path(name), alignment)
        values.append([c.measure(ctx) for c in columns])
        print(f"  measured {name} (alignment {alignment})", file=sys.stderr)
    return values


TABLES = [
    ("sizes in MiB", ("count", "bytes", "text"), False),
    ("sizes in bytes", ("bytes",), True),
    ("CPU time in ms", ("ms",), False),
]
"""The tables printed per alignment: title, the units of the columns shown,
and whether bytes are exact (else MiB)."""


def report(models: list[str], alignment: int, columns: list[Column], markdown: bool) -> str:
    """The tables of ``TABLES`` for one alignment (each column measured once)."""
    values = measure_all(models, alignment, columns)
    parts = []
    for title, units, exact_bytes in TABLES:
        shown = [i for i, c in enumerate(columns) if c.unit in units]
        headers = ["model"] + [columns[i].header for i in shown]
        rows = [[m] + [render(row[i], columns[i].unit, exact_bytes) for i in shown] for m, row in zip(models, values)]
        heading = f"### alignment {alignment}: {title}" if markdown else f"alignment {alignment}: {title}"
        parts.append(heading + "\n\n" + table(rows, headers, markdown) + "\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    """Parse options, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(LIGHT_MODELS),
                        help="comma-separated light model names (default: all nine)")
    parser.add_argument("--alignments", default="64,1", help="comma-separated alignments (default: 64,1)")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    args = parser.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in LIGHT_MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(LIGHT_MODELS)}")
    for alignment in (int(a) for a in args.alignments.split(",")):
        print(report(models, alignment, COLUMNS, args.markdown))
    print(f"Times: CPU ms, fastest of {REPEATS} runs. "
          "'-' = the planner refuses the problem (exact above its size limit).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
