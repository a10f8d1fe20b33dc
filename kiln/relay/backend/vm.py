"""``create_executor("vm")``: runs any static-shape Relay program with compiled kernels.

The program goes through relay.build's optimization pipeline and FuseOps; every primitive function in
every global function is lowered by the same TE compiler as the graph path and built into one kernel
library. A small evaluator then walks the control structure (let, if, tuples, closures, calls of global
functions, recursion) and calls a kernel for each primitive call, allocating its outputs. Unlike the
graph executor it handles control flow and functions as values; dynamic (``Any``) shapes are not
supported yet.
"""
from __future__ import annotations

import numpy as np

from ...error import ArgumentError, KilnError, LoweringError
from ...ir.expr import GlobalVar
from ...ir.module import IRModule
from ...ir.node import deep_recursion
from ...ir.op import Op
from ...ir.type import TensorType, TupleType
from ...runtime import ndarray as nd
from ...runtime.ndarray import NDArray
from ..expr import Call, Constant, Function, If, Let, Tuple, TupleGetItem, Var
from ..expr_functor import post_order_visit
from .executor import Executor, _convert_args
from .interpreter import ADT
from .te_compiler import TECompiler, _type_of, flatten_type


class _Closure:
    __slots__ = ("func", "env")

    def __init__(self, func: Function, env: dict):
        self.func = func
        self.env = env


def _any_dynamic(ty) -> bool:
    from ...tir.expr import Any as _Any
    if isinstance(ty, TensorType):
        return any(isinstance(d, _Any) or not isinstance(getattr(d, "value", d), (int, np.integer)) for d in ty.shape)
    if isinstance(ty, TupleType):
        return any(_any_dynamic(f) for f in ty.fields)
    return False


class VMCompiled:
    """The optimized module and its kernel library."""

    def __init__(self, mod: IRModule, target, mod_name: str = "vm"):
        from ..build_module import _run_optimizations
        from .. import transform as T
        mod = T.InferType()(mod)
        for gv, func in mod.functions.items():
            if not isinstance(func, Function):
                continue
            for p in func.params:
                if _any_dynamic(_type_of(p)):
                    raise NotImplementedError(
                        f"the kiln VM does not support dynamic shapes yet: @{gv.name_hint} parameter %{p.name_hint} "
                        f"has type {_type_of(p).astext()}")
        self.mod = _run_optimizations(mod)
        self.compiler = TECompiler(target, mod_name)
        prims = []

        def collect(node):
            if isinstance(node, Call) and isinstance(node.op, Function) and node.op.get_attr("Primitive"):
                prims.append(node.op)
        for func in self.mod.functions.values():
            if isinstance(func, Function):
                post_order_visit(func, collect)
        self.kernels = {}
        for f in prims:
            self.compiler.lower(f)
        lib = self.compiler.build_module()
        self.lib = lib
        for cached in self.compiler.lowered:
            self.kernels[cached.func_name] = (lib[cached.func_name], [nd.array(v) for _, v in cached.const_inputs])


class _Runner:
    def __init__(self, compiled: VMCompiled):
        self.c = compiled
        self.mod = compiled.mod

    def eval(self, expr, env: dict):
        memo = {}
        return self._eval(expr, env, memo)

    def _eval(self, expr, env, memo):
        hit = memo.get(expr)
        if hit is not None:
            return hit
        out = self._dispatch(expr, env, memo)
        if not isinstance(expr, (Var, GlobalVar)):
            memo[expr] = out
        return out

    def _dispatch(self, expr, env, memo):
        if isinstance(expr, Var):
            if expr not in env:
                raise KilnError(f"vm: unbound variable %{expr.name_hint}")
            return env[expr]
        if isinstance(expr, Constant):
            return nd.array(expr.numpy())
        if isinstance(expr, GlobalVar):
            return _Closure(self.mod[expr.name_hint], {})
        if isinstance(expr, Tuple):
            return ADT(self._eval(f, env, memo) for f in expr.fields)
        if isinstance(expr, TupleGetItem):
            return self._eval(expr.tuple_value, env, memo)[expr.index]
        if isinstance(expr, Let):
            env = dict(env)
            e = expr
            while isinstance(e, Let):  # chains of lets without Python recursion per binding
                env[e.var] = self._eval(e.value, env, memo)
                e = e.body
            return self._eval(e, env, {})
        if isinstance(expr, If):
            cond = self._eval(expr.cond, env, memo)
            branch = expr.true_branch if bool(cond.numpy().reshape(-1)[0]) else expr.false_branch
            return self._eval(branch, env, memo)
        if isinstance(expr, Function):
            return _Closure(expr, dict(env))
        if isinstance(expr, Call):
            return self._call(expr, env, memo)
        raise NotImplementedError(f"the kiln VM cannot evaluate {type(expr).__name__} yet")

    def _call(self, call: Call, env, memo):
        op = call.op
        if isinstance(op, Function) and op.get_attr("Primitive"):
            return self._call_primitive(call, env, memo)
        if isinstance(op, Op):
            raise LoweringError(f"vm: operator {op.name} called outside a fused function (FuseOps did not run)")
        fn = self._eval(op, env, memo)
        if not isinstance(fn, _Closure):
            raise KilnError(f"vm: calling a value that is not a function ({type(fn).__name__})")
        args = [self._eval(a, env, memo) for a in call.args]
        if len(args) != len(fn.func.params):
            raise ArgumentError(f"vm: function takes {len(fn.func.params)} arguments, got {len(args)}")
        new_env = dict(fn.env)
        new_env.update(zip(fn.func.params, args))
        return self._eval(fn.func.body, new_env, {})

    def _call_primitive(self, call: Call, env, memo):
        cached = self.c.compiler.lower(call.op)
        kernel, consts = self.c.kernels[cached.func_name]
        ins = []
        for a in call.args:
            _flatten_value(self._eval(a, env, memo), ins)
        out_type = _type_of(call)
        outs = [nd.empty(tuple(int(getattr(d, "value", d)) for d in t.shape), t.dtype) for t in flatten_type(out_type)]
        kernel(*ins, *consts, *outs)
        return _restructure(outs, out_type)


def _flatten_value(value, out: list) -> None:
    if isinstance(value, (tuple, list)):
        for v in value:
            _flatten_value(v, out)
    elif isinstance(value, NDArray):
        out.append(value)
    else:
        raise KilnError(f"vm: a kernel argument must be a tensor, got {type(value).__name__}")


def _restructure(flat: list, ty):
    flat = list(flat)

    def take(t):
        if isinstance(t, TupleType):
            return ADT(take(f) for f in t.fields)
        return flat.pop(0)
    return take(ty)


def _to_value(v, ty):
    if isinstance(ty, TupleType):
        if not isinstance(v, (tuple, list)) or len(v) != len(ty.fields):
            raise ArgumentError(f"expected a tuple of {len(ty.fields)} values")
        return ADT(_to_value(x, t) for x, t in zip(v, ty.fields))
    if isinstance(v, NDArray):
        arr = v
    else:
        arr = nd.array(np.asarray(v, dtype=ty.dtype if isinstance(ty, TensorType) else None))
    if isinstance(ty, TensorType):
        shape = tuple(int(getattr(d, "value", d)) for d in ty.shape)
        if arr.shape != shape or arr.dtype != str(ty.dtype):
            raise ArgumentError(f"expected a tensor of shape {shape} and dtype {ty.dtype}, got shape {arr.shape} and "
                                f"dtype {arr.dtype}")
    return arr


class VMExecutor(Executor):
    """``relay.create_executor("vm", mod, device, target)``."""

    def __init__(self, mod, device=None, target="llvm", params=None):
        super().__init__(mod, device, target)
        self.params = params or {}

    def _make_executor(self, expr=None):
        from ..build_module import _canon_target, bind_params_by_name
        from .. import transform as T
        mod = IRModule(dict(self.mod.functions), getattr(self.mod, "type_definitions", None))
        if expr is not None and not isinstance(expr, GlobalVar):
            mod["main"] = expr
        elif isinstance(expr, GlobalVar) and expr.name_hint != "main":
            mod["main"] = mod[expr.name_hint]
        if "main" not in mod:
            raise KilnError("vm: the module has no @main function")
        if self.params:
            mod["main"] = bind_params_by_name(mod["main"], self.params)
        mod = T.InferType()(mod)
        main = mod["main"]
        target = _canon_target(self.target)
        with target:
            compiled = VMCompiled(mod, target)
        runner = _Runner(compiled)
        opt_main = compiled.mod["main"]

        def _vm_wrapper(*args, **kwargs):
            values = _convert_args(main, args, kwargs)
            env = {}
            for p, v in zip(opt_main.params, values):
                env[p] = _to_value(v, _type_of(p))
            with deep_recursion():
                return runner.eval(opt_main.body, env)

        _vm_wrapper.compiled = compiled
        return _vm_wrapper
