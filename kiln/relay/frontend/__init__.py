"""Model importers (TVM's ``relay.frontend``): PyTorch (TorchScript, torch.export) and ONNX.

Importers load lazily, so ``import kiln.relay.frontend`` does not import torch or onnx.
"""
from __future__ import annotations

import importlib

_IMPORTERS = {
    "from_pytorch": "kiln.relay.frontend.pytorch",
    "from_exported_program": "kiln.relay.frontend.exported_program",
    "from_onnx": "kiln.relay.frontend.onnx",
}


def __getattr__(name):
    mod_name = _IMPORTERS.get(name)
    if mod_name is None:
        if name in ("pytorch", "exported_program", "onnx", "common", "pytorch_utils", "aten"):
            return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module 'kiln.relay.frontend' has no attribute {name!r}")
    try:
        mod = importlib.import_module(mod_name)
    except ModuleNotFoundError as err:
        if err.name == mod_name:
            raise NotImplementedError(f"kiln.relay.frontend.{name} is not built yet ({mod_name})") from None
        raise
    return getattr(mod, name)


__all__ = list(_IMPORTERS)
