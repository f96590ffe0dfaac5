"""Moved to pyocc.runtime.cuda_api: the table belongs to the runtime, the
lowest of its three readers (lowering, runtime binder, CPU stand-in). This
re-export remains only for convert_dnn_to_cuda.py, whose owner switches its
import; the module is deleted then."""

from pyocc.runtime.cuda_api import *  # noqa: F403
