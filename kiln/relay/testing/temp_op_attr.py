"""Temporarily replace an attribute of an op (TVM's ``relay.testing.temp_op_attr.TempOpAttr``)."""
from __future__ import annotations

from ...ir.op import Op


class TempOpAttr:
    """``with TempOpAttr("nn.conv2d", "FTVMLegalize", fn): ...`` sets the attribute inside the block only."""

    def __init__(self, op_name: str, attr_key: str, attr_value):
        self.op = Op.get(op_name)
        self.attr_key = attr_key
        self.attr_value = attr_value
        self.older = None

    def __enter__(self):
        self.older = self.op._attrs.get(self.attr_key)
        self.op.set_attr(self.attr_key, self.attr_value, 10, _replace=True)
        return self

    def __exit__(self, *exc):
        self.op.reset_attr(self.attr_key)
        if self.older is not None:
            self.op.set_attr(self.attr_key, self.older[0], self.older[1], _replace=True)
