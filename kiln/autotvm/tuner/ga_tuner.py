"""Genetic-algorithm tuner (TVM's ``autotvm.tuner.ga_tuner``): a population of configs (genes = per-knob
entity indices) evolves by fitness-proportional crossover and mutation; elites survive; no config is
measured twice."""
from __future__ import annotations

import numpy as np

from ...error import KilnError
from .tuner import Tuner


class GATuner(Tuner):
    """``pop_size`` configs per generation, ``elite_num`` best kept, each knob mutated with
    ``mutation_prob``."""

    def __init__(self, task, pop_size: int = 100, elite_num: int = 3, mutation_prob: float = 0.1):
        super().__init__(task)
        if elite_num > pop_size:
            raise KilnError(f"GATuner: elite_num ({elite_num}) must not exceed pop_size ({pop_size})")
        self.space = task.config_space
        self.pop_size = min(pop_size, len(self.space))
        self.elite_num = min(self.pop_size, elite_num)
        self.mutation_prob = mutation_prob
        self.visited = set(int(x) for x in self.space.sample_ints(self.pop_size))
        self.genes = [self.space.point2knob(idx) for idx in self.visited]
        self.scores: list = []
        self.elites: list = []
        self.elite_scores: list = []
        self.trial_pt = 0

    def next_batch(self, batch_size: int) -> list:
        ret = []
        while len(ret) < batch_size and self.trial_pt < len(self.genes):
            gene = self.genes[self.trial_pt]
            self.trial_pt += 1
            ret.append(self.space.get(self.space.knob2point(gene)))
        return ret

    def update(self, inputs, results) -> None:
        for inp, res in zip(inputs, results):
            self.scores.append(inp.task.flop / np.mean(res.costs) if res.error_no == 0 else 0.0)
        if len(self.scores) < len(self.genes) or len(self.visited) >= len(self.space):
            return
        next_genes = []
        if len(self.space) - len(self.visited) <= self.pop_size:
            # the rest of the space fits in one generation: take all of it
            for idx in range(self.space.range_length):
                if self.space.is_index_valid(idx) and idx not in self.visited:
                    next_genes.append(self.space.point2knob(idx))
                    self.visited.add(idx)
        else:
            genes = self.genes + self.elites
            scores = np.array(self.scores[:len(self.genes)] + self.elite_scores, dtype=np.float64)
            order = np.argsort(-scores, kind="stable")[:self.elite_num]
            self.elites = [genes[j] for j in order]
            self.elite_scores = [float(scores[j]) for j in order]
            probs = scores + 1e-8
            probs = probs / probs.sum()
            indices = np.arange(len(genes))
            dims = self.space.dims
            attempts = 0
            while len(next_genes) < self.pop_size:
                attempts += 1
                if attempts > 50 * self.pop_size:  # crossover keeps hitting visited points: go random
                    idx = self.space.get_rand_index(to_exclude=self.visited)
                    next_genes.append(self.space.point2knob(idx))
                    self.visited.add(idx)
                    continue
                if len(genes) >= 2:
                    p1, p2 = np.random.choice(indices, size=2, replace=False, p=probs)
                else:
                    p1 = p2 = 0
                point = np.random.randint(len(dims))
                child = list(genes[p1][:point]) + list(genes[p2][point:])
                for j, dim in enumerate(dims):
                    if np.random.random() < self.mutation_prob:
                        child[j] = np.random.randint(dim)
                idx = self.space.knob2point(child)
                if self.space.is_index_valid(idx) and idx not in self.visited:
                    next_genes.append(child)
                    self.visited.add(idx)
        self.genes = next_genes
        self.trial_pt = 0
        self.scores = []

    def has_next(self) -> bool:
        return self.trial_pt < len(self.genes) or len(self.visited) < len(self.space)

    def load_history(self, data_set, min_seed_records: int = 500) -> None:
        """The GA tuner does not learn from history."""
