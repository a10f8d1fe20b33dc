"""Suite-wide pytest configuration: TVM's test plugin (markers, target parametrization).

The suite runs as two pytest workers on CI's two cores, each starting kernels with two threads: idle OpenMP
workers sleep at once instead of spinning against the other worker (kiln's default spins briefly, which is
right for a machine running one model; see kiln/runtime/thread_policy.py). Set before kiln is imported.
The thread count is fixed (KILN_THREAD_POLICY=fixed): tests check the count they set, which the adaptive
policy would lower whenever the other worker keeps a core busy; tests/runtime/test_thread_adapt.py tests it."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))  # the helpers shared across test folders (relay_exec_util.py)
os.environ.setdefault("KILN_OMP_WAIT_POLICY", "passive")
os.environ.setdefault("KILN_THREAD_POLICY", "fixed")
pytest_plugins = ["kiln.testing.plugin"]


import pytest  # noqa: E402


def pytest_report_header(config):
    """The CPU the suite runs on and what kiln builds for it (kiln's host target: $KILN_HOST_TARGET, else the
    machine), so a CI log says which ISA a failure came from."""
    from kiln.target.x86 import host_cpu_info, target_cpu_summary
    info = host_cpu_info()
    return [f"kiln host: {info.model_name or 'unknown CPU'}, {info.num_cores} cores; builds {target_cpu_summary('llvm')}"]


@pytest.fixture(autouse=True)
def _restore_thread_count():
    """A test that calls ``kiln.runtime.set_num_threads`` (directly, or through ``kiln run --threads``) must
    not change the thread count of the tests that run after it in the same worker."""
    from kiln.runtime import library
    saved = list(library._threads_override)
    yield
    if library._threads_override != saved:
        library.set_num_threads(saved[0] if saved else None)


def _cap_onnx_ir_version():
    """Models the tests build with ``onnx.helper.make_model`` get the IR version of the installed onnx package
    by default (14 with onnx 1.23), which an older onnxruntime refuses ("Unsupported model IR version: 14, max
    supported IR version: 13"); every ONNX Runtime the suite supports reads IR 10, and the tests use nothing
    newer. A test that asks for an IR version keeps it."""
    try:
        from onnx import helper
    except ImportError:
        return
    make_model = helper.make_model
    if getattr(make_model, "_kiln_ir_capped", False):
        return

    def capped(*args, **kwargs):
        model = make_model(*args, **kwargs)
        if "ir_version" not in kwargs:
            model.ir_version = min(model.ir_version, 10)
        return model

    capped._kiln_ir_capped = True
    helper.make_model = capped


_cap_onnx_ir_version()
