"""PyTorch's fused transformer fast path (taken by ``nn.MultiheadAttention`` / ``nn.TransformerEncoderLayer``
in eval mode under ``torch.no_grad()``): ``aten::_native_multi_head_attention`` and
``aten::_transformer_encoder_layer_fwd``, decomposed into Relay dense / batch_matmul / softmax / layer_norm."""
from __future__ import annotations

import math

import numpy as np

from ....error import FrontendError
from .nn import _dense, _layer_norm_expr
from .registry import register
from ... import op


def _op():
    return op


def _split_heads(x, b, n, h, d):
    """(B, N, H*D) -> (B*H, N, D)."""
    x = _op().reshape(x, [b, n, h, d])
    return _op().reshape(_op().transpose(x, [0, 2, 1, 3]), [b * h, n, d])


def _attention_mask(ctx, mask, mask_type, b, h, lq, lk, dt):
    """A mask as an additive (B, H, Lq, Lk)-broadcastable float tensor: boolean True (or a nonzero byte)
    means "do not attend"; a float mask is added to the scores."""
    if mask is None:
        return None
    shape = ctx.shape(mask)
    if ctx.dtype(mask) in ("bool", "uint8"):
        mask = _op().where(ctx.cast(mask, "bool"), ctx.const(-np.inf, dt), ctx.const(0.0, dt))
    else:
        mask = ctx.cast(mask, dt)
    if mask_type == 1 or (mask_type is None and len(shape) == 2 and tuple(shape) == (b, lk) and (b, lk) != (lq, lk)):
        return _op().reshape(mask, [b, 1, 1, lk])  # key padding mask
    if len(shape) == 2:
        return _op().reshape(mask, [1, 1, lq, lk])  # attention mask
    if len(shape) == 3:
        return _op().reshape(mask, [b, h, lq, lk]) if shape[0] == b * h else _op().reshape(mask, [shape[0], 1, lq, lk])
    if len(shape) == 4:
        return mask
    raise FrontendError(f"aten::{ctx.op_name}: mask of shape {tuple(shape)} is not supported")


def multi_head_attention(ctx, q_in, k_in, v_in, heads, qkv_w, qkv_b, proj_w, proj_b, mask=None, mask_type=None,
                         need_weights=False, average=True):
    """Batch-first multi-head attention with packed in-projection weights (3E, E)."""
    b, lq, e = ctx.shape(q_in)
    lk = ctx.shape(k_in)[1]
    if e % heads:
        raise FrontendError(f"aten::{ctx.op_name}: embed_dim {e} is not divisible by num_heads {heads}")
    d = e // heads
    dt = ctx.dtype(q_in)
    w = _op().split(qkv_w, 3, axis=0)
    bias = _op().split(qkv_b, 3, axis=0) if qkv_b is not None else [None] * 3
    q = _dense(ctx, q_in, w[0], bias[0])
    k = _dense(ctx, k_in, w[1], bias[1])
    v = _dense(ctx, v_in, w[2], bias[2])
    q3, k3, v3 = _split_heads(q, b, lq, heads, d), _split_heads(k, b, lk, heads, d), _split_heads(v, b, lk, heads, d)
    scores = _op().nn.batch_matmul(q3, k3, transpose_a=False, transpose_b=True) * ctx.const(1.0 / math.sqrt(d), dt)
    add = _attention_mask(ctx, mask, mask_type, b, heads, lq, lk, dt)
    if add is not None:
        scores = _op().reshape(_op().reshape(scores, [b, heads, lq, lk]) + add, [b * heads, lq, lk])
    attn = _op().nn.softmax(scores, axis=-1)
    out = _op().nn.batch_matmul(attn, v3, transpose_a=False, transpose_b=False)
    out = _op().reshape(_op().transpose(_op().reshape(out, [b, heads, lq, d]), [0, 2, 1, 3]), [b, lq, e])
    out = _dense(ctx, out, proj_w, proj_b)
    if not need_weights:
        return out, None
    weights = _op().reshape(attn, [b, heads, lq, lk])
    if average:
        weights = _op().mean(weights, axis=[1])
    return out, weights


@register("_native_multi_head_attention")
def _native_mha(ctx, args):
    q, k, v = args[0], args[1], args[2]
    if ctx.ndim(q) != 3:
        raise FrontendError("aten::_native_multi_head_attention: expects batch-first 3-d inputs (batch, seq, embed)")
    out, weights = multi_head_attention(ctx, q, k, v, int(args[4]), args[5], args[6], args[7], args[8], args["mask"],
                                        args["mask_type"], bool(args.get("need_weights", True)),
                                        bool(args.get("average_attn_weights", True)))
    return [out, weights]


def _gelu(ctx, x):
    dt = ctx.dtype(x)
    return ctx.const(0.5, dt) * x * (ctx.const(1.0, dt) + _op().erf(x * ctx.const(1.0 / math.sqrt(2.0), dt)))


@register("_transformer_encoder_layer_fwd")
def _encoder_layer(ctx, args):
    (src, _embed, heads, qkv_w, qkv_b, proj_w, proj_b, use_gelu, norm_first, eps, n1_w, n1_b, n2_w, n2_b,
     f1_w, f1_b, f2_w, f2_b) = args[:18]
    mask, mask_type = args["mask"], args["mask_type"]
    eps = float(eps)
    heads = int(heads)
    if ctx.ndim(src) != 3:
        raise FrontendError("aten::_transformer_encoder_layer_fwd: expects batch-first 3-d input (batch, seq, embed)")

    def sa(x):
        return multi_head_attention(ctx, x, x, x, heads, qkv_w, qkv_b, proj_w, proj_b, mask, mask_type)[0]

    def ff(x):
        h = _dense(ctx, x, f1_w, f1_b)
        h = _gelu(ctx, h) if use_gelu else _op().nn.relu(h)
        return _dense(ctx, h, f2_w, f2_b)

    def ln(x, w, b):
        return _layer_norm_expr(ctx, x, [ctx.shape(x)[-1]], w, b, eps)

    if norm_first:
        x = src + sa(ln(src, n1_w, n1_b))
        return x + ff(ln(x, n2_w, n2_b))
    x = ln(src + sa(src), n1_w, n1_b)
    return ln(x + ff(x), n2_w, n2_b)
