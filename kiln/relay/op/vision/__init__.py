"""Vision ops (TVM's ``relay.vision``); importing registers them."""
from . import _vision  # noqa: F401
from .vision import non_max_suppression, roi_align  # noqa: F401

__all__ = ["roi_align", "non_max_suppression"]
