"""Prints the tracked figure of the ONNX node-test run: "ONNX node tests: N passed, M expected failures, ..."."""
from __future__ import annotations

_SUITE = "test_onnx_node_suite.py::OnnxBackendNodeModelTest::"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    counts = {}
    for outcome in ("passed", "failed", "xfailed", "xpassed", "skipped", "error"):
        reports = terminalreporter.stats.get(outcome, [])
        counts[outcome] = sum(1 for r in reports if _SUITE in getattr(r, "nodeid", "")
                              and getattr(r, "when", "call") in ("call", "setup")
                              and not (outcome == "skipped" and r.nodeid.endswith("_cuda")))
    total = counts["passed"] + counts["failed"] + counts["xfailed"] + counts["xpassed"] + counts["error"]
    if not total:
        return
    terminalreporter.write_sep("=", "ONNX backend node tests")
    terminalreporter.write_line(
        f"ONNX node tests: {counts['passed']} passed, {counts['xfailed']} expected failures, {total} total"
        f" ({counts['failed'] + counts['error']} unexpected failures, {counts['xpassed']} unexpected passes)")
