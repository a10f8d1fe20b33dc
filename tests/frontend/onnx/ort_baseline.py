"""Count the ONNX node tests that ONNX Runtime's own backend passes (the yardstick for kiln's count).

Run once by hand: ``python3 tests/frontend/onnx/ort_baseline.py [out.txt]``; the figure goes in docs/onnx.md.
"""
from __future__ import annotations

import sys
import unittest
import warnings


def main(argv: list) -> int:
    warnings.simplefilter("ignore")
    import onnx.backend.test
    import onnxruntime.backend as ort_backend

    bt = onnx.backend.test.BackendTest(ort_backend, __name__)
    bt.include(r"^test_.*_cpu$")
    cases = bt.test_cases["OnnxBackendNodeModelTest"]
    suite = unittest.TestLoader().loadTestsFromTestCase(cases)
    result = unittest.TestResult()
    suite.run(result)
    skipped = {t.id().rsplit(".", 1)[1] for t, _ in result.skipped}
    failed = {t.id().rsplit(".", 1)[1] for t, _ in result.failures + result.errors}
    total = result.testsRun - len(skipped)
    passed = total - len(failed)
    print(f"ONNX Runtime node tests: {passed} passed, {len(failed)} failed, {total} total")
    if len(argv) > 1:  # the names of the tests ONNX Runtime fails
        with open(argv[1], "w") as f:
            for name in sorted(failed):
                f.write(name + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
