"""The realize pass (TVM's ``relay.quantize.realize``): the simulated graph becomes an integer graph.

Each value in a quantized section is carried as ``QRealizeIntExpr(data, dom_scale, dtype)``: integer
``data`` whose real value is ``data * dom_scale``. A simulated_quantize becomes: from float,
``clip(round(x / s))``; from an integer value, a rescale to the new scale (a right shift with a rounding
bias when the ratio is a power of two, else a fixed-point multiply in int64) and a clip. conv2d and
dense take int8 data and weights and accumulate in int32 (``out_dtype``), their scale the product of
the two; add brings both sides to the smaller scale; max pooling runs on int8. Where a value leaves the
quantized section, it is cast back to float32 and multiplied by its scale.
"""
from __future__ import annotations

import math

import numpy as np

from ...error import RelayError
from ...ir.op import Op, register_op_attr
from ..expr import Call, Tuple
from ..transform.function_pass import function_pass
from ._ops import SIMULATED_QUANTIZE, stop_fusion
from ._rewrite import TempExpr, forward_rewrite
from ._util import const, forward_op, scalar_of
from .qconfig import QAnnotateKind, current_qconfig


def _call(name, args, **attrs):
    op = Op.get(name)
    return Call(op, list(args), op.make_attrs(**attrs) if (attrs or op.attrs_type is not None) else None)


def _cast(x, dtype):
    return _call("cast", [x], dtype=dtype)


def _clip(x, lo, hi):
    return _call("clip", [x], a_min=float(lo), a_max=float(hi))


class QRealizeIntExpr(TempExpr):
    """Integer ``data`` standing for ``data * dom_scale``, of dtype ``dtype``."""

    def __init__(self, data, dom_scale, dtype: str):
        self.data = data
        self.dom_scale = dom_scale
        self.dtype = dtype

    def realize(self):
        return _call("multiply", [_cast(self.data, "float32"), self.dom_scale])


def _fixed_point_multiplier_shift(multiplier: float):
    """``multiplier = significand * 2**(shift - 31)`` with an int32 significand (TVM's qnn helper)."""
    if multiplier == 0:
        return 0, 0
    significand, exponent = math.frexp(multiplier)
    q = int(round(significand * (1 << 31)))
    if q == (1 << 31):
        q //= 2
        exponent += 1
    return q, exponent


def fixed_point_multiply(data, multiplier: float, rounding: str):
    """``round(data * multiplier)`` in int64 integer arithmetic (TVM's ``qnn::FixedPointMultiply``)."""
    data = _cast(data, "int64")
    fixed, shift = _fixed_point_multiplier_shift(multiplier)
    left, right = (shift, 0) if shift > 0 else (0, -shift)
    if left:
        data = _call("left_shift", [data, const(left, "int64")])
    data = _call("multiply", [data, const(fixed, "int64")])
    total_right = right + 31
    pos = 1 << (total_right - 1)
    if rounding == "UPWARD":
        data = _call("add", [data, const(pos, "int64")])
    else:  # TONEAREST: ties away from zero
        neg = pos - 1
        data = _call("add", [data, _call("where", [_call("greater_equal", [data, const(0, "int64")]),
                                                   const(pos, "int64"), const(neg, "int64")])])
    return _call("right_shift", [data, const(total_right, "int64")])


def _mul_and_div(data, s1: float, s2: float, dtype: str):
    """``data * s1 / s2`` with s1 >= s2 (a shift when the ratio is a power of two)."""
    cfg = current_qconfig()
    if s1 == s2:
        return data
    factor = s1 / s2
    shift = math.log2(factor)
    if shift <= 0:
        raise RelayError(f"relay.quantize realize: rescale by {factor} < 1 where an increase was expected")
    if float(int(shift)) == shift:
        return _call("left_shift", [data, const(int(shift), dtype)])
    if float(int(factor)) == factor:
        return _call("multiply", [data, const(int(factor), dtype)])
    return _cast(fixed_point_multiply(data, factor, cfg.rounding), dtype)


def register_realize_function(op_name: str, frewrite=None, level: int = 10):
    """Register ``frewrite(ref_call, new_args, ctx)`` as ``op_name``'s realize rule."""
    return register_op_attr(op_name, "FQRealizeRewrite", frewrite, level)


def _any_temp(args):
    return any(isinstance(a, TempExpr) for a in args)


@register_realize_function(SIMULATED_QUANTIZE)
def quantize_realize(ref_call, new_args, ctx):
    cfg = current_qconfig()
    if ref_call.attrs.rounding != "round":
        raise RelayError(f"relay.quantize realize: simulated_quantize rounding {ref_call.attrs.rounding!r} "
                         "cannot be realized (only 'round')")
    if int(ref_call.attrs.kind) == QAnnotateKind.IDENTITY:
        return new_args[0]
    dom_scale = new_args[1]
    clip_min, clip_max = scalar_of(new_args[2]), scalar_of(new_args[3])
    odom = scalar_of(dom_scale)
    x = new_args[0]
    if isinstance(x, QRealizeIntExpr):
        data = x.data
        idom = scalar_of(x.dom_scale)
        if idom == odom:
            return QRealizeIntExpr(_clip(data, clip_min, clip_max), dom_scale, x.dtype)
        shift = math.log2(odom / idom)
        if float(int(shift)) == shift:
            shift = int(shift)
            if shift > 0:
                if cfg.round_for_shift:
                    data = _call("add", [data, const(1 << (shift - 1), x.dtype)])
                data = _call("right_shift", [data, const(shift, x.dtype)])
            else:
                data = _call("left_shift", [data, const(-shift, x.dtype)])
            return QRealizeIntExpr(_clip(data, clip_min, clip_max), dom_scale, x.dtype)
        data = fixed_point_multiply(data, idom / odom, cfg.rounding)
        return QRealizeIntExpr(_cast(_clip(data, clip_min, clip_max), x.dtype), dom_scale, x.dtype)
    if isinstance(x, TempExpr):
        x = x.realize()
    scaled = _call("multiply", [x, const(np.float32(1.0 / odom), "float32")])
    return QRealizeIntExpr(_clip(_call("round", [scaled]), clip_min, clip_max), dom_scale, "float32")


def _dom_product(lhs, rhs):
    return const(np.float32(scalar_of(lhs.dom_scale) * scalar_of(rhs.dom_scale)), "float32")


def _with_out_dtype(attrs, dtype):
    return type(attrs)(**{**dict(attrs.items()), "out_dtype": dtype})


def _weighted_realize(ref_call, new_args, ctx):
    """conv2d / conv1d / dense: int8 x int8 with int32 (dtype_activation) accumulation."""
    cfg = current_qconfig()
    lhs, rhs = new_args
    if not (isinstance(lhs, QRealizeIntExpr) and isinstance(rhs, QRealizeIntExpr)):
        return None
    ldata = lhs.data if lhs.dtype == cfg.dtype_input else _cast(lhs.data, cfg.dtype_input)
    rdata = _cast(rhs.data, cfg.dtype_weight)
    attrs = _with_out_dtype(ref_call.attrs, cfg.dtype_activation)
    out = Call(ref_call.op, [ldata, rdata], attrs, ref_call.type_args, ref_call.span)
    return QRealizeIntExpr(out, _dom_product(lhs, rhs), cfg.dtype_activation)


for _name in ("nn.conv2d", "nn.conv1d", "nn.dense"):
    register_realize_function(_name, _weighted_realize)


@register_realize_function("nn.batch_matmul")
def batch_matmul_realize(ref_call, new_args, ctx):
    cfg = current_qconfig()
    lhs, rhs = new_args
    if not (isinstance(lhs, QRealizeIntExpr) and isinstance(rhs, QRealizeIntExpr)):
        return None
    ldata = lhs.data if lhs.dtype == cfg.dtype_input else _cast(lhs.data, cfg.dtype_input)
    rdata = rhs.data if rhs.dtype == cfg.dtype_input else _cast(rhs.data, cfg.dtype_input)
    attrs = _with_out_dtype(ref_call.attrs, cfg.dtype_activation)
    out = Call(ref_call.op, [ldata, rdata], attrs, ref_call.type_args, ref_call.span)
    return QRealizeIntExpr(out, _dom_product(lhs, rhs), cfg.dtype_activation)


@register_realize_function("multiply")
def mul_realize(ref_call, new_args, ctx):
    cfg = current_qconfig()
    lhs, rhs = new_args
    if isinstance(lhs, QRealizeIntExpr) and isinstance(rhs, QRealizeIntExpr):
        dtype = cfg.dtype_activation
        ldata = lhs.data if lhs.dtype == dtype else _cast(lhs.data, dtype)
        rdata = rhs.data if rhs.dtype == dtype else _cast(rhs.data, dtype)
        return QRealizeIntExpr(forward_op(ref_call, [ldata, rdata]), _dom_product(lhs, rhs), dtype)
    return None


def _unify_dtype_scale(ref_args, args, dtype=None):
    """Bring ``args`` (QRealizeIntExprs) to one dtype and the smallest of their scales."""
    cfg = current_qconfig()
    if dtype is None:
        dtype = cfg.dtype_input if len(args) == 2 and args[1].dtype == cfg.dtype_input else cfg.dtype_activation
    out = []
    for ref, a in zip(ref_args, args):
        data = a.data
        if a.dtype != dtype:
            data = _cast(data, dtype)
        elif (isinstance(ref, Call) and getattr(ref.op, "name", None) == SIMULATED_QUANTIZE
              and int(ref.attrs.kind) == QAnnotateKind.INPUT):
            # store the shared input as int8 across the fusion boundary
            data = _cast(stop_fusion(_cast(data, cfg.dtype_input)), dtype)
        out.append(data)
    scales = [scalar_of(a.dom_scale) for a in args]
    s = min(scales)
    out = [_mul_and_div(d, cur, s, dtype) for d, cur in zip(out, scales)]
    return out, dtype, const(np.float32(s), "float32")


@register_realize_function("add")
def add_realize(ref_call, new_args, ctx):
    if isinstance(new_args[0], QRealizeIntExpr) and isinstance(new_args[1], QRealizeIntExpr):
        cfg = current_qconfig()
        args, dtype, dom_scale = _unify_dtype_scale(ref_call.args, new_args, cfg.dtype_activation)
        args = [stop_fusion(a) if n.dtype == "float32" else a for a, n in zip(args, new_args)]
        return QRealizeIntExpr(forward_op(ref_call, args), dom_scale, dtype)
    return None


@register_realize_function("clip")
def clip_realize(ref_call, new_args, ctx):
    x = new_args[0]
    if isinstance(x, QRealizeIntExpr):
        s = scalar_of(x.dom_scale)
        out = _clip(x.data, ref_call.attrs.a_min / s, ref_call.attrs.a_max / s)
        return QRealizeIntExpr(out, x.dom_scale, x.dtype)
    return None


@register_realize_function("concatenate")
def concatenate_realize(ref_call, new_args, ctx):
    tup, ref_tup = new_args[0], ref_call.args[0]
    if not isinstance(tup, Tuple) or not isinstance(ref_tup, Tuple):
        return None
    if not all(isinstance(f, QRealizeIntExpr) for f in tup.fields):
        return None
    args, dtype, dom_scale = _unify_dtype_scale(ref_tup.fields, tup.fields)
    return QRealizeIntExpr(forward_op(ref_call, [Tuple(args)]), dom_scale, dtype)


def identity_realize(ref_call, new_args, ctx):
    x = new_args[0]
    if isinstance(x, QRealizeIntExpr):
        return QRealizeIntExpr(forward_op(ref_call, [x.data] + list(new_args[1:])), x.dom_scale, x.dtype)
    return None


for _name in ("nn.relu", "reshape", "strided_slice", "annotation.stop_fusion", "transpose", "nn.batch_flatten"):
    register_realize_function(_name, identity_realize)


def _realize_in(ref_call, new_args, dtype_field: str):
    """The op on its quantized input cast to the qconfig's ``dtype_field`` dtype, at the input's scale."""
    dtype = getattr(current_qconfig(), dtype_field)
    x = new_args[0]
    if isinstance(x, QRealizeIntExpr):
        data = x.data if x.dtype == dtype else _cast(x.data, dtype)
        return QRealizeIntExpr(forward_op(ref_call, [data]), x.dom_scale, dtype)
    return None


def cast_dtype_input_realize(ref_call, new_args, ctx):
    """max pooling on the int8 value itself."""
    return _realize_in(ref_call, new_args, "dtype_input")


register_realize_function("nn.max_pool2d", cast_dtype_input_realize)
register_realize_function("nn.max_pool1d", cast_dtype_input_realize)


def avg_pool_realize(ref_call, new_args, ctx):
    """average pooling sums in the activation dtype (int32)."""
    return _realize_in(ref_call, new_args, "dtype_activation")


register_realize_function("nn.avg_pool2d", avg_pool_realize)
register_realize_function("nn.global_avg_pool2d", avg_pool_realize)


@register_realize_function("annotation.cast_hint")
def cast_hint_realize(ref_call, new_args, ctx):
    x = new_args[0]
    if isinstance(x, QRealizeIntExpr):
        dtype = ref_call.attrs.dtype
        data = x.data if x.dtype == dtype else _cast(x.data, dtype)
        return QRealizeIntExpr(data, x.dom_scale, dtype)
    return None


def realize():
    """The QuantizeRealize function pass."""
    def transform(func, mod, ctx):
        return forward_rewrite(func, "FQRealizeRewrite")
    return function_pass(transform, opt_level=1, name="QuantizeRealize")
