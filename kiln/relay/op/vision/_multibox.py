"""``vision.multibox_prior`` and ``vision.multibox_transform_loc`` (TVM's SSD ops): attrs, type relations,
shape functions and numpy references (``kiln.topi.testing.multibox_python``); kernels in
``kiln.topi.vision.ssd``."""
from __future__ import annotations

from ....error import OpNotImplemented, TypeInferenceError
from ....ir.attrs import Attrs, Field
from ....ir.op import OpPattern
from ....ir.type import TensorType, TupleType
from ....tir.expr import Any
from ....topi.testing.multibox_python import multibox_prior_python, multibox_transform_loc_python
from .._define import define_op, topi_compute
from ..op import register_shape_func
from ..type_relations import is_any, shape_text, tensor_arg


def _floats(value) -> tuple:
    return tuple(float(v) for v in value)


class MultiBoxPriorAttrs(Attrs):
    type_key = "relay.attrs.MultiBoxPriorAttrs"
    fields = {"sizes": Field((1.0,), _floats), "ratios": Field((1.0,), _floats), "steps": Field((-1.0, -1.0), _floats),
              "offsets": Field((0.5, 0.5), _floats), "clip": Field(False, bool)}


def _prior_count(attrs) -> int:
    if not attrs.sizes or not attrs.ratios or len(attrs.steps) != 2 or len(attrs.offsets) != 2:
        raise TypeInferenceError(f"multibox_prior: sizes and ratios must be non-empty, steps and offsets pairs; got "
                                 f"{attrs.sizes}, {attrs.ratios}, {attrs.steps}, {attrs.offsets}")
    return len(attrs.sizes) + len(attrs.ratios) - 1


def _prior_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    if len(data.shape) != 4:
        raise TypeInferenceError(f"multibox_prior: data must be 4-d NCHW, got {shape_text(data.shape)}")
    h, w = data.shape[2:]
    n = Any() if is_any(h) or is_any(w) else h * w * _prior_count(attrs)
    return TensorType((1, n, 4), data.dtype)


define_op("vision.multibox_prior", num_inputs=1, args=("data",), attrs=MultiBoxPriorAttrs, rel=_prior_rel,
          rel_name="MultiBoxPrior", pattern=OpPattern.OPAQUE, level=5,
          reference=lambda a, i, t: multibox_prior_python(i[0].shape, a.sizes, a.ratios, a.steps, a.offsets, a.clip),
          compute=topi_compute("vision.ssd.multibox_prior", "vision.multibox_prior", lambda a, i, t: [
              i[0], a.sizes, a.ratios, a.steps, a.offsets, a.clip]))
register_shape_func("vision.multibox_prior", False, lambda attrs, inputs, out_ndims: [
    (1, tuple(inputs[0])[2] * tuple(inputs[0])[3] * _prior_count(attrs), 4)])


class MultiBoxTransformLocAttrs(Attrs):
    type_key = "relay.attrs.MultiBoxTransformLocAttrs"
    fields = {"clip": Field(True, bool), "threshold": Field(0.01, float),
              "variances": Field((0.1, 0.1, 0.2, 0.2), _floats), "keep_background": Field(False, bool)}


def _tl_rel(arg_types, attrs):
    cls, loc, anc = (tensor_arg(arg_types, k, n) for k, n in enumerate(("cls_prob", "loc_pred", "anchor")))
    if len(cls.shape) != 3 or len(loc.shape) != 2 or len(anc.shape) != 3:
        raise TypeInferenceError(f"multibox_transform_loc: expected cls_prob [B, C, A], loc_pred [B, A*4] and anchor "
                                 f"[1, A, 4], got {shape_text(cls.shape)}, {shape_text(loc.shape)}, "
                                 f"{shape_text(anc.shape)}")
    b, _, a = cls.shape
    if not is_any(a) and ((not is_any(loc.shape[1]) and loc.shape[1] != a * 4)
                          or (not is_any(anc.shape[1]) and anc.shape[1] != a)):
        raise TypeInferenceError(f"multibox_transform_loc: {a} anchors need loc_pred [B, {a * 4}] and anchor "
                                 f"[1, {a}, 4], got {shape_text(loc.shape)} and {shape_text(anc.shape)}")
    if len(attrs.variances) != 4:
        raise TypeInferenceError(f"multibox_transform_loc: variances must hold 4 numbers, got {attrs.variances}")
    if attrs.keep_background:
        raise OpNotImplemented("multibox_transform_loc with keep_background=True is not implemented in kiln")
    return TupleType([TensorType((b, a, 6), loc.dtype), TensorType((b,), "int32")])


define_op("vision.multibox_transform_loc", num_inputs=3, args=("cls_prob", "loc_pred", "anchor"),
          attrs=MultiBoxTransformLocAttrs, rel=_tl_rel, rel_name="MultiBoxTransformLoc", pattern=OpPattern.OPAQUE,
          level=5, reference=lambda a, i, t: multibox_transform_loc_python(i[0], i[1], i[2], a.clip, a.threshold,
                                                                          a.variances),
          compute=topi_compute("vision.ssd.multibox_transform_loc", "vision.multibox_transform_loc",
                               lambda a, i, t: [i[0], i[1], i[2], a.clip, a.threshold, a.variances,
                                                a.keep_background]))
register_shape_func("vision.multibox_transform_loc", False, lambda attrs, inputs, out_ndims: [
    (tuple(inputs[0])[0], tuple(inputs[0])[2], 6), (tuple(inputs[0])[0],)])
