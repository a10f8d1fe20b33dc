"""Op strategies per target (TVM's ``relay.op.strategy``): the generic strategies (``generic``, each a generic
function of the target's keys) and the registrations of each target on them (``x86``: ``"cpu"``)."""
from .generic import *  # noqa: F401,F403
from . import generic  # noqa: F401
from . import x86, x86_alter_op  # noqa: F401,E402  ("cpu" registrations on the generic strategies and hooks)
