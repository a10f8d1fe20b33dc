"""Quantized PyTorch ops of static ``torch.ao.quantization`` models (eager mode and quantize_fx, traced):
``quantized::conv2d(_relu)``, ``conv1d(_relu)``, ``conv_transpose1d/2d``, ``linear(_relu)``, onednn's
``conv2d_add(_relu)`` / ``linear_leaky_relu`` / ``linear_tanh``, ``add`` / ``mul`` (``_relu``, tensor and scalar
overloads), ``add_scalar`` / ``mul_scalar``, ``cat``, the activation and normalization ops (hardswish, sigmoid,
leaky_relu, elu, celu, relu6, clamp, batch / layer / group / instance norm), ``aten::quantize_per_tensor`` /
``quantize_per_channel`` / ``dequantize``, and the aten ops that act on quantized tensors (relu, hardtanh,
clamp, pooling, sigmoid / hardsigmoid / tanh with PyTorch's fixed output parameters, layout ops, ...). The
dynamically quantized ops are in ``quantized_dynamic.py``.

A quantized tensor is a Relay uint8/int8 tensor; its scale and zero point (Python numbers, fixed when the model
was converted) live in a table on the converter context, keyed by the expression. Packed weights are unpacked
with ``torch.ops.quantized.conv2d_unpack`` / ``conv_transpose2d_unpack`` / ``linear_unpack``; for the plain
conv / linear the float bias is quantized to int32 at scale ``input_scale * weight_scale`` (zero point 0) and
the result requantized, as TVM's PyTorch frontend does; ops whose PyTorch kernels compute in float between a
dequantize and one quantize (add, mul, the fused onednn ops, the activations) are built that way.
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
    if len(q) != 2:
        raise FrontendError(f"{ctx.op_name}: the input is quantized per channel (aten::quantize_per_channel); "
                            "kiln converts only its dequantize, not quantized ops on per-channel activations")
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


@register("quantize_per_channel")
def quantize_per_channel(ctx, args):
    """A per-channel quantized activation: kiln converts it and its ``dequantize`` (a quantize-dequantize pair);
    the quantized ops take per-tensor activations, as PyTorch's do."""
    x, scales, zps, axis, dtype = args[0], args[1], args[2], int(ctx.scalar(args[3], "axis")), args[4]
    out_dtype = _QDTYPES.get(str(dtype))
    if out_dtype is None or out_dtype == "int32":
        raise FrontendError(f"quantize_per_channel: dtype {dtype} (kiln takes quint8, qint8)")
    values = getattr(ctx, "param_values", {})

    def array(v, what):
        val = values.get(v.name_hint) if isinstance(v, Var) else ctx.value(v)
        if val is None:
            raise FrontendError(f"quantize_per_channel: the {what} must be known when the model is imported")
        return np.asarray(val).reshape(-1)
    scale, zp = array(scales, "scales").astype("float32"), array(zps, "zero points").astype("int32")
    axis = axis % ctx.ndim(x)
    y = _qnn().quantize(ctx.cast(x, "float32"), const(scale), const(zp), axis=axis, out_dtype=out_dtype)
    _table(ctx)[y] = (scale, zp, axis)
    return y


@register("dequantize")
def dequantize(ctx, args):
    x = args[0]
    if isinstance(x, (list, tuple)):
        return [dequantize(ctx, [v]) for v in x]
    q = _table(ctx).get(x) if isinstance(x, Expr) else None
    if q is not None and len(q) == 3:
        scale, zp, axis = q
        return _qnn().dequantize(x, const(scale), const(zp), axis=axis)
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


def _conv_acc(ctx, x, packed, int_bias=True):
    """A packed 2-D convolution on quantized ``x``: (int32 accumulator, input scale, weight scale, float bias
    tensor or None). With ``int_bias`` the bias is added to the accumulator, quantized to int32 at
    ``input_scale * weight_scale`` (as TVM does), and the returned float bias is None."""
    import torch
    in_scale, in_zp = _get_q(ctx, x)
    w, b = torch.ops.quantized.conv2d_unpack(packed)
    wq, w_scale, w_zp, axis = _weight(w)
    if axis != 0:
        raise FrontendError(f"{ctx.op_name}: weights quantized per channel along axis {axis} (kiln expects 0)")
    if packed.transpose():
        raise FrontendError(f"{ctx.op_name}: a transposed convolution's weights in a conv2d op")
    acc = _qnn().conv2d(x, const(wq), _i32(in_zp), const(w_zp), _f32(in_scale), const(w_scale),
                        kernel_size=wq.shape[2:], channels=wq.shape[0], strides=list(packed.stride()),
                        padding=list(packed.padding()), dilation=list(packed.dilation()),
                        groups=int(packed.groups()))
    if int_bias:
        bias = _bias(ctx, b, in_scale, w_scale)
        if bias is not None:
            acc = _op().nn.bias_add(acc, bias, axis=1)
        b = None
    return acc, in_scale, w_scale, b


def _conv(relu):
    def convert(ctx, args):
        x, packed, out_scale, out_zp = args[0], args[1], args[2], args[3]
        acc, in_scale, w_scale, _ = _conv_acc(ctx, x, packed)
        return _requantize(ctx, acc, in_scale, w_scale, _number(ctx, out_scale, "scale"),
                           _number(ctx, out_zp, "zero_point"), ctx.dtype(x), relu, 1)
    return convert


register("quantized::conv2d")(_conv(False))
register("quantized::conv2d_relu")(_conv(True))


def _acc_to_float(acc, in_scale, w_scale, b, axis, ndim):
    """``float(acc) * (input_scale * weight_scale) + bias``: an int32 accumulator back in float (per-channel
    scales and the bias along ``axis`` of an ``ndim``-D result)."""
    scale = np.float32(in_scale) * np.asarray(w_scale, np.float32)
    if np.ndim(scale):
        scale = scale.reshape([-1] + [1] * (ndim - 1 - axis))
    y = _op().multiply(_op().cast(acc, "float32"), const(np.asarray(scale, np.float32)))
    if b is not None:
        y = _op().nn.bias_add(y, const(b.detach().float().numpy()), axis=axis)
    return y


def _conv_add(relu):
    """``quantized::conv2d_add(_relu)(x, accum, packed, scale, zero_point)`` (onednn's fused ConvAdd2d, from
    quantize_fx with the onednn backend config): ``conv(x) + accum`` (and relu) in float, the conv's int32
    result scaled with its float bias added, the accumulator dequantized; quantized once to the output's
    parameters."""
    def convert(ctx, args):
        x, accum, packed = args[0], args[1], args[2]
        scale, zp = float(_number(ctx, args[3], "scale")), int(_number(ctx, args[4], "zero_point"))
        acc, in_scale, w_scale, b = _conv_acc(ctx, x, packed, int_bias=False)
        y = _op().add(_acc_to_float(acc, in_scale, w_scale, b, 1, 4), _dq(ctx, accum))
        if relu:
            y = _op().maximum(y, _f32(0.0))
        return _set_q(ctx, _quantize_recip(y, scale, zp, ctx.dtype(x)), scale, zp)
    return convert


register("quantized::conv2d_add")(_conv_add(False))
register("quantized::conv2d_add_relu")(_conv_add(True))


def _linear_acc(ctx, x, packed, int_bias=True):
    """A packed linear on quantized ``x`` (any rank; flattened to 2-D): (int32 accumulator ``[rows, units]``,
    input scale, weight scale, float bias or None, input shape, units); the bias as in :func:`_conv_acc`."""
    import torch
    in_scale, in_zp = _get_q(ctx, x)
    w, b = torch.ops.quantized.linear_unpack(packed)
    wq, w_scale, w_zp, _ = _weight(w)
    shape = ctx.shape(x)
    x2 = _op().reshape(x, [-1, shape[-1]]) if len(shape) != 2 else x
    acc = _qnn().dense(x2, const(wq), _i32(in_zp), const(w_zp), _f32(in_scale), const(w_scale),
                       units=wq.shape[0])
    if int_bias:
        bias = _bias(ctx, b, in_scale, w_scale)
        if bias is not None:
            acc = _op().nn.bias_add(acc, bias, axis=1)
        b = None
    return acc, in_scale, w_scale, b, shape, wq.shape[0]


def _unflatten_q(ctx, y, shape, units):
    if len(shape) == 2:
        return y
    return _set_q(ctx, _op().reshape(y, list(shape[:-1]) + [units]), *_get_q(ctx, y))


def _linear(relu):
    def convert(ctx, args):
        x, packed, out_scale, out_zp = args[0], args[1], args[2], args[3]
        acc, in_scale, w_scale, _, shape, units = _linear_acc(ctx, x, packed)
        y = _requantize(ctx, acc, in_scale, w_scale, _number(ctx, out_scale, "scale"),
                        _number(ctx, out_zp, "zero_point"), ctx.dtype(x), relu, 1)
        return _unflatten_q(ctx, y, shape, units)
    return convert


def _linear_act(act):
    """``quantized::linear_leaky_relu(x, packed, scale, zero_point, negative_slope)`` / ``linear_tanh(x, packed,
    scale, zero_point)`` (onednn's fused LinearLeakyReLU / LinearTanh): the linear's int32 result scaled with its
    float bias added, the activation in float, quantized once to the output's parameters."""
    def convert(ctx, args):
        x, packed = args[0], args[1]
        scale, zp = float(_number(ctx, args[2], "scale")), int(_number(ctx, args[3], "zero_point"))
        acc, in_scale, w_scale, b, shape, units = _linear_acc(ctx, x, packed, int_bias=False)
        y = _acc_to_float(acc, in_scale, w_scale, b, 1, 2)
        if act == "leaky_relu":
            slope = float(ctx.scalar(args[4], "negative_slope"))
            y = _op().where(_op().greater_equal(y, _f32(0.0)), y, _op().multiply(y, _f32(slope)))
        else:
            y = _op().tanh(y)
        y = _set_q(ctx, _quantize_recip(y, scale, zp, ctx.dtype(x)), scale, zp)
        return _unflatten_q(ctx, y, shape, units)
    return convert


register("quantized::linear_leaky_relu")(_linear_act("leaky_relu"))
register("quantized::linear_tanh")(_linear_act("tanh"))
register("quantized::linear")(_linear(False))
register("quantized::linear_relu")(_linear(True))


# -- elementwise and concatenation -------------------------------------------------------------------------------
def _quantize_recip(x, scale, zp, dtype):
    """PyTorch's vectorized quantize (fbgemm's non-legacy form): ``clip(round_half_even(x * inv) + zp)`` with
    ``inv = float32(1 / scale)`` (a quotient ``x / scale``, as ``qnn.quantize`` computes, rounds differently for
    a few x)."""
    info = np.iinfo(dtype)
    inv = np.float32(1.0 / float(scale))
    y = _op().add(_op().round(_op().multiply(x, _f32(inv))), _f32(float(zp)))
    return _op().cast(_op().clip(y, float(info.min), float(info.max)), dtype)


def _binary(name, relu):
    """``quantized::add`` / ``mul`` (and ``_relu``) as PyTorch's kernels compute them: both operands dequantized,
    combined (and clamped at 0) in float, quantized once with the output's parameters. (TVM's ``qnn.add``
    requantizes each operand to the output's parameters first, two roundings: about a quarter of its outputs were
    one step from PyTorch's, and the test CNN's outputs two steps.)"""
    def convert(ctx, args):
        a, b = args[0], args[1]
        if len(args) == 2:  # the .Scalar / .Scalar2 overloads (quantize_fx's ``x + 0.5``): add_scalar, mul_scalar
            if not _is_q(ctx, a):
                a, b = b, a
            return (_add_scalar if name == "add" else _mul_scalar)(relu)(ctx, _args([a, b], ["qa", "b"]))
        scale, zp = float(_number(ctx, args[2], "scale")), int(_number(ctx, args[3], "zero_point"))
        y = getattr(_op(), name)(_dq(ctx, a), _dq(ctx, b))
        if relu:
            y = _op().maximum(y, _f32(0.0))
        return _set_q(ctx, _quantize_recip(y, scale, zp, ctx.dtype(a)), scale, zp)
    return convert


register("quantized::add")(_binary("add", False))
register("quantized::add_relu")(_binary("add", True))
register("quantized::mul")(_binary("multiply", False))
register("quantized::mul_relu")(_binary("multiply", True))


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
    """hardtanh / relu6 / clamp on a quantized tensor: a clamp in the integer domain between the bounds quantized
    with the tensor's own parameters as PyTorch's ``quantize_val`` does (``zp + round_half_even(v * float32(1 /
    scale))``: a quotient ``v / scale`` put relu6's 6.0 one step off for some scales); the parameters are kept."""
    def convert(ctx, args, float_fn):
        scale, zp = _get_q(ctx, args[0])
        dtype = ctx.dtype(args[0])
        info = np.iinfo(dtype)
        inv = np.float32(1.0) / np.float32(scale)

        def q(v):
            with np.errstate(invalid="ignore", over="ignore"):  # +-inf: a missing bound, clipped to the range
                return int(np.clip(zp + np.rint(np.float32(v) * inv), info.min, info.max))
        lo = q(args.get(lo_key, lo_default)) if lo_key else q(lo_default)
        hi = q(args.get(hi_key, hi_default)) if hi_key else q(hi_default)
        y = _op().minimum(_op().maximum(args[0], const(np.asarray(lo).astype(dtype))),
                          const(np.asarray(hi).astype(dtype)))
        return _set_q(ctx, y, scale, zp)
    return convert


def _with_first(args, x):
    """``args`` (an AtenArgs, names kept) with its first value replaced."""
    out = list(args)
    out[0] = x
    names = getattr(args, "names", None)
    if names is None:
        return out
    from ..pytorch_utils import AtenArgs
    return AtenArgs(out, names)


def _via_float(ctx, args, float_fn):
    """Averaging ops: dequantize, run the float op, quantize back with the input's parameters."""
    scale, zp = _get_q(ctx, args[0])
    x = args[0]
    xf = _qnn().dequantize(x, _f32(scale), _i32(zp))
    y = float_fn(ctx, _with_first(args, xf))
    return _set_q(ctx, _qnn().quantize(y, _f32(scale), _i32(zp), out_dtype=ctx.dtype(x)), scale, zp)


for _name in ("flatten", "reshape", "view", "contiguous", "dropout", "max_pool2d", "squeeze", "unsqueeze",
              "permute", "transpose", "clone", "feature_dropout", "alpha_dropout", "detach"):
    if _name in ATEN_CONVERTERS:
        _quantized_aware(_name, _same_params)
_quantized_aware("relu", _q_relu)
_quantized_aware("hardtanh", _q_clamp("min_val", "max_val", -1.0, 1.0))
_quantized_aware("relu6", _q_clamp("", "", 0.0, 6.0))
for _name in ("clamp", "clip"):  # a missing bound quantizes to the dtype's end: no clamp on that side
    if _name in ATEN_CONVERTERS:
        _quantized_aware(_name, _q_clamp("min", "max", -np.inf, np.inf))


@register("quantized::clamp")
def quantized_clamp(ctx, args):
    return _q_clamp("min", "max", -np.inf, np.inf)(ctx, args, None)


for _name in ("adaptive_avg_pool2d", "avg_pool2d", "mean"):
    if _name in ATEN_CONVERTERS:
        _quantized_aware(_name, _via_float)


# -- more quantized:: ops (eager-mode modules, quantize_fx) --------------------------------------------------------
def _args(values, names):
    from ..pytorch_utils import AtenArgs
    return AtenArgs(list(values), list(names))


def _dq(ctx, x):
    scale, zp = _get_q(ctx, x)
    return _qnn().dequantize(x, _f32(scale), _i32(zp))


def _q(ctx, y, scale, zp, dtype):
    scale, zp = float(scale), int(zp)
    return _set_q(ctx, _qnn().quantize(y, _f32(scale), _i32(zp), out_dtype=dtype), scale, zp)


def _out_params(ctx, args, i):
    return float(_number(ctx, args[i], "scale")), int(_number(ctx, args[i + 1], "zero_point"))


@register("quantized::conv_transpose2d")
def quantized_conv_transpose2d(ctx, args):
    """``nn.ConvTranspose2d`` (weights ``[in, out / groups, kh, kw]``, IOHW, per tensor as PyTorch's observers
    allow): an int32 ``qnn.conv2d_transpose``, the bias quantized to int32 at ``input_scale * weight_scale``, a
    requantize to the output's parameters."""
    import torch
    x, packed, out_scale, out_zp = args[0], args[1], args[2], args[3]
    in_scale, in_zp = _get_q(ctx, x)
    w, b = torch.ops.quantized.conv_transpose2d_unpack(packed)
    # torch 2.13's fbgemm packing of some transposed-conv weights (e.g. 16 -> 8 channels, 2x2 kernel) unpacks to
    # values that change from call to call (and PyTorch's own outputs are wrong): refuse rather than import one
    # draw. Best effort: repeated draws can agree.
    for _ in range(3):
        if not torch.equal(w.int_repr(), torch.ops.quantized.conv_transpose2d_unpack(packed)[0].int_repr()):
            raise FrontendError(f"{ctx.op_name}: PyTorch returns a different weight each time this packed weight "
                                "is unpacked (torch 2.13's fbgemm conv_transpose2d packing does so for some "
                                "shapes); pack the model under the x86 or qnnpack engine instead")
    wq, w_scale, w_zp, axis = _weight(w)
    groups = int(packed.groups())
    if np.ndim(w_scale) and (axis != 1 or groups != 1):
        raise FrontendError(f"{ctx.op_name}: weights quantized per channel along axis {axis} with groups={groups} "
                            "(kiln takes per-tensor weights, or per channel along the output axis 1 with groups 1)")
    channels = wq.shape[1] * groups
    acc = _qnn().conv2d_transpose(x, const(wq), _i32(in_zp), const(w_zp), _f32(in_scale), const(w_scale),
                                  strides=list(packed.stride()), padding=list(packed.padding()),
                                  dilation=list(packed.dilation()), groups=groups, channels=channels,
                                  kernel_size=wq.shape[2:], kernel_layout="IOHW",
                                  output_padding=list(packed.output_padding()))
    bias = _bias(ctx, b, in_scale, w_scale)
    if bias is not None:
        acc = _op().nn.bias_add(acc, bias, axis=1)
    return _requantize(ctx, acc, in_scale, w_scale, _number(ctx, out_scale, "scale"),
                       _number(ctx, out_zp, "zero_point"), ctx.dtype(x), False, 1)


def _conv1d(conv2d_convert):
    """``quantized::conv1d`` / ``conv1d_relu`` / ``conv_transpose1d``: PyTorch packs 1-D convolutions as 2-D ones
    with a height of 1 (weights ``[.., .., 1, k]``, strides / padding ``[1, s]`` / ``[0, p]``), so kiln runs the
    2-D converter on the input with a unit height axis and drops it again."""
    def convert(ctx, args):
        x = args[0]
        scale, zp = _get_q(ctx, x)
        x4 = _set_q(ctx, _op().expand_dims(x, axis=2), scale, zp)
        y4 = conv2d_convert(ctx, _with_first(args, x4))
        return _set_q(ctx, _op().squeeze(y4, axis=[2]), *_get_q(ctx, y4))
    return convert


register("quantized::conv1d")(_conv1d(_conv(False)))
register("quantized::conv1d_relu")(_conv1d(_conv(True)))
register("quantized::conv_transpose1d")(_conv1d(quantized_conv_transpose2d))


@register("quantized::hardswish")
def quantized_hardswish(ctx, args):
    x = args[0]
    (scale, zp), (os_, oz) = _get_q(ctx, x), _out_params(ctx, args, 1)
    y = _qnn().hardswish(x, _f32(scale), _i32(zp), _f32(os_), _i32(oz))
    return _set_q(ctx, y, os_, oz)


@register("quantized::sigmoid")
def quantized_sigmoid(ctx, args):
    x = args[0]
    (scale, zp), (os_, oz) = _get_q(ctx, x), _out_params(ctx, args, 1)
    return _set_q(ctx, _qnn().sigmoid(x, _f32(scale), _i32(zp), _f32(os_), _i32(oz)), os_, oz)


@register("quantized::leaky_relu")
def quantized_leaky_relu(ctx, args):
    x, slope = args[0], float(ctx.scalar(args[1], "negative_slope"))
    (scale, zp), (os_, oz) = _get_q(ctx, x), _out_params(ctx, args, 3)
    return _set_q(ctx, _qnn().leaky_relu(x, slope, _f32(scale), _i32(zp), _f32(os_), _i32(oz)), os_, oz)


@register("quantized::elu")
def quantized_elu(ctx, args):
    """``scale * x`` for ``x > 0``, else ``scale * alpha * (exp(input_scale * x) - 1)`` (PyTorch's quantized ELU,
    on the dequantized input), quantized with the output's parameters."""
    x = args[0]
    os_, oz = _out_params(ctx, args, 1)
    alpha, scale, in_scale = (float(ctx.scalar(args.get(i, 1.0))) for i in (3, 4, 5))
    xf = _dq(ctx, x)
    neg = _op().multiply(_f32(scale * alpha), _op().subtract(_op().exp(_op().multiply(xf, _f32(in_scale))),
                                                              _f32(1.0)))
    y = _op().where(_op().greater(xf, _f32(0.0)), _op().multiply(xf, _f32(scale)), neg)
    return _q(ctx, y, os_, oz, ctx.dtype(x))


@register("quantized::celu")
def quantized_celu(ctx, args):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`` on the dequantized input."""
    x = args[0]
    os_, oz = _out_params(ctx, args, 1)
    alpha = float(ctx.scalar(args.get(3, 1.0)))
    xf = _dq(ctx, x)
    neg = _op().multiply(_f32(alpha), _op().subtract(_op().exp(_op().divide(xf, _f32(alpha))), _f32(1.0)))
    y = _op().add(_op().maximum(xf, _f32(0.0)), _op().minimum(neg, _f32(0.0)))
    return _q(ctx, y, os_, oz, ctx.dtype(x))


@register("quantized::relu6")
def quantized_relu6(ctx, args):
    return _q_clamp("", "", 0.0, 6.0)(ctx, args, None)


def _via_float_op(aten_name, n_in, out_at):
    """quantized:: ops that PyTorch computes as dequantize -> float op -> quantize with the output parameters at
    ``out_at``, ``out_at + 1``; the float op gets the first ``n_in`` arguments (the input dequantized)."""
    def convert(ctx, args):
        x = args[0]
        os_, oz = _out_params(ctx, args, out_at)
        names = list(getattr(args, "names", []))[:n_in] or [str(i) for i in range(n_in)]
        y = ATEN_CONVERTERS[aten_name](ctx, _args([_dq(ctx, x)] + list(args[1:n_in]), names))
        return _q(ctx, y, os_, oz, ctx.dtype(x))
    return convert


# quantized::layer_norm(input, normalized_shape, weight, bias, eps, output_scale, output_zero_point) ...
register("quantized::layer_norm")(_via_float_op("layer_norm", 5, 5))
register("quantized::group_norm")(_via_float_op("group_norm", 5, 5))


@register("quantized::instance_norm")
def quantized_instance_norm(ctx, args):
    x, w, b, eps = args[0], args[1], args[2], float(ctx.scalar(args[3]))
    os_, oz = _out_params(ctx, args, 4)
    y = ATEN_CONVERTERS["instance_norm"](ctx, _args(
        [_dq(ctx, x), w, b, None, None, True, 0.1, eps, False],
        ["input", "weight", "bias", "running_mean", "running_var", "use_input_stats", "momentum", "eps",
         "cudnn_enabled"]))
    return _q(ctx, y, os_, oz, ctx.dtype(x))


def _batch_norm(relu):
    """Unfused ``nn.BatchNorm2d`` / ``BNReLU2d``: ``(x - mean) / sqrt(var + eps) * weight + bias`` on the
    dequantized input (the running statistics of the eval-mode module), quantized with the output's parameters."""
    def convert(ctx, args):
        x, w, b, mean, var, eps = args[0], args[1], args[2], args[3], args[4], float(ctx.scalar(args[5]))
        os_, oz = _out_params(ctx, args, 6)
        shape = [1, -1] + [1] * (ctx.ndim(x) - 2)

        def ch(v):
            return _op().reshape(ctx.cast(v, "float32"), shape)
        y = _op().divide(_op().subtract(_dq(ctx, x), ch(mean)), _op().sqrt(_op().add(ch(var), _f32(eps))))
        if w is not None:
            y = _op().multiply(y, ch(w))
        if b is not None:
            y = _op().add(y, ch(b))
        if relu:
            y = _op().maximum(y, _f32(0.0))
        return _q(ctx, y, os_, oz, ctx.dtype(x))
    return convert


for _suffix in ("", "1d", "2d", "3d"):
    register(f"quantized::batch_norm{_suffix}")(_batch_norm(False))
    register(f"quantized::batch_norm{_suffix}_relu")(_batch_norm(True))


def _scalar_out_params(name, scale, zp, dtype, c):
    """The output scale and zero point PyTorch's kernel gives ``quantized::<name>(x, c)`` on a tensor with
    ``scale`` and ``zp`` (asked of PyTorch itself, on a one-element tensor)."""
    import torch
    qdtype = {"uint8": torch.quint8, "int8": torch.qint8}[dtype]
    probe = torch._empty_affine_quantized([1], scale=scale, zero_point=zp, dtype=qdtype)
    out = getattr(torch.ops.quantized, name)(probe, c)
    return float(out.q_scale()), int(out.q_zero_point())


def _add_scalar(relu):
    """``quantized::add_scalar(x, c)``: PyTorch folds ``c`` (rounded to a multiple of the input scale ``s``,
    ``c_q = round(c / s)``) into the parameters: the integers are those of ``x`` read with zero point
    ``z - c_q``, requantized to a shifted range when ``z - c_q`` falls outside the dtype's range (as PyTorch's
    kernel does it, in float)."""
    def convert(ctx, args):
        x, c = args[0], float(ctx.scalar(args[1], "scalar"))
        scale, zp = _get_q(ctx, x)
        dtype = ctx.dtype(x)
        os_, oz = _scalar_out_params("add_scalar", scale, zp, dtype, c)
        zin = zp - int(np.rint(c / scale))
        if os_ == scale and oz == zin:
            y = _op().copy(x)  # a new expression: x itself would have its own parameters overwritten below
        else:  # PyTorch's kernel: round_half_even(float(q - zin) * float32(s * float32(1 / s'))) + z', saturated
            info = np.iinfo(dtype)
            mult = np.float32(np.float32(scale) * (np.float32(1.0) / np.float32(os_)))
            v = _op().cast(_op().subtract(_op().cast(x, "int32"), _i32(zin)), "float32")
            y = _op().add(_op().round(_op().multiply(v, _f32(mult))), _f32(float(oz)))
            y = _op().cast(_op().clip(y, float(info.min), float(info.max)), dtype)
        if relu:
            y = _op().maximum(y, const(np.asarray(oz).astype(dtype)))
        return _set_q(ctx, y, os_, oz)
    return convert


def _mul_scalar(relu):
    """``quantized::mul_scalar(x, c)``: the integers kept (``c > 0``, scale ``s * c``), reflected within the
    dtype's range (``c < 0``: ``q' = qmax + qmin - q``, zero point likewise), or all at the zero point (``c = 0``)."""
    def convert(ctx, args):
        x, c = args[0], float(ctx.scalar(args[1], "scalar"))
        scale, zp = _get_q(ctx, x)
        dtype = ctx.dtype(x)
        os_, oz = _scalar_out_params("mul_scalar", scale, zp, dtype, c)
        info = np.iinfo(dtype)
        if c > 0:
            y = _op().copy(x)  # a new expression: x itself would have its own parameters overwritten below
        elif c < 0:
            y = _op().cast(_op().subtract(_i32(int(info.max) + int(info.min)), _op().cast(x, "int32")), dtype)
        else:
            y = _op().full_like(x, const(np.asarray(oz).astype(dtype)))
        if relu:
            y = _op().maximum(y, const(np.asarray(oz).astype(dtype)))
        return _set_q(ctx, y, os_, oz)
    return convert


register("quantized::add_scalar")(_add_scalar(False))
register("quantized::add_scalar_relu")(_add_scalar(True))
register("quantized::mul_scalar")(_mul_scalar(False))
register("quantized::mul_scalar_relu")(_mul_scalar(True))


# -- aten ops on quantized tensors with fixed output parameters ---------------------------------------------------
# PyTorch's quantized sigmoid / hardsigmoid give scale 1/256 (zero point 0 for quint8, -128 for qint8), tanh
# 1/128 (128 for quint8, 0 for qint8): the output covers the op's range whatever the input's parameters.
_FIXED = {"sigmoid": (1.0 / 256, {"uint8": 0, "int8": -128}), "hardsigmoid": (1.0 / 256, {"uint8": 0, "int8": -128}),
          "tanh": (1.0 / 128, {"uint8": 128, "int8": 0})}


def _fixed_params(name):
    out_scale, zps = _FIXED[name]

    def convert(ctx, args, float_fn):
        x = args[0]
        dtype = ctx.dtype(x)
        if dtype not in zps:
            raise FrontendError(f"{name} on a quantized {dtype} tensor (kiln takes quint8 / qint8)")
        scale, zp = _get_q(ctx, x)
        oz = zps[dtype]
        if name in ("sigmoid", "tanh"):
            y = getattr(_qnn(), name)(x, _f32(scale), _i32(zp), _f32(out_scale), _i32(oz))
            return _set_q(ctx, y, out_scale, oz)
        return _q(ctx, float_fn(ctx, _with_first(args, _dq(ctx, x))), out_scale, oz, dtype)
    return convert


for _name in _FIXED:
    if _name in ATEN_CONVERTERS:
        _quantized_aware(_name, _fixed_params(_name))
for _name in ("upsample_nearest2d", "slice", "narrow", "select", "expand", "repeat", "pixel_shuffle", "max_pool1d",
              "channel_shuffle", "pixel_unshuffle"):
    if _name in ATEN_CONVERTERS:
        _quantized_aware(_name, _same_params)
for _name in ("leaky_relu", "gelu", "upsample_bilinear2d", "avg_pool1d", "adaptive_avg_pool1d"):
    if _name in ATEN_CONVERTERS:
        _quantized_aware(_name, _via_float)
