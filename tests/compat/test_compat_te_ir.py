"""te.schedule's lowering steps, ir.save_json/load_json, AutoTVM's define_split/apply_history_best inputs."""
import numpy as np
import pytest

import kiln as tvm
from kiln import autotvm, relay, te


def test_infer_bound_schedule_ops_and_auto_inline():
    n = 16
    A = te.placeholder((n, n), name="A")
    B = te.compute((n, n), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((n,), lambda i: B[i, 0] + 1, name="C")
    D = te.compute((n, n), lambda i, j: B[i, j] + C[i], name="D")
    s = te.create_schedule(D.op)
    te.schedule.AutoInlineElemWise(s)
    assert s[B].attach_type != s[C].attach_type  # B (elementwise) inlined, C (reads B[i, 0]) kept
    xo, xi = s[D].split(D.op.axis[1], factor=5)
    s = s.normalize()
    bounds = te.schedule.InferBound(s)
    assert isinstance(next(iter(bounds)), te.schedule.IterVar)
    assert int(bounds[xi].extent) == 5 and int(bounds[xo].extent) == 4
    stmt = te.schedule.ScheduleOps(s, bounds)
    text = str(stmt)
    assert "B[" not in text and "C[" in text


def test_save_load_json_round_trips_relay_and_te():
    x = relay.var("x", shape=(3, 4))
    c = relay.const(np.arange(4, dtype="float32"))
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(x + c))))
    back = tvm.ir.load_json(tvm.ir.save_json(mod))
    assert tvm.ir.structural_equal(back, mod)
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2, name="B")
    B2 = tvm.ir.load_json(tvm.save_json(B))
    f = tvm.build(te.create_schedule(B2.op), [B2.op.input_tensors[0], B2], "llvm")
    a = tvm.nd.array(np.arange(8, dtype="float32"))
    b = tvm.nd.empty((8,), "float32")
    f(a, b)
    np.testing.assert_allclose(b.numpy(), np.arange(8) * 2)
    pf = te.schedule_to_primfunc(te.create_schedule(B.op), [A, B], name="f")
    assert tvm.ir.structural_equal(tvm.ir.load_json(tvm.ir.save_json(pf)), pf, map_free_vars=True)


def test_load_json_refuses_non_kiln_types():
    text = tvm.ir.save_json(relay.var("x", shape=(2,)))
    bad = text.replace("kiln.relay.expr:Var", "os:system")
    with pytest.raises(tvm.KilnError, match="not a kiln class"):
        tvm.ir.load_json(bad)
    with pytest.raises(tvm.KilnError):
        tvm.ir.save_json(lambda: None)


def test_define_split_accepts_none_filter_and_max_factor():
    cfg = autotvm.ConfigSpace()
    cfg.define_split("a", cfg.axis(24), num_outputs=2, filter=None, max_factor=None)
    cfg.define_split("b", cfg.axis(24), policy="power2", num_outputs=2, max_factor=8)
    cfg.define_split("c", cfg.axis(24), policy="candidate", num_outputs=3, candidate=[[-1, 2, 3], [-1, 4, 1]])
    cfg.define_split("d", cfg.axis(24), num_outputs=2, filter=lambda e: e.size[-1] >= 4)
    assert len(cfg.space_map["a"]) == 8  # the divisors of 24
    assert all(e.size[-1] <= 8 for e in cfg.space_map["b"].entities)
    assert len(cfg.space_map["c"]) == 2
    assert all(e.size[-1] >= 4 for e in cfg.space_map["d"].entities)


def test_apply_history_best_from_pairs_and_database():
    from kiln.autotvm.database import MemoryDatabase
    from kiln.autotvm.measure import MeasureInput, MeasureResult

    @autotvm.template("compat/te_ir_add")
    def add(n):
        A = te.placeholder((n,), name="A")
        B = te.compute((n,), lambda i: A[i] + 1, name="B")
        s = te.create_schedule(B.op)
        cfg = autotvm.get_config()
        cfg.define_split("t", B.op.axis[0], num_outputs=2)
        cfg["t"].apply(s, B, B.op.axis[0])
        return s, [A, B]

    task = autotvm.task.create("compat/te_ir_add", args=(12,), target="llvm")
    target = tvm.target.Target("llvm")
    pairs = [(MeasureInput(target, task, task.config_space.get(i)), MeasureResult([c], 0, 0.0, 0.0))
             for i, c in [(0, 3e-3), (3, 1e-3), (5, 2e-3)]]
    best = task.config_space.get(3)
    for records in (pairs, iter(pairs), pairs[1]):
        with autotvm.apply_history_best(records) as ctx:
            assert ctx.query(target, task.workload).to_json_dict() == best.to_json_dict()
    db = MemoryDatabase()
    for inp, res in pairs:
        db.save(inp, res)
    with autotvm.apply_history_best(db) as ctx:
        assert ctx.query(target, task.workload).to_json_dict() == best.to_json_dict()
