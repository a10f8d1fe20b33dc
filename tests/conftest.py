"""Suite-wide pytest configuration: TVM's test plugin (markers, target parametrization).

The suite runs as two pytest workers on CI's two cores, each starting kernels with two threads: idle OpenMP
workers sleep at once instead of spinning against the other worker (kiln's default spins briefly, which is
right for a machine running one model; see kiln/runtime/thread_policy.py). Set before kiln is imported.
The thread count is fixed (KILN_THREAD_POLICY=fixed): tests check the count they set, which the adaptive
policy would lower whenever the other worker keeps a core busy; tests/runtime/test_thread_adapt.py tests it."""
import os

os.environ.setdefault("KILN_OMP_WAIT_POLICY", "passive")
os.environ.setdefault("KILN_THREAD_POLICY", "fixed")
pytest_plugins = ["kiln.testing.plugin"]
