"""Limits of the generated code that the command line checks before any
lowering runs. Light on purpose (no llvmlite, no xDSL): `pyocc`'s argument
parser imports it at start-up."""

#: the most threads a model runs on (its workers' pthread_t table is static)
MAX_THREADS = 256
