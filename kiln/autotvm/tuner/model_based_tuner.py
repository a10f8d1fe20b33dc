"""Model-based tuning (TVM's ``autotvm.tuner.model_based_tuner``): a cost model learns from the
measured configs, a model optimizer searches the space for the configs the model scores best, and the
tuner measures those next (with a few random picks for exploration)."""
from __future__ import annotations

import numpy as np

from ...error import KilnError
from ..env import GLOBAL_SCOPE
from .tuner import Tuner


class FeatureCache:
    """Feature vectors per feature type, keyed by config index (shared with a base model)."""

    def __init__(self):
        self.feature_cache: dict = {}

    def get(self, key: str) -> dict:
        return self.feature_cache.setdefault(key, {})

    def size(self, key: str) -> int:
        return len(self.feature_cache.get(key, {}))

    def clear(self, key: str) -> None:
        self.feature_cache.pop(key, None)


class CostModel:
    """Predicts a score (higher = faster) for config indices."""

    def fit(self, xs, ys, plan_size: int) -> None:
        raise NotImplementedError

    def fit_log(self, records, plan_size: int, min_seed_records: int = 500) -> bool:
        raise NotImplementedError

    def predict(self, xs, output_margin: bool = False) -> np.ndarray:
        raise NotImplementedError

    def load_basemodel(self, base_model) -> None:
        raise NotImplementedError

    def spawn_base_model(self) -> "CostModel":
        raise NotImplementedError


class ModelOptimizer:
    """Searches a space for the indices a cost model scores highest."""

    def find_maximums(self, model: CostModel, num: int, exclusive) -> list:
        raise NotImplementedError


def submodular_pick(scores, knobs, n_pick: int, knob_weight: float = 1.0) -> list:
    """Greedily pick ``n_pick`` items maximizing score plus ``knob_weight`` per knob value not yet
    covered (a diversity bonus)."""
    n = len(scores)
    if n != len(knobs):
        raise KilnError("submodular_pick: scores and knobs differ in length")
    n_knobs = len(knobs[0]) if n else 0
    covered = [set() for _ in range(n_knobs)]
    ret, remain = [], list(range(n))
    for _ in range(min(n_pick, n)):
        best_x, best_gain = -1, -1e18
        for x in remain:
            gain = scores[x] + knob_weight * sum(1 for i in range(n_knobs) if knobs[x][i] not in covered[i])
            if gain > best_gain:
                best_gain, best_x = gain, x
        ret.append(best_x)
        remain.remove(best_x)
        for i in range(n_knobs):
            covered[i].add(knobs[best_x][i])
    return ret


class ModelBasedTuner(Tuner):
    """Measure the model's plan (``plan_size`` best predicted configs), refitting the model each time
    ``plan_size`` new results arrive. The last 5% of each plan is drawn at random (epsilon-greedy)."""

    def __init__(self, task, cost_model: CostModel, model_optimizer: ModelOptimizer, plan_size: int,
                 diversity_filter_ratio: float | None = None):
        super().__init__(task)
        self.target = task.target
        self.plan_size = plan_size
        self.space = task.config_space
        self.space_len = len(task.config_space)
        self.dims = [len(x) for x in self.space.space_map.values()]
        self.cost_model = cost_model
        self.model_optimizer = model_optimizer
        self.diversity_filter_ratio = diversity_filter_ratio
        if diversity_filter_ratio and diversity_filter_ratio < 1:
            raise KilnError(f"diversity_filter_ratio must be >= 1, got {diversity_filter_ratio}")
        self.trials: list = []
        self.trial_pt = 0
        self.visited: set = set()
        self.xs: list = []
        self.ys: list = []
        self.flops_max = 0.0
        self.train_ct = 0

    def next_batch(self, batch_size: int) -> list:
        ret = []
        while len(ret) < batch_size and len(self.visited) < self.space_len:
            while self.trial_pt < len(self.trials):
                index = int(self.trials[self.trial_pt])
                if index not in self.visited and self.space.is_index_valid(index):
                    break
                self.trial_pt += 1
            if self.trial_pt >= len(self.trials) - int(0.05 * self.plan_size):
                index = self.space.get_rand_index(to_exclude=self.visited)
            ret.append(self.space.get(index))
            self.visited.add(index)
        return ret

    def update(self, inputs, results) -> None:
        for inp, res in zip(inputs, results):
            index = inp.config.index
            self.xs.append(index)
            if res.error_no == 0:
                flops = inp.task.flop / np.mean(res.costs)
                self.flops_max = max(self.flops_max, flops)
                self.ys.append(flops)
            else:
                self.ys.append(0.0)
            self.visited.add(index)  # also lets update() replay records when resuming

        if len(self.xs) >= self.plan_size * (self.train_ct + 1) and self.flops_max > 1e-6:
            self.cost_model.fit(self.xs, self.ys, self.plan_size)
            if self.diversity_filter_ratio:
                candidate = self.model_optimizer.find_maximums(
                    self.cost_model, int(self.plan_size * self.diversity_filter_ratio), self.visited)
                scores = self.cost_model.predict(candidate)
                knobs = [self.space.point2knob(x) for x in candidate]
                pick = submodular_pick(0 * scores, knobs, self.plan_size, knob_weight=1)
                maximums = list(np.array(candidate)[pick])
            else:
                maximums = self.model_optimizer.find_maximums(self.cost_model, self.plan_size, self.visited)
            self.trials = list(maximums)
            self.trial_pt = 0
            self.train_ct += 1

    def load_history(self, data_set, min_seed_records: int = 500) -> None:
        """Fit a base model on earlier records of the same task (transfer learning); with no plan yet,
        its best predictions become the first trials."""
        old_in_tuning = GLOBAL_SCOPE.in_tuning
        GLOBAL_SCOPE.in_tuning = True
        try:
            base_model = self.cost_model.spawn_base_model()
            if not base_model.fit_log(data_set, self.plan_size, min_seed_records):
                return
            if not self.trials:
                self.trials = list(self.model_optimizer.find_maximums(base_model, self.plan_size, self.visited))
                self.trial_pt = 0
            self.cost_model.load_basemodel(base_model)
        finally:
            GLOBAL_SCOPE.in_tuning = old_in_tuning

    def has_next(self) -> bool:
        return len(self.visited) < self.space_len
