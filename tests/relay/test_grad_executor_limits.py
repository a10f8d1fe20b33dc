"""relay.transform.gradient(mode="higher_order") results use references: the debug interpreter runs them, the
VM and the graph executor refuse them with an error that says why and what to use instead."""
import warnings

import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.error import LoweringError


def _program():
    x = relay.var("x", shape=(3,))
    return relay.Function([x], relay.sum(relay.exp(x) * x))


def test_higher_order_gradient_runs_on_the_interpreter():
    xv = np.array([0.5, -1.0, 2.0], "float32")
    out, (gx,) = relay.create_executor("debug").evaluate(relay.transform.gradient(_program()))(xv)
    np.testing.assert_allclose(out.numpy(), np.sum(np.exp(xv) * xv), rtol=1e-5)
    np.testing.assert_allclose(gx.numpy(), np.exp(xv) * (xv + 1), rtol=1e-5)


@pytest.mark.parametrize("kind,error", [("vm", NotImplementedError), ("graph", LoweringError)])
def test_compiled_executors_refuse_references_with_the_reason(kind, error):
    mod = tvm.IRModule.from_expr(relay.transform.gradient(_program()))
    with pytest.raises(error, match=r"RefCreate.*debug interpreter.*mode='first_order'"):
        relay.create_executor(kind, mod=mod, target="llvm").evaluate()(np.ones(3, "float32"))


def test_first_order_gradient_of_the_same_program_compiles():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        g = relay.transform.gradient(_program(), mode="first_order")
    xv = np.array([0.5, -1.0, 2.0], "float32")
    res = relay.create_executor("graph", mod=tvm.IRModule.from_expr(g), target="llvm").evaluate()(xv)
    np.testing.assert_allclose(res[1][0].numpy(), np.exp(xv) * (xv + 1), rtol=1e-5)
