"""kiln's main job on a built-in example, for `make demo`.

Writes a kernel in tensor expressions, schedules it, prints the lowered loop nest, builds it for
the host CPU, checks it against numpy, times it, exports it as one shared library and loads it
back — then does the same for a blocked, vectorized, parallel matmul.
"""
from __future__ import annotations

import os
import tempfile
import time

import numpy as np
import kiln as tvm
from kiln import te
from kiln.relay.testing.demo_flow import run_resnet_demo


def _vector_add():

    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    outer, inner = s[C].split(C.op.axis[0], factor=64)
    s[C].parallel(outer)
    s[C].vectorize(inner)
    print("== lowered loop nest of C = A + B (split by 64, parallel outer, vectorized inner)")
    print(tvm.lower(s, [A, B, C], simple_mode=True))
    t0 = time.perf_counter()
    fadd = tvm.build(s, [A, B, C], target="llvm", name="myadd")
    print(f"built in {time.perf_counter() - t0:.2f} s")
    dev = tvm.cpu(0)
    size = 1037
    a = tvm.nd.array(np.random.uniform(size=size).astype("float32"), dev)
    b = tvm.nd.array(np.random.uniform(size=size).astype("float32"), dev)
    c = tvm.nd.array(np.zeros(size, dtype="float32"), dev)
    fadd(a, b, c)
    err = float(np.max(np.abs(c.numpy() - (a.numpy() + b.numpy()))))
    print(f"n={size}: max |kiln - numpy| = {err:.3g}")
    ev = fadd.time_evaluator(fadd.entry_name, dev, number=100, repeat=3)
    print(f"time per call: {ev(a, b, c).median * 1e6:.2f} us")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "myadd.so")
        fadd.export_library(path)
        f2 = tvm.runtime.load_module(path)
        c2 = tvm.nd.array(np.zeros(size, dtype="float32"), dev)
        f2(a, b, c2)
        same = np.array_equal(c.numpy(), c2.numpy())
        print(f"exported to one file ({os.path.getsize(path)} bytes), loaded back, same result: {same}")


def main() -> None:
    print("kiln demo, part 1: tensor expression -> schedule -> loop nest -> C -> shared library\n")
    _vector_add()
    print("\nkiln demo, part 2: relay.build of resnet-18 (relay.testing, random weights) -> graph executor\n")
    run_resnet_demo()


if __name__ == "__main__":
    main()
