"""Binary ops with numpy broadcasting (TVM's ``topi.broadcast``), tagged ``broadcast``."""
from __future__ import annotations

from .. import te
from ..error import KilnError
from ..tir import expr as E, op as T
from . import tag
from .utils import get_const_tuple
from ..te.lower import REQUIRES
from ..tir.assert_message import assert_message
from ..te.tensor import register_tensor_binop


def broadcast_shape(shape1, shape2, what: str = "broadcast") -> list:
    """Numpy's broadcast of two shapes (constant dims checked; a 1 stretches)."""
    s1, s2 = list(get_const_tuple(shape1)), list(get_const_tuple(shape2))
    n = max(len(s1), len(s2))
    s1 = [1] * (n - len(s1)) + s1
    s2 = [1] * (n - len(s2)) + s2
    out = []
    for a, b in zip(s1, s2):
        if isinstance(a, int) and a == 1:
            out.append(b)
        elif isinstance(b, int) and b == 1:
            out.append(a)
        elif isinstance(a, int) and isinstance(b, int):
            if a != b:
                raise KilnError(f"{what}: shapes {tuple(get_const_tuple(shape1))} and "
                                f"{tuple(get_const_tuple(shape2))} do not broadcast (dimension {a} vs {b})")
            out.append(a)
        elif _same_dim(a, b):
            out.append(a)
        elif isinstance(a, int) or isinstance(b, int):  # an unknown extent against a static one (not 1): that
            out.append(a if isinstance(a, int) else b)   # one, the unknown checked at run time (relay.Any's rule)
        else:  # two different unknown extents (VM kernels): either may be 1 at run time
            out.append(T.max(a, b))
    return out


def broadcast_requirements(input_shapes, out_shape, what: str = "broadcast") -> list:
    """The run-time conditions of a broadcast over unknown extents, one per output dimension that needs one:
    every operand's extent there is 1 or the output's. Static pairs were checked by :func:`broadcast_shape`;
    an extent that is the output's own needs nothing. The message names the extents the call had."""
    out = list(get_const_tuple(out_shape))
    shapes = [list(get_const_tuple(s)) for s in input_shapes]
    conds = []
    for d, o in enumerate(out):
        dims = [s[d - (len(out) - len(s))] for s in shapes if d >= len(out) - len(s)]
        checks = []
        for n in dims:
            if isinstance(n, int):
                if n == 1 or isinstance(o, int):
                    continue
                checks.append(E.EQ(T.cast(o, "int64"), T.const(n, "int64")))  # a static operand, unknown output
            elif not _same_dim(n, o):
                oc = T.const(o, n.dtype) if isinstance(o, int) else T.cast(o, n.dtype)
                checks.append(T.logical_or(E.EQ(n, T.const(1, n.dtype)), E.EQ(n, oc)))
        if checks:
            cond = checks[0]
            for c in checks[1:]:
                cond = T.logical_and(cond, c)
            conds.append((cond, _broadcast_message(what, shapes, out, d)))
    return conds


def _shape_text(shape) -> tuple:
    """``("({}, 4)", [n])``: a shape as an assert_message fragment (unknown extents as placeholders)."""
    parts, values = [], []
    for x in shape:
        if isinstance(x, int):
            parts.append(str(x))
        else:
            parts.append("{}")
            values.append(x)
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")", values


def _broadcast_message(what: str, shapes: list, out: list, d: int):
    """``what: operands of shapes (3, 4) and (2, 4) do not broadcast: dimension 0 is 3 in one and 2 in the
    other (must be equal or 1)``, the extents filled in at run time."""
    texts, values = [], []
    for s in shapes:
        t, v = _shape_text(s)
        texts.append(t)
        values += v
    dims = [s[d - (len(out) - len(s))] for s in shapes if d >= len(out) - len(s)]
    if len(shapes) == 1:
        target, tv = _shape_text(out)
        text = (f"{what}: shape {texts[0]} does not broadcast to {target}: dimension {d} is {{}} in the input and "
                f"{{}} in the target shape (must be equal, or 1 in the input)")
        return assert_message(text, *values, *tv, dims[0], out[d])
    listed = " and ".join(texts) if len(texts) == 2 else ", ".join(texts[:-1]) + " and " + texts[-1]
    if len(dims) == 2:
        where = "is {} in one and {} in the other (must be equal or 1)"
    elif len(dims) > 2:
        where = "is " + ", ".join(["{}"] * (len(dims) - 1)) + " and {} in the operands that have it (each must " \
            "be 1 or the largest)"
    else:
        where, dims = "is {} in one operand and {} in the output (must be equal or 1)", dims + [out[d]]
    return assert_message(f"{what}: operands of shapes {listed} do not broadcast: dimension {d} {where}",
                          *values, *dims)


def equal_requirement(a, b, what: str) -> list:
    """``[(a == b, message)]`` for two extents that must agree at run time (a reduction's K from two operands)
    when they are not provably equal; ``[]`` when they are (static dims are checked by the caller)."""
    if (isinstance(a, int) and isinstance(b, int)) or _same_dim(a, b):
        return []
    x = a if not isinstance(a, int) else b
    a = T.const(a, x.dtype) if isinstance(a, int) else T.cast(a, x.dtype)
    b = T.const(b, x.dtype) if isinstance(b, int) else T.cast(b, x.dtype)
    return [(E.EQ(a, b), assert_message(f"{what}: the operands' sizes differ at run time: {{}} in one and {{}} in "
                                        f"the other (must be equal)", a, b))]


def _requires_attrs(input_shapes, out_shape, what: str):
    conds = broadcast_requirements(input_shapes, out_shape, what)
    return {REQUIRES: conds} if conds else None


def _same_dim(a, b) -> bool:
    if a is b:
        return True
    same = getattr(a, "same_as", None)
    return bool(same(b)) if same is not None else False


def broadcast_index(tensor, out_indices, out_shape=None):
    """Indices into ``tensor`` for an output position of a broadcast (stretched dims read index 0). With
    ``out_shape``, an unknown input extent that is not the output's own extent may be 1 at run time: it reads
    ``0 if extent == 1 else i`` (a guard on a loop-invariant condition)."""
    shape = get_const_tuple(tensor.shape)
    offset = len(out_indices) - len(shape)
    idx = []
    for d, n in enumerate(shape):
        i = out_indices[offset + d]
        zero = T.const(0, i.dtype if hasattr(i, "dtype") else "int32")
        if isinstance(n, int):
            idx.append(zero if n == 1 else i)
        elif out_shape is not None and not _same_dim(n, out_shape[offset + d]):
            one = T.const(1, n.dtype) if hasattr(n, "dtype") else 1
            idx.append(T.Select(E.EQ(n, one), T.cast(zero, i.dtype) if hasattr(i, "dtype") else zero, i))
        else:
            idx.append(i)
    return idx


def _is_tensor(x) -> bool:
    return hasattr(x, "op") and hasattr(x, "shape")


def _binary(fn, name):
    def op(lhs, rhs):
        lt, rt = _is_tensor(lhs), _is_tensor(rhs)
        if not lt and not rt:
            return fn(T.convert(lhs), T.convert(rhs))
        if lt and not rt:
            return te.compute(lhs.shape, lambda *i: fn(lhs(*i), _scalar(rhs, lhs.dtype)), name=f"T_{name}",
                              tag=tag.ELEMWISE)
        if rt and not lt:
            return te.compute(rhs.shape, lambda *i: fn(_scalar(lhs, rhs.dtype), rhs(*i)), name=f"T_{name}",
                              tag=tag.ELEMWISE)
        out_shape = broadcast_shape(lhs.shape, rhs.shape, name)

        def f(*i):
            return fn(lhs(*broadcast_index(lhs, i, out_shape)), rhs(*broadcast_index(rhs, i, out_shape)))
        return te.compute(out_shape, f, name=f"T_{name}", tag=tag.BROADCAST,
                          attrs=_requires_attrs([lhs.shape, rhs.shape], out_shape, name))
    op.__name__ = name
    op.__doc__ = f"Broadcasting ``{name}`` of two tensors (or a tensor and a scalar)."
    return op


def _scalar(x, dtype):
    if isinstance(x, E.PrimExpr):
        return x
    return T.const(x, dtype)


def _divide(a, b):
    if a.dtype.startswith(("int", "uint")):
        return T.truncdiv(a, b)  # TVM's divide on integers truncates (as C)
    return T.div(a, b)


def _mod(a, b):
    if a.dtype.startswith(("int", "uint")):
        return T.truncmod(a, b)
    return T.fmod(a, b)


add = _binary(T.add, "add")
subtract = _binary(T.sub, "subtract")
multiply = _binary(T.mul, "multiply")
divide = _binary(_divide, "divide")
floor_divide = _binary(T.floordiv, "floor_divide")
mod = _binary(_mod, "mod")
floor_mod = _binary(T.floormod, "floor_mod")
_generic_power = _binary(T.power, "power")
_SMALL_EXPONENTS = (1, 2, 3, 4)


def _constant_scalar(x):
    """The value of ``x`` when it is a constant scalar: a number, an IntImm/FloatImm, or a one-element tensor
    computed from a constant (a scalar constant of a fused Relay function arrives as such a tensor)."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    if isinstance(x, (E.IntImm, E.FloatImm)):
        return float(x.value)
    if _is_tensor(x):
        shape = get_const_tuple(x.shape)
        op = x.op
        body = getattr(op, "body", None)
        if all(isinstance(d, int) and d == 1 for d in shape) and body and len(body) == 1 and \
                not op.input_tensors and isinstance(body[0], (E.IntImm, E.FloatImm)):
            return float(body[0].value)
    return None


def _integer_power(v, n: int):
    result = v
    for _ in range(n - 1):
        result = result * v
    return result


def power(lhs, rhs):
    """Broadcasting ``lhs ** rhs``; a float tensor raised to a constant 1, 2, 3 or 4 becomes multiplications
    (``powf`` runs lane by lane and costs tens of ns per element; e.g. GPT-2's GELU computes ``x ** 3``)."""
    c = _constant_scalar(rhs)
    if _is_tensor(lhs) and c is not None and c in _SMALL_EXPONENTS and lhs.dtype.startswith("float") and \
            len(get_const_tuple(getattr(rhs, "shape", ()))) <= len(lhs.shape):
        n = int(c)
        return te.compute(lhs.shape, lambda *i: _integer_power(lhs(*i), n), name="T_power", tag=tag.ELEMWISE)
    return _generic_power(lhs, rhs)
maximum = _binary(T.max, "maximum")
minimum = _binary(T.min, "minimum")
equal = _binary(T.equal, "equal")
not_equal = _binary(T.not_equal, "not_equal")
less = _binary(T.less, "less")
less_equal = _binary(T.less_equal, "less_equal")
greater = _binary(T.greater, "greater")
greater_equal = _binary(T.greater_equal, "greater_equal")
logical_and = _binary(T.logical_and, "logical_and")
logical_or = _binary(T.logical_or, "logical_or")
logical_xor = _binary(lambda a, b: T.logical_and(T.logical_or(a, b), T.logical_not(T.logical_and(a, b))),
                      "logical_xor")
bitwise_and = _binary(T.bitwise_and, "bitwise_and")
bitwise_or = _binary(T.bitwise_or, "bitwise_or")
bitwise_xor = _binary(T.bitwise_xor, "bitwise_xor")
left_shift = _binary(T.shift_left, "left_shift")
right_shift = _binary(T.shift_right, "right_shift")


def _bind_tensor_operators() -> None:
    """``A + B``, ``A - 1``, ``2 * A``, ``A / B`` on te.Tensors broadcast with these ops (as TVM's topi binds)."""
    for _name, _fn in (("add", add), ("subtract", subtract), ("multiply", multiply), ("divide", divide)):
        register_tensor_binop(_name, _fn)


_bind_tensor_operators()


def broadcast_to(data, shape):
    """Repeat ``data`` along its size-1 (or missing leading) axes to ``shape``."""
    shape = list(get_const_tuple(shape))
    dshape = get_const_tuple(data.shape)
    # unknown (relay.Any) extents on either side are checked at run time (the kernel's requirement attrs)
    bad = len(dshape) > len(shape) or any(isinstance(a, int) and isinstance(t, int) and a not in (1, t)
                                          for a, t in zip(dshape[::-1], shape[::-1]))
    if bad:
        raise KilnError(f"broadcast_to: cannot broadcast shape {dshape} to {tuple(shape)}")
    return te.compute(shape, lambda *i: data(*broadcast_index(data, i, shape)), name="T_broadcast_to",
                      tag=tag.BROADCAST,
                      attrs=_requires_attrs([data.shape], shape, "broadcast_to"))

__all__ = [_n for _n, _v in list(globals().items())
           if callable(_v) and getattr(_v, "__module__", None) == __name__ and not _n.startswith("_")]
