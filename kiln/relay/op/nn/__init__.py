"""Neural-network ops (TVM's ``relay.nn``); importing registers them."""
from . import _nn, _conv_pool, _nn_extra, _nn_3d, _dense_pack, _batch_matmul_pack, _alter_layout, _deformable  # noqa: F401  (registrations)
from .nn import *  # noqa: F401,F403
from .nn import __all__ as _nn_all
from ._dense_pack import contrib_dense_pack  # noqa: F401
from ._batch_matmul_pack import contrib_batch_matmul_pack  # noqa: F401
from ._pool_grad import max_pool2d_grad, avg_pool2d_grad  # noqa: F401
from ._conv1d_transpose import conv1d_transpose  # noqa: F401
from ._cross_entropy import cross_entropy, cross_entropy_with_logits  # noqa: F401
from ._conv2d_backward_weight import conv2d_backward_weight  # noqa: F401

__all__ = list(_nn_all) + ["contrib_dense_pack", "contrib_batch_matmul_pack", "max_pool2d_grad", "avg_pool2d_grad", "conv1d_transpose",
                               "cross_entropy", "cross_entropy_with_logits", "conv2d_backward_weight"]
