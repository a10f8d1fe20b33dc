"""``relay.save_param_dict`` / ``relay.load_param_dict`` in TVM's binary format (the codec lives in the
runtime, :mod:`kiln.runtime.params`, so deployed models load parameters without the compiler)."""
from __future__ import annotations

from ..runtime import ndarray as _nd
from ..runtime.params import load_params, save_params


def save_param_dict(params: dict) -> bytearray:
    """Serialize ``{name: NDArray | numpy array}`` to bytes (``GraphModule.load_params`` reads them)."""
    return bytearray(save_params(params))


def load_param_dict(param_bytes) -> dict:
    """``{name: NDArray}`` from bytes written by ``save_param_dict`` (or by TVM)."""
    return {k: _nd.array(v) for k, v in load_params(param_bytes).items()}
