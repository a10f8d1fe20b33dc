"""x86 schedules (TVM's ``topi.x86``): blocked GEMM with packed weights, NCHW[x]c convolutions, and vectorized,
parallel injective / reduction schedules. The tunable ones are AutoTVM templates (``dense_pack.x86``,
``batch_matmul.x86``, ``conv2d_NCHWc.x86``, ``depthwise_conv2d_NCHWc.x86``, ``conv2d_NCHWc_winograd.x86``) whose
fallback configs come from the shapes and the target's SIMD width."""
from .dense import dense_pack, schedule_dense_pack, pack_weight
from .batch_matmul import batch_matmul, schedule_batch_matmul
from .conv2d import conv2d_NCHWc, schedule_conv2d_NCHWc, conv2d_nchw, schedule_conv2d_nchw
from .depthwise_conv2d import (depthwise_conv2d_NCHWc, schedule_depthwise_conv2d_NCHWc, depthwise_conv2d_nchw,
                               schedule_depthwise_conv2d_nchw)
from .injective import (schedule_injective, schedule_injective_from_existing, schedule_elemwise, schedule_broadcast,
                        schedule_concatenate, schedule_reduce, schedule_pool, schedule_adaptive_pool,
                        schedule_global_pool, schedule_softmax, schedule_log_softmax, schedule_layer_norm)
from .softmax import softmax_x86
from . import conv2d_alter_op  # noqa: F401
from .conv2d_winograd import (conv2d_NCHWc_winograd, schedule_conv2d_NCHWc_winograd, conv2d_nchw_winograd,
                              schedule_conv2d_nchw_winograd, winograd_weight_transform,
                              schedule_winograd_weight_transform, winograd_matrices)
from .conv2d_int8 import (conv2d_NCHWc_int8, schedule_conv2d_NCHWc_int8, conv2d_nchw_int8,
                          schedule_conv2d_nchw_int8)
from .dense_int8 import dense_int8, schedule_dense_int8
from .dense_int16 import dense_int16, schedule_dense_int16
from .batch_matmul_int16 import batch_matmul_int16, schedule_batch_matmul_int16
from .depthwise_conv2d_int8 import (depthwise_conv2d_NCHWc_int8, schedule_depthwise_conv2d_NCHWc_int8,
                                    depthwise_conv2d_nchw_int8, schedule_depthwise_conv2d_nchw_int8)
from . import fixed_point_int8  # noqa: F401 (registers the requantize helper)
