"""The Relay reference interpreter (``create_executor("debug")``): evaluates typed programs with numpy.

Every op call runs the op's ``FReference`` on numpy arrays, with the call's inferred type. Values are numpy
arrays, Python tuples and closures; results come back as kiln NDArrays (tuples as ``ADT``). Tests use this
as the oracle for compiled code.
"""
from __future__ import annotations

import numpy as np

from ...error import ArgumentError, InternalError, KilnError, OpNotImplemented
from ...ir.expr import GlobalVar
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.type import TensorType, TupleType
from ..expr import Call, Constant, Function, If, Let, Tuple, TupleGetItem, Var
from .executor import Executor, _convert_args
from ...runtime import ndarray as nd
from ..adt import ConstructorValue, Constructor, match_pattern


class ADT(tuple):
    """A tuple value returned by an executor (TVM's ``runtime.container.ADT``): indexable, ``len``, ``tag``."""

    tag = 0

    def __repr__(self) -> str:
        return "ADT(" + ", ".join(repr(v) for v in self) + ")"


class Closure:
    """A function value: the Function and the environment it was created in."""

    __slots__ = ("func", "env")

    def __init__(self, func: Function, env: dict):
        self.func = func
        self.env = env

    def __repr__(self) -> str:
        return f"Closure({len(self.func.params)} params)"


class _Frame:
    __slots__ = ("env", "memo")

    def __init__(self, env: dict):
        self.env = env
        self.memo: dict = {}


class Interpreter(Executor):
    """Evaluates Relay with numpy references (TVM's ``relay.backend.interpreter.Interpreter``)."""

    def __init__(self, mod: IRModule, device=None, target="llvm", params=None):
        super().__init__(mod, device, target)
        self.params = params or {}

    # -- executor interface ---------------------------------------------------------------------------------
    def _make_executor(self, expr=None):
        from ..transform import InferType
        mod = IRModule(functions=dict(self.mod.functions), type_definitions=self.mod.type_definitions)
        if expr is None or isinstance(expr, GlobalVar):
            name = "main" if expr is None else expr.name_hint
            if name not in mod:
                raise KilnError(f"the module has no function @{name} to evaluate")
            gv = mod.get_global_var(name)
        else:
            gv = GlobalVar("__kiln_eval_entry")
            mod[gv] = expr
        if self.params and gv.name_hint == "main":
            from ..build_module import bind_params_by_name
            mod[gv] = bind_params_by_name(mod[gv], self.params)
        mod = InferType()(mod)
        func = mod[gv.name_hint]
        run = _Runner(mod)

        def _interp_wrapper(*args, **kwargs):
            values = _convert_args(func, args, kwargs)
            inputs = [_to_value(v, p) for v, p in zip(values, func.params)]
            try:
                result = run.call(Closure(func, {}), inputs)
            except RecursionError:
                # graph depth costs no stack (eval walks operands from a work list); what is left
                # is the program's own recursion (a Relay function calling itself, a loop)
                raise KilnError("the debug interpreter ran out of Python stack: the program's function calls "
                                "nest too deeply (a recursive Relay function or loop with many iterations); "
                                "run it on the 'vm' executor") from None
            return _to_output(result, self.device)
        return _interp_wrapper


def _to_value(v, param: Var):
    """An input (NDArray, numpy array, number, tuple) as an interpreter value, checked against the param type."""
    ty = param.type_annotation if param.type_annotation is not None else getattr(param, "_checked_type_", None)
    if isinstance(ty, TupleType):
        if not isinstance(v, (tuple, list)) or len(v) != len(ty.fields):
            raise ArgumentError(f"input {param.name_hint!r} must be a tuple of {len(ty.fields)} values")
        return tuple(_to_tensor(x, t, f"{param.name_hint}[{i}]") for i, (x, t) in enumerate(zip(v, ty.fields)))
    return _to_tensor(v, ty, param.name_hint)


def _to_tensor(v, ty, name):
    if hasattr(v, "numpy") and not isinstance(v, np.ndarray):
        v = v.numpy()
    arr = np.asarray(v)
    if isinstance(ty, TensorType):
        if not ty.is_dynamic() and tuple(arr.shape) != tuple(ty.shape):
            raise ArgumentError(f"input {name!r} has shape {tuple(arr.shape)}, expected {tuple(ty.shape)}")
        if arr.dtype != np.dtype(ty.dtype):
            if np.isscalar(v) or arr.ndim == 0 and not hasattr(v, "dtype"):
                arr = arr.astype(ty.dtype)
            else:
                raise ArgumentError(f"input {name!r} has dtype {arr.dtype}, expected {ty.dtype}")
    return arr


def _to_output(value, device):
    if isinstance(value, np.ndarray) or np.isscalar(value):
        return nd.array(np.array(value, order="C"), device)
    if isinstance(value, tuple):
        return ADT(_to_output(v, device) for v in value)
    if type(value).__name__ == "ConstructorValue":
        return type(value)(value.tag, [_to_output(v, device) for v in value.fields], value.constructor)
    return value


def _operands(e) -> tuple:
    """The operands ``_Runner._eval`` evaluates first, in order (none for control flow and bindings)."""
    if isinstance(e, Call):
        return tuple(e.args)
    if isinstance(e, Tuple):
        return tuple(e.fields)
    if isinstance(e, TupleGetItem):
        return (e.tuple_value,)
    return ()


class _Runner:
    """The evaluation itself (separate from the Executor so one module's runs share nothing mutable)."""

    def __init__(self, mod: IRModule):
        self.mod = mod
        self.globals: dict = {}

    def call(self, closure: Closure, args: list):
        """Apply a closure. A call of a closure in tail position (the body, or the end of the body's let
        chain) is taken in this loop instead of nesting: continuation chains (the backpropagator of
        higher-order AD, CPS code) run at any length."""
        while True:
            func = closure.func
            if len(args) != len(func.params):
                raise ArgumentError(f"a function of {len(func.params)} parameters was called with "
                                    f"{len(args)} arguments")
            env = dict(closure.env)
            env.update(zip(func.params, args))
            frame = _Frame(env)
            body = func.body
            while isinstance(body, Let):
                frame.env[body.var] = self.eval(body.value, frame)
                body = body.body
            if not (isinstance(body, Call) and not isinstance(body.op, Op)
                    and type(body.op).__name__ != "Constructor"):
                return self.eval(body, frame)
            args = [self.eval(a, frame) for a in body.args]  # the order eval_call uses
            closure = self.eval(body.op, frame)
            if not isinstance(closure, Closure):
                raise InternalError(f"calling a non-function value of type {type(closure).__name__}")

    def global_closure(self, gv: GlobalVar) -> Closure:
        c = self.globals.get(gv.name_hint)
        if c is None:
            func = self.mod[gv.name_hint]
            if not isinstance(func, Function):
                raise OpNotImplemented(f"the interpreter cannot call @{gv.name_hint}: it is a "
                                       f"{type(func).__name__}, not a Relay function")
            c = self.globals[gv.name_hint] = Closure(func, {})
        return c

    def eval(self, expr, frame: _Frame):
        """Evaluate ``expr`` in ``frame``. Dataflow operands (call arguments, tuple fields, projected
        tuples) are evaluated children-first from a work list, left to right as a recursive walk
        would, so graph depth costs no interpreter stack."""
        memo = frame.memo
        hit = memo.get(id(expr))
        if hit is not None:
            return hit[1]
        stack = [(expr, False)]
        while stack:
            n, ready = stack.pop()
            if id(n) in memo:
                continue
            if ready:
                memo[id(n)] = (n, self._eval(n, frame))  # keep n alive so its id is not reused
                continue
            stack.append((n, True))
            for k in reversed(_operands(n)):
                if id(k) not in memo:
                    stack.append((k, False))
        return memo[id(expr)][1]

    def _eval(self, e, frame: _Frame):
        if isinstance(e, Var):
            try:
                return frame.env[e]
            except KeyError:
                raise KilnError(f"the interpreter met the unbound variable %{e.name_hint}") from None
        if isinstance(e, Constant):
            return np.array(e.numpy())
        if isinstance(e, Call):
            return self.eval_call(e, frame)
        if isinstance(e, Tuple):
            return tuple(self.eval(f, frame) for f in e.fields)
        if isinstance(e, TupleGetItem):
            t = self.eval(e.tuple_value, frame)
            if not isinstance(t, tuple):
                raise InternalError(f"TupleGetItem on a non-tuple value {type(t).__name__}")
            return t[e.index]
        if isinstance(e, Let):
            # walk a chain of lets iteratively: A-normal-form programs nest deeply
            while isinstance(e, Let):
                frame.env[e.var] = self.eval(e.value, frame)
                e = e.body
            return self.eval(e, frame)
        if isinstance(e, If):
            cond = self.eval(e.cond, frame)
            return self.eval(e.true_branch if bool(np.asarray(cond)) else e.false_branch, frame)
        if isinstance(e, Function):
            return Closure(e, frame.env)
        if isinstance(e, GlobalVar):
            return self.global_closure(e)
        if isinstance(e, Op):
            raise OpNotImplemented(f"operator {e.name} used as a value; the interpreter can only call it")
        if hasattr(e, "_interpret"):  # nodes defined outside the core (reference cells)
            return e._interpret(self, frame)
        if type(e).__name__ in ("Constructor", "Match"):
            return self.eval_adt(e, frame)
        raise OpNotImplemented(f"the interpreter does not support {type(e).__name__} nodes")

    def eval_call(self, call: Call, frame: _Frame):
        args = [self.eval(a, frame) for a in call.args]
        op = call.op
        if isinstance(op, Op):
            return self.call_op(op, call, args)
        if type(op).__name__ == "Constructor":
            return ConstructorValue(op.tag, args, op)
        fn = self.eval(op, frame)
        if not isinstance(fn, Closure):
            raise InternalError(f"calling a non-function value of type {type(fn).__name__}")
        return self.call(fn, args)

    def eval_adt(self, e, frame: _Frame):
        """A constructor used as a value (a closure that builds it), or a match (first matching clause)."""
        if isinstance(e, Constructor):
            params = [Var(f"field{k}") for k in range(len(e.inputs))]
            return Closure(Function(params, Call(e, params)), {})
        value = self.eval(e.data, frame)
        for clause in e.clauses:
            bound: dict = {}
            if match_pattern(clause.lhs, value, bound):
                frame.env.update(bound)
                return self.eval(clause.rhs, frame)
        raise KilnError("match: no clause matches the value (non-exhaustive match?)")

    def call_op(self, op: Op, call: Call, args: list):
        ref = op.get_attr("FReference")
        if ref is None:
            raise OpNotImplemented(f"operator {op.name} has no numpy reference (FReference); the debug "
                                   "interpreter cannot evaluate it")
        out_type = getattr(call, "_checked_type_", None)
        if out_type is None:
            raise InternalError(f"call of {op.name} has no inferred type; run InferType first")
        try:
            result = ref(call.attrs, args, out_type)
        except KilnError:
            raise
        except IndexError as err:
            raise ArgumentError(f"operator {op.name}: an index is out of range ({err}); inputs "
                                f"{_describe(args)}") from err
        except (ValueError, TypeError, ArithmeticError) as err:
            raise KilnError(f"operator {op.name} failed in the debug interpreter: {err}; inputs "
                            f"{_describe(args)}") from err
        _check_result(op, result, out_type)
        return result


def _describe(args) -> str:
    def one(a):
        if isinstance(a, tuple):
            return "(" + ", ".join(one(x) for x in a) + ")"
        if isinstance(a, np.ndarray):
            return f"{a.dtype}{list(a.shape)}"
        return type(a).__name__
    return ", ".join(one(a) for a in args)


def _check_result(op, value, ty):
    if isinstance(ty, TupleType):
        if not isinstance(value, tuple) or len(value) != len(ty.fields):
            raise InternalError(f"the reference of {op.name} returned {type(value).__name__}, expected a tuple "
                                f"of {len(ty.fields)} values")
        for v, t in zip(value, ty.fields):
            _check_result(op, v, t)
        return
    if isinstance(ty, TensorType) and not ty.is_dynamic():
        if tuple(np.shape(value)) != tuple(ty.shape):
            raise InternalError(f"the reference of {op.name} returned shape {tuple(np.shape(value))}, but type "
                                f"inference says {tuple(ty.shape)}")
