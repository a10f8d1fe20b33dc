"""Tensor arrays in the Prelude (TVM's ``TensorArrayOps`` and ``StaticTensorArrayOps``).

A tensor array is a Prelude ``List`` of a tensor ADT. Two flavours, with TVM's names:

- dynamic (``TensorArrayOps(prelude, dtype)``): the element type ``tensor_{dtype}_t`` has one constructor per
  rank, ``tensor0_{dtype}`` .. ``tensor6_{dtype}`` (every dim ``Any``) and ``tensor_nil_{dtype}`` (an unwritten
  slot). Functions: ``tensor_take``, ``tensor_expand_dims``, ``tensor_concatenate``, ``tensor_array``,
  ``tensor_array_read``/``write``, ``tensor_array_unstack_tensor1..6``, ``tensor_array_scatter``,
  ``tensor_array_split``, ``tensor_array_concat``, ``tensor_array_stack``, ``tensor_array_gather``, each
  ``<name>_{dtype}``.
- static (``StaticTensorArrayOps(prelude, dtype, shape)``): the element type ``static_tensor_{dtype}_{dims}_t``
  (dims joined by ``_``, ``any`` for an unknown one, ``scalar`` for rank 0) has the constructors
  ``tensor_constructor_{dtype}_{dims}`` and ``tensor_nil_{dtype}_{dims}``; the same functions plus
  ``tensor_array_unstack`` (of a ``Tensor[shape]``) and ``tensor_get_data`` (back to ``Tensor[shape]``).
  Results whose first dim is not known (stack, concat, split, take) use the type of shape ``[Any] + ...``.

Every function is a Relay function over Prelude lists (``nth``, ``update``, ``map``, ``foldl``), so the VM runs
them like any other code. Row ranges are cut with ``dyn.strided_slice`` (TVM uses ``take`` of an ``arange``).
"""
from __future__ import annotations

from ..error import KilnError
from ..ir.expr import GlobalVar
from ..ir.type import GlobalTypeVar, TensorType, TypeCall
from ..tir.expr import Any as _Any
from . import op as _op
from .adt import Clause, Constructor, Match, PatternConstructor, PatternVar, PatternWildcard, TypeData
from .expr import Function, If, Var, const, Let
from .analysis import free_vars
from .transform import InferType

__all__ = ["TensorArrayOps", "StaticTensorArrayOps", "get_tensor_array_shape", "static_name",
           "DYNAMIC_OPS", "MAX_RANK"]

MAX_RANK = 6
_I32 = TensorType((), "int32")

#: canonical names the dynamic flavour defines (``tensor_t`` is the type)
DYNAMIC_OPS = ("tensor_t", "tensor_nil", *(f"tensor{r}" for r in range(MAX_RANK + 1)), "tensor_take",
               "tensor_expand_dims", "tensor_concatenate", "tensor_array", "tensor_array_read",
               "tensor_array_write", *(f"tensor_array_unstack_tensor{r}" for r in range(1, MAX_RANK + 1)),
               "tensor_array_scatter", "tensor_array_split", "tensor_array_concat", "tensor_array_stack",
               "tensor_array_gather")


def _int(name: str) -> Var:
    return Var(name, _I32)


def _eq(a, b):
    return _op.equal(a, b)


def _rows(t, lower, upper):
    """``t[lower:upper]`` along axis 0, with run-time bounds."""
    return _op.strided_slice(t, _op.expand_dims(lower, 0), _op.expand_dims(upper, 0))


def _len0(t):
    """The size of axis 0 of a tensor, as an int32 scalar."""
    return _op.take(_op.shape_of(t, "int32"), const(0))


def _dims_str(shape) -> str:
    parts = []
    for d in shape:
        if isinstance(d, _Any) or d is None:
            parts.append("any")
        else:
            parts.append(str(int(getattr(d, "value", d))))
    return "_".join(parts)


def static_name(canonical: str, dtype: str, shape, batch_dim=None) -> str:
    """TVM's name of a static tensor array definition (``tensor_array_stack_float32_3_4``)."""
    dims = _dims_str(shape) or "scalar"
    if canonical == "tensor_t":
        return f"static_tensor_{dtype}_{dims}_t"
    if batch_dim == 1 and canonical not in ("tensor_constructor", "tensor_nil"):
        return f"{canonical}_{dtype}_batch1_{dims}"
    return f"{canonical}_{dtype}_{dims}"


#: element functions: canonical name -> ((tensor parameters, int parameters), result kind, op on the
#: unwrapped tensors and the ints)
_ELEM_OPS = {
    "tensor_take": ((("tensor",), ("lower", "upper")), "rows", lambda ts, lo, hi: _rows(ts[0], lo, hi)),
    "tensor_concatenate": ((("x", "y"), ()), "rows", lambda ts: _op.concatenate(list(ts), axis=0)),
    "tensor_expand_dims": ((("x",), ()), "stacked", lambda ts: _op.expand_dims(ts[0], 0, 1)),
}


class _ListOps:
    """The list-level definitions both flavours share; subclasses say which types and constructors to use."""

    def __init__(self, prelude, dtype: str):
        self.prelude = prelude
        self.dtype = str(dtype)
        self.list, self.cons, self.nil = prelude.mod.get_type("List")

    # hooks ---------------------------------------------------------------------------------------------
    def get_name(self, canonical: str) -> str:
        raise NotImplementedError

    def _have(self, name: str) -> bool:
        return any(gv.name_hint == name for gv in self.prelude.mod.get_global_vars())

    def _gvar(self, canonical: str) -> GlobalVar | None:
        """A fresh GlobalVar for ``canonical``, or None when the module already defines it."""
        name = self.get_name(canonical)
        if self._have(name):
            return None
        gv = GlobalVar(name)
        setattr(self.prelude, name, gv)
        return gv

    def get_global_var(self, canonical: str) -> GlobalVar:
        return self.prelude.mod.get_global_var(self.get_name(canonical))

    def _define(self, gv: GlobalVar, func: Function) -> None:
        self.prelude.mod[gv] = func

    def _tensor_ctors(self, tv: GlobalTypeVar) -> list:
        """The constructors of this flavour's tensor ADT ``tv``."""
        raise NotImplementedError

    def _elem_case(self, tensors, kind: str, make):
        """(body, result type var) of an element function: ``tensors`` (Vars of the tensor ADT) unwrapped,
        ``make(unwrapped tensors)`` computed and wrapped again; ``kind`` is "rows" (same rank) or
        "stacked" (rank + 1)."""
        raise NotImplementedError

    def _elem_op_applies(self, kind: str) -> bool:
        return True

    def define_tensor_adt(self) -> None:
        name = self.get_name("tensor_t")
        if name in {tv.name_hint for tv in self.prelude.mod.get_global_type_vars()}:
            self.tensor_type_var = self.prelude.mod.get_global_type_var(name)
            return
        tv = self.tensor_type_var = GlobalTypeVar(name)
        self.prelude.mod[tv] = TypeData(tv, [], self._tensor_ctors(tv))

    def _def_elem_op(self, canonical: str) -> None:
        """Define ``tensor_take`` / ``tensor_concatenate`` / ``tensor_expand_dims`` (see ``_ELEM_OPS``) for
        this flavour: one builder, the flavour's ``_elem_case`` says how tensors are unwrapped."""
        params, kind, make = _ELEM_OPS[canonical]
        if not self._elem_op_applies(kind):
            return
        gv = self._gvar(canonical)
        if gv is None:
            return
        tensors = [Var(n, self.tensor_type_var()) for n in params[0]]
        ints = [_int(n) for n in params[1]]
        body, out_t = self._elem_case(tensors, kind, lambda ts: make(ts, *ints))
        self._define(gv, Function(tensors + ints, body, out_t(), []))

    def define_tensor_take(self) -> None:
        self._def_elem_op("tensor_take")

    def define_tensor_concatenate(self) -> None:
        self._def_elem_op("tensor_concatenate")

    def define_tensor_expand_dims(self) -> None:
        self._def_elem_op("tensor_expand_dims")

    # shared definitions -------------------------------------------------------------------------------
    def _def_tensor_array(self, elem_t: GlobalTypeVar, nil_ctor: Constructor) -> None:
        gv = self._gvar("tensor_array")
        if gv is None:
            return
        n = _int("n")
        body = If(_eq(n, const(0)), self.nil(), self.cons(nil_ctor(), gv(_op.subtract(n, const(1)))))
        self._define(gv, Function([n], body, self.list(elem_t()), []))

    def _def_read_write(self, elem_t: GlobalTypeVar) -> None:
        gv = self._gvar("tensor_array_read")
        if gv is not None:
            ta, n = Var("tensor_array", self.list(elem_t())), _int("n")
            self._define(gv, Function([ta, n], self.prelude.nth(ta, n), elem_t(), []))
        gv = self._gvar("tensor_array_write")
        if gv is not None:
            ta, n, v = Var("tensor_array", self.list(elem_t())), _int("n"), Var("v", elem_t())
            self._define(gv, Function([ta, n, v], self.prelude.update(ta, n, v), self.list(elem_t()), []))

    def _def_unstack(self, canonical: str, in_type: TensorType, out_t: GlobalTypeVar, out_ctor) -> None:
        """``canonical(t) -> List[out_t]``: the rows of ``t`` (axis 0), each wrapped by ``out_ctor``."""
        helper = self._gvar(canonical + "_helper")
        if helper is None:
            return
        i, up, t = _int("i"), _int("up"), Var("t", in_type)
        body = If(_eq(i, up), self.nil(),
                  self.cons(out_ctor(_op.take(t, i, axis=0)), helper(_op.add(i, const(1)), up, t)))
        self._define(helper, Function([i, up, t], body, self.list(out_t()), []))
        gv = self._gvar(canonical)
        t = Var("tensor", in_type)
        self._define(gv, Function([t], helper(const(0), _len0(t), t), self.list(out_t()), []))

    def _def_scatter(self, elem_t: GlobalTypeVar) -> None:
        helper = self._gvar("tensor_array_scatter_helper")
        if helper is None:
            return
        write, read = self.get_global_var("tensor_array_write"), self.get_global_var("tensor_array_read")
        lt = self.list(elem_t())
        ta, cur, limit = Var("ta", lt), _int("current"), _int("limit")
        idx, vals = Var("indices_", TensorType((_Any(),), "int32")), Var("values_", lt)
        body = If(_eq(cur, limit), ta,
                  helper(write(ta, _op.take(idx, cur), read(vals, cur)), _op.add(cur, const(1)), limit, idx, vals))
        self._define(helper, Function([ta, cur, limit, idx, vals], body, lt, []))
        gv = self._gvar("tensor_array_scatter")
        ta, idx, vals = Var("tensor_array", lt), Var("indices", TensorType((_Any(),), "int32")), Var("values", lt)
        self._define(gv, Function([ta, idx, vals], helper(ta, const(0), _len0(idx), idx, vals), lt, []))

    def _def_split(self, value_t: GlobalTypeVar, out_t: GlobalTypeVar, take, write) -> None:
        """``split(ta, value, lengths)``: slot i of ``ta`` gets the next ``lengths[i]`` rows of ``value``."""
        helper = self._gvar("ta_split_helper")
        if helper is None:
            return
        lt = self.list(out_t())
        ta, value, off, cur, limit = Var("tensor_array", lt), Var("value", value_t()), _int("offset"), \
            _int("current"), _int("limit")
        lengths = Var("lengths", TensorType((_Any(),), "int32"))
        n = _op.take(lengths, cur)
        body = If(_eq(cur, limit), ta,
                  write(helper(ta, value, _op.add(off, n), _op.add(cur, const(1)), limit, lengths), cur,
                        take(value, off, _op.add(off, n))))
        self._define(helper, Function([ta, value, off, cur, limit, lengths], body, lt, []))
        gv = self._gvar("tensor_array_split")
        ta, value = Var("tensor_array", lt), Var("value", value_t())
        lengths = Var("lengths", TensorType((_Any(),), "int32"))
        self._define(gv, Function([ta, value, lengths],
                                  helper(ta, value, const(0), const(0), _len0(lengths), lengths), lt, []))

    def _def_concat(self, elem_t: GlobalTypeVar, nil_ctor, concatenate) -> None:
        """``concat(ta)``: the elements joined along axis 0 (``tensor_nil`` for an empty array)."""
        gv = self._gvar("tensor_array_concat")
        if gv is None:
            return
        ta, hd, tl = Var("tensor_array", self.list(elem_t())), Var("hd"), Var("tl")
        cons_case = Match(tl, [Clause(PatternConstructor(self.nil), hd),
                               Clause(PatternWildcard(), concatenate(hd, gv(tl)))], False)
        body = Match(ta, [Clause(PatternConstructor(self.nil), nil_ctor()),
                          Clause(PatternConstructor(self.cons, [PatternVar(hd), PatternVar(tl)]), cons_case)], False)
        self._define(gv, Function([ta], body, elem_t(), []))

    def _def_stack(self, elem_t: GlobalTypeVar, out_t: GlobalTypeVar, expand_dims, concatenate) -> None:
        """``stack(ta)``: every element grown by a leading axis, then joined (a non-empty array)."""
        gv = self._gvar("tensor_array_stack")
        if gv is None:
            return
        p = self.prelude
        ta = Var("tensor_array", self.list(elem_t()))
        grown = Var("grown")
        body = Let(grown, p.map(expand_dims, ta), p.foldl(concatenate, p.hd(grown), p.tl(grown)))
        self._define(gv, Function([ta], body, out_t(), []))

    def _def_gather(self, elem_t: GlobalTypeVar, out_t: GlobalTypeVar) -> None:
        """``gather(ta, indices)``: ``stack([ta[i] for i in indices])``."""
        helper = self._gvar("tensor_array_gather_helper")
        if helper is None:
            return
        stack, read = self.get_global_var("tensor_array_stack"), self.get_global_var("tensor_array_read")
        lt = self.list(elem_t())
        ta, acc, cur, limit = Var("ta", lt), Var("accu", lt), _int("current"), _int("limit")
        idx = Var("indices_", TensorType((_Any(),), "int32"))
        prev = _op.subtract(cur, const(1))
        body = If(_eq(cur, const(0)), stack(acc),
                  helper(ta, self.cons(read(ta, _op.take(idx, prev)), acc), prev, limit, idx))
        self._define(helper, Function([ta, acc, cur, limit, idx], body, out_t(), []))
        gv = self._gvar("tensor_array_gather")
        ta, idx = Var("tensor_array", lt), Var("indices", TensorType((_Any(),), "int32"))
        n = _len0(idx)
        self._define(gv, Function([ta, idx], helper(ta, self.nil(), n, n, idx), out_t(), []))


class TensorArrayOps(_ListOps):
    """Tensor array functions over ``tensor_{dtype}_t``, whose elements may have any shape of rank <= 6."""

    def get_name(self, canonical: str) -> str:
        return self.prelude.get_name(canonical, self.dtype)

    def get_type(self, canonical: str) -> GlobalTypeVar:
        return self.prelude.mod.get_global_type_var(self.get_name(canonical))

    def get_ctor(self, canonical: str) -> Constructor:
        return self.prelude.get_ctor(self.get_name("tensor_t"), canonical, self.dtype)

    def _tensor_ctors(self, tv):
        ctors = [Constructor(self.get_name("tensor_nil"), [], tv)]
        for r in range(MAX_RANK + 1):
            ctors.append(Constructor(self.get_name(f"tensor{r}"), [TensorType((_Any(),) * r, self.dtype)], tv))
        return ctors

    def _elem_case(self, tensors, kind, make):
        # one clause a rank; further tensors must have the same rank (a nested match each)
        shift = 1 if kind == "stacked" else 0
        ranks = range(MAX_RANK) if shift else range(1, MAX_RANK + 1)
        ctor = self.get_ctor

        def inner(r, unwrapped, rest):
            if not rest:
                return ctor(f"tensor{r + shift}")(make(unwrapped))
            b = Var(f"b{r}")
            return Match(rest[0], [Clause(PatternConstructor(ctor(f"tensor{r}"), [PatternVar(b)]),
                                          inner(r, unwrapped + [b], rest[1:]))], False)
        return self._per_rank(tensors[0], ranks, lambda r, t: inner(r, [t], tensors[1:])), self.tensor_type_var

    def _per_rank(self, x, ranks, make):
        """``match? x { tensor<r>(t) => make(r, t) }`` for each rank in ``ranks``."""
        clauses = []
        for r in ranks:
            t = Var(f"t{r}")
            clauses.append(Clause(PatternConstructor(self.get_ctor(f"tensor{r}"), [PatternVar(t)]), make(r, t)))
        return Match(x, clauses, False)

    def register(self) -> None:
        """Define the dtype's tensor ADT and every tensor array function (once per module)."""
        self.define_tensor_adt()
        tt = self.tensor_type_var
        ctor = self.get_ctor
        self.define_tensor_take()
        self.define_tensor_expand_dims()
        self.define_tensor_concatenate()
        self._def_tensor_array(tt, ctor("tensor_nil"))
        self._def_read_write(tt)
        for r in range(1, MAX_RANK + 1):
            self._def_unstack(f"tensor_array_unstack_tensor{r}", TensorType((_Any(),) * r, self.dtype), tt,
                              ctor(f"tensor{r - 1}"))
        self._def_scatter(tt)
        self._def_split(tt, tt, self.get_global_var("tensor_take"), self.get_global_var("tensor_array_write"))
        self._def_concat(tt, ctor("tensor_nil"), self.get_global_var("tensor_concatenate"))
        self._def_stack(tt, tt, self.get_global_var("tensor_expand_dims"),
                        self.get_global_var("tensor_concatenate"))
        self._def_gather(tt, tt)


class StaticTensorArrayOps(_ListOps):
    """Tensor array functions over ``static_tensor_{dtype}_{shape}_t``: elements of one (partly known) shape."""

    def __init__(self, prelude, dtype: str, shape, batch_dim=None):
        super().__init__(prelude, dtype)
        self.shape = tuple(_Any() if (isinstance(d, _Any) or d is None) else int(getattr(d, "value", d))
                           for d in shape)
        self.batch_dim = batch_dim

    def get_name(self, canonical: str) -> str:
        return static_name(canonical, self.dtype, self.shape, self.batch_dim)

    def get_type(self, canonical: str) -> GlobalTypeVar:
        return self.prelude.mod.get_global_type_var(static_name(canonical, self.dtype, self.shape))

    def get_ctor(self, canonical: str) -> Constructor:
        return self.prelude.get_ctor_static("tensor_t", canonical, self.dtype, self.shape)

    def _tensor_ctors(self, tv):
        nil = Constructor(static_name("tensor_nil", self.dtype, self.shape), [], tv)
        ctor = Constructor(static_name("tensor_constructor", self.dtype, self.shape),
                           [TensorType(self.shape, self.dtype)], tv)
        return [nil, ctor]

    def _elem_op_applies(self, kind):
        return kind == "stacked" or bool(self.shape)  # row functions need elements of rank >= 1

    def _elem_case(self, tensors, kind, make):
        out = self._ops_for(self._rows_shape() if kind == "rows" else self._stacked_shape())

        def inner(unwrapped, rest):
            if not rest:
                return out.get_ctor("tensor_constructor")(make(unwrapped))
            return self._unwrap(rest[0], lambda t: inner(unwrapped + [t], rest[1:]))
        return inner([], list(tensors)), out.tensor_type_var

    def _ops_for(self, shape) -> "StaticTensorArrayOps":
        ops = StaticTensorArrayOps(self.prelude, self.dtype, shape, self.batch_dim)
        ops.define_tensor_adt()
        return ops

    def _unwrap(self, x, make):
        t = Var("t")
        return Match(x, [Clause(PatternConstructor(self.get_ctor("tensor_constructor"), [PatternVar(t)]), make(t))],
                     False)

    def _rows_shape(self):
        return (_Any(),) + self.shape[1:]

    def _stacked_shape(self):
        return ((1 if self.batch_dim == 1 else _Any()),) + self.shape

    def define_tensor_get_data(self) -> None:
        gv = self._gvar("tensor_get_data")
        if gv is None:
            return
        x = Var("tensor", self.tensor_type_var())
        self._define(gv, Function([x], self._unwrap(x, lambda t: t), TensorType(self.shape, self.dtype), []))

    def register(self) -> None:
        """Define this shape's tensor ADT and every tensor array function (once per module)."""
        self.define_tensor_adt()
        tt = self.tensor_type_var
        self.define_tensor_take()
        self.define_tensor_concatenate()
        self.define_tensor_expand_dims()
        self._def_tensor_array(tt, self.get_ctor("tensor_nil"))
        self._def_read_write(tt)
        if self.shape:
            rows = self._ops_for(self.shape[1:])
            self._def_unstack("tensor_array_unstack", TensorType(self.shape, self.dtype), rows.tensor_type_var,
                              rows.get_ctor("tensor_constructor"))
        self._def_scatter(tt)
        if self.shape:
            out = self._ops_for(self._rows_shape())
            out._def_read_write(out.tensor_type_var)
            out.define_tensor_concatenate()
            self._def_split(tt, out.tensor_type_var, self.get_global_var("tensor_take"),
                            out.get_global_var("tensor_array_write"))
            self._def_concat_static(out)
        stacked = self._ops_for(self._stacked_shape())
        stacked.define_tensor_concatenate()
        self._def_stack(tt, stacked.tensor_type_var, self.get_global_var("tensor_expand_dims"),
                        stacked.get_global_var("tensor_concatenate")
                        if self.batch_dim != 1 else None)
        self._def_gather(tt, stacked.tensor_type_var)
        self.define_tensor_get_data()

    def _def_concat_static(self, out: "StaticTensorArrayOps") -> None:
        # concat is over a list of row blocks (shape [Any] + shape[1:]): TVM defines it on that type
        gv = self._gvar("tensor_array_concat")
        if gv is None:
            return
        ta, hd, tl = Var("tensor_array", self.list(out.tensor_type_var())), Var("hd"), Var("tl")
        join = out.get_global_var("tensor_concatenate")
        cons_case = Match(tl, [Clause(PatternConstructor(self.nil), hd),
                               Clause(PatternWildcard(), join(hd, gv(tl)))], False)
        body = Match(ta, [Clause(PatternConstructor(self.nil), out.get_ctor("tensor_nil")()),
                          Clause(PatternConstructor(self.cons, [PatternVar(hd), PatternVar(tl)]), cons_case)], False)
        self._define(gv, Function([ta], body, out.tensor_type_var(), []))

    def _def_stack(self, elem_t, out_t, expand_dims, concatenate) -> None:
        if concatenate is not None:
            return super()._def_stack(elem_t, out_t, expand_dims, concatenate)
        gv = self._gvar("tensor_array_stack")  # batch_dim=1: the array holds one element
        if gv is None:
            return
        ta = Var("tensor_array", self.list(elem_t()))
        self._define(gv, Function([ta], expand_dims(self.prelude.hd(ta)), out_t(), []))


def get_tensor_array_shape(expr, dtype: str, prelude):
    """The element shape of a static tensor array expression (a tuple, ``Any`` for unknown dims), or None
    for a dynamic one (TVM's ``relay.prelude.get_tensor_array_shape``)."""
    mod = prelude.mod
    mod["main"] = Function(free_vars(expr), expr)
    ty = InferType()(mod)["main"].body.checked_type
    if not isinstance(ty, TypeCall) or not ty.args or not isinstance(ty.args[0], TypeCall):
        raise KilnError(f"get_tensor_array_shape: the expression is not a tensor array (its type is {ty})")
    name = ty.args[0].func.name_hint
    head = f"static_tensor_{dtype}_"
    if not name.startswith(head):
        return None
    dims = name[len(head):-len("_t")]
    if dims == "scalar":
        return ()
    return tuple(_Any() if d in ("any", "?") else int(d) for d in dims.split("_"))
