"""Weight initializers and ``create_workload`` (TVM's ``relay.testing.init``)."""
from __future__ import annotations

import numpy as np

from ...error import KilnError
from ...ir.module import IRModule
from ...runtime import ndarray as nd
from ...runtime.device import cpu
from ..transform import InferType


class Initializer:
    """Fills a parameter array in place according to its name's suffix (weight, bias, gamma, beta, mean, var)."""

    def __call__(self, desc: str, arr: np.ndarray) -> None:
        if desc.endswith("weight"):
            self._init_weight(desc, arr)
        elif desc.endswith("bias"):
            self._init_bias(desc, arr)
        elif desc.endswith("gamma"):
            self._init_gamma(desc, arr)
        elif desc.endswith("beta"):
            self._init_beta(desc, arr)
        elif desc.endswith("mean"):
            self._init_mean(desc, arr)
        elif desc.endswith("var"):
            self._init_var(desc, arr)
        else:
            self._init_default(desc, arr)

    def _init_bias(self, _, arr):
        arr[:] = 0.0

    def _init_gamma(self, _, arr):
        arr[:] = 1.0

    def _init_beta(self, _, arr):
        arr[:] = 0.0

    def _init_mean(self, _, arr):
        arr[:] = 0.0

    def _init_var(self, _, arr):
        arr[:] = 1.0

    def _init_weight(self, name, arr):
        raise NotImplementedError("Initializer subclasses must implement _init_weight")

    def _init_default(self, name, _):
        raise KilnError(f"unknown initialization pattern for {name!r}: the name should end in weight, bias, gamma, "
                        "beta, mean or var")


class Xavier(Initializer):
    """Xavier/Glorot initialization: uniform or gaussian with variance ``magnitude / fan``."""

    def __init__(self, rnd_type: str = "uniform", factor_type: str = "avg", magnitude: float = 3):
        self.rnd_type = rnd_type
        self.factor_type = factor_type
        self.magnitude = float(magnitude)

    def _init_weight(self, name, arr):
        shape = arr.shape
        if len(shape) < 2:
            raise KilnError(f"Xavier initializer cannot initialize {name!r} of shape {shape}: it needs 2 or more dims")
        hw_scale = float(np.prod(shape[2:])) if len(shape) > 2 else 1.0
        fan_in, fan_out = shape[1] * hw_scale, shape[0] * hw_scale
        factor = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}.get(self.factor_type)
        if factor is None:
            raise KilnError(f"Xavier: factor_type must be avg, in or out, got {self.factor_type!r}")
        scale = np.sqrt(self.magnitude / factor)
        if self.rnd_type == "uniform":
            arr[:] = np.random.uniform(-scale, scale, size=arr.shape)
        elif self.rnd_type == "gaussian":
            arr[:] = np.random.normal(0, scale, size=arr.shape)
        else:
            raise KilnError(f"Xavier: rnd_type must be uniform or gaussian, got {self.rnd_type!r}")


def create_workload(net, initializer: Initializer | None = None, seed: int = 0):
    """``(mod, params)`` for a Relay function: every parameter except ``data`` gets an initialized NDArray."""
    mod = net if isinstance(net, IRModule) else IRModule.from_expr(net)
    mod = InferType()(mod)
    shape_dict = {v.name_hint: v.checked_type for v in mod["main"].params}
    np.random.seed(seed)
    initializer = initializer if initializer is not None else Xavier()
    params = {}
    for name, ty in shape_dict.items():
        if name == "data":
            continue
        value = np.zeros(ty.concrete_shape).astype(ty.dtype)
        initializer(name, value)
        params[name] = nd.array(value, device=cpu(0))
    return mod, params
