"""Tuners that walk config indices: grid search and random search (TVM's
``autotvm.tuner.index_based_tuner``). ``range_idx=(lo, hi)`` (inclusive) limits the search to a slice of
the index range, e.g. to split one space across machines."""
from __future__ import annotations

import numpy as np

from ...error import KilnError
from .tuner import Tuner


class IndexBaseTuner(Tuner):
    """Base of index-walking tuners."""

    def __init__(self, task, range_idx: tuple | None = None):
        super().__init__(task)
        space = self.task.config_space
        if range_idx is None:
            self.index_offset = 0
            self.range_end = space.range_length  # exclusive
        else:
            if not (isinstance(range_idx, tuple) and len(range_idx) == 2):
                raise KilnError(f"range_idx must be a (first, last) tuple, got {range_idx!r}")
            lo, hi = int(range_idx[0]), int(range_idx[1])
            if not 0 <= lo <= hi < space.range_length:
                raise KilnError(f"range_idx {range_idx} is outside the index range [0, {space.range_length - 1}]")
            self.index_offset = lo
            self.range_end = hi + 1
        self.range_length = space.subrange_length(self.index_offset, self.range_end)
        self.counter = 0
        self.visited: set = set()

    def has_next(self) -> bool:
        return self.counter < self.range_length

    def load_history(self, data_set, min_seed_records: int = 1) -> None:
        """Index tuners do not learn from history."""


class GridSearchTuner(IndexBaseTuner):
    """Try valid configs in index order."""

    def __init__(self, task, range_idx: tuple | None = None):
        super().__init__(task, range_idx)
        self._next = self.index_offset

    def next_batch(self, batch_size: int) -> list:
        ret = []
        space = self.task.config_space
        while len(ret) < batch_size and self.counter < self.range_length:
            while not space.is_index_valid(self._next):
                self._next += 1
            ret.append(space.get(self._next))
            self.visited.add(self._next)
            self._next += 1
            self.counter += 1
        return ret


class RandomTuner(IndexBaseTuner):
    """Try valid configs in a random order, without repetition (a lazily materialized shuffle)."""

    def __init__(self, task, range_idx: tuple | None = None):
        super().__init__(task, range_idx)
        # Fisher-Yates over [0, n) kept as a sparse dict: position -> value where it differs from itself.
        self.rand_state: dict = {}
        self.rand_max = self.range_end - self.index_offset

    def next_batch(self, batch_size: int) -> list:
        ret = []
        space = self.task.config_space
        while len(ret) < batch_size and self.counter < self.range_length and self.rand_max > 0:
            pos = np.random.randint(self.rand_max)
            self.rand_max -= 1
            index = self.rand_state.get(pos, pos) + self.index_offset
            self.rand_state[pos] = self.rand_state.get(self.rand_max, self.rand_max)
            self.rand_state.pop(self.rand_max, None)
            if not space.is_index_valid(index):
                continue
            ret.append(space.get(index))
            self.visited.add(index)
            self.counter += 1
        return ret
