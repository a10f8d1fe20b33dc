"""Simulated-annealing model optimizer (TVM's ``autotvm.tuner.sa_model_optimizer``): parallel random
walks over the space, accepting moves by the Metropolis rule on the model's score, keeping a heap of the
best unvisited points seen."""
from __future__ import annotations

import heapq
import logging
import time

import numpy as np

from .model_based_tuner import ModelOptimizer

logger = logging.getLogger("autotvm")


class SimulatedAnnealingOptimizer(ModelOptimizer):
    """``parallel_size`` walkers, ``n_iter`` steps, temperature falling linearly from temp[0] to temp[1];
    stops after ``early_stop`` steps without a heap change, or after ``max_seconds`` (kiln addition: a
    bound for cost models whose features are expensive to extract). ``persistent`` resumes walkers
    between calls."""

    def __init__(self, task, n_iter: int = 500, temp=(1, 0), persistent: bool = True, parallel_size: int = 128,
                 early_stop: int = 50, log_interval: int = 50, max_seconds: float | None = None):
        super().__init__()
        self.task = task
        self.n_iter = n_iter
        self.temp = temp
        self.persistent = persistent
        self.parallel_size = min(parallel_size, len(self.task.config_space))
        self.early_stop = early_stop or 1e9
        self.log_interval = log_interval
        self.points = None
        self.max_seconds = max_seconds

    def find_maximums(self, model, num: int, exclusive) -> list:
        tic = time.time()
        space = self.task.config_space
        if self.persistent and self.points is not None:
            points = self.points
        else:
            points = np.array(space.sample_ints(self.parallel_size), dtype=np.int64)
        scores = np.asarray(model.predict(points), dtype=np.float64)

        heap = [(float("-inf"), -1 - i) for i in range(num)]
        heapq.heapify(heap)
        in_heap = set(int(x) for x in exclusive)
        in_heap.update(x[1] for x in heap)

        def offer(s, p):
            p = int(p)
            if s > heap[0][0] and p not in in_heap:
                popped = heapq.heapreplace(heap, (float(s), p))
                in_heap.discard(popped[1])
                in_heap.add(p)
                return True
            return False

        for s, p in zip(scores, points):
            offer(s, p)

        if isinstance(self.temp, (tuple, list, np.ndarray)):
            t = float(self.temp[0])
            cool = (self.temp[0] - self.temp[1]) / (self.n_iter + 1)
        else:
            t, cool = float(self.temp), 0.0

        k = k_last_modify = 0
        while k < self.n_iter and k < k_last_modify + self.early_stop:
            if self.max_seconds is not None and time.time() - tic > self.max_seconds:
                logger.debug("SA stopped by its time budget (%.1f s) at iter %d", self.max_seconds, k)
                break
            new_points = space.random_walk_batch(points)
            new_scores = np.asarray(model.predict(new_points), dtype=np.float64)
            ac_prob = np.exp(np.minimum((new_scores - scores) / (t + 1e-5), 1))
            accept = np.random.random(len(ac_prob)) < ac_prob
            points[accept] = new_points[accept]
            scores[accept] = new_scores[accept]
            for s, p in zip(new_scores, new_points):
                if offer(s, p):
                    k_last_modify = k
            k += 1
            t -= cool
            if self.log_interval and k % self.log_interval == 0:
                logger.debug("SA iter: %d\tlast_update: %d\tmax-0: %.2f\ttemp: %.2f\telapsed: %.2f", k,
                             k_last_modify, max(h[0] for h in heap), t, time.time() - tic)

        heap.sort(key=lambda item: -item[0])
        heap = [h for h in heap if h[1] >= 0]
        logger.debug("SA iter: %d\tlast_update: %d\telapsed: %.2f", k, k_last_modify, time.time() - tic)
        if self.persistent:
            self.points = points
        return [h[1] for h in heap]
