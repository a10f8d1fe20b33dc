"""Helpers around building Relay programs (TVM's ``relay.build_module``).

``bind_params_by_name`` lives here; ``build``/``create_executor`` are added by the backend.
"""
from __future__ import annotations

import numpy as np

import time as _time
import warnings as _warnings

from ..error import InternalError, KilnError, LoweringError, RelayError
from ..ir.expr import GlobalVar
from ..ir.module import IRModule
from ..ir.type import TensorType, TupleType, FuncType
from ..runtime.graph_executor import GraphModule
from ..target import Target
from ..tir.expr import Any as _Any
from ..transform import PassContext, Sequential
from . import transform as T
from .backend.executor import Executor as _ExecutorBase, _convert_args, create_executor as _create, register_executor
from .backend.executor_factory import GraphExecutorFactoryModule
from .backend.graph_executor_codegen import GraphExecutorCodegen, plan_runner_module
from .backend.interpreter import ADT
from .backend.te_compiler import TECompiler, weight_residency
from .op.annotation import strip_on_device
from .qnn.transform import Legalize as _qnn_legalize
from .expr import Constant, Function
from .expr_functor import bind_vars
from .transform.dynamic_to_static import dynamic_to_static, has_dyn_ops
from .executor import Executor
from ..contrib import graph_executor as _contrib_graph_executor  # noqa: F401,E402  (binds kiln.contrib.graph_executor, as TVM)
from .backend.vm import VMExecutor


def bind_params_by_name(func: Function, params: dict) -> Function:
    """Replace the parameters of ``func`` named in ``params`` by constants (they leave the signature)."""
    if not isinstance(func, Function):
        raise RelayError(f"bind_params_by_name expects a relay.Function, got {type(func).__name__}")
    by_name: dict = {}
    duplicates = set()
    for p in func.params:
        if p.name_hint in by_name:
            duplicates.add(p.name_hint)
        by_name[p.name_hint] = p
    binds = {}
    for name, value in params.items():
        if name not in by_name:
            continue  # as TVM: params for names that are not inputs are ignored
        if name in duplicates:
            raise RelayError(f"bind_params_by_name: several parameters are named {name!r}; cannot bind by name")
        binds[by_name[name]] = value if isinstance(value, Constant) else Constant(_as_numpy(value))
    return bind_vars(func, binds)


def _as_numpy(value):
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        return value.numpy()
    return np.asarray(value)


def create_executor(kind: str = "debug", mod=None, device=None, target="llvm", params=None):
    """An executor for ``mod``: "debug" (reference interpreter), "graph" or "vm" (TVM's relay.create_executor)."""
    return _create(kind, mod, device, target, params)


# -- relay.build -----------------------------------------------------------------------------------------
#: The optimization pipeline of relay.build, in TVM's order (plus kiln's SinkReshape before the last FoldConstant). Each pass runs only if the current
#: PassContext enables it (its opt level, required_pass, disabled_pass); FuseOps always runs.
OPTIMIZE_PASSES = ("RemoveUnusedFunctions", "SimplifyInference", "EliminateCommonSubexpr", "CombineParallelConv2D",
                   "CombineParallelDense", "FoldConstant", "FoldScaleAxis", "SimplifyExpr", "CanonicalizeOps",
                   "InferType", "AlterOpLayout", "SinkReshape", "FoldConstant")


def _optimize_passes() -> list:
    # As TVM's pass prefix: QNN ops become integer Relay ops first, at every opt level; then the general
    # Legalize (FTVMLegalize, opt level 1; TVM runs it for one-target builds, the only kind kiln has)
    passes = [_qnn_legalize(), T.Legalize()]
    for name in OPTIMIZE_PASSES:
        factory = getattr(T, name, None)
        if factory is None:
            raise InternalError(f"relay.build's optimization pipeline names the pass {name!r}, which "
                                "kiln.relay.transform does not define")
        if name in ("CombineParallelConv2D", "CombineParallelDense"):
            passes.append(factory(3))
        elif name == "RemoveUnusedFunctions":
            passes.append(factory(["main"]))
        else:
            passes.append(factory())
    return passes


def _as_ir_module(mod, what: str) -> IRModule:
    if isinstance(mod, Function):
        _warnings.warn(f"{what}: passing a relay.Function is deprecated; pass an IRModule "
                       "(tvm.IRModule.from_expr(func))", DeprecationWarning, stacklevel=3)
        return IRModule.from_expr(mod)
    if not isinstance(mod, IRModule):
        raise KilnError(f"{what} expects an IRModule (or a relay.Function), got {type(mod).__name__}")
    if "main" not in mod:
        raise KilnError(f"{what}: the module has no @main function")
    return mod


def _canon_target(target, target_host=None):
    if target is None:
        target = Target.current(allow_none=True)
        if target is None:
            raise KilnError("relay.build needs a target, e.g. target='llvm'")
    if isinstance(target, dict):
        if len(target) != 1:
            raise KilnError(f"relay.build: heterogeneous targets are not supported, got {list(target)}")
        target = next(iter(target.values()))
    if isinstance(target, (list, tuple)):
        if len(target) != 1:
            raise KilnError("relay.build: heterogeneous targets are not supported")
        target = target[0]
    if not isinstance(target, Target):
        target = Target(target)
    if target.kind.name not in ("llvm", "c"):
        raise NotImplementedError(f"relay.build for target {target.kind.name!r} is not implemented in kiln; "
                                  "use target='llvm' (or 'c') for the host CPU")
    return target


def _bind_params(mod: IRModule, params) -> IRModule:
    if not params:
        return mod
    mod = mod.copy() if hasattr(mod, "copy") else IRModule(dict(mod.functions))
    mod["main"] = bind_params_by_name(mod["main"], params)
    return mod


def _run_optimizations(mod: IRModule, fuse: bool = True) -> IRModule:
    mod = strip_on_device(mod)  # one device: on_device annotations have nothing left to say (TVM's PlanDevices)
    if has_dyn_ops(mod):  # dyn.* calls whose shape operands fold to constants become static ops
        mod = dynamic_to_static(mod)
    seq = Sequential(_optimize_passes(), opt_level=0, name="relay.build.optimize")
    mod = seq(mod)
    mod = T.InferType()(mod)
    if fuse:
        mod = T.FuseOps()(mod)
        mod = T.InferType()(mod)
    return mod


def optimize(mod, target=None, params=None):
    """The module after relay.build's optimization passes (params bound, ops fused), plus the params
    (TVM's ``relay.optimize`` returns ``(mod, params)``)."""
    mod = _as_ir_module(mod, "relay.optimize")
    if target is None:
        return _run_optimizations(_bind_params(mod, params)), {}
    with _canon_target(target):
        return _run_optimizations(_bind_params(mod, params)), {}


def _contains_any(ty) -> bool:
    if isinstance(ty, TensorType):
        return any(isinstance(d, _Any) or not isinstance(getattr(d, "value", d), int) for d in ty.shape)
    if isinstance(ty, TupleType):
        return any(_contains_any(f) for f in ty.fields)
    if isinstance(ty, FuncType):
        return any(_contains_any(a) for a in ty.arg_types) or _contains_any(ty.ret_type)
    return False


def _check_static(mod: IRModule, executor_name: str) -> None:
    mod = T.InferType()(mod)
    main = mod["main"]
    for p in main.params:
        ty = p.checked_type if getattr(p, "_checked_type_", None) is not None else p.type_annotation
        if _contains_any(ty):
            raise LoweringError(
                f"the {executor_name} executor needs static shapes, but input %{p.name_hint} has type {ty.astext()}"
                " with a dynamic (Any) dimension; give the input a concrete shape (e.g. relay.var(name, shape=(1, 3,"
                " 224, 224))) or use the 'vm' executor for dynamic shapes")
    ret = getattr(main.body, "_checked_type_", None)
    if ret is not None and _contains_any(ret):
        raise LoweringError(f"the {executor_name} executor needs static shapes, but @main returns {ret.astext()} "
                            "with a dynamic (Any) dimension (an output whose length depends on the data, such as "
                            "nonzero/unique/masked_select, or a dynamic input); compile it for the VM instead: "
                            "relay.vm.compile(mod, target, params=params) or relay.create_executor('vm', mod, dev, "
                            "target)")


def _executor_name(executor) -> str:
    if executor is None:
        return "graph"
    if isinstance(executor, str):
        return executor
    name = getattr(executor, "name", None)
    if isinstance(name, str):
        return name
    raise KilnError(f"relay.build: executor must be relay.backend.Executor('graph'), got {executor!r}")


def build(ir_mod, target=None, target_host=None, executor=None, runtime=None, workspace_memory_pools=None,
          constant_memory_pools=None, params=None, mod_name: str | None = "default"):
    """Compile a Relay module for the graph executor (TVM's ``relay.build``).

    Binds ``params`` into @main, runs the optimization pipeline under the current PassContext, fuses
    operators, lowers each fused function through its op strategy to TIR, generates one kernel library
    and the graph JSON (with its memory plan). Returns a ``GraphExecutorFactoryModule``:
    ``lib["default"](dev)`` makes the executor.
    """

    ir_mod = _as_ir_module(ir_mod, "relay.build")
    name = _executor_name(executor)
    if name == "aot":
        raise NotImplementedError("relay.build with Executor('aot') is not implemented in kiln; use "
                                  "Executor('graph') (the default)")
    if name != "graph":
        raise KilnError(f"relay.build: unknown executor {name!r}; kiln builds for 'graph'")
    rt_name = getattr(runtime, "name", runtime) if runtime is not None else "cpp"
    if rt_name not in ("cpp", "crt"):
        raise KilnError(f"relay.build: unknown runtime {rt_name!r}; use Runtime('cpp')")
    if workspace_memory_pools is not None or constant_memory_pools is not None:
        raise NotImplementedError("relay.build: memory pools belong to the AOT executor, which kiln does not have")
    tgt = _canon_target(target, target_host)
    mod_name = mod_name or "default"

    start = _time.perf_counter()
    if not has_dyn_ops(ir_mod):  # dyn.* ops may still become static (DynamicToStatic); checked after the passes
        _check_static(ir_mod, "graph")
    with tgt:  # target-dependent passes (AlterOpLayout's x86 hooks) and strategies read Target.current()
        opt_mod = _run_optimizations(_bind_params(ir_mod, params))
        _check_static(opt_mod, "graph")
        compiler = TECompiler(tgt, mod_name)
        with weight_residency(opt_mod):  # the prefetching schedules ask whether the weights stay in cache
            result = GraphExecutorCodegen(compiler).codegen(opt_mod["main"])
    lib = compiler.build_module()
    runner = plan_runner_module(tgt)
    if lib is None:  # a graph without any kernel (it only forwards its inputs)
        lib = runner
    else:
        lib.import_module(runner)
    factory = GraphExecutorFactoryModule(
        ir_mod, tgt, Executor_graph(), result["graph_json"], lib, mod_name, result["params"],
        memory_plan=result["memory_plan"], lowered=result["lowered"], runtime=runtime)
    factory.optimized_mod = opt_mod
    factory.build_time = _time.perf_counter() - start
    return factory


def Executor_graph():  # noqa: N802 - small helper keeping relay.executor import lazy
    return Executor("graph")


def build_config(opt_level: int = 2, required_pass=None, disabled_pass=None, trace=None, config=None):
    """Old spelling of ``kiln.transform.PassContext`` (deprecated, as in TVM)."""
    _warnings.warn("relay.build_config is deprecated; use kiln.transform.PassContext", DeprecationWarning,
                   stacklevel=2)
    return PassContext(opt_level=opt_level, required_pass=required_pass, disabled_pass=disabled_pass,
                       config=config)


# -- executors for relay.create_executor ------------------------------------------------------------------


def _unflatten(outputs: list, ty):
    if isinstance(ty, TupleType):
        return ADT(_unflatten(outputs, f) for f in ty.fields)
    return outputs.pop(0)


class GraphExecutor(_ExecutorBase):
    """``create_executor("graph")``: builds the program with relay.build and runs it on the graph executor."""

    def __init__(self, mod, device=None, target="llvm", params=None):
        super().__init__(mod, device, target)
        self.params = params or {}

    def _make_executor(self, expr=None):
        if expr is None or isinstance(expr, GlobalVar):
            name = "main" if expr is None else expr.name_hint
            mod = IRModule(dict(self.mod.functions), getattr(self.mod, "type_definitions", None))
            if name != "main":
                mod["main"] = mod[name]
        else:
            mod = IRModule(dict(self.mod.functions), getattr(self.mod, "type_definitions", None))
            mod["main"] = expr
        mod = T.InferType()(mod)
        lib = build(mod, target=self.target, params=self.params)
        gmod = GraphModule(lib["default"](self.device))
        func = lib.optimized_mod["main"]
        ret_type = func.body.checked_type if getattr(func.body, "_checked_type_", None) is not None else None
        main = mod["main"]
        ret_type = getattr(main.body, "_checked_type_", None) or ret_type
        bound = set(self.params)
        params = [p for p in main.params if p.name_hint not in bound]

        def _graph_wrapper(*args, **kwargs):
            values = _convert_args(Function(params, main.body), args, kwargs)
            for i, v in enumerate(values):  # main's inputs are the graph's first input nodes, in order
                gmod.set_input(i, v)
            gmod.run()
            outs = [gmod.get_output(i).copyto(gmod.module.device) for i in range(gmod.get_num_outputs())]
            if isinstance(ret_type, TupleType):
                return _unflatten(outs, ret_type)
            return outs[0]

        _graph_wrapper.module = gmod
        _graph_wrapper.lib = lib
        return _graph_wrapper


def _graph_executor(mod, device, target, params):
    return GraphExecutor(mod, device, target, params)


def _vm_executor(mod, device, target, params):
    return VMExecutor(mod, device, target, params)


register_executor("graph", _graph_executor, override=True)
register_executor("vm", _vm_executor, override=True)
