"""Vision ops (TVM's ``topi.vision``): ROI align (``rcnn``), non-maximum suppression (``nms``, all-class NMS and
``get_valid_counts``) and the SSD box ops (``ssd``)."""
from . import rcnn, ssd  # noqa: F401
from .rcnn import *  # noqa: F401,F403
from .nms import non_max_suppression  # noqa: F401
from .all_class_nms import all_class_non_max_suppression, get_valid_counts  # noqa: F401
