"""The Relay Prelude (TVM's ``relay.prelude.Prelude``): standard ADTs and list functions in a module.

``p = Prelude(mod)`` adds to ``mod`` the types ``List[A]`` (``Cons``/``Nil``), ``Option[A]`` (``Some``/``None``),
``Tree[A]`` (``Rose``) and ``nat`` (``z``/``s``, Peano numbers), and the functions of TVM's ``prelude.rly``:
``id compose flip hd tl nth length update map foldl foldr foldr1 sum concat filter zip rev map_accumr
map_accuml unfoldr unfoldl tmap size iterate``. Each is ``p.<name>`` (a GlobalVar) and ``p.mod``'s function.

kiln's parser has no ADT syntax yet, so the definitions are built with the Relay Python API; they have the
signatures and semantics of TVM's ``prelude.rly``. Tensor arrays (``TensorArrayOps``, ``StaticTensorArrayOps``,
prelude_tensor_array.py) are defined on first lookup (``p.get_global_var("tensor_array", dtype)``).
"""
from __future__ import annotations

from ..error import KilnError
from ..ir.expr import GlobalVar
from ..ir.module import IRModule
from ..ir.type import FuncType, GlobalTypeVar, TensorType, TupleType, TypeVar
from .adt import Clause, Constructor, Match, PatternConstructor, PatternTuple, PatternVar, PatternWildcard, TypeData
from .expr import Function, If, Let, Tuple, TupleGetItem, Var, const, Call, _op as lookup
from .prelude_tensor_array import DYNAMIC_OPS, StaticTensorArrayOps, TensorArrayOps, static_name
from ..runtime.dtype import DataType

GLOBAL_DEFS = ["id", "compose", "flip", "hd", "tl", "nth", "update", "map", "foldl", "foldr", "foldr1", "concat",
               "filter", "zip", "rev", "map_accuml", "map_accumr", "unfoldl", "unfoldr", "sum", "length", "tmap",
               "size", "iterate"]

_INT = TensorType((), "int32")
_BOOL = TensorType((), "bool")


def _op(name, *args):
    return Call(lookup(name), list(args))


def _pcons(ctor, *pats):
    return PatternConstructor(ctor, list(pats))


def _v(name, ty=None):
    return Var(name, ty)


class Prelude:
    """Standard definitions added to ``mod`` (a new IRModule when None)."""

    def __init__(self, mod: IRModule | None = None):
        if mod is None:
            mod = IRModule()
        if not isinstance(mod, IRModule):
            raise KilnError(f"Prelude expects an IRModule, got {type(mod).__name__}")
        self.mod = mod
        self.load_prelude()

    # -- TVM's lookups -----------------------------------------------------------------------------------
    def get_name(self, canonical: str, dtype: str) -> str:
        """The per-dtype name of a definition (``tensor_t`` -> ``tensor_float32_t``, else ``name_dtype``)."""
        if canonical == "tensor_t":
            return f"tensor_{dtype}_t"
        return f"{canonical}_{dtype}"

    def get_global_var(self, canonical: str, dtype: str) -> GlobalVar:
        self._ensure_tensor_array(canonical, dtype)
        return self.mod.get_global_var(self.get_name(canonical, dtype))

    def get_type(self, canonical: str, dtype: str) -> GlobalTypeVar:
        self._ensure_tensor_array(canonical, dtype)
        return self.mod.get_global_type_var(self.get_name(canonical, dtype))

    def get_ctor(self, ty_name: str, canonical: str, dtype: str) -> Constructor:
        if ty_name == self.get_name("tensor_t", dtype):
            self._ensure_tensor_array("tensor_t", dtype)
        name = self.get_name(canonical, dtype)
        for ctor in self.mod.get_type(ty_name)[1:]:
            if ctor.name_hint == name:
                return ctor
        raise KilnError(f"the Prelude type {ty_name} has no constructor {name}")

    def get_tensor_ctor(self, canonical: str, dtype: str) -> Constructor:
        ty = self.get_type("tensor_t", dtype)
        return self.get_ctor(ty.name_hint, canonical, dtype)

    # -- static-shape tensor arrays (StaticTensorArrayOps) ----------------------------------------------
    def get_name_static(self, canonical: str, dtype: str, shape, batch_dim=None) -> str:
        return static_name(canonical, dtype, shape, batch_dim)

    def get_global_var_static(self, canonical: str, dtype: str, shape, batch_dim=None) -> GlobalVar:
        """The static tensor array function ``canonical`` for elements of ``shape`` (defined on first use)."""
        name = static_name(canonical, dtype, shape, batch_dim)
        if name not in self._global_names():
            StaticTensorArrayOps(self, dtype, shape, batch_dim).register()
        return self.mod.get_global_var(name)

    def get_type_static(self, canonical: str, dtype: str, shape) -> GlobalTypeVar:
        name = static_name(canonical, dtype, shape)
        if name not in {tv.name_hint for tv in self.mod.get_global_type_vars()}:
            StaticTensorArrayOps(self, dtype, shape).register()
        return self.mod.get_global_type_var(name)

    def get_ctor_static(self, ty_name: str, name: str, dtype: str, shape) -> Constructor:
        ty = self.get_type_static(ty_name, dtype, shape)
        cname = static_name(name, dtype, shape)
        for ctor in self.mod.get_type(ty.name_hint)[1:]:
            if ctor.name_hint == cname:
                return ctor
        raise KilnError(f"the Prelude type {ty.name_hint} has no constructor {cname}")

    def get_tensor_ctor_static(self, name: str, dtype: str, shape) -> Constructor:
        return self.get_ctor_static("tensor_t", name, dtype, shape)

    def _global_names(self) -> set:
        return {gv.name_hint for gv in self.mod.get_global_vars()}

    def _ensure_tensor_array(self, canonical: str, dtype: str) -> None:
        """Tensor arrays of a dtype are defined on first use (TVM defines them for 9 dtypes up front; kiln
        does it lazily so a module that never uses them does not type-check and compile ~30 functions each)."""
        if canonical not in DYNAMIC_OPS and not canonical.startswith("tensor_array"):
            return
        if canonical == "tensor_t" or canonical in ("tensor_nil",) or canonical.startswith("tensor") and \
                canonical[6:].isdigit():
            have = {tv.name_hint for tv in self.mod.get_global_type_vars()}
            if self.get_name("tensor_t", dtype) in have:
                return
        elif self.get_name(canonical, dtype) in self._global_names():
            return
        DataType(dtype)  # a clear DataTypeError for a bad dtype name
        TensorArrayOps(self, dtype).register()

    # -- loading -----------------------------------------------------------------------------------------
    def load_prelude(self) -> None:
        """Add the Prelude's types and functions to ``self.mod`` (once: a module that has them is reused)."""
        have = {tv.name_hint for tv in self.mod.get_global_type_vars()}
        if "List" not in have:
            self._define_types()
            self._define_functions()
        self.list, self.cons, self.nil = self.mod.get_type("List")
        self.optional, self.some, self.none = self.mod.get_type("Option")
        self.tree, self.rose = self.mod.get_type("Tree")
        self.nat, self.z, self.s = self.mod.get_type("nat")
        for name in GLOBAL_DEFS:
            setattr(self, name, self.mod.get_global_var(name))

    def _define_types(self) -> None:
        mod = self.mod
        a = TypeVar("A")
        lst = GlobalTypeVar("List")
        self.cons = Constructor("Cons", [a, lst(a)], lst)
        self.nil = Constructor("Nil", [], lst)
        mod[lst] = TypeData(lst, [a], [self.cons, self.nil])
        self.list = lst
        a = TypeVar("A")
        opt = GlobalTypeVar("Option")
        mod[opt] = TypeData(opt, [a], [Constructor("Some", [a], opt), Constructor("None", [], opt)])
        a = TypeVar("A")
        tree = GlobalTypeVar("Tree")
        mod[tree] = TypeData(tree, [a], [Constructor("Rose", [a, lst(tree(a))], tree)])
        nat = GlobalTypeVar("nat")
        mod[nat] = TypeData(nat, [], [Constructor("z", [], nat), Constructor("s", [nat()], nat)])

    def _define_functions(self) -> None:
        mod = self.mod
        L = self.list
        cons, nil = self.cons, self.nil
        some, none = mod.get_type("Option")[1:]
        tree = mod.get_type("Tree")[0]
        rose = mod.get_type("Tree")[1]
        g = {name: GlobalVar(name) for name in GLOBAL_DEFS}

        def tvars(*names):
            return [TypeVar(n) for n in names]

        # id[A](x: A) -> A
        A, = tvars("A")
        x = _v("x", A)
        mod[g["id"]] = Function([x], x, A, [A])

        # compose[A, B, C](f: fn(B) -> C, g: fn(A) -> B) -> fn(A) -> C
        A, B, C = tvars("A", "B", "C")
        f, gg, x = _v("f", FuncType([B], C)), _v("g", FuncType([A], B)), _v("x", A)
        mod[g["compose"]] = Function([f, gg], Function([x], f(gg(x)), C), FuncType([A], C), [A, B, C])

        # flip[A, B, C](f: fn(A, B) -> C) -> fn(B, A) -> C
        A, B, C = tvars("A", "B", "C")
        f, a, b = _v("f", FuncType([A, B], C)), _v("a", A), _v("b", B)
        mod[g["flip"]] = Function([f], Function([b, a], f(a, b), C), FuncType([B, A], C), [A, B, C])

        # hd[A](xs: List[A]) -> A ; tl[A](xs: List[A]) -> List[A]   (match?: the empty list has neither)
        A, = tvars("A")
        xs, x = _v("xs", L(A)), _v("x")
        mod[g["hd"]] = Function([xs], Match(xs, [Clause(_pcons(cons, PatternVar(x), PatternWildcard()), x)], False),
                                A, [A])
        A, = tvars("A")
        xs, rest = _v("xs", L(A)), _v("rest")
        mod[g["tl"]] = Function([xs], Match(xs, [Clause(_pcons(cons, PatternWildcard(), PatternVar(rest)), rest)],
                                            False), L(A), [A])

        # nth[A](xs: List[A], n: int32) -> A
        A, = tvars("A")
        xs, n = _v("xs", L(A)), _v("n", _INT)
        mod[g["nth"]] = Function([xs, n], If(_op("equal", n, const(0)), g["hd"](xs),
                                             g["nth"](g["tl"](xs), _op("subtract", n, const(1)))), A, [A])

        # length[A](xs: List[A]) -> int32
        A, = tvars("A")
        xs, rest = _v("xs", L(A)), _v("rest")
        mod[g["length"]] = Function([xs], Match(xs, [
            Clause(_pcons(cons, PatternWildcard(), PatternVar(rest)), _op("add", const(1), g["length"](rest))),
            Clause(_pcons(nil), const(0))]), _INT, [A])

        # update[A](xs: List[A], n: int32, v: A) -> List[A]
        A, = tvars("A")
        xs, n, v = _v("xs", L(A)), _v("n", _INT), _v("v", A)
        mod[g["update"]] = Function([xs, n, v], If(
            _op("equal", n, const(0)), cons(v, g["tl"](xs)),
            cons(g["hd"](xs), g["update"](g["tl"](xs), _op("subtract", n, const(1)), v))), L(A), [A])

        # map[A, B](f: fn(A) -> B, xs: List[A]) -> List[B]
        A, B = tvars("A", "B")
        f, xs, x, rest = _v("f", FuncType([A], B)), _v("xs", L(A)), _v("x"), _v("rest")
        mod[g["map"]] = Function([f, xs], Match(xs, [
            Clause(_pcons(cons, PatternVar(x), PatternVar(rest)), cons(f(x), g["map"](f, rest))),
            Clause(_pcons(nil), nil())]), L(B), [A, B])

        # foldl[A, B](f: fn(A, B) -> A, acc: A, xs: List[B]) -> A
        A, B = tvars("A", "B")
        f, acc, xs, x, rest = _v("f", FuncType([A, B], A)), _v("acc", A), _v("xs", L(B)), _v("x"), _v("rest")
        mod[g["foldl"]] = Function([f, acc, xs], Match(xs, [
            Clause(_pcons(cons, PatternVar(x), PatternVar(rest)), g["foldl"](f, f(acc, x), rest)),
            Clause(_pcons(nil), acc)]), A, [A, B])

        # foldr[A, B](f: fn(A, B) -> B, acc: B, xs: List[A]) -> B
        A, B = tvars("A", "B")
        f, acc, xs, x, rest = _v("f", FuncType([A, B], B)), _v("acc", B), _v("xs", L(A)), _v("x"), _v("rest")
        mod[g["foldr"]] = Function([f, acc, xs], Match(xs, [
            Clause(_pcons(cons, PatternVar(x), PatternVar(rest)), f(x, g["foldr"](f, acc, rest))),
            Clause(_pcons(nil), acc)]), B, [A, B])

        # foldr1[A](f: fn(A, A) -> A, xs: List[A]) -> A   (a non-empty list)
        A, = tvars("A")
        f, xs, x1, x2, rest = _v("f", FuncType([A, A], A)), _v("xs", L(A)), _v("x"), _v("x"), _v("rest")
        mod[g["foldr1"]] = Function([f, xs], Match(xs, [
            Clause(_pcons(cons, PatternVar(x1), _pcons(nil)), x1),
            Clause(_pcons(cons, PatternVar(x2), PatternVar(rest)), f(x2, g["foldr1"](f, rest)))], False), A, [A])

        # sum(xs: List[int32]) -> int32
        xs, a, b = _v("xs", L(_INT)), _v("x", _INT), _v("y", _INT)
        add_f = _v("add_f")
        mod[g["sum"]] = Function([xs], Let(add_f, Function([a, b], _op("add", a, b), _INT),
                                           g["foldl"](add_f, const(0), xs)), _INT)

        # concat[A](xs: List[A], ys: List[A]) -> List[A]
        A, = tvars("A")
        xs, ys = _v("xs", L(A)), _v("ys", L(A))
        mod[g["concat"]] = Function([xs, ys], g["foldr"](cons, ys, xs), L(A), [A])

        # filter[A](f: fn(A) -> bool, xs: List[A]) -> List[A]
        A, = tvars("A")
        f, xs, x, rest = _v("f", FuncType([A], _BOOL)), _v("xs", L(A)), _v("x"), _v("rest")
        mod[g["filter"]] = Function([f, xs], Match(xs, [
            Clause(_pcons(cons, PatternVar(x), PatternVar(rest)),
                   If(f(x), cons(x, g["filter"](f, rest)), g["filter"](f, rest))),
            Clause(_pcons(nil), nil())]), L(A), [A])

        # zip[A, B](xs: List[A], ys: List[B]) -> List[(A, B)]
        A, B = tvars("A", "B")
        xs, ys, x, xr, y, yr = _v("xs", L(A)), _v("ys", L(B)), _v("x"), _v("x_rest"), _v("y"), _v("y_rest")
        mod[g["zip"]] = Function([xs, ys], Match(Tuple([xs, ys]), [
            Clause(PatternTuple([_pcons(cons, PatternVar(x), PatternVar(xr)), _pcons(cons, PatternVar(y), PatternVar(yr))]),
                   cons(Tuple([x, y]), g["zip"](xr, yr))),
            Clause(PatternWildcard(), nil())]), L(TupleType([A, B])), [A, B])

        # rev[A](xs: List[A]) -> List[A]
        A, = tvars("A")
        xs = _v("xs", L(A))
        mod[g["rev"]] = Function([xs], g["foldl"](g["flip"](cons), nil(), xs), L(A), [A])

        # map_accumr / map_accuml[A, B, C](f: fn(A, B) -> (A, C), init: A, xs: List[B]) -> (A, List[C])
        for name, left in (("map_accumr", False), ("map_accuml", True)):
            A, B, C = tvars("A", "B", "C")
            acc_t = TupleType([A, L(C)])
            f, init, xs = _v("f", FuncType([A, B], TupleType([A, C]))), _v("init", A), _v("xs", L(B))
            x, acc, f_out, updater = _v("x", B), _v("acc", acc_t), _v("f_out"), _v("updater")
            body = Let(f_out, f(TupleGetItem(acc, 0), x),
                       Tuple([TupleGetItem(f_out, 0), cons(TupleGetItem(f_out, 1), TupleGetItem(acc, 1))]))
            upd = Function([acc, x] if left else [x, acc], body, acc_t)
            fold = g["foldl"] if left else g["foldr"]
            mod[g[name]] = Function([f, init, xs], Let(updater, upd, fold(updater, Tuple([init, nil()]), xs)),
                                    acc_t, [A, B, C])

        # unfoldr[A, B](f: fn(A) -> Option[(A, B)], seed: A) -> List[B] ; unfoldl = rev . unfoldr
        opt = mod.get_type("Option")[0]
        A, B = tvars("A", "B")
        f, seed, val = _v("f", FuncType([A], opt(TupleType([A, B])))), _v("seed", A), _v("val")
        mod[g["unfoldr"]] = Function([f, seed], Match(f(seed), [
            Clause(_pcons(some, PatternVar(val)), cons(TupleGetItem(val, 1), g["unfoldr"](f, TupleGetItem(val, 0)))),
            Clause(_pcons(none), nil())]), L(B), [A, B])
        A, B = tvars("A", "B")
        f, seed = _v("f", FuncType([A], opt(TupleType([A, B])))), _v("seed", A)
        mod[g["unfoldl"]] = Function([f, seed], g["rev"](g["unfoldr"](f, seed)), L(B), [A, B])

        # tmap[A, B](f: fn(A) -> B, t: Tree[A]) -> Tree[B]
        A, B = tvars("A", "B")
        f, t, v, subs, tt, list_f = (_v("f", FuncType([A], B)), _v("t", tree(A)), _v("v"), _v("sub_trees"),
                                     _v("tt", tree(A)), _v("list_f"))
        mod[g["tmap"]] = Function([f, t], Match(t, [Clause(_pcons(rose, PatternVar(v), PatternVar(subs)), Let(
            list_f, Function([tt], g["tmap"](f, tt), tree(B)), rose(f(v), g["map"](list_f, subs))))]),
            tree(B), [A, B])

        # size[A](t: Tree[A]) -> int32
        A, = tvars("A")
        t, subs = _v("t", tree(A)), _v("sub_trees")
        mod[g["size"]] = Function([t], Match(t, [Clause(_pcons(rose, PatternWildcard(), PatternVar(subs)),
                                                        _op("add", const(1), g["sum"](g["map"](g["size"], subs))))]),
                                  _INT, [A])

        # iterate[A](f: fn(A) -> A, n: int32) -> fn(A) -> A
        A, = tvars("A")
        f, n = _v("f", FuncType([A], A)), _v("n", _INT)
        mod[g["iterate"]] = Function([f, n], If(_op("equal", n, const(0)), g["id"],
                                                g["compose"](f, g["iterate"](f, _op("subtract", n, const(1))))),
                                     FuncType([A], A), [A])


__all__ = ["Prelude", "GLOBAL_DEFS", "TensorArrayOps", "StaticTensorArrayOps", "get_tensor_array_shape"]

from .prelude_tensor_array import get_tensor_array_shape  # noqa: E402 - TVM exports it from relay.prelude
