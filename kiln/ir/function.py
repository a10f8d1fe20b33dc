"""BaseFunc: what an IRModule maps a GlobalVar to (a Relay Function or a TIR PrimFunc)."""
from __future__ import annotations

import enum

from .expr import RelayExpr
from .attrs import DictAttrs


class CallingConv(enum.IntEnum):
    """How a function is called (TVM's ``tvm.ir.CallingConv``)."""

    DEFAULT = 0
    C_PACKED_FUNC = 1
    DEVICE_KERNEL_LAUNCH = 2


class BaseFunc(RelayExpr):
    """Base class of functions; carries ``attrs`` (a DictAttrs)."""

    def with_attr(self, attr_key_or_dict, attr_value=None):
        """A copy with attributes added (``func.with_attr("Primitive", 1)``)."""
        d = dict(self.attrs.items()) if self.attrs is not None else {}
        if isinstance(attr_key_or_dict, dict):
            d.update(attr_key_or_dict)
        else:
            d[attr_key_or_dict] = attr_value
        return self.with_fields(attrs=DictAttrs(d))

    def without_attr(self, attr_key: str):
        d = dict(self.attrs.items()) if self.attrs is not None else {}
        d.pop(attr_key, None)
        return self.with_fields(attrs=DictAttrs(d))
