"""Task extraction from Relay programs (TVM's ``autotvm.task.relay_integration``).

The program is compiled once while a :class:`TaskExtractEnv` traces: every tunable TOPI compute that
Relay's strategy selection calls is recorded as (task name, args), then turned into a Task. Relay's
lowering consults ``TaskExtractEnv.current.wanted_relay_ops`` to trace only the requested ops.
"""
from __future__ import annotations

import logging

from ...error import KilnError
from ...ir.module import IRModule
from ...transform import PassContext
from .dispatcher import DispatchContext, FallbackContext
from .task import _canon_target, create
from .topi_integration import TaskExtractEnv

logger = logging.getLogger("autotvm")


def _lower(mod, target, params, opt_level: int = 3) -> None:
    """Run Relay's compilation far enough to select every op's implementation.

    AlterOpLayout is disabled (as TVM does): it rewrites conv2d/dense into packed layouts whose tasks
    (5-D ``conv2d_NCHWc`` args, packed ``dense_pack`` weights) are the same workloads as the unpacked ones the
    layout hook looks up in the tuning log. Tracing them as well doubled resnet-18's task list with tasks
    whose records relay.build never reads."""
    from ... import relay  # relay sits above autotvm: imported when a program is traced
    outer = PassContext.current()
    disabled = set(getattr(outer, "disabled_pass", None) or ()) | {"AlterOpLayout"}
    with PassContext(opt_level=opt_level, disabled_pass=disabled):
        relay.build(mod, target=target, params=params)


def extract_from_program(mod, params, target, target_host=None, ops=None) -> list:
    """Tuning tasks of the tunable ops (optionally only ``ops``) in one Relay program."""
    return extract_from_multiple_program([mod], [params], target, target_host, ops)


def extract_from_multiple_program(mods, params, target, target_host=None, ops=None) -> list:
    """Tuning tasks of the tunable ops in several Relay programs (duplicates merged)."""
    env = TaskExtractEnv.get()
    target, target_host = _canon_target(target, target_host)
    env.reset(ops)
    with env:
        old_disabled = logger.disabled
        logger.disabled = True
        try:
            for mod, param in zip(mods, params):
                if not isinstance(mod, IRModule):
                    mod = IRModule.from_expr(mod)
                _lower(mod, target, param)
                if isinstance(DispatchContext.current, FallbackContext):
                    DispatchContext.current.memory = {}
        finally:
            logger.disabled = old_disabled
    tasks = []
    for task_name, args in env.get_tasks():
        try:
            tasks.append(create(task_name, args, target=target, target_host=target_host))
        except KilnError as err:
            logger.warning("skipping AutoTVM task %s%s: %s", task_name, args, err)
    return tasks
