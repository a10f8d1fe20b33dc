"""Type inference for Relay (TVM's ``InferType``).

Types flow forward from annotations and constants; each op call's output type comes from the op's
type relation (``FTypeRelation``: ``fn(arg_types, attrs) -> Type``, see ``kiln.ir.op``). Unknown types
(unannotated parameters) are IncompleteTypes solved by unification; a relation whose inputs are not known
yet is retried once more is known. The result rebuilds the functions with every parameter annotated,
the return type set, and ``checked_type`` on every node.
"""
from __future__ import annotations

from ...error import KilnError, TypeInferenceError
from ...ir.expr import GlobalVar
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.type import FuncType, IncompleteType, TensorType, TupleType, Type, TypeCall, TypeVar
from ..expr import Call, Constant, Function, If, Let, Tuple, TupleGetItem, Var
from ..expr_functor import ExprMutator, post_order_dataflow
from ...ir.node import Node, structural_equal
from ..printer import RelayTextPrinter
from .type_infer_adt import infer_adt_expr
from ..op.type_relations import call_relation  # Any-aware (relay.Any() dimensions)

BOOL_SCALAR = TensorType((), "bool")


class _Mismatch(Exception):
    def __init__(self, lhs, rhs, detail=""):
        super().__init__(detail)
        self.lhs, self.rhs, self.detail = lhs, rhs, detail


def _is_any(d) -> bool:
    return type(d).__name__ == "Any"


class _Solver:
    """Union-find over IncompleteTypes, with structural unification."""

    def __init__(self):
        self.parent: dict = {}

    def resolve(self, t):
        """Follow bindings at the top level."""
        while isinstance(t, IncompleteType) and t in self.parent:
            t = self.parent[t]
        return t

    def full(self, t):
        """Substitute all bindings inside a type."""
        t = self.resolve(t)
        if isinstance(t, TupleType):
            fields = tuple(self.full(f) for f in t.fields)
            return t if all(a is b for a, b in zip(fields, t.fields)) else TupleType(fields)
        if isinstance(t, FuncType):
            args = tuple(self.full(a) for a in t.arg_types)
            ret = self.full(t.ret_type)
            if ret is t.ret_type and all(a is b for a, b in zip(args, t.arg_types)):
                return t
            return FuncType(args, ret, t.type_params, t.type_constraints)
        if isinstance(t, TypeCall):
            args = tuple(self.full(a) for a in t.args)
            return t if all(a is b for a, b in zip(args, t.args)) else TypeCall(t.func, args)
        return t

    def unify(self, a, b):
        a, b = self.resolve(a), self.resolve(b)
        if a is b:
            return a
        if isinstance(a, IncompleteType):
            if _occurs(a, self.full(b)):
                raise _Mismatch(a, b, "a type would contain itself")
            self.parent[a] = b
            return b
        if isinstance(b, IncompleteType):
            return self.unify(b, a)
        if isinstance(a, TensorType) and isinstance(b, TensorType):
            if a.dtype != b.dtype:
                raise _Mismatch(a, b, f"dtype {a.dtype} vs {b.dtype}")
            if len(a.shape) != len(b.shape):
                raise _Mismatch(a, b, f"rank {len(a.shape)} vs {len(b.shape)}")
            dims = []
            for i, (x, y) in enumerate(zip(a.shape, b.shape)):
                if _is_any(x):
                    dims.append(y)
                elif _is_any(y) or x is y or (isinstance(x, int) and isinstance(y, int) and x == y):
                    dims.append(x)
                elif isinstance(x, Node) and isinstance(y, Node):
                    if not structural_equal(x, y):
                        raise _Mismatch(a, b, f"dimension {i}: {x} vs {y}")
                    dims.append(x)
                else:
                    raise _Mismatch(a, b, f"dimension {i}: {x} vs {y}")
            if all(d is e for d, e in zip(dims, a.shape)):
                return a
            return TensorType(dims, a.dtype)
        if isinstance(a, TupleType) and isinstance(b, TupleType):
            if len(a.fields) != len(b.fields):
                raise _Mismatch(a, b, f"tuple of {len(a.fields)} vs {len(b.fields)} fields")
            return TupleType([self.unify(x, y) for x, y in zip(a.fields, b.fields)])
        if isinstance(a, FuncType) and isinstance(b, FuncType):
            if len(a.arg_types) != len(b.arg_types):
                raise _Mismatch(a, b, f"function of {len(a.arg_types)} vs {len(b.arg_types)} parameters")
            args = [self.unify(x, y) for x, y in zip(a.arg_types, b.arg_types)]
            return FuncType(args, self.unify(a.ret_type, b.ret_type), a.type_params)
        if isinstance(a, TypeCall) and isinstance(b, TypeCall):
            if len(a.args) != len(b.args) or not a.func == b.func:
                raise _Mismatch(a, b)
            return TypeCall(a.func, [self.unify(x, y) for x, y in zip(a.args, b.args)])
        if isinstance(a, Type) and isinstance(b, Type) and a == b:
            return a
        raise _Mismatch(a, b)


def _occurs(v, t) -> bool:
    if t is v:
        return True
    if isinstance(t, Node) and not isinstance(t, IncompleteType):
        for f in t._fields:
            x = getattr(t, f)
            if isinstance(x, (list, tuple)):
                if any(_occurs(v, y) for y in x):
                    return True
            elif _occurs(v, x):
                return True
    return False


def _has_incomplete(t) -> bool:
    if isinstance(t, IncompleteType):
        return True
    if isinstance(t, TupleType):
        return any(_has_incomplete(f) for f in t.fields)
    if isinstance(t, FuncType):
        return any(_has_incomplete(a) for a in t.arg_types) or _has_incomplete(t.ret_type)
    if isinstance(t, TypeCall):
        return any(_has_incomplete(a) for a in t.args)
    return False


def _substitute(t, mapping: dict):
    """Replace TypeVars (instantiating a polymorphic function type)."""
    if isinstance(t, TypeVar):
        return mapping.get(t, t)
    if isinstance(t, TupleType):
        return TupleType([_substitute(f, mapping) for f in t.fields])
    if isinstance(t, FuncType):
        return FuncType([_substitute(a, mapping) for a in t.arg_types], _substitute(t.ret_type, mapping),
                        [p for p in t.type_params if p not in mapping])
    if isinstance(t, TypeCall):
        return TypeCall(t.func, [_substitute(a, mapping) for a in t.args])
    return t


def _infer_operands(e):
    """Dataflow operands inferred before ``e`` (a function callee is inferred by infer_call itself,
    after its arguments)."""
    if isinstance(e, Call):
        return tuple(e.args) if isinstance(e.op, (Op, Function, GlobalVar, Var)) else (e.op, *e.args)
    if isinstance(e, Tuple):
        return e.fields
    if isinstance(e, TupleGetItem):
        return (e.tuple_value,)
    return None


def _type_text(t) -> str:
    return t.astext() if isinstance(t, Type) else str(t)


class TypeInferencer:
    """Infers the types of the Relay functions of a module (or of one expression)."""

    def __init__(self, mod: IRModule | None = None):
        self.mod = mod
        self.solver = _Solver()
        self.types: dict = {}  # expr -> Type (possibly incomplete)
        self.var_types: dict = {}  # Var -> Type
        self.global_types: dict = {}  # GlobalVar name -> FuncType
        self.in_progress: set = set()
        self.pending: list = []
        self.root = None  # the function being inferred (for error messages)
        self.root_name = None

    # -- errors ------------------------------------------------------------------------------------
    def fail(self, expr, message: str, cause=None):
        marker = "an error occurred here"

        def annotate(e):
            return f"^^^ {marker}" if e is expr else None

        where = f" in @{self.root_name}" if self.root_name else ""
        text = ""
        root = self.root if self.root is not None else expr
        try:
            p = RelayTextPrinter(show_meta_data=False, annotate=annotate)
            if isinstance(root, Function) and self.root_name:
                prog = p.finish(p.print_def(GlobalVar(self.root_name), root))
            else:
                p._push(root)
                result = p.print_scope_body(root)
                prog = p.finish("\n".join(p._pop().lines + [result]))
            lines = prog.split("\n")
            offending = [ln.strip() for ln in lines if marker in ln]
            text = ""
            if offending:
                text += "\n  offending expression: " + offending[0].replace(f" /* ^^^ {marker} */", "")
            text += "\n  in the program:\n" + "\n".join("    " + ln for ln in lines)
        except Exception:  # noqa: BLE001 - the message must be raised even if printing fails
            pass
        err = TypeInferenceError(f"type inference failed{where}: {message}{text}")
        if cause is not None:
            raise err from cause
        raise err

    def unify(self, a, b, expr, what: str):
        try:
            return self.solver.unify(a, b)
        except _Mismatch as m:
            detail = f" ({m.detail})" if m.detail else ""
            self.fail(expr, f"{what}: {_type_text(self.solver.full(a))} does not match "
                            f"{_type_text(self.solver.full(b))}{detail}")

    # -- module level ------------------------------------------------------------------------------
    def global_type(self, gv: GlobalVar, at) -> FuncType:
        name = gv.name_hint
        if name in self.global_types:
            return self.global_types[name]
        if self.mod is None or name not in self.mod:
            self.fail(at, f"call to unknown global function @{name}")
        func = self.mod[name]
        if not isinstance(func, Function):
            self.fail(at, f"@{name} is not a Relay function ({type(func).__name__}); it cannot be called here")
        if name in self.in_progress:
            # recursion: use the declared signature
            ptypes = [p.type_annotation for p in func.params]
            if func.ret_type is None or any(t is None for t in ptypes):
                self.fail(at, f"recursive function @{name} needs type annotations on all its parameters "
                              "and its return type")
            return FuncType(ptypes, func.ret_type, func.type_params)
        self.infer_global(name, func)
        return self.global_types[name]

    def infer_global(self, name: str, func: Function) -> None:
        saved = (self.root, self.root_name, self.pending)
        self.root, self.root_name, self.pending = func, name, []
        self.in_progress.add(name)
        try:
            ty = self.infer(func)
            self.solve_pending()
            self.global_types[name] = self.solver.full(ty)
        finally:
            self.in_progress.discard(name)
            self.root, self.root_name, self.pending = saved

    # -- expressions -------------------------------------------------------------------------------
    def infer(self, expr) -> Type:
        t = self.types.get(expr)
        if t is None:
            # operands first, children-first from a work list: graph depth costs no interpreter stack
            for node in post_order_dataflow(expr, self.types, _infer_operands):
                self.types[node] = self._infer(node)
            t = self._infer(expr)
            self.types[expr] = t
        if isinstance(t, FuncType) and t.type_params and (
                isinstance(expr, GlobalVar) or type(expr).__name__ == "Constructor"):
            # a polymorphic global or constructor: each use gets its own instance of the type parameters
            t = _substitute(t, {tp: IncompleteType() for tp in t.type_params})
        return t

    def _infer(self, e) -> Type:
        if isinstance(e, Var):
            t = self.var_types.get(e)
            if t is None:
                t = e.type_annotation if e.type_annotation is not None else IncompleteType()
                self.var_types[e] = t
            return t
        if isinstance(e, Constant):
            v = e.numpy()
            return TensorType(v.shape, str(v.dtype) if v.dtype.kind != "b" else "bool")
        if isinstance(e, Tuple):
            return TupleType([self.infer(f) for f in e.fields])
        if isinstance(e, TupleGetItem):
            return self.infer_getitem(e)
        if isinstance(e, Call):
            return self.infer_call(e)
        if isinstance(e, Let):
            chain = []  # a let chain is walked in a loop, not by recursion
            while isinstance(e, Let) and (not chain or e not in self.types):
                vt = self.infer(e.value)
                if e.var.type_annotation is not None:
                    self.unify(e.var.type_annotation, vt, e, f"let %{e.var.name_hint}: the value's type")
                self.var_types[e.var] = vt if e.var.type_annotation is None else e.var.type_annotation
                self.types[e.var] = self.var_types[e.var]
                chain.append(e)
                e = e.body
            t = self.infer(e)
            for inner in chain[1:]:
                self.types[inner] = t
            return t
        if isinstance(e, If):
            ct = self.infer(e.cond)
            self.unify(ct, BOOL_SCALAR, e.cond, "the condition of an if must be a boolean scalar")
            tt = self.infer(e.true_branch)
            ft = self.infer(e.false_branch)
            return self.unify(tt, ft, e, "the two branches of an if have different types")
        if isinstance(e, Function):
            return self.infer_function(e)
        if isinstance(e, GlobalVar):
            return self.global_type(e, e)
        if isinstance(e, Op):
            self.fail(e, f"operator {e.name} used as a value; call it instead")
        if hasattr(e, "_infer_type"):  # nodes defined outside the core (reference cells)
            return e._infer_type(self)
        if type(e).__name__ in ("Constructor", "Match"):
            return infer_adt_expr(self, e)
        self.fail(e, f"cannot infer the type of a {type(e).__name__}")

    def infer_function(self, fn: Function) -> FuncType:
        ptypes = []
        for p in fn.params:
            t = self.var_types.get(p)
            if t is None:
                t = p.type_annotation if p.type_annotation is not None else IncompleteType()
                self.var_types[p] = t
            self.types[p] = t
            ptypes.append(t)
        bt = self.infer(fn.body)
        if fn.ret_type is not None:
            bt = self.unify(fn.ret_type, bt, fn.body, "the function body's type and its declared return type")
        return FuncType(ptypes, bt, fn.type_params)

    def infer_getitem(self, e: TupleGetItem) -> Type:
        tt = self.solver.resolve(self.infer(e.tuple_value))
        if isinstance(tt, IncompleteType):
            self.fail(e, "cannot project a field out of a value whose type is not known yet; annotate it")
        if not isinstance(tt, TupleType):
            self.fail(e, f"field {e.index} taken from a non-tuple of type {_type_text(tt)}")
        if not 0 <= e.index < len(tt.fields):
            self.fail(e, f"tuple index {e.index} out of range for a tuple of {len(tt.fields)} fields "
                         f"({_type_text(tt)})")
        return tt.fields[e.index]

    def infer_call(self, call: Call) -> Type:
        op = call.op
        if isinstance(op, Op):
            return self.infer_op_call(call, op)
        if isinstance(op, Function):
            # infer the arguments first so unannotated parameters take their types
            arg_types = [self.infer(a) for a in call.args]
            for p, at in zip(op.params, arg_types):
                if p.type_annotation is None and p not in self.var_types:
                    self.var_types[p] = at
        else:
            arg_types = None
        fty = self.solver.resolve(self.infer(op))
        if arg_types is None:
            arg_types = [self.infer(a) for a in call.args]
        if isinstance(fty, IncompleteType):
            ret = IncompleteType()
            self.unify(fty, FuncType(arg_types, ret), call, "the callee's type")
            return ret
        if not isinstance(fty, FuncType):
            self.fail(call, f"calling a value of non-function type {_type_text(fty)}")
        if fty.type_params:
            fresh = {tp: IncompleteType() for tp in fty.type_params}
            fty = _substitute(fty, fresh)
        if len(fty.arg_types) != len(call.args):
            self.fail(call, f"the function takes {len(fty.arg_types)} arguments but is called with {len(call.args)}")
        for i, (pt, at) in enumerate(zip(fty.arg_types, arg_types)):
            self.unify(pt, at, call, f"argument {i} of the call")
        return fty.ret_type

    def infer_op_call(self, call: Call, op: Op) -> Type:
        if op.num_inputs >= 0 and len(call.args) != op.num_inputs:
            self.fail(call, f"operator {op.name} takes {op.num_inputs} inputs but is called with {len(call.args)}")
        rel = op.get_attr("FTypeRelation")
        if rel is None:
            self.fail(call, f"operator {op.name} has no type relation (FTypeRelation) registered")
        arg_types = [self.infer(a) for a in call.args]
        out = self.apply_relation(call, op, rel, arg_types)
        if out is None:
            out = IncompleteType()
            self.pending.append((call, op, rel, arg_types, out))
        return out

    def apply_relation(self, call, op, rel, arg_types):
        full = [self.solver.full(t) for t in arg_types]
        if any(_has_incomplete(t) for t in full):
            if not self._infer_arg_types(call, op, arg_types, full):
                return None
            full = [self.solver.full(t) for t in arg_types]
            if any(_has_incomplete(t) for t in full):
                return None
        try:
            out = call_relation(rel, full, call.attrs)
        except (KilnError, ValueError, TypeError, IndexError) as err:
            types = ", ".join(_type_text(t) for t in full)
            self.fail(call, f"operator {op.name}: {err}\n  argument types: ({types})", cause=err)
        if out is not None and not isinstance(out, Type):
            self.fail(call, f"the type relation of {op.name} returned {out!r}, not a Type")
        return out

    def _infer_arg_types(self, call, op, arg_types, full) -> bool:
        """Let the op's ``FInferArgTypes`` hook fill in unannotated arguments (e.g. a conv weight's
        type from the data type, ``channels`` and ``kernel_size``); True if it determined any."""
        hook = op.get_attr("FInferArgTypes")
        if hook is None:
            return False
        known = [None if _has_incomplete(t) else t for t in full]
        try:
            found = hook(known, call.attrs) or {}
        except (KilnError, ValueError, TypeError, IndexError) as err:
            self.fail(call, f"operator {op.name}: {err}", cause=err)
        progress = False
        for idx, ty in found.items():
            if known[idx] is None:
                self.unify(arg_types[idx], ty, call, f"argument {idx} of {op.name}")
                progress = True
        return progress

    def solve_pending(self) -> None:
        while self.pending:
            progress = False
            still = []
            for call, op, rel, arg_types, out in self.pending:
                res = self.apply_relation(call, op, rel, arg_types)
                if res is None:
                    still.append((call, op, rel, arg_types, out))
                else:
                    self.unify(out, res, call, f"the output of {op.name}")
                    progress = True
            self.pending = still
            if not progress:
                call = still[0][0]
                self.fail(call, f"cannot infer the input types of {still[0][1].name}; annotate the variables "
                                "that feed it")

    def resolved(self, expr):
        t = self.solver.full(self.types[expr])
        if _has_incomplete(t):
            what = f"variable %{expr.name_hint}" if isinstance(expr, Var) else "this expression"
            self.fail(expr, f"cannot infer the type of {what}; give it a type annotation")
        return t


class _Annotator(ExprMutator):
    """Rebuilds an inferred expression: parameters and let vars annotated, functions' ret_type set,
    ``checked_type`` on every node."""

    def __init__(self, inferencer: TypeInferencer):
        super().__init__()
        self.inf = inferencer
        self.new_vars: dict = {}

    def visit(self, expr):
        if expr in self.memo_map:
            return self.memo_map[expr]
        res = super().visit(expr)
        if expr in self.inf.types:
            res._checked_type_ = self.inf.resolved(expr)
        return res

    def visit_var(self, var):
        nv = self.new_vars.get(var)
        if nv is not None:
            return nv
        if var.type_annotation is None and var in self.inf.types:
            nv = Var(var.name_hint, self.inf.resolved(var), var.span)
        else:
            nv = var
        self.new_vars[var] = nv
        return nv

    def visit_global_var(self, gv):
        t = self.inf.global_types.get(gv.name_hint)
        if t is not None:
            gv._checked_type_ = t
        return gv

    def visit_function(self, fn):
        params = [self.visit(p) for p in fn.params]
        body = self.visit(fn.body)
        ret = fn.ret_type
        if ret is None and fn in self.inf.types:
            ret = self.inf.resolved(fn).ret_type
        if ret is fn.ret_type and body is fn.body and all(a is b for a, b in zip(params, fn.params)):
            return fn
        new = Function(params, body, ret, fn.type_params, fn.attrs, fn.span)
        return new


def infer_module(mod: IRModule) -> IRModule:
    """Infer every Relay function of ``mod``; returns a new module of annotated functions."""
    inf = TypeInferencer(mod)
    for gv, func in mod.functions.items():
        if isinstance(func, Function) and gv.name_hint not in inf.global_types:
            inf.infer_global(gv.name_hint, func)
    new = IRModule(attrs=mod.attrs, type_definitions=mod.type_definitions)
    new.source_map = mod.source_map
    for gv, func in mod.functions.items():
        if isinstance(func, Function):
            inf.root, inf.root_name = func, gv.name_hint
            new_func = _Annotator(inf).visit(func)
            gv._checked_type_ = inf.global_types[gv.name_hint]
            new[gv] = new_func
        else:
            new[gv] = func
    return new


def infer_expr(expr, mod: IRModule | None = None):
    """Infer the type of one expression (free variables must be annotated); returns the annotated expr."""
    inf = TypeInferencer(mod)
    inf.root = expr
    inf.infer(expr)
    inf.solve_pending()
    return _Annotator(inf).visit(expr)
