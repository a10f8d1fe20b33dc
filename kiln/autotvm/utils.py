"""Small helpers shared by AutoTVM modules (TVM's ``autotvm.utils``)."""
from __future__ import annotations

import logging
import time

import numpy as np

from ..error import KilnError
from ..tir.expr import IntImm

logger = logging.getLogger("autotvm")

SI_PREFIXES = "yzafpn\xb5m kMGTPEZY"
YOCTO_EXP10 = -24


class EmptyContext:
    """A context manager that does nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def format_si_prefix(x: float, si_prefix: str) -> float:
    """Scale ``x`` to the unit named by an SI prefix letter ("G" -> divide by 1e9)."""
    if not isinstance(si_prefix, str) or len(si_prefix) != 1 or si_prefix not in SI_PREFIXES:
        raise KilnError(f"invalid SI prefix {si_prefix!r}: expected one of {list(SI_PREFIXES)}")
    exp10 = 10 ** (SI_PREFIXES.index(si_prefix) * 3 + YOCTO_EXP10)
    return float(x) / exp10


def get_const_int(exp) -> int:
    """The Python int of an int or an integer constant expression; ValueError if it is not constant."""
    if isinstance(exp, (int, np.integer)):
        return int(exp)
    value = getattr(exp, "value", None)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    if isinstance(exp, IntImm):
        return int(exp.value)
    raise ValueError(f"expected a constant integer, got {exp!r}")


def get_const_tuple(in_tuple) -> tuple:
    """A tuple of ints from a shape of ints/IntImms; non-constant entries are kept as they are."""
    ret = []
    for elem in in_tuple:
        try:
            ret.append(get_const_int(elem))
        except ValueError:
            ret.append(elem)
    return tuple(ret)


def get_func_name(func) -> str:
    """The name of a function, unwrapping functools.partial."""
    return func.func.__name__ if hasattr(func, "func") else func.__name__


def sample_ints(low: int, high: int, m: int) -> list:
    """``m`` distinct random ints in [low, high)."""
    vis = set()
    assert m <= high - low
    while len(vis) < m:
        vis.add(np.random.randint(low, high))
    return list(vis)


def tic_toc():
    """Return a function giving seconds since this call."""
    start = time.time()
    return lambda: time.time() - start
