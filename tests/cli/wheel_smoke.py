"""Build kiln's wheel and use it the way a user would: ``python -m build --wheel`` on a copy of the checkout,
a fresh virtualenv, ``pip install kiln_compiler-*.whl`` (numpy, its one required dependency, comes from the
package index), then, from a folder outside the checkout, ``import kiln``, build and run a small kernel and
a tiny Relay model, and ``kiln --help`` / ``kiln --version`` through the installed console script.

    python tests/cli/wheel_smoke.py [--keep DIR]

Exit code 0 when everything worked; prints each step and its time. Used by ``tests/cli/test_wheel.py``
(so ``make test`` runs it) and runnable on its own.
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIST_NAME = "kiln-compiler"

# Runs inside the fresh venv, from a folder that does not contain the checkout.
SMOKE = r"""
import os, sys
import numpy as np
import kiln as tvm
from kiln import te, relay
from importlib.metadata import version
here = os.path.dirname(os.path.abspath(tvm.__file__))
assert sys.prefix in here, f"kiln imported from {here}, not from the virtualenv {sys.prefix}"
assert version("kiln-compiler") == tvm.__version__, (version("kiln-compiler"), tvm.__version__)

n = 37
A = te.placeholder((n,), name="A"); B = te.placeholder((n,), name="B")
C = te.compute((n,), lambda i: A[i] * 2.0 + B[i], name="C")
s = te.create_schedule(C.op)
f = tvm.build(s, [A, B, C], target="llvm", name="axpy")
a = np.random.rand(n).astype("float32"); b = np.random.rand(n).astype("float32")
c = tvm.nd.array(np.zeros(n, "float32"))
f(tvm.nd.array(a), tvm.nd.array(b), c)
np.testing.assert_allclose(c.numpy(), a * 2 + b, rtol=1e-6)

x = relay.var("x", shape=(3, 5), dtype="float32")
mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(x * relay.const(3.0))))
with tvm.transform.PassContext(opt_level=3):
    lib = relay.build(mod, target="llvm")
from kiln.contrib import graph_executor
m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
v = np.random.randn(3, 5).astype("float32")
m.set_input("x", v); m.run()
np.testing.assert_allclose(m.get_output(0).numpy(), np.maximum(v * 3, 0), rtol=1e-6)
print("smoke: kiln", tvm.__version__, "from", here, "built and ran a kernel and a relay model")
"""


def _step(what: str, cmd: list, **kw) -> subprocess.CompletedProcess:
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    took = time.perf_counter() - t0
    if res.returncode != 0:
        sys.stderr.write(f"wheel smoke: {what} failed (exit {res.returncode}) after {took:.1f} s\n$ {' '.join(cmd)}\n"
                         f"{res.stdout[-4000:]}\n{res.stderr[-4000:]}\n")
        raise SystemExit(1)
    print(f"wheel smoke: {what} ({took:.1f} s)")
    return res


def _copy_sources(dst: str) -> None:
    """The files the wheel is built from (a copy, so the build leaves no build/ or egg-info in the checkout)."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(os.path.join(REPO, name), dst)
    shutil.copytree(os.path.join(REPO, "kiln"), os.path.join(dst, "kiln"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", default=None, help="work in this folder and keep it (default: a temporary one)")
    args = ap.parse_args(argv)
    work = args.keep or tempfile.mkdtemp(prefix="kiln_wheel_")
    os.makedirs(work, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    try:
        src, dist, venv = (os.path.join(work, d) for d in ("src", "dist", "venv"))
        os.makedirs(src, exist_ok=True)
        _copy_sources(src)
        _step("python -m build --wheel", [sys.executable, "-m", "build", "--wheel", "--outdir", dist, src], env=env)
        wheels = glob.glob(os.path.join(dist, "kiln_compiler-*.whl"))
        if len(wheels) != 1:
            sys.stderr.write(f"wheel smoke: expected one kiln_compiler-*.whl in {dist}, found {os.listdir(dist)}\n")
            return 1
        print(f"wheel smoke: built {os.path.basename(wheels[0])}")
        # a venv without its own pip (ensurepip takes most of the time); this pip installs into it
        _step("python -m venv", [sys.executable, "-m", "venv", "--without-pip", venv], env=env)
        py = os.path.join(venv, "bin", "python")
        _step(f"pip install {os.path.basename(wheels[0])}",
              [sys.executable, "-m", "pip", "--python", py, "install", "-q", "--disable-pip-version-check",
               wheels[0]], env=env)
        run_dir = os.path.join(work, "elsewhere")  # not the checkout: the import must find the installed kiln
        os.makedirs(run_dir, exist_ok=True)
        env_run = dict(env, KILN_CACHE_DIR=os.path.join(work, "cache"))
        res = _step("import kiln, build and run a kernel and a model", [py, "-c", SMOKE], cwd=run_dir, env=env_run)
        print(res.stdout.strip())
        kiln_exe = os.path.join(venv, "bin", "kiln")
        res = _step("kiln --help", [kiln_exe, "--help"], cwd=run_dir, env=env_run)
        for cmd in ("compile", "run", "tune", "bench", "plot"):
            if cmd not in res.stdout:
                sys.stderr.write(f"wheel smoke: `kiln --help` does not list {cmd!r}:\n{res.stdout}\n")
                return 1
        res = _step("kiln --version", [kiln_exe, "--version"], cwd=run_dir, env=env_run)
        print(f"wheel smoke: ok ({res.stdout.strip()})")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
