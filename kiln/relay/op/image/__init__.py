"""Image ops (TVM's ``relay.image``); importing registers them."""
from . import _image  # noqa: F401
from .image import resize1d, resize2d, resize3d  # noqa: F401

__all__ = ["resize2d"]
