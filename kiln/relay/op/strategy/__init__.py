"""Op strategies per target (TVM's ``relay.op.strategy``): generic CPU implementations in ``generic``."""
from .generic import *  # noqa: F401,F403
from . import generic  # noqa: F401
from . import x86  # noqa: F401,E402  (x86 strategies for "cpu" targets; registers on the generic ones)
