"""Tutorial flow: "Writing Tunable Templates and Using the Auto-tuner" (tune_simple_template).

A matmul template with define_knob (basic) and define_split (advanced) knobs, task creation and its
config space, a short tuning run with LocalBuilder/LocalRunner logging to a file, then
apply_history_best + tvm.build with the best config, checked against numpy. The module under test
lives in pytest (so spawned measure workers never re-run a script); the run-as-a-script form is
covered in the QA report.
"""
import numpy as np
import pytest

import kiln as tvm
import kiln.testing
from kiln import autotvm, te
from kiln.autotvm import record
from kiln.contrib import utils

N, L, M = 32, 48, 40


def _matmul_basic(N, L, M, dtype):
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    k = s[C].op.reduce_axis[0]
    cfg = autotvm.get_config()
    cfg.define_knob("tile_y", [1, 2, 4, 8, 16])
    cfg.define_knob("tile_x", [1, 2, 4, 8, 16])
    yo, yi = s[C].split(y, cfg["tile_y"].val)
    xo, xi = s[C].split(x, cfg["tile_x"].val)
    s[C].reorder(yo, xo, k, yi, xi)
    return s, [A, B, C]


def _matmul(N, L, M, dtype):
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    k = s[C].op.reduce_axis[0]
    cfg = autotvm.get_config()
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, k, yi, xi)
    return s, [A, B, C]


matmul_v1 = autotvm.template("tutorial_test/matmul_v1")(_matmul_basic)
matmul = autotvm.template("tutorial_test/matmul")(_matmul)


def _check(func):
    rng = np.random.default_rng(0)
    a_np = rng.uniform(size=(N, L)).astype(np.float32)
    b_np = rng.uniform(size=(L, M)).astype(np.float32)
    c_tvm = tvm.nd.empty((N, M))
    func(tvm.nd.array(a_np), tvm.nd.array(b_np), c_tvm)
    tvm.testing.assert_allclose(c_tvm.numpy(), a_np.dot(b_np), rtol=1e-4)


def test_config_spaces():
    task = autotvm.task.create("tutorial_test/matmul_v1", args=(N, L, M, "float32"), target="llvm")
    assert len(task.config_space) == 25
    task = autotvm.task.create("tutorial_test/matmul", args=(N, L, M, "float32"), target="llvm")
    # factors of 32 (6) x factors of 40 (8)
    assert len(task.config_space) == 6 * 8
    assert "tile_y" in str(task.config_space) and "tile_x" in str(task.config_space)
    # any config of the space builds and computes the matmul
    for index in (0, len(task.config_space) - 1, 17):
        cfg = task.config_space.get(index)
        with tvm.target.Target("llvm"):
            s, args = task.instantiate(cfg)
        _check(tvm.build(s, args, "llvm"))


def test_fallback_without_log_builds():
    with tvm.target.Target("llvm"):
        s, arg_bufs = matmul(N, L, M, "float32")
        func = tvm.build(s, arg_bufs)
    _check(func)


@pytest.mark.slow
@pytest.mark.parametrize("tuner_cls", [autotvm.tuner.RandomTuner, autotvm.tuner.GridSearchTuner])
def test_tune_and_apply_history_best(tuner_cls):
    task = autotvm.task.create("tutorial_test/matmul", args=(N, L, M, "float32"), target="llvm")
    measure_option = autotvm.measure_option(builder="local", runner=autotvm.LocalRunner(number=3))
    tmp = utils.tempdir()
    log_file = tmp.relpath("matmul.log")
    tuner = tuner_cls(task)
    tuner.tune(n_trial=4, measure_option=measure_option, callbacks=[autotvm.callback.log_to_file(log_file)])

    lines = [line for line in open(log_file) if line.strip()]
    assert len(lines) == 4
    records = list(record.load_from_file(log_file))
    assert all(res.error_no == 0 for _, res in records)
    best_inp, best_res = min(records, key=lambda r: np.mean(r[1].costs))
    assert tuner.best_config is not None and tuner.best_flops > 0

    with autotvm.apply_history_best(log_file) as dispatch:
        with tvm.target.Target("llvm"):
            s, arg_bufs = matmul(N, L, M, "float32")
            func = tvm.build(s, arg_bufs)
        chosen = dispatch.query(tvm.target.Target("llvm"), task.workload)
    assert chosen.index == best_inp.config.index
    _check(func)

    best_file = tmp.relpath("best.log")
    record.pick_best(log_file, best_file)
    assert len([line for line in open(best_file) if line.strip()]) == 1
