"""Decorators that make TOPI computes and schedules tunable (TVM's ``autotvm.task.topi_integration``).

``@register_topi_compute("dense_nopack.x86")`` wraps ``f(cfg, *args)`` into ``g(*args)``: ``g`` looks up
the config for its workload in the current dispatch context, calls ``f`` with it, and records the
workload in the output op's ``attrs["workload"]``. ``@register_topi_schedule`` wraps ``s(cfg, outs)``
into ``t(outs)``, recovering the workload from the ops. While a :class:`TaskExtractEnv` is tracing,
every call of a wrapped compute is recorded as a task (this is how ``extract_from_program`` finds
tasks).
"""
from __future__ import annotations

import functools

from .dispatcher import DispatchContext
from .task import (TemplateError, _current_target, _register_task_compute, _register_task_schedule,
                   args_to_workload, serialize_args)
from ...te.tensor import ComputeOp, ExternOp


class TaskExtractEnv:
    """Collects (task_name, serialized args) of every tunable compute called while tracing."""

    current: "TaskExtractEnv | None" = None

    def __init__(self, allow_duplicate: bool = False):
        self.allow_duplicate = allow_duplicate
        self.task_collection: list = []
        # Relay ops whose strategies are traced (None = all); relay's lowering checks this list and
        # pauses tracing while lowering other ops.
        self.wanted_relay_ops: list | None = None
        self.tracing = False

    def __enter__(self):
        self.task_collection = []
        self.tracing = True
        return self

    def __exit__(self, *exc):
        self.tracing = False

    def reset(self, wanted_relay_ops=None) -> None:
        """Forget collected tasks; optionally restrict tracing to some Relay ops."""
        self.task_collection = []
        self.wanted_relay_ops = list(wanted_relay_ops) if wanted_relay_ops is not None else None

    def add_task(self, task_name: str, args) -> None:
        key = (task_name, serialize_args(args))
        if self.allow_duplicate or key not in self.task_collection:
            self.task_collection.append(key)

    def get_tasks(self) -> list:
        return self.task_collection

    @staticmethod
    def get(allow_duplicate: bool = False) -> "TaskExtractEnv":
        if TaskExtractEnv.current is None:
            TaskExtractEnv.current = TaskExtractEnv(allow_duplicate)
        else:
            TaskExtractEnv.current.allow_duplicate = allow_duplicate
        return TaskExtractEnv.current


def _attach_workload(node, workload):
    """Return ``node`` (a tensor or list of tensors) re-pointed at a copy of its op whose attrs carry
    ``workload`` (ops are immutable, so the op is rebuilt)."""

    tensors = node if isinstance(node, (list, tuple)) else [node]
    op = tensors[0].op
    attrs = dict(getattr(op, "attrs", None) or {})
    attrs["workload"] = workload
    if isinstance(op, ComputeOp):
        new_op = ComputeOp(op.name, op.tag, attrs, op.axis, op.body)
    elif isinstance(op, ExternOp):
        new_op = ExternOp(op.name, op.tag, attrs, op.inputs, op.input_placeholders, op.output_placeholders,
                          op.body)
    else:
        raise TemplateError(f"tunable computes must return te.compute or te.extern outputs, got {type(op).__name__}")
    if isinstance(node, (list, tuple)):
        return [new_op.output(i) for i in range(len(node))]
    return new_op.output(0)


def register_topi_compute(task_name: str, func=None):
    """Register ``f(cfg, *args)`` as the compute of tunable TOPI task ``task_name``."""

    def _decorate(topi_compute):
        @functools.wraps(topi_compute)
        def wrapper(*args, **kwargs):
            if kwargs:
                raise TemplateError(f"tunable compute {task_name!r} does not take keyword arguments")
            env = TaskExtractEnv.current
            if env is not None and env.tracing:
                env.add_task(task_name, args)
            workload = args_to_workload(args, task_name)
            cfg = DispatchContext.current.query(_current_target(), workload)
            node = topi_compute(cfg, *args)
            return _attach_workload(node, workload)

        _register_task_compute(task_name, wrapper)
        return wrapper

    return _decorate(func) if func else _decorate


def get_workload(outs, task_name: str | None = None):
    """The workload recorded by a tunable compute somewhere in the graph of ``outs`` (inputs first)."""

    def traverse(tensors, seen):
        for t in tensors:
            op = t.op
            if id(op) in seen:
                continue
            seen.add(id(op))
            wkl = traverse(list(getattr(op, "input_tensors", [])), seen)
            if wkl is not None:
                return wkl
            attrs = getattr(op, "attrs", None) or {}
            if "workload" in attrs:
                ret = args_to_workload(attrs["workload"])
                if task_name is None or ret[0] == task_name:
                    return ret
        return None

    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    return traverse(outs, set())


def register_topi_schedule(task_name: str, func=None):
    """Register ``s(cfg, outs, ...)`` as the schedule of tunable TOPI task ``task_name``."""

    def _decorate(topi_schedule):
        @functools.wraps(topi_schedule)
        def wrapper(outs, *args, **kwargs):
            workload = get_workload(outs, task_name)
            if workload is None:
                raise TemplateError(f"cannot find the workload of TOPI task {task_name!r} in the outputs: is its "
                                    "compute registered with `register_topi_compute`?")
            cfg = DispatchContext.current.query(_current_target(), workload)
            return topi_schedule(cfg, outs, *args, **kwargs)

        _register_task_schedule(task_name, wrapper)
        return wrapper

    return _decorate(func) if func else _decorate
