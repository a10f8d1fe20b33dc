"""The x86 NCHWc conv2d with a batch known only at run time (a VM kernel): it builds with the x86
schedule (before, its FLOP count raised TypeError on the symbolic batch and the VM silently fell back to
the generic, unvectorized conv: 2x slower on dynamic resnet18) and matches numpy at several batches."""
import numpy as np

import kiln as tvm
from kiln import te
from kiln.autotvm.task.space import FallbackConfigEntity
from kiln.topi import x86
from kiln.topi.testing import conv2d_nchw_python


def test_add_flop_accepts_a_symbolic_count():
    cfg = FallbackConfigEntity()
    n = te.var("n")
    cfg.add_flop(2 * n * 64)  # unknown until run time: not counted
    cfg.add_flop(10)
    assert cfg.flop == 10


def test_x86_conv2d_nchw_with_symbolic_batch_matches_numpy():
    n = te.var("n")
    data = te.placeholder((n, 5, 9, 11), name="data")
    kern = te.placeholder((7, 5, 3, 3), name="kern")
    with tvm.target.Target("llvm"):
        out = x86.conv2d_nchw(data, kern, (1, 1), (1, 1), (1, 1), "float32")
        s = x86.schedule_conv2d_nchw([out])
        f = tvm.build(s, [data, kern, out], "llvm")
    rng = np.random.default_rng(0)
    w = rng.standard_normal((7, 5, 3, 3)).astype("float32")
    for b in (1, 3):
        a = rng.standard_normal((b, 5, 9, 11)).astype("float32")
        o = tvm.nd.empty((b, 7, 9, 11))
        f(tvm.nd.array(a), tvm.nd.array(w), o)
        np.testing.assert_allclose(o.numpy(), conv2d_nchw_python(a, w, 1, 1), rtol=1e-4, atol=1e-4)
