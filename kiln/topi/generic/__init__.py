"""Generic (target-independent CPU) schedules under TVM's ``topi.generic.schedule_*`` names.

Each is a generic function (:func:`kiln.target.generic_func`) whose default is :func:`default_schedule`; a
target's folder registers its own for the target's keys (``topi/x86`` registers the vectorized injective,
reduce, pool, softmax and layer_norm schedules for ``"cpu"``), and a call picks by ``Target.current()``.
"""
from ...target.generic_func import generic_func
from .default import default_schedule, inline_injective, schedule_output_loops


def _make(name):
    def schedule(outs, *args, **kwargs):
        return default_schedule(outs)
    schedule.__name__ = name
    schedule.__qualname__ = name
    schedule.__doc__ = f"Generic CPU schedule for ``{name[len('schedule_'):]}`` outputs (see default_schedule)."
    return generic_func(schedule)


_NAMES = [
    "schedule_injective", "schedule_elemwise", "schedule_broadcast", "schedule_reduce", "schedule_extern",
    "schedule_concatenate",
    "schedule_conv2d_nchw", "schedule_conv2d_nhwc", "schedule_conv2d_nchwc", "schedule_group_conv2d_nchw",
    "schedule_group_conv2d_nhwc", "schedule_depthwise_conv2d_nchw", "schedule_depthwise_conv2d_nhwc",
    "schedule_conv2d_transpose_nchw", "schedule_group_conv2d_transpose_nchw",
    "schedule_dense", "schedule_matmul", "schedule_batch_matmul",
    "schedule_softmax", "schedule_fast_softmax", "schedule_log_softmax",
    "schedule_pool", "schedule_adaptive_pool", "schedule_global_pool",
    "schedule_layer_norm", "schedule_group_norm", "schedule_batch_norm", "schedule_lrn",
    "schedule_conv1d_ncw", "schedule_group_conv1d_ncw", "schedule_argsort", "schedule_sort", "schedule_topk",
    "schedule_scan", "schedule_l2_normalize", "schedule_instance_norm",
    "schedule_conv3d_ncdhw", "schedule_conv3d_transpose_ncdhw", "schedule_scatter",
]
for _n in _NAMES:
    globals()[_n] = _make(_n)


@generic_func
def schedule_injective_from_existing(sch, out):
    """Add the default loop schedule for ``out`` to an existing schedule."""
    schedule_output_loops(sch, out.op)
    return sch
