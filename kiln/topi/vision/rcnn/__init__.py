"""Region-based CNN ops (TVM's ``topi.vision.rcnn``)."""
from .roi_align import roi_align_nchw  # noqa: F401

__all__ = ["roi_align_nchw"]
