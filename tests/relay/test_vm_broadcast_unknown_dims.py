"""Broadcasting between two unknown (``relay.Any``) dims on the VM: one kernel serves every size, including
the sizes where either operand's dim is 1 at run time (the kernel must not read past the smaller operand)."""
from __future__ import annotations

import numpy as np
import pytest

from kiln import relay
from relay_exec_util import vm_of


@pytest.mark.parametrize("op,ref", [(relay.add, np.add), (relay.multiply, np.multiply),
                                    (relay.subtract, np.subtract)])
def test_binary_broadcast_two_unknown_dims(op, ref):
    x = relay.var("x", shape=(relay.Any(), relay.Any(), 5), dtype="float32")
    y = relay.var("y", shape=(relay.Any(), relay.Any(), 5), dtype="float32")
    vm = vm_of(relay.Function([x, y], relay.exp(op(x, y))))
    rng = np.random.default_rng(0)
    for sx, sy in [((4, 3, 5), (1, 3, 5)), ((4, 3, 5), (4, 1, 5)), ((1, 1, 5), (6, 2, 5)),
                   ((3, 7, 5), (3, 7, 5)), ((1, 9, 5), (8, 1, 5))]:
        a, b = rng.standard_normal(sx).astype("float32"), rng.standard_normal(sy).astype("float32")
        got = vm.run(a, b).numpy()
        np.testing.assert_allclose(got, np.exp(ref(a, b)), rtol=1e-5)


def test_where_broadcast_two_unknown_dims():
    c = relay.var("c", shape=(relay.Any(), 3), dtype="bool")
    x = relay.var("x", shape=(relay.Any(), 3), dtype="float32")
    vm = vm_of(relay.Function([c, x], relay.where(c, x, relay.const(-1.0))))
    rng = np.random.default_rng(1)
    for nc, nx in [(1, 4), (4, 1), (5, 5)]:
        cond = rng.random((nc, 3)) > 0.5
        a = rng.standard_normal((nx, 3)).astype("float32")
        np.testing.assert_array_equal(vm.run(cond, a).numpy(), np.where(cond, a, np.float32(-1.0)))
