"""A small writer of LLVM integer code with llvmlite: variables, loops and
int64 arrays. The planner's native code (pyocc.runtime.planner_native)
and the symbolic run function's plan loop
(pyocc.lowering.symbolic_native._emit_plan) are written with it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import llvmlite.ir as ir

I8, I64 = ir.IntType(8), ir.IntType(64)
PTR = ir.PointerType()


class IRWriter:
    """An IRBuilder (`b`) with the few control-flow shapes integer code
    needs: variables (allocas in the entry block, which LLVM keeps in
    registers), counted loops, while loops, and int64 array access."""

    def __init__(self, entry: ir.Block, builder: ir.IRBuilder):
        """Write at `builder`, the variables at the end of `entry` (before its branch)."""
        self.entry = entry
        self.b = builder

    @classmethod
    def for_function(cls, function: ir.Function) -> IRWriter:
        """A writer at the start of `function`, whose entry block holds only
        the variables and a branch to the code."""
        entry = function.append_basic_block("entry")
        start = function.append_basic_block("start")
        ir.IRBuilder(entry).branch(start)
        return cls(entry, ir.IRBuilder(start))

    def variable(self, initial: ir.Value | int) -> ir.Value:
        """An i64 variable (an alloca in the entry block), set to `initial` here."""
        at_entry = ir.IRBuilder(self.entry)
        at_entry.position_before(self.entry.terminator)
        slot = at_entry.alloca(I64)
        self.b.store(I64(initial) if isinstance(initial, int) else initial, slot)
        return slot

    def get(self, slot: ir.Value) -> ir.Value:
        """A variable's value."""
        return self.b.load(slot, typ=I64)

    def set(self, slot: ir.Value, value: ir.Value | int) -> None:
        """Assign a variable."""
        self.b.store(I64(value) if isinstance(value, int) else value, slot)

    def at(self, base: ir.Value, index: ir.Value, type: ir.Type = I64) -> ir.Value:
        """The address of `base[index]`."""
        return self.b.gep(base, [index], source_etype=type)

    def load(self, base: ir.Value, index: ir.Value) -> ir.Value:
        """`base[index]` of an int64 array."""
        return self.b.load(self.at(base, index), typ=I64)

    def store(self, value: ir.Value, base: ir.Value, index: ir.Value) -> None:
        """`base[index] = value` in an int64 array."""
        self.b.store(value, self.at(base, index))

    @contextmanager
    def counted(self, start: ir.Value | int, stop: ir.Value) -> Iterator[ir.Value]:
        """`for (i = start; i < stop; i++)`; yields i."""
        counter = self.variable(start)
        with self.loop(lambda: self.b.icmp_signed("<", self.get(counter), stop)):
            i = self.get(counter)
            yield i
            self.set(counter, self.b.add(i, I64(1)))

    @contextmanager
    def loop(self, condition: Callable[[], ir.Value]) -> Iterator[None]:
        """`while (condition())`: the body is what the caller emits inside the `with`."""
        b = self.b
        header, body, after = (b.append_basic_block(name) for name in ("while", "do", "done"))
        b.branch(header)
        b.position_at_end(header)
        b.cbranch(condition(), body, after)
        b.position_at_end(body)
        yield
        b.branch(header)
        b.position_at_end(after)

    def round_up(self, value: ir.Value, alignment: ir.Value) -> ir.Value:
        """The smallest multiple of `alignment` >= `value` (value >= 0,
        alignment > 0): a mask where `alignment` is a power of two (every
        fitted alignment is), a division otherwise."""
        b = self.b
        bumped = b.add(value, b.sub(alignment, I64(1)))
        power = b.icmp_signed("==", b.and_(alignment, b.sub(alignment, I64(1))), I64(0))
        masked = b.and_(bumped, b.neg(alignment))
        with b.if_else(power) as (then, otherwise):
            with then:
                then_block = b.block
            with otherwise:
                divided = b.mul(b.udiv(bumped, alignment), alignment)
                otherwise_block = b.block
        result = b.phi(I64)
        result.add_incoming(masked, then_block)
        result.add_incoming(divided, otherwise_block)
        return result
