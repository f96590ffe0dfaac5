"""Limits and defaults of the generated code that the command line reads
before any lowering runs. Light on purpose (no llvmlite, no xDSL): `pyocc`'s
argument parser imports it at start-up."""

#: the most threads a model runs on (its workers' pthread_t table is static)
MAX_THREADS = 256

#: target cuda: the default bytes of cuDNN workspace each convolution may
#: use, a buffer of the plan live only around it (dnn-cuda-scratch). Chosen
#: on an H200 (docs/cuda.md, "Choosing the workspace"): over the nine light
#: models 1 MiB ran pool mode 1.41x PyTorch eager (geometric mean), 0 bytes
#: 1.30x, 4 MiB 1.42x, 32 MiB 1.32x, and every MiB is paid in every pool
#: with a convolution (32 MiB made pool mode's activation memory 4.3x
#: PyTorch's on average; 1 MiB: 41% less than PyTorch's).
CUDA_WORKSPACE = 1 << 20

#: target cuda: how init chooses each convolution's algorithm among those
#: whose workspace fits: `ranked`, cuDNN's heuristic ranking
#: (cudnnGetConvolutionForwardAlgorithm_v7, no convolution runs), or `timed`,
#: cuDNN running each algorithm once and ranking them by the time it took
#: (cudnnFindConvolutionForwardAlgorithm: a slower init, and the choice can
#: differ between inits when two algorithms take about the same time). On an
#: H200 timed ran pool mode 1.05x ranked's speed over the nine light models
#: (geometric mean; 0.80x to 1.52x per model, within what one configuration
#: moved between runs), so ranked is the default (docs/cuda.md)
CONV_SEARCHES = ("ranked", "timed")
CUDA_CONV_SEARCH = "ranked"
