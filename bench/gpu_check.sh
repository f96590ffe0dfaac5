#!/usr/bin/env bash
# The one prepared GPU check for pyocc's target=cuda (issue #7), for the lent
# GPU machine (the device tool: one H200, no network, its image's python3 with
# torch for CUDA 13 and NVIDIA's CUDA 13 runtime, cuBLAS and cuDNN 9 wheels).
#
# Here, once (fetches what the image lacks into .whl/, ~43 MiB, see that script):
#     bash bench/gpu_wheels.sh
# which runs, for the record:
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#         --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#         --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
#         xdsl==0.75.0 immutabledict==4.3.1 ordered-set==4.1.0 llvmlite==0.50.0 onnx2torch==1.5.15 scipy-openblas32==0.3.34.481.3
#     (then re-packs llvmlite's wheel with LZMA so that the carry stays under 64 MiB)
# Then the device tool's run, from the repository root:
#     command: bash bench/gpu_check.sh      carry: [".whl"]      timeout_s: 420
#
# What it does, in 5 minutes at most (each step has its own timeout; about 2 on the H200, 2026-12-04):
#   1. installs the carried wheels into /tmp/site (llvmlite only if the image's is not 0.50);
#   2. records the GPU, the packages and the CUDA libraries pyocc.runtime.cuda loads (env.txt);
#   3. runs the tests marked gpu (pytest.log): real libraries, every cuda_api symbol, calls through them,
#      the nine light models in pool mode against onnxruntime, and whatever else is marked gpu;
#   4. runs bench/gpu_memory_latency.py on all nine light models (100 runs each) (bench.log, results.md, results.json):
#      outputs checked against onnxruntime CPU, latency, cudaMalloc/cudaFree per run, memory, PyTorch peer.
# Everything lands in $OUT (the device tool brings it back; at most 8 files): gpu_check.log, env.txt,
# pytest.log, bench.log, results.md, results.json. Exit status: 0 when the tests and the benchmark passed.
#
#     bash bench/gpu_check.sh --dry-run   # here, without a GPU: the same steps, the benchmark on the CPU
#                                         # stand-in of the CUDA libraries for one model (PYTHON=... to mimic the image)
set -u -o pipefail
cd "$(dirname "$0")/.."

DRY_RUN=0
[ "${1:-}" = "--dry-run" ] && DRY_RUN=1
PYTHON=${PYTHON:-python3}
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
started=$(date +%s)
step() { echo; echo "== $* ($(( $(date +%s) - started )) s)"; }

main() {  # (not indented: the heredoc below must start its lines at column 0)

step "install the carried wheels"
SITE=$(mktemp -d /tmp/site.XXXX)
if ls .whl/*.whl >/dev/null 2>&1; then
    wheels=(.whl/*.whl)
    if "$PYTHON" -c 'import llvmlite, sys; sys.exit(not llvmlite.__version__.startswith("0.50."))' 2>/dev/null; then
        wheels=(${wheels[@]/*llvmlite-*/})  # the image's llvmlite will do
    fi
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
        "${wheels[@]}" || { echo "gpu_check: installing the wheels failed"; return 3; }
else
    echo "no .whl/ here: relying on installed packages (run bench/gpu_wheels.sh and carry .whl)"
fi
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"

step "environment"
{
    nvidia-smi -L 2>&1 || echo "nvidia-smi: not available"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
    "$PYTHON" - <<'EOF'
import importlib, sys
print("python", sys.version.split()[0], sys.executable)
for name in ("numpy", "onnx", "onnxruntime", "xdsl", "llvmlite", "torch", "onnx2torch", "cuda.pathfinder"):
    try:
        module = importlib.import_module(name)
        print(f"{name:16s} {str(getattr(module, '__version__', '?')):12s} {getattr(module, '__file__', '')}")
    except Exception as e:  # noqa: BLE001
        print(f"{name:16s} missing ({type(e).__name__}: {e})")
from pyocc.runtime.cuda import CudaLibraries, cuda_unavailable_reason
reason = cuda_unavailable_reason()
print("cuda_unavailable_reason:", reason)
if reason is None:
    libraries = CudaLibraries.load()
    print(libraries.describe())
    print("cuDNN parts preloaded:", ", ".join(p.rsplit("/", 1)[-1] for p in libraries.cudnn_parts) or "none")
    print("versions:", libraries.versions())
    print("symbols bound:", len(libraries.symbols()))
EOF
} 2>&1 | tee "$OUT/env.txt"

step "tests marked gpu"
mapfile -t gpu_tests < <(grep -rlE "mark\.gpu|pytestmark *= *pytest\.mark\.gpu" tests --include='test_*.py' | sort)
echo "files: ${gpu_tests[*]}"
# on the GPU machine a gpu test that would skip (libraries or device not usable) fails instead
require_gpu=1
[ "$DRY_RUN" = 1 ] && require_gpu=0
PYOCC_REQUIRE_GPU=$require_gpu timeout 90 "$PYTHON" -m pytest -q -p no:cacheprovider -m gpu -rs "${gpu_tests[@]}" 2>&1 | tee "$OUT/pytest.log"
pytest_rc=${PIPESTATUS[0]}

step "benchmark"
if [ "$DRY_RUN" = 1 ]; then
    bench_args=(--fake-cuda --peer auto --models squeezenet --runs 2 --budget-s 60)
else
    bench_args=(--runs 100 --warmup 10 --budget-s 130)  # 20-run medians of a 2 ms model moved by half between runs
fi
timeout 180 "$PYTHON" bench/gpu_memory_latency.py "${bench_args[@]}" --out "$OUT" 2>&1 | tee "$OUT/bench.log"
bench_rc=${PIPESTATUS[0]}

step "done"
echo "gpu_check: pytest exit ${pytest_rc}, benchmark exit ${bench_rc} (0: passed; benchmark 2: no GPU; 124: timed out)"
[ "$pytest_rc" = 0 ] && [ "$bench_rc" = 0 ]
}

main 2>&1 | tee "$OUT/gpu_check.log"
exit "${PIPESTATUS[0]}"
