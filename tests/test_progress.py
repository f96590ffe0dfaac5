"""pyocc.progress: long work counts its steps; a reporter, installed only
where someone watches a terminal, draws them."""

from __future__ import annotations

import io
import sys

import pytest

import pyocc
from pyocc import progress
from pyocc.examples import tiny_cnn
from pyocc.planning.scratchpad import schedule_scratchpad
from pyocc.tools import cli
from tests.planning.test_scratchpad import _concat_net


class Recorder:
    """A reporter that keeps what it is told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    def __call__(self, what: str, done: int, total: int) -> None:
        self.calls.append((what, done, total))


def test_without_a_reporter_steps_do_nothing() -> None:
    with progress.steps("work", 3) as step:
        for _ in range(3):
            step()
    assert progress._reporters == []


def test_a_reporter_is_told_the_start_each_step_and_the_end() -> None:
    recorder = Recorder()
    with progress.reporting(recorder), progress.steps("work", 3) as step:
        for _ in range(3):
            step()
    assert recorder.calls == [("work", 0, 3), ("work", 1, 3), ("work", 2, 3), ("work", 3, 3)]
    assert progress._reporters == []  # uninstalled after the block


def test_work_that_ends_early_still_ends() -> None:
    recorder = Recorder()
    with progress.reporting(recorder), pytest.raises(RuntimeError):
        with progress.steps("work", 5) as step:
            step()
            raise RuntimeError("stopped")
    assert recorder.calls == [("work", 0, 5), ("work", 1, 5), ("work", 5, 5)]


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_bar_draws_only_after_its_delay_and_erases_itself() -> None:
    out, clock = io.StringIO(), Clock()
    bar = progress.TerminalBar(out, delay=1.0, per_second=10, width=10, clock=clock)
    bar("scheduling", 0, 4)
    clock.now += 0.5
    bar("scheduling", 1, 4)
    assert out.getvalue() == ""  # quick so far: nothing drawn
    clock.now += 1.0
    bar("scheduling", 2, 4)
    assert out.getvalue() == "\rscheduling [#####.....] 2/4 2 s"
    clock.now += 0.01
    bar("scheduling", 3, 4)  # within a tenth of a second of the last line: not drawn again
    assert out.getvalue().count("\r") == 1
    bar("scheduling", 4, 4)
    line = "scheduling [#####.....] 2/4 2 s"
    assert out.getvalue() == "\r" + line + "\r" + " " * len(line) + "\r"  # the line is blank again


def test_quick_work_draws_nothing() -> None:
    out, clock = io.StringIO(), Clock()
    bar = progress.TerminalBar(out, clock=clock)
    for done in range(6):
        bar("quick", done, 5)
        clock.now += 0.1
    assert out.getvalue() == ""


def test_the_scratchpad_schedule_counts_its_variants() -> None:
    """The schedule that runs tries several placements of the concats: each
    is a step, the count is right, and reporting changes no schedule."""
    program = _concat_net()
    plain = schedule_scratchpad(program, 64 << 10, cascades=False)
    recorder = Recorder()
    with progress.reporting(recorder):
        reported = schedule_scratchpad(program, 64 << 10, cascades=False)
    assert reported.instructions == plain.instructions
    what, _, total = recorder.calls[0]
    assert what == "scheduling 4 ops for 64.00 KiB of SRAM"
    assert [done for _, done, _ in recorder.calls] == list(range(total + 1))
    assert total > 2  # a step per placement tried, not one for the whole


def test_a_long_block_tells_its_reporter_a_thousand_times_at_most() -> None:
    recorder = Recorder()
    with progress.reporting(recorder), progress.steps("ops", 5432) as step:
        for _ in range(5432):
            step()
    done = [d for _, d, _ in recorder.calls]
    assert done[0] == 0 and done[-1] == 5432 and done == sorted(done)
    assert 900 <= len(done) <= 1002  # every sixth op, the start and the end


def test_a_scratchpad_compile_counts_what_it_writes_and_lowers() -> None:
    """The two long loops after the schedule (its instructions written as
    IR, the program's ops lowered to LLVM) count their steps to the end."""
    recorder = Recorder()
    with progress.reporting(recorder):
        pyocc.compile(tiny_cnn.build(), scratchpad="16KiB", kernels="numpy", jit=False)
    ends = {what: (done, total) for what, done, total in recorder.calls}
    writing = [what for what in ends if what.startswith("writing ") and what.endswith(" scheduled instructions as IR")]
    lowering = [what for what in ends if what.startswith("lowering ") and what.endswith(" ops to LLVM")]
    assert len(writing) == len(lowering) == 1
    assert ends[writing[0]][1] > 10 and ends[lowering[0]][1] > 10  # a step an instruction, an op
    assert all(done == total for done, total in ends.values())  # each ran to its end


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("terminal", [True, False])
def test_the_command_draws_progress_only_on_a_terminal(terminal: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", _Terminal() if terminal else io.StringIO())
    with cli._progress_on_a_terminal():
        installed = list(progress._reporters)
    assert [type(r) for r in installed] == ([progress.TerminalBar] if terminal else [])
    assert progress._reporters == []
