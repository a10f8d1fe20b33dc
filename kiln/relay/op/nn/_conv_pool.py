"""Registrations of the spatial nn ops: conv2d (+ NCHWc, transpose), pooling, pad, upsampling.

Type relations reason in primal axes (N, C, H, W / O, I, H, W), so NCHW, NHWC and packed layouts such as
NCHW8c / OIHW8i8o share one rule. References convert to NCHW/OIHW and call the numpy references of
``kiln.topi.testing``.
"""
from __future__ import annotations

import numpy as np

from ....error import TypeInferenceError
from ....ir.op import OpPattern
from ....ir.type import TensorType
from .. import op_attrs as A
from .._define import define_op
from ._any_channels import channels_from_weight
from ._spatial_attrs import ntuple, pad_tuple, pooled_size, window_span
from .._layout import from_primal, to_primal
from ..type_relations import is_any, shape_text, tensor_arg
from ....topi.nn.winograd_util import winograd_matrices
from ....topi.testing import layout_transform_python, conv2d_nchw_python, conv2d_transpose_nchw_python, pool2d_python
from ....topi.testing.resize import resize_nd

_P = OpPattern


def pad4(padding) -> tuple:
    """TVM's get_pad_tuple2d: 1 value -> all sides; 2 -> (h, w); 4 -> (top, left, bottom, right)."""
    return pad_tuple(padding, 2)


def pair(v, what) -> tuple:
    return ntuple(v, 2, what)


def _to_nchw(x: np.ndarray, layout: str, primal: str = "NCHW") -> np.ndarray:
    if layout == primal:
        return x
    return layout_transform_python(x, layout, primal)


def _from_nchw(x: np.ndarray, layout: str, primal: str = "NCHW") -> np.ndarray:
    if layout == primal:
        return x
    return layout_transform_python(x, primal, layout)


# -- conv2d ---------------------------------------------------------------------------------------------
def conv2d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    d = to_primal(data.shape, attrs.data_layout)
    w = to_primal(weight.shape, attrs.kernel_layout)
    if set(d) != set("NCHW") or set(w) != set("OIHW"):
        raise TypeInferenceError(f"conv2d: unsupported layouts data_layout={attrs.data_layout}, "
                                 f"kernel_layout={attrs.kernel_layout}")
    groups = attrs.groups
    if groups < 1:
        raise TypeInferenceError(f"conv2d: groups must be >= 1, got {groups}")
    if w["I"] * groups != d["C"]:
        raise TypeInferenceError(
            f"conv2d: data {shape_text(data.shape)} ({attrs.data_layout}) has {d['C']} input channels but weight "
            f"{shape_text(weight.shape)} ({attrs.kernel_layout}) with groups={groups} expects {w['I'] * groups}")
    if w["O"] % groups:
        raise TypeInferenceError(f"conv2d: {w['O']} output channels are not divisible by groups={groups}")
    if attrs.channels is not None and attrs.channels != w["O"]:
        raise TypeInferenceError(f"conv2d: channels={attrs.channels} but weight {shape_text(weight.shape)} "
                                 f"has {w['O']} output channels")
    if attrs.kernel_size is not None and tuple(attrs.kernel_size) != (w["H"], w["W"]):
        raise TypeInferenceError(f"conv2d: kernel_size={tuple(attrs.kernel_size)} but weight "
                                 f"{shape_text(weight.shape)} has a {w['H']}x{w['W']} kernel")
    sh, sw = pair(attrs.strides, "strides")
    dh, dw = pair(attrs.dilation, "dilation")
    pt, pl, pb, pr = pad4(attrs.padding)
    oh = (d["H"] + pt + pb - ((w["H"] - 1) * dh + 1)) // sh + 1
    ow = (d["W"] + pl + pr - ((w["W"] - 1) * dw + 1)) // sw + 1
    if oh <= 0 or ow <= 0:
        raise TypeInferenceError(f"conv2d: a {w['H']}x{w['W']} kernel (dilation {dh}x{dw}) does not fit the "
                                 f"padded {d['H']}x{d['W']} input {shape_text(data.shape)}")
    out_layout = attrs.out_layout or attrs.data_layout
    shape = from_primal({"N": d["N"], "C": w["O"], "H": oh, "W": ow}, out_layout)
    return TensorType(shape, attrs.out_dtype or data.dtype)


def conv2d_ref(attrs, inputs, out_type):
    data, weight = inputs
    dtype = out_type.dtype
    if data.dtype != np.dtype(dtype):  # e.g. int8 inputs accumulating into int32
        data, weight = data.astype(dtype), weight.astype(dtype)
    x = _to_nchw(data, attrs.data_layout)
    k = _to_nchw(weight, attrs.kernel_layout, "OIHW")
    out = conv2d_nchw_python(x, k, pair(attrs.strides, "strides"), pad4(attrs.padding), groups=attrs.groups,
                             dilation=pair(attrs.dilation, "dilation"))
    return _from_nchw(out, attrs.out_layout or attrs.data_layout)


for _name in ("nn.conv2d", "nn.contrib_conv2d_NCHWc", "nn.contrib_depthwise_conv2d_NCHWc"):
    define_op(_name, num_inputs=2, args=("data", "weight"), attrs=A.Conv2DAttrs, rel=channels_from_weight(conv2d_rel),
              rel_name="Conv2D", pattern=_P.OUT_ELEMWISE_FUSABLE, reference=conv2d_ref, level=2 if _name == "nn.conv2d" else 10)


# -- Winograd conv2d (TVM's contrib_conv2d_winograd_weight_transform / _without_weight_transform) ------------
def _winograd_g(tile_size: int, k: int) -> np.ndarray:
    if k != 3:
        raise TypeInferenceError(f"winograd conv2d: only 3x3 kernels are supported, got {k}x{k}")
    return winograd_matrices(int(tile_size))[2]


def winograd_weight_transform_rel(arg_types, attrs):
    weight = tensor_arg(arg_types, 0, "weight")
    if len(weight.shape) != 4:
        raise TypeInferenceError(f"contrib_conv2d_winograd_weight_transform: expects an OIHW weight, got "
                                 f"{shape_text(weight.shape)}")
    co, ci, kh, kw = (int(x) for x in weight.shape)
    if kh != kw:
        raise TypeInferenceError(f"contrib_conv2d_winograd_weight_transform: needs a square kernel, got {kh}x{kw}")
    if attrs.tile_size not in (2, 4):
        raise TypeInferenceError(f"contrib_conv2d_winograd_weight_transform: tile_size must be 2 or 4, got "
                                 f"{attrs.tile_size}")
    alpha = attrs.tile_size + kh - 1
    return TensorType((alpha, alpha, co, ci), weight.dtype)


def winograd_weight_transform_ref(attrs, inputs, out_type):
    (w,) = inputs
    g = _winograd_g(attrs.tile_size, w.shape[2])
    u = np.einsum("ea,oiab,nb->enoi", g, w.astype(np.float64), g)
    return u.astype(out_type.dtype)


def _winograd_kernel_layout(attrs) -> str:
    """The layout of a transformed weight: TVM's default kernel_layout "OIHW" names the (alpha, alpha, O, I)
    tensor the weight transform returns, which kiln calls HWOI."""
    return "HWOI" if attrs.kernel_layout in ("", "OIHW") else attrs.kernel_layout


def winograd_conv2d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    d = to_primal(data.shape, attrs.data_layout)
    w = to_primal(weight.shape, _winograd_kernel_layout(attrs))
    name = "contrib_conv2d_winograd_without_weight_transform"
    if set(d) != set("NCHW") or set(w) != set("HWOI"):
        raise TypeInferenceError(f"{name}: expects data in NCHW (or NCHW<x>c) and the transformed weight in "
                                 f"HWOI (alpha, alpha, O, I; or HWOI<o>o), got data_layout={attrs.data_layout}, "
                                 f"kernel_layout={attrs.kernel_layout}")
    alpha = attrs.tile_size + 2
    if (w["H"], w["W"]) != (alpha, alpha):
        raise TypeInferenceError(f"{name}: tile_size={attrs.tile_size} needs a {alpha}x{alpha} transformed weight, "
                                 f"got {shape_text(weight.shape)} ({attrs.kernel_layout})")
    if attrs.kernel_size is not None and tuple(attrs.kernel_size) != (3, 3):
        raise TypeInferenceError(f"{name}: only 3x3 kernels are supported, got kernel_size={tuple(attrs.kernel_size)}")
    if attrs.groups != 1 or pair(attrs.strides, "strides") != (1, 1) or pair(attrs.dilation, "dilation") != (1, 1):
        raise TypeInferenceError(f"{name}: needs groups=1, strides (1, 1) and dilation (1, 1), got groups="
                                 f"{attrs.groups}, strides={tuple(attrs.strides)}, dilation={tuple(attrs.dilation)}")
    if w["I"] != d["C"]:
        raise TypeInferenceError(f"{name}: data {shape_text(data.shape)} has {d['C']} channels but the weight "
                                 f"{shape_text(weight.shape)} ({attrs.kernel_layout}) has {w['I']} input channels")
    if attrs.channels is not None and attrs.channels != w["O"]:
        raise TypeInferenceError(f"{name}: channels={attrs.channels} but the weight has {w['O']} output channels")
    pt, pl, pb, pr = pad4(attrs.padding)
    oh, ow = d["H"] + pt + pb - 2, d["W"] + pl + pr - 2
    if oh <= 0 or ow <= 0:
        raise TypeInferenceError(f"{name}: a 3x3 kernel does not fit the padded input {shape_text(data.shape)}")
    shape = from_primal({"N": d["N"], "C": w["O"], "H": oh, "W": ow}, attrs.out_layout or attrs.data_layout)
    return TensorType(shape, attrs.out_dtype or data.dtype)


def winograd_conv2d_ref(attrs, inputs, out_type):
    """The conv with the kernel recovered from its transform (g = G^+ U G^+T, exact for U = G g G^T)."""
    data, u = inputs
    x = _to_nchw(data, attrs.data_layout)
    u = _to_nchw(u, _winograd_kernel_layout(attrs), "HWOI").astype(np.float64)
    gi = np.linalg.pinv(_winograd_g(attrs.tile_size, 3))
    k = np.einsum("ae,enoi,bn->oiab", gi, u, gi).astype(out_type.dtype)
    out = conv2d_nchw_python(x.astype(out_type.dtype), k, (1, 1), pad4(attrs.padding))
    return _from_nchw(out, attrs.out_layout or attrs.data_layout)


define_op("nn.contrib_conv2d_winograd_weight_transform", num_inputs=1, args=("weight",),
          attrs=A.ConvWinogradWeightTransformAttrs, rel=winograd_weight_transform_rel,
          rel_name="Conv2DWinogradWeightTransform", pattern=_P.OUT_ELEMWISE_FUSABLE,
          reference=winograd_weight_transform_ref, level=10)
define_op("nn.contrib_conv2d_winograd_without_weight_transform", num_inputs=2, args=("data", "weight"),
          attrs=A.Conv2DWinogradAttrs, rel=winograd_conv2d_rel, rel_name="Conv2DWinograd",
          pattern=_P.OUT_ELEMWISE_FUSABLE, reference=winograd_conv2d_ref, level=10)


# -- conv2d_transpose ---------------------------------------------------------------------------------------
def _transpose_kernel_dims(weight_shape, layout):
    """(in_channels, out_channels_per_group, kh, kw) of a conv2d_transpose weight."""
    if layout == "IOHW":
        return tuple(weight_shape)
    p = to_primal(weight_shape, layout)
    if set(p) != set("OIHW"):
        raise TypeInferenceError(f"conv2d_transpose: unsupported kernel_layout {layout}")
    # kiln reads the letters literally: I = input channels, O = output channels per group
    return p["I"], p["O"], p["H"], p["W"]


def conv2d_transpose_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    d = to_primal(data.shape, attrs.data_layout)
    cin, opg, kh, kw = _transpose_kernel_dims(weight.shape, attrs.kernel_layout)
    if cin != d["C"]:
        raise TypeInferenceError(f"conv2d_transpose: data {shape_text(data.shape)} has {d['C']} channels but weight "
                                 f"{shape_text(weight.shape)} ({attrs.kernel_layout}) expects {cin}")
    if d["C"] % attrs.groups:
        raise TypeInferenceError(f"conv2d_transpose: {d['C']} channels are not divisible by groups={attrs.groups}")
    out_c = opg * attrs.groups
    if attrs.channels is not None and attrs.channels != out_c:
        raise TypeInferenceError(f"conv2d_transpose: channels={attrs.channels} but the weight gives {out_c}")
    sh, sw = pair(attrs.strides, "strides")
    dh, dw = pair(attrs.dilation, "dilation")
    oph, opw = pair(attrs.output_padding, "output_padding")
    pt, pl, pb, pr = pad4(attrs.padding)
    oh = (d["H"] - 1) * sh + (kh - 1) * dh + 1 - pt - pb + oph
    ow = (d["W"] - 1) * sw + (kw - 1) * dw + 1 - pl - pr + opw
    if any(not is_any(v) and v <= 0 for v in (oh, ow)):
        raise TypeInferenceError(f"conv2d_transpose: the padding {attrs.padding} leaves no output")
    shape = from_primal({"N": d["N"], "C": out_c, "H": oh, "W": ow}, attrs.out_layout or attrs.data_layout)
    return TensorType(shape, attrs.out_dtype or data.dtype)


def conv2d_transpose_ref(attrs, inputs, out_type):
    data, weight = inputs
    x = _to_nchw(data, attrs.data_layout)
    if attrs.kernel_layout != "IOHW":
        weight = _to_nchw(weight, attrs.kernel_layout, "IOHW")
    out = conv2d_transpose_nchw_python(x, weight, pair(attrs.strides, "strides"), pad4(attrs.padding),
                                       pair(attrs.output_padding, "output_padding"), groups=attrs.groups,
                                       dilation=pair(attrs.dilation, "dilation"))
    return _from_nchw(out, attrs.out_layout or attrs.data_layout)


define_op("nn.conv2d_transpose", num_inputs=2, args=("data", "weight"), attrs=A.Conv2DTransposeAttrs,
          rel=channels_from_weight(conv2d_transpose_rel, "transpose"), rel_name="Conv2DTranspose",
          pattern=_P.OUT_ELEMWISE_FUSABLE,
          reference=conv2d_transpose_ref, level=2)


# -- pooling ------------------------------------------------------------------------------------------------------
def _pool_primal(data, layout, what):
    d = to_primal(data.shape, layout)
    if set(d) != set("NCHW"):
        raise TypeInferenceError(f"{what}: unsupported layout {layout}; expected NCHW, NHWC or NCHW<x>c")
    return d


def pool2d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    d = _pool_primal(data, attrs.layout, "pool2d")
    kh, kw = pair(attrs.pool_size, "pool_size")
    sh, sw = pair(attrs.strides, "strides")
    dh, dw = pair(attrs.dilation, "dilation")
    pt, pl, pb, pr = pad4(attrs.padding)
    sizes = []
    for n, k, s, dl, pad in ((d["H"], kh, sh, dh, pt + pb), (d["W"], kw, sw, dw, pl + pr)):
        span = window_span(n, k, dl, pad)
        if span < 0:
            raise TypeInferenceError(f"pool2d: a {kh}x{kw} window does not fit the padded input "
                                     f"{shape_text(data.shape)} ({attrs.layout})")
        sizes.append(pooled_size(span, s, attrs.ceil_mode))
    shape = from_primal({"N": d["N"], "C": d["C"], "H": sizes[0], "W": sizes[1]}, attrs.out_layout or attrs.layout)
    return TensorType(shape, data.dtype)


def _pool_ref(pool_type):
    def ref(attrs, inputs, out_type):
        x = _to_nchw(inputs[0], attrs.layout)
        out = pool2d_python(x, pair(attrs.pool_size, "pool_size"), pair(attrs.strides, "strides"),
                            pad4(attrs.padding), pool_type, ceil_mode=attrs.ceil_mode,
                            count_include_pad=getattr(attrs, "count_include_pad", False),
                            dilation=pair(attrs.dilation, "dilation"))
        return _from_nchw(out, attrs.out_layout or attrs.layout)
    return ref


define_op("nn.max_pool2d", num_inputs=1, attrs=A.MaxPool2DAttrs, rel=pool2d_rel, rel_name="MaxPool2D",
          pattern=_P.OUT_ELEMWISE_FUSABLE, reference=_pool_ref("max"), level=2)
define_op("nn.avg_pool2d", num_inputs=1, attrs=A.AvgPool2DAttrs, rel=pool2d_rel, rel_name="AvgPool2D",
          pattern=_P.OUT_ELEMWISE_FUSABLE, reference=_pool_ref("avg"), level=2)


def global_pool2d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    d = _pool_primal(data, attrs.layout, "global_pool2d")
    shape = from_primal({"N": d["N"], "C": d["C"], "H": 1, "W": 1}, attrs.out_layout or attrs.layout)
    return TensorType(shape, data.dtype)


def _global_ref(fn):
    def ref(attrs, inputs, out_type):
        x = _to_nchw(inputs[0], attrs.layout)
        return _from_nchw(fn(x, axis=(2, 3), keepdims=True), attrs.out_layout or attrs.layout)
    return ref


define_op("nn.global_avg_pool2d", num_inputs=1, attrs=A.GlobalPool2DAttrs, rel=global_pool2d_rel,
          rel_name="GlobalPool2D", pattern=_P.OUT_ELEMWISE_FUSABLE, reference=_global_ref(np.mean), level=2)
define_op("nn.global_max_pool2d", num_inputs=1, attrs=A.GlobalPool2DAttrs, rel=global_pool2d_rel,
          rel_name="GlobalPool2D", pattern=_P.OUT_ELEMWISE_FUSABLE, reference=_global_ref(np.max), level=2)


def _adaptive_size(attrs, d):
    size = attrs.output_size
    if size is None or len(size) == 0:
        return d["H"], d["W"]
    if len(size) == 1:
        return size[0], size[0]
    if len(size) != 2:
        raise TypeInferenceError(f"adaptive pool: output_size must have 1 or 2 values, got {size}")
    return tuple(size)


def adaptive_pool2d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    d = _pool_primal(data, attrs.layout, "adaptive_pool2d")
    oh, ow = _adaptive_size(attrs, d)
    if oh <= 0 or ow <= 0:
        raise TypeInferenceError(f"adaptive pool: output_size {attrs.output_size} must be positive")
    shape = from_primal({"N": d["N"], "C": d["C"], "H": oh, "W": ow}, attrs.out_layout or attrs.layout)
    return TensorType(shape, data.dtype)


def _adaptive_ref(pool_type):
    def ref(attrs, inputs, out_type):
        x = _to_nchw(inputs[0], attrs.layout)
        oh, ow = _adaptive_size(attrs, {"H": x.shape[2], "W": x.shape[3]})
        out = np.zeros(x.shape[:2] + (oh, ow), dtype=np.float64)
        fn = np.max if pool_type == "max" else np.mean
        for i in range(oh):
            h0, h1 = (i * x.shape[2]) // oh, -((-(i + 1) * x.shape[2]) // oh)
            for j in range(ow):
                w0, w1 = (j * x.shape[3]) // ow, -((-(j + 1) * x.shape[3]) // ow)
                out[:, :, i, j] = fn(x[:, :, h0:h1, w0:w1], axis=(2, 3))
        return _from_nchw(out.astype(x.dtype), attrs.out_layout or attrs.layout)
    return ref


define_op("nn.adaptive_avg_pool2d", num_inputs=1, attrs=A.AdaptivePool2DAttrs, rel=adaptive_pool2d_rel,
          rel_name="AdaptivePool2D", pattern=_P.OUT_ELEMWISE_FUSABLE, reference=_adaptive_ref("avg"), level=10)
define_op("nn.adaptive_max_pool2d", num_inputs=1, attrs=A.AdaptivePool2DAttrs, rel=adaptive_pool2d_rel,
          rel_name="AdaptivePool2D", pattern=_P.OUT_ELEMWISE_FUSABLE, reference=_adaptive_ref("max"), level=10)


# -- pad / upsampling ---------------------------------------------------------------------------------------------
def pad_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    value = tensor_arg(arg_types, 1, "pad_value")
    if value.shape != ():
        raise TypeInferenceError(f"pad: pad_value must be a scalar, got shape {shape_text(value.shape)}")
    widths = attrs.pad_width
    if len(widths) != len(data.shape):
        raise TypeInferenceError(f"pad: pad_width has {len(widths)} entries but the data {shape_text(data.shape)} "
                                 f"has rank {len(data.shape)}")
    if attrs.pad_mode not in ("constant", "edge", "reflect"):
        raise TypeInferenceError(f"pad: pad_mode must be 'constant', 'edge' or 'reflect', got {attrs.pad_mode!r}")
    shape = []
    for k, (n, w) in enumerate(zip(data.shape, widths)):
        if len(w) != 2:
            raise TypeInferenceError(f"pad: pad_width entry {k} must be (before, after), got {w}")
        if w[0] < 0 or w[1] < 0:
            raise TypeInferenceError(f"pad: negative padding {w} on axis {k}")
        if attrs.pad_mode == "reflect" and (w[0] >= n or w[1] >= n):
            raise TypeInferenceError(f"pad: reflect padding {w} must be smaller than dimension {k} of size {n}")
        shape.append(n + w[0] + w[1])
    return TensorType(shape, data.dtype)


def pad_ref(attrs, inputs, out_type):
    data, value = inputs
    widths = [tuple(w) for w in attrs.pad_width]
    if attrs.pad_mode == "constant":
        return np.pad(data, widths, mode="constant", constant_values=value.astype(data.dtype).item())
    return np.pad(data, widths, mode=attrs.pad_mode)


define_op("nn.pad", num_inputs=2, args=("data", "pad_value"), attrs=A.PadAttrs, rel=pad_rel, rel_name="Pad",
          pattern=_P.INJECTIVE, reference=pad_ref, level=2)


def upsampling_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    d = _pool_primal(data, attrs.layout, "upsampling")
    if attrs.method not in ("nearest_neighbor", "bilinear", "bicubic"):
        raise TypeInferenceError(f"upsampling: method must be nearest_neighbor, bilinear or bicubic, "
                                 f"got {attrs.method!r}")
    oh = int(round(d["H"] * attrs.scale_h))
    ow = int(round(d["W"] * attrs.scale_w))
    return TensorType(from_primal({"N": d["N"], "C": d["C"], "H": oh, "W": ow}, attrs.layout), data.dtype)


def upsampling_ref(attrs, inputs, out_type):
    x = _to_nchw(inputs[0], attrs.layout)
    mode = "align_corners" if attrs.align_corners else "asymmetric"
    method = {"nearest_neighbor": "nearest_neighbor", "bilinear": "linear", "bicubic": "cubic"}[attrs.method]
    sizes = to_primal(out_type.shape, attrs.layout)
    out = resize_nd(x, [sizes["H"], sizes["W"]], [2, 3], method, mode, "", -0.75 if method == "cubic" else -0.5)
    return _from_nchw(out, attrs.layout)


define_op("nn.upsampling", num_inputs=1, attrs=A.UpSamplingAttrs, rel=upsampling_rel, rel_name="UpSampling",
          pattern=_P.INJECTIVE, reference=upsampling_ref, level=2)

del _name
