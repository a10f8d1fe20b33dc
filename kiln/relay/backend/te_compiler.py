"""The TE compiler (TVM's compile engine): lower each fused primitive function to a TIR PrimFunc.

For one ``fn (...) , Primitive=1 { ... }``: its parameters become ``te.placeholder``s, every op call in
the body is computed by the implementation its strategy selects (``FTVMStrategy`` for the target, or the
AutoTVM dispatch context's best config), and the schedule of the *anchor* op (the call with the highest
fusion pattern, the last one on ties) schedules the whole group; its injective producers and
elementwise epilogue are inlined by that schedule. The result is a PrimFunc whose arguments are the
flattened inputs, then the flattened outputs (the graph executor's calling convention).

Structurally equal primitive functions are lowered once and share one kernel. Parallel loops with little
work are made serial (:mod:`parallel_policy`), so small kernels never pay for an OpenMP fork/join.
"""
from __future__ import annotations

import hashlib
import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, NamedTuple, Sequence

import numpy as np

from ... import te
from ...autotvm.task.dispatcher import DispatchContext, FallbackContext
from ...autotvm.task.topi_integration import TaskExtractEnv, get_workload
from ...error import LoweringError, OpNotImplemented
from ...ir.module import IRModule
from ...ir.node import structural_equal, structural_hash
from ...ir.op import Op, OpPattern
from ...ir.type import TensorType, TupleType
from ...target import Target
from ...tir import op as tir_op
from ..expr import Call, Constant, Function, Tuple, TupleGetItem, Var
from ..expr_functor import memo_post_order
from .parallel_policy import apply_parallel_policy
from .lowered_cache import build_cached

if TYPE_CHECKING:  # relay.op's x86 alter hooks call select_implementation: no import of relay.op here
    from ..op.op import OpImplementation

MAX_FUNC_NAME_LENGTH = 80


class CachedFunc:
    """One lowered primitive function: its symbol, PrimFunc, and the TE tensors of its signature."""

    def __init__(self, func_name: str, prim_func, inputs: list, outputs: list, const_inputs: list,
                 anchor_op: str, implementation: str):
        self.func_name = func_name
        self.prim_func = prim_func
        self.inputs = inputs
        self.outputs = outputs
        # non-scalar constants of the body, passed as extra trailing inputs: [(placeholder, numpy value)]
        self.const_inputs = const_inputs
        self.anchor_op = anchor_op
        self.implementation = implementation

    def __repr__(self) -> str:
        return f"CachedFunc({self.func_name}, anchor={self.anchor_op}, impl={self.implementation})"


def _static_shape(ty, where: str) -> tuple:
    shape = []
    for d in ty.shape:
        v = getattr(d, "value", d)
        if not isinstance(v, (int, np.integer)):
            raise LoweringError(f"{where}: shape {ty.astext() if hasattr(ty, 'astext') else ty} is not static; "
                                "the graph executor needs every tensor shape known at compile time (use the 'vm' "
                                "executor, or give the inputs concrete shapes)")
        shape.append(int(v))
    return tuple(shape)


def flatten_type(ty) -> list:
    """The tensor types of ``ty`` (a tuple type flattened, in order)."""
    if isinstance(ty, TupleType):
        out = []
        for f in ty.fields:
            out.extend(flatten_type(f))
        return out
    if isinstance(ty, TensorType):
        return [ty]
    raise LoweringError(f"cannot lower a value of type {ty}: only tensors and tuples of tensors are supported")


def _type_of(expr):
    ty = getattr(expr, "_checked_type_", None)
    if ty is None and isinstance(expr, Var):
        ty = expr.type_annotation
    if ty is None:
        raise LoweringError(f"expression has no inferred type; run InferType first: {expr}")
    return ty


# -- implementation selection ---------------------------------------------------------------------
def get_valid_implementations(op: Op, attrs, inputs: list, out_type, target) -> list:
    """Every implementation of ``op`` whose condition holds for this call (TVM's helper of that name). The
    strategy runs under ``target`` (generic functions dispatch on the current target's keys)."""
    target = Target.canon_target(target)
    fstrategy = op.get_attr("FTVMStrategy")
    if fstrategy is None:
        if op.get_attr("FTVMCompute") is None:
            raise OpNotImplemented(f"operator {op.name} has no compute/strategy registered (FTVMStrategy); it "
                                   "cannot be compiled yet")
        raise OpNotImplemented(f"operator {op.name} has a compute but no strategy (FTVMStrategy) giving it a "
                               "schedule; register one with relay.op.register_strategy")
    with target:
        strategy = fstrategy(attrs, inputs, out_type, target)
    impls = strategy.implementations()
    if not impls:
        raise OpNotImplemented(f"operator {op.name}: its strategy has no implementation for target {target}")
    return impls


def _autotvm_may_choose() -> bool:
    """Whether AutoTVM takes part: a tuned dispatch context is active (it may prefer a tuned implementation) or
    task extraction is tracing (every tunable compute must run to be recorded)."""
    env = TaskExtractEnv.current
    return (not isinstance(DispatchContext.current, FallbackContext)) or (env is not None and env.tracing)


def _best_tuned(impls: list, outputs: dict, target):
    """The implementation whose AutoTVM config in the current dispatch context is tuned and cheapest, or None."""
    best, best_cost = None, None
    for impl in impls:
        workload = get_workload(outputs[impl])
        if workload is None:
            continue
        cfg = DispatchContext.current.query(target, workload)
        if getattr(cfg, "is_fallback", True):
            continue
        cost = getattr(cfg, "cost", None)
        if best is None or (cost is not None and best_cost is not None and cost < best_cost):
            best, best_cost = impl, cost
    return best


def select_implementation(op: Op, attrs, inputs: list, out_type, target, use_autotvm: bool = True):
    """(implementation, output tensors) for one op call, TVM's rule: the valid implementations; the one with a
    tuned AutoTVM config (the cheapest when several are tuned), else the one of highest ``plevel``."""
    target = Target.canon_target(target)
    impls = get_valid_implementations(op, attrs, inputs, out_type, target)
    best_plevel = max(impls, key=lambda i: i.plevel)
    with target:
        if not (use_autotvm and _autotvm_may_choose()):
            return best_plevel, best_plevel.compute(attrs, inputs, out_type)
        outputs = {impl: impl.compute(attrs, inputs, out_type) for impl in impls}
        chosen = _best_tuned(impls, outputs, target) or best_plevel
    return chosen, outputs[chosen]


def _keep_schedule_record() -> bool:
    from ...transform import PassContext
    return bool(PassContext.current().get_config("te.keep_schedule_record", False))


def _is_wanted(op: Op, wanted_ops) -> bool:
    return op in wanted_ops or op.name in [getattr(o, "name", o) for o in wanted_ops]


@contextmanager
def trace_wanted_ops_only(op: Op):
    """AutoTVM task extraction may ask for some ops only (``extract_from_program(..., ops=[...])``): while
    another op is lowered, pause the tracer so its tunable computes are not recorded (TVM's ``lower_call``)."""
    env = TaskExtractEnv.current
    if env is None or not env.tracing or env.wanted_relay_ops is None or _is_wanted(op, env.wanted_relay_ops):
        yield
        return
    env.tracing = False
    try:
        yield
    finally:
        env.tracing = True


def _lowering_operands(expr) -> tuple:
    """The operands the lowering of ``expr`` reads (calls: arguments; tuples: fields; projections: the tuple)."""
    if isinstance(expr, Call):
        return tuple(expr.args)
    if isinstance(expr, Tuple):
        return tuple(expr.fields)
    if isinstance(expr, TupleGetItem):
        return (expr.tuple_value,)
    return ()


class Anchor(NamedTuple):
    """The op call whose schedule schedules a whole fused group: the highest fusion pattern, the last on ties."""
    pattern: int
    op: Op
    attrs: object
    implementation: OpImplementation
    outputs: list


# -- lowering one function ---------------------------------------------------------------------------
class _ScheduleBuilder:
    """Walks a primitive function's body, building TE tensors; remembers the anchor op."""

    def __init__(self, target):
        self.target = target
        self.memo: dict = {}
        self.anchor: Anchor | None = None
        self.const_inputs: list = []
        self.op_names: list = []

    def build(self, func: Function):
        inputs = []
        for p in func.params:
            ty = _type_of(p)
            tensors = []
            for k, t in enumerate(flatten_type(ty)):
                shape = self.param_shape(t, f"parameter {p.name_hint}")
                name = p.name_hint if not isinstance(ty, TupleType) else f"{p.name_hint}_{k}"
                tensors.append(te.placeholder(shape, t.dtype, name=name))
            self.memo[p] = tensors
            inputs.extend(tensors)
        outputs = self.visit(func.body)
        return inputs, outputs

    # hooks: the VM's symbolic-shape lowering (backend/vm/lower.py) overrides these two
    param_shape = staticmethod(_static_shape)
    check_result_shape = staticmethod(_static_shape)

    def visit(self, expr) -> list:
        """Tensors of ``expr``, operands lowered first (iteratively: a deeply fused function costs no
        interpreter stack)."""
        return memo_post_order(expr, self.memo, _lowering_operands, self._visit1)

    def _visit1(self, expr) -> list:
        if isinstance(expr, Var):
            raise LoweringError(f"free variable {expr.name_hint} in a primitive function")
        if isinstance(expr, Constant):
            out = self.visit_constant(expr)
        elif isinstance(expr, Call):
            out = self.visit_call(expr)
        elif isinstance(expr, Tuple):
            out = []
            for f in expr.fields:
                out.extend(self.visit(f))
        elif isinstance(expr, TupleGetItem):
            src = self.visit(expr.tuple_value)
            types = flatten_type(_type_of(expr.tuple_value)) if isinstance(_type_of(expr.tuple_value), TupleType) \
                else None
            if types is None or len(types) != len(src):
                raise LoweringError("TupleGetItem on a value that is not a flat tuple of tensors")
            # field i of a (flat) tuple: nested tuples are flattened, so count the leaves before it
            fields = _type_of(expr.tuple_value).fields
            start = sum(len(flatten_type(f)) for f in fields[:expr.index])
            out = src[start:start + len(flatten_type(fields[expr.index]))]
        else:
            raise LoweringError(f"cannot lower {type(expr).__name__} inside a primitive function")
        return out

    def visit_constant(self, const: Constant) -> list:
        value = const.numpy()
        dtype = "bool" if value.dtype == np.bool_ else str(value.dtype)
        if value.ndim == 0:
            scalar = value.item()
            return [te.compute((), lambda: tir_op.const(scalar, dtype), name="compile_engine_const",
                               tag="broadcast")]
        ph = te.placeholder(value.shape, dtype, name=f"const_{len(self.const_inputs)}")
        self.const_inputs.append((ph, value))
        return [ph]

    def visit_call(self, call: Call, inputs: list | None = None) -> list:
        """The call's output tensors; ``inputs``: its operand tensors when the caller built them already."""
        op = call.op
        if not isinstance(op, Op):
            raise LoweringError(f"primitive functions may only call operators, found a call of "
                                f"{type(op).__name__}")
        if inputs is None:
            inputs = []
            for a in call.args:
                inputs.extend(self.visit(a))
        out_type = _type_of(call)
        for t in flatten_type(out_type):
            self.check_result_shape(t, f"the result of {op.name}")
        with trace_wanted_ops_only(op):
            impl, outs = select_implementation(op, call.attrs, inputs, out_type, self.target)
        outs = list(outs)
        pattern = op.get_attr("TOpPattern")
        pattern = int(OpPattern.OPAQUE if pattern is None else pattern)
        if self.anchor is None or pattern >= self.anchor.pattern:
            self.anchor = Anchor(pattern, op, call.attrs, impl, outs)
        self.op_names.append(op.name)
        want = len(flatten_type(out_type))
        if len(outs) != want:
            raise LoweringError(f"operator {op.name}: its compute returned {len(outs)} tensors, its type has {want}")
        return outs


def _fused_name(op_names: Sequence[str]) -> str:
    base = "fused_" + "_".join(n.replace(".", "_") for n in op_names)
    return re.sub(r"[^A-Za-z0-9_]", "_", base)


def weight_bytes(mod, params=None) -> int:
    """Bytes of ``mod``'s weights: its constants (each once; params bound or ONNX initializers frozen in) plus
    ``params`` not yet bound."""
    from ..analysis import post_order_visit
    from ...runtime.dtype import nbytes

    def size(value) -> int:
        shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
        return (nbytes(tuple(shape), str(dtype)) or 0) if shape is not None and dtype is not None else 0
    seen: dict = {}

    def visit(e):
        if isinstance(e, Constant):
            seen[id(e)] = size(e.data)
    for _, func in mod.functions.items():
        if isinstance(func, Function):
            post_order_visit(func, visit)
    return sum(seen.values()) + sum(size(v) for v in (params or {}).values())


def weight_residency(mod):
    """A context in which the schedules know whether ``mod``'s weights (:func:`weight_bytes`) stream from memory
    each inference, i.e. exceed this machine's last-level cache (``topi.utils.weights_from_memory``; the host's
    cache also when compiling for another CPU, whose cache the compiler does not know)."""
    from ...runtime.benchmark import last_level_cache_bytes
    from ...topi.utils import weights_from_memory
    return weights_from_memory(weight_bytes(mod) > last_level_cache_bytes())


class TECompiler:
    """Lowers primitive functions for one target, caching by structural equality."""

    builder_cls = _ScheduleBuilder  # the VM's symbolic-shape lowering substitutes its own

    def __init__(self, target, mod_name: str = "default"):
        self.target = target
        self.mod_name = mod_name
        self._cache: dict = {}  # structural hash -> [(Function, CachedFunc)]
        self._names: dict = {}
        self.lowered: list = []  # CachedFuncs in first-lowered order

    def _unique_name(self, base: str) -> str:
        prefix = f"tvmgen_{self.mod_name}_" if self.mod_name else ""
        name = prefix + base
        if len(name) > MAX_FUNC_NAME_LENGTH:
            digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:8]  # deterministic: names key the disk cache
            name = name[:MAX_FUNC_NAME_LENGTH - 9] + "_" + digest
        count = self._names.get(name, 0)
        self._names[name] = count + 1
        return name if count == 0 else f"{name}_{count}"

    def lower(self, func: Function) -> CachedFunc:
        """The CachedFunc of ``func`` (lowered now, or taken from the cache)."""
        key = self._cache_key(func)
        bucket = self._cache.setdefault(key, [])
        for other, cached in bucket:
            if structural_equal(other, func):
                return cached
        cached = self._lower_new(func)
        bucket.append((func, cached))
        self.lowered.append(cached)
        return cached

    def _cache_key(self, func: Function):
        return structural_hash(func)

    def make_builder(self) -> _ScheduleBuilder:
        return self.builder_cls(self.target)

    def _lower_new(self, func: Function) -> CachedFunc:
        builder = self.make_builder()
        with self.target:
            inputs, outputs = builder.build(func)
            if builder.anchor is None:
                raise LoweringError("a primitive function without any operator call cannot be lowered")
            outputs = self._distinct_outputs(inputs, outputs)
            anchor = builder.anchor
            sch = anchor.implementation.schedule(anchor.attrs, outputs, self.target)
            if isinstance(sch, (list, tuple)):
                sch = sch[0]
            name = self._unique_name(_fused_name(builder.op_names))
            all_inputs = inputs + [ph for ph, _ in builder.const_inputs]
            prim = te.schedule_to_primfunc(sch, all_inputs + outputs, name=name)
        prim = prim.with_attr({"global_symbol": name, "tir.noalias": True})
        prim = apply_parallel_policy(prim)
        if _keep_schedule_record():
            # TVM's te_compiler: the schedule (with its schedule_record) rides on the PrimFunc for inspection
            prim = prim.with_attr({"schedule": sch})
        return CachedFunc(name, prim, all_inputs, outputs, builder.const_inputs, anchor.op.name,
                          anchor.implementation.name)

    @staticmethod
    def _distinct_outputs(inputs: list, outputs: list) -> list:
        """Outputs that are inputs, or repeated, get an identity copy (a kernel writes each output once)."""
        seen = set(inputs)
        out = []
        for t in outputs:
            if t in seen:
                src = t
                t = te.compute(src.shape, lambda *i, s=src: s(*i), name=f"{src.name}_copy", tag="injective")
            seen.add(t)
            out.append(t)
        return out

    def build_module(self):
        """One runtime module with every lowered kernel (None when nothing was lowered)."""
        if not self.lowered:
            return None
        mod = IRModule({c.func_name: c.prim_func for c in self.lowered})
        return build_cached(mod, self.target)  # kiln.build, skipping lowering when the source is cached

    def clear(self) -> None:
        self._cache.clear()
        self._names.clear()
        self.lowered.clear()


def lower_primitive(func: Function, target, name_prefix: str = "default") -> CachedFunc:
    """Lower one primitive function on its own (for tests and inspection)."""
    target = Target.canon_target(target)
    return TECompiler(target, name_prefix).lower(func)


_GLOBAL: dict = {}


def get(target="llvm", mod_name: str = "default") -> TECompiler:
    """The process-wide TECompiler for ``target`` (TVM's ``te_compiler.get()``)."""
    target = Target.canon_target(target)
    key = (str(target), mod_name)
    comp = _GLOBAL.get(key)
    if comp is None:
        comp = _GLOBAL[key] = TECompiler(target, mod_name)
    return comp


def jit(func: Function, target="llvm"):
    """Compile one primitive function on its own and return its kernel (inputs, then outputs)."""
    from ..transform import InferType
    mod = InferType()(IRModule.from_expr(func))
    func = mod["main"]
    if not func.get_attr("Primitive"):
        func = func.with_attr("Primitive", 1)
    comp = TECompiler(get(target).target, "jit")
    cached = comp.lower(func)
    return comp.build_module()[cached.func_name]
