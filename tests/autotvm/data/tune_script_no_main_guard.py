# Written like TVM's tutorial: no __main__ guard.
import numpy as np
import kiln as tvm
from kiln import te, autotvm

@autotvm.template("tutorial/matmul_noguard")
def matmul(N, L, M, dtype):
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    cfg = autotvm.get_config()
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, k, yi, xi)
    return s, [A, B, C]

N, L, M = 32, 32, 32
task = autotvm.task.create("tutorial/matmul_noguard", args=(N, L, M, "float32"), target="llvm")
measure_option = autotvm.measure_option(builder="local", runner=autotvm.LocalRunner(number=2))
tuner = autotvm.tuner.RandomTuner(task)
tuner.tune(n_trial=4, measure_option=measure_option, callbacks=[autotvm.callback.log_to_file("noguard.log")])
with autotvm.apply_history_best("noguard.log"):
    with tvm.target.Target("llvm"):
        s, bufs = matmul(N, L, M, "float32")
        f = tvm.build(s, bufs)
a = np.random.rand(N, L).astype("float32"); b = np.random.rand(L, M).astype("float32")
c = tvm.nd.array(np.zeros((N, M), "float32")); f(tvm.nd.array(a), tvm.nd.array(b), c)
np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4)
print("TUNED-OK", sum(1 for _ in open("noguard.log")))
