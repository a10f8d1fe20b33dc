"""Quantized PyTorch ops (``torch.ao.quantization`` eager-mode models, traced): ``quantized::conv2d(_relu)``,
``quantized::linear(_relu)``, ``quantized::add(_relu)``, ``quantized::mul``, ``quantized::cat``,
``aten::quantize_per_tensor``, ``aten::dequantize``, and the aten ops that act on quantized tensors (relu,
max/avg/adaptive-avg pooling, flatten/reshape/view, ...).

A quantized tensor is a Relay uint8/int8 tensor; its scale and zero point (Python numbers, fixed when the model
was converted) live in a table on the converter context, keyed by the expression. Packed weights are unpacked
with ``torch.ops.quantized.conv2d_unpack`` / ``linear_unpack``; the float bias is quantized to int32 at scale
``input_scale * weight_scale`` (zero point 0), as TVM's PyTorch frontend does.
"""
from __future__ import annotations

import numpy as np

from ....error import FrontendError
from .registry import ATEN_CONVERTERS, register
from ... import op
from ...qnn import op as qnn_op
from ...expr import Expr, const, Var

_QDTYPES = {"quint8": "uint8", "qint8": "int8", "qint32": "int32"}


def _op():
    return op


def _qnn():
    return qnn_op


def _table(ctx) -> dict:
    table = getattr(ctx, "_qnn_params", None)
    if table is None:
        table = ctx._qnn_params = {}
    return table


def _set_q(ctx, expr, scale: float, zp: int):
    _table(ctx)[expr] = (float(scale), int(zp))
    return expr


def _get_q(ctx, expr):
    q = _table(ctx).get(expr) if isinstance(expr, Expr) else None
    if q is None:
        raise FrontendError(f"{ctx.op_name}: the input is not a quantized tensor kiln knows the scale and zero "
                            "point of (quantize it with torch.quantize_per_tensor / QuantStub first)")
    return q


def _is_q(ctx, expr) -> bool:
    return isinstance(expr, Expr) and expr in _table(ctx)


def _f32(v):
    return const(np.float32(v))


def _i32(v):
    return const(np.int32(v))


def _number(ctx, v, what):
    """A Python number from a number, a constant, or a model attribute (FX-converted models keep scales and
    zero points as tensor attributes, which the importer turns into parameters)."""
    if isinstance(v, Var):
        value = getattr(ctx, "param_values", {}).get(v.name_hint)
        if value is not None and np.size(value) == 1:
            return np.asarray(value).reshape(()).item()
    return ctx.scalar(v, what)


# -- quantize / dequantize --------------------------------------------------------------------------------------
@register("quantize_per_tensor")
def quantize_per_tensor(ctx, args):
    x, scale, zp, dtype = args[0], args[1], args[2], args[3]
    out_dtype = _QDTYPES.get(str(dtype))
    if out_dtype is None:
        raise FrontendError(f"quantize_per_tensor: dtype {dtype} is not a quantized dtype (quint8, qint8, qint32)")
    scale = float(_number(ctx, scale, "scale"))
    zp = int(_number(ctx, zp, "zero_point"))
    return _set_q(ctx, _qnn().quantize(ctx.cast(x, "float32"), _f32(scale), _i32(zp), out_dtype=out_dtype),
                  scale, zp)


@register("dequantize")
def dequantize(ctx, args):
    x = args[0]
    if isinstance(x, (list, tuple)):
        return [dequantize(ctx, [v]) for v in x]
    scale, zp = _get_q(ctx, x)
    return _qnn().dequantize(x, _f32(scale), _i32(zp))


# -- packed weights ---------------------------------------------------------------------------------------------
def _weight(w):
    """(int8 numpy weight, scale (float or per-channel array), zero point (int or array), channel axis)."""
    import torch
    wq = w.int_repr().numpy()
    if w.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
        return (wq, w.q_per_channel_scales().numpy().astype("float32"),
                w.q_per_channel_zero_points().numpy().astype("int32"), int(w.q_per_channel_axis()))
    return wq, np.float32(w.q_scale()), np.int32(w.q_zero_point()), 0


def _bias(ctx, b, in_scale, w_scale):
    if b is None:
        return None
    bf = b.detach().numpy().astype(np.float64)
    scale = np.float64(np.float32(in_scale)) * np.asarray(w_scale, np.float64)
    return const(np.round(bf / scale).astype("int32"))


def _relu_q(x, zp):
    return _op().maximum(x, const(np.asarray(zp).astype(x.checked_type.dtype if hasattr(x, "_checked_type_")
                                                        and x._checked_type_ is not None else "uint8")))


def _requantize(ctx, acc, in_scale, w_scale, out_scale, out_zp, out_dtype, relu, axis):
    scale = np.float32(in_scale) * np.asarray(w_scale, np.float32)
    y = _qnn().requantize(acc, const(scale.astype("float32")), _i32(0), _f32(out_scale), _i32(out_zp),
                          axis=axis if np.ndim(scale) else -1, out_dtype=out_dtype)
    if relu:
        y = _op().maximum(y, const(np.asarray(out_zp).astype(out_dtype)))
    return _set_q(ctx, y, out_scale, out_zp)


def _conv(relu):
    def convert(ctx, args):
        import torch
        x, packed, out_scale, out_zp = args[0], args[1], args[2], args[3]
        in_scale, in_zp = _get_q(ctx, x)
        w, b = torch.ops.quantized.conv2d_unpack(packed)
        wq, w_scale, w_zp, axis = _weight(w)
        if axis != 0:
            raise FrontendError(f"{ctx.op_name}: weights quantized per channel along axis {axis} (kiln expects 0)")
        if packed.transpose():
            raise FrontendError(f"{ctx.op_name}: quantized transposed convolution is not supported yet")
        pad = list(packed.padding())
        acc = _qnn().conv2d(x, const(wq), _i32(in_zp), const(w_zp), _f32(in_scale), const(w_scale),
                            kernel_size=wq.shape[2:], channels=wq.shape[0], strides=list(packed.stride()),
                            padding=pad, dilation=list(packed.dilation()), groups=int(packed.groups()))
        bias = _bias(ctx, b, in_scale, w_scale)
        if bias is not None:
            acc = _op().nn.bias_add(acc, bias, axis=1)
        return _requantize(ctx, acc, in_scale, w_scale, _number(ctx, out_scale, "scale"),
                           _number(ctx, out_zp, "zero_point"), ctx.dtype(x), relu, 1)
    return convert


register("quantized::conv2d")(_conv(False))
register("quantized::conv2d_relu")(_conv(True))


def _linear(relu):
    def convert(ctx, args):
        import torch
        x, packed, out_scale, out_zp = args[0], args[1], args[2], args[3]
        in_scale, in_zp = _get_q(ctx, x)
        w, b = torch.ops.quantized.linear_unpack(packed)
        wq, w_scale, w_zp, _ = _weight(w)
        shape = ctx.shape(x)
        x2 = _op().reshape(x, [-1, shape[-1]]) if len(shape) != 2 else x
        acc = _qnn().dense(x2, const(wq), _i32(in_zp), const(w_zp), _f32(in_scale), const(w_scale),
                           units=wq.shape[0])
        bias = _bias(ctx, b, in_scale, w_scale)
        if bias is not None:
            acc = _op().nn.bias_add(acc, bias, axis=1)
        y = _requantize(ctx, acc, in_scale, w_scale, _number(ctx, out_scale, "scale"),
                        _number(ctx, out_zp, "zero_point"), ctx.dtype(x), relu, 1)
        if len(shape) != 2:
            y = _set_q(ctx, _op().reshape(y, list(shape[:-1]) + [wq.shape[0]]), *_get_q(ctx, y))
        return y
    return convert


register("quantized::linear")(_linear(False))
register("quantized::linear_relu")(_linear(True))


# -- elementwise and concatenation -------------------------------------------------------------------------------
def _binary(name, relu):
    def convert(ctx, args):
        a, b = args[0], args[1]
        scale, zp = _number(ctx, args[2], "scale"), _number(ctx, args[3], "zero_point")
        (sa, za), (sb, zb) = _get_q(ctx, a), _get_q(ctx, b)
        y = getattr(_qnn(), name)(a, b, _f32(sa), _i32(za), _f32(sb), _i32(zb), _f32(scale), _i32(zp))
        if relu:
            y = _op().maximum(y, const(np.asarray(zp).astype(ctx.dtype(a))))
        return _set_q(ctx, y, scale, zp)
    return convert


register("quantized::add")(_binary("add", False))
register("quantized::add_relu")(_binary("add", True))
register("quantized::mul")(_binary("mul", False))
register("quantized::mul_relu")(_binary("mul", True))


@register("quantized::cat")
def quantized_cat(ctx, args):
    xs, dim = args[0], args[1]
    scale, zp = _number(ctx, args[2], "scale"), _number(ctx, args[3], "zero_point")
    params = [_get_q(ctx, x) for x in xs]
    axis = int(ctx.scalar(dim)) % ctx.ndim(xs[0])
    y = _qnn().concatenate(list(xs), [_f32(s) for s, _ in params], [_i32(z) for _, z in params], _f32(scale),
                           _i32(zp), axis=axis)
    return _set_q(ctx, y, scale, zp)


# -- aten ops applied to quantized tensors ----------------------------------------------------------------------
def _quantized_aware(name, on_quantized):
    """Wrap the float converter of aten ``name``: a quantized first argument takes ``on_quantized``."""
    float_fn = ATEN_CONVERTERS.get(name)

    def convert(ctx, args):
        if args and _is_q(ctx, args[0]):
            return on_quantized(ctx, args, float_fn)
        if float_fn is None:
            raise FrontendError(f"{name} is only supported on quantized tensors")
        return float_fn(ctx, args)
    ATEN_CONVERTERS[name] = convert


def _same_params(ctx, args, float_fn):
    """Ops that move or select values (layout ops, max pooling): the output keeps the input's parameters."""
    return _set_q(ctx, float_fn(ctx, args), *_get_q(ctx, args[0]))


def _q_relu(ctx, args, float_fn):
    scale, zp = _get_q(ctx, args[0])
    return _set_q(ctx, _op().maximum(args[0], const(np.asarray(zp).astype(ctx.dtype(args[0])))), scale, zp)


def _q_clamp(lo_key: str, hi_key: str, lo_default: float, hi_default: float):
    """hardtanh / relu6 on a quantized tensor: a clamp in the integer domain between the bounds quantized with
    the tensor's own parameters (PyTorch's quantized hardtanh); the parameters are kept."""
    def convert(ctx, args, float_fn):
        scale, zp = _get_q(ctx, args[0])
        dtype = ctx.dtype(args[0])
        info = np.iinfo(dtype)

        def q(v):
            return int(np.clip(zp + np.rint(np.float32(v) / np.float32(scale)), info.min, info.max))
        lo = q(args.get(lo_key, lo_default)) if lo_key else q(lo_default)
        hi = q(args.get(hi_key, hi_default)) if hi_key else q(hi_default)
        y = _op().minimum(_op().maximum(args[0], const(np.asarray(lo).astype(dtype))),
                          const(np.asarray(hi).astype(dtype)))
        return _set_q(ctx, y, scale, zp)
    return convert


def _via_float(ctx, args, float_fn):
    """Averaging ops: dequantize, run the float op, quantize back with the input's parameters."""
    scale, zp = _get_q(ctx, args[0])
    x = args[0]
    xf = _qnn().dequantize(x, _f32(scale), _i32(zp))
    y = float_fn(ctx, [xf] + list(args[1:]))
    return _set_q(ctx, _qnn().quantize(y, _f32(scale), _i32(zp), out_dtype=ctx.dtype(x)), scale, zp)


for _name in ("flatten", "reshape", "view", "contiguous", "dropout", "max_pool2d", "squeeze", "unsqueeze",
              "permute", "transpose", "clone", "feature_dropout", "alpha_dropout", "detach"):
    if _name in ATEN_CONVERTERS:
        _quantized_aware(_name, _same_params)
_quantized_aware("relu", _q_relu)
_quantized_aware("hardtanh", _q_clamp("min_val", "max_val", -1.0, 1.0))
_quantized_aware("relu6", _q_clamp("", "", 0.0, 6.0))
for _name in ("adaptive_avg_pool2d", "avg_pool2d", "mean", "hardswish", "hardsigmoid", "sigmoid"):
    if _name in ATEN_CONVERTERS:
        _quantized_aware(_name, _via_float)
