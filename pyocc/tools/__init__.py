"""Command-line tools: `pyocc-opt` (pass pipelines) and `pyocc` (compile, run, plan)."""
