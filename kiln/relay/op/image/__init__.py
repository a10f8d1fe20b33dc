"""Image ops (TVM's ``relay.image``); importing registers them."""
from . import _image  # noqa: F401
from .image import resize2d  # noqa: F401

__all__ = ["resize2d"]
