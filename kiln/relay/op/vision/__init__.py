"""Vision ops (TVM's ``relay.vision``); importing registers them."""
from . import _vision, _nms_more, _multibox  # noqa: F401
from .vision import (all_class_non_max_suppression, get_valid_counts, non_max_suppression,  # noqa: F401
                     roi_align)
from .multibox import multibox_prior, multibox_transform_loc  # noqa: F401

__all__ = ["roi_align", "non_max_suppression", "get_valid_counts", "all_class_non_max_suppression",
           "multibox_prior", "multibox_transform_loc"]
