"""Tuners (TVM's ``autotvm.tuner``)."""
from . import callback
from .tuner import Tuner
from .index_based_tuner import GridSearchTuner, RandomTuner, IndexBaseTuner
from .ga_tuner import GATuner
from .model_based_tuner import ModelBasedTuner, CostModel, ModelOptimizer, FeatureCache, submodular_pick
from .sa_model_optimizer import SimulatedAnnealingOptimizer
from .xgboost_cost_model import XGBoostCostModel
from .xgboost_tuner import XGBTuner
from .plot import plot_tuning_curve
