"""Regressions for miscompilations by the system C compiler that kiln works around.

GCC 12 at -O3 -march=<AVX2 machine> turned `out = a > 0 ? b : 0` into masked vector loads with a
wrong mask (kiln.target.compiler.GCC_WORKAROUND_CFLAGS). Each case runs on odd shapes against numpy.
"""
import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.contrib import graph_executor


@pytest.mark.parametrize("shape", [(1, 37, 5, 7), (3, 129)])
def test_where_of_greater_matches_numpy(shape):
    a = relay.var("a", shape=shape)
    y = relay.where(relay.greater(a, relay.const(0.0)), a, relay.zeros_like(a))
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(kiln.IRModule.from_expr(relay.Function([a], y)), target="llvm")
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    for seed in range(3):
        x = np.random.RandomState(seed).randn(*shape).astype("float32")
        m.set_input("a", x)
        m.run()
        np.testing.assert_array_equal(m.get_output(0).numpy(), np.where(x > 0, x, 0))
