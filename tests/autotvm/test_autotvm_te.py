"""AutoTVM against real TE: FLOP counting, knob .apply on te stages, TOPI-style registration, loop-nest
features, XGB with itervar features, the kiln.testing.autotvm helpers."""
import numpy as np
import pytest

import kiln
from kiln import autotvm, te
from kiln.autotvm import feature
from kiln.autotvm.task.task import FlopCalculationError, compute_flop
from kiln.autotvm.task.topi_integration import TaskExtractEnv, get_workload
from kiln.target.target import Target
from kiln.testing.autotvm import (DummyBuilder, DummyRunner, FunctionRunner, get_sample_records,
                                  get_sample_task)


def test_compute_flop_counts_body_and_reductions():
    n, m, l = 7, 5, 3
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((l, m), name="B")
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((n, m), lambda i, j: C[i, j] * 2.0 + 1.0, name="D")
    E = te.compute((n, m), lambda i, j: te.max(D[i, j], 0.0), name="E")
    assert compute_flop(te.create_schedule(C.op)) == n * m * l * 2
    assert compute_flop(te.create_schedule(E.op)) == n * m * l * 2 + n * m * 2 + n * m
    S = te.compute((n,), lambda i: kiln.tir.Select(A[i, 0] > 0.0, A[i, 1] * A[i, 2], A[i, 0]), name="S")
    assert compute_flop(te.create_schedule(S.op)) == n * 2  # compare + the costlier branch
    copy = te.compute((n, l), lambda i, j: A[i, j], name="copy")
    with pytest.raises(FlopCalculationError, match="add_flop"):
        compute_flop(te.create_schedule(copy.op))


def test_split_entity_apply_on_te_stage_matches_numpy():
    task, target = get_sample_task(16)
    assert task.flop == 2 * 16 ** 3
    for idx in (0, 9, len(task.config_space) - 1):
        cfg = task.config_space.get(idx)
        with target:
            s, args = task.instantiate(cfg)
        text = str(kiln.lower(s, args, simple_mode=True))
        ty, tx = cfg["tile_y"].size[-1], cfg["tile_x"].size[-1]
        if 1 < ty < 16:
            assert f"T.grid({16 // ty}" in text or f"range({16 // ty})" in text or f"in T.serial({16 // ty})" in text
        f = kiln.build(s, args, target="llvm")
        a = np.random.rand(16, 16).astype("float32")
        b = np.random.rand(16, 16).astype("float32")
        c = kiln.nd.empty((16, 16))
        f(kiln.nd.array(a), kiln.nd.array(b), c)
        np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5)


def test_reorder_and_annotate_apply_on_te_stage():
    @autotvm.template("test_te/annotated")
    def annotated(n):
        A = te.placeholder((n, n), name="A")
        B = te.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
        s = te.create_schedule(B.op)
        i, j = s[B].op.axis
        cfg = autotvm.get_config()
        cfg.define_split("tj", j, num_outputs=2, filter=lambda e: e.size[-1] in (4, 8))
        jo, ji = cfg["tj"].apply(s, B, j)
        cfg.define_reorder("re", [i, jo], "all")
        i2, jo2 = cfg["re"].apply(s, B, [i, jo])
        cfg.define_annotate("ann", [ji], "try_vec")
        cfg["ann"].apply(s, B, [ji], axis_lens=[cfg["tj"].size[-1]], vec_size=[4, 8], cfg=cfg)
        return s, [A, B]

    task = autotvm.task.create("test_te/annotated", args=(16,), target="llvm")
    assert len(task.config_space) == 2 * 2 * 2
    for idx in range(len(task.config_space)):
        cfg = task.config_space.get(idx)
        with Target("llvm"):
            s, args = task.instantiate(cfg)
        assert cfg.valid()
        f = kiln.build(s, args, target="llvm")
        a = np.random.rand(16, 16).astype("float32")
        out = kiln.nd.empty((16, 16))
        f(kiln.nd.array(a), out)
        np.testing.assert_allclose(out.numpy(), a * 2)


@autotvm.register_topi_compute("test_te/scale.generic")
def scale_compute(cfg, A, factor):
    cfg.define_split("tile", A.shape[0], num_outputs=2)
    return te.compute(A.shape, lambda i: A[i] * factor, name="scaled")


@autotvm.register_topi_schedule("test_te/scale.generic")
def scale_schedule(cfg, outs):
    s = te.create_schedule([x.op for x in outs])
    out = outs[0]
    cfg["tile"].apply(s, out, s[out].op.axis[0])
    return s


def test_topi_registration_tasks_and_workload():
    A = te.placeholder((24,), name="A")
    with Target("llvm"):
        out = scale_compute(A, 3.0)
    wkl = ("test_te/scale.generic", ("TENSOR", (24,), "float32"), 3.0)
    assert out.op.attrs["workload"] == wkl
    assert get_workload(out) == wkl and get_workload([out], "other") is None

    task = autotvm.task.create("test_te/scale.generic", args=(A, 3.0), target="llvm")
    assert task.args == (("TENSOR", (24,), "float32"), 3.0)
    assert len(task.config_space) == 8 and task.flop == 24
    cfg = task.config_space.get(3)
    with Target("llvm"):
        s, args = task.instantiate(cfg)
    assert [a.op.name for a in args] == ["scaled", "placeholder"]
    f = kiln.build(s, args, target="llvm")
    a = np.random.rand(24).astype("float32")
    o = kiln.nd.empty((24,))
    f(o, kiln.nd.array(a))
    np.testing.assert_allclose(o.numpy(), a * 3.0, rtol=1e-6)

    # tracing records each distinct call once
    env = TaskExtractEnv.get()
    env.reset()
    with env:
        with Target("llvm"):
            scale_compute(A, 3.0)
            scale_compute(A, 3.0)
            scale_compute(te.placeholder((8,), name="B"), 2.0)
    assert [t[0] for t in env.get_tasks()] == ["test_te/scale.generic"] * 2
    with pytest.raises(kiln.error.KilnError, match="register_topi_compute"):
        scale_schedule([te.compute((3,), lambda i: A[i], name="plain")])


def test_itervar_and_curve_features():
    task, target = get_sample_task(32)
    cfg = task.config_space.get(10)
    with target:
        s, args = task.instantiate(cfg)
    rows = feature.get_itervar_feature(s, args)
    names = [r[0][1] for r in rows]
    assert "k" in names and any(n.startswith("i") for n in names)
    k_row = rows[names.index("k")]
    attrs = dict((p[0], p[1:]) for p in k_row[1:])
    # along k, A (row-major N x L) moves by 1 and B (L x M) by M = 32; C is reused across k
    assert attrs["A"][0] == 1 and attrs["B"][0] == 32 and attrs["C"][0] == 0
    assert attrs["_attr_"][0] == 32  # extent of k
    flat = feature.get_itervar_feature_flatten(s, args, take_log=True)
    assert flat.dtype == np.float32 and flat.shape == (len(feature.get_flatten_name(
        feature.get_itervar_feature(s, args))),)
    curve = feature.get_buffer_curve_sample_flatten(s, args, sample_n=10)
    assert curve.shape[0] % 10 == 0 and np.all(np.isfinite(curve))
    # different tilings give different features
    with target:
        s2, args2 = task.instantiate(task.config_space.get(30))
    assert not np.array_equal(flat, feature.get_itervar_feature_flatten(s2, args2, take_log=True))


@pytest.mark.parametrize("fea", ["itervar", "curve"])
def test_xgb_tuner_loop_features(fea):
    np.random.seed(1)
    task, _ = get_sample_task(32)

    def cost(cfg):  # a smooth synthetic cost over the tiling: best at tile_y=4, tile_x=16
        return 1.0 + abs(np.log2(cfg["tile_y"].size[-1]) - 2) + abs(np.log2(cfg["tile_x"].size[-1]) - 4)

    runner = FunctionRunner(cost)
    tuner = autotvm.tuner.XGBTuner(task, plan_size=8, feature_type=fea)
    tuner.tune(n_trial=30, measure_option=autotvm.measure_option(builder=DummyBuilder(4), runner=runner))
    assert len(runner.measured) == len(set(runner.measured)) == 30
    assert cost(tuner.best_config) <= 2.0


def test_sample_helpers():
    task, target = get_sample_task()
    assert task.name == "testing/matmul" and task.args == (128, 128, 128, "float32")
    recs = get_sample_records(5)
    assert [r[1].costs for r in recs] == [(i + 1,) for i in range(5)]
    res = DummyRunner().run([r[0] for r in recs], [None] * 5)
    assert all(0 <= r.costs[0] <= 1 and r.error_no == 0 for r in res)
    tsk = autotvm.task.create("testing/bad_matmul", args=(8, 8, 8, "float32"), target="llvm -keys=cpu,bad_device")
    assert len(tsk.config_space) == 16
    with Target("llvm -keys=cpu,bad_device"):
        s, args = tsk.instantiate(tsk.config_space.get(0))
    assert args[0].shape[0].value == 8
