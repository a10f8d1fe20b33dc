"""The ONNX backend node tests (shipped inside the ``onnx`` package) run against kiln.

Every node test builds its model with ``relay.build`` through :class:`kiln.contrib.onnx_backend.KilnBackend`
and compares with the reference outputs. ``expected_failures.txt`` lists the tests known to fail (one name per
line, ``# reason`` after it): they run as expected failures, so a listed test that starts to pass fails the
suite (remove it from the list), and so does an unlisted test that fails. The pass count is printed at the end
of the pytest run (see conftest.py). Regenerate the list with ``python3 tests/frontend/onnx/node_suite_tool.py``.
"""
from __future__ import annotations

import os
import re
import warnings

import pytest

onnx = pytest.importorskip("onnx")
import onnx.backend.test  # noqa: E402

from kiln.contrib.onnx_backend import KilnBackend  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

# ~1900 tests: a few minutes with kiln's caches warm (compiled libraries are kept under $KILN_CACHE_DIR)
pytestmark = pytest.mark.slow


def load_expected_failures(path: str = os.path.join(HERE, "expected_failures.txt")) -> dict:
    """Test name (without the device suffix) -> reason."""
    out = {}
    with open(path) as f:
        for line in f:
            name, _, reason = line.partition("#")
            name = name.strip()
            if name:
                out[name] = reason.strip()
    return out


EXPECTED_FAILURES = load_expected_failures()

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the onnx test generators warn about overflowing casts
    _backend_test = onnx.backend.test.BackendTest(KilnBackend, __name__)
_backend_test.include(r"_cpu$")
for _name in EXPECTED_FAILURES:
    _backend_test.xfail("^" + re.escape(_name) + "_cpu$")

# node tests only: the model-zoo categories need downloads
OnnxBackendNodeModelTest = _backend_test.test_cases["OnnxBackendNodeModelTest"]
# The generator makes a _cuda twin of every test; kiln's backend is CPU-only, so drop them rather than
# report thousands of skips.
for _attr in [a for a in vars(OnnxBackendNodeModelTest) if a.startswith("test_") and a.endswith("_cuda")]:
    delattr(OnnxBackendNodeModelTest, _attr)
