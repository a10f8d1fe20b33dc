"""Neural-network operators (TVM's ``topi.nn``)."""
from .conv2d import (conv2d, conv2d_nchw, conv2d_nhwc, conv2d_transpose_nchw, depthwise_conv2d_nchw,
                     depthwise_conv2d_nhwc, group_conv2d_nchw, group_conv2d_nhwc, group_conv2d_transpose_nchw)
from .dense import batch_matmul, dense, matmul
from .dilate import dilate
from .elemwise import leaky_relu, prelu, relu
from .norm import batch_norm, group_norm, instance_norm, layer_norm
from .pad import edge_pad, mirror_pad, pad
from .pooling import (adaptive_pool, adaptive_pool1d, adaptive_pool3d, global_pool, pool1d, pool2d, pool3d,
                      pool_impl_nd)
from .pool_grad import pool_grad
from .softmax import fast_softmax, log_softmax, softmax
from .upsampling import upsampling
from .utils import get_pad_tuple, get_pad_tuple1d, infer_pad
from .conv1d import conv1d, conv1d_ncw, conv1d_transpose_ncw, group_conv1d_ncw, group_conv1d_transpose_ncw
from .depth_to_space import depth_to_space, space_to_depth
from .norm_extra import instance_norm_nd, l2_normalize, lrn
from .conv3d import conv3d_ncdhw, conv3d_transpose_ncdhw, group_conv3d_ncdhw, group_conv3d_transpose_ncdhw
from .deformable_conv2d import deformable_conv2d_nchw
from .conv2d_backward_weight import conv2d_backward_weight_nchw
