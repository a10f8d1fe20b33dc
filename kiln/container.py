"""TVM's old top-level ``tvm.container`` module: the container types (see :mod:`kiln.runtime.container`)."""
from .runtime.container import Array, Map, String, ShapeTuple, tuple_object  # noqa: F401


def __getattr__(name):
    if name == "ADT":  # the Relay interpreter's / VM's tuple value
        from .relay.backend.interpreter import ADT
        return ADT
    raise AttributeError(f"module 'kiln.container' has no attribute {name!r}")
