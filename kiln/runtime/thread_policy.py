"""OpenMP defaults for kiln's kernels, applied when ``kiln.runtime`` is imported.

kiln's parallel loops run on GNU OpenMP (libgomp). After a parallel region its worker threads wait for the
next one: spinning for ``GOMP_SPINCOUNT`` iterations, then sleeping on a futex. Both extremes hurt:

* sleeping at once (``OMP_WAIT_POLICY=PASSIVE``) makes every parallel region pay a wake-up. Inside a VM that
  is tens of microseconds, and a model is a chain of short regions: on a quiet 2-core EPYC VM mobilenet_v2
  ran in 18-20 ms with 2 threads, slower than with one (14 ms);
* libgomp's default (300,000 spins, milliseconds) keeps idle workers burning CPU long after a run; on a
  machine whose cores are busy with other processes they take time from the thread doing the work.

So unless the user chose (``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` set, or ``KILN_OMP_WAIT_POLICY``), kiln
sets ``GOMP_SPINCOUNT=10000``: workers spin a fraction of a millisecond, which covers the gap between the
kernels of one graph run, then sleep. The same mobilenet_v2 ran in 7.2-7.6 ms (ACTIVE: 7.6). On a machine
kept busy by other processes spinning still costs (2.6x on mobilenet_v2 beside two CPU hogs); there
``KILN_OMP_WAIT_POLICY=passive`` (the test suite's setting) is the better choice.
``KILN_OMP_WAIT_POLICY=active|passive|keep`` picks explicitly (``keep``: leave libgomp's own default).

libgomp reads the environment once, when it is loaded. kiln's kernel libraries load it on first use, but a
library imported earlier may have loaded it already: PyTorch ships its own ``libgomp.so.1``, which the
dynamic linker then reuses for kiln's kernels (same soname), so the two share one OpenMP runtime and the
policy is whatever was in the environment when ``import torch`` ran. :func:`openmp_status` reports this;
import kiln first (or set the variable in the shell) to get the policy everywhere. Small kernels avoid the
question altogether: relay.build makes their parallel loops serial (``kiln.relay.backend.parallel_policy``).
"""
from __future__ import annotations

import os

_STATUS: dict = {}
# spins before an idle OpenMP worker sleeps (see the module doc for the measurements behind it)
DEFAULT_SPINCOUNT = 10000


def libgomp_loaded() -> bool:
    """Whether an OpenMP runtime (libgomp) is already mapped into this process."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            return any("libgomp" in line for line in f)
    except OSError:
        return False


def configure_openmp_env(environ=None) -> dict:
    """Set kiln's OpenMP wait-policy default in ``environ`` (``os.environ``) unless the user chose one.

    Returns (and remembers for :func:`openmp_status`) what was decided: ``policy`` (``ACTIVE`` / ``PASSIVE`` /
    ``GOMP_SPINCOUNT=<n>`` in effect for a libgomp loaded from now on, or None for libgomp's own default), ``set_by_kiln``, ``reason`` and
    ``libgomp_preloaded`` (True when a runtime was already loaded, so the setting cannot reach it)."""
    env = os.environ if environ is None else environ
    choice = env.get("KILN_OMP_WAIT_POLICY", "").strip().lower()
    preloaded = libgomp_loaded() if environ is None else False
    status = {"set_by_kiln": False, "libgomp_preloaded": preloaded}
    if choice == "keep":
        status.update(policy=env.get("OMP_WAIT_POLICY"), reason="KILN_OMP_WAIT_POLICY=keep")
    elif choice in ("active", "passive"):
        env["OMP_WAIT_POLICY"] = choice.upper()
        status.update(policy=choice.upper(), set_by_kiln=True, reason="KILN_OMP_WAIT_POLICY")
    elif choice:
        from ..error import KilnError
        raise KilnError(f"$KILN_OMP_WAIT_POLICY must be 'active', 'passive' or 'keep', got {choice!r}")
    elif "OMP_WAIT_POLICY" in env or "GOMP_SPINCOUNT" in env:
        status.update(policy=env.get("OMP_WAIT_POLICY"), reason="set by the user (OMP_WAIT_POLICY / GOMP_SPINCOUNT)")
    else:
        env["GOMP_SPINCOUNT"] = str(DEFAULT_SPINCOUNT)
        status.update(policy=f"GOMP_SPINCOUNT={DEFAULT_SPINCOUNT}", set_by_kiln=True, reason="kiln default")
    if environ is None:
        _STATUS.clear()
        _STATUS.update(status)
    return status


def openmp_status() -> dict:
    """What :func:`configure_openmp_env` decided at import, plus whether libgomp is loaded now; a
    ``warning`` says when kiln's setting could not take effect (libgomp was loaded before kiln)."""
    out = dict(_STATUS)
    out["libgomp_loaded"] = libgomp_loaded()
    if out.get("set_by_kiln") and out.get("libgomp_preloaded"):
        out["warning"] = ("an OpenMP runtime was loaded before kiln (e.g. by `import torch`); it keeps the wait "
                          "policy it was started with. Import kiln first or set OMP_WAIT_POLICY / GOMP_SPINCOUNT "
                          "in the environment.")
    return out
