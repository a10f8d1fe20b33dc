"""Run the ONNX node tests through kiln's backend outside pytest and (re)write expected_failures.txt.

    python3 tests/frontend/onnx/node_suite_tool.py [--jobs 2] [--filter REGEX] [--write] [--executor graph|debug]
        [--no-specialize] [--runtime-shape-cases [--write-cases]] [--failures-file PATH]

``--no-specialize`` runs the models as ONNX Runtime does (no input bound into the model: dyn.* ops + the VM);
``--runtime-shape-cases`` keeps only the cases whose specialized import binds an input (a shape operand fed
by a graph input), listed in runtime_shape_cases.txt (``--write-cases`` recomputes that list by importing
every case).

Prints the pass count; with ``--write`` the failing tests and their reasons (the first line of the error)
become expected_failures.txt. Review the diff: a new failure in the list is a regression to fix, not to record.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..")))


def load_case_list(path: str = "") -> list:
    with open(path or os.path.join(HERE, "runtime_shape_cases.txt")) as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]


def _load_cases(pattern: str) -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.loader import load_model_tests
        cases = load_model_tests(kind="node")
    rx = re.compile(pattern)
    return [c for c in cases if rx.search(c.name)]


_CASES: list = []


def _binds_inputs(k: int):
    """Whether the specialized import of case ``k`` binds a graph input into the model (import only)."""
    from onnx.backend.test.runner import _normalize_tensor
    from kiln.contrib.onnx_backend import KilnBackendRep
    case = _CASES[k]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rep = KilnBackendRep(case.model, specialize=True)
            inputs = [_normalize_tensor(i) for i in case.data_sets[0][0]]
            _, _, bound = rep._import(rep._named_inputs(inputs))
        return case.name, bool(bound)
    except Exception:  # noqa: BLE001 (an import failure is not a binding)
        return case.name, False


CASES_FILE = os.path.join(HERE, "runtime_shape_cases.txt")


def _run_one(k: int):
    import numpy as np  # noqa: F401
    from onnx.backend.test.runner import Runner, _normalize_tensor
    from kiln.contrib.onnx_backend import KilnBackend
    case = _CASES[k]
    t = time.time()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rep = KilnBackend.prepare(case.model, "CPU", executor=os.environ.get("KILN_ONNX_EXECUTOR"),
                                      specialize=os.environ.get("KILN_ONNX_SPECIALIZE", "1") != "0")
            for inputs, refs in case.data_sets:
                outs = rep.run([_normalize_tensor(i) for i in inputs])
                Runner.assert_similar_outputs([_normalize_tensor(r) for r in refs], outs, case.rtol, case.atol)
        return case.name, None, time.time() - t
    except Exception as err:  # noqa: BLE001 (every failure is recorded with its reason)
        text = str(err).strip()
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        if isinstance(err, AssertionError):
            first = "wrong result: " + " ".join(ln.strip() for ln in text.splitlines()[:3] if ln.strip())
        else:
            first = f"{type(err).__name__}: {first}"
        return case.name, first[:200], time.time() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--filter", default=".")
    ap.add_argument("--write", action="store_true", help="rewrite expected_failures.txt")
    ap.add_argument("--failures-file", default="", help="write the failures and their reasons to this file "
                    "instead (same format; for a --no-specialize run, whose failures are not the tracked list)")
    ap.add_argument("--executor", choices=["graph", "debug"], default=None)
    ap.add_argument("--no-specialize", action="store_true", help="inputs stay run-time values (as ORT runs them)")
    ap.add_argument("--runtime-shape-cases", action="store_true",
                    help="only the cases listed in runtime_shape_cases.txt")
    ap.add_argument("--write-cases", action="store_true", help="recompute runtime_shape_cases.txt")
    args = ap.parse_args(argv)
    if args.executor:
        os.environ["KILN_ONNX_EXECUTOR"] = args.executor
    if args.no_specialize:
        os.environ["KILN_ONNX_SPECIALIZE"] = "0"
    global _CASES
    _CASES = _load_cases(args.filter)
    if args.write_cases:
        with mp.get_context("fork").Pool(max(args.jobs, 1)) as pool:
            flags = pool.map(_binds_inputs, range(len(_CASES)), chunksize=8)
        names = sorted(n for n, b in flags if b)
        with open(CASES_FILE, "w") as f:
            f.write("# ONNX node tests whose shape operands are graph inputs (the specialized import binds them)\n")
            f.writelines(n + "\n" for n in names)
        print(f"wrote {len(names)} cases to {CASES_FILE}")
    if args.runtime_shape_cases:
        wanted = set(load_case_list())
        _CASES = [c for c in _CASES if c.name in wanted]
    t0 = time.time()
    if args.jobs > 1:
        with mp.get_context("fork").Pool(args.jobs) as pool:
            results = pool.map(_run_one, range(len(_CASES)), chunksize=4)
    else:
        results = [_run_one(k) for k in range(len(_CASES))]
    failed = sorted((n, r) for n, r, _ in results if r is not None)
    passed = len(results) - len(failed)
    print(f"ONNX node tests: {passed} passed, {len(failed)} failed, {len(results)} total "
          f"({time.time() - t0:.0f}s)")
    for n, _, dt in sorted(results, key=lambda r: -r[2])[:5]:
        print(f"  slowest: {n} {dt:.1f}s")
    if args.write or args.failures_file:
        path = args.failures_file or os.path.join(HERE, "expected_failures.txt")
        with open(path, "w") as f:
            f.write("# ONNX node tests kiln is known to fail (name  # reason); see test_onnx_node_suite.py.\n")
            for n, r in failed:
                f.write(f"{n}  # {r}\n")
        print(f"wrote {len(failed)} entries to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
