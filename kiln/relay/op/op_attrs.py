"""Attribute schemas of the Relay ops, under TVM's type keys and field names (TVM's ``relay.op.op_attrs``).

Defaults follow TVM; ``None`` stands for TVM's null value (e.g. ``channels`` not given).
"""
from __future__ import annotations

from ...ir.attrs import Attrs, Field
from ...runtime.dtype import dtype_str


def _dtype_or_empty(value) -> str:
    return "" if value in (None, "") else dtype_str(value)


def _int_tuple(value) -> tuple:
    if isinstance(value, (list, tuple)):
        return tuple(int(v) for v in value)
    return (int(value),)


def _opt_int_tuple(value):
    return None if value is None else _int_tuple(value)


def _axis_list(value):
    if value is None:
        return None
    return _int_tuple(value)


def _scalar_float(value) -> float:
    """A number, or a scalar Constant (TVM keeps arange's start/stop/step as constant expressions)."""
    if hasattr(value, "numpy"):
        value = value.numpy()
    return float(value)


def _int(value):
    return int(value)


# -- tensor / transform ---------------------------------------------------------------------------
class CastAttrs(Attrs):
    type_key = "relay.attrs.CastAttrs"
    fields = {"dtype": Field("", _dtype_or_empty, "Target data type")}


class ClipAttrs(Attrs):
    type_key = "relay.attrs.ClipAttrs"
    fields = {"a_min": Field(0.0, float), "a_max": Field(0.0, float)}


class ExpandDimsAttrs(Attrs):
    type_key = "relay.attrs.ExpandDimsAttrs"
    fields = {"axis": Field(0, _int), "num_newaxis": Field(1, _int)}


class ConcatenateAttrs(Attrs):
    type_key = "relay.attrs.ConcatenateAttrs"
    fields = {"axis": Field(0, _int)}


class StackAttrs(Attrs):
    type_key = "relay.attrs.StackAttrs"
    fields = {"axis": Field(0, _int)}


class TransposeAttrs(Attrs):
    type_key = "relay.attrs.TransposeAttrs"
    fields = {"axes": Field(None, _axis_list)}


class ReshapeAttrs(Attrs):
    type_key = "relay.attrs.ReshapeAttrs"
    fields = {"newshape": Field((), _int_tuple), "allowzero": Field(False, bool)}


class ReshapeLikeAttrs(Attrs):
    type_key = "relay.attrs.ReshapeLikeAttrs"
    fields = {"lhs_begin": Field(0, _int), "lhs_end": Field(None, lambda v: None if v is None else int(v)),
              "rhs_begin": Field(0, _int), "rhs_end": Field(None, lambda v: None if v is None else int(v))}


class SqueezeAttrs(Attrs):
    type_key = "relay.attrs.SqueezeAttrs"
    fields = {"axis": Field(None, _axis_list)}


class SplitAttrs(Attrs):
    type_key = "relay.attrs.SplitAttrs"
    fields = {"indices_or_sections": Field(1, lambda v: _int_tuple(v) if isinstance(v, (list, tuple)) else int(v)),
              "axis": Field(0, _int)}


class StridedSliceAttrs(Attrs):
    type_key = "relay.attrs.StridedSliceAttrs"
    fields = {"begin": Field(None, _opt_int_tuple), "end": Field(None, _opt_int_tuple),
              "strides": Field(None, _opt_int_tuple), "slice_mode": "end", "axes": Field(None, _opt_int_tuple)}


class TakeAttrs(Attrs):
    type_key = "relay.attrs.TakeAttrs"
    fields = {"batch_dims": Field(0, _int), "axis": Field(None, lambda v: int(v)), "mode": "clip"}


class GatherAttrs(Attrs):
    type_key = "relay.attrs.GatherAttrs"
    fields = {"axis": Field(0, _int)}


class InitOpAttrs(Attrs):
    type_key = "relay.attrs.InitOpAttrs"
    fields = {"shape": Field(None, _opt_int_tuple), "dtype": Field("", _dtype_or_empty)}


class ArangeAttrs(Attrs):
    type_key = "relay.attrs.ArangeAttrs"
    fields = {"start": Field(None, _scalar_float), "stop": Field(None, _scalar_float), "step": Field(None, _scalar_float),
              "dtype": Field("", _dtype_or_empty)}


class LayoutTransformAttrs(Attrs):
    type_key = "relay.attrs.LayoutTransformAttrs"
    fields = {"src_layout": "", "dst_layout": ""}


class TileAttrs(Attrs):
    type_key = "relay.attrs.TileAttrs"
    fields = {"reps": Field((), _int_tuple)}


class RepeatAttrs(Attrs):
    type_key = "relay.attrs.RepeatAttrs"
    fields = {"repeats": Field(1, _int), "axis": Field(0, _int)}


# -- reductions ------------------------------------------------------------------------------------
class ReduceAttrs(Attrs):
    type_key = "relay.attrs.ReduceAttrs"
    fields = {"axis": Field(None, _axis_list), "keepdims": Field(False, bool), "exclude": Field(False, bool)}


class ArgReduceAttrs(Attrs):
    type_key = "relay.attrs.ArgReduceAttrs"
    fields = {"axis": Field(None, _axis_list), "keepdims": Field(False, bool), "select_last_index": Field(False, bool),
              "exclude": Field(False, bool)}


class VarianceAttrs(Attrs):
    type_key = "relay.attrs.VarianceAttrs"
    fields = {"axis": Field(None, _axis_list), "keepdims": Field(False, bool), "exclude": Field(False, bool),
              "unbiased": Field(False, bool)}


# -- nn ----------------------------------------------------------------------------------------------
class Conv2DAttrs(Attrs):
    type_key = "relay.attrs.Conv2DAttrs"
    fields = {"strides": Field((1, 1), _int_tuple), "padding": Field((0, 0, 0, 0), _int_tuple),
              "dilation": Field((1, 1), _int_tuple), "groups": Field(1, _int),
              "channels": Field(None, _int), "kernel_size": Field(None, _opt_int_tuple),
              "data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "",
              "out_dtype": Field("", _dtype_or_empty)}
    # TVM's C++ struct also carries auto_scheduler_rewritten_layout / meta_schedule_original_shape, but not as
    # declared fields, so dict(attrs) -- which alter-layout hooks pass back as relay.nn.conv2d(**attrs) -- omits them.


class Conv2DWinogradAttrs(Attrs):
    type_key = "relay.attrs.Conv2DWinogradAttrs"
    fields = {"tile_size": Field(4, _int), **Conv2DAttrs.fields}


class ConvWinogradWeightTransformAttrs(Attrs):
    type_key = "relay.attrs.ConvWinogradWeightTransformAttrs"
    fields = {"tile_size": Field(4, _int)}


class Conv2DTransposeAttrs(Attrs):
    type_key = "relay.attrs.Conv2DTransposeAttrs"
    fields = {"channels": Field(None, _int), "kernel_size": Field(None, _opt_int_tuple),
              "strides": Field((1, 1), _int_tuple), "padding": Field((0, 0, 0, 0), _int_tuple),
              "output_padding": Field((0, 0), _int_tuple), "dilation": Field((1, 1), _int_tuple),
              "groups": Field(1, _int), "data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "",
              "out_dtype": Field("", _dtype_or_empty)}


class DenseAttrs(Attrs):
    type_key = "relay.attrs.DenseAttrs"
    fields = {"units": Field(None, _int), "out_dtype": Field("", _dtype_or_empty)}  # as Conv2DAttrs: no auto_scheduler_*


class MatmulAttrs(Attrs):
    type_key = "relay.attrs.MatmulAttrs"
    fields = {"units": Field(None, _int), "out_dtype": Field("", _dtype_or_empty),
              "transpose_a": Field(False, bool), "transpose_b": Field(False, bool)}


class BatchMatmulAttrs(Attrs):
    type_key = "relay.attrs.BatchMatmulAttrs"
    fields = {"out_dtype": Field("", _dtype_or_empty), "transpose_a": Field(False, bool),
              "transpose_b": Field(True, bool)}


class BiasAddAttrs(Attrs):
    type_key = "relay.attrs.BiasAddAttrs"
    fields = {"axis": Field(1, _int)}


class BatchNormAttrs(Attrs):
    type_key = "relay.attrs.BatchNormAttrs"
    fields = {"axis": Field(1, _int), "epsilon": Field(1e-5, float), "center": Field(True, bool),
              "scale": Field(True, bool)}


class LayerNormAttrs(Attrs):
    type_key = "relay.attrs.LayerNormAttrs"
    fields = {"axis": Field(-1, _int), "epsilon": Field(1e-5, float), "center": Field(True, bool),
              "scale": Field(True, bool)}


class GroupNormAttrs(Attrs):
    type_key = "relay.attrs.GroupNormAttrs"
    fields = {"num_groups": Field(0, _int), "axis": Field(1, _int), "epsilon": Field(1e-5, float),
              "center": Field(True, bool), "scale": Field(True, bool)}


class SoftmaxAttrs(Attrs):
    type_key = "relay.attrs.SoftmaxAttrs"
    fields = {"axis": Field(-1, _int)}


class LeakyReluAttrs(Attrs):
    type_key = "relay.attrs.LeakyReluAttrs"
    fields = {"alpha": Field(0.25, float)}


class PReluAttrs(Attrs):
    type_key = "relay.attrs.PReluAttrs"
    fields = {"axis": Field(1, _int)}


class MaxPool2DAttrs(Attrs):
    type_key = "relay.attrs.MaxPool2DAttrs"
    fields = {"pool_size": Field((1, 1), _int_tuple), "strides": Field((1, 1), _int_tuple),
              "dilation": Field((1, 1), _int_tuple), "padding": Field((0, 0, 0, 0), _int_tuple),
              "layout": "NCHW", "out_layout": "", "ceil_mode": Field(False, bool)}


class AvgPool2DAttrs(Attrs):
    type_key = "relay.attrs.AvgPool2DAttrs"
    fields = {"pool_size": Field((1, 1), _int_tuple), "strides": Field((1, 1), _int_tuple),
              "dilation": Field((1, 1), _int_tuple), "padding": Field((0, 0, 0, 0), _int_tuple),
              "layout": "NCHW", "out_layout": "", "ceil_mode": Field(False, bool),
              "count_include_pad": Field(False, bool)}


class GlobalPool2DAttrs(Attrs):
    type_key = "relay.attrs.GlobalPool2DAttrs"
    fields = {"layout": "NCHW", "out_layout": ""}


class AdaptivePool2DAttrs(Attrs):
    type_key = "relay.attrs.AdaptivePool2DAttrs"
    fields = {"output_size": Field(None, _opt_int_tuple), "layout": "NCHW", "out_layout": ""}


class DropoutAttrs(Attrs):
    type_key = "relay.attrs.DropoutAttrs"
    fields = {"rate": Field(0.5, float)}


class PadAttrs(Attrs):
    type_key = "relay.attrs.PadAttrs"
    fields = {"pad_width": Field((), lambda v: tuple(_int_tuple(p) for p in v)), "pad_mode": "constant"}


class UpSamplingAttrs(Attrs):
    type_key = "relay.attrs.UpSamplingAttrs"
    fields = {"scale_h": Field(1.0, float), "scale_w": Field(1.0, float), "layout": "NCHW",
              "method": "nearest_neighbor", "align_corners": Field(False, bool)}


# -- image -------------------------------------------------------------------------------------------
class Resize2DAttrs(Attrs):
    type_key = "relay.attrs.Resize2DAttrs"
    fields = {"size": Field(None, _opt_int_tuple), "roi": Field((0.0, 0.0, 0.0, 0.0), lambda v: tuple(float(x) for x in v)),
              "layout": "NCHW", "method": "linear", "coordinate_transformation_mode": "half_pixel",
              "rounding_method": "round", "cubic_alpha": Field(-0.5, float), "cubic_exclude": Field(0, _int),
              "extrapolation_value": Field(0.0, float), "out_dtype": Field("", _dtype_or_empty)}
