"""Run-time support: host kernels, JIT loading. Never imports xDSL."""
