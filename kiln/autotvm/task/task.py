"""Tuning tasks and templates (TVM's ``autotvm.task.task``).

A template is a function ``f(*args) -> (schedule, arg_tensors)`` that reads its knobs from
``autotvm.get_config()``. ``autotvm.task.create(name, args, target)`` runs it once under a ConfigSpace to
collect the space; ``Task.instantiate(config)`` runs it with one config. Task arguments are kept in
serialized form (tensors as ``("TENSOR", shape, dtype)``), which is also how they appear in tuning logs.
"""
from __future__ import annotations

import functools
import importlib
import pickle

import numpy as np

from ...error import KilnError
from ...te import Tensor
from ..utils import get_const_int, get_const_tuple
from .dispatcher import ApplyConfig, DispatchContext
from .space import ConfigSpace
from ...target.target import Target
from ...tir.expr import FloatImm, IntImm, StringImm, Var, Any
from ... import te
from .main_script import main_script_path, load_main_definitions
from ...tir import expr as E

# name -> TaskTemplate
TASK_TABLE: dict = {}


class FlopCalculationError(KilnError):
    """The FLOP count of a compute graph could not be derived."""


class TemplateError(KilnError):
    """A template is missing, registered twice, or called wrongly."""


def _current_target(allow_none: bool = True):
    return Target.current(allow_none=allow_none)


def _canon_target(target, host=None):
    if target is None:
        return None, host
    tgt = Target.canon_target(target)
    host_t = Target.canon_target(host) if host is not None else getattr(tgt, "host", None)
    return tgt, host_t


# --------------------------------------------------------------------------------------------
# argument serialization
# --------------------------------------------------------------------------------------------
def _is_tensor(x) -> bool:
    return isinstance(x, Tensor)


def serialize_args(args) -> tuple:
    """Task arguments as hashable, JSON-able values: tensors become ``("TENSOR", shape, dtype)``."""

    def _encode(x):
        if _is_tensor(x):
            return ("TENSOR", get_const_tuple(x.shape), str(x.dtype))
        if isinstance(x, (tuple, list)):
            return tuple(_encode(a) for a in x)
        if x is None or isinstance(x, (str, bool)):
            return x
        if isinstance(x, (int, np.integer)):
            return int(x)
        if isinstance(x, (float, np.floating)):
            return float(x)
        if isinstance(x, (IntImm, FloatImm, StringImm)):
            return x.value
        if isinstance(x, (Var, Any)):
            return x
        raise TemplateError(f"unsupported task argument {x!r} of type {type(x).__name__}: use tensors, "
                            "numbers, strings, None or tuples/lists of them")

    return tuple(_encode(a) for a in args)


def deserialize_args(args) -> list:
    """Inverse of :func:`serialize_args`: ``("TENSOR", shape, dtype)`` becomes a te placeholder."""
    ret = []
    for t in args:
        if isinstance(t, (tuple, list)) and len(t) == 3 and t[0] == "TENSOR":
            ret.append(te.placeholder(shape=tuple(t[1]), dtype=t[2]))
        else:
            ret.append(t)
    return ret


def args_to_workload(args, task_name: str | None = None) -> tuple:
    """The workload key of a call: ``(task_name, *serialized args)``."""
    ser = serialize_args(args)
    return (task_name,) + ser if task_name is not None else ser


# --------------------------------------------------------------------------------------------
# templates
# --------------------------------------------------------------------------------------------
class TaskTemplate:
    """A registered template: either a customized function, or a TOPI compute + schedule pair."""

    def __init__(self):
        self.fcompute = None
        self.fschedule = None
        self.fcustomized = None

    def __call__(self, *args, **kwargs):
        args = deserialize_args(args)
        if self.fcustomized is not None:
            return self.fcustomized(*args, **kwargs)
        return self._default_func(*args, **kwargs)

    def defining_modules(self) -> list:
        """Modules whose import registers this template (used to restore it in worker processes)."""
        mods = []
        for f in (self.fcustomized, self.fcompute, self.fschedule):
            mod = getattr(f, "__module__", None)
            if mod and mod != "__main__" and mod not in mods:
                mods.append(mod)
        return mods

    def _default_func(self, *args, **kwargs):
        if not (callable(self.fcompute) and callable(self.fschedule)):
            raise TemplateError("this TOPI task needs both register_topi_compute and register_topi_schedule")
        out = self.fcompute(*args, **kwargs)
        arg_bufs = [out] + self._get_inputs(out)
        s = self.fschedule([out])
        return s, arg_bufs

    @staticmethod
    def _get_inputs(out) -> list:
        """The placeholders feeding ``out``, breadth first."""
        inputs, queue, seen = [], [out], set()
        while queue:
            t = queue.pop(0)
            if type(t.op).__name__ == "PlaceholderOp":
                inputs.append(t)
            else:
                for x in t.op.input_tensors:
                    if id(x) not in seen:
                        seen.add(id(x))
                        queue.append(x)
        return inputs


def _register_task_part(name: str, slot: str, func, once: str | None):
    """Set ``slot`` of task ``name``'s template to ``func`` (or return a decorator that does). ``once``: the
    part's name when registering a different function a second time is an error."""
    def _do_reg(f):
        tmpl = TASK_TABLE.setdefault(name, TaskTemplate())
        old = getattr(tmpl, slot)
        if once is not None and old is not None and old is not f:
            raise TemplateError(f"{once} is already registered for AutoTVM task {name!r}")
        setattr(tmpl, slot, f)
        return f
    return _do_reg(func) if func else _do_reg


def _register_task_compute(name: str, func=None):
    return _register_task_part(name, "fcompute", func, "compute")


def _register_task_schedule(name: str, func=None):
    return _register_task_part(name, "fschedule", func, "schedule")


def _register_customized_task(name: str, func=None):
    # Re-registering the same name (re-imported module, spawn workers) replaces the function.
    return _register_task_part(name, "fcustomized", func, None)


def template(task_name: str, func=None):
    """Decorator registering a tunable template under ``task_name``. Calling the decorated function
    queries the current dispatch context for the config of this workload and runs the template with
    it (``autotvm.get_config()`` returns that config inside)."""

    def _decorate(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            if kwargs:
                raise TemplateError(f"template {task_name!r} does not take keyword arguments")
            workload = args_to_workload(args, task_name)
            cfg = DispatchContext.current.query(_current_target(), workload)
            with ApplyConfig(cfg):
                return f(*args, **kwargs)

        _register_customized_task(task_name, f)
        wrapper.template_name = task_name
        return wrapper

    return _decorate(func) if func else _decorate


def get_config():
    """The config of the template being run (a ConfigSpace, a ConfigEntity or a fallback config)."""
    return DispatchContext.current.query(_current_target(), None)


# --------------------------------------------------------------------------------------------
# tasks
# --------------------------------------------------------------------------------------------
def _missing_template(name, why: str = ""):
    def _raise(*args, **kwargs):
        raise TemplateError(
            f"AutoTVM template {name!r} is not registered in this measurement process"
            + (f" ({why})" if why else "") + ". Templates travel to workers by value with cloudpickle (pip install "
            "'kiln[autotvm]'), by importing the module that defines them, or, for a template in the script "
            "being run, by executing that script's imports and definitions only; define the template in an "
            "importable module (decorated with @autotvm.template / register_topi_compute)")
    return _raise


class Task:
    """A tuning task: a template name, its (serialized) arguments, the config space, target and FLOPs."""

    def __init__(self, name: str, args):
        self.name = name
        self.args = tuple(args)
        self.kwargs: dict = {}
        self.config_space: ConfigSpace | None = None
        tmpl = TASK_TABLE.get(name)
        self.func = tmpl if tmpl is not None else _missing_template(name)
        self.flop = None
        self.target = None
        self.target_host = None

    @property
    def workload(self) -> tuple:
        return (self.name,) + serialize_args(self.args)

    def instantiate(self, config):
        """Run the template with ``config``; returns (schedule, arg tensors)."""
        config.flop = 0
        with ApplyConfig(config):
            sch, arg_bufs = self.func(*self.args, **self.kwargs)
        if not self.flop:
            config.flop = config.flop or compute_flop(sch)
            self.flop = config.flop
        return sch, arg_bufs

    def __getstate__(self):
        # The template is restored by name in the receiving process (TASK_TABLE); the function itself
        # travels too (by reference, or by value with cloudpickle) for templates not registered there.
        func = self.func if not isinstance(self.func, TaskTemplate) else TASK_TABLE.get(self.name)
        try:
            import cloudpickle
            func_bytes = cloudpickle.dumps(func)
        except Exception:  # cloudpickle missing or the function cannot be pickled by value
            try:
                func_bytes = pickle.dumps(func)
            except Exception:
                func_bytes = None
        modules = func.defining_modules() if isinstance(func, TaskTemplate) else []
        return {"name": self.name, "args": self.args, "kwargs": self.kwargs, "config_space": self.config_space,
                "flop": self.flop, "target": self.target, "target_host": self.target_host, "func": func_bytes,
                "modules": modules, "main_script": main_script_path(func)}

    def __setstate__(self, state):
        self.name = state["name"]
        self.args = state["args"]
        self.kwargs = state["kwargs"]
        self.config_space = state["config_space"]
        self.flop = state["flop"]
        self.target = state["target"]
        self.target_host = state["target_host"]
        func = TASK_TABLE.get(self.name)
        if func is None:
            # Importing the module that defines the template registers it (no cloudpickle needed).
            for mod in state.get("modules", ()):
                try:
                    importlib.import_module(mod)
                except Exception:  # noqa: BLE001 - fall back to the pickled function below
                    continue
            func = TASK_TABLE.get(self.name)
        if func is None and state.get("func") is not None:
            try:
                func = pickle.loads(state["func"])
            except Exception:
                func = None
        if func is None and state.get("main_script"):
            # a template of the user's __main__ script and no cloudpickle: run the script's definitions only
            try:
                load_main_definitions(state["main_script"])
            except Exception as err:  # noqa: BLE001 - reported when the template is called
                func = _missing_template(self.name, f"re-loading the definitions of {state['main_script']} "
                                                    f"failed: {type(err).__name__}: {err}")
            else:
                func = TASK_TABLE.get(self.name)
        self.func = func if func is not None else _missing_template(self.name)

    def __repr__(self) -> str:
        return (f"Task(func_name={self.name}, args={self.args}, kwargs={self.kwargs}, "
                f"workload={self.workload})")


def create(task_name: str, args, target, target_host=None) -> Task:
    """Create a tuning task: run the template once under a ConfigSpace to collect its knobs."""
    if task_name not in TASK_TABLE:
        raise TemplateError(f"no AutoTVM template named {task_name!r}; registered: {sorted(TASK_TABLE)}")
    args = serialize_args(args)
    ret = Task(task_name, args)
    target, target_host = _canon_target(target, target_host)
    ret.config_space = ConfigSpace()
    with ApplyConfig(ret.config_space):
        if target is not None:
            with target:
                sch, _ = ret.func(*args)
        else:
            sch, _ = ret.func(*args)
    ret.config_space.code_hash = getattr(sch, "code_hash", None)
    ret.flop = ret.config_space.flop or compute_flop(sch)
    ret.target = target
    ret.target_host = target_host
    return ret


# --------------------------------------------------------------------------------------------
# FLOP counting
# --------------------------------------------------------------------------------------------
def _prod_length(axes) -> int:
    try:
        return int(np.prod([get_const_int(ax.dom.extent) for ax in axes], dtype=np.int64))
    except ValueError as err:
        raise FlopCalculationError("an axis length is not constant") from err


def _count_flop(exp) -> int:
    """Arithmetic operations in one evaluation of ``exp``; loads and index math count zero."""

    if isinstance(exp, E.Reduce):
        if len(exp.combiner.result) != 1:
            raise FlopCalculationError("found a reduction with several outputs")
        if len(exp.source) != 1:
            raise FlopCalculationError("found a reduction with several sources")
        return _prod_length(exp.axis) * (_count_flop(exp.combiner.result[0]) + _count_flop(exp.source[0]))
    if isinstance(exp, (E.IntImm, E.FloatImm, E.StringImm, E.Var)):
        return 0
    if isinstance(exp, E.Cast):
        return _count_flop(exp.value)
    if isinstance(exp, E.Not):
        return 1 + _count_flop(exp.a)
    if isinstance(exp, E.BinaryOpExpr):
        return 1 + _count_flop(exp.a) + _count_flop(exp.b)
    if isinstance(exp, E.Select):
        return _count_flop(exp.condition) + max(_count_flop(exp.true_value), _count_flop(exp.false_value))
    if isinstance(exp, (E.ProducerLoad, E.BufferLoad)):
        return 0
    if isinstance(exp, E.Call):
        return sum(_count_flop(x) for x in exp.args)
    if isinstance(exp, E.Let):
        return _count_flop(exp.value) + _count_flop(exp.body)
    raise FlopCalculationError(f"unsupported expression {type(exp).__name__} in the compute body")


def _traverse_flop(ops) -> int:
    ret = 0
    for op in ops:
        kind = type(op).__name__
        if kind == "ComputeOp":
            body = list(op.body)
            if len(body) != 1:
                raise FlopCalculationError(f"compute {op.name!r} has several outputs")
            ret += _prod_length(op.axis) * _count_flop(body[0])
            ret += _traverse_flop([t.op for t in op.input_tensors])
        elif kind == "PlaceholderOp":
            continue
        else:
            raise FlopCalculationError(f"{getattr(op, 'name', op)!r} ({kind}) is not supported: only te.compute "
                                       "ops are counted")
    return ret


def compute_flop(sch) -> int:
    """FLOPs of a te schedule's compute graph: per output element, the arithmetic in its body, with a
    reduction counting (combiner + source) per reduced point."""
    try:
        ret = _traverse_flop(list(sch.outputs))
    except FlopCalculationError as exc:
        raise FlopCalculationError(f"FLOP estimator fails for this operator: {exc}. Use `cfg.add_flop` to set "
                                   "the FLOP count manually") from exc
    except AttributeError as exc:
        raise FlopCalculationError(f"cannot count FLOPs of {sch!r}: not a te schedule ({exc}). Use "
                                   "`cfg.add_flop` to set the FLOP count manually") from exc
    if ret == 0:
        raise FlopCalculationError("cannot find floating point operations in this operator. Use `cfg.add_flop` "
                                   "to set the FLOP count manually")
    return ret
