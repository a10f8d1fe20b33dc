"""Layer helpers that create their own parameters (TVM's ``relay.testing.layers``).

Parameters are created with explicit shapes, worked out from the input's type, so models build as fully
annotated programs.
"""
from __future__ import annotations

import weakref

from ...error import KilnError
from ...ir.op import Op
from ...ir.type import TensorType, TupleType
from .. import op as _op
from ..transform import InferTypeLocal
from ..expr import Call, Constant, Tuple, TupleGetItem, Var, var

_TYPES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def type_of(expr):
    """The type of a (fully annotated) expression, found with the ops' type relations and cached."""
    try:
        cached = _TYPES.get(expr)
    except TypeError:
        cached = None
    if cached is not None:
        return cached
    t = getattr(expr, "_checked_type_", None)
    if t is None:
        if isinstance(expr, Var):
            t = expr.type_annotation
            if t is None:
                raise KilnError(f"layers: %{expr.name_hint} has no type annotation; cannot size the next layer")
        elif isinstance(expr, Constant):
            t = TensorType(expr.numpy().shape, str(expr.numpy().dtype))
        elif isinstance(expr, Call) and isinstance(expr.op, Op):
            t = expr.op.get_attr("FTypeRelation")([type_of(a) for a in expr.args], expr.attrs)
        elif isinstance(expr, TupleGetItem):
            t = type_of(expr.tuple_value).fields[expr.index]
        elif isinstance(expr, Tuple):
            t = TupleType([type_of(f) for f in expr.fields])
        else:
            t = InferTypeLocal(expr)
    try:
        _TYPES[expr] = t
    except TypeError:
        pass
    return t


def shape_of(expr) -> tuple:
    return tuple(type_of(expr).shape)


def _name(kwargs) -> str:
    name = kwargs.pop("name", None)
    if name is None:
        raise KilnError("layers: give the layer a name= (its parameters are named after it)")
    return name


def _var(name, shape, dtype):
    return var(name, shape=shape, dtype=dtype)


def conv_kernel_layout(data_layout: str, is_depthwise: bool = False) -> str:
    """The kernel layout that goes with a data layout (OIHW for NCHW, HWIO/HWOI for NHWC)."""
    table = {"NCHW": "OIHW", "NHWC": "HWOI" if is_depthwise else "HWIO"}
    if data_layout not in table:
        raise KilnError(f"no default kernel layout for data layout {data_layout!r}")
    return table[data_layout]


def _kernel_shape(layout: str, o: int, i: int, kh: int, kw: int) -> tuple:
    dims = {"O": o, "I": i, "H": kh, "W": kw}
    return tuple(dims[c] for c in layout)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def conv2d(data, weight=None, **kwargs):
    """``nn.conv2d`` with a weight named ``<name>_weight`` sized from ``channels``, ``kernel_size`` and the input."""
    name = _name(kwargs)
    if weight is None:
        t = type_of(data)
        layout = kwargs.get("data_layout", "NCHW")
        klayout = kwargs.get("kernel_layout", "OIHW")
        groups = kwargs.get("groups", 1)
        kh, kw = _pair(kwargs["kernel_size"])
        cin = t.shape[layout.index("C")]
        weight = _var(name + "_weight", _kernel_shape(klayout, kwargs["channels"], cin // groups, kh, kw), t.dtype)
    return _op.nn.conv2d(data, weight, **kwargs)


def conv2d_transpose(data, weight=None, **kwargs):
    """``nn.conv2d_transpose`` with a weight named ``<name>_weight`` (IOHW)."""
    name = _name(kwargs)
    if weight is None:
        t = type_of(data)
        layout = kwargs.get("data_layout", "NCHW")
        klayout = kwargs.get("kernel_layout", "IOHW")
        kh, kw = _pair(kwargs["kernel_size"])
        cin = t.shape[layout.index("C")]
        groups = kwargs.get("groups", 1)
        dims = {"I": cin, "O": kwargs["channels"] // groups, "H": kh, "W": kw}
        weight = _var(name + "_weight", tuple(dims[c] for c in klayout), t.dtype)
    return _op.nn.conv2d_transpose(data, weight, **kwargs)


def dense_add_bias(data, weight=None, bias=None, units=None, **kwargs):
    """``nn.dense`` + ``nn.bias_add`` with ``<name>_weight`` [units, K] and ``<name>_bias`` [units]."""
    name = _name(kwargs)
    t = type_of(data)
    if weight is None:
        weight = _var(name + "_weight", (units, t.shape[-1]), t.dtype)
    if bias is None:
        bias = _var(name + "_bias", (units,), t.dtype)
    out = _op.nn.dense(data, weight, units, **kwargs)
    return _op.nn.bias_add(out, bias, axis=-1)


def batch_norm_infer(data, gamma=None, beta=None, moving_mean=None, moving_var=None, **kwargs):
    """Field 0 of ``nn.batch_norm`` with ``<name>_gamma/_beta/_moving_mean/_moving_var`` parameters."""
    name = _name(kwargs)
    t = type_of(data)
    c = t.shape[kwargs.get("axis", 1)]
    gamma = gamma if gamma is not None else _var(name + "_gamma", (c,), t.dtype)
    beta = beta if beta is not None else _var(name + "_beta", (c,), t.dtype)
    moving_mean = moving_mean if moving_mean is not None else _var(name + "_moving_mean", (c,), t.dtype)
    moving_var = moving_var if moving_var is not None else _var(name + "_moving_var", (c,), t.dtype)
    return _op.nn.batch_norm(data, gamma, beta, moving_mean, moving_var, **kwargs)[0]


def bias_add(data, name: str, axis: int = 1):
    """``nn.bias_add`` with a bias named ``name`` sized from the input."""
    t = type_of(data)
    return _op.nn.bias_add(data, _var(name, (t.shape[axis],), t.dtype), axis=axis)
