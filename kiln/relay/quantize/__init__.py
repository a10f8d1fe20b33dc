"""kiln.relay.quantize: TVM's automatic quantization (``qconfig``, ``quantize``, and its passes).

See docs/quantize.md for what is built and how it differs from TVM.
"""
from __future__ import annotations

from . import _ops
from ._ops import simulated_quantize, cast_hint, SimulatedQuantizeAttrs, CastHintAttrs
from .qconfig import QConfig, QAnnotateKind, QuantizeConfigError, qconfig, current_qconfig, kind2str
from ._context import QuantizeContext, quantize_context
from ._rewrite import TempExpr, forward_rewrite
from ._partition import partition, register_partition_function, QPartitionExpr
from ._annotate import annotate, register_annotate_function, attach_simulated_quantize, QAnnotateExpr
from ._calibrate import calibrate, collect_stats, create_stats_collector, CreateStatsCollector
from ._realize import realize, register_realize_function, QRealizeIntExpr, fixed_point_multiply
from .kl_divergence import _find_scale_by_kl
from .quantize import quantize, prerequisite_optimize

__all__ = ["qconfig", "current_qconfig", "QConfig", "QAnnotateKind", "QuantizeConfigError", "quantize",
           "prerequisite_optimize", "partition", "annotate", "calibrate", "realize", "register_annotate_function",
           "register_partition_function", "register_realize_function", "attach_simulated_quantize",
           "simulated_quantize", "cast_hint", "quantize_context", "QuantizeContext", "collect_stats",
           "create_stats_collector", "kind2str"]
