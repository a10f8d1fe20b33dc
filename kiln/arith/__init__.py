"""kiln.arith: integer arithmetic analysis (TVM's ``tvm.arith``).

``Analyzer`` simplifies index expressions and proves facts about them; ``IntSet`` /
``IntervalSet`` and ``eval_set`` bound expressions over variable domains; ``deduce_bound``
finds where a condition holds (loop partitioning).
"""
from .const_int_bound import ConstIntBound
from .modular_set import ModularSet
from .int_set import IntSet, IntervalSet, eval_set, union, intersect, pos_inf, neg_inf, is_pos_inf, is_neg_inf
from .analyzer import Analyzer, ProofStrength
from .bound_deduce import deduce_bound
from .pattern import detect_linear_equation, detect_clip_bound

__all__ = [
    "Analyzer", "ProofStrength", "ConstIntBound", "ModularSet", "IntSet", "IntervalSet", "eval_set",
    "union", "intersect", "pos_inf", "neg_inf", "is_pos_inf", "is_neg_inf", "deduce_bound",
    "detect_linear_equation", "detect_clip_bound",
]
