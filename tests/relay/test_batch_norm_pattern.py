"""nn.batch_norm is OUT_ELEMWISE_FUSABLE as in TVM v0.13 (python/tvm/relay/op/nn/_nn.py). Its result is a tuple,
so its only consumers are TupleGetItem nodes (INJECTIVE edges in TVM's fusion graph): the OUT_ELEMWISE_FUSABLE
rule (fuse into an ELEMWISE post-dominator) never applies and it is partitioned exactly as an OPAQUE op; an
elementwise consumer of output 0 fuses with the TupleGetItem (whose parameter is the whole tuple)."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.contrib import graph_executor
from kiln.ir.op import Op, OpPattern
from kiln.relay.testing import run_opt_pass
from kiln.relay.testing.temp_op_attr import TempOpAttr

rng = np.random.RandomState(3)
SHAPE = (2, 3, 5, 7)


def _prim(f):
    return f.with_attr("Primitive", tvm.tir.IntImm("int32", 1))


def _vars(prefix=""):
    c = SHAPE[1]
    return [relay.var(prefix + "x", shape=SHAPE)] + [relay.var(prefix + n, shape=(c,)) for n in "gbmv"]


def _model():
    """x*2 -> batch_norm; relu(out0) + 1; outputs 1 and 2 returned too."""
    x, g, b, m, v = _vars()
    bn = relay.nn.batch_norm(relay.multiply(x, relay.const(2.0)), g, b, m, v, epsilon=1e-3)
    y = relay.add(relay.nn.relu(bn[0]), relay.const(1.0))
    return relay.Function([x, g, b, m, v], relay.Tuple([y, bn[1], bn[2]]))


def _expected():
    ps = _vars("p")
    f_mul = _prim(relay.Function([ps[0]], relay.multiply(ps[0], relay.const(2.0))))
    qs = _vars("q")
    f_bn = _prim(relay.Function(qs, relay.nn.batch_norm(*qs, epsilon=1e-3).astuple()))
    tup = relay.var("t", relay.TupleType([relay.TensorType(SHAPE), relay.TensorType((SHAPE[1],)),
                                          relay.TensorType((SHAPE[1],))]))
    f_out = _prim(relay.Function([tup], relay.add(relay.nn.relu(relay.TupleGetItem(tup, 0)), relay.const(1.0))))
    x, g, b, m, v = _vars()
    bn = relay.Call(f_bn, [relay.Call(f_mul, [x]), g, b, m, v])
    body = relay.Tuple([relay.Call(f_out, [bn]), relay.TupleGetItem(bn, 1), relay.TupleGetItem(bn, 2)])
    return relay.Function([x, g, b, m, v], body)


def _inputs():
    c = SHAPE[1]
    return {"x": rng.randn(*SHAPE).astype("float32"), "g": rng.uniform(0.5, 2, c).astype("float32"),
            "b": rng.randn(c).astype("float32"), "m": rng.randn(c).astype("float32"),
            "v": rng.uniform(0.1, 3, c).astype("float32")}


def _numpy(d, eps=1e-3):
    def ch(a):
        return a.reshape(1, -1, 1, 1).astype("float64")
    out = (2 * d["x"] - ch(d["m"])) / np.sqrt(ch(d["v"]) + eps) * ch(d["g"]) + ch(d["b"])
    return [np.maximum(out, 0) + 1, d["m"], d["v"]]


def test_batch_norm_pattern_is_tvms():
    assert int(Op.get("nn.batch_norm").get_attr("TOpPattern")) == int(OpPattern.OUT_ELEMWISE_FUSABLE)


def test_fuse_ops_groups_as_tvm():
    got = run_opt_pass(_model(), relay.transform.FuseOps(fuse_opt_level=2))
    want = run_opt_pass(_expected(), relay.transform.InferType())
    assert tvm.ir.structural_equal(got, want)


def test_same_groups_as_opaque():
    fused = run_opt_pass(_model(), relay.transform.FuseOps(fuse_opt_level=2))
    with TempOpAttr("nn.batch_norm", "TOpPattern", OpPattern.OPAQUE):
        opaque = run_opt_pass(_model(), relay.transform.FuseOps(fuse_opt_level=2))
    assert tvm.ir.structural_equal(fused, opaque)


@pytest.mark.parametrize("opt_level,disabled", [(0, []), (3, ["SimplifyInference"]), (3, [])],
                         ids=["O0", "O3_keep_bn", "O3"])
def test_build_and_run(opt_level, disabled):
    mod = tvm.IRModule.from_expr(_model())
    with tvm.transform.PassContext(opt_level=opt_level, disabled_pass=disabled):
        lib = relay.build(mod, target="llvm")
    prims = []
    relay.analysis.post_order_visit(lib.optimized_mod["main"], lambda e: prims.append(e) if isinstance(
        e, relay.Function) and e.attrs is not None and "Primitive" in e.attrs else None)
    # SimplifyInference (opt level >= 1) rewrites output 0 only, as TVM's: batch_norm stays for outputs 1/2
    assert any("nn.batch_norm" in f.astext() for f in prims)
    tuple_param = any(isinstance(p.checked_type, relay.TupleType) for f in prims for p in f.params)
    assert tuple_param == ("SimplifyInference" in disabled)  # relu(bn.0) fused with the TupleGetItem
    d = _inputs()
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.run(**d)
    for i, want in enumerate(_numpy(d)):
        np.testing.assert_allclose(m.get_output(i).numpy(), want, rtol=1e-5, atol=1e-5)


def test_vm_opt0():
    mod = tvm.IRModule.from_expr(_model())
    with tvm.transform.PassContext(opt_level=0):
        exe = relay.vm.compile(mod, target="llvm")
    d = _inputs()
    out = tvm.runtime.vm.VirtualMachine(exe, tvm.cpu()).run(*[d[k] for k in "xgbmv"])
    for got, want in zip(out, _numpy(d)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
