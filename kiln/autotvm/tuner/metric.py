"""Ranking metrics for cost models (TVM's ``autotvm.tuner.metric``)."""
from __future__ import annotations

import numpy as np


def get_rank(values) -> np.ndarray:
    """Rank of each value (0 = largest)."""
    values = np.asarray(values)
    order = np.argsort(-values, kind="stable")
    ranks = np.empty_like(order)
    ranks[order] = np.arange(len(order))
    return ranks


def max_curve(trial_scores) -> np.ndarray:
    """Best score so far after each trial."""
    return np.maximum.accumulate(np.asarray(trial_scores, dtype=np.float64)) if len(trial_scores) else np.zeros(0)


def mean_curve(trial_scores) -> np.ndarray:
    """Mean score so far after each trial."""
    s = np.asarray(trial_scores, dtype=np.float64)
    return np.cumsum(s) / np.arange(1, len(s) + 1)


def recall_curve(trial_ranks, top: int | None = None) -> np.ndarray:
    """For each prefix of trials (in predicted order), the fraction of the true top-(i+1) (or top-``top``)
    items found."""
    ranks = np.asarray(trial_ranks)
    ret = np.zeros(len(ranks))
    for i in range(len(ranks)):
        if top is None:
            ret[i] = np.sum(ranks[:i] <= i) / (i + 1)
        else:
            ret[i] = np.sum(ranks[:i] < top) / top
    return ret


def cover_curve(trial_ranks) -> np.ndarray:
    """For each prefix, the fraction of the true top-(i+1) covered by the prefix."""
    ranks = np.asarray(trial_ranks)
    ret = np.zeros(len(ranks))
    keys, cover = set(), set()
    for i, r in enumerate(ranks):
        keys.add(i)
        cover.add(int(r))
        ret[i] = len(keys & cover) / (i + 1)
    return ret


def average_recall(preds, labels, N: int) -> float:
    """Mean of the recall curve over the first N predictions (higher = better ranking)."""
    trials = np.argsort(preds)[::-1]
    ranks = get_rank(np.asarray(labels)[trials])
    curve = recall_curve(ranks)
    return float(np.sum(curve[:N]) / N)
