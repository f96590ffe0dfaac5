"""pyocc: a memory-efficient DNN inference compiler on xDSL.

An ONNX model goes in; every byte it needs is planned before it runs; native
code that runs it out of one pre-planned memory pool comes out. The package
root stays light (no onnx, numpy or llvmlite import) so that `pyocc-opt`
starts fast.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    """`pyocc.compile`, `pyocc.lower` and friends, imported on first use."""
    if name in ("compile", "lower", "Model", "MemoryReport"):
        from pyocc import api  # on first use: api imports onnx, numpy and llvmlite; pyocc-opt imports this package

        return getattr(api, name)
    raise AttributeError(f"module 'pyocc' has no attribute {name!r}")
