"""cuDNN interface under TVM's names (``tvm.contrib.cudnn``), so test files that import it at top level load
on any machine. kiln has no cuDNN integration: ``exists()`` is False everywhere, the pure shape helpers
(``algo_to_index``, ``conv_output_shape``, ``conv_dgrad_shape``) work, and the ops raise OpNotImplemented.
"""
from __future__ import annotations

from ..error import ArgumentError, OpNotImplemented
from ..runtime.dtype import DataType

_ALGOS = {
    "fwd": ["IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING", "WINOGRAD",
            "WINOGRAD_NONFUSED", "COUNT"],
    "bwd_filter": ["0", "1", "FFT", "3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING", "COUNT"],
    "bwd_data": ["0", "1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED", "COUNT"],
}
_PREFIX = {"fwd": "CUDNN_CONVOLUTION_FWD_ALGO_", "bwd_filter": "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_",
           "bwd_data": "CUDNN_CONVOLUTION_BWD_DATA_ALGO_"}
_FWD_ALGOS = [_PREFIX["fwd"] + a for a in _ALGOS["fwd"]]
_BWD_FILTER_ALGOS = [_PREFIX["bwd_filter"] + a for a in _ALGOS["bwd_filter"]]
_BWD_DATA_ALGOS = [_PREFIX["bwd_data"] + a for a in _ALGOS["bwd_data"]]


def exists() -> bool:
    """Whether cuDNN can be used: never in kiln (no cuDNN backend), whatever the machine has."""
    return False


def algo_to_index(algo_type: str, algo_name: str) -> int:
    """The cuDNN enum value of ``algo_name`` (e.g. "CUDNN_CONVOLUTION_FWD_ALGO_GEMM") of ``algo_type``
    ("fwd", "bwd_filter", "bwd_data")."""
    if algo_type not in _ALGOS:
        raise ArgumentError(f"algo_type must be one of {sorted(_ALGOS)}, got {algo_type!r}")
    names = [_PREFIX[algo_type] + a for a in _ALGOS[algo_type]]
    if algo_name not in names:
        raise ArgumentError(f"unknown cuDNN {algo_type} algorithm {algo_name!r}; expected one of {names}")
    return names.index(algo_name)


def _per_dim(value, dims: int, what: str) -> list:
    vals = [int(value)] * dims if isinstance(value, int) else [int(v) for v in value]
    if len(vals) != dims:
        raise ArgumentError(f"{what} needs {dims} values, got {vals}")
    return vals


def _split_layout(tensor_format: int, shape) -> tuple:
    """(batch-or-out-channels, channels, spatial dims) of an NCHW/NCDHW (0, 2) or NHWC (1) shape."""
    shape = [int(s) for s in shape]
    if tensor_format in (0, 2):
        return shape[0], shape[1], shape[2:]
    if tensor_format == 1:
        if len(shape) != 4:
            raise ArgumentError("cuDNN's NHWC tensor format is defined for 4-d tensors only")
        return shape[0], shape[-1], shape[1:-1]
    raise ArgumentError(f"unknown cuDNN tensor format {tensor_format!r}: 0 (NCHW), 1 (NHWC), 2 (NCHW_VECT_C)")


def _join_layout(tensor_format: int, n: int, c: int, spatial: list) -> list:
    return [n, c, *spatial] if tensor_format in (0, 2) else [n, *spatial, c]


def conv_output_shape(tensor_format, pad, stride, dilation, x_shape, w_shape, data_dtype="float32",
                      conv_dtype="float32", groups: int = 1) -> list:
    """Output shape of a 2-d/3-d convolution as cuDNN computes it."""
    if len(x_shape) != len(w_shape) or len(x_shape) not in (4, 5):
        raise ArgumentError(f"conv_output_shape: x {list(x_shape)} and w {list(w_shape)} must both be 4-d or 5-d")
    n, x_chan, x_sp = _split_layout(tensor_format, x_shape)
    out_chan, w_chan, w_sp = _split_layout(tensor_format, w_shape)
    lanes = DataType(data_dtype).lanes
    if x_chan * lanes != w_chan * groups:
        raise ArgumentError(f"conv_output_shape: data has {x_chan * lanes} input channels but the weight with "
                            f"{groups} group(s) needs {w_chan * groups}")
    dims = len(x_sp)
    pad, stride, dilation = (_per_dim(v, dims, k) for v, k in ((pad, "pad"), (stride, "stride"),
                                                               (dilation, "dilation")))
    out = [1 + (x + 2 * p - ((k - 1) * d + 1)) // s for x, k, p, s, d in zip(x_sp, w_sp, pad, stride, dilation)]
    return _join_layout(tensor_format, n, out_chan, out)


def conv_dgrad_shape(tensor_format, pad, stride, dilation, dy_shape, w_shape, output_padding=(0, 0),
                     groups: int = 1) -> list:
    """Shape of the data gradient of a 2-d convolution (what conv2d_transpose produces)."""
    if len(dy_shape) != 4 or len(w_shape) != 4:
        raise ArgumentError("conv_dgrad_shape: dy and w must be 4-d")
    if tensor_format not in (0, 1):
        raise ArgumentError(f"conv_dgrad_shape: tensor format {tensor_format!r} is not 0 (NCHW) or 1 (NHWC)")
    n, _, dy_sp = _split_layout(tensor_format, dy_shape)
    _, w_chan, w_sp = _split_layout(tensor_format, w_shape)
    pad, stride, dilation, output_padding = (_per_dim(v, 2, k) for v, k in (
        (pad, "pad"), (stride, "stride"), (dilation, "dilation"), (output_padding, "output_padding")))
    sp = [(dy - 1) * s - 2 * p + (k - 1) * d + 1 + op
          for dy, k, p, s, d, op in zip(dy_sp, w_sp, pad, stride, dilation, output_padding)]
    return _join_layout(tensor_format, n, w_chan * groups, sp)


def _unavailable(name: str):
    def op(*args, **kwargs):
        raise OpNotImplemented(f"tvm.contrib.cudnn.{name}: kiln has no cuDNN backend (cudnn.exists() is False); "
                               "use the default schedules (relay.build for target 'llvm')")
    op.__name__ = name
    op.__doc__ = f"cuDNN {name}: not available in kiln (raises OpNotImplemented)."
    return op


conv_forward = _unavailable("conv_forward")
conv_backward_data = _unavailable("conv_backward_data")
conv_backward_filter = _unavailable("conv_backward_filter")
conv_forward_find_algo = _unavailable("conv_forward_find_algo")
conv_backward_data_find_algo = _unavailable("conv_backward_data_find_algo")
conv_backward_filter_find_algo = _unavailable("conv_backward_filter_find_algo")
softmax = _unavailable("softmax")
log_softmax = _unavailable("log_softmax")
