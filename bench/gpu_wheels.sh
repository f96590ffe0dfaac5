#!/usr/bin/env bash
# Fetch, here, the Python wheels bench/gpu_check.sh installs on the lent GPU
# machine, which has no network: into .whl/ at the repository root (ignored by
# git; the device tool's `carry: [".whl"]` takes it along).
#
# What the GPU machine's image already has (see the device tool's KINDS.md):
# Python 3.12, torch 2.11 (CUDA 13) with NVIDIA's CUDA 13 runtime, cuBLAS and
# cuDNN 9 wheels under site-packages/nvidia/, cuda-pathfinder, numpy 2, onnx,
# onnxruntime, pytest, hypothesis. pyocc.runtime.cuda finds those CUDA 13
# libraries, so no cuDNN wheel travels (nvidia-cudnn-cu12 alone is ~700 MB;
# a call carries 64 MiB at most). What is missing there: pyocc's own
# dependencies xdsl (+ immutabledict, ordered-set), llvmlite 0.50 and
# scipy-openblas32 (the host kernels' BLAS, a dependency since stop 15), and
# onnx2torch for the PyTorch peer of the benchmark.
#
# llvmlite's wheel is 57 MiB, which with the working tree leaves almost no room
# under the 64 MiB carry limit; it is re-packed here with LZMA (same files,
# same RECORD hashes, ~40 MiB), which pip installs like any wheel.
#
#   bash bench/gpu_wheels.sh          # then: device run, carry [".whl"], command "bash bench/gpu_check.sh"
set -euo pipefail
cd "$(dirname "$0")/.."

if ! git check-ignore -q .whl/probe; then
    echo "/.whl/" >>"$(git rev-parse --git-common-dir)/info/exclude"
fi
rm -rf .whl
mkdir -p .whl

# The device machine's Python: CPython 3.12 on x86-64 (manylinux).
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
    xdsl==0.75.0 immutabledict==4.3.1 ordered-set==4.1.0 llvmlite==0.50.0 onnx2torch==1.5.15 \
    scipy-openblas32==0.3.34.481.3

python3 - <<'EOF'
"""Re-pack every wheel over 20 MiB with LZMA (zipfile reads it; so does pip)."""
import os
import zipfile
from pathlib import Path

for wheel in Path(".whl").glob("*.whl"):
    if wheel.stat().st_size < 20 * 2**20:
        continue
    packed = wheel.with_suffix(".lzma")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(packed, "w", zipfile.ZIP_LZMA) as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info), compress_type=zipfile.ZIP_LZMA)
    before, after = wheel.stat().st_size, packed.stat().st_size
    os.replace(packed, wheel)
    print(f"re-packed {wheel.name}: {before / 2**20:.1f} -> {after / 2**20:.1f} MiB")
EOF

# The install command gpu_check.sh runs, tried against a temporary folder.
check=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$check" \
    --python-version 3.12 --implementation cp --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 .whl/*.whl
test -f "$check/llvmlite/binding/libllvmlite.so" && test -d "$check/xdsl" && test -d "$check/onnx2torch"
rm -rf "$check"

wheels=$(du -cb .whl/*.whl | tail -1 | cut -f1)
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
echo "wheels $((wheels / 1024)) KiB + tracked files $((tree / 1024)) KiB of the 65536 KiB a call carries"
ls -l .whl
