"""Constructors of TE tensors and axes: placeholder, compute, extern, reduce_axis, thread_axis."""
from __future__ import annotations

import inspect
from contextlib import ContextDecorator

from ..runtime.dtype import parse_dtype
from ..tir import expr as E, op as tir_op, stmt as S
from ..tir.buffer import decl_buffer
from .tensor import ComputeOp, ExternOp, PlaceholderOp, Tensor, TensorSlice
from ..error import KilnError, OpNotImplemented


def var(name: str = "tindex", dtype: str = "int32", span=None) -> E.Var:
    """A symbolic scalar variable (``te.var``)."""
    return E.Var(name, dtype)


def size_var(name: str = "size", dtype: str = "int32", span=None) -> E.SizeVar:
    """A non-negative symbolic variable, for shapes (``te.size_var``)."""
    return E.SizeVar(name, dtype)


def const(value, dtype=None, span=None):
    return tir_op.const(value, dtype)


def _shape_of(shape, what):
    if isinstance(shape, (int, E.PrimExpr)):
        shape = (shape,)
    if not isinstance(shape, (list, tuple)):
        raise KilnError(f"{what}: shape must be a tuple of integers/expressions, got {shape!r}")
    out = []
    for s in shape:
        s = tir_op.convert(s)
        if not isinstance(s, E.PrimExpr) or not parse_dtype(s.dtype).is_integral:
            raise KilnError(f"{what}: shape entry {s!r} is not an integer expression")
        if isinstance(s, E.IntImm) and s.value < 0:
            raise KilnError(f"{what}: negative extent {s.value} in shape {tuple(shape)}")
        out.append(s)
    return out


def placeholder(shape, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of the given shape and dtype (``te.placeholder``)."""
    dtype = str(parse_dtype(dtype or "float32"))
    return PlaceholderOp(name, _shape_of(shape, f"placeholder {name}"), dtype).output(0)


# --------------------------------------------------------------------------------------------
# tag scope (topi marks elementwise/broadcast/injective computes with it)
# --------------------------------------------------------------------------------------------
class TagScope(ContextDecorator):
    """``with te.tag_scope("elemwise"):`` / ``@te.tag_scope(tag)``: default tag of computes."""

    _current = None

    def __init__(self, tag: str):
        self.tag = tag
        self._prev = None

    def __enter__(self):
        if TagScope._current is not None:
            raise KilnError("nested te.tag_scope is not allowed")
        self._prev = TagScope._current
        TagScope._current = self
        return self

    def __exit__(self, *exc):
        TagScope._current = self._prev
        return False


def tag_scope(tag: str) -> TagScope:
    return TagScope(tag)


# --------------------------------------------------------------------------------------------
# compute
# --------------------------------------------------------------------------------------------
def _arg_names(fcompute, ndim, name):
    try:
        sig = inspect.signature(fcompute)
    except (TypeError, ValueError):
        return [f"i{i}" for i in range(ndim)]
    params = list(sig.parameters.values())
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        fixed = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return fixed + [f"i{i}" for i in range(len(fixed), ndim)]
    names = [p.name for p in params
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    if len(names) != ndim:
        raise KilnError(
            f"compute {name}: fcompute takes {len(names)} argument(s) {names} but the shape has "
            f"{ndim} dimension(s); it must take one index variable per output axis")
    return names


def _n_fixed_args(fcompute):
    """How many index variables ``fcompute`` takes, or None (``*args`` or no signature)."""
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return None
    return len([p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty])


def compute(shape, fcompute, name: str = "compute", tag: str = "", attrs=None, varargs_names=None):
    """A tensor whose element at ``(i, j, ...)`` is ``fcompute(i, j, ...)`` (``te.compute``).

    ``fcompute`` may return a tuple/list of expressions for a multi-output op (then a list of
    tensors is returned), including the outputs of a tuple reducer such as argmax.
    """
    if TagScope._current is not None:
        if tag != "":
            raise KilnError("compute: do not give a tag inside te.tag_scope")
        tag = TagScope._current.tag
    shape = _shape_of(shape, f"compute {name}")
    ndim = len(shape)
    n_fixed = _n_fixed_args(fcompute)
    if n_fixed is not None and n_fixed < ndim:  # the lambda returns a tensor intrinsic call (TensorComputeOp)
        from .tensor_compute import tensor_compute
        return tensor_compute(name, tag, attrs, shape, _arg_names(fcompute, n_fixed, name), fcompute)
    names = _arg_names(fcompute, ndim, name)
    axis = [E.IterVar(E.Range.from_min_extent(tir_op.const(0, s.dtype), s), E.Var(n, s.dtype), E.IterVar.DataPar)
            for n, s in zip(names, shape)]
    body = fcompute(*[iv.var for iv in axis])
    from .tensor_compute import TensorIntrinCall, tensor_compute
    if isinstance(body, TensorIntrinCall):  # one intrinsic call per element (TVM's TensorComputeOp)
        return tensor_compute(name, tag, attrs, shape, names, body, axis)
    multi = isinstance(body, (list, tuple))
    bodies = list(body) if multi else [body]
    conv = []
    for b in bodies:
        if isinstance(b, TensorSlice):
            b = b.asobject()
        b = tir_op.convert(b)
        if isinstance(b, Tensor):
            raise KilnError(f"compute {name}: fcompute returned a tensor; index it to return an element")
        if not isinstance(b, E.PrimExpr):
            raise KilnError(f"compute {name}: fcompute returned {b!r}, which is not an expression")
        if isinstance(b, E.StringImm) or parse_dtype(b.dtype).is_handle:
            raise KilnError(f"compute {name}: fcompute returned {b!r} of type {b.dtype}; a tensor element must be "
                            "a number (int, uint, float or bool expression)")
        conv.append(b)
    op = ComputeOp(name, tag, attrs, axis, conv)
    outs = op.outputs
    return outs if multi else outs[0]


# --------------------------------------------------------------------------------------------
# extern
# --------------------------------------------------------------------------------------------
def extern(shape, inputs, fcompute, name: str = "extern", dtype=None, in_buffers=None,
           out_buffers=None, tag: str = "", attrs=None):
    """Tensors computed by an arbitrary TIR statement (``te.extern``), e.g. a library call.

    ``fcompute(ins, outs)`` receives Buffers of the inputs and outputs and returns a Stmt (or an
    expression, evaluated for its side effect, such as ``tvm.tir.call_packed(...)``).
    """
    if TagScope._current is not None:
        tag = tag or TagScope._current.tag
    single = not (isinstance(shape, (list, tuple)) and shape and isinstance(shape[0], (list, tuple)))
    shapes = [shape] if single else list(shape)
    shapes = [_shape_of(s, f"extern {name}") for s in shapes]
    inputs = list(inputs)
    if dtype is None:
        if not inputs:
            raise KilnError(f"extern {name}: give dtype when there are no inputs")
        dtypes = [inputs[0].dtype] * len(shapes)
    else:
        dtypes = list(dtype) if isinstance(dtype, (list, tuple)) else [dtype] * len(shapes)
    if in_buffers is None:
        in_buffers = [decl_buffer(t.shape, t.dtype, name=t.name) for t in inputs]
    else:
        in_buffers = list(in_buffers) if isinstance(in_buffers, (list, tuple)) else [in_buffers]
    if out_buffers is None:
        out_buffers = [decl_buffer(s, d, name=name) for s, d in zip(shapes, dtypes)]
    else:
        out_buffers = list(out_buffers) if isinstance(out_buffers, (list, tuple)) else [out_buffers]
    if len(in_buffers) != len(inputs):
        raise KilnError(f"extern {name}: {len(in_buffers)} in_buffers for {len(inputs)} inputs")
    body = fcompute(in_buffers, out_buffers)
    if isinstance(body, E.PrimExpr):
        body = S.Evaluate(body)
    if not isinstance(body, S.Stmt):
        raise KilnError(f"extern {name}: fcompute must return a TIR statement or expression, got {body!r}")
    op = ExternOp(name, tag, attrs, inputs, in_buffers, out_buffers, body)
    outs = op.outputs
    return outs[0] if len(outs) == 1 else outs


# --------------------------------------------------------------------------------------------
# axes
# --------------------------------------------------------------------------------------------
def _as_range(dom, what):
    if isinstance(dom, E.Range):
        return dom
    if isinstance(dom, (list, tuple)) and len(dom) == 2:
        return E.Range(dom[0], dom[1])
    if isinstance(dom, (int, E.PrimExpr)):
        return E.Range(0, dom)
    raise KilnError(f"{what}: domain must be a Range or a (begin, end) pair, got {dom!r}")


def reduce_axis(dom, name: str = "rv", thread_tag: str = "", span=None) -> E.IterVar:
    """A reduction axis over ``dom`` ((begin, end) or Range) (``te.reduce_axis``)."""
    r = _as_range(dom, f"reduce_axis {name}")
    return E.IterVar(r, E.Var(name, r.extent.dtype), E.IterVar.CommReduce, thread_tag)


def thread_axis(dom=None, tag: str = "", name: str = "", span=None) -> E.IterVar:
    """A GPU thread axis (``te.thread_axis("threadIdx.x")``), bound to loops with ``Stage.bind``."""
    if isinstance(dom, str):
        tag, dom = dom, None
    if not tag:
        raise KilnError("thread_axis needs a thread tag such as 'threadIdx.x' or 'blockIdx.x'")
    name = name or tag
    r = _as_range(dom, f"thread_axis {tag}") if dom is not None else None
    return E.IterVar(r, E.Var(name, "int32"), E.IterVar.ThreadIndex, tag)


def _not_built(name):
    def fn(*args, **kwargs):
        raise OpNotImplemented(f"te.{name} is not implemented in kiln (use te.compute / te.extern instead)")
    fn.__name__ = name
    return fn



create_prim_func = _not_built("create_prim_func")
from .tensor_intrin import decl_tensor_intrin  # noqa: E402,F401 - te.decl_tensor_intrin
