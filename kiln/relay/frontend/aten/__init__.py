"""The aten op table shared by the TorchScript and torch.export importers (see ``registry``)."""
from .registry import ATEN_CONVERTERS, AtenContext, is_supported, lookup, register
from . import math, tensor, nn, math_more, tensor_more, transformer, search, loss, grid_sample, spectral, dynamic, vision  # noqa: F401  (registers the converters)
from . import quantized, quantized_dynamic  # noqa: F401,E402  (wraps some of the converters above: import last)
from . import script  # noqa: F401,E402  (wraps list/number converters for run-time values of scripted models)

__all__ = ["ATEN_CONVERTERS", "AtenContext", "is_supported", "lookup", "register"]
