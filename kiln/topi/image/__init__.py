"""Image operators (TVM's ``topi.image``)."""
from .resize import resize1d, resize2d, resize3d, get_inx, get_closest_index
