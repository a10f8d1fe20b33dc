"""Vision ops (TVM's ``topi.vision``): ROI align (``rcnn``) and non-maximum suppression (``nms``)."""
from . import rcnn  # noqa: F401
from .rcnn import *  # noqa: F401,F403
from .nms import non_max_suppression  # noqa: F401
