"""Which targets tests run on, and markers that skip tests needing hardware this machine lacks.

The default candidates are TVM's ("llvm", "cuda"); ``TVM_TEST_TARGETS`` (or ``KILN_TEST_TARGETS``),
a ``;``-separated list, overrides them. A target is *runnable* when its compiler and device exist.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import os
import platform
from ..target.compiler import has_compiler  # kiln.testing loads without the compiler package until asked
from ..runtime.device import device

DEFAULT_TEST_TARGETS = ["llvm", "cuda"]


def _target_kind(target) -> str:
    kind = getattr(target, "kind", None)
    if kind is not None:
        return getattr(kind, "name", str(kind))
    text = str(target).strip()
    return text.split()[0] if text else ""


@functools.lru_cache(maxsize=None)
def _have_c_compiler() -> bool:
    return has_compiler()


def _device_exists(kind: str) -> bool:
    try:
        return bool(device(kind, 0).exist)
    except Exception:  # an unknown kind, or a runtime without that backend
        return False


def _why_not_runnable(target) -> str | None:
    """None if ``target`` can compile and run here, else the reason it cannot."""
    kind = _target_kind(target)
    if kind in ("llvm", "c"):
        return None if _have_c_compiler() else f"target {kind!r} needs a C compiler (set $CC or install gcc)"
    if kind in ("cuda", "nvptx"):
        return None if _device_exists("cuda") else f"target {kind!r} needs a CUDA GPU, and this machine has none"
    if kind in ("opencl", "vulkan", "rocm", "metal"):
        return None if _device_exists(kind) else f"target {kind!r} needs a {kind} device, and this machine has none"
    return f"kiln has no backend for target {str(target)!r}"


def _configured_targets() -> list:
    env = os.environ.get("KILN_TEST_TARGETS") or os.environ.get("TVM_TEST_TARGETS")
    if env:
        return [t.strip() for t in env.split(";") if t.strip()]
    return list(DEFAULT_TEST_TARGETS)


def device_enabled(target) -> bool:
    """Whether tests for ``target`` should run: it is configured and runnable here."""
    kind = _target_kind(target)
    configured = {_target_kind(t) for t in _configured_targets()}
    return kind in configured and _why_not_runnable(target) is None


def enabled_targets() -> list:
    """``[(target, dev), ...]`` for every configured target that can run here (TVM's return form)."""
    return [(t, device(_target_kind(t), 0)) for t in _configured_targets() if _why_not_runnable(t) is None]


def target_marks(target) -> list:
    """pytest marks for one target: a skip with the reason when it cannot run here."""
    import pytest
    marks = []
    kind = _target_kind(target)
    if kind in ("cuda", "nvptx", "opencl", "vulkan", "rocm", "metal"):
        marks.append(pytest.mark.gpu)
    reason = _why_not_runnable(target)
    if reason is not None:
        marks.append(pytest.mark.skip(reason=reason))
    return marks


def _target_params(targets, with_dev: bool) -> list:
    import pytest
    params = []
    for t in targets:
        marks = target_marks(t)
        if with_dev:
            try:
                dev = device(_target_kind(t), 0)
            except Exception:
                dev = None
            params.append(pytest.param(t, dev, marks=marks, id=str(t)))
        else:
            params.append(pytest.param(t, marks=marks, id=str(t)))
    return params


def _apply_target_parametrize(func, targets):
    import pytest
    names = list(inspect.signature(func).parameters)
    if "target" not in names:
        raise TypeError(f"parametrize_targets: {func.__name__} takes no 'target' argument")
    with_dev = "dev" in names
    argnames = "target,dev" if with_dev else "target"
    return pytest.mark.parametrize(argnames, _target_params(targets, with_dev))(func)


def parametrize_targets(*args):
    """Run a test once per target: ``@parametrize_targets`` (all configured) or ``@parametrize_targets("llvm")``.

    The test takes ``target`` (and optionally ``dev``); targets that cannot run here are skipped
    with the reason.
    """
    if len(args) == 1 and callable(args[0]) and not isinstance(args[0], str):
        return _apply_target_parametrize(args[0], _configured_targets())
    targets = list(args)
    return lambda func: _apply_target_parametrize(func, targets)


def exclude_targets(*targets):
    """Never run the decorated test on these targets (the plugin drops them from the parametrization)."""
    def wrap(func):
        func.kiln_excluded_targets = [_target_kind(t) for t in targets]
        return func
    return wrap


def known_failing_targets(*targets):
    """Mark the decorated test as expected to fail on these targets (xfail, via the plugin)."""
    def wrap(func):
        func.kiln_known_failing_targets = [_target_kind(t) for t in targets]
        return func
    return wrap


class Feature:
    """A capability a test may need; ``@requires_<name>`` skips the test (with a reason) when missing.

    ``feature.run_time_check()`` tells whether it is present; ``feature.marks()`` gives the pytest
    marks to attach by hand.
    """

    def __init__(self, name: str, long_name: str | None = None, run_time_check=None, extra_marks=(),
                 parent_features=()):
        self.name = name
        self.long_name = long_name or name
        self._check = run_time_check or (lambda: True)
        self._extra = list(extra_marks)
        self._parents = list(parent_features)

    def run_time_check(self) -> bool:
        return all(p.run_time_check() for p in self._parents) and bool(self._check())

    compile_time_check = run_time_check

    def marks(self, support_required: str = "required") -> list:
        import pytest
        marks = [getattr(pytest.mark, m) for m in self._extra]
        if support_required == "required":
            marks.append(pytest.mark.skipif(not self.run_time_check(),
                                            reason=f"Test requires {self.long_name}, which this machine lacks"))
        return marks

    def __call__(self, func=None, *, support_required: str = "required"):
        if func is None:
            return lambda f: self(f, support_required=support_required)
        for mark in self.marks(support_required):
            func = mark(func)
        return func


def _has_gpu() -> bool:
    return any(_device_exists(k) for k in ("cuda", "rocm", "opencl", "vulkan", "metal"))


def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
        return True
    except Exception:
        return False


requires_gpu = Feature("gpu", "a GPU", _has_gpu, extra_marks=["gpu"])
requires_cuda = Feature("cuda", "CUDA", lambda: _device_exists("cuda"), extra_marks=["gpu"])
requires_cudagraph = Feature("cudagraph", "CUDA graph support", lambda: False, parent_features=[requires_cuda])
requires_cudnn = Feature("cudnn", "cuDNN", lambda: False, parent_features=[requires_cuda])
requires_cublas = Feature("cublas", "cuBLAS", lambda: False, parent_features=[requires_cuda])
requires_nvptx = Feature("nvptx", "the NVPTX backend", lambda: False, parent_features=[requires_cuda])
requires_tensorcore = Feature("tensorcore", "Tensor Cores", lambda: False, parent_features=[requires_cuda])
requires_opencl = Feature("opencl", "OpenCL", lambda: _device_exists("opencl"), extra_marks=["gpu"])
requires_vulkan = Feature("vulkan", "Vulkan", lambda: _device_exists("vulkan"), extra_marks=["gpu"])
requires_rocm = Feature("rocm", "ROCm", lambda: _device_exists("rocm"), extra_marks=["gpu"])
requires_metal = Feature("metal", "Metal", lambda: _device_exists("metal"), extra_marks=["gpu"])
requires_llvm = Feature("llvm", "a CPU code generator (a C compiler)", _have_c_compiler)
requires_x86 = Feature("x86", "an x86 CPU", lambda: platform.machine().lower() in ("x86_64", "amd64", "i686"))
requires_rpc = Feature("rpc", "kiln.rpc", lambda: _importable("kiln.rpc"))
requires_micro = Feature("micro", "microTVM", lambda: False)
requires_hexagon = Feature("hexagon", "Hexagon", lambda: False)


def requires_package(*packages):
    """Skip unless every named Python package imports."""
    missing = [p for p in packages if not _importable(p)]
    feature = Feature("package", f"the package(s) {', '.join(missing)}", lambda: not missing)
    return feature


def uses_gpu(*args):
    """Mark a test that uses a GPU when there is one (it still runs its CPU parts on CPU-only machines)."""
    import pytest
    if len(args) == 1 and callable(args[0]):
        return pytest.mark.gpu(args[0])
    return pytest.mark.gpu


def slow(func):
    """Mark a long-running test."""
    import pytest
    return pytest.mark.slow(func)


def skip_if_32bit(reason: str = "needs a 64-bit platform"):
    import pytest
    import struct
    return pytest.mark.skipif(struct.calcsize("P") * 8 == 32, reason=reason)
