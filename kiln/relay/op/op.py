"""Op registry helpers under TVM's ``relay.op`` names, and the OpStrategy classes.

``register_compute`` / ``register_strategy`` / ``register_pattern`` / ... attach attributes to the ops that
``kiln.ir.Op`` holds (see ``kiln/ir/op.py`` for the attribute keys). ``OpStrategy`` lists the
implementations (TE compute + schedule) of an op for one target; the build picks the highest ``plevel``.
"""
from __future__ import annotations

from typing import Callable

from ...error import OpNotImplemented
from ...ir.op import Op, OpPattern, register_op, register_op_attr, get_op_attr_map
from ...target import Target
from ...target.generic_func import GenericFunc
from ...topi import generic as topi_generic

__all__ = ["OpPattern", "get", "register", "register_stateful", "register_compute", "register_strategy",
           "register_schedule", "register_injective_schedule", "register_broadcast_schedule",
           "register_reduce_schedule", "register_pattern", "register_gradient", "register_alter_op_layout",
           "register_convert_op_layout", "register_legalize", "register_infer_correct_layout",
           "register_shape_func", "register_reference", "register_external_compiler", "OpImplementation",
           "OpSpecialization", "OpStrategy", "list_op_names"]


def get(op_name: str) -> Op:
    """The registered op of this name (an error lists close names when unknown)."""
    return Op.get(op_name)


def list_op_names() -> list:
    return Op.list_op_names()


def register(op_name: str, describe: str = "") -> Op:
    """Create (or fetch) the op ``op_name``: TVM's ``relay.op.register``."""
    return register_op(op_name, describe)


def _attr(key: str):
    def register_fn(op_name: str, value=None, level: int = 10):
        return register_op_attr(op_name, key, value, level)
    register_fn.__name__ = f"register_{key}"
    return register_fn


def register_stateful(op_name: str, stateful: bool, level: int = 10):
    return register_op_attr(op_name, "TOpIsStateful", bool(stateful), level)


def register_compute(op_name: str, compute: Callable | None = None, level: int = 10):
    """``compute(attrs, inputs, out_type) -> [te.Tensor]`` (key ``FTVMCompute``); a decorator without value."""
    return register_op_attr(op_name, "FTVMCompute", compute, level)


def register_strategy(op_name: str, fstrategy: Callable | None = None, level: int = 10):
    """``fstrategy(attrs, inputs, out_type, target) -> OpStrategy`` (key ``FTVMStrategy``)."""
    return register_op_attr(op_name, "FTVMStrategy", fstrategy, level)


def register_pattern(op_name: str, pattern, level: int = 10):
    """The op's fusion pattern (``OpPattern``), key ``TOpPattern``."""
    return register_op_attr(op_name, "TOpPattern", OpPattern(int(pattern)), level)


def register_gradient(op_name: str, fgradient: Callable | None = None, level: int = 10):
    """``fgradient(orig_call, output_grad) -> [grad per argument]`` (key ``FPrimalGradient``), used by
    ``relay.transform.gradient``; a decorator without ``fgradient``."""
    return register_op_attr(op_name, "FPrimalGradient", fgradient, level)


register_alter_op_layout = _attr("FTVMAlterOpLayout")
register_convert_op_layout = _attr("FTVMConvertOpLayout")
register_legalize = _attr("FTVMLegalize")
register_infer_correct_layout = _attr("FInferCorrectLayout")
register_reference = _attr("FReference")


def register_shape_func(op_name: str, data_dependent: bool, shape_func: Callable | None = None, level: int = 10):
    """Attach ``shape_func(attrs, inputs, out_ndims)``: output shapes from input shapes (or values when
    ``data_dependent``); see kiln/relay/op/shape_func.py and docs/vm.md."""
    register_op_attr(op_name, "TShapeDataDependent", bool(data_dependent), level)
    return register_op_attr(op_name, "FShapeFunc", shape_func, level)


def register_external_compiler(op_name: str, fexternal: Callable | None = None, level: int = 10):
    return register_op_attr(op_name, "FTVMExternalCompiler", fexternal, level)


# -- strategies ---------------------------------------------------------------------------------------
class OpImplementation:
    """One way to compute an op: a TE compute and the schedule that goes with it."""

    def __init__(self, compute: Callable, schedule: Callable, name: str = "default", plevel: int = 10):
        self._compute = compute
        self._schedule = schedule
        self.name = name
        self.plevel = int(plevel)

    def compute(self, attrs, inputs, out_type) -> list:
        outs = self._compute(attrs, inputs, out_type)
        return list(outs) if isinstance(outs, (list, tuple)) else [outs]

    def schedule(self, attrs, outs, target):
        return self._schedule(attrs, outs, target)

    def __repr__(self) -> str:
        return f"OpImplementation({self.name}, plevel={self.plevel})"


class OpSpecialization:
    """Implementations valid under one condition (``None``: always)."""

    def __init__(self, condition=None):
        self.condition = condition
        self.implementations: list = []

    def add_implementation(self, compute, schedule, name, plevel):
        self.implementations.append(OpImplementation(compute, schedule, name, plevel))


class OpStrategy:
    """The implementations of an op for one target (TVM's ``relay.op.OpStrategy``)."""

    def __init__(self):
        self.specializations: list = []

    def add_implementation(self, compute: Callable, schedule: Callable, name: str = "default",
                           plevel: int = 10, condition=None) -> None:
        """Add ``compute(attrs, inputs, out_type)`` + ``schedule(attrs, outs, target)`` at priority ``plevel``."""
        for spec in self.specializations:
            if spec.condition is condition:
                spec.add_implementation(compute, schedule, name, plevel)
                return
        spec = OpSpecialization(condition)
        spec.add_implementation(compute, schedule, name, plevel)
        self.specializations.append(spec)

    def implementations(self) -> list:
        """All implementations whose condition holds (conditions are Python callables or None)."""
        out = []
        for spec in self.specializations:
            cond = spec.condition
            if cond is None or (callable(cond) and cond()) or (not callable(cond) and bool(cond)):
                out.extend(spec.implementations)
        return out

    def best(self) -> OpImplementation:
        impls = self.implementations()
        if not impls:
            raise OpNotImplemented("the op strategy has no implementation")
        return max(impls, key=lambda i: i.plevel)


def generic_schedule(name: str) -> GenericFunc:
    """``kiln.topi.generic.<name>``, the schedule generic function a strategy pairs a compute with."""
    fn = getattr(topi_generic, name, None)
    if not isinstance(fn, GenericFunc):
        raise OpNotImplemented(f"kiln.topi.generic has no schedule {name!r}")
    return fn


def implementation_name(base: str, schedule: GenericFunc) -> str:
    """``<base>.<who>``: who provides the schedule a call under the current target runs: ``generic`` for
    the default, else the TOPI target folder it lives in (``x86``), else the target key it is registered for."""
    key = schedule.dispatch_key()
    if key is None:
        return f"{base}.generic"
    parts = getattr(schedule.dispatch_dict[key], "__module__", "").split(".")
    return f"{base}.{parts[2] if parts[:2] == ['kiln', 'topi'] and len(parts) > 2 else key}"


def schedule_by_name(name: str) -> Callable:
    """A strategy schedule ``(attrs, outs, target)`` running the generic function ``kiln.topi.generic.<name>``
    under ``target`` (it dispatches on the target's keys)."""
    fn = generic_schedule(name)

    def schedule(attrs, outs, target):
        with Target.canon_target(target):
            return fn(outs)
    schedule.__name__ = name
    return schedule


def _strategy_from_schedule(op_name: str, schedule_name: str):
    """A strategy that pairs the op's FTVMCompute with a ``topi.generic`` schedule (by its name)."""
    schedule = generic_schedule(schedule_name)

    def fstrategy(attrs, inputs, out_type, target):
        compute = get(op_name).get_attr("FTVMCompute")
        if compute is None:
            raise OpNotImplemented(f"operator {op_name} has no compute (FTVMCompute) registered; "
                                   "it cannot be compiled yet")
        strategy = OpStrategy()
        strategy.add_implementation(compute, schedule_by_name(schedule_name),
                                    name=implementation_name(op_name, schedule))
        return strategy
    fstrategy.__name__ = f"{op_name}_strategy"
    return fstrategy


def register_schedule(op_name: str, schedule: Callable, level: int = 10):
    """Pair the op's compute with ``schedule(attrs, outs, target)`` as its strategy."""
    def fstrategy(attrs, inputs, out_type, target):
        compute = get(op_name).get_attr("FTVMCompute")
        if compute is None:
            raise OpNotImplemented(f"operator {op_name} has no compute (FTVMCompute) registered")
        strategy = OpStrategy()
        strategy.add_implementation(compute, schedule, name=f"{op_name}.custom")
        return strategy
    return register_strategy(op_name, fstrategy, level)


def register_injective_schedule(op_name: str, level: int = 10):
    return register_strategy(op_name, _strategy_from_schedule(op_name, "schedule_injective"), level)


def register_broadcast_schedule(op_name: str, level: int = 10):
    return register_strategy(op_name, _strategy_from_schedule(op_name, "schedule_injective"), level)


def register_reduce_schedule(op_name: str, level: int = 10):
    return register_strategy(op_name, _strategy_from_schedule(op_name, "schedule_reduce"), level)


def ops_with(attr_key: str) -> dict:
    return get_op_attr_map(attr_key)
