"""A 3-layer perceptron (TVM's ``relay.testing.mlp``)."""
from __future__ import annotations

from .. import op as _op
from ..analysis import free_vars
from ..expr import Function, var
from .init import create_workload


def get_net(batch_size: int, num_classes: int = 10, image_shape=(1, 28, 28), dtype: str = "float32") -> Function:
    data = var("data", shape=(batch_size,) + tuple(image_shape), dtype=dtype)
    x = _op.nn.batch_flatten(data)
    k = 1
    for d in image_shape:
        k *= d
    for name, units in (("fc1", 128), ("fc2", 64), ("fc3", num_classes)):
        x = _op.nn.dense(x, var(f"{name}_weight", shape=(units, k), dtype=dtype), units=units)
        x = _op.nn.bias_add(x, var(f"{name}_bias", shape=(units,), dtype=dtype), axis=-1)
        if name != "fc3":
            x = _op.nn.relu(x)
        k = units
    out = _op.nn.softmax(x)
    return Function(free_vars(out), out)


def get_workload(batch_size: int = 1, num_classes: int = 10, image_shape=(1, 28, 28), dtype: str = "float32"):
    """``(mod, params)`` of the MLP."""
    return create_workload(get_net(batch_size, num_classes, image_shape, dtype))
