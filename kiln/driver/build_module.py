"""``kiln.lower`` and ``kiln.build`` for single operators (TVM's ``tvm.lower`` / ``tvm.build``).

``lower`` turns a TE schedule (or a PrimFunc / IRModule) into lowered TIR: TE lowering, then the
TIR pipeline InjectPrefetch, Simplify, StorageFlatten, LoopPartition, VectorizeLoop, UnrollLoop, Simplify,
RemoveNoOp. ``build`` lowers, applies the target's intrinsic lowering rules (``LowerIntrin``), hands
the IRModule to the code generator registered as the global function ``target.build.<target kind>``
and returns the loaded ``runtime.Module``.
"""
from __future__ import annotations

from ..error import KilnError, LoweringError
from ..te.schedule import Schedule
from ..transform import PassContext
from ..ir.module import IRModule
from ..te import schedule_to_primfunc
from ..tir.function import PrimFunc
from ..tir import transform as tir_transform
from ..target import Target
from ..runtime.registry import get_global_func
from ..tir.transform import LowerIntrin

# The TIR passes run by lower(), in order (names in kiln.tir.transform).
TIR_PIPELINE = ("InjectPrefetch", "Simplify", "StorageFlatten", "LoopPartition", "VectorizeLoop", "UnrollLoop", "Simplify",
                "RemoveNoOp")


def _is_schedule(obj) -> bool:
    return isinstance(obj, Schedule)


def _prim_func_to_module(func, name: str):
    symbol = func.attrs.get("global_symbol") or name
    if func.attrs.get("global_symbol") != symbol:
        func = func.with_attr("global_symbol", symbol)
    return IRModule({symbol: func})


def schedule_to_module(sch, args, name: str = "main", binds=None):
    """The unoptimized IRModule of a TE schedule (TE lowering only)."""
    if args is None:
        raise LoweringError("kiln.lower/kiln.build of a schedule needs args: the list of tensors (and scalar "
                            "vars) that become the function's parameters, e.g. [A, B, C]")
    if not isinstance(args, (list, tuple)):
        raise LoweringError(f"kiln.lower/kiln.build: args must be a list of tensors and scalar vars, got "
                            f"{type(args).__name__} {args!r}; write e.g. [A, B, C]")
    func = schedule_to_primfunc(sch, list(args), name=name, binds=binds)
    attrs = {"global_symbol": name}
    if "tir.noalias" not in func.attrs:
        attrs["tir.noalias"] = True
    return _prim_func_to_module(func.with_attr(attrs), name)


def _as_module(inp, args, name, binds):
    if _is_schedule(inp):
        return schedule_to_module(inp, args, name, binds)
    if isinstance(inp, PrimFunc):
        return _prim_func_to_module(inp, name)
    if isinstance(inp, IRModule):
        return inp
    raise LoweringError(
        f"kiln.lower/kiln.build expects a te.Schedule, a tir.PrimFunc or an IRModule, got {type(inp).__name__}"
    )


def _get_pass(name: str):
    factory = getattr(tir_transform, name, None)
    if factory is None:
        raise NotImplementedError(f"the lowering pipeline needs kiln.tir.transform.{name}, which is not built yet")
    return factory()


def lowering_passes() -> list:
    """The TIR pass objects lower() applies, honouring the current PassContext's disabled_pass."""
    disabled = set(PassContext.current().disabled_pass or ())
    passes = []
    for name in TIR_PIPELINE:
        if name in disabled or f"tir.{name}" in disabled:
            continue
        passes.append(_get_pass(name))
    return passes


def lower(inp, args=None, name: str = "main", binds=None, simple_mode: bool = False):
    """Lower a schedule / PrimFunc / IRModule to optimized TIR; returns an IRModule.

    ``simple_mode`` is accepted for TVM compatibility: printing the result shows the TIR text.
    """
    mod = _as_module(inp, args, name, binds)
    for p in lowering_passes():
        mod = p(mod)
    return mod


def _resolve_target(target, target_host=None):
    if target is None:
        target = Target.current(allow_none=True) or Target("llvm")
    if not isinstance(target, Target):
        target = Target(target)
    if target_host is not None and target.host is None and target.kind.name not in ("llvm", "c"):
        target = Target(target, host=target_host)
    return target


def _codegen(mod, target, entry: str | None):
    kind = target.kind.name
    builder = get_global_func(f"target.build.{kind}", allow_missing=True)
    if builder is None:
        if kind == "cuda":
            raise NotImplementedError(
                "building for target 'cuda' is not implemented yet in kiln (no target.build.cuda backend); "
                "use target='llvm' for the host CPU"
            )
        raise KilnError(
            f"no code generator is registered for target kind {kind!r}; register one as the global function "
            f"'target.build.{kind}' taking (IRModule, Target)"
        )
    mod = LowerIntrin(target)(mod)
    if entry is not None and entry in mod:
        mod = mod.with_attr("entry_name", entry)
    return builder(mod, target)


def build(inputs, args=None, target=None, target_host=None, runtime=None, name: str = "default_function",
          binds=None):
    """Compile ``inputs`` (a schedule, PrimFunc, IRModule, or dict target -> IRModule) to a runtime.Module.

    The function named ``name`` becomes the module's entry, so ``mod(a, b, c)`` calls it.
    """
    if runtime is not None and str(getattr(runtime, "name", runtime)) not in ("cpp", "crt"):
        raise KilnError(f"unknown runtime {runtime!r}; kiln builds for the C++-style runtime ('cpp')")
    if isinstance(inputs, dict):
        if not inputs:
            raise KilnError("kiln.build got an empty dict of target -> IRModule")
        built = []
        for tgt, mod in inputs.items():
            t = _resolve_target(tgt, target_host)
            built.append(_codegen(lower(_as_module(mod, args, name, binds)), t, name))
        host = built[0]
        for other in built[1:]:
            host.import_module(other)
        return host
    t = _resolve_target(target, target_host)
    mod = lower(inputs, args, name=name, binds=binds)
    return _codegen(mod, t, name)
