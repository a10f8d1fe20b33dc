"""The tuner base class and its measuring loop (TVM's ``autotvm.tuner.tuner``)."""
from __future__ import annotations

import logging
import tempfile

import numpy as np

from ..env import GLOBAL_SCOPE
from ..measure import MeasureInput, create_measure_batch
from ..utils import format_si_prefix

logger = logging.getLogger("autotvm")


class Tuner:
    """Base class of tuners: subclasses propose configs (``next_batch``) and learn from results
    (``update``); :meth:`tune` measures batches until ``n_trial`` configs were tried, the space is
    exhausted, or ``early_stopping`` trials passed without a new best."""

    def __init__(self, task, **kwargs):
        self.param = kwargs
        self.recorder = None
        self.task = task
        self.space = task.config_space
        self.best_config = None
        self.best_flops = 0
        self.best_measure_pair = None
        self.best_iter = 0
        self.error_ct_threshold = 150
        self.ttl = None
        self.n_trial = None
        self.early_stopping = None

    def has_next(self) -> bool:
        """Whether an untried config remains."""
        raise NotImplementedError

    def next_batch(self, batch_size: int) -> list:
        """Up to ``batch_size`` configs to measure next (never one already proposed in this run)."""
        raise NotImplementedError

    def update(self, inputs, results) -> None:
        """Learn from measured (input, result) pairs."""

    def tune(self, n_trial: int, measure_option: dict, early_stopping: int | None = None, callbacks=(),
             si_prefix: str = "G") -> None:
        """Measure up to ``n_trial`` configs. ``callbacks`` are called as ``cb(tuner, inputs, results)``
        after each batch."""
        measure_batch = create_measure_batch(self.task, measure_option)
        n_parallel = getattr(measure_batch, "n_parallel", 1)
        early_stopping = early_stopping or 1e9
        self.n_trial = n_trial
        self.early_stopping = early_stopping
        format_si_prefix(0, si_prefix)  # validate early

        old_level = logger.level
        GLOBAL_SCOPE.in_tuning = True
        i = error_ct = 0
        errors: list = []
        try:
            while i < n_trial:
                if not self.has_next():
                    break
                configs = self.next_batch(min(n_parallel, n_trial - i))
                if not configs:
                    break
                inputs = [MeasureInput(self.task.target, self.task, config) for config in configs]
                results = measure_batch(inputs)

                for k, (inp, res) in enumerate(zip(inputs, results)):
                    config = inp.config
                    if res.error_no == 0:
                        flops = inp.task.flop / np.mean(res.costs)
                        error_ct = 0
                        result_msg = res
                    else:
                        flops = 0
                        error_ct += 1
                        costs = res.costs
                        if isinstance(costs, (tuple, list)) and len(costs) == 2 and isinstance(costs[0], str):
                            errors.append(f"{costs[0]}\n{costs[1]}")
                        else:
                            errors.append(str(costs))
                        result_msg = errors[-1]
                    if flops > self.best_flops:
                        self.best_flops = flops
                        self.best_config = config
                        self.best_measure_pair = (inp, res)
                        self.best_iter = i + k
                    logger.debug("No: %d\t%sFLOPS: %.2f/%.2f\tresult: %s\t%s", i + k + 1, si_prefix,
                                 format_si_prefix(flops, si_prefix), format_si_prefix(self.best_flops, si_prefix),
                                 result_msg, config)

                i += len(results)
                self.ttl = min(early_stopping + self.best_iter, n_trial) - i

                self.update(inputs, results)
                for callback in callbacks:
                    callback(self, inputs, results)

                if i >= self.best_iter + early_stopping:
                    logger.debug("Early stopped. Best iter: %d.", self.best_iter)
                    break

                if error_ct > self.error_ct_threshold:
                    logging.basicConfig()
                    logger.warning("Too many errors happen in the tuning. Switching to debug mode.")
                    logger.setLevel(logging.DEBUG)
                else:
                    logger.setLevel(old_level)
        finally:
            GLOBAL_SCOPE.in_tuning = False
            logger.setLevel(old_level)
            for obj in (getattr(measure_batch, "builder", None), getattr(measure_batch, "runner", None)):
                executor = getattr(obj, "executor", None)
                if executor is not None and hasattr(executor, "close"):
                    executor.close()
            del measure_batch

        if i > 0 and error_ct == i:
            with tempfile.NamedTemporaryFile("w", prefix="kiln_tuning_errors_", suffix=".log",
                                             delete=False) as f:
                f.write("\n".join(errors))
            logger.warning("Could not find any valid schedule for task %s. A file containing the errors has "
                           "been written to %s.", self.task, f.name)

    def reset(self) -> None:
        """Forget the best config found so far."""
        self.best_config = None
        self.best_flops = 0
        self.best_measure_pair = None

    def load_history(self, data_set, min_seed_records: int = 500) -> None:
        """Learn from earlier records (transfer learning); a no-op for tuners without a model."""
