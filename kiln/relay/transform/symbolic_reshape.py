"""Static reshapes from shape arithmetic over unknown dims (part of DynamicToStatic).

Exporters compute reshape targets at run time: ONNX BERT's ``x.view(b, s, heads, d)`` is
``dyn.reshape(x, concatenate([take(shape_of(x), 0), take(shape_of(x), 1), [4], [64]]))``. With unknown batch
and sequence nothing there folds to a constant, so the reshape stays ``dyn.`` and its type is all ``Any``
(``(?, ?, ?, ?)``): every op after it loses its static dims (softmax over ``?`` heads, GELU over ``?``
features), runs on generic unvectorized kernels, and the reshape cannot fuse.

This pass evaluates the shape arithmetic symbolically. Every tensor gets a symbolic shape (static dims of its
type, one ``tir`` variable per unknown dim of a parameter, the ops' shape functions traced over those for
calls); small integer tensors computed from shapes (``shape_of``, ``take``/``strided_slice``/``reshape``/
``concatenate``/``cast``/``squeeze``/``expand_dims``, elementwise ``+ - * /`` and ``where(equal(..))`` over
them) get a symbolic *value*. A ``dyn.reshape`` whose target value is known becomes a static ``reshape``
with Relay's codes: a static entry stays, an entry equal to the input dim at the same position becomes ``0``
(copy), and one remaining entry becomes ``-1`` when the element counts are provably equal. The result has the
same value for every run-time size (the dyn op and the static op agree on 0/-1; other negative entries are
left alone), and its type keeps every static dim (``(?, ?, 4, 64)``).
"""
from __future__ import annotations

import numpy as np

from ...ir.op import Op
from ...ir.type import TensorType, TupleType
from ... import tir
from ...tir import op as T
from ..expr import Call, Constant, Tuple, TupleGetItem, Var
from ..expr_functor import NonPrimitiveMutator, post_order_visit
from .. import op as O

_MAX_VALUE_LEN = 16  # integer tensors longer than this are data, not shapes


def _int(d):
    v = getattr(d, "value", d)
    return int(v) if isinstance(v, (int, np.integer)) else None


def _broadcast_pairs(x, y):
    """The entries of two value vectors ``(entries, shape)`` paired as numpy broadcasting pairs them (a length-1
    vector repeats), or None when the lengths do not broadcast."""
    n = max(len(x[0]), len(y[0]))
    if len(x[0]) not in (1, n) or len(y[0]) not in (1, n):
        return None
    return [(x[0][k if len(x[0]) > 1 else 0], y[0][k if len(y[0]) > 1 else 0]) for k in range(n)]


def fresh_shape(ty, new_dim):
    """The symbolic shape of a value of type ``ty``: static dims as ints, ``new_dim()`` for each unknown one; a
    tuple type gives ``("tuple", [fields])``, any other type None (also used by the VM's ``SymDims``)."""
    if isinstance(ty, TupleType):
        return ("tuple", [fresh_shape(f, new_dim) for f in ty.fields])
    if isinstance(ty, TensorType):
        return tuple(new_dim() if _int(d) is None else _int(d) for d in ty.shape)
    return None


def _checked_type(e):
    return getattr(e, "_checked_type_", None)


class _Sym:
    """Symbolic shapes and values of the nodes of one function. ``type_of(expr)`` gives a node's Relay type
    (default: its ``checked_type``; the ONNX importer passes its incremental type cache)."""

    def __init__(self, type_of=None):
        from ...arith import Analyzer
        self.type_of = type_of or _checked_type
        self.ana = Analyzer()
        self.shape: dict = {}   # id(expr) -> tuple of dims, or ("tuple", [shapes])
        self.value: dict = {}   # id(expr) -> (entries list, shape tuple) for small integer tensors
        self.keep: list = []    # the nodes keyed by id stay alive
        self.n = 0

    def simp(self, d):
        if isinstance(d, (int, np.integer)):
            return int(d)
        r = _absorb(self, self.ana.simplify(d))
        s = _int(r)
        return s if s is not None else r

    def equal(self, a, b) -> bool:
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        ma, mb = _monomial(a), _monomial(b)
        if ma is not None and mb is not None:
            return ma == mb
        return self.simp(_expr(a) - _expr(b)) == 0

    def fresh(self, ty):
        return fresh_shape(ty, self._new_dim)

    def _new_dim(self):
        self.n += 1
        return tir.SizeVar(f"d{self.n - 1}", "int64")

    def shape_of(self, e):
        s = self.shape.get(id(e))
        if s is None:
            s = self.fresh(self.type_of(e))
            self._set(e, s)
        return s

    def _set(self, e, s) -> None:
        self.keep.append(e)
        self.shape[id(e)] = s

    # -- per node ---------------------------------------------------------------------------------------
    def visit(self, e) -> None:
        if isinstance(e, Constant):
            arr = e.numpy()
            self._set(e, tuple(int(d) for d in arr.shape))
            if arr.dtype.kind in "iub" and arr.ndim <= 1 and arr.size <= _MAX_VALUE_LEN:
                cast = bool if arr.dtype.kind == "b" else int  # bool masks select entries (where)
                self.value[id(e)] = ([cast(v) for v in arr.reshape(-1)], tuple(arr.shape))
            return
        ty = self.type_of(e)
        if isinstance(e, Tuple):
            self._set(e, ("tuple", [self.shape_of(f) for f in e.fields]))
            return
        if isinstance(e, TupleGetItem):
            s = self.shape_of(e.tuple_value)
            if isinstance(s, tuple) and len(s) == 2 and s[0] == "tuple" and e.index < len(s[1]):
                self._set(e, s[1][e.index])
            return
        if not (isinstance(e, Call) and isinstance(e.op, Op)) or not isinstance(ty, (TensorType, TupleType)):
            return  # vars, functions, ifs...: fresh symbols when asked
        self._set(e, self._call_shape(e, ty))
        if isinstance(ty, TensorType) and str(ty.dtype).startswith(("int", "uint")) and len(ty.shape) <= 1:
            v = self._call_value(e)
            if v is not None:
                self.value[id(e)] = v

    def _call_shape(self, call: Call, ty):
        name = call.op.name
        out = None
        if name == "dyn.reshape":
            v = self.value.get(id(call.args[1]))
            if v is not None:
                out = _reshape_dims(self, self.shape_of(call.args[0]), v[0], bool(call.attrs.allowzero))
        elif name == "dyn.broadcast_to":
            v = self.value.get(id(call.args[1]))
            if v is not None and isinstance(ty, TensorType) and len(v[0]) == len(ty.shape):
                out = self._broadcast(self.shape_of(call.args[0]), v[0])
        elif name == "reshape" and all(int(v) >= -1 for v in call.attrs.newshape):
            # as the shape function, but an inferred dim cancels symbolic factors: (b, s*64) -> [0, -1]
            # gives s*64, not (b*s*64) // b (which no rewrite downstream could match)
            out = _reshape_dims(self, self.shape_of(call.args[0]), [int(v) for v in call.attrs.newshape],
                                bool(call.attrs.allowzero))
        elif not call.op.get_attr("TShapeDataDependent"):
            out = self._traced(call)
        elif name == "arange":
            out = self._arange_shape(call)
        elif name == "dyn.strided_slice":
            out = self._slice_shape(call)
        if out is None or not isinstance(ty, TensorType) or len(out) != len(ty.shape):
            return self._merge(self.fresh(ty), out, ty)
        return tuple(_int(t) if _int(t) is not None else self.simp(d) for t, d in zip(ty.shape, out))

    def _arange_shape(self, call: Call):
        """``(ceil(stop / step),)`` for ``arange(0, stop, step)`` with a dim-valued ``stop`` and a static positive
        ``step`` (position ids: ``arange(seq)`` has the sequence's symbol, not a fresh one), else None."""
        vals = [self.value.get(id(a)) for a in call.args[:3]]
        if any(v is None or v[1] != () for v in vals):
            return None
        start, stop, step = (v[0][0] for v in vals)
        if not (isinstance(start, int) and start == 0 and isinstance(step, int) and step > 0) or \
                isinstance(stop, bool) or not _nonneg(stop):
            return None
        if isinstance(stop, int):
            return (-(-stop // step),)
        return (stop if step == 1 else self.simp(T.floordiv(_expr(stop) + (step - 1), _expr(step))),)

    def _slice_shape(self, call: Call):
        """``dyn.strided_slice`` with known (possibly symbolic) begin/end and positive static strides: the
        clamped lengths (``bias[:, :, :s, :s]`` of a ``(1, 1, 16, 16)`` buffer is ``(1, 1, min(s, 16), ...)``)."""
        if getattr(call.attrs, "slice_mode", "end") != "end":
            return None
        shape = self.shape_of(call.args[0])
        vals = [self.value.get(id(a)) for a in call.args[1:4]]
        if not isinstance(shape, tuple) or (shape and shape[0] == "tuple") or any(v is None for v in vals):
            return None
        begin, end, strides = (v[0] for v in vals)
        if not len(begin) == len(end) == len(strides) == len(shape):
            return None
        out = []
        for dim, b, e, st in zip(shape, begin, end, strides):
            if not (isinstance(st, int) and not isinstance(st, bool) and st > 0) or \
                    isinstance(b, bool) or isinstance(e, bool):
                return None
            start, stop = self._clamp(b, dim, 0), self._clamp(e, dim, dim)
            if start is None or stop is None:
                return None
            n = _expr(stop) - _expr(start) + (st - 1)
            out.append(self.simp(T.floordiv(T.max(n, _expr(0)), _expr(st))))
        return tuple(out)

    def _clamp(self, v, dim, whole):
        """A slice bound clamped to ``[0, dim]`` (negative ints count from the end; INT32/INT64_MAX is
        ``whole``); a symbolic bound must be a non-negative dim expression."""
        if isinstance(v, int):
            if v >= 2 ** 31 - 1:
                return whole
            if v < 0:
                return self.simp(T.max(_expr(dim) + v, _expr(0)))
            return self.simp(T.min(_expr(v), _expr(dim))) if not isinstance(dim, int) else min(v, dim)
        return self.simp(T.min(_expr(v), _expr(dim))) if _nonneg(v) else None

    def _merge(self, fresh, out, ty):
        if isinstance(ty, TupleType) and isinstance(out, list) and len(out) == len(ty.fields):
            return ("tuple", [tuple(_int(t) if _int(t) is not None else self.simp(d)
                                    for t, d in zip(f.shape, o)) if isinstance(f, TensorType) and len(o) == len(f.shape)
                               else self.fresh(f) for f, o in zip(ty.fields, out)])
        return fresh

    def _traced(self, call: Call):
        from ..op.shape_func import get_shape_func
        try:
            fn, _ = get_shape_func(call.op.name)
        except Exception:  # noqa: BLE001 - an op without a shape function: fresh symbols
            return None
        shapes = []
        for a in call.args:
            s = self.shape_of(a)
            if s is None:
                return None
            if isinstance(s, tuple) and len(s) == 2 and s[0] == "tuple":
                if not all(isinstance(f, tuple) and (not f or f[0] != "tuple") for f in s[1]):
                    return None
                shapes.extend(s[1])
            else:
                shapes.append(s)
        try:
            out = fn(call.attrs, shapes, None)
        except Exception:  # noqa: BLE001 - a shape function that needs numbers: fresh symbols
            return None
        ty = self.type_of(call)
        if isinstance(ty, TupleType):
            return [tuple(o) for o in out]
        return tuple(out[0]) if len(out) == 1 else None

    def _broadcast(self, in_shape, target: list):
        out = list(target)
        for k in range(1, len(in_shape) + 1):
            d = in_shape[-k]
            t = target[-k]
            if isinstance(t, int) and t == 1:
                out[-k] = d
        return tuple(out)

    # -- values of shape tensors --------------------------------------------------------------------------
    def _call_value(self, call: Call):
        name, a, attrs = call.op.name, call.args, call.attrs
        vals = [self.value.get(id(x)) for x in a]
        if name == "shape_of":
            s = self.shape_of(a[0])
            if isinstance(s, tuple) and (not s or s[0] != "tuple"):
                return (list(s), (len(s),))
            return None
        if name in ("cast", "reshape", "squeeze", "expand_dims", "copy") and vals[0] is not None:
            return (list(vals[0][0]), tuple(_int(d) for d in self.type_of(call).shape))
        if name == "take" and vals[0] is not None and vals[1] is not None and len(vals[0][1]) == 1:
            entries = vals[0][0]
            idx = vals[1][0]
            if not all(isinstance(i, int) and -len(entries) <= i < len(entries) for i in idx):
                return None
            return ([entries[i] for i in idx], vals[1][1])
        if name == "strided_slice" and vals[0] is not None and len(vals[0][1]) == 1 and \
                (attrs.axes is None or [int(x) for x in attrs.axes] in ([0], [-1])):
            entries = vals[0][0]
            b = list(attrs.begin)[0] if attrs.begin else 0
            en = list(attrs.end)[0] if attrs.end else len(entries)
            st = list(attrs.strides)[0] if attrs.strides else 1
            if attrs.slice_mode == "size":
                en = len(entries) if en < 0 else b + en
            sl = entries[int(b):int(en):int(st)]
            return (sl, (len(sl),))
        if name == "concatenate":
            fields = getattr(a[0], "fields", None)
            if fields is None:
                return None
            fv = [self.value.get(id(f)) for f in fields]
            if any(v is None or len(v[1]) != 1 for v in fv):
                return None
            out = [x for v in fv for x in v[0]]
            return (out, (len(out),))
        if name in ("add", "subtract", "multiply", "divide", "floor_divide") and None not in vals:
            return self._elementwise(name, vals[0], vals[1])
        if name == "where" and None not in vals:
            c, x, y = vals
            n = max(len(c[0]), len(x[0]), len(y[0]))
            if any(len(v[0]) not in (1, n) for v in vals):
                return None
            out = []
            for k in range(n):
                ck = c[0][k if len(c[0]) > 1 else 0]
                if not isinstance(ck, bool):
                    return None
                out.append((x if ck else y)[0][k if len((x if ck else y)[0]) > 1 else 0])
            return (out, (n,) if max(len(v[1]) for v in vals) else ())
        return None

    def _elementwise(self, name, x, y):
        pairs = _broadcast_pairs(x, y)
        if pairs is None:
            return None
        out = []
        for p, q in pairs:
            if isinstance(p, bool) or isinstance(q, bool):
                return None
            if isinstance(p, int) and isinstance(q, int):
                if name in ("divide", "floor_divide"):
                    if q == 0:
                        return None
                    r = p // q if name == "floor_divide" or (p >= 0) == (q > 0) else -(-p // q)
                else:
                    r = {"add": p + q, "subtract": p - q, "multiply": p * q}[name]
                out.append(r)
                continue
            if name in ("divide", "floor_divide"):
                if not (isinstance(q, int) and q > 0 and _nonneg(p)):
                    return None  # C division truncates: floordiv only for a non-negative numerator
                out.append(self.simp(T.floordiv(_expr(p), _expr(q))))
            else:
                f = {"add": lambda u, v: u + v, "subtract": lambda u, v: u - v, "multiply": lambda u, v: u * v}[name]
                out.append(self.simp(f(_expr(p), _expr(q))))
        return (out, (len(out),) if max(len(x[1]), len(y[1])) else ())

    def visit_equal(self, call: Call) -> None:
        """visit() of an ``equal`` call whose entries equal_value decides stand as its value (the
        ``where(equal(shape, -1), ..)`` of the exporters' reshape targets)."""
        v = self.equal_value(call)
        self.visit(call)
        if v is not None:
            self.value[id(call)] = v

    def equal_value(self, call: Call):
        """``equal(v, c)`` entries decided symbolically: a dim (non-negative) never equals a negative constant."""
        x, y = (self.value.get(id(a)) for a in call.args)
        if x is None or y is None:
            return None
        pairs = _broadcast_pairs(x, y)
        if pairs is None:
            return None
        out = []
        for p, q in pairs:
            if isinstance(p, int) and isinstance(q, int):
                out.append(p == q)
            elif isinstance(q, int) and q < 0 and _nonneg(p) or isinstance(p, int) and p < 0 and _nonneg(q):
                out.append(False)
            elif not isinstance(p, int) and not isinstance(q, int) and self.equal(p, q):
                out.append(True)
            else:
                return None
        return (out, (len(out),) if max(len(x[1]), len(y[1])) else ())


def _absorb(sym: "_Sym", e):
    """``max(min(a, c), a)`` is ``a`` and ``min(max(a, c), a)`` is ``a`` (the simplifier keeps both): a clamped
    slice of a buffer broadcast against the unclamped size (a causal bias ``bias[:s, :s]`` against the scores)."""
    from ...tir import expr as E
    if isinstance(e, (E.Max, E.Min)):
        inner = E.Min if isinstance(e, E.Max) else E.Max
        a, b = _absorb(sym, e.a), _absorb(sym, e.b)
        for x, y in ((a, b), (b, a)):
            if isinstance(x, inner) and (sym.equal(x.a, y) or sym.equal(x.b, y)):
                return y
        if a is not e.a or b is not e.b:
            return type(e)(a, b)
    return e


def _monomial(e):
    """``(coefficient, sorted variable ids)`` of a product of dims and constants (the simplifier does not
    reorder products: ``a*(b*64)`` and ``a*b*64`` are the same monomial), else None."""
    from ...tir import expr as E
    if isinstance(e, (int, np.integer)):
        return (int(e), ())
    if isinstance(e, E.IntImm):
        return (int(e.value), ())
    if isinstance(e, E.Var):
        return (1, (id(e),))
    if isinstance(e, E.Cast):
        return _monomial(e.value)
    if isinstance(e, E.Mul):
        a, b = _monomial(e.a), _monomial(e.b)
        if a is None or b is None:
            return None
        return (a[0] * b[0], tuple(sorted(a[1] + b[1])))
    return None


def _expr(v):
    return tir.IntImm("int64", v) if isinstance(v, int) else v


def _nonneg(e) -> bool:
    """Whether ``e`` (a dim expression) is provably >= 0: dims and sums/products/quotients of them."""
    from ...tir import expr as E
    if isinstance(e, bool):
        return False
    if isinstance(e, int):
        return e >= 0
    if isinstance(e, E.IntImm):
        return e.value >= 0
    if isinstance(e, E.Var):
        return True
    if isinstance(e, E.Cast):
        return _nonneg(e.value)
    if isinstance(e, (E.Add, E.Mul, E.FloorDiv, E.Max, E.Min)):
        return _nonneg(e.a) and _nonneg(e.b)
    return False


def _reshape_dims(sym: _Sym, in_shape, entries: list, allowzero: bool):
    """Output dims of a reshape to the symbolic ``entries`` (None when not decidable)."""
    if not isinstance(in_shape, tuple) or (in_shape and in_shape[0] == "tuple"):
        return None
    out, infer_at = [], None
    for k, v in enumerate(entries):
        if isinstance(v, bool):
            return None
        if isinstance(v, int) and v == 0 and not allowzero:
            if k >= len(in_shape):
                return None
            out.append(in_shape[k])
        elif isinstance(v, int) and v == -1:
            if infer_at is not None:
                return None
            infer_at = k
            out.append(1)
        elif isinstance(v, int) and v < 0:
            return None
        else:
            out.append(v)
    if infer_at is not None:
        rest = [d for j, d in enumerate(out) if j != infer_at]
        out[infer_at] = _quotient(sym, list(in_shape), rest)
    return tuple(out)


def _quotient(sym: _Sym, num: list, den: list):
    """prod(num) // prod(den), cancelling equal symbolic factors first (``b*4*s*64 // (s*64)`` is ``b*4``)."""
    num = list(num)
    k = 1
    for d in den:
        if isinstance(d, int):
            k *= d
            continue
        for i, n in enumerate(num):
            if not isinstance(n, int) and sym.equal(n, d):
                del num[i]
                break
        else:
            return sym.simp(T.floordiv(_expr(_prod(num)), _expr(_prod(den))))
    c = 1
    for n in num:
        if isinstance(n, int):
            c *= n
    sym_part = [n for n in num if not isinstance(n, int)]
    if k == 0:
        return None
    if c % k == 0:
        return sym.simp(_expr(_prod([c // k] + sym_part))) if sym_part else c // k
    return sym.simp(T.floordiv(_expr(_prod(num)), _expr(k)))


def _prod(dims):
    p = 1
    for d in dims:
        p = p * d if isinstance(p, int) and isinstance(d, int) else _expr(p) * _expr(d)
    return p


def _static_newshape(sym: _Sym, in_shape, entries: list, allowzero: bool):
    """Relay codes for a static reshape equal to ``dyn.reshape(x, entries)`` for every run-time size, or None."""
    if not isinstance(in_shape, tuple) or (in_shape and in_shape[0] == "tuple"):
        return None
    codes, open_at = [], []
    for k, v in enumerate(entries):
        if isinstance(v, bool):
            return None
        if isinstance(v, int):
            if v < -1 or (v == 0 and allowzero):
                return None
            codes.append(v)
            continue
        v = sym.simp(v)
        if isinstance(v, int):
            if v <= 0:
                return None
            codes.append(v)
        elif not allowzero and k < len(in_shape) and sym.equal(v, in_shape[k]):
            codes.append(0)
        else:
            codes.append(None)
            open_at.append(k)
    if not open_at:
        return codes
    if len(open_at) > 1 or -1 in codes:
        return None
    # one entry left: -1 when prod(input) == prod(target) is provable (then the inferred dim is that entry)
    target = [in_shape[k] if c == 0 else (entries[k] if c is None else c) for k, c in enumerate(codes)]
    diff = sym.simp(_expr(_prod(in_shape)) - _expr(_prod(target)))
    if diff != 0:
        return None
    codes[open_at[0]] = -1
    return codes


def _stale_type(sym: _Sym, data, in_shape) -> bool:
    """Whether ``data``'s type says ``?`` where its symbolic shape is a number (it is the output of a reshape
    rewritten in this round): the static reshape's relation would not see that number yet, so the rewrite
    waits for the next round's type inference."""
    ty = sym.type_of(data)
    if not isinstance(ty, TensorType) or len(ty.shape) != len(in_shape):
        return True
    return any(_int(t) is None and isinstance(d, int) for t, d in zip(ty.shape, in_shape))


def _split_codes(sym: _Sym, in_shape, target: list):
    """Relay reshape codes taking ``in_shape`` to the resolved symbolic ``target`` dim by dim: copy (0, or the
    static value), split one input dim into two (-4 a b, one of them static), merge two input dims (-3);
    None when the target is not such a regrouping."""
    codes, i, j = [], 0, 0
    n, m = len(in_shape), len(target)
    while j < m:
        t = target[j]
        if i < n and sym.equal(t, in_shape[i]):
            codes.append(t if isinstance(t, int) else 0)
            i, j = i + 1, j + 1
        elif i < n and j + 1 < m and sym.equal(_prod([t, target[j + 1]]), in_shape[i]):
            u = target[j + 1]
            if isinstance(t, int) and t > 0:
                codes += [-4, t, u if isinstance(u, int) else -1]
            elif isinstance(u, int) and u > 0:
                codes += [-4, -1, u]
            else:
                return None
            i, j = i + 1, j + 2
        elif i + 1 < n and sym.equal(t, _prod([in_shape[i], in_shape[i + 1]])):
            codes.append(-3)
            i, j = i + 2, j + 1
        elif isinstance(t, int) and t == 1:
            codes.append(1)
            j += 1
        else:
            return None
    while i < n and isinstance(in_shape[i], int) and in_shape[i] == 1:
        i += 1
    return codes if i == n else None


def _like_source(sym: _Sym, in_shape, target: list, candidates: list):
    """(tensor, attrs) for ``reshape_like(x, tensor, **attrs)`` giving ``target``: the dims of ``x`` kept at both
    ends, the middle taken from a contiguous run of dims of one of ``candidates`` (TVM's lhs/rhs ranges)."""
    n, m = len(in_shape), len(target)
    p = 0
    while p < min(n, m) and sym.equal(in_shape[p], target[p]):
        p += 1
    q = 0
    while q < min(n, m) - p and sym.equal(in_shape[n - 1 - q], target[m - 1 - q]):
        q += 1
    shapes = []
    for c in candidates:
        s = sym.shape.get(id(c))
        if isinstance(s, tuple) and (not s or s[0] != "tuple"):
            shapes.append((c, s))
    for pp in range(p, -1, -1):
        for qq in range(q, -1, -1):
            mid = target[pp:m - qq]
            if not mid or not sym.equal(_prod(in_shape[pp:n - qq]), _prod(mid)):
                continue
            for c, s in shapes:
                for rb in range(len(s) - len(mid) + 1):
                    if all(sym.equal(a, b) for a, b in zip(s[rb:rb + len(mid)], mid)):
                        return c, {"lhs_begin": pp, "lhs_end": n - qq, "rhs_begin": rb, "rhs_end": rb + len(mid)}
    return None


def _plan(sym: _Sym, call: Call, candidates: list):
    """How to make the dyn call ``call`` static: ``("codes", newshape)`` (a static reshape), ``("like", y,
    attrs)`` (``reshape_like``), ``("same",)`` (a ``dyn.broadcast_to`` to the input's own shape), or None."""
    v = sym.value.get(id(call.args[1]))
    if v is None:
        return None
    in_shape = sym.shape_of(call.args[0])
    if not isinstance(in_shape, tuple) or (in_shape and in_shape[0] == "tuple"):
        return None
    if call.op.name == "dyn.broadcast_to":
        same = len(v[0]) == len(in_shape) and all(not isinstance(t, bool) and sym.equal(t, d)
                                                 for t, d in zip(v[0], in_shape))
        return ("same",) if same else None
    allowzero = bool(call.attrs.allowzero)
    codes = _static_newshape(sym, in_shape, v[0], allowzero)
    target = sym.shape.get(id(call))
    if codes is None and isinstance(target, tuple) and (not target or target[0] != "tuple") and \
            sym.equal(_prod(in_shape), _prod(target)):
        codes = _split_codes(sym, in_shape, list(target))
        if codes is None:
            like = _like_source(sym, in_shape, list(target), candidates)
            if like is not None:
                return ("like",) + like
    if codes is not None and not _stale_type(sym, call.args[0], in_shape):
        return ("codes", codes)
    return None


def _apply(how, call, data, visit):
    """The static replacement of the dyn ``call`` (with its data operand ``data``) planned as ``how``."""
    if how[0] == "same":
        return data
    if how[0] == "like":
        return O.reshape_like(data, visit(how[1]), **how[2])
    return O.reshape(data, how[1], allowzero=bool(call.attrs.allowzero))


_REWRITTEN = ("dyn.reshape", "dyn.broadcast_to")


class _Rewrite(NonPrimitiveMutator):
    def __init__(self, plan: dict):
        super().__init__()
        self.plan = plan
        self.changed = 0

    def visit_call(self, call):
        new = super().visit_call(call)
        how = self.plan.get(id(call))
        if how is not None and isinstance(new, Call):
            self.changed += 1
            return _apply(how, call, new.args[0], self.visit)
        return new


def symbolic_reshapes(func):
    """``func`` with every ``dyn.reshape`` whose target is computable from shapes made static (same function
    when none is); ``func`` must be type-checked."""
    sym = _Sym()
    plan: dict = {}
    calls = []
    shaped = list(func.params)  # tensors whose shape the program reads: reshape_like sources
    order = {id(p): -1 for p in func.params}  # post-order index: a source must come before the reshape

    def visit(e):
        if isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == "equal":
            sym.visit_equal(e)
            return
        sym.visit(e)
        order[id(e)] = len(order)
        if isinstance(e, Call) and isinstance(e.op, Op) and e.op.name in _REWRITTEN:
            calls.append(e)
        if isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == "shape_of":
            shaped.append(e.args[0])

    for p in func.params:
        sym.shape_of(p)
    post_order_visit(func.body, visit)
    for c in calls:
        how = _plan(sym, c, [t for t in shaped if order.get(id(t), 1 << 60) < order[id(c)]])
        if how is not None:
            plan[id(c)] = how
    if not plan:
        return func
    rw = _Rewrite(plan)
    new = rw.visit(func)
    return new if rw.changed else func


class IncrementalSymbolicReshapes:
    """The same rewrite applied while a frontend builds its graph (the ONNX importer, after each node).

    Converters ask for static dims (``Gemm``'s K, the next reshape's input): a ``dyn.reshape`` left until
    ``DynamicToStatic`` runs after the import hides them from every converter in between. ``rewrite(expr)``
    walks only the nodes it has not seen (their operands are already rewritten), keeps the symbolic shapes
    and values of everything seen in one ``_Sym`` (so the symbols of a graph input's unknown dims are the
    same across nodes), and returns ``expr`` with each ``dyn.reshape`` / ``dyn.broadcast_to`` whose target is
    known replaced as :func:`symbolic_reshapes` would. ``type_of`` types a node (the frontend's type cache).
    Functions, ``If`` and ``Let`` nodes are not entered (their insides are left to ``DynamicToStatic``).
    """

    def __init__(self, type_of):
        self.sym = _Sym(type_of)
        self.memo: dict = {}      # id(node) -> its rewritten node (a rewritten node maps to itself)
        self.shaped: list = []    # tensors whose shape the graph reads: reshape_like sources
        self.named: dict = {}     # dim name -> its symbol (declare)
        self.rewritten = 0

    def declare(self, var, names) -> None:
        """Give ``var``'s unknown dims the symbols named in ``names`` (None: a fresh one); dims of different
        graph inputs with the same name are the same size (ONNX's ``dim_param``)."""
        sym = self.sym
        ty = sym.type_of(var)
        if not isinstance(ty, TensorType) or len(names) != len(ty.shape):
            return
        dims = []
        for d, name in zip(ty.shape, names):
            if _int(d) is not None:
                dims.append(_int(d))
            elif name:
                if name not in self.named:
                    self.named[name] = tir.SizeVar(f"{name}", "int64")
                dims.append(self.named[name])
            else:
                dims.append(sym._new_dim())
        sym._set(var, tuple(dims))

    def rewrite(self, expr):
        if expr is None or id(expr) in self.memo:
            return None if expr is None else self.memo[id(expr)]
        stack = [(expr, False)]
        while stack:
            e, ready = stack.pop()
            if id(e) in self.memo:
                continue
            kids = _operands(e)
            if not ready:
                stack.append((e, True))
                stack.extend((k, False) for k in kids if id(k) not in self.memo)
                continue
            new = _rebuilt(e, [self.memo[id(k)] for k in kids])
            new = self._visit(new)
            self.memo[id(e)] = self.memo[id(new)] = new
            self.sym.keep.append(e)
        return self.memo[id(expr)]

    def _visit(self, e):
        sym = self.sym
        if _small_int_call(sym, e) and all(isinstance(a, Constant) for a in e.args):
            from .fold_constant import fold_constant
            folded = fold_constant(e)  # shape arithmetic over constants (a converter's axes mask)
            if isinstance(folded, Constant):
                e = folded
        if isinstance(e, Call) and isinstance(e.op, Op) and e.op.name.startswith("dyn."):
            static = _static_call(e)
            if static is not None:
                self.rewritten += 1
                return self._visit(static)
        if isinstance(e, Call) and isinstance(e.op, Op) and e.op.name in _REWRITTEN:
            sym.type_of(e)
            sym.visit(e)
            how = _plan(sym, e, self.shaped)
            if how is None:
                return e
            self.rewritten += 1
            new = _apply(how, e, e.args[0], lambda x: x)
            if new is not e.args[0]:
                sym.type_of(new)
                sym.visit(new)
            return new
        if isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == "equal":
            sym.type_of(e)
            sym.visit_equal(e)
            return e
        if isinstance(e, (Call, Tuple, TupleGetItem, Constant)):
            sym.type_of(e)
            sym.visit(e)
        if isinstance(e, Var) or isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == "shape_of":
            self.shaped.append(e if isinstance(e, Var) else e.args[0])
        return e


def _static_call(call: Call):
    """DynamicToStatic's rewrite of a dyn call with constant shape operands; a ``dyn.strided_slice`` of data
    with unknown dims too when its strides are positive (the static kernel clamps those at run time)."""
    from .dynamic_to_static import _const_args, _static, _vals
    if call.op.name == "dyn.strided_slice":
        if not _const_args(call, [1, 2, 3]) or min(_vals(call.args[3]) or [1]) <= 0:
            return None
        a = call.args
        return O.strided_slice(a[0], _vals(a[1]), _vals(a[2]), _vals(a[3]), slice_mode=call.attrs.slice_mode)
    return _static(call)


def _small_int_call(sym: _Sym, e) -> bool:
    """An op call giving a small integer or bool tensor (shape arithmetic, not data)."""
    if not (isinstance(e, Call) and isinstance(e.op, Op)):
        return False
    ty = sym.type_of(e)
    if not isinstance(ty, TensorType) or not str(ty.dtype).startswith(("int", "uint", "bool")):
        return False
    dims = [_int(d) for d in ty.shape]
    return None not in dims and int(np.prod(dims)) <= _MAX_VALUE_LEN


def _operands(e) -> list:
    if isinstance(e, Call):
        return list(e.args)
    if isinstance(e, Tuple):
        return list(e.fields)
    if isinstance(e, TupleGetItem):
        return [e.tuple_value]
    return []


def _rebuilt(e, kids: list):
    """``e`` over the rewritten operands ``kids`` (``e`` itself when none changed)."""
    if all(a is b for a, b in zip(_operands(e), kids)):
        return e
    if isinstance(e, Call):
        return Call(e.op, kids, e.attrs, e.type_args, e.span)
    if isinstance(e, Tuple):
        return Tuple(kids, e.span)
    return TupleGetItem(kids[0], e.index)
