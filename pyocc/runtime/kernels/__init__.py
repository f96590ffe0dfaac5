"""Host kernel implementations by operator family; import them from
``pyocc.runtime.host_kernels``."""
