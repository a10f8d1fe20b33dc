"""DataType: the one place where dtype strings are parsed.

A dtype string is ``<code><bits>[x<lanes>]`` such as ``float32``, ``int64``, ``uint8``,
``bool`` or ``float32x8``, plus ``handle`` for opaque pointers.
"""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from ..error import DataTypeError

_CODES = ("int", "uint", "float", "bfloat", "handle", "bool")
_PATTERN = re.compile(r"^(int|uint|float|bfloat|handle|bool)(\d*)(?:x(\d+))?$")


class DataType:
    """A parsed dtype: ``type_code`` (one of int, uint, float, bfloat, handle, bool), ``bits``, ``lanes``."""

    __slots__ = ("type_code", "bits", "lanes", "_str")

    # DLPack type codes, as TVM numbers them.
    INT, UINT, FLOAT, HANDLE, BFLOAT = 0, 1, 2, 3, 4
    _DL_CODE = {"int": 0, "uint": 1, "float": 2, "handle": 3, "bfloat": 4, "bool": 1}

    def __init__(self, type_code, bits: int | None = None, lanes: int = 1):
        if bits is None:  # TVM spelling: DataType("float32")
            parsed = parse_dtype(type_code)
            type_code, bits, lanes = parsed.type_code, parsed.bits, parsed.lanes
        self.type_code = type_code
        self.bits = bits
        self.lanes = lanes
        base = "bool" if type_code == "bool" else ("handle" if type_code == "handle" else f"{type_code}{bits}")
        self._str = base if lanes == 1 else f"{base}x{lanes}"

    def __str__(self) -> str:
        return self._str

    def __repr__(self) -> str:
        return f"DataType({self._str!r})"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = parse_dtype(other)
            except DataTypeError:
                return False
        return isinstance(other, DataType) and self._str == other._str

    def __hash__(self) -> int:
        return hash(self._str)

    # -- queries ---------------------------------------------------------------------------
    @property
    def is_float(self) -> bool:
        return self.type_code in ("float", "bfloat")

    @property
    def is_int(self) -> bool:
        return self.type_code == "int"

    @property
    def is_uint(self) -> bool:
        return self.type_code == "uint"

    @property
    def is_bool(self) -> bool:
        return self.type_code == "bool"

    @property
    def is_handle(self) -> bool:
        return self.type_code == "handle"

    @property
    def is_integral(self) -> bool:
        """int, uint or bool: types whose values are whole numbers."""
        return self.type_code in ("int", "uint", "bool")

    @property
    def is_vector(self) -> bool:
        return self.lanes > 1

    @property
    def itemsize(self) -> int:
        """Bytes per element (all lanes); bool is stored as one byte."""
        return max(self.bits, 8) // 8 * self.lanes

    @property
    def dl_code(self) -> int:
        return self._DL_CODE[self.type_code]

    def element_of(self) -> "DataType":
        return parse_dtype(str(DataType(self.type_code, self.bits, 1)))

    def with_lanes(self, lanes: int) -> "DataType":
        return parse_dtype(str(DataType(self.type_code, self.bits, lanes)))

    def numpy_dtype(self) -> np.dtype:
        if self.lanes != 1:
            raise DataTypeError(f"vector dtype {self} has no numpy equivalent")
        if self.type_code == "bool":
            return np.dtype(np.bool_)
        if self.type_code == "bfloat":
            raise DataTypeError("bfloat16 has no numpy dtype; use float32 or uint16 storage")
        if self.type_code == "handle":
            return np.dtype(np.uint64)
        return np.dtype(f"{self.type_code}{self.bits}")

    def min_value(self):
        if self.is_float:
            return float(np.finfo(self.numpy_dtype()).min)
        if self.is_bool:
            return False
        return int(np.iinfo(self.numpy_dtype()).min)

    def max_value(self):
        if self.is_float:
            return float(np.finfo(self.numpy_dtype()).max)
        if self.is_bool:
            return True
        return int(np.iinfo(self.numpy_dtype()).max)


@lru_cache(maxsize=None)
def _parse(text: str) -> DataType:
    if text == "bool":
        return DataType("bool", 1, 1)
    m = _PATTERN.match(text)
    if not m:
        raise DataTypeError(
            f"unknown dtype {text!r}; expected e.g. 'float32', 'int64', 'uint8', 'bool', "
            "'float32x8' (vector) or 'handle'"
        )
    code, bits, lanes = m.group(1), m.group(2), m.group(3)
    if code == "handle":
        nbits = int(bits) if bits else 64
    elif code == "bool":
        nbits = 1
    else:
        if not bits:
            raise DataTypeError(f"dtype {text!r} needs a bit width, e.g. '{code}32'")
        nbits = int(bits)
        valid = {"int": (8, 16, 32, 64), "uint": (1, 8, 16, 32, 64), "float": (16, 32, 64), "bfloat": (16,)}[code]
        if nbits not in valid:
            raise DataTypeError(f"dtype {text!r}: {code} supports bit widths {valid}")
    if code == "uint" and nbits == 1:
        code = "bool"
    return DataType(code, nbits, int(lanes) if lanes else 1)


def parse_dtype(dtype) -> DataType:
    """Parse anything that names a dtype: a string, a DataType, a numpy dtype or a Python type."""
    if isinstance(dtype, DataType):
        return dtype
    if isinstance(dtype, str):
        return _parse(dtype)
    if dtype is bool:
        return _parse("bool")
    if dtype is int:
        return _parse("int64")
    if dtype is float:
        return _parse("float32")
    try:
        npd = np.dtype(dtype)
    except TypeError:
        npd = None
    if npd is not None:
        if npd == np.bool_:
            return _parse("bool")
        return _parse(str(npd))
    # torch dtypes and similar: their str is 'torch.float32'
    text = str(dtype)
    if "." in text:
        return _parse(text.rsplit(".", 1)[1])
    raise DataTypeError(f"cannot interpret {dtype!r} as a dtype")


def dtype_str(dtype) -> str:
    """Canonical string of a dtype-like value."""
    return str(parse_dtype(dtype))


def nbytes(shape, dtype) -> int | None:
    """Bytes of a dense tensor of ``shape`` (ints, or IntImms) and ``dtype`` (anything :func:`parse_dtype`
    reads): the element count times :attr:`DataType.itemsize` (vector lanes and bfloat16 included, bool one
    byte). None when a dimension is not a constant."""
    n = 1
    for d in shape:
        v = getattr(d, "value", d)
        if not isinstance(v, (int, np.integer)):
            return None
        n *= int(v)
    return n * parse_dtype(dtype).itemsize
