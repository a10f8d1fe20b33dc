"""TIR expressions: the scalar (and vector) expression language of loop nests.

Every expression has a ``dtype`` string. Python operators build new expressions through
:mod:`kiln.tir.op`, which folds constants as it goes. As in TVM, ``==`` on expressions
builds an ``EqualOp`` that turns into a bool by reference identity, so expressions can key
dicts; use :func:`kiln.ir.structural_equal` to compare structure.
"""
from __future__ import annotations

from ..error import KilnError, DataTypeError
from ..ir.node import Node
from ..runtime.dtype import parse_dtype
from . import op  # op.py is built on this module's classes and reads them when called


def _is_int_dtype(dtype: str) -> bool:
    return parse_dtype(dtype).is_integral


class PrimExpr(Node):
    """Base of all TIR expressions."""

    dtype: str

    # -- Python operators ------------------------------------------------------------------
    def __add__(self, other):
        return op.add(self, other)

    def __radd__(self, other):
        return op.add(other, self)

    def __sub__(self, other):
        return op.sub(self, other)

    def __rsub__(self, other):
        return op.sub(other, self)

    def __mul__(self, other):
        return op.mul(self, other)

    def __rmul__(self, other):
        return op.mul(other, self)

    def __truediv__(self, other):
        return op.true_divide(self, other)

    def __rtruediv__(self, other):
        return op.true_divide(other, self)

    def __floordiv__(self, other):
        return op.floordiv(self, other)

    def __rfloordiv__(self, other):
        return op.floordiv(other, self)

    def __mod__(self, other):
        return op.floormod(self, other)

    def __rmod__(self, other):
        return op.floormod(other, self)

    def __neg__(self):
        return op.neg(self)

    def __lt__(self, other):
        return op.less(self, other)

    def __le__(self, other):
        return op.less_equal(self, other)

    def __gt__(self, other):
        return op.greater(self, other)

    def __ge__(self, other):
        return op.greater_equal(self, other)

    def __eq__(self, other):
        return EqualOp(self, other)

    def __ne__(self, other):
        return NotEqualOp(self, other)

    def __hash__(self):
        return id(self)

    def __and__(self, other):
        return op.bitwise_and(self, other)

    def __rand__(self, other):
        return op.bitwise_and(other, self)

    def __or__(self, other):
        return op.bitwise_or(self, other)

    def __ror__(self, other):
        return op.bitwise_or(other, self)

    def __xor__(self, other):
        return op.bitwise_xor(self, other)

    def __invert__(self):
        return op.bitwise_not(self)

    def __lshift__(self, other):
        return op.shift_left(self, other)

    def __rshift__(self, other):
        return op.shift_right(self, other)

    def __bool__(self):
        raise KilnError(
            f"cannot use the symbolic expression `{self}` as a Python bool; "
            "use kiln.tir.all / kiln.tir.any / if_then_else to build conditions"
        )

    def equal(self, other):
        """Build an ``EQ`` node (``==`` compares identity, as in TVM)."""
        return op.equal(self, other)

    def astype(self, dtype: str):
        return op.cast(self, dtype)

    def astext(self) -> str:
        from .printer import expr_to_str
        return expr_to_str(self)


class EqualOp:
    """Deferred ``a == b``: a bool by identity, an ``EQ`` node via :meth:`asobject`."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __bool__(self):
        return self.a is self.b

    def __nonzero__(self):
        return self.__bool__()

    def asobject(self):
        return op.equal(self.a, self.b)


class NotEqualOp(EqualOp):
    def __bool__(self):
        return self.a is not self.b

    def asobject(self):
        return op.not_equal(self.a, self.b)


# --------------------------------------------------------------------------------------------
# Leaves
# --------------------------------------------------------------------------------------------
class Var(PrimExpr):
    """A named scalar variable (loop variable, shape variable, buffer data pointer)."""

    _is_var = True
    _fields = ("dtype",)
    _var_fields = ("dtype",)

    def __init__(self, name: str = "v", dtype="int32"):
        self.name = name
        self.dtype = str(parse_dtype(dtype))

    @property
    def name_hint(self) -> str:
        return self.name


class SizeVar(Var):
    """A variable known to be non-negative (a shape dimension)."""


class IntImm(PrimExpr):
    _fields = ("dtype", "value")

    def __init__(self, dtype, value: int):
        self.dtype = str(parse_dtype(dtype))
        self.value = int(value)

    def __int__(self):
        return self.value

    def __index__(self):
        return self.value

    def __bool__(self):
        return self.value != 0

    def __float__(self):
        return float(self.value)


class FloatImm(PrimExpr):
    _fields = ("dtype", "value")

    def __init__(self, dtype, value: float):
        self.dtype = str(parse_dtype(dtype))
        self.value = float(value)

    def __float__(self):
        return self.value


class StringImm(PrimExpr):
    _fields = ("value",)

    def __init__(self, value: str):
        self.dtype = "handle"
        self.value = value

    def __eq__(self, other):
        if isinstance(other, str):
            return self.value == other
        return EqualOp(self, other)

    __hash__ = PrimExpr.__hash__


# --------------------------------------------------------------------------------------------
# Unary / binary arithmetic and logic
# --------------------------------------------------------------------------------------------
class Cast(PrimExpr):
    _fields = ("dtype", "value")

    def __init__(self, dtype, value: PrimExpr):
        self.dtype = str(parse_dtype(dtype))
        self.value = value


class BinaryOpExpr(PrimExpr):
    """``a <op> b`` with both operands of the same dtype (the op module matches them)."""

    _fields = ("a", "b")
    symbol = "?"

    def __init__(self, a: PrimExpr, b: PrimExpr):
        if a.dtype != b.dtype:
            raise DataTypeError(
                f"{type(self).__name__}: operand dtypes differ ({a.dtype} vs {b.dtype}); "
                "use kiln.tir.op functions, which insert casts"
            )
        self.a, self.b = a, b
        self.dtype = self._result_dtype(a.dtype)

    @staticmethod
    def _result_dtype(dtype: str) -> str:
        return dtype


class CmpExpr(BinaryOpExpr):
    @staticmethod
    def _result_dtype(dtype: str) -> str:
        lanes = parse_dtype(dtype).lanes
        return "bool" if lanes == 1 else f"boolx{lanes}"


class Add(BinaryOpExpr):
    symbol = "+"


class Sub(BinaryOpExpr):
    symbol = "-"


class Mul(BinaryOpExpr):
    symbol = "*"


class Div(BinaryOpExpr):
    """Division rounding toward zero for integers (C semantics); true division for floats."""
    symbol = "/"


class Mod(BinaryOpExpr):
    """Remainder with the sign of the dividend (C ``%``)."""
    symbol = "%"


class FloorDiv(BinaryOpExpr):
    symbol = "//"


class FloorMod(BinaryOpExpr):
    symbol = "%"


class Min(BinaryOpExpr):
    symbol = "min"


class Max(BinaryOpExpr):
    symbol = "max"


class EQ(CmpExpr):
    symbol = "=="


class NE(CmpExpr):
    symbol = "!="


class LT(CmpExpr):
    symbol = "<"


class LE(CmpExpr):
    symbol = "<="


class GT(CmpExpr):
    symbol = ">"


class GE(CmpExpr):
    symbol = ">="


class And(BinaryOpExpr):
    symbol = "&&"


class Or(BinaryOpExpr):
    symbol = "||"


class Not(PrimExpr):
    _fields = ("a",)

    def __init__(self, a: PrimExpr):
        self.a = a
        self.dtype = a.dtype


class Select(PrimExpr):
    """``condition ? true_value : false_value``; both branches may be evaluated."""

    _fields = ("condition", "true_value", "false_value")

    def __init__(self, condition, true_value, false_value):
        if true_value.dtype != false_value.dtype:
            raise DataTypeError(
                f"Select branches differ in dtype: {true_value.dtype} vs {false_value.dtype}"
            )
        self.condition, self.true_value, self.false_value = condition, true_value, false_value
        self.dtype = true_value.dtype


# --------------------------------------------------------------------------------------------
# Memory access, vectors, let, calls
# --------------------------------------------------------------------------------------------
class BufferLoad(PrimExpr):
    """``buffer[indices]``; after flattening, one index (possibly a Ramp for vector loads)."""

    _fields = ("buffer", "indices")

    def __init__(self, buffer, indices):
        self.buffer = buffer
        self.indices = [op.convert(i) for i in indices]
        lanes = 1
        for idx in self.indices:
            lanes = max(lanes, parse_dtype(idx.dtype).lanes)
        self.dtype = buffer.dtype if lanes == 1 else str(parse_dtype(buffer.dtype).with_lanes(lanes))


class ProducerLoad(PrimExpr):
    """Read of a TE tensor (``A[i, j]`` inside a compute body), before schedule lowering."""

    _fields = ("producer", "indices")

    def __init__(self, producer, indices):
        self.producer = producer
        self.indices = list(indices)
        self.dtype = producer.dtype


class Ramp(PrimExpr):
    """The vector ``[base, base + stride, ..., base + (lanes-1)*stride]``."""

    _fields = ("base", "stride", "lanes")

    def __init__(self, base: PrimExpr, stride: PrimExpr, lanes: int):
        base = op.convert(base)
        if not isinstance(stride, PrimExpr):
            stride = op.const(stride, base.dtype)
        self.base, self.stride, self.lanes = base, stride, int(lanes)
        self.dtype = str(parse_dtype(base.dtype).with_lanes(self.lanes))


class Broadcast(PrimExpr):
    """A scalar repeated across ``lanes`` vector lanes."""

    _fields = ("value", "lanes")

    def __init__(self, value: PrimExpr, lanes: int):
        self.value, self.lanes = op.convert(value), int(lanes)
        self.dtype = str(parse_dtype(value.dtype).with_lanes(self.lanes))


class Shuffle(PrimExpr):
    """Concatenate ``vectors`` and pick ``indices`` lanes out of the result."""

    _fields = ("vectors", "indices")

    def __init__(self, vectors, indices):
        self.vectors = list(vectors)
        self.indices = [int(i) for i in indices]
        self.dtype = str(parse_dtype(self.vectors[0].dtype).element_of().with_lanes(len(self.indices)))


class Let(PrimExpr):
    _fields = ("var", "value", "body")
    _def_fields = ("var",)

    def __init__(self, var: Var, value: PrimExpr, body: PrimExpr):
        self.var, self.value, self.body = var, value, body
        self.dtype = body.dtype


class IntrinName(str):
    """The name of a called intrinsic: a plain string (compares, hashes and prints as one) that also
    answers ``.name`` the way TVM's ``tir.Call.op`` (an ``Op``) does, so ``call.op.name`` works."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return str.__str__(self)

    def __reduce__(self):
        return (IntrinName, (str.__str__(self),))


def _intrin_name(op) -> IntrinName:
    if isinstance(op, IntrinName):
        return op
    if not isinstance(op, str):
        op = getattr(op, "name", None)  # an ir.Op, as TVM's Call accepts
        if not isinstance(op, str):
            raise KilnError(f"tir.Call: op must be an intrinsic name (str) or an Op, got {op!r}")
    return IntrinName(op)


class CallEffectKind:
    """Side-effect classes of TIR intrinsics (TVM's ``tir.CallEffectKind``), as op attribute
    ``TCallEffectKind`` values: ``register_op_attr("tir.mylog", "TCallEffectKind", CallEffectKind.Pure)``."""

    ExprAnnotation = 0
    Pure = 1
    ReadState = 2
    UpdateState = 3
    Opaque = 4


class Call(PrimExpr):
    """A call of an intrinsic (``"tir.exp"``, ``"tir.if_then_else"``, ``"tir.tvm_call_packed"``,
    ``"tir.call_extern"`` ...). ``op`` is the intrinsic's name (an :class:`IntrinName`; an ``ir.Op``
    given here is stored by name)."""

    _fields = ("dtype", "op", "args")

    def __init__(self, dtype, op: str, args):
        self.dtype = str(parse_dtype(dtype))
        self.op = _intrin_name(op)
        self.args = list(args)


class CommReducer(Node):
    """A commutative reducer: ``result`` combines ``lhs`` and ``rhs``; ``identity_element`` starts it."""

    _fields = ("lhs", "rhs", "result", "identity_element")
    _def_fields = ("lhs", "rhs")

    def __init__(self, lhs, rhs, result, identity_element):
        self.lhs, self.rhs = list(lhs), list(rhs)
        self.result, self.identity_element = list(result), list(identity_element)

    def __call__(self, a, b):
        """Combine two value lists (used when lowering reductions)."""
        from .stmt_functor import substitute
        vmap = {}
        for v, x in zip(self.lhs, a):
            vmap[v] = x
        for v, x in zip(self.rhs, b):
            vmap[v] = x
        return [substitute(r, vmap) for r in self.result]


class Reduce(PrimExpr):
    """A reduction over ``axis`` (IterVars) of ``source[value_index]`` combined by ``combiner``."""

    _fields = ("combiner", "source", "axis", "condition", "value_index", "init")

    def __init__(self, combiner, source, axis, condition, value_index, init=None):
        self.combiner = combiner
        self.source = list(source)
        self.axis = list(axis)
        self.condition = condition
        self.value_index = int(value_index)
        self.init = list(init) if init else []
        self.dtype = self.source[self.value_index].dtype


class Any(PrimExpr):
    """An unknown dimension (Relay's ``Any``); kiln's executors reject it with a clear error."""

    _fields = ()

    def __init__(self):
        self.dtype = "int32"


# --------------------------------------------------------------------------------------------
# Ranges and iteration variables (used by TE and by loop lowering)
# --------------------------------------------------------------------------------------------
class Range(Node):
    """``[min, min + extent)``. ``Range(begin, end)`` as in TVM; ``Range.from_min_extent`` otherwise."""

    _fields = ("min", "extent")

    def __init__(self, begin, end=None):
        if end is None:
            begin, end = 0, begin
        self.min = op.convert(begin)
        self.extent = op.convert(end) - self.min if not (isinstance(end, int) and isinstance(begin, int)) \
            else op.convert(end - begin)

    @staticmethod
    def from_min_extent(min_value, extent) -> "Range":
        r = object.__new__(Range)
        r.min = op.convert(min_value)
        r.extent = op.convert(extent)
        return r

    def astext(self) -> str:
        return f"range(min={self.min}, ext={self.extent})"


class IterVar(Node):
    """A loop axis: a variable, its domain and its kind (data-parallel, reduction, thread, ...)."""

    DataPar = 0
    ThreadIndex = 1
    CommReduce = 2
    Ordered = 3
    DimInfo = 4
    Unrolled = 5
    Vectorized = 6
    Parallelized = 7
    Tensorized = 8

    _fields = ("dom", "var", "iter_type", "thread_tag")
    _def_fields = ("var",)

    def __init__(self, dom, var, iter_type: int, thread_tag: str = ""):
        if dom is not None and not isinstance(dom, Range):
            if isinstance(dom, (list, tuple)) and len(dom) == 2:
                dom = Range(dom[0], dom[1])
            else:
                dom = Range(0, dom)
        if isinstance(var, str):
            var = Var(var, dom.extent.dtype if dom is not None else "int32")
        self.dom = dom
        self.var = var
        self.iter_type = int(iter_type)
        self.thread_tag = thread_tag

    # TE code often uses an IterVar where an expression is expected.
    def _as_expr(self):
        return self.var

    def __add__(self, o): return self.var + o
    def __radd__(self, o): return o + self.var
    def __sub__(self, o): return self.var - o
    def __rsub__(self, o): return o - self.var
    def __mul__(self, o): return self.var * o
    def __rmul__(self, o): return o * self.var
    def __floordiv__(self, o): return self.var // o
    def __rfloordiv__(self, o): return o // self.var
    def __mod__(self, o): return self.var % o
    def __rmod__(self, o): return o % self.var
    def __truediv__(self, o): return self.var / o
    def __neg__(self): return -self.var
    def __lt__(self, o): return self.var < o
    def __le__(self, o): return self.var <= o
    def __gt__(self, o): return self.var > o
    def __ge__(self, o): return self.var >= o
    def __hash__(self): return id(self)
    def __eq__(self, o): return EqualOp(self, o)
    def __ne__(self, o): return NotEqualOp(self, o)

    @property
    def dtype(self):
        return self.var.dtype

    def astext(self) -> str:
        return f"IterVar({self.var.name}, {self.dom}, type={self.iter_type})"
