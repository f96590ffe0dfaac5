"""How far long work has come, for a person watching a terminal.

Work that can take minutes counts its steps with `steps`: the scratchpad
schedule that runs tries several whole schedules of a model (sixteen for
DenseNet-121 in 256 KiB of SRAM, over a minute), then writes its
instructions as IR and lowers the program's ops to LLVM (232,012 and
332,750 of them). Nothing is shown, and a step costs no more than a
function call, unless a reporter is installed with `reporting`: the
`pyocc` command installs `TerminalBar` when its stderr is a terminal, so
that pipes, files and tests see no progress lines.

    with progress.steps("scheduling 185 ops", len(variants)) as step:
        for variant in variants:
            ...
            step()
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import TextIO

Reporter = Callable[[str, int, int], None]
"""Called as `reporter(what, done, total)`: `done` of `total` steps of
`what` are finished; `done == total` at the end (also when the work ends
early, by an error or a `break`)."""

_reporters: list[Reporter] = []
"""The installed reporters, innermost last: only it is told."""


@contextlib.contextmanager
def reporting(reporter: Reporter) -> Iterator[None]:
    """Tell `reporter` of every `steps` block run inside this one."""
    _reporters.append(reporter)
    try:
        yield
    finally:
        _reporters.remove(reporter)


@contextlib.contextmanager
def steps(what: str, total: int) -> Iterator[Callable[[], None]]:
    """A block of `total` steps of `what`: call the function it gives once
    after each step. The installed reporter (if any) is told at the start,
    after each step (after every thousandth of them, where there are more
    than a thousand: one per op of a large program) and at the end."""
    reporter = _reporters[-1] if _reporters else None
    if reporter is None:
        yield lambda: None
        return
    done = 0
    every = max(1, -(-total // 1000))  # ceil: a thousand calls at most

    def step() -> None:
        nonlocal done
        done = min(done + 1, total)
        if done % every == 0 or done == total:
            reporter(what, done, total)

    reporter(what, 0, total)
    try:
        yield step
    finally:
        if done < total:
            reporter(what, total, total)


class TerminalBar:
    """A reporter that draws one line, `what [#####.....] 5/16 12 s`, on a
    terminal (rewritten in place with a carriage return) once work has
    taken `delay` seconds, at most `per_second` times a second, and
    erases it when the work is done: quick work draws nothing."""

    def __init__(self, stream: TextIO | None = None, delay: float = 1.0, per_second: float = 10.0,
                 width: int = 20, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.delay = delay
        self.interval = 1.0 / per_second
        self.width = width
        self.clock = clock
        self._started: dict[str, float] = {}
        self._drawn_at: float | None = None
        self._drawn = 0  # characters on the line now

    def __call__(self, what: str, done: int, total: int) -> None:
        """Draw (or erase, when `done == total`) the line for `what`."""
        now = self.clock()
        if done == 0 or what not in self._started:
            self._started[what] = now
        if done >= total:
            del self._started[what]
            self._erase()
            return
        elapsed = now - self._started[what]
        if elapsed < self.delay or (self._drawn_at is not None and now - self._drawn_at < self.interval):
            return
        filled = self.width * done // max(total, 1)
        line = f"{what} [{'#' * filled}{'.' * (self.width - filled)}] {done:,}/{total:,} {elapsed:.0f} s"
        self.stream.write("\r" + line + " " * max(0, self._drawn - len(line)))
        self.stream.flush()
        self._drawn, self._drawn_at = len(line), now

    def _erase(self) -> None:
        if self._drawn:
            self.stream.write("\r" + " " * self._drawn + "\r")
            self.stream.flush()
        self._drawn, self._drawn_at = 0, None
