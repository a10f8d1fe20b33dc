"""TVM's ``topi.cuda``: the GPU schedules of :mod:`kiln.topi.gpu` under their CUDA names (no CUDA backend
in kiln: lowering works, building for ``cuda`` raises)."""
from ..gpu import (  # noqa: F401
    schedule_injective, schedule_reduce, schedule_softmax, dense_small_batch, schedule_dense_small_batch,
    dense_large_batch, schedule_dense_large_batch,
)

schedule_elemwise = schedule_injective
schedule_broadcast = schedule_injective

__all__ = ["schedule_injective", "schedule_elemwise", "schedule_broadcast", "schedule_reduce", "schedule_softmax",
           "dense_small_batch", "schedule_dense_small_batch", "dense_large_batch", "schedule_dense_large_batch"]
