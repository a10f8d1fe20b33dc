"""Numpy reference implementations of operators, under the names TVM's ``tvm.topi.testing`` uses.

Tests compare compiled kernels (and the Relay debug interpreter) against these.
"""
from .common import get_pad_tuple
from .conv import (conv1d_ncw_python, conv3d_ncdhw_python, conv3d_transpose_ncdhw_python, conv2d_hwcn_python, conv2d_nchw_python, conv2d_nhwc_python,
                   conv2d_transpose_nchw_python, conv2d_transpose_nhwc_python, depthwise_conv2d_python_nchw,
                   depthwise_conv2d_python_nhwc, dilate_python)
from .pool import adaptive_pool, pool1d_ncw_python, pool2d_python, pool3d_ncdhw_python, poolnd_python
from .nn import (batch_matmul, batch_norm, dense, dense_python, group_norm_python, instance_norm_python,
                 l2_normalize_python, layer_norm_python, log_softmax_python, lrn_python, matmul_python,
                 softmax_python)
from .transform import (gather_nd_python, gather_python, layout_transform_python, one_hot, sequence_mask,
                        slice_axis_python, strided_set_python, strided_slice_python, take_python)
from .resize import (bilinear_resize_python, resize1d_python, resize2d_python, resize3d_python,
                     upsampling_python)
from .layout import dense_pack_weight_python, layout_transform_numpy, parse_layout
from .te_run import run_te
from .deformable_conv2d_python import deformable_conv2d_nchw_python
from .conv_backward_weight import conv2d_backward_weight_nchw_python, conv2d_backward_weight_python
from .roi_align_python import roi_align_nchw_python
from .nms_python import non_max_suppression_python
from .all_class_nms_python import all_class_nms_python, get_valid_counts_python  # noqa: F401
