"""kiln.tir: the loop-level IR (TVM's ``tvm.tir``)."""
from .expr import (PrimExpr, Var, SizeVar, IntImm, FloatImm, StringImm, Cast, Add, Sub, Mul, Div, Mod,
                   FloorDiv, FloorMod, Min, Max, EQ, NE, LT, LE, GT, GE, And, Or, Not, Select as _SelectNode,
                   BufferLoad, ProducerLoad, Ramp, Broadcast, Shuffle, Let, Call, CommReducer, Reduce, Any,
                   CallEffectKind, Range, IterVar, EqualOp, NotEqualOp, BinaryOpExpr, CmpExpr)
from .stmt import (Stmt, ForKind, LetStmt, AttrStmt, AssertStmt, BufferStore, BufferRealize, ProducerStore,
                   ProducerRealize, Allocate, DeclBuffer, For, While, IfThenElse, SeqStmt, Evaluate, Prefetch,
                   stmt_seq, stmt_list)
from .buffer import Buffer, decl_buffer
from .function import PrimFunc
from .op import (const, convert, cast, add, sub, mul, neg, truncdiv, truncmod, floordiv, floormod, ceildiv, div,
                 indexdiv, indexmod, min, max, equal, not_equal, less, less_equal, greater, greater_equal,
                 logical_and, logical_or, logical_not, all, any, bitwise_and, bitwise_or, bitwise_xor,
                 bitwise_not, shift_left, shift_right, if_then_else, likely, exp, exp2, exp10, log, log2,
                 log10, log1p, expm1, sqrt, rsqrt, sin, cos, tan, sinh, cosh, tanh, asin, acos, atan, asinh,
                 acosh, atanh, erf, sigmoid, floor, ceil, trunc, round, nearbyint, abs, isnan, isinf,
                 isfinite, power, pow, fmod, atan2, popcount, reinterpret, call_intrin, call_pure_extern,
                 call_extern, call_packed, ret, min_value, max_value, infinity, comm_reducer, sum)
from .op import Select
from . import stmt_functor
from .assert_message import assert_message


_LAZY_SUBMODULES = ("transform", "analysis", "interpreter", "printer", "ir_builder")


def __getattr__(name):
    """``tir.transform`` / ``tir.analysis`` / ``tir.interpreter`` load on first use (they import kiln.arith)."""
    if name in _LAZY_SUBMODULES:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
