"""SSD box ops (TVM's ``topi.vision.ssd``): anchor generation and box decoding."""
from .multibox import multibox_prior, multibox_transform_loc  # noqa: F401
