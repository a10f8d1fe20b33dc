"""autotvm.graph_tuner (TVM's DPTuner / PBQPTuner): graph-level selection of conv layouts -- not built.

The names exist so a TVM script fails at the point of use with a message saying what is missing and
what works instead: kernel-level tuning plus ``autotvm.apply_history_best`` (relay.build then picks
each conv2d's tuned NCHWc config and inserts the layout transforms between them).
"""
from __future__ import annotations

from ...error import OpNotImplemented

_HINT = ("tune the kernels and build under autotvm.apply_history_best(log_file) instead (relay.build "
         "inserts the layout transforms between the tuned NCHWc convolutions)")


def _missing(what: str) -> OpNotImplemented:
    return OpNotImplemented(f"autotvm.graph_tuner.{what} (graph-level layout tuning) is not implemented in kiln; "
                            + _HINT)


class BaseGraphTuner:
    """Placeholder of TVM's graph tuner base class; constructing any graph tuner raises OpNotImplemented."""

    def __init__(self, *args, **kwargs):
        raise _missing(type(self).__name__)


class DPTuner(BaseGraphTuner):
    """TVM's dynamic-programming graph tuner (not built)."""


class PBQPTuner(BaseGraphTuner):
    """TVM's PBQP graph tuner (not built)."""


def apply_graph_best(records):
    """TVM's ``autotvm.apply_graph_best``: its records come from a graph tuner, which is not built."""
    raise OpNotImplemented("autotvm.apply_graph_best reads the schedule file written by a graph tuner "
                           "(DPTuner / PBQPTuner), which is not implemented in kiln; " + _HINT)
