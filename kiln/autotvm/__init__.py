"""kiln.autotvm: template-based schedule tuning with TVM's AutoTVM API.

    from kiln import autotvm
    task = autotvm.task.create("tutorial/matmul", args=(N, L, M, "float32"), target="llvm")
    tuner = autotvm.tuner.XGBTuner(task)
    tuner.tune(n_trial=40, measure_option=autotvm.measure_option(builder="local", runner=autotvm.LocalRunner()),
               callbacks=[autotvm.callback.progress_bar(40), autotvm.callback.log_to_file("matmul.log")])
    with autotvm.apply_history_best("matmul.log"): ...
"""
import importlib as _importlib

from . import env, utils, task, measure, record, tuner, database, tophub
from .measure import (measure_option, MeasureInput, MeasureResult, MeasureErrorNo, LocalBuilder, LocalRunner,
                      RPCRunner)
from .tuner import callback
from .task import (get_config, create, ConfigSpace, ConfigEntity, FallbackConfigEntity, register_topi_compute,
                   register_topi_schedule, template, DispatchContext, FallbackContext, ApplyConfig,
                   ApplyHistoryBest as apply_history_best, ApplyFixedConfig, apply_fixed_config,
                   InstantiationError)
from .env import GLOBAL_SCOPE


def __getattr__(name):
    # `feature` walks lowered TIR and is loaded on first use; so is the (not built) graph tuner.
    if name in ("feature", "graph_tuner"):
        return _importlib.import_module(f".{name}", __name__)
    if name == "apply_graph_best":
        return _importlib.import_module(".graph_tuner", __name__).apply_graph_best
    raise AttributeError(f"module 'kiln.autotvm' has no attribute {name!r}")
