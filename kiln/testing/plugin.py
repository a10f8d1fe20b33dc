"""A pytest plugin for kiln's (and TVM-style) test suites.

Enable with ``pytest_plugins = ["kiln.testing.plugin"]`` in a root ``conftest.py`` (or ``-p
kiln.testing.plugin``). It registers kiln's markers, parametrizes any test that takes ``target``
(and gives it a matching ``dev``) over the enabled targets, skipping those this machine cannot run
with the reason, and honours ``exclude_targets`` / ``known_failing_targets``.
"""
from __future__ import annotations

import pytest

from . import targets as _targets
from ..runtime.device import device

MARKERS = {
    "gpu": "the test uses a GPU when one exists",
    "slow": "a long-running test",
    "kiln_target(name)": "the target a parametrized test runs on",
}


def pytest_configure(config):
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")


def _already_parametrized(metafunc, name: str) -> bool:
    if any(name in call.params for call in getattr(metafunc, "_calls", ())):
        return True  # e.g. this hook ran twice (plugin and a conftest importing it)
    for mark in metafunc.definition.iter_markers("parametrize"):
        argnames = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
        if isinstance(argnames, str):
            argnames = [a.strip() for a in argnames.split(",")]
        if name in argnames:
            return True
    return False


def pytest_generate_tests(metafunc):
    if "target" not in metafunc.fixturenames or _already_parametrized(metafunc, "target"):
        return
    excluded = set(getattr(metafunc.function, "kiln_excluded_targets", ()))
    targets = [t for t in _targets._configured_targets() if _targets._target_kind(t) not in excluded]
    metafunc.parametrize("target", _targets._target_params(targets, with_dev=False))


@pytest.fixture
def dev(target):
    """The device of the current ``target``."""
    return device(_targets._target_kind(target), 0)


def pytest_collection_modifyitems(config, items):
    for item in items:
        func = getattr(item, "function", None)
        failing = set(getattr(func, "kiln_known_failing_targets", ()))
        excluded = set(getattr(func, "kiln_excluded_targets", ()))
        callspec = getattr(item, "callspec", None)
        if callspec is None or "target" not in callspec.params:
            continue
        kind = _targets._target_kind(callspec.params["target"])
        if kind in failing:
            item.add_marker(pytest.mark.xfail(reason=f"known to fail on target {kind!r}"))
        if kind in excluded:
            item.add_marker(pytest.mark.skip(reason=f"excluded on target {kind!r}"))
