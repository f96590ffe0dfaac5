"""The one exception type for mistakes a user can make (bad file, unsupported
op, dynamic dimension, pool overflow, bad option). Tools print its message as
one line and exit non-zero; anything else escaping is a bug in pyocc."""


class PyoccError(Exception):
    """A user-facing error: the message names the problem and what to do."""
