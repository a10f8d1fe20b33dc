"""OpenMP defaults for kiln's kernels, applied when ``kiln.runtime`` is imported.

kiln's parallel loops run on GNU OpenMP (libgomp). Left at its defaults, libgomp makes idle worker threads
spin for about 300,000 iterations (milliseconds) after every parallel region. On a machine whose cores are
busy with other processes this is harmful twice: the spinning threads take CPU from the thread doing the
work, and a join waits for workers that were descheduled. Measured on a shared 2-core EPYC at load 10:
resnet-18 took 724 ms wall / 178 ms CPU per run with spinning workers, 419 ms / 65 ms with
``OMP_WAIT_POLICY=PASSIVE`` (and 318 ms / 63 ms with one thread). So, unless the user chose a policy
(``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` set, or ``KILN_OMP_WAIT_POLICY=keep``), kiln sets
``OMP_WAIT_POLICY=PASSIVE``; ``KILN_OMP_WAIT_POLICY=active|passive`` picks one explicitly.

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


def libgomp_loaded() -> bool:
    """Whether an OpenMP runtime (libgomp) is already mapped into this process."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            return any("libgomp" in line for line in f)
    except OSError:
        return False


def configure_openmp_env(environ=None) -> dict:
    """Set kiln's OpenMP wait-policy default in ``environ`` (``os.environ``) unless the user chose one.

    Returns (and remembers for :func:`openmp_status`) what was decided: ``policy`` (the value in effect for
    a libgomp loaded from now on, or None for libgomp's own default), ``set_by_kiln``, ``reason`` and
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
        env["OMP_WAIT_POLICY"] = "PASSIVE"
        status.update(policy="PASSIVE", set_by_kiln=True, reason="kiln default")
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
                          "policy it was started with. Import kiln first or set OMP_WAIT_POLICY in the "
                          "environment.")
    return out
