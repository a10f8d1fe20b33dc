"""``tvm.testing.parameter`` / ``parameters`` / ``fixture``: pytest fixtures declared at module level.

``x = parameter(1, 2, 3)`` makes every test that takes ``x`` run once per value.
``x, y = parameters((1, 2), (3, 4))`` varies ``x`` and ``y`` together (two runs, not four).
"""
from __future__ import annotations

import copy
import functools
import inspect
import itertools
import os
import sys

import pytest

_group_ids = itertools.count()


def parameter(*values, ids=None, by_dict=None):
    """A fixture taking each of ``values`` in turn (or ``by_dict``: ``{id: value}``)."""
    if by_dict is not None:
        if values or ids is not None:
            raise TypeError("parameter: give either values (and ids) or by_dict, not both")
        ids, values = list(by_dict), list(by_dict.values())
    if not values:
        raise TypeError("parameter needs at least one value")
    values = list(values)

    def as_fixture(request):
        return request.param

    return pytest.fixture(params=values, ids=ids)(as_fixture)


def parameters(*value_sets, ids=None):
    """Fixtures varied together: ``a, b = parameters((a0, b0), (a1, b1))``.

    A hidden fixture holding the tuples is placed in the calling module (pytest finds fixtures by
    module attribute); each returned fixture picks its own element of the current tuple.
    """
    if not value_sets:
        raise TypeError("parameters needs at least one tuple of values")
    width = len(value_sets[0])
    if any(len(v) != width for v in value_sets):
        raise TypeError("parameters: every value set must have the same number of entries")
    group = f"_kiln_parameters_{next(_group_ids)}"
    if ids is None:
        ids = ["-".join(str(x) for x in v) for v in value_sets]

    def group_fixture(request):
        return request.param

    caller = sys._getframe(1).f_globals
    caller[group] = pytest.fixture(params=[tuple(v) for v in value_sets], ids=ids, name=group)(group_fixture)

    outputs = []
    for i in range(width):
        def pick(i=i, **kwargs):
            return kwargs[group][i]
        pick.__signature__ = inspect.Signature(
            [inspect.Parameter(group, inspect.Parameter.POSITIONAL_OR_KEYWORD)])
        outputs.append(pytest.fixture(pick))
    return outputs


def fixture(func=None, *, cache_return_value: bool = False):
    """``pytest.fixture`` with an option to compute a value once per parameter set and hand out copies.

    Caching (for expensive setup such as compiling a model) is off when ``TVM_TEST_DISABLE_CACHE``
    is set.
    """
    if func is None:
        return functools.partial(fixture, cache_return_value=cache_return_value)
    if not cache_return_value or os.environ.get("TVM_TEST_DISABLE_CACHE"):
        return pytest.fixture(func)
    cache: dict = {}

    @functools.wraps(func)
    def cached(*args, **kwargs):
        try:
            key = repr((args, sorted(kwargs.items())))
        except Exception:
            return func(*args, **kwargs)
        if key not in cache:
            cache[key] = func(*args, **kwargs)
        try:
            return copy.deepcopy(cache[key])
        except Exception:
            return cache[key]

    return pytest.fixture(cached)
