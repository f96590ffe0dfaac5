"""JIT-compiled code must run wherever MCJIT happens to place its sections.

In a long-lived process (a pytest-xdist worker running hundreds of tests,
a process that loaded torch), mappings come and go, and MCJIT may place a
module's code more than 2 GiB away from its constant pool. Code generated
for LLVM's default (small) code model reaches its data through 32-bit
PC-relative relocations, and llvmlite's LLVM then aborts the whole process
inside `finalize_object` (an assertion in RuntimeDyldELF): the
"Fatal Python error: Aborted" that lost test workers in test_native_kernels
and test_native_linalg. far_sections.py arranges such a layout on purpose,
in a child process, since the failure kills the process.
"""

from __future__ import annotations

import platform
import resource
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(platform.machine() != "x86_64", reason="the layout and its relocations are x86-64's"),
    pytest.mark.skipif(resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY,
                       reason="the layout reserves all free address space, which a limit on it forbids"),
]

SCRIPT = Path(__file__).with_name("far_sections.py")


def run_far(mode: str) -> subprocess.CompletedProcess[str]:
    """far_sections.py in a fresh interpreter, in `mode`."""
    return subprocess.run([sys.executable, str(SCRIPT), mode], capture_output=True, text=True, timeout=120)


def test_the_layout_breaks_small_code_model_jit() -> None:
    # the control: without it the two tests below could pass on a layout
    # that never put the sections far apart
    result = run_far("small")
    assert result.returncode != 0 or result.stdout.strip() == "wrong", result.stdout + result.stderr


@pytest.mark.parametrize("mode", ["jit", "site"])
def test_jit_runs_with_code_and_data_far_apart(mode: str) -> None:
    result = run_far(mode)
    assert (result.returncode, result.stdout.strip()) == (0, "ok"), result.stderr[-2000:]
