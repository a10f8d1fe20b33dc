"""Dynamically quantized ``nn.Linear`` (``torch.ao.quantization.quantize_dynamic``): ``quantized::linear_dynamic``,
``linear_relu_dynamic`` (int8 weights) and ``linear_dynamic_fp16`` / ``linear_relu_dynamic_fp16`` (float16
weights), and the weight-only quantized ``nn.Embedding`` (``quantized::embedding_byte``).

The int8 ops take a float input and give a float output. PyTorch (fbgemm, the ``x86`` / ``fbgemm`` engines)
quantizes the input per tensor at run time, to uint8, with parameters chosen from the tensor's min and max
(``quant_utils::ChooseQuantizationParams``; with ``reduce_range``, the modules' default, into [0, 127] so that
the ``vpmaddubsw`` pair sums of fbgemm's AVX2 kernel cannot saturate), accumulates
``(x_q - x_zp) * (w_q - w_zp)`` exactly in int32, and returns ``acc * x_scale * w_scale + bias`` in float.
kiln builds the same: the parameters as Relay scalars computed from ``min`` / ``max`` of the input (the same
float64 formulas), the input quantized as fbgemm does it (times the reciprocal of the scale), ``qnn.dense``
(int32), the float scaling and bias.
"""
from __future__ import annotations

import numpy as np

from ....error import FrontendError
from .registry import register
from ... import op
from ...qnn import op as qnn_op
from ...expr import Expr, const

# PyTorch's quant_utils.h: a smaller scale is raised to this (its reciprocal would lose precision in fbgemm).
_SMALL_SCALE = np.float32(6.1e-5)


def _c64(v):
    return const(float(v), "float64")


def _c32(v):
    return const(np.float32(v))


def choose_qparams(x, qmin: int, qmax: int):
    """(scale float32, zero point int32) Relay scalars for quantizing ``x`` per tensor into [qmin, qmax], as
    PyTorch's ``ChooseQuantizationParams`` (preserve_sparsity and power-of-two scales off): the range widened to
    contain 0, ``scale = (max - min) / (qmax - qmin)`` in float64 (0.1 when its float32 value is 0 or has an
    infinite reciprocal; raised to 6.1e-5 with the range stretched alike when below), the zero point from the end
    of the range with the smaller rounding error, rounded half to even and clamped to [qmin, qmax]."""
    lo = op.minimum(op.min(x), _c32(0.0))
    hi = op.maximum(op.max(x), _c32(0.0))
    span = float(qmax - qmin)
    scale = op.divide(op.subtract(op.cast(hi, "float64"), op.cast(lo, "float64")), _c64(span))
    s32 = op.cast(scale, "float32")
    degenerate = op.logical_or(op.equal(s32, _c32(0.0)), op.isinf(op.divide(_c32(1.0), s32)))
    scale = op.where(degenerate, _c64(0.1), scale)
    # below the threshold: the scale becomes the threshold and min / max are stretched (float32, as PyTorch)
    small = op.less(scale, _c64(float(_SMALL_SCALE)))
    amp = op.divide(_c32(_SMALL_SCALE), op.cast(scale, "float32"))
    lo_zero, hi_zero = op.equal(lo, _c32(0.0)), op.equal(hi, _c32(0.0))
    full = _c32(np.float32(_SMALL_SCALE) * np.float32(span))
    lo_s = op.where(lo_zero, lo, op.where(hi_zero, op.negative(full), op.multiply(lo, amp)))
    hi_s = op.where(lo_zero, full, op.where(hi_zero, hi, op.multiply(hi, amp)))
    lo = op.where(small, lo_s, lo)
    hi = op.where(small, hi_s, hi)
    scale = op.where(small, _c64(float(_SMALL_SCALE)), scale)
    lo64, hi64 = op.cast(lo, "float64"), op.cast(hi, "float64")
    lo_r, hi_r = op.divide(lo64, scale), op.divide(hi64, scale)
    from_min, from_max = op.subtract(_c64(qmin), lo_r), op.subtract(_c64(qmax), hi_r)
    err_min = op.subtract(_c64(abs(qmin)), op.abs(lo_r))
    err_max = op.subtract(_c64(abs(qmax)), op.abs(hi_r))
    zp = op.where(op.less(err_min, err_max), from_min, from_max)
    # through uint8: the value is in [0, 255], and the x86 legalization of qnn.dense takes its int16 form for a
    # run-time zero point it can see is 8-bit
    zp = op.cast(op.cast(op.clip(op.round(zp), float(qmin), float(qmax)), "uint8"), "int32")
    return op.cast(scale, "float32"), zp


def quantize_like_fbgemm(x, scale, zp):
    """uint8 ``clip(round_half_even(x * (1 / scale) + zp), 0, 255)``: fbgemm multiplies by the float32 reciprocal
    of the scale (a quotient ``x / scale`` rounds differently for some x, e.g. 127.49999 against 127.5) and adds
    the zero point before rounding."""
    inv = op.divide(_c32(1.0), scale)
    y = op.add(op.multiply(x, inv), op.cast(zp, "float32"))
    return op.cast(op.clip(op.round(y), 0.0, 255.0), "uint8")


def _flatten(ctx, x):
    shape = ctx.shape(x)
    return (op.reshape(x, [-1, shape[-1]]) if len(shape) != 2 else x), shape


def _unflatten(y, shape, units):
    return op.reshape(y, list(shape[:-1]) + [units]) if len(shape) != 2 else y


def _bias_add(y, b):
    if b is None:
        return y
    return op.nn.bias_add(y, const(b.detach().float().numpy()), axis=1)


def dynamic_dense(x2, packed, reduce_range: bool):
    """PyTorch's ``apply_dynamic`` of a packed int8 linear on the 2-D float ``x2``: float ``[rows, units]``."""
    import torch
    w, b = torch.ops.quantized.linear_unpack(packed)
    if w.dtype not in (torch.qint8, torch.quint8):
        raise FrontendError(f"dynamic linear: weight dtype {w.dtype} (kiln takes qint8 / quint8)")
    # qnnpack's dynamic linear ignores reduce_range (its kernels do not saturate)
    if reduce_range and torch.backends.quantized.engine == "qnnpack":
        reduce_range = False
    from .quantized import _weight
    wq, w_scale, w_zp, _ = _weight(w)
    qmin, qmax = (0, 127) if reduce_range else (0, 255)
    scale, zp = choose_qparams(x2, qmin, qmax)
    xq = quantize_like_fbgemm(x2, scale, zp)
    acc = qnn_op.dense(xq, const(wq), zp, const(w_zp), scale, const(w_scale), units=wq.shape[0])
    # fbgemm's ReQuantizeForFloat: float(acc) * x_scale * w_scale (in that order), then the float bias
    y = op.multiply(op.multiply(op.cast(acc, "float32"), scale), const(np.asarray(w_scale, np.float32)))
    return _bias_add(y, b)


def _linear_dynamic(relu):
    def convert(ctx, args):
        x, packed = ctx.cast(args[0], "float32"), args[1]
        reduce_range = bool(args.get(2, False)) if len(args) > 2 else False
        x2, shape = _flatten(ctx, x)
        y = dynamic_dense(x2, packed, reduce_range)
        if relu:
            y = op.nn.relu(y)
        return _unflatten(y, shape, _units(packed))
    return convert


def _units(packed):
    import torch
    return int(torch.ops.quantized.linear_unpack(packed)[0].shape[0])


def _linear_dynamic_fp16(relu):
    """float16 weights (``quantize_dynamic(..., dtype=torch.float16)``): fbgemm computes in float32 with the
    weights rounded to float16, so this is a float dense on those weights."""
    def convert(ctx, args):
        import torch
        x, packed = ctx.cast(args[0], "float32"), args[1]
        w, b = torch.ops.quantized.linear_unpack_fp16(packed)
        wf = w.detach().to(torch.float16).float().numpy()
        x2, shape = _flatten(ctx, x)
        y = _bias_add(op.nn.dense(x2, const(wf), units=wf.shape[0]), b)
        if relu:
            y = op.nn.relu(y)
        return _unflatten(y, shape, wf.shape[0])
    return convert


register("quantized::linear_dynamic")(_linear_dynamic(False))
register("quantized::linear_relu_dynamic")(_linear_dynamic(True))
register("quantized::linear_dynamic_fp16")(_linear_dynamic_fp16(False))
register("quantized::linear_relu_dynamic_fp16")(_linear_dynamic_fp16(True))


@register("quantized::embedding_byte")
def embedding_byte(ctx, args):
    """``nn.Embedding`` with ``float_qparams_weight_only_qconfig``: 8-bit rows with a float scale and bias each,
    float output. The float table is what PyTorch itself returns for every row (asked at import time, so each
    value is bit-identical to PyTorch's ``scale * q + bias``); then the float ``aten::embedding`` conversion."""
    import torch
    from .registry import ATEN_CONVERTERS
    from ..pytorch_utils import AtenArgs
    packed, indices = args[0], args[1]
    if len(args) > 2 and bool(args.get(2, False)):
        raise FrontendError(f"{ctx.op_name}: pruned embedding weights (pruned_weights=True) are not supported")
    rows = torch.ops.quantized.embedding_bag_unpack(packed).shape[0]
    table = torch.ops.quantized.embedding_byte(packed, torch.arange(rows), False).detach().float().numpy()
    return ATEN_CONVERTERS["embedding"](ctx, AtenArgs([const(table), indices, -1, False, False],
                                                     ["weight", "indices", "padding_idx", "scale_grad_by_freq",
                                                      "sparse"]))


# -- dynamically quantized LSTM / GRU (aten::quantized_lstm / quantized_gru) ----------------------------------
def _cell_params(ctx, p):
    """(packed_ih, packed_hh, reduce_range) of a ``rnn.CellParamsBase`` made by quantize_dynamic (int8)."""
    try:
        kind, _tensors, _doubles, longs, packed = p.__getstate__()[0]
    except Exception as err:  # noqa: BLE001 - any other layout is a cell kiln does not know
        raise FrontendError(f"{ctx.op_name}: unreadable RNN cell parameters ({err})") from err
    if kind != "quantized_dynamic":
        raise FrontendError(f"{ctx.op_name}: RNN cell parameters of kind {kind!r} (kiln converts int8 "
                            "quantize_dynamic cells, 'quantized_dynamic')")
    return packed[0], packed[1], bool(longs[0]) if longs else False


def _lstm_cell(xw, h, c, phh, rr):
    """PyTorch's LSTMCell with the input projection precomputed: gates = linear_hh(h) + xw; i, f, g, o."""
    g = op.add(dynamic_dense(h, phh, rr), xw)
    i, f, gg, o = op.split(g, 4, axis=1)
    c = op.add(op.multiply(op.sigmoid(f), c), op.multiply(op.sigmoid(i), op.tanh(gg)))
    return op.multiply(op.sigmoid(o), op.tanh(c)), c


def _gru_cell(xw, h, _c, phh, rr):
    """PyTorch's GRUCell: r, z from hh + ih; n = tanh(ih_n + r * hh_n); h' = (h - n) * z + n."""
    ir, iz, inn = op.split(xw, 3, axis=1)
    hr, hz, hn = op.split(dynamic_dense(h, phh, rr), 3, axis=1)
    r, z = op.sigmoid(op.add(hr, ir)), op.sigmoid(op.add(hz, iz))
    n = op.tanh(op.add(inn, op.multiply(hn, r)))
    return op.add(op.multiply(op.subtract(h, n), z), n), None


def _rnn(ctx, x, h0, c0, params, num_layers, bidirectional, batch_first, cell):
    """Unrolled over the (static) sequence. As PyTorch on CPU, each layer and direction applies its input
    projection to the whole sequence at once (one dynamic quantization of the ``[T * B, F]`` input), then per
    step the hidden projection (quantized per step) and the cell."""
    x = ctx.cast(x, "float32")
    if batch_first:
        x = op.transpose(x, [1, 0, 2])
    steps, batch = ctx.shape(x)[0], ctx.shape(x)[1]
    dirs = 2 if bidirectional else 1
    if len(params) != num_layers * dirs:
        raise FrontendError(f"{ctx.op_name}: {len(params)} cell parameter sets for {num_layers} layers x {dirs} "
                            "directions")
    layer_in, h_n, c_n = x, [], []
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            pih, phh, rr = _cell_params(ctx, params[k])
            feat = ctx.shape(layer_in)[2]
            xw = dynamic_dense(op.reshape(layer_in, [steps * batch, feat]), pih, rr)
            xw = op.reshape(xw, [steps, batch, -1])
            h = op.squeeze(op.strided_slice(h0, [k], [k + 1], axes=[0]), axis=[0])
            c = None if c0 is None else op.squeeze(op.strided_slice(c0, [k], [k + 1], axes=[0]), axis=[0])
            seq = [None] * steps
            for t in (range(steps) if d == 0 else reversed(range(steps))):
                xt = op.squeeze(op.strided_slice(xw, [t], [t + 1], axes=[0]), axis=[0])
                h, c = cell(xt, h, c, phh, rr)
                seq[t] = h
            outs.append(op.stack(seq, axis=0))
            h_n.append(h)
            c_n.append(c)
        layer_in = outs[0] if dirs == 1 else op.concatenate(outs, axis=2)
    out = op.transpose(layer_in, [1, 0, 2]) if batch_first else layer_in
    return out, op.stack(h_n, axis=0), (None if c0 is None else op.stack(c_n, axis=0))


def _rnn_flags(ctx, args, first):
    has_biases, num_layers, _dropout, train, bidirectional, batch_first = args[first:first + 6]
    if bool(train):
        raise FrontendError(f"{ctx.op_name}: a training-mode RNN (dropout between layers)")
    return int(num_layers), bool(bidirectional), bool(batch_first)


@register("quantized_lstm")
def quantized_lstm(ctx, args):
    """``aten::quantized_lstm`` (``quantize_dynamic({nn.LSTM})``, the padded-input overload)."""
    x, hx, params = args[0], args[1], args[2]
    if not isinstance(hx, (list, tuple)):
        raise FrontendError(f"{ctx.op_name}: packed sequences (the batch_sizes overload) are not supported")
    num_layers, bidirectional, batch_first = _rnn_flags(ctx, args, 3)
    out, h, c = _rnn(ctx, x, ctx.cast(hx[0], "float32"), ctx.cast(hx[1], "float32"), list(params), num_layers,
                     bidirectional, batch_first, _lstm_cell)
    return [out, h, c]


@register("quantized_gru")
def quantized_gru(ctx, args):
    """``aten::quantized_gru`` (``quantize_dynamic({nn.GRU})``, the padded-input overload)."""
    x, hx, params = args[0], args[1], args[2]
    if isinstance(params, Expr) or not isinstance(params, (list, tuple)):
        raise FrontendError(f"{ctx.op_name}: packed sequences (the batch_sizes overload) are not supported")
    num_layers, bidirectional, batch_first = _rnn_flags(ctx, args, 3)
    out, h, _ = _rnn(ctx, x, ctx.cast(hx, "float32"), None, list(params), num_layers, bidirectional, batch_first,
                     _gru_cell)
    return [out, h]
