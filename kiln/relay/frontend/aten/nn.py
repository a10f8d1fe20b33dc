"""aten neural-network ops: convolution, pooling, normalization, padding, resizing."""
from __future__ import annotations

import math

import numpy as np

from ....error import FrontendError
from ..einsum import einsum
from .registry import register, relay_op
from ... import op


def _op():
    return op


def _tuple(ctx, v, n, what):
    vals = ctx.int_list(v, what)
    if len(vals) == 1:
        vals = vals * n
    if len(vals) != n:
        raise FrontendError(f"{ctx.op_name}: {what} has {len(vals)} values, expected {n}")
    return vals


_LAYOUTS = {1: ("NCW", "OIW", "IOW"), 2: ("NCHW", "OIHW", "IOHW"), 3: ("NCDHW", "OIDHW", "IODHW")}


def _conv(ctx, x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    wshape = ctx.shape(w)
    nd = len(wshape) - 2
    if nd not in _LAYOUTS:
        raise FrontendError(f"{ctx.op_name}: {nd}-d convolution is not supported")
    unbatched = ctx.ndim(x) == nd + 1
    if unbatched:
        x = _op().expand_dims(x, 0)
    data_layout, kernel_layout, kernel_layout_t = _LAYOUTS[nd]
    stride = _tuple(ctx, stride, nd, "stride")
    dilation = _tuple(ctx, dilation, nd, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            pad = [0] * nd
        elif padding == "same":
            total = [d * (k - 1) for d, k in zip(dilation, wshape[2:])]
            pad = [t // 2 for t in total] + [t - t // 2 for t in total]
        else:
            raise FrontendError(f"{ctx.op_name}: unknown padding mode {padding!r}")
    else:
        pad = _tuple(ctx, padding, nd, "padding")
    groups = int(groups)
    ksize = list(wshape[2:])
    if transposed:
        out_pad = _tuple(ctx, output_padding or [0], nd, "output_padding")
        fn = relay_op(f"nn.conv{nd}d_transpose")
        out = fn(x, w, strides=stride, padding=pad, dilation=dilation, groups=groups,
                 channels=wshape[1] * groups, kernel_size=ksize, data_layout=data_layout,
                 kernel_layout=kernel_layout_t, output_padding=out_pad)
    else:
        fn = relay_op(f"nn.conv{nd}d")
        out = fn(x, w, strides=stride, padding=pad, dilation=dilation, groups=groups, channels=wshape[0],
                 kernel_size=ksize, data_layout=data_layout, kernel_layout=kernel_layout)
    if b is not None:
        out = _op().nn.bias_add(out, b, axis=1)
    if unbatched:
        out = _op().squeeze(out, axis=[0])
    return out


@register("_convolution", "convolution")
def _convolution(ctx, args):
    return _conv(ctx, args[0], args[1], args[2], args[3], args[4], args[5], bool(args[6]), args[7], args[8])


@register("conv1d", "conv2d", "conv3d")
def _convnd(ctx, args):
    return _conv(ctx, args[0], args[1], args[2], args[3], args[4], args[5], False, None, args[6])


@register("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
def _conv_transpose(ctx, args):
    # (input, weight, bias, stride, padding, output_padding, groups, dilation)
    return _conv(ctx, args[0], args[1], args[2], args[3], args[4], args[7], True, args[5], args[6])


# -- dense / matmul -------------------------------------------------------------------------------
def _dense(ctx, x, w_t_expr, bias=None):
    """``x @ W.T`` where ``w_t_expr`` is W of shape (out, in); x may have any number of leading dims."""
    shape = ctx.shape(x)
    if len(shape) > 2:
        x2 = _op().reshape(x, [-1, shape[-1]])
        out = _op().nn.dense(x2, w_t_expr)
        if bias is not None:
            out = _op().nn.bias_add(out, bias, axis=-1)
        return _op().reshape(out, list(shape[:-1]) + [ctx.shape(w_t_expr)[0]])
    squeeze = len(shape) == 1
    if squeeze:
        x = _op().expand_dims(x, 0)
    out = _op().nn.dense(x, w_t_expr)
    if bias is not None:
        out = _op().nn.bias_add(out, bias, axis=-1)
    if squeeze:
        out = _op().squeeze(out, axis=[0])
    return out


@register("linear")
def _linear(ctx, args):
    x, w, b = args[0], args[1], args["bias"]
    if ctx.ndim(w) == 1:  # a 1-d weight is one output unit whose dimension is dropped (PyTorch's rule)
        out = _op().squeeze(_dense(ctx, x, _op().expand_dims(w, 0)), axis=[-1])
        return out if b is None else _op().add(out, b)
    if b is not None and ctx.ndim(b) != 1:
        return _op().add(_dense(ctx, x, w), b)
    return _dense(ctx, x, w, b)


def _t2(x):
    return _op().transpose(x, [1, 0])


@register("mm")
def _mm(ctx, args):
    return _op().nn.dense(args[0], _t2(args[1]))


def _beta_plus_alpha(ctx, args, product):
    """``beta * input + alpha * product`` (addmm, baddbmm); input is skipped when beta is 0."""
    inp, a = args[0], args[1]
    beta, alpha = args.get("beta", 1), args.get("alpha", 1)
    out = product
    dt = ctx.dtype(a)
    if alpha != 1:
        out = out * ctx.const(alpha, dt)
    if beta == 0:
        return out
    inp = ctx.as_expr(inp, dt)
    if beta != 1:
        inp = inp * ctx.const(beta, dt)
    return _op().add(out, inp)


@register("addmm")
def _addmm(ctx, args):
    return _beta_plus_alpha(ctx, args, _op().nn.dense(args[1], _t2(args[2])))


@register("bmm")
def _bmm(ctx, args):
    return _op().nn.batch_matmul(args[0], args[1], transpose_a=False, transpose_b=False)


@register("baddbmm")
def _baddbmm(ctx, args):
    return _beta_plus_alpha(ctx, args, _op().nn.batch_matmul(args[1], args[2], transpose_a=False,
                                                             transpose_b=False))


def matmul(ctx, a, b):
    """``torch.matmul`` semantics: vectors, matrices and broadcast batches."""
    sa, sb = ctx.shape(a), ctx.shape(b)
    if len(sa) == 1 and len(sb) == 1:
        return _op().sum(a * b)
    if len(sa) == 1:
        return _op().squeeze(matmul(ctx, _op().expand_dims(a, 0), b), axis=[-2 if len(sb) > 1 else 0])
    if len(sb) == 1:
        return _op().squeeze(matmul(ctx, a, _op().expand_dims(b, 1)), axis=[-1])
    if len(sb) == 2:
        return _dense(ctx, a, _t2(b))
    batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    nb = int(np.prod(batch, dtype=np.int64)) if batch else 1
    a3 = _op().reshape(_op().broadcast_to(a, list(batch) + list(sa[-2:])) if tuple(sa[:-2]) != batch else a,
                       [nb, sa[-2], sa[-1]])
    b3 = _op().reshape(_op().broadcast_to(b, list(batch) + list(sb[-2:])) if tuple(sb[:-2]) != batch else b,
                       [nb, sb[-2], sb[-1]])
    out = _op().nn.batch_matmul(a3, b3, transpose_a=False, transpose_b=False)
    return _op().reshape(out, list(batch) + [sa[-2], sb[-1]])


@register("matmul", "__matmul__")
def _matmul(ctx, args):
    return matmul(ctx, args[0], args[1])


@register("dot", "vdot", "inner")
def _dot(ctx, args):
    return _op().sum(args[0] * args[1])


@register("einsum")
def _einsum(ctx, args):
    return einsum(ctx, str(args[0]), [ctx.as_expr(t) for t in args[1]])


# -- normalization --------------------------------------------------------------------------------
def _param_or(ctx, v, n, fill, dtype):
    return v if v is not None else ctx.const(np.full((n,), fill), dtype)


@register("batch_norm", "_native_batch_norm_legit_no_training", "_native_batch_norm_legit",
          "native_batch_norm", "_batch_norm_impl_index", "cudnn_batch_norm", "_batch_norm_no_update")
def _batch_norm(ctx, args):
    x, w, b, mean, var = args[0], args[1], args[2], args[3], args[4]
    training = args["training"]
    if training:
        raise FrontendError(f"aten::{ctx.op_name} in training mode: call model.eval() before tracing/exporting")
    eps = float(args.get("eps", 1e-5))
    c = ctx.shape(x)[1]
    dt = ctx.dtype(x)
    if mean is None or var is None:
        raise FrontendError(f"aten::{ctx.op_name} without running statistics (track_running_stats=False) "
                            "normalizes with batch statistics; kiln supports inference-mode batch norm only")
    out = _op().nn.batch_norm(x, _param_or(ctx, w, c, 1.0, dt), _param_or(ctx, b, c, 0.0, dt), mean, var,
                              axis=1, epsilon=eps, center=b is not None, scale=w is not None)[0]
    if ctx.op_name in ("batch_norm",):
        return out
    return [out, mean, var] if ctx.op_name != "_batch_norm_impl_index" else [out, mean, var, mean, 0]


def _layer_norm_expr(ctx, x, normalized_shape, w, b, eps):
    shape = ctx.shape(x)
    k = len(normalized_shape)
    dt = ctx.dtype(x)
    if k == 1:
        n = shape[-1]
        return _op().nn.layer_norm(x, _param_or(ctx, w, n, 1.0, dt), _param_or(ctx, b, n, 0.0, dt), axis=-1,
                                   epsilon=eps, center=b is not None, scale=w is not None)
    axes = list(range(len(shape) - k, len(shape)))
    mean = _op().mean(x, axis=axes, keepdims=True)
    d = x - mean
    var = _op().mean(d * d, axis=axes, keepdims=True)
    out = d / _op().sqrt(var + ctx.const(eps, dt))
    if w is not None:
        out = out * w
    if b is not None:
        out = out + b
    return out


@register("layer_norm")
def _layer_norm(ctx, args):
    return _layer_norm_expr(ctx, args[0], ctx.int_list(args[1], "normalized_shape"), args[2], args[3],
                            float(args.get("eps", 1e-5)))


@register("native_layer_norm")
def _native_layer_norm(ctx, args):
    x = args[0]
    ns = ctx.int_list(args[1], "normalized_shape")
    out = _layer_norm_expr(ctx, x, ns, args[2], args[3], float(args[4]))
    axes = list(range(ctx.ndim(x) - len(ns), ctx.ndim(x)))
    mean = _op().mean(x, axis=axes, keepdims=True)
    return [out, mean, mean]


@register("group_norm")
def _group_norm(ctx, args):
    x, groups, w, b = args[0], int(args[1]), args[2], args[3]
    eps = float(args.get("eps", 1e-5))
    c = ctx.shape(x)[1]
    dt = ctx.dtype(x)
    return _op().nn.group_norm(x, _param_or(ctx, w, c, 1.0, dt), _param_or(ctx, b, c, 0.0, dt), num_groups=groups,
                               axis=1, epsilon=eps, center=b is not None, scale=w is not None)


@register("native_group_norm")
def _native_group_norm(ctx, args):
    # (input, weight, bias, N, C, HxW, group, eps)
    x = args[0]
    out = _group_norm(ctx, type(args)([x, args[6], args[1], args[2], args[7]],
                                      ["input", "num_groups", "weight", "bias", "eps"]))
    return [out, x, x]


@register("instance_norm")
def _instance_norm(ctx, args):
    """Normalizes each (sample, channel) by its own statistics, or, when the module tracks running
    statistics and is in eval mode (use_input_stats=False), by the running mean and variance."""
    x, w, b = args[0], args[1], args[2]
    eps = float(args.get("eps", 1e-5))
    axes = list(range(2, ctx.ndim(x)))
    cshape = [1, ctx.shape(x)[1]] + [1] * len(axes)
    use_input_stats = args["use_input_stats"]
    if use_input_stats is not None and not use_input_stats:
        if args["running_mean"] is None or args["running_var"] is None:
            raise FrontendError("aten::instance_norm with use_input_stats=False needs running statistics")
        mean = _op().reshape(ctx.cast(args["running_mean"], ctx.dtype(x)), cshape)
        var = _op().reshape(ctx.cast(args["running_var"], ctx.dtype(x)), cshape)
        d = x - mean
    else:
        mean = _op().mean(x, axis=axes, keepdims=True)
        d = x - mean
        var = _op().mean(d * d, axis=axes, keepdims=True)
    out = d / _op().sqrt(var + ctx.const(eps, ctx.dtype(x)))
    bshape = [1, ctx.shape(x)[1]] + [1] * len(axes)
    if w is not None:
        out = out * _op().reshape(w, bshape)
    if b is not None:
        out = out + _op().reshape(b, bshape)
    return out


# -- pooling --------------------------------------------------------------------------------------
_POOL_LAYOUT = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def _torch_ceil_mode(ctx, sizes, kernel, stride, padding, dilation, kind, count_include_pad):
    """PyTorch's ceil_mode drops a last window that would start in the right padding; Relay's does not.
    Returns (ceil_mode, padding before + after) giving PyTorch's output sizes."""
    ceil_out, floor_out, torch_out = [], [], []
    for n, k, s, p, d in zip(sizes, kernel, stride, padding, dilation):
        span = n + 2 * p - (k - 1) * d - 1
        c = -(-span // s) + 1
        floor_out.append(span // s + 1)
        ceil_out.append(c)
        torch_out.append(c - 1 if (c - 1) * s >= n + p else c)
    if torch_out == ceil_out:
        return True, list(padding) * 2
    if torch_out == floor_out:
        return False, list(padding) * 2
    if kind == "avg" and count_include_pad:
        raise FrontendError(f"aten::{ctx.op_name}: ceil_mode with count_include_pad on an input where only some "
                            "axes keep their last window is not supported")
    after = [p + max(0, (o - 1) * s + (k - 1) * d + 1 - (n + 2 * p))
             for n, k, s, p, d, o in zip(sizes, kernel, stride, padding, dilation, torch_out)]
    return False, list(padding) + after


def _pool(ctx, args, nd, kind):
    x = args[0]
    unbatched = ctx.ndim(x) == nd + 1
    if unbatched:
        x = _op().expand_dims(x, 0)
    kernel = _tuple(ctx, args[1], nd, "kernel_size")
    stride = ctx.int_list(args[2], "stride") or kernel
    stride = _tuple(ctx, stride, nd, "stride")
    padding = _tuple(ctx, args.get("padding", [0]), nd, "padding")
    ceil_mode = bool(args.get("ceil_mode", False))
    layout = _POOL_LAYOUT[nd]
    dilation = _tuple(ctx, args.get("dilation", [1]), nd, "dilation") if kind == "max" else [1] * nd
    if ceil_mode:
        ceil_mode, padding = _torch_ceil_mode(ctx, ctx.shape(x)[2:], kernel, stride, padding, dilation, kind,
                                              bool(args.get("count_include_pad", True)))
    if kind == "max":
        fn = relay_op(f"nn.max_pool{nd}d")
        out = fn(x, pool_size=kernel, strides=stride, dilation=dilation, padding=padding, layout=layout,
                 ceil_mode=ceil_mode)
    else:
        if args["divisor_override"] is not None:
            raise FrontendError(f"aten::{ctx.op_name} with divisor_override is not supported")
        fn = relay_op(f"nn.avg_pool{nd}d")
        out = fn(x, pool_size=kernel, strides=stride, padding=padding, layout=layout, ceil_mode=ceil_mode,
                 count_include_pad=bool(args.get("count_include_pad", True)))
    if unbatched:
        out = _op().squeeze(out, axis=[0])
    return out


for _nd in (1, 2, 3):
    register(f"max_pool{_nd}d")(lambda ctx, args, _nd=_nd: _pool(ctx, args, _nd, "max"))
    register(f"avg_pool{_nd}d")(lambda ctx, args, _nd=_nd: _pool(ctx, args, _nd, "avg"))
    register(f"max_pool{_nd}d_with_indices")(
        lambda ctx, args, _nd=_nd: [_pool(ctx, args, _nd, "max"), None])


def _adaptive(ctx, args, nd, kind):
    x = args[0]
    unbatched = ctx.ndim(x) == nd + 1
    if unbatched:
        x = _op().expand_dims(x, 0)
    in_sizes = ctx.shape(x)[2:]
    size = [s if s is not None else in_sizes[i] for i, s in
            enumerate(args[1] if isinstance(args[1], (list, tuple)) else [args[1]] * nd)]
    size = _tuple(ctx, size, nd, "output_size")
    layout = _POOL_LAYOUT[nd]
    if kind == "avg" and all(s == 1 for s in size):
        out = _op().mean(x, axis=list(range(2, 2 + nd)), keepdims=True)
    else:
        name = f"adaptive_{kind}_pool{nd}d"
        out = relay_op(f"nn.{name}")(x, output_size=size, layout=layout)
    if unbatched:
        out = _op().squeeze(out, axis=[0])
    return out


for _nd in (1, 2, 3):
    register(f"adaptive_avg_pool{_nd}d", f"_adaptive_avg_pool{_nd}d")(
        lambda ctx, args, _nd=_nd: _adaptive(ctx, args, _nd, "avg"))
    register(f"adaptive_max_pool{_nd}d")(lambda ctx, args, _nd=_nd: [_adaptive(ctx, args, _nd, "max"), None])


# -- padding --------------------------------------------------------------------------------------
def _pad_expr(ctx, x, pad, mode="constant", value=0.0):
    pad = ctx.int_list(pad, "pad")
    nd = ctx.ndim(x)
    widths = [[0, 0] for _ in range(nd)]
    for i in range(len(pad) // 2):
        widths[nd - 1 - i] = [pad[2 * i], pad[2 * i + 1]]
    if any(p < 0 for w in widths for p in w):
        # negative padding crops
        begin = [-min(w[0], 0) for w in widths]
        end = [ctx.shape(x)[i] + min(w[1], 0) for i, w in enumerate(widths)]
        x = _op().strided_slice(x, begin, end)
        widths = [[max(w[0], 0), max(w[1], 0)] for w in widths]
    relay_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}.get(mode)
    if relay_mode is None:
        raise FrontendError(f"aten::{ctx.op_name}: padding mode {mode!r} is not supported "
                            "(constant, reflect, replicate are)")
    value = 0.0 if value is None else value
    return _op().nn.pad(x, widths, pad_value=ctx.const(value, ctx.dtype(x)), pad_mode=relay_mode)


@register("constant_pad_nd")
def _constant_pad(ctx, args):
    return _pad_expr(ctx, args[0], args[1], "constant", args.get("value", 0.0))


@register("pad")
def _pad(ctx, args):
    return _pad_expr(ctx, args[0], args[1], args.get("mode", "constant"), args["value"])


for _nd in (1, 2, 3):
    register(f"reflection_pad{_nd}d")(lambda ctx, args: _pad_expr(ctx, args[0], args[1], "reflect"))
    register(f"replication_pad{_nd}d")(lambda ctx, args: _pad_expr(ctx, args[0], args[1], "replicate"))


# -- resizing -------------------------------------------------------------------------------------
def _out_size(ctx, x, output_size, scales, nd):
    in_sizes = ctx.shape(x)[2:]
    if output_size is not None and len(ctx.int_list(output_size)) > 0:
        return _tuple(ctx, output_size, nd, "output_size")
    if scales is None:
        raise FrontendError(f"aten::{ctx.op_name}: neither output_size nor scale_factors given")
    sc = list(scales) if isinstance(scales, (list, tuple)) else [scales] * nd
    if len(sc) == 1:
        sc = sc * nd
    return [int(math.floor(s * float(f))) for s, f in zip(in_sizes, sc)]


def _axis_scales(ctx, args, nd):
    """The per-axis scale factors the call gives (None where it gives an output size only)."""
    names = args.names
    if "scale_factors" in names:
        sc = args["scale_factors"]
        if sc is None or (args["output_size"] is not None and len(ctx.int_list(args["output_size"])) > 0):
            return [None] * nd
    else:
        sc = [args[n] for n in names if n.startswith("scales")]
    sc = list(sc) if isinstance(sc, (list, tuple)) else [sc] * nd
    sc = sc * nd if len(sc) == 1 else sc
    return [None if v is None else float(v) for v in sc]


def _torch_taps(method, n_in, n_out, scale, align):
    """PyTorch's source taps for one axis: a list of (index array, weight array or None) over the outputs."""
    f32 = np.float32
    dst = np.arange(n_out, dtype=f32)
    if align and method != "nearest" and method != "nearest-exact":
        ratio = f32((n_in - 1) / (n_out - 1)) if n_out > 1 else f32(0)
    else:
        ratio = f32(1.0 / scale) if scale is not None and scale > 0 else f32(n_in / n_out)
    if method == "nearest":
        return [(np.minimum(np.floor(dst * ratio).astype(np.int64), n_in - 1), None)]
    if method == "nearest-exact":
        return [(np.minimum(np.floor((dst + f32(0.5)) * ratio).astype(np.int64), n_in - 1), None)]
    src = dst * ratio if align else (dst + f32(0.5)) * ratio - f32(0.5)
    if method == "linear":
        src = np.maximum(src, f32(0)) if not align else src
        i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
        i1 = np.minimum(i0 + 1, n_in - 1)
        l1 = (src - i0).astype(f32)
        return [(i0, f32(1) - l1), (i1, l1)]
    i = np.floor(src).astype(np.int64)
    t = (src - i).astype(np.float64)
    a = -0.75

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    weights = [far(t + 1), near(t), near(1 - t), far(2 - t)]
    return [(np.clip(i + k - 1, 0, n_in - 1), w.astype(f32)) for k, w in enumerate(weights)]


def _resize_by_taps(ctx, x, sizes, scales, method, align):
    """Resize with PyTorch's exact coordinate mapping, one axis at a time: a take per tap, weighted."""
    dt = ctx.dtype(x)
    nd = len(sizes)
    for j in range(nd):
        axis = 2 + j
        n_in = ctx.shape(x)[axis]
        bshape = [1] * ctx.ndim(x)
        bshape[axis] = sizes[j]
        out = None
        for idx, w in _torch_taps(method, n_in, sizes[j], scales[j], align):
            term = _op().take(x, ctx.const(idx, "int64"), axis=axis)
            if w is not None:
                term = term * ctx.const(w.reshape(bshape), dt)
            out = term if out is None else out + term
        x = out
    return x


def _upsample(ctx, args, nd, method):
    """PyTorch's interpolate. Relay's resize maps coordinates with the in/out size ratio; PyTorch uses the
    scale factor when one is given (5 * 1.7 -> 8 outputs, mapped by 1/1.7, not 5/8), and bicubic uses
    a = -0.75. When the two mappings agree the Relay resize op is used; otherwise the taps PyTorch reads
    are computed here and gathered with take."""
    x = args[0]
    names = args.names
    if "scale_factors" in names:
        size = _out_size(ctx, x, args["output_size"], args["scale_factors"], nd)
    else:
        scales = [args[n] for n in names if n.startswith("scales")]
        scales = None if not scales or all(s is None for s in scales) else scales
        size = _out_size(ctx, x, args["output_size"], scales, nd)
    align = bool(args["align_corners"]) if "align_corners" in names and args["align_corners"] is not None else False
    scales = _axis_scales(ctx, args, nd)
    in_sizes = ctx.shape(x)[2:]
    ratio_agrees = all(s is None or (1.0 / s) == (n / o) for s, n, o in zip(scales, in_sizes, size))
    if not ratio_agrees and not (align and method in ("linear", "cubic")):
        return _resize_by_taps(ctx, x, size, scales, method, align)
    if method == "nearest":
        mode, ctm, rounding = "nearest_neighbor", "asymmetric", "floor"
    elif method == "nearest-exact":
        mode, ctm, rounding = "nearest_neighbor", "half_pixel", "round_prefer_ceil"
    else:
        mode, ctm, rounding = method, ("align_corners" if align else "half_pixel"), ""
    alpha = -0.75  # PyTorch's bicubic coefficient (Relay's default is -0.5)
    layout = {1: "NCW", 2: "NCHW", 3: "NCDHW"}[nd]
    return relay_op(f"image.resize{nd}d")(x, size, roi=None, layout=layout, method=mode,
                                          coordinate_transformation_mode=ctm, rounding_method=rounding,
                                          cubic_alpha=alpha)


register("upsample_nearest1d")(lambda ctx, args: _upsample(ctx, args, 1, "nearest"))
register("upsample_nearest2d")(lambda ctx, args: _upsample(ctx, args, 2, "nearest"))
register("upsample_nearest3d")(lambda ctx, args: _upsample(ctx, args, 3, "nearest"))
for _nd in (1, 2, 3):
    register(f"_upsample_nearest_exact{_nd}d")(lambda ctx, args, _nd=_nd: _upsample(ctx, args, _nd, "nearest-exact"))
register("upsample_linear1d")(lambda ctx, args: _upsample(ctx, args, 1, "linear"))
register("upsample_bilinear2d")(lambda ctx, args: _upsample(ctx, args, 2, "linear"))
register("upsample_trilinear3d")(lambda ctx, args: _upsample(ctx, args, 3, "linear"))
register("upsample_bicubic2d")(lambda ctx, args: _upsample(ctx, args, 2, "cubic"))


@register("pixel_shuffle")
def _pixel_shuffle(ctx, args):
    x = args[0]
    r = int(args[1])
    n, c, h, w = ctx.shape(x)
    oc = c // (r * r)
    y = _op().reshape(x, [n, oc, r, r, h, w])
    y = _op().transpose(y, [0, 1, 4, 2, 5, 3])
    return _op().reshape(y, [n, oc, h * r, w * r])


# -- attention ------------------------------------------------------------------------------------
@register("scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu")
def _sdpa(ctx, args):
    q, k, v = args[0], args[1], args[2]
    mask = args["attn_mask"]
    is_causal = bool(args.get("is_causal", False))
    scale = args["scale"]
    if args["enable_gqa"]:
        raise FrontendError("scaled_dot_product_attention with enable_gqa=True is not supported")
    sq, sk, sv = ctx.shape(q), ctx.shape(k), ctx.shape(v)
    dt = ctx.dtype(q)
    L, E, S, Ev = sq[-2], sq[-1], sk[-2], sv[-1]
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    batch = tuple(np.broadcast_shapes(sq[:-2], sk[:-2], sv[:-2]))
    nb = int(np.prod(batch, dtype=np.int64)) if batch else 1

    def to3(t, s):
        if tuple(s[:-2]) != batch:
            t = _op().broadcast_to(t, list(batch) + list(s[-2:]))
        return _op().reshape(t, [nb, s[-2], s[-1]])

    q3, k3, v3 = to3(q, sq), to3(k, sk), to3(v, sv)
    scores = _op().nn.batch_matmul(q3, k3, transpose_a=False, transpose_b=True)
    scores = scores * ctx.const(scale, dt)
    scores = _op().reshape(scores, list(batch) + [L, S])
    neg = ctx.const(-np.inf, dt)
    if is_causal:
        causal = np.tril(np.ones((L, S), bool))
        scores = _op().where(ctx.const(causal, "bool"), scores, neg)
    if mask is not None:
        if ctx.dtype(mask) == "bool":
            scores = _op().where(mask, scores, neg)
        else:
            scores = scores + ctx.cast(mask, dt)
    attn = _op().nn.softmax(scores, axis=-1)
    attn3 = _op().reshape(_op().broadcast_to(attn, list(batch) + [L, S]) if ctx.shape(attn)[:-2] != batch else attn,
                          [nb, L, S])
    out = _op().nn.batch_matmul(attn3, v3, transpose_a=False, transpose_b=False)
    out = _op().reshape(out, list(batch) + [L, Ev])
    if ctx.op_name.startswith("_scaled_dot_product_flash"):
        return [out, None]
    return out


__all__ = ["matmul"]
