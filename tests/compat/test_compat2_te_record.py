"""PassContext config te.keep_schedule_record: Schedule.schedule_record / primitive_record."""
import numpy as np

import kiln as tvm
from kiln import te


def _chain():
    A = te.placeholder((16, 16), name="A")
    B = te.compute((16, 16), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((16, 16), lambda i, j: B[i, j] + 1, name="C")
    return A, B, C


def test_schedule_record_snapshots_each_primitive():
    A, B, C = _chain()
    with tvm.transform.PassContext(config={"te.keep_schedule_record": True}):
        s = te.create_schedule(C.op)
    assert s.keep_schedule_record
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 4)
    s[B].compute_at(s[C], yo)
    s[C].vectorize(yi)
    s[C].pragma(xo, "unroll")  # calls unroll inside: recorded once, as pragma
    CC = s.cache_read(A, "global", [B])
    assert s.primitive_record == ["vanilla", "tile", "compute_at", "vectorize", "pragma", "cache_read"]
    assert len(s.schedule_record) == len(s.primitive_record)
    # snapshots are independent schedules showing the state after each step
    assert [len(r[C].leaf_iter_vars) for r in s.schedule_record] == [2, 4, 4, 4, 4, 4]
    assert s.schedule_record[1][B].attach_type != s.schedule_record[2][B].attach_type
    assert CC.op not in s.schedule_record[4] and CC.op in s.schedule_record[5]
    assert all(r.schedule_record == [] for r in s.schedule_record)
    # recording does not change what the schedule computes
    f = tvm.build(s, [A, C], "llvm")
    a = np.random.RandomState(0).rand(16, 16).astype("float32")
    c = tvm.nd.array(np.zeros((16, 16), "float32"))
    f(tvm.nd.array(a), c)
    np.testing.assert_allclose(c.numpy(), a * 2 + 1, rtol=1e-6)


def test_failed_primitive_is_not_recorded_and_default_is_off():
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[0], 4)
    assert not s.keep_schedule_record and s.schedule_record == [] and s.primitive_record == []
    with tvm.transform.PassContext(config={"te.keep_schedule_record": True}):
        s = te.create_schedule(C.op)
    try:
        s[C].split(B.op.axis[0], 4)  # not an axis of C
    except tvm.error.ScheduleError:
        pass
    assert s.primitive_record == ["vanilla"]


def test_relay_lowering_attaches_the_schedule_with_its_record():
    """As TVM's TE compiler: under te.keep_schedule_record a lowered kernel's PrimFunc carries attrs["schedule"],
    whose schedule_record shows the strategy's steps; without the config it carries none. The build is unchanged."""
    from kiln import relay
    from kiln.contrib import graph_executor
    from kiln.relay.backend.te_compiler import lower_primitive
    x, w = relay.var("x", shape=(5, 37)), relay.var("w", shape=(16, 37))
    prim = relay.Function([x, w], relay.nn.relu(relay.nn.dense(x, w)))
    prim = relay.transform.InferType()(tvm.IRModule.from_expr(prim))["main"].with_attr("Primitive", 1)
    with tvm.transform.PassContext(opt_level=3, config={"te.keep_schedule_record": True}):
        cached = lower_primitive(prim, "llvm")
    sch = cached.prim_func.attrs["schedule"]
    assert isinstance(sch, te.Schedule) and sch.primitive_record[0] == "vanilla" and len(sch.primitive_record) > 1
    assert len(sch.schedule_record) == len(sch.primitive_record)
    assert "schedule" not in (lower_primitive(prim, "llvm").prim_func.attrs or {})
    mod = tvm.IRModule.from_expr(relay.Function([x, w], relay.nn.relu(relay.nn.dense(x, w))))
    with tvm.transform.PassContext(opt_level=3, config={"te.keep_schedule_record": True}):
        lib = relay.build(mod, "llvm")
    g = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    rng = np.random.RandomState(1)
    xv, wv = rng.randn(5, 37).astype("float32"), rng.randn(16, 37).astype("float32")
    g.set_input("x", xv)
    g.set_input("w", wv)
    g.run()
    np.testing.assert_allclose(g.get_output(0).numpy(), np.maximum(xv @ wv.T, 0), rtol=1e-5, atol=1e-5)
