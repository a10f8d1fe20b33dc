"""PyTorch-side helpers shared by the TorchScript and torch.export importers: dtype names, and turning an
aten call's arguments (positional in TorchScript, args+kwargs with defaults left out in FX) into one list in
the order of the op's schema, so a single converter table serves both paths."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...error import FrontendError

# c10::ScalarType codes, which TorchScript graphs carry as plain ints
_SCALAR_TYPE_CODES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32",
                      7: "float64", 11: "bool", 15: "bfloat16"}

_TORCH_DTYPE_NAMES = {"torch.uint8": "uint8", "torch.int8": "int8", "torch.int16": "int16",
                      "torch.int32": "int32", "torch.int64": "int64", "torch.float16": "float16",
                      "torch.float32": "float32", "torch.float64": "float64", "torch.bool": "bool",
                      "torch.bfloat16": "bfloat16"}

SUPPORTED_DTYPES = frozenset(_SCALAR_TYPE_CODES.values())

# quantized element types: names only the quantized-op converters (aten/quantized.py) accept
_QUANTIZED_DTYPES = {12: "qint8", 13: "quint8", 14: "qint32", "torch.qint8": "qint8", "torch.quint8": "quint8",
                     "torch.qint32": "qint32"}


class DTypeName(str):
    """A dtype argument, already translated to kiln's spelling (so converters can tell it from a string)."""


def torch_dtype_to_str(dtype, where: str = "") -> str:
    """``torch.float32`` / ScalarType code 6 / ``"Float"`` -> ``"float32"``; FrontendError for others."""
    if isinstance(dtype, DTypeName):
        return str(dtype)
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        name = _SCALAR_TYPE_CODES.get(int(dtype))
    else:
        name = _TORCH_DTYPE_NAMES.get(str(dtype))
        if name is None:
            name = {"Float": "float32", "Double": "float64", "Half": "float16", "Long": "int64", "Int": "int32",
                    "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool",
                    "BFloat16": "bfloat16"}.get(str(dtype))
    if name is None:
        name = _QUANTIZED_DTYPES.get(int(dtype) if isinstance(dtype, (int, np.integer)) else str(dtype))
    if name is None:
        at = f" (at {where})" if where else ""
        raise FrontendError(f"unsupported dtype {dtype}{at}: kiln's PyTorch frontend handles "
                            f"{', '.join(sorted(SUPPORTED_DTYPES))}")
    return name


def tensor_dtype(t, where: str = "") -> str:
    """The kiln dtype name of a torch tensor."""
    return torch_dtype_to_str(t.dtype, where)


def tensor_to_numpy(t, where: str = "") -> np.ndarray:
    """A numpy copy of a torch tensor (bfloat16 goes through float32: numpy has no bfloat16)."""
    import torch
    tensor_dtype(t, where)
    t = t.detach()
    if t.is_quantized:
        raise FrontendError(f"quantized tensor at {where}: kiln does not import quantized models")
    if t.dtype == torch.bfloat16:
        t = t.float()
    return np.array(t.cpu().numpy(), order="C", copy=True)


@lru_cache(maxsize=None)
def parse_schema(text: str):
    import torch
    return torch._C.parse_schema(text)


class AtenArgs(list):
    """An aten call's arguments in schema order, also reachable by name (``args["dim"]``)."""

    def __init__(self, values, names):
        super().__init__(values)
        self.names = list(names)

    def __getitem__(self, key):
        if isinstance(key, str):
            try:
                return list.__getitem__(self, self.names.index(key))
            except ValueError:
                return None
        return list.__getitem__(self, key)

    def get(self, key, default=None):
        v = self[key] if (isinstance(key, str) and key in self.names) or isinstance(key, int) and key < len(self) \
            else default
        return default if v is None else v


def _is_dtype_arg(arg) -> bool:
    return arg.name in ("dtype", "scalar_type") or "ScalarType" in str(arg.type)


def normalize_args(schema, args, kwargs=None, convert_dtype=True) -> AtenArgs:
    """Arguments of one aten call as a list in ``schema`` order, defaults filled in.

    ``args`` are positional values (already converted), ``kwargs`` keyword ones. Dtype arguments become
    :class:`DTypeName`.
    """
    kwargs = kwargs or {}
    values, names = [], []
    for i, a in enumerate(schema.arguments):
        if i < len(args):
            v = args[i]
        elif a.name in kwargs:
            v = kwargs[a.name]
        elif a.has_default_value():
            v = a.default_value
        else:
            v = None
        if convert_dtype and v is not None and _is_dtype_arg(a) and not hasattr(v, "checked_type"):
            if not isinstance(v, (list, tuple)):
                v = DTypeName(torch_dtype_to_str(v, f"argument {a.name!r} of {schema.name}"))
        values.append(v)
        names.append(a.name)
    # variadic extras (rare): keep them
    for v in args[len(schema.arguments):]:
        values.append(v)
        names.append(f"_extra{len(names)}")
    return AtenArgs(values, names)
