"""TEST-ONLY operators for the graph-pass tests (names under ``ftest.``; never real op names).

They carry the fusion patterns of their real counterparts so FuseOps can be checked before (and
independently of) the real operator set.
"""
from __future__ import annotations

import numpy as np

from kiln.error import TypeInferenceError
from kiln.ir import Attrs, OpPattern, TensorType, TupleType, register_op, register_op_attr


class FTestConvAttrs(Attrs):
    type_key = "relay.attrs.FTestConvAttrs"
    fields = {"channels": 0}


def _same(arg_types, attrs):
    return TensorType(arg_types[0].shape, arg_types[0].dtype)


def _bcast(arg_types, attrs):
    a, b = arg_types
    if a.dtype != b.dtype:
        raise TypeInferenceError(f"dtypes differ: {a.dtype} vs {b.dtype}")
    return TensorType(np.broadcast_shapes(a.shape, b.shape), a.dtype)


def _conv(arg_types, attrs):
    # (N, C, H, W) x (O, C, 1, 1) -> (N, O, H, W): a 1x1 convolution
    x, w = arg_types
    return TensorType((x.shape[0], w.shape[0]) + tuple(x.shape[2:]), x.dtype)


def _conv_ref(attrs, ins, out_type):
    x, w = ins
    return np.einsum("nchw,oc->nohw", x, w[:, :, 0, 0]).astype(x.dtype)


def _sum(arg_types, attrs):
    x = arg_types[0]
    return TensorType(x.shape[:1], x.dtype)


def _concat(arg_types, attrs):
    (tup,) = arg_types
    if not isinstance(tup, TupleType):
        raise TypeInferenceError("ftest.concat takes a tuple")
    first = tup.fields[0]
    c = sum(f.shape[1] for f in tup.fields)
    return TensorType((first.shape[0], c) + tuple(first.shape[2:]), first.dtype)


def _split(arg_types, attrs):
    x = arg_types[0]
    half = TensorType((x.shape[0], x.shape[1] // 2) + tuple(x.shape[2:]), x.dtype)
    return TupleType([half, half])


_OPS = {
    # name: (num_inputs, relation, pattern, reference)
    "ftest.conv": (2, _conv, OpPattern.OUT_ELEMWISE_FUSABLE, _conv_ref),
    "ftest.add": (2, _bcast, OpPattern.BROADCAST, lambda a, i, t: i[0] + i[1]),
    "ftest.mul": (2, _bcast, OpPattern.BROADCAST, lambda a, i, t: i[0] * i[1]),
    "ftest.relu": (1, _same, OpPattern.ELEMWISE, lambda a, i, t: np.maximum(i[0], 0)),
    "ftest.exp": (1, _same, OpPattern.ELEMWISE, lambda a, i, t: np.exp(i[0])),
    "ftest.copy": (1, _same, OpPattern.INJECTIVE, lambda a, i, t: i[0].copy()),
    "ftest.sum": (1, _sum, OpPattern.COMM_REDUCE,
                  lambda a, i, t: i[0].reshape(i[0].shape[0], -1).sum(axis=1)),
    "ftest.concat": (1, _concat, OpPattern.INJECTIVE, lambda a, i, t: np.concatenate(i[0], axis=1)),
    "ftest.split": (1, _split, OpPattern.INJECTIVE, lambda a, i, t: tuple(np.split(i[0], 2, axis=1))),
    "ftest.opaque": (1, _same, OpPattern.OPAQUE, lambda a, i, t: i[0] + 1),
    "ftest.random": (1, _same, OpPattern.OPAQUE, lambda a, i, t: np.random.rand(*i[0].shape).astype(i[0].dtype)),
}


def register():
    for name, (n, rel, pattern, ref) in _OPS.items():
        op = register_op(name, "test-only op for the graph pass tests")
        if op.has_attr("FTypeRelation"):
            continue
        op.set_num_inputs(n)
        op.add_type_rel(name, rel)
        register_op_attr(name, "TOpPattern", pattern)
        register_op_attr(name, "FReference", ref)
    register_op_attr("ftest.random", "TOpIsStateful", True)


register()
