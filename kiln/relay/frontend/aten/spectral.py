"""aten::stft with ``return_complex=False`` (TVM-era models): frames gathered with ``take``, windowed, and
transformed by a matrix product with the DFT's cosine and sine bases (no FFT op in Relay). The result is
PyTorch's real layout: ``(batch?, n_freq, n_frames, 2)`` holding the real and imaginary parts."""
from __future__ import annotations

import numpy as np

from ....error import FrontendError, OpNotImplemented
from .registry import register
from ... import op


@register("stft")
def _stft(ctx, args):
    x = ctx.as_expr(args[0])
    n_fft = int(args[1])
    hop = args["hop_length"]
    hop = n_fft // 4 if hop is None else int(hop)
    win_length = args["win_length"]
    win_length = n_fft if win_length is None else int(win_length)
    window = args["window"]
    normalized = bool(args.get("normalized", False))
    onesided = args["onesided"]
    onesided = True if onesided is None else bool(onesided)
    if args["return_complex"]:
        raise OpNotImplemented("aten::stft with return_complex=True: kiln has no complex dtype; "
                               "use return_complex=False")
    dt = ctx.dtype(x)
    if not dt.startswith("float"):
        raise FrontendError(f"aten::stft: the signal must be floating point, got {dt}")
    shape = list(ctx.shape(x))
    if len(shape) not in (1, 2):
        raise FrontendError(f"aten::stft: expected a 1-D or 2-D signal, got shape {shape}")
    length = shape[-1]
    if not 0 < n_fft <= length or hop <= 0 or not 0 < win_length <= n_fft:
        raise FrontendError(f"aten::stft: need 0 < n_fft ({n_fft}) <= signal length ({length}), hop_length "
                            f"({hop}) > 0 and 0 < win_length ({win_length}) <= n_fft")
    if window is None:
        w = ctx.const(np.ones(win_length), dt)
    else:
        w = ctx.cast(window, dt)
        if list(ctx.shape(w)) != [win_length]:
            raise FrontendError(f"aten::stft: window has shape {ctx.shape(w)}, expected ({win_length},)")
    left = (n_fft - win_length) // 2
    if win_length < n_fft:  # the window is centred in n_fft samples
        w = op.nn.pad(w, [(left, n_fft - win_length - left)])
    n_frames = 1 + (length - n_fft) // hop
    idx = (np.arange(n_frames)[:, None] * hop + np.arange(n_fft)[None, :]).astype("int64")
    frames = op.multiply(op.take(x, ctx.const(idx, "int64"), axis=len(shape) - 1), w)  # (..., frames, n_fft)
    n_freq = n_fft // 2 + 1 if onesided else n_fft
    angle = 2.0 * np.pi * np.outer(np.arange(n_freq), np.arange(n_fft)) / n_fft
    scale = 1.0 / np.sqrt(n_fft) if normalized else 1.0
    parts = []
    for basis in (np.cos(angle) * scale, -np.sin(angle) * scale):
        flat = op.reshape(frames, [-1, n_fft])
        y = op.nn.dense(flat, ctx.const(basis, dt))  # (frames, n_freq)
        y = op.reshape(y, shape[:-1] + [n_frames, n_freq])
        parts.append(op.transpose(y, list(range(len(shape) - 1)) + [len(shape), len(shape) - 1]))
    return op.stack(parts, axis=len(shape) + 1)
