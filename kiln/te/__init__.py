"""kiln.te: tensor expressions and schedules (TVM's ``tvm.te``).

    from kiln import te
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=64)
    func = te.schedule_to_primfunc(s, [A, B], name="double")
"""
from ..tir.op import (  # noqa: F401 - re-exports, as tvm.te does
    sum, min, max, comm_reducer, exp, exp2, exp10, log, log2, log10, log1p, expm1, sqrt, rsqrt, sin, cos, tan,
    sinh, cosh, tanh, asin, acos, atan, asinh, acosh, atanh, erf, sigmoid, pow, power, abs, floor, ceil,
    round, trunc, nearbyint, isnan, isinf, isfinite, fmod, atan2, popcount, if_then_else, floordiv, floormod,
    truncdiv, truncmod, indexdiv, indexmod, div, all, any, min_value, max_value, cast, Select,
)
from ..tir.op import const as _tir_const  # noqa: F401
from .tensor import Tensor, TensorSlice, Operation, PlaceholderOp, ComputeOp, ExternOp
from .operation import (var, size_var, const, placeholder, compute, extern, reduce_axis, thread_axis,
                        tag_scope, TagScope, create_prim_func, decl_tensor_intrin)
from .scan import scan, ScanOp
from .tensor_intrin import TensorIntrin
from .tensor_compute import TensorComputeOp, TensorIntrinCall
from .schedule import (Schedule, Stage, create_schedule, Split, Fuse, Rebase, Singleton, IterVarAttr,
                       IterVarRelation)
from .lower import schedule_to_primfunc
from .bound import infer_bound

__all__ = [
    "Tensor", "TensorSlice", "Operation", "PlaceholderOp", "ComputeOp", "ExternOp", "TensorComputeOp", "TensorIntrin",
    "TensorIntrinCall",
    "var", "size_var", "const", "placeholder", "compute", "extern", "reduce_axis", "thread_axis", "tag_scope",
    "Schedule", "Stage", "create_schedule", "schedule_to_primfunc", "infer_bound",
    "sum", "min", "max", "comm_reducer", "if_then_else", "floordiv", "floormod", "truncdiv", "truncmod",
    "indexdiv", "indexmod", "all", "any",
]
