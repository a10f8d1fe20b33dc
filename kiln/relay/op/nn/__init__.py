"""Neural-network ops (TVM's ``relay.nn``); importing registers them."""
from . import _nn, _conv_pool, _nn_extra, _nn_3d  # noqa: F401  (registrations)
from .nn import *  # noqa: F401,F403
from .nn import __all__  # noqa: F401
