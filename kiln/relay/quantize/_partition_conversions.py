"""``partition_conversions`` (TVM's split of a quantized module into prefix / middle / suffix functions)
is not built in kiln yet."""
from __future__ import annotations

from ...error import OpNotImplemented


def partition_conversions(mod, quantized_dtypes, ensure_fully_integral):
    raise OpNotImplemented("relay.quantize: qconfig(partition_conversions='enabled' / 'fully_integral') is not "
                           "implemented in kiln (the quantized module is returned whole only with 'disabled')")
