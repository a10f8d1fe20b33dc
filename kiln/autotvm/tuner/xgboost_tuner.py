"""XGBTuner (TVM's ``autotvm.tuner.xgboost_tuner``): an XGBoost cost model searched by simulated
annealing."""
from __future__ import annotations

from ...error import KilnError
from .model_based_tuner import ModelBasedTuner, ModelOptimizer
from .sa_model_optimizer import SimulatedAnnealingOptimizer
from .xgboost_cost_model import XGBoostCostModel


class XGBTuner(ModelBasedTuner):
    """Model-based tuner with an XGBoost cost model.

    ``feature_type``: "itervar" (loop-nest features of the lowered program; TVM's default), "knob" or
    "curve"; ``loss_type``: "reg", "rank" or "rank-binary"; ``optimizer``: "sa" or a ModelOptimizer;
    ``diversity_filter_ratio``: if set, pick each plan from ``ratio * plan_size`` candidates for diversity.
    """

    def __init__(self, task, plan_size: int = 64, feature_type: str = "itervar", loss_type: str = "reg",
                 num_threads: int | None = None, optimizer="sa", diversity_filter_ratio=None, log_interval: int = 50):
        cost_model = XGBoostCostModel(task, feature_type=feature_type, loss_type=loss_type,
                                      num_threads=num_threads, log_interval=log_interval // 2)
        if optimizer == "sa":
            if feature_type == "knob":
                optimizer = SimulatedAnnealingOptimizer(task, log_interval=log_interval)
            else:
                # Loop-nest features need the template instantiated and lowered (~10-30 ms per new
                # config in kiln), so the walk is smaller and time-bounded per plan.
                optimizer = SimulatedAnnealingOptimizer(task, log_interval=log_interval, parallel_size=32,
                                                        max_seconds=15.0)
        elif not isinstance(optimizer, ModelOptimizer):
            raise KilnError(f"optimizer must be 'sa' or a ModelOptimizer, got {optimizer!r}")
        super().__init__(task, cost_model, optimizer, plan_size, diversity_filter_ratio)

    def tune(self, *args, **kwargs):  # pylint: disable=arguments-differ
        super().tune(*args, **kwargs)
        self.cost_model._close_pool()
