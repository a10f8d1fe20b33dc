"""ONNX Attention (opset 23+) as Relay: scaled dot-product attention with masks, a KV cache and grouped heads.

Follows the ONNX reference semantics: Q and K are each scaled by sqrt(scale); the additive bias combines the
attention mask (boolean masks become 0 / -inf), the bottom-right aligned causal mask (offset by the cached
length) and the sliding window; rows whose bias is entirely -inf produce zeros. Causal and window masks depend
only on static shapes, so they are constants.
"""
from __future__ import annotations

import numpy as np

from .. import op as _op
from ..op import nn as _nn
from .onnx_common import const, onnx_op
from .onnx_ops_elemwise import scalar
from .onnx_ops_nn import matmul


def _heads_first(ctx, x, heads):
    """[B, S, H*D] -> [B, H, S, D]."""
    b, s, hidden = ctx.shape(x)
    return _op.transpose(_op.reshape(x, [b, s, heads, hidden // heads]), [0, 2, 1, 3])


def _per_batch(offset, i, j, batch, dt):
    """Causal bias with a per-batch frontier: key j is visible to query i iff j <= i + offset[b]."""
    lhs = const((j - i).reshape(1, i.shape[0], j.shape[1]).astype("int64"))  # j - i
    allowed = _op.less_equal(lhs, _op.reshape(offset, [batch, 1, 1]))
    bias = _op.where(allowed, scalar(0, dt), scalar(-np.inf, dt))
    return _op.reshape(bias, [batch, 1, i.shape[0], j.shape[1]])


@onnx_op("Attention", since=23)
def _attention(inputs, attr, ctx):
    inputs = list(inputs) + [None] * (7 - len(inputs))
    q, k, v, mask, past_k, past_v, nonpad = inputs[:7]
    dt = ctx.dtype(q)
    rank = ctx.ndim(q)
    if rank == 3:
        if "q_num_heads" not in attr or "kv_num_heads" not in attr:
            raise ctx.error("3-D inputs need the q_num_heads and kv_num_heads attributes")
        q = _heads_first(ctx, q, int(attr["q_num_heads"]))
        k = _heads_first(ctx, k, int(attr["kv_num_heads"]))
        v = _heads_first(ctx, v, int(attr["kv_num_heads"]))
    elif rank != 4:
        raise ctx.error(f"Q must be 3-D or 4-D, got {rank}-D")
    if (past_k is None) != (past_v is None):
        raise ctx.error("past_key and past_value must be given together")
    batch, q_heads, q_len, head = ctx.shape(q)
    scale = attr.get("scale")
    scale = 1.0 / np.sqrt(head) if scale is None else float(scale)
    s = scalar(np.sqrt(scale), dt)
    past_len = ctx.shape(past_k)[2] if past_k is not None else 0
    if past_k is not None:
        k = _op.concatenate([past_k, k], axis=2)
        v = _op.concatenate([past_v, v], axis=2)
    present_k, present_v = k, v
    kv_len = ctx.shape(k)[2]
    kv_heads = ctx.shape(k)[1]

    neg_inf = scalar(-np.inf, dt)
    zero = scalar(0, dt)
    bias = const(np.zeros((q_len, kv_len), dt))
    if mask is not None:
        mshape = ctx.shape(mask)
        if mshape[-1] < kv_len:
            fill = False if ctx.dtype(mask) == "bool" else -np.inf
            pad = [[0, 0]] * (len(mshape) - 1) + [[0, kv_len - mshape[-1]]]
            mask = _nn.pad(mask, pad, scalar(fill, ctx.dtype(mask)))
        if ctx.dtype(mask) == "bool":
            mask = _op.where(mask, zero, neg_inf)
        bias = _op.add(bias, mask)
    i = np.arange(q_len).reshape(q_len, 1)
    j = np.arange(kv_len).reshape(1, kv_len)
    offset = None
    if nonpad is not None and past_k is None:
        offset = _op.subtract(_op.cast(nonpad, "int64"), scalar(q_len, "int64"))  # per batch
    if int(attr.get("is_causal", 0)):
        if offset is None:
            allowed = j <= i + past_len
            bias = _op.add(bias, const(np.where(allowed, 0, -np.inf).astype(dt)))
        else:
            bias = _op.add(bias, _per_batch(offset, i, j, batch, dt))
    left = int(attr.get("left_window_size", -1) if attr.get("left_window_size") is not None else -1)
    right = int(attr.get("right_window_size", -1) if attr.get("right_window_size") is not None else -1)
    if left >= 0 or right >= 0:
        if offset is None:
            diff = (i + past_len) - j
            allowed = np.ones_like(diff, bool)
            if left >= 0:
                allowed &= diff <= left
            if right >= 0:
                allowed &= -diff <= right
            bias = _op.add(bias, const(np.where(allowed, 0, -np.inf).astype(dt)))
        else:
            raise ctx.unsupported("a sliding window with nonpad_kv_seqlen")
    if nonpad is not None:
        keep = _op.less(const(np.arange(kv_len, dtype="int64").reshape(1, kv_len)),
                        _op.reshape(_op.cast(nonpad, "int64"), [batch, 1]))
        bias = _op.add(bias, _op.reshape(_op.where(keep, zero, neg_inf), [batch, 1, 1, kv_len]))

    if kv_heads != q_heads:
        if q_heads % kv_heads:
            raise ctx.error(f"{q_heads} query heads do not group over {kv_heads} key/value heads")
        k = _op.repeat(k, q_heads // kv_heads, axis=1)
        v = _op.repeat(v, q_heads // kv_heads, axis=1)
    scores = matmul(ctx, _op.multiply(q, s), _op.transpose(_op.multiply(k, s), [0, 1, 3, 2]))
    softcap = attr.get("softcap")
    if softcap is not None and float(softcap) > 0:
        c = scalar(float(softcap), dt)
        scores = _op.multiply(_op.tanh(_op.divide(scores, c)), c)
    with_bias = _op.add(scores, bias)
    probs = _nn.softmax(with_bias, axis=-1)
    all_masked = _op.logical_and(_op.isinf(_op.max(bias, axis=[-1], keepdims=True)),
                                 _op.less(_op.max(bias, axis=[-1], keepdims=True), zero))
    probs = _op.where(all_masked, zero, probs)
    mode = int(attr.get("qk_matmul_output_mode", 0))
    qk_out = with_bias if mode == 2 else (probs if mode == 3 else scores)
    y = matmul(ctx, probs, v)
    if rank == 3:
        b, h, sq, d = ctx.shape(y)
        y = _op.reshape(_op.transpose(y, [0, 2, 1, 3]), [b, sq, h * d])
    return [y, present_k, present_v, qk_out]
