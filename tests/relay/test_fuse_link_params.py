"""FuseOps with ``relay.FuseOps.link_params``: constants stay inside the fused functions (TVM's rule) instead of
becoming their parameters; the graph is compared with the one TVM builds and the built module is run."""
import numpy as np

import kiln as tvm
from kiln import relay


def _program(c):
    x = relay.var("x", shape=(3, 5))
    return relay.Function([x], relay.exp(relay.add(x, relay.const(c))))


def _fused(c, linked):
    x = relay.var("x", shape=(3, 5))
    p0 = relay.var("p0", shape=(3, 5))
    if linked:
        body = relay.exp(relay.add(p0, relay.const(c)))
        inner = relay.Function([p0], body).with_attr("Primitive", 1)
        call = relay.Call(inner, [x])
    else:
        p1 = relay.var("p1", shape=(3, 5))
        inner = relay.Function([p0, p1], relay.exp(relay.add(p0, p1))).with_attr("Primitive", 1)
        call = relay.Call(inner, [x, relay.const(c)])
    return tvm.IRModule.from_expr(relay.Function([x], call))


def _fuse(mod, **config):
    with tvm.transform.PassContext(opt_level=2, config=config):
        return relay.transform.FuseOps()(relay.transform.InferType()(mod))


def test_link_params_keeps_constants_in_fused_functions():
    c = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
    mod = tvm.IRModule.from_expr(_program(c))
    plain = _fuse(mod)
    linked = _fuse(mod, **{"relay.FuseOps.link_params": True})
    assert tvm.ir.structural_equal(plain["main"], relay.transform.InferType()(_fused(c, False))["main"])
    assert tvm.ir.structural_equal(linked["main"], relay.transform.InferType()(_fused(c, True))["main"])
    assert not tvm.ir.structural_equal(plain["main"], linked["main"])


def test_link_params_build_runs():
    from kiln.contrib import graph_executor
    rng = np.random.default_rng(1)
    c = rng.standard_normal((3, 5)).astype("float32")
    x = rng.standard_normal((3, 5)).astype("float32")
    with tvm.transform.PassContext(opt_level=3, config={"relay.FuseOps.link_params": True}):
        lib = relay.build(tvm.IRModule.from_expr(_program(c)), target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("x", x)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), np.exp(x + c), rtol=1e-5, atol=1e-6)
