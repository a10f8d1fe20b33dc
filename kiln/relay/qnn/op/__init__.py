"""The QNN dialect's operators (TVM's ``relay.qnn.op``)."""
from .qnn import *  # noqa: F401,F403
from .qnn import __all__  # noqa: F401
from . import arith  # noqa: F401
