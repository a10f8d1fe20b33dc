"""A reference evaluator for TIR: runs a PrimFunc in Python on numpy arrays.

It is the ground truth that passes and schedules are tested against, so it is strict:
out-of-bounds accesses, reads of unbound variables, integer division by zero and failed
asserts raise :class:`InterpreterError` instead of wrapping or returning garbage.

The tree is first compiled into Python closures (one per node) and then executed, which is
several times faster than walking the tree per iteration. Values are Python ints / bools for
scalar integers (wrapped to their dtype's width after every operation), numpy scalars for
floats (so float32 math rounds like float32), and 1-d numpy arrays for vectors.

Works at every lowering stage: multi-dimensional BufferRealize / BufferStore / BufferLoad
before flattening, Allocate + flat (possibly Ramp) indices after, and Producer* nodes.
Thread-binding attributes (``thread_extent``) run as serial loops, so kernels that need
barriers between threads are not modelled.
"""
from __future__ import annotations

import math

import numpy as np

from ..error import KilnError
from ..runtime.dtype import parse_dtype
from ..runtime.registry import get_global_func
from .assert_message import format_message, message_parts
from . import expr as E
from .buffer import Buffer
from .function import PrimFunc
from .op import ANY_LANE, LANE_MASKED


class InterpreterError(KilnError):
    """The interpreted program did something invalid (out-of-bounds access, division by zero, ...)."""


_MASK = object()  # env key: lane mask while evaluating the branches of a vector if_then_else


# --------------------------------------------------------------------------------------------
# dtype helpers
# --------------------------------------------------------------------------------------------
def _np_dtype(dtype: str) -> np.dtype:
    return parse_dtype(dtype).element_of().numpy_dtype()


def _int_wrapper(dtype: str):
    """A function that wraps a Python int to the width of ``dtype`` (identity for bool)."""
    dt = parse_dtype(dtype)
    if dt.is_bool:
        return bool
    bits = dt.bits
    mask = (1 << bits) - 1
    if dt.is_uint:
        return lambda v: v & mask
    half = 1 << (bits - 1)
    full = 1 << bits

    def wrap(v):
        if -half <= v < half:
            return v
        v &= mask
        return v - full if v >= half else v
    return wrap


def _to_scalar(value, dtype: str):
    """Convert a Python/numpy value to the interpreter's scalar representation of ``dtype``."""
    dt = parse_dtype(dtype)
    if dt.is_bool:
        return bool(value)
    if dt.is_float:
        return _np_dtype(dtype).type(value)
    if dt.is_handle:
        return value
    return _int_wrapper(dtype)(int(value))


def _lanes(dtype: str) -> int:
    return parse_dtype(dtype).lanes


# --------------------------------------------------------------------------------------------
# storage
# --------------------------------------------------------------------------------------------
class _Realized:
    """Storage of a realized (not yet flattened) buffer: region mins and extents."""

    __slots__ = ("storage", "mins", "extents")

    def __init__(self, storage, mins, extents):
        self.storage, self.mins, self.extents = storage, mins, extents


def _new_storage(dtype: str, count: int):
    npd = _np_dtype(dtype)
    count = int(count)
    if count < 0:
        raise InterpreterError(f"allocation of a negative number of elements ({count})")
    arr = np.empty(count * parse_dtype(dtype).lanes, dtype=npd)
    # Poison fresh memory so reads of uninitialised elements show up in results.
    if npd.kind == "f":
        arr.fill(np.nan)
    elif npd.kind in "iu":
        arr.fill(np.iinfo(npd).max // 3)
    else:
        arr.fill(False)
    return arr


# --------------------------------------------------------------------------------------------
# integer division (C / TVM semantics)
# --------------------------------------------------------------------------------------------
def _check_zero(b, where):
    if isinstance(b, np.ndarray):
        if np.any(b == 0):
            raise InterpreterError(f"integer division by zero in {where}")
    elif b == 0:
        raise InterpreterError(f"integer division by zero in {where}")


def _truncdiv_int(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _truncmod_int(a, b):
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def _vec_truncdiv(a, b):
    q = np.floor_divide(a, b)
    r = a - q * b
    adjust = (r != 0) & ((a < 0) != (b < 0))
    return np.where(adjust, q + 1, q).astype(a.dtype)


def _vec_truncmod(a, b):
    return (a - _vec_truncdiv(a, b) * b).astype(a.dtype)


# --------------------------------------------------------------------------------------------
# intrinsics
# --------------------------------------------------------------------------------------------
def _erf(x):
    f = np.vectorize(math.erf, otypes=[np.float64])
    r = f(x)
    return r.astype(x.dtype) if isinstance(x, np.ndarray) else np.asarray(x).dtype.type(r)


def _float_intrinsics():
    def sigmoid(x):
        one = np.asarray(x).dtype.type(1)
        return one / (one + np.exp(-x))

    def rsqrt(x):
        one = np.asarray(x).dtype.type(1)
        return one / np.sqrt(x)

    def exp10(x):
        return np.power(np.asarray(x).dtype.type(10), x)

    return {
        "exp": np.exp, "exp2": np.exp2, "exp10": exp10, "log": np.log, "log2": np.log2,
        "log10": np.log10, "log1p": np.log1p, "expm1": np.expm1, "sqrt": np.sqrt, "rsqrt": rsqrt,
        "sin": np.sin, "cos": np.cos, "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh,
        "tanh": np.tanh, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
        "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "erf": _erf,
        "sigmoid": sigmoid, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
        "round": np.rint, "nearbyint": np.rint, "fabs": np.abs,
    }


_UNARY_FLOAT = _float_intrinsics()
_BINARY_FLOAT = {
    "pow": np.power, "fmod": np.fmod, "atan2": np.arctan2, "hypot": np.hypot,
    "copysign": np.copysign, "nextafter": np.nextafter,
}
# C math library names reachable through call_extern / call_pure_extern
_EXTERN_NAMES = {}
for _n in list(_UNARY_FLOAT) + list(_BINARY_FLOAT):
    _EXTERN_NAMES[_n] = _n
    _EXTERN_NAMES[_n + "f"] = _n
_EXTERN_NAMES["fabsf"] = "fabs"
_EXTERN_NAMES["powf"] = "pow"


# --------------------------------------------------------------------------------------------
# the compiler from TIR to closures
# --------------------------------------------------------------------------------------------
class _Compiler:
    """Turns expressions into ``f(env) -> value`` and statements into ``f(env) -> None``."""

    def __init__(self):
        self.memo = {}

    # -- expressions ---------------------------------------------------------------------------
    def expr(self, e):
        if isinstance(e, (int, float, bool)):
            return lambda env, v=e: v
        if isinstance(e, Buffer):
            return self._buffer_value(e)
        if isinstance(e, E.EqualOp):
            e = e.asobject()
        fn = self.memo.get(id(e))
        if fn is not None and fn[0] is e:
            return fn[1]
        meth = getattr(self, "e_" + type(e).__name__, None)
        if meth is None:
            for klass in type(e).__mro__[1:]:
                meth = getattr(self, "e_" + klass.__name__, None)
                if meth is not None:
                    break
        if meth is None:
            raise InterpreterError(f"the interpreter cannot evaluate {type(e).__name__}: {e}")
        fn = meth(e)
        self.memo[id(e)] = (e, fn)
        return fn

    def e_Var(self, v):
        def get(env):
            try:
                return env[v]
            except KeyError:
                raise InterpreterError(f"variable {v.name!r} is used but not bound") from None
        return get

    def e_IntImm(self, e):
        val = _to_scalar(e.value, e.dtype)
        return lambda env: val

    def e_FloatImm(self, e):
        val = _to_scalar(e.value, e.dtype)
        return lambda env: val

    def e_StringImm(self, e):
        val = e.value
        return lambda env: val

    def e_Cast(self, e):
        src = self.expr(e.value)
        dt = parse_dtype(e.dtype)
        sdt = parse_dtype(e.value.dtype)
        if dt.lanes > 1:
            npd = _np_dtype(e.dtype)
            if sdt.element_of().is_float and not dt.element_of().is_float and not dt.element_of().is_bool:
                def vcast(env):
                    x = src(env)
                    if not np.all(np.isfinite(x)):
                        raise InterpreterError(f"cast of a non-finite float to {e.dtype} in {e}")
                    return np.trunc(x).astype(npd)
                return vcast
            return lambda env: np.asarray(src(env)).astype(npd)
        if dt.is_bool:
            return lambda env: bool(src(env) != 0)
        if dt.is_float:
            t = _np_dtype(e.dtype).type
            return lambda env: t(src(env))
        if dt.is_handle:
            return src
        wrap = _int_wrapper(e.dtype)
        if sdt.is_float:
            def f2i(env):
                x = src(env)
                if not np.isfinite(x):
                    raise InterpreterError(f"cast of the non-finite value {x} to {e.dtype} in {e}")
                return wrap(int(x))
            return f2i
        return lambda env: wrap(int(src(env)))

    def _binary(self, e, scalar_op, vector_op=None, name=None):
        fa, fb = self.expr(e.a), self.expr(e.b)
        dt = parse_dtype(e.a.dtype)
        if dt.lanes > 1:
            vop = vector_op or scalar_op
            return lambda env: vop(fa(env), fb(env))
        if dt.is_integral and not dt.is_bool:
            wrap = _int_wrapper(e.a.dtype)
            return lambda env: wrap(scalar_op(fa(env), fb(env)))
        return lambda env: scalar_op(fa(env), fb(env))

    def e_Add(self, e):
        return self._binary(e, lambda a, b: a + b)

    def e_Sub(self, e):
        return self._binary(e, lambda a, b: a - b)

    def e_Mul(self, e):
        return self._binary(e, lambda a, b: a * b)

    def _int_div(self, e, scalar_fn, vector_fn):
        fa, fb = self.expr(e.a), self.expr(e.b)
        where = str(e) if False else type(e).__name__
        lanes = _lanes(e.dtype)
        wrap = _int_wrapper(e.a.dtype)

        if lanes > 1:
            def vec(env):
                a, b = fa(env), fb(env)
                _check_zero(b, where)
                return vector_fn(a, b)
            return vec

        def sca(env):
            a, b = fa(env), fb(env)
            if b == 0:
                raise InterpreterError(f"integer division by zero in {_safe_str(e)}")
            return wrap(scalar_fn(a, b))
        return sca

    def e_Div(self, e):
        if parse_dtype(e.dtype).element_of().is_float:
            return self._binary(e, lambda a, b: a / b)
        return self._int_div(e, _truncdiv_int, _vec_truncdiv)

    def e_Mod(self, e):
        if parse_dtype(e.dtype).element_of().is_float:
            return self._binary(e, np.fmod)
        return self._int_div(e, _truncmod_int, _vec_truncmod)

    def e_FloorDiv(self, e):
        if parse_dtype(e.dtype).element_of().is_float:
            return self._binary(e, lambda a, b: np.floor(a / b))
        return self._int_div(e, lambda a, b: a // b, lambda a, b: np.floor_divide(a, b))

    def e_FloorMod(self, e):
        if parse_dtype(e.dtype).element_of().is_float:
            return self._binary(e, lambda a, b: a - np.floor(a / b) * b)
        return self._int_div(e, lambda a, b: a % b, lambda a, b: np.mod(a, b))

    def e_Min(self, e):
        return self._binary(e, lambda a, b: a if a <= b or a != a else b, np.minimum)  # NaN wins, as compiled

    def e_Max(self, e):
        return self._binary(e, lambda a, b: a if a >= b or a != a else b, np.maximum)  # NaN wins, as compiled

    def _cmp(self, e, op):
        fa, fb = self.expr(e.a), self.expr(e.b)
        if _lanes(e.a.dtype) > 1:
            return lambda env: op(fa(env), fb(env))
        return lambda env: bool(op(fa(env), fb(env)))

    def e_EQ(self, e):
        return self._cmp(e, lambda a, b: a == b)

    def e_NE(self, e):
        return self._cmp(e, lambda a, b: a != b)

    def e_LT(self, e):
        return self._cmp(e, lambda a, b: a < b)

    def e_LE(self, e):
        return self._cmp(e, lambda a, b: a <= b)

    def e_GT(self, e):
        return self._cmp(e, lambda a, b: a > b)

    def e_GE(self, e):
        return self._cmp(e, lambda a, b: a >= b)

    def e_And(self, e):
        fa, fb = self.expr(e.a), self.expr(e.b)
        if _lanes(e.dtype) > 1:
            return lambda env: np.logical_and(fa(env), fb(env))
        return lambda env: bool(fa(env)) and bool(fb(env))

    def e_Or(self, e):
        fa, fb = self.expr(e.a), self.expr(e.b)
        if _lanes(e.dtype) > 1:
            return lambda env: np.logical_or(fa(env), fb(env))
        return lambda env: bool(fa(env)) or bool(fb(env))

    def e_Not(self, e):
        fa = self.expr(e.a)
        if _lanes(e.dtype) > 1:
            return lambda env: np.logical_not(fa(env))
        return lambda env: not fa(env)

    def e_Select(self, e):
        fc, ft, ff = self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
        if _lanes(e.condition.dtype) > 1 or _lanes(e.dtype) > 1:
            return lambda env: np.where(fc(env), ft(env), ff(env))
        # Both branches are evaluated, as TIR's Select allows (so both must be valid).
        return lambda env: (lambda c, t, f: t if c else f)(fc(env), ft(env), ff(env))

    def e_Ramp(self, e):
        fb, fs = self.expr(e.base), self.expr(e.stride)
        npd = _np_dtype(e.dtype)
        lanes = e.lanes
        idx = np.arange(lanes)
        return lambda env: (fb(env) + idx * fs(env)).astype(npd)

    def e_Broadcast(self, e):
        fv = self.expr(e.value)
        npd = _np_dtype(e.dtype)
        lanes = e.lanes
        return lambda env: np.full(lanes, fv(env), dtype=npd)

    def e_Shuffle(self, e):
        fvs = [self.expr(v) for v in e.vectors]
        idx = np.array(e.indices, dtype=np.int64)

        def shuffle(env):
            parts = [np.atleast_1d(np.asarray(f(env))) for f in fvs]
            return np.concatenate(parts)[idx]
        return shuffle

    def e_Let(self, e):
        fv, fb = self.expr(e.value), self.expr(e.body)
        var = e.var

        def let(env):
            old = env.get(var, _MISSING)
            env[var] = fv(env)
            try:
                return fb(env)
            finally:
                if old is _MISSING:
                    del env[var]
                else:
                    env[var] = old
        return let

    def e_BufferLoad(self, e):
        access = self._access(e.buffer, e.indices, str(e.buffer.name))
        lanes = _lanes(e.dtype)
        dt = parse_dtype(e.buffer.dtype)
        if lanes > 1:
            def vload(env):
                storage, off = access(env)
                mask = env.get(_MASK)
                if mask is not None:
                    off = np.where(mask, off, 0)
                return storage[off]
            return vload
        if dt.is_float:
            return lambda env: (lambda s_o: s_o[0][s_o[1]])(access(env))
        if dt.is_bool:
            return lambda env: (lambda s_o: bool(s_o[0][s_o[1]]))(access(env))
        return lambda env: (lambda s_o: int(s_o[0][s_o[1]]))(access(env))

    def e_ProducerLoad(self, e):
        access = self._producer_access(e.producer, e.indices)
        dt = parse_dtype(e.dtype)
        conv = (lambda v: v) if dt.is_float else (bool if dt.is_bool else int)
        return lambda env: (lambda s_o: conv(s_o[0][s_o[1]]))(access(env))

    def e_Call(self, e):
        op = e.op if isinstance(e.op, str) else getattr(e.op, "name", str(e.op))
        name = op[4:] if op.startswith("tir.") else op
        if name == "prefetch":  # a cache hint: nothing to do
            return lambda env: 0
        args = [self.expr(a) for a in e.args]
        lanes = _lanes(e.dtype)
        if name == "if_then_else":
            return self._if_then_else(e, args)
        if name == "likely":
            return args[0]
        if "tir." + name == LANE_MASKED:  # VectorizeLoop's masked last vector (tir.op)
            return self._lane_masked(args)
        if "tir." + name == ANY_LANE:
            fm = args[0]
            return lambda env: bool(np.any(fm(env)))
        if name in _UNARY_FLOAT:
            fn = _UNARY_FLOAT[name]
            a0 = args[0]
            return lambda env: fn(a0(env))
        if name in _BINARY_FLOAT:
            fn = _BINARY_FLOAT[name]
            a0, a1 = args
            return lambda env: fn(a0(env), a1(env))
        if name == "abs":
            a0 = args[0]
            if lanes > 1:
                return lambda env: np.abs(a0(env))
            wrap = _int_wrapper(e.dtype)
            return lambda env: wrap(abs(a0(env)))
        if name in ("isnan", "isinf", "isfinite"):
            fn = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}[name]
            a0 = args[0]
            if lanes > 1:
                return lambda env: fn(a0(env))
            return lambda env: bool(fn(a0(env)))
        if name in ("bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right"):
            return self._bitwise(e, name, args)
        if name == "bitwise_not":
            a0 = args[0]
            if lanes > 1:
                return lambda env: np.invert(a0(env))
            wrap = _int_wrapper(e.dtype)
            return lambda env: wrap(~a0(env))
        if name == "popcount":
            a0 = args[0]
            bits = parse_dtype(e.dtype).bits
            mask = (1 << bits) - 1
            if lanes > 1:
                return lambda env: np.array([bin(int(x) & mask).count("1") for x in a0(env)],
                                            dtype=_np_dtype(e.dtype))
            return lambda env: bin(a0(env) & mask).count("1")
        if name == "reinterpret":
            a0 = args[0]
            src_dt = _np_dtype(e.args[0].dtype)
            dst_dt = _np_dtype(e.dtype)
            if src_dt.itemsize != dst_dt.itemsize:
                raise InterpreterError(f"reinterpret between dtypes of different sizes: {e}")

            def reinterpret(env):
                arr = np.atleast_1d(np.asarray(a0(env), dtype=src_dt)).view(dst_dt)
                if lanes > 1:
                    return arr
                return _to_scalar(arr[0], e.dtype)
            return reinterpret
        if name in ("call_extern", "call_pure_extern"):
            fname = e.args[0].value if isinstance(e.args[0], E.StringImm) else str(e.args[0])
            base = _EXTERN_NAMES.get(fname)
            if base is None:
                raise InterpreterError(
                    f"the interpreter does not know the external function {fname!r}; "
                    f"known: C math functions ({', '.join(sorted(_EXTERN_NAMES)[:8])}, ...)")
            fn = _UNARY_FLOAT.get(base) or _BINARY_FLOAT.get(base)
            cast = _np_dtype(e.dtype).type if lanes == 1 else (lambda v: v.astype(_np_dtype(e.dtype)))
            rest = args[1:]
            return lambda env: cast(fn(*[a(env) for a in rest]))
        if name in ("tvm_call_packed", "call_packed", "tvm_call_packed_lowered"):
            return self._call_packed(e)
        if name == "ret":
            return args[0]
        if name == "q_multiply_shift":
            return self._q_multiply_shift(e, args)
        raise InterpreterError(f"the interpreter does not implement the intrinsic {op!r} (in {_safe_str(e)})")

    @staticmethod
    def _under_mask(env, mask, fn):
        """``fn(env)`` with the lanes outside ``mask`` (and any enclosing mask) off: their loads are not checked."""
        outer = env.get(_MASK)
        env[_MASK] = mask if outer is None else (mask & outer)
        try:
            return fn(env)
        finally:
            if outer is None:
                env.pop(_MASK, None)
            else:
                env[_MASK] = outer

    def _lane_masked(self, args):
        fx, fm = args

        def masked(env):
            m = np.asarray(fm(env), dtype=bool)
            x = self._under_mask(env, m, fx)
            return np.where(m, x, np.zeros_like(x))
        return masked

    def _if_then_else(self, e, args):
        fc, ft, ff = args
        if _lanes(e.args[0].dtype) > 1:
            # Evaluate each branch only where it is selected: loads outside the mask are not checked.
            def vite(env):
                cond = np.asarray(fc(env), dtype=bool)
                t = self._under_mask(env, cond, ft)
                f = self._under_mask(env, ~cond, ff)
                return np.where(cond, t, f)
            return vite
        return lambda env: ft(env) if fc(env) else ff(env)

    def _bitwise(self, e, name, args):
        a0, a1 = args
        lanes = _lanes(e.dtype)
        if lanes > 1:
            fn = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
                  "shift_left": np.left_shift, "shift_right": np.right_shift}[name]
            return lambda env: fn(a0(env), a1(env))
        wrap = _int_wrapper(e.dtype)
        dt = parse_dtype(e.dtype)
        bits = dt.bits
        if name == "shift_right" and dt.is_uint:
            return lambda env: wrap(a0(env) >> a1(env))
        fn = {"bitwise_and": lambda a, b: a & b, "bitwise_or": lambda a, b: a | b,
              "bitwise_xor": lambda a, b: a ^ b, "shift_left": lambda a, b: a << b,
              "shift_right": lambda a, b: a >> b}[name]

        def bit(env):
            a, b = a0(env), a1(env)
            if name.startswith("shift") and not (0 <= b < bits):
                raise InterpreterError(f"shift by {b} bits of a {e.dtype} value in {_safe_str(e)}")
            return wrap(fn(a, b))
        return bit

    def _q_multiply_shift(self, e, args):
        fx, fy, fq, fs = args

        def qms(env):
            x, y, q, s = fx(env), fy(env), fq(env), fs(env)
            lshift = s if s > 0 else 0
            rshift = q + (-s if s < 0 else 0)
            v = (x << lshift) * y
            v = (v + (1 << (rshift - 1))) >> rshift if rshift > 0 else v
            return _int_wrapper(e.dtype)(v)
        return qms

    def _call_packed(self, e):
        name = e.args[0].value
        fargs = [self.expr(a) for a in e.args[1:]]

        def call(env):
            f = get_global_func(name, allow_missing=True)
            if f is None:
                raise InterpreterError(f"call_packed: no global function named {name!r} is registered")
            r = f(*[a(env) for a in fargs])
            if r is None:
                return 0
            return int(r) if isinstance(r, (bool, int, np.integer)) else r
        return call

    def _buffer_value(self, buf):
        """A Buffer passed as a value (call_packed argument): its storage shaped as the buffer."""
        shape_fns = [self.expr(s) for s in buf.shape]
        data = buf.data

        def value(env):
            r = env.get(buf)
            storage = r.storage if r is not None else self.e_Var(data)(env)
            shape = tuple(int(f(env)) for f in shape_fns)
            return storage[: int(np.prod(shape))].reshape(shape)
        return value

    # -- memory access ----------------------------------------------------------------------
    def _access(self, buf, indices, name):
        """``f(env) -> (storage, flat_offset)`` with bounds checks for ``buf[indices]``."""
        idx_fns = [self.expr(i) for i in indices]
        ndim = len(buf.shape)
        if len(indices) != ndim:
            raise InterpreterError(
                f"buffer {name} has {ndim} dimension(s) but is accessed with {len(indices)} index(es)")
        shape_fns = [self._const_or_fn(s) for s in buf.shape]
        stride_fns = [self._const_or_fn(s) for s in buf.strides] if buf.strides else None
        off_fn = self._const_or_fn(buf.elem_offset)
        data = buf.data
        lanes = parse_dtype(buf.dtype).lanes
        get_data = self.e_Var(data)

        def access(env):
            idx = [f(env) for f in idx_fns]
            mask = env.get(_MASK)
            realized = env.get(buf)
            if realized is not None:
                storage = realized.storage
                offset = 0
                for d, (i, lo, ext) in enumerate(zip(idx, realized.mins, realized.extents)):
                    rel = i - lo
                    _check_range(rel, ext, mask, name, d, idx, lo)
                    offset = offset * ext + rel
            else:
                storage = get_data(env)
                if not isinstance(storage, np.ndarray):
                    raise InterpreterError(f"buffer {name}: its data variable {data.name!r} is not bound to memory")
                shape = [f(env) for f in shape_fns]
                for d, (i, ext) in enumerate(zip(idx, shape)):
                    _check_range(i, ext, mask, name, d, idx, 0)
                if stride_fns is not None:
                    offset = 0
                    for i, st in zip(idx, stride_fns):
                        offset = offset + i * st(env)
                else:
                    offset = 0
                    for i, ext in zip(idx, shape):
                        offset = offset * ext + i
                offset = offset + off_fn(env)
            if lanes > 1:
                raise InterpreterError(f"buffer {name} has a vector element dtype, which the interpreter does not model")
            _check_range(offset, storage.shape[0], mask, name, None, idx, 0)
            return storage, offset
        return access

    def _producer_access(self, producer, indices):
        idx_fns = [self.expr(i) for i in indices]
        name = getattr(producer, "name", "tensor")

        def access(env):
            realized = env.get(producer)
            if realized is None:
                raise InterpreterError(f"tensor {name} is accessed outside its ProducerRealize")
            idx = [f(env) for f in idx_fns]
            offset = 0
            for d, (i, lo, ext) in enumerate(zip(idx, realized.mins, realized.extents)):
                rel = i - lo
                _check_range(rel, ext, None, name, d, idx, lo)
                offset = offset * ext + rel
            return realized.storage, offset
        return access

    def _const_or_fn(self, e):
        if isinstance(e, E.IntImm):
            v = e.value
            return lambda env: v
        return self.expr(e)

    # -- statements --------------------------------------------------------------------------
    def stmt(self, s):
        if s is None:
            return lambda env: None
        meth = getattr(self, "s_" + type(s).__name__, None)
        if meth is None:
            raise InterpreterError(f"the interpreter cannot execute {type(s).__name__}")
        return meth(s)

    def s_SeqStmt(self, s):
        fns = [self.stmt(x) for x in s.seq]

        def seq(env):
            for f in fns:
                f(env)
        return seq

    def s_Evaluate(self, s):
        f = self.expr(s.value)
        return lambda env: (f(env), None)[1]

    def s_LetStmt(self, s):
        fv, fb = self.expr(s.value), self.stmt(s.body)
        var = s.var

        def let(env):
            env[var] = fv(env)
            try:
                fb(env)
            finally:
                env.pop(var, None)
        return let

    def s_AttrStmt(self, s):
        body = self.stmt(s.body)
        if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(s.node, E.IterVar):
            var = s.node.var
            fext = self.expr(s.value)

            def launch(env):
                for i in range(int(fext(env))):
                    env[var] = i
                    body(env)
                env.pop(var, None)
            return launch
        if s.attr_key == "buffer_bind_scope":
            raise InterpreterError("the interpreter does not support buffer_bind_scope (tensorize) attributes")
        return body

    def s_AssertStmt(self, s):
        fc, body = self.expr(s.condition), self.stmt(s.body)
        _, values = message_parts(s.message)
        fvals = [self.expr(v) for v in values]

        def check(env):
            if not fc(env):
                msg = format_message(s.message, [f(env) for f in fvals])
                raise InterpreterError(f"assertion failed: {msg}")
            body(env)
        return check

    def s_BufferStore(self, s):
        access = self._access(s.buffer, s.indices, s.buffer.name)
        v = s.value
        if isinstance(v, E.Call) and v.op == LANE_MASKED and _lanes(v.dtype) > 1:
            fx, fm = self.expr(v.args[0]), self.expr(v.args[1])

            def masked_store(env):  # only the lanes that are on are written (and range-checked)
                m = np.asarray(fm(env), dtype=bool)
                value = np.broadcast_to(self._under_mask(env, m, fx), m.shape)
                storage, off = self._under_mask(env, m, access)
                storage[np.asarray(off)[m]] = value[m]
            return masked_store
        fv = self.expr(s.value)
        vec = _lanes(s.value.dtype) > 1 or any(_lanes(i.dtype) > 1 for i in s.indices)
        if vec:
            def vstore(env):
                value = fv(env)
                storage, off = access(env)
                mask = env.get(_MASK)
                if mask is not None:
                    raise InterpreterError("vector store under a lane mask")
                storage[off] = value
            return vstore

        def store(env):
            value = fv(env)
            storage, off = access(env)
            storage[off] = value
        return store

    def s_ProducerStore(self, s):
        access = self._producer_access(s.producer, s.indices)
        fv = self.expr(s.value)

        def store(env):
            value = fv(env)
            storage, off = access(env)
            storage[off] = value
        return store

    def _realize(self, key, dtype, bounds, condition, body_stmt):
        mins = [self.expr(r.min) for r in bounds]
        exts = [self.expr(r.extent) for r in bounds]
        body = self.stmt(body_stmt)

        def realize(env):
            lo = [int(f(env)) for f in mins]
            ext = [int(f(env)) for f in exts]
            old = env.get(key)
            env[key] = _Realized(_new_storage(dtype, int(np.prod(ext)) if ext else 1), lo, ext)
            try:
                body(env)
            finally:
                if old is None:
                    env.pop(key, None)
                else:
                    env[key] = old
        return realize

    def s_BufferRealize(self, s):
        return self._realize(s.buffer, s.buffer.dtype, s.bounds, s.condition, s.body)

    def s_ProducerRealize(self, s):
        return self._realize(s.producer, s.producer.dtype, s.bounds, s.condition, s.body)

    def s_Allocate(self, s):
        exts = [self.expr(x) for x in s.extents]
        body = self.stmt(s.body)
        var = s.buffer_var
        dtype = s.dtype

        def allocate(env):
            count = 1
            for f in exts:
                count *= int(f(env))
            old = env.get(var, _MISSING)
            env[var] = _new_storage(dtype, count)
            try:
                body(env)
            finally:
                if old is _MISSING:
                    env.pop(var, None)
                else:
                    env[var] = old
        return allocate

    def s_DeclBuffer(self, s):
        return self.stmt(s.body)

    def s_For(self, s):
        fmin, fext = self.expr(s.min), self.expr(s.extent)
        body = self.stmt(s.body)
        var = s.loop_var
        wrap = _int_wrapper(var.dtype)

        def loop(env):
            lo = fmin(env)
            hi = lo + fext(env)
            old = env.get(var, _MISSING)
            for i in range(lo, hi):
                env[var] = wrap(i)
                body(env)
            if old is _MISSING:
                env.pop(var, None)
            else:
                env[var] = old
        return loop

    def s_While(self, s):
        fc, body = self.expr(s.condition), self.stmt(s.body)

        def loop(env):
            while fc(env):
                body(env)
        return loop

    def s_IfThenElse(self, s):
        fc = self.expr(s.condition)
        ft = self.stmt(s.then_case)
        fe = self.stmt(s.else_case) if s.else_case is not None else None

        def branch(env):
            if fc(env):
                ft(env)
            elif fe is not None:
                fe(env)
        return branch

    def s_Prefetch(self, s):
        return lambda env: None


_MISSING = object()


def _safe_str(e) -> str:
    try:
        return str(e)
    except Exception:  # printing is best effort inside error messages
        return type(e).__name__


def _check_range(i, ext, mask, name, dim, idx, lo):
    if isinstance(i, np.ndarray):
        bad = (i < 0) | (i >= ext)
        if mask is not None:
            bad = bad & mask
        if np.any(bad):
            where = f"dimension {dim}" if dim is not None else "flat offset"
            raise InterpreterError(
                f"out-of-bounds access to buffer {name}: {where} index lanes {i[bad].tolist()} "
                f"outside [0, {ext}) (indices {[_fmt(x) for x in idx]})")
        return
    if not 0 <= i < ext:
        where = f"dimension {dim}" if dim is not None else "flat offset"
        raise InterpreterError(
            f"out-of-bounds access to buffer {name}: {where} index {i + lo if dim is not None else i} "
            f"outside [{lo}, {lo + ext}) (indices {[_fmt(x) for x in idx]})")


def _fmt(x):
    return x.tolist() if isinstance(x, np.ndarray) else x


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------
def _bind_buffer(buf: Buffer, arr, env: dict, deferred: list, pname: str):
    if not isinstance(arr, np.ndarray):
        raise InterpreterError(f"argument {pname}: expected a numpy array for buffer {buf.name}, got {type(arr).__name__}")
    want = parse_dtype(buf.dtype)
    if want.lanes != 1:
        raise InterpreterError(f"argument {pname}: vector element dtype {buf.dtype} is not supported")
    if arr.dtype != want.numpy_dtype():
        raise InterpreterError(f"argument {pname}: buffer {buf.name} has dtype {buf.dtype} but the array is {arr.dtype}")
    if arr.ndim != len(buf.shape):
        raise InterpreterError(
            f"argument {pname}: buffer {buf.name} has {len(buf.shape)} dimension(s) but the array has shape {arr.shape}")
    if not arr.flags.c_contiguous:
        raise InterpreterError(f"argument {pname}: the array must be C-contiguous (outputs are written in place)")
    for d, (s, n) in enumerate(zip(buf.shape, arr.shape)):
        _bind_or_check(s, n, env, deferred, f"{pname}.shape[{d}]")
    if buf.strides:
        item = arr.itemsize
        for d, (s, n) in enumerate(zip(buf.strides, arr.strides)):
            _bind_or_check(s, n // item, env, deferred, f"{pname}.strides[{d}]")
    _bind_or_check(buf.elem_offset, 0, env, deferred, f"{pname}.elem_offset")
    flat = arr.reshape(-1)
    if flat.size and not np.shares_memory(flat, arr):
        raise InterpreterError(f"argument {pname}: could not take a flat view of the array")
    env[buf.data] = flat


def _bind_or_check(expr, value, env, deferred, what):
    if isinstance(expr, E.Var) and expr not in env:
        env[expr] = int(value)
    else:
        deferred.append((expr, int(value), what))


def run_primfunc(func: PrimFunc, args: list) -> None:
    """Execute ``func`` on ``args`` (numpy arrays for buffers, Python numbers for scalars).

    Outputs are written in place into the arrays. Shape variables are bound from the arrays'
    shapes through ``func.buffer_map``; a mismatch with an already-known extent raises.
    """
    if not isinstance(func, PrimFunc):
        raise InterpreterError(f"run_primfunc expects a PrimFunc, got {type(func).__name__}")
    if len(args) != len(func.params):
        raise InterpreterError(f"the function takes {len(func.params)} argument(s) but {len(args)} were given")
    env: dict = {}
    deferred: list = []
    for i, (p, a) in enumerate(zip(func.params, args)):
        pname = f"#{i} ({p.name})"
        buf = func.buffer_map.get(p)
        if buf is not None:
            _bind_buffer(buf, a, env, deferred, pname)
            env[p] = env[buf.data]
        elif isinstance(a, np.ndarray) and parse_dtype(p.dtype).is_handle:
            if not a.flags.c_contiguous:
                raise InterpreterError(f"argument {pname}: the array must be C-contiguous")
            env[p] = a.reshape(-1)
        else:
            if isinstance(a, np.ndarray):
                if a.ndim != 0:
                    raise InterpreterError(f"argument {pname}: scalar parameter of dtype {p.dtype} got an array")
                a = a.item()
            if not isinstance(a, (int, float, bool, np.generic)):
                raise InterpreterError(f"argument {pname}: expected a number for {p.dtype}, got {type(a).__name__}")
            if parse_dtype(p.dtype).is_integral and isinstance(a, float) and not a.is_integer():
                raise InterpreterError(f"argument {pname}: {p.dtype} parameter got the non-integer {a}")
            env[p] = _to_scalar(a, p.dtype)
    comp = _Compiler()
    for expr, value, what in deferred:
        got = comp.expr(expr)(env)
        if int(got) != value:
            raise InterpreterError(f"argument {what}: expected {expr} = {got}, but the array has {value}")
    body = comp.stmt(func.body)
    with np.errstate(all="ignore"):
        body(env)


def eval_expr(expr, bindings: dict | None = None):
    """Evaluate a closed (or ``bindings``-closed) expression: Var -> value. Used by tests."""
    comp = _Compiler()
    env = {}
    for k, v in (bindings or {}).items():
        env[k] = v if isinstance(v, np.ndarray) else _to_scalar(v, k.dtype)
    with np.errstate(all="ignore"):
        return comp.expr(expr)(env)
