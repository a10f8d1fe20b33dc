"""``nn.cross_entropy`` and ``nn.cross_entropy_with_logits`` (TVM's loss ops, used by training graphs).

Both take 2-D ``predictions`` and ``targets`` of one shape ``(batch, classes)`` and return a scalar of the
predictions' dtype, the loss averaged over the batch (axis 0):

* ``cross_entropy(x, y) = -sum(log(x) * y) / batch`` (``x`` holds probabilities);
* ``cross_entropy_with_logits(x, y) = -sum(x * y) / batch`` (``x`` holds log-probabilities, e.g. a
  ``log_softmax`` output; TVM's naming).

Compiled as a reduction (TVM registers the reduce schedule); gradients live in ``_tensor_grad.py``.
"""
from __future__ import annotations

import numpy as np

from ....error import TypeInferenceError
from ....ir.op import Op, OpPattern
from ....ir.type import TensorType
from ...expr import Call
from .._define import define_op
from ..op import register_reduce_schedule
from ..type_relations import shape_text, tensor_arg

__all__ = ["cross_entropy", "cross_entropy_with_logits"]


def _cross_entropy_rel(arg_types, attrs):
    x = tensor_arg(arg_types, 0, "predictions")
    y = tensor_arg(arg_types, 1, "targets")
    if len(x.shape) != 2 or len(y.shape) != 2:
        raise TypeInferenceError(f"cross_entropy: predictions {shape_text(x.shape)} and targets "
                                 f"{shape_text(y.shape)} must both be 2-d (batch, classes)")
    if tuple(x.shape) != tuple(y.shape):
        raise TypeInferenceError(f"cross_entropy: predictions {shape_text(x.shape)} and targets "
                                 f"{shape_text(y.shape)} must have one shape")
    if x.dtype != y.dtype:
        raise TypeInferenceError(f"cross_entropy: predictions are {x.dtype} but targets are {y.dtype}")
    return TensorType((), x.dtype)


def _reference(with_logits: bool):
    def ref(attrs, inputs, out_type):
        x, y = (np.asarray(v, dtype=np.float64) for v in inputs)
        terms = x * y if with_logits else np.log(x) * y
        return np.asarray(-terms.sum() / x.shape[0])
    return ref


def _compute(with_logits: bool):
    def compute(attrs, inputs, out_type):
        from .... import te, tir, topi
        x, y = inputs
        terms = topi.multiply(x if with_logits else topi.log(x), y)
        total = topi.sum(terms)
        dtype = str(out_type.dtype)
        batch = tir.const(float(int(x.shape[0])), dtype)
        return [te.compute((), lambda: -total() / batch, name="T_cross_entropy")]
    compute.__name__ = "compute_cross_entropy" + ("_with_logits" if with_logits else "")
    return compute


for _name, _logits in (("nn.cross_entropy", False), ("nn.cross_entropy_with_logits", True)):
    define_op(_name, num_inputs=2, args=("x", "y"), rel=_cross_entropy_rel, rel_name="CrossEntropy",
              pattern=OpPattern.OPAQUE, reference=_reference(_logits), compute=_compute(_logits), level=10,
              describe="Cross entropy averaged over the batch" + (" (x holds log-probabilities)" if _logits else ""))
    if not Op.get(_name).has_attr("FTVMStrategy"):
        register_reduce_schedule(_name)


def cross_entropy(predictions, targets):
    """``-sum(log(predictions) * targets) / batch`` (TVM's ``relay.nn.cross_entropy``)."""
    return Call(Op.get("nn.cross_entropy"), [predictions, targets])


def cross_entropy_with_logits(predictions, targets):
    """``-sum(predictions * targets) / batch``, predictions being log-probabilities (TVM's
    ``relay.nn.cross_entropy_with_logits``)."""
    return Call(Op.get("nn.cross_entropy_with_logits"), [predictions, targets])
