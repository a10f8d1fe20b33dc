"""TE tensors and the operations that produce them (placeholder, compute, extern)."""
from __future__ import annotations

from ..error import KilnError
from ..ir.node import Node
from ..runtime.dtype import parse_dtype
from ..tir import expr as E
from ..tir import op as tir_op
from ..tir.stmt_functor import StmtExprVisitor, StmtExprMutator


class Tensor(Node):
    """Output ``value_index`` of operation ``op``: a symbolic array read as ``T[i, j]``.

    Two Tensor objects are equal when they are the same output of the same operation.
    Tensors are leaves for IR visitors (a ProducerLoad does not walk into the producing op).
    """

    _is_var = True
    _fields = ()
    _var_fields = ()

    def __init__(self, shape, dtype, op, value_index: int):
        self.shape = [tir_op.convert(s) for s in shape]
        self.dtype = dtype
        self.op = op
        self.value_index = int(value_index)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def name(self) -> str:
        if self.op.num_outputs == 1:
            return self.op.name
        return f"{self.op.name}.v{self.value_index}"

    def __iter__(self):
        # without this, Python would iterate by calling A[0], A[1], ... forever
        raise KilnError(f"tensor {self.name} is not iterable: index it inside te.compute (e.g. {self.name}[i]), "
                        f"and pass a list where several tensors are expected (e.g. [{self.name}, ...])")

    def __call__(self, *indices):
        if len(indices) == 1 and isinstance(indices[0], (list, tuple)):
            indices = tuple(indices[0])
        return self._load(indices)

    def __getitem__(self, indices):
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) < self.ndim or any(isinstance(i, slice) for i in indices):
            return TensorSlice(self, indices)  # a region: an argument of a tensor intrinsic call
        return self._load(indices)

    def _load(self, indices):
        for idx in indices:
            if isinstance(idx, slice):
                raise KilnError(f"tensor {self.name}: slicing with ':' is not supported inside compute, except for "
                               "the tensor arguments of a tensor intrinsic call (intrin(A[i, 0:n]))")
        if len(indices) != self.ndim:
            raise KilnError(
                f"tensor {self.name} has {self.ndim} dimension(s) but was indexed with {len(indices)}")
        idx = []
        for i in indices:
            i = tir_op.convert(i)
            if not isinstance(i, E.PrimExpr):
                raise KilnError(f"tensor {self.name}: index {i!r} is not an expression")
            if not parse_dtype(i.dtype).is_integral:
                raise KilnError(f"tensor {self.name}: index {i} has dtype {i.dtype}; tensor indices must be "
                                "integers (cast with .astype('int32') or use // for integer division)")
            idx.append(i)
        return E.ProducerLoad(self, idx)

    # Arithmetic on whole tensors (``A + B``, ``A * 2.0``) is TOPI's broadcasting ops, as in TVM, where
    # importing topi binds them; te itself sits below topi, so it only dispatches through this table.
    def __add__(self, other):
        return _tensor_binop("add", self, other)

    def __radd__(self, other):
        return _tensor_binop("add", other, self)

    def __sub__(self, other):
        return _tensor_binop("subtract", self, other)

    def __rsub__(self, other):
        return _tensor_binop("subtract", other, self)

    def __mul__(self, other):
        return _tensor_binop("multiply", self, other)

    def __rmul__(self, other):
        return _tensor_binop("multiply", other, self)

    def __truediv__(self, other):
        return _tensor_binop("divide", self, other)

    def __rtruediv__(self, other):
        return _tensor_binop("divide", other, self)

    def __hash__(self):
        return hash((id(self.op), self.value_index))

    def __eq__(self, other):
        if isinstance(other, Tensor):
            return self.op is other.op and self.value_index == other.value_index
        if isinstance(other, E.PrimExpr):
            return E.EqualOp(self, other)
        return False

    def __ne__(self, other):
        r = self.__eq__(other)
        return (not r) if isinstance(r, bool) else E.NotEqualOp(self, other)

    def same_as(self, other) -> bool:
        return self is other or self == other

    def astext(self) -> str:
        shape = ", ".join(str(s) for s in self.shape)
        return f"Tensor(shape=[{shape}], op.name={self.op.name})"

    def __repr__(self):
        return self.astext()

    __str__ = __repr__


# name -> f(lhs, rhs) for tensor arithmetic; kiln.topi fills it when imported (register_tensor_binop).
_TENSOR_BINOPS: dict = {}


def register_tensor_binop(name: str, fn) -> None:
    """Make ``fn(lhs, rhs)`` the implementation of tensor operator ``name`` (add, subtract, multiply,
    divide) used by ``Tensor.__add__`` and friends."""
    _TENSOR_BINOPS[name] = fn


def _tensor_binop(name: str, lhs, rhs):
    fn = _TENSOR_BINOPS.get(name)
    if fn is None:
        import importlib
        importlib.import_module("kiln.topi")  # binds the broadcasting ops, as `from tvm import topi` does
        fn = _TENSOR_BINOPS.get(name)
    if fn is None:
        raise KilnError(f"tensor arithmetic ({name}) needs kiln.topi's broadcasting ops, which are not registered")
    return fn(lhs, rhs)


class TensorSlice:
    """A partially indexed tensor (``A[i]`` of a 2-d ``A``); index it further to load."""

    def __init__(self, tensor: Tensor, indices):
        self.tensor = tensor
        self.indices = tuple(indices)

    def __getitem__(self, indices):
        if not isinstance(indices, tuple):
            indices = (indices,)
        return self.tensor[self.indices + indices]

    @property
    def dtype(self):
        return self.tensor.dtype

    def __iter__(self):
        raise KilnError(f"a partially indexed tensor ({self.tensor.name}[...]) is not iterable; index all "
                        f"{self.tensor.ndim} dimensions of {self.tensor.name}")

    def asobject(self):
        return self.tensor._load(self.indices)


def _slice_operator(name):
    def op(self, *args):  # arithmetic on a region loads it (TVM's TensorSlice is an expression): a clear error
        return getattr(self.asobject(), name)(*args)
    op.__name__ = name
    return op


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
              "__floordiv__", "__rfloordiv__", "__mod__", "__neg__", "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(TensorSlice, _name, _slice_operator(_name))


# --------------------------------------------------------------------------------------------
# operations
# --------------------------------------------------------------------------------------------
class Operation(Node):
    """Base of TE operations. Identity semantics: each op is its own node."""

    _is_var = True
    _fields = ()

    name: str = ""
    tag: str = ""

    def __init__(self):
        self._outputs = None
        self.attrs = {}

    def _make_outputs(self, shapes_dtypes):
        self._outputs = [Tensor(shape, dtype, self, i) for i, (shape, dtype) in enumerate(shapes_dtypes)]

    @property
    def num_outputs(self) -> int:
        return len(self._outputs)

    def output(self, index: int) -> Tensor:
        if not 0 <= index < len(self._outputs):
            raise KilnError(f"operation {self.name} has {len(self._outputs)} output(s); output({index}) is out of range")
        return self._outputs[index]

    @property
    def outputs(self):
        return list(self._outputs)

    @property
    def input_tensors(self):
        return []

    @property
    def root_iter_vars(self):
        return []

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other

    def astext(self) -> str:
        return f"{type(self).__name__}({self.name})"

    def __repr__(self):
        return self.astext()

    __str__ = __repr__


class PlaceholderOp(Operation):
    """An input tensor of the computation."""

    def __init__(self, name, shape, dtype):
        super().__init__()
        self.name = name
        self.shape = [tir_op.convert(s) for s in shape]
        self.dtype = dtype
        self._make_outputs([(self.shape, dtype)])


class ComputeOp(Operation):
    """``T[axis...] = body`` for every point of the axes; bodies may be (tuple) reductions."""

    def __init__(self, name, tag, attrs, axis, body):
        super().__init__()
        self.name = name
        self.tag = tag
        self.attrs = dict(attrs or {})
        self.axis = list(axis)
        self.body = [tir_op.convert(b) for b in body]
        _check_body(name, self.body)
        first = self.body[0]
        self.reduce_axis = list(first.axis) if isinstance(first, E.Reduce) else []
        shape = [iv.dom.extent for iv in self.axis]
        self._make_outputs([(shape, b.dtype) for b in self.body])

    @property
    def input_tensors(self):
        return collect_input_tensors(self.body)

    @property
    def root_iter_vars(self):
        return self.axis + self.reduce_axis

    @property
    def num_schedulable_dims(self) -> int:
        return len(self.axis)

    def replace_inputs(self, vmap: dict) -> "ComputeOp":
        """A copy reading ``vmap[t]`` instead of each tensor ``t`` (self when nothing changes)."""
        new_body = replace_tensors(self.body, vmap)
        if all(a is b for a, b in zip(new_body, self.body)):
            return self
        if isinstance(new_body[0], E.Reduce):
            # keep the bodies of a tuple reduction one and the same Reduce (except value_index)
            r = new_body[0]
            new_body = [E.Reduce(r.combiner, r.source, r.axis, r.condition, i, r.init)
                        for i in range(len(new_body))]
        return ComputeOp(self.name, self.tag, self.attrs, self.axis, new_body)


class ExternOp(Operation):
    """An opaque operation whose body is a TIR statement over input/output buffers."""

    def __init__(self, name, tag, attrs, inputs, input_placeholders, output_placeholders, body):
        super().__init__()
        self.name = name
        self.tag = tag
        self.attrs = dict(attrs or {})
        self.inputs = list(inputs)
        self.input_placeholders = list(input_placeholders)
        self.output_placeholders = list(output_placeholders)
        self.body = body
        self._make_outputs([(b.shape, b.dtype) for b in self.output_placeholders])

    @property
    def input_tensors(self):
        return list(self.inputs)

    def replace_inputs(self, vmap: dict) -> "ExternOp":
        new_inputs = [vmap.get(t, t) for t in self.inputs]
        if all(a is b for a, b in zip(new_inputs, self.inputs)):
            return self
        return ExternOp(self.name, self.tag, self.attrs, new_inputs, self.input_placeholders,
                        self.output_placeholders, self.body)


def _check_body(name, body):
    if not body:
        raise KilnError(f"compute {name}: fcompute returned no expression")
    n_reduce = sum(isinstance(b, E.Reduce) for b in body)
    if n_reduce not in (0, len(body)):
        raise KilnError(f"compute {name}: cannot mix reductions and plain expressions in one compute")
    first = body[0]
    for b in body:
        if not isinstance(b, E.PrimExpr):
            raise KilnError(f"compute {name}: fcompute must return expressions, got {type(b).__name__}")
        if isinstance(b, E.Reduce):
            if b.combiner is not first.combiner or len(b.source) != len(first.source):
                raise KilnError(f"compute {name}: all outputs of a tuple reduction must come from one "
                                "reducer call")
            nested = b.source + [b.condition]
        else:
            nested = [b]
        for part in nested:
            _reject_nested_reduce(name, part)


def _reject_nested_reduce(name, expr):
    class _V(StmtExprVisitor):
        def visit_Reduce(self, r):
            raise KilnError(
                f"compute {name}: reductions are only allowed at the top level of a compute body "
                "(write the reduction as its own compute and use its result)")

    _V()(expr)


def collect_input_tensors(exprs):
    """Tensors read (through ProducerLoad) by ``exprs``, in first-read order, without repeats."""
    seen = []
    seen_set = set()

    class _V(StmtExprVisitor):
        def visit_ProducerLoad(self, node):
            t = node.producer
            if t not in seen_set:
                seen_set.add(t)
                seen.append(t)
            for i in node.indices:
                self.visit(i)

    v = _V()
    for e in exprs:
        v(e)
    return seen


class _ReplaceTensors(StmtExprMutator):
    def __init__(self, vmap):
        self.vmap = vmap

    def visit_ProducerLoad(self, node):
        new_idx = self._mutate_value(node.indices)
        t = self.vmap.get(node.producer, node.producer)
        if t is node.producer and new_idx is node.indices:
            return node
        return E.ProducerLoad(t, new_idx)


def replace_tensors(exprs, vmap):
    """Rewrite reads of tensors in ``exprs`` by ``vmap`` (Tensor -> Tensor)."""
    if not vmap:
        return list(exprs)
    m = _ReplaceTensors(vmap)
    return [m(e) for e in exprs]
