"""Measurement in worker processes: the job pool, LocalBuilder, LocalRunner, and the end-to-end matmul
tuning flow; a crashing or hanging kernel costs one failed measurement only."""
import importlib
import os
import signal
import time

import numpy as np
import pytest

import kiln
from kiln import autotvm, te
from kiln.autotvm.measure import MeasureErrorNo, MeasureInput, StatusKind, WorkerPool
from kiln.autotvm.measure.measure_methods import BuildResult
from kiln.target.target import Target
from kiln.testing.autotvm import FunctionRunner, get_synthetic_task


# -- job functions (module level: picklable for spawned workers) ------------------------------
def add(a, b):
    return a + b


def boom():
    raise ValueError("boom")


def sleep_for(t):
    time.sleep(t)
    return t


def die(code):
    os._exit(code)


def segfault():
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(10)


def slow_build(measure_input, tmp_dir, **kwargs):
    time.sleep(30)


def test_worker_pool_statuses():
    pool = WorkerPool(2, timeout=3)
    try:
        res = pool.map(add, [(1, 2), (3, 4), (5, 6)])
        assert [r.status for r in res] == [StatusKind.COMPLETE] * 3 and [r.value for r in res] == [3, 7, 11]
        res = pool.map(boom, [()])[0]
        assert res.status == StatusKind.EXCEPTION and isinstance(res.error[1], ValueError)
        assert "boom" in res.error[0]  # traceback text
        tic = time.time()
        res = pool.map(sleep_for, [(30,), (0.1,)], timeout=1)
        assert time.time() - tic < 15
        assert [r.status for r in res] == [StatusKind.TIMEOUT, StatusKind.COMPLETE]
        res = pool.map(die, [(3,)])[0]
        assert res.status == StatusKind.CRASHED and "exit code 3" in str(res.error[1])
        res = pool.map(segfault, [()])[0]
        assert res.status == StatusKind.CRASHED and "signal 11" in str(res.error[1])
        # the pool keeps working after every kind of failure
        assert pool.map(add, [(1, 1)])[0].value == 2
        res = pool.map(lambda: 1, [()])[0]  # not picklable
        assert res.status == StatusKind.EXCEPTION and "picklable" in str(res.error[1])
    finally:
        pool.close()


def _raising_template_task():
    @autotvm.template("test_measure/knob_errors")
    def tmpl():
        cfg = autotvm.get_config()
        cfg.define_knob("k", [0, 1, 2])
        cfg.add_flop(1e6)
        if cfg["k"].val == 1:
            cfg.raise_error("k == 1 is invalid")
        return None, []
    return autotvm.task.create("test_measure/knob_errors", args=(), target="llvm")


def test_local_builder_instantiate_and_timeout():
    task = get_synthetic_task(8, 8, 2)[0]
    builder = autotvm.LocalBuilder(build_func="instantiate", n_parallel=2, timeout=5)
    builder.set_task(task)
    inputs = [MeasureInput(task.target, task, task.config_space.get(i)) for i in range(3)]
    out = builder.build(inputs)
    assert all(isinstance(r, BuildResult) and r.error is None for r in out)

    builder = autotvm.LocalBuilder(build_func=slow_build, n_parallel=1, timeout=1)
    builder.set_task(task)
    out = builder.build(inputs[:1])
    assert out[0].error_no == MeasureErrorNo.BUILD_TIMEOUT
    with pytest.raises(kiln.error.KilnError):
        autotvm.LocalBuilder(build_func="ndk")


def test_local_builder_reports_instantiation_errors_from_workers():
    # the template lives in this test module: spawned workers import it to find the template
    task = _raising_template_task()
    builder = autotvm.LocalBuilder(build_func="instantiate", n_parallel=2)
    builder.set_task(task)
    out = builder.build([MeasureInput(task.target, task, task.config_space.get(i)) for i in range(3)])
    assert isinstance(out[0], BuildResult) and isinstance(out[2], BuildResult)
    assert out[1].error_no == MeasureErrorNo.INSTANTIATION_ERROR
    assert "k == 1 is invalid" in str(out[1].costs[1])


def test_measure_option_validation():
    with pytest.raises(kiln.error.KilnError):
        autotvm.measure_option(builder="remote", runner="local")
    with pytest.raises(kiln.error.KilnError):
        autotvm.measure_option(builder="local", runner=object())
    opt = autotvm.measure_option(builder="local", runner=FunctionRunner(lambda c: 1.0))
    assert isinstance(opt["builder"], autotvm.LocalBuilder)


# -- real kernels -------------------------------------------------------------------------------
@autotvm.template("test_measure/matmul")
def matmul(N, L, M, dtype):
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


@autotvm.template("test_measure/bad_kernels")
def bad_kernels(n):
    """Knob "mode": a fine kernel, one that hangs (a 2^31-step reduction), one that reads far out of
    bounds (crashes the process), and another fine one."""
    cfg = autotvm.get_config()
    cfg.define_knob("mode", ["ok", "hang", "crash", "ok"])
    mode = cfg["mode"].val
    A = te.placeholder((n,), name="A")
    if mode == "hang":
        k = te.reduce_axis((0, 2 ** 31 - 1), name="k")
        C = te.compute((n,), lambda i: te.sum(A[(i + k) % n], axis=k), name="C")
    elif mode == "crash":
        C = te.compute((n,), lambda i: A[i * 50000000] + 1.0, name="C")
    else:
        C = te.compute((n,), lambda i: A[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    return s, [A, C]


@pytest.mark.slow
def test_matmul_tutorial_flow_end_to_end(tmp_path):
    N, L, M = 32, 24, 16
    log = str(tmp_path / "matmul.log")
    task = autotvm.task.create("test_measure/matmul", args=(N, L, M, "float32"), target="llvm")
    assert task.flop == 2 * N * L * M
    assert len(task.config_space) == 6 * 5  # factors of 32 (tile_y) x factors of 16 (tile_x)
    measure_option = autotvm.measure_option(builder="local", runner=autotvm.LocalRunner(number=5, repeat=3))
    tuner = autotvm.tuner.XGBTuner(task, plan_size=4)  # itervar features
    tuner.tune(n_trial=8, measure_option=measure_option, early_stopping=20,
               callbacks=[autotvm.callback.progress_bar(8), autotvm.callback.log_to_file(log)])
    recs = list(autotvm.record.load_from_file(log))
    assert len(recs) == 8 and len({r[0].config.index for r in recs}) == 8
    assert all(r[1].error_no == 0 and all(c > 0 for c in r[1].costs) for r in recs)
    assert tuner.best_flops > 0
    best = min(recs, key=lambda r: np.mean(r[1].costs))[0].config
    with autotvm.apply_history_best(log) as ctx:
        with kiln.target.Target("llvm"):
            s, arg_bufs = matmul(N, L, M, "float32")
            func = kiln.build(s, arg_bufs)
        assert ctx.query(Target("llvm"), task.workload).index == best.index
    a = np.random.uniform(-1, 1, (N, L)).astype("float32")
    b = np.random.uniform(-1, 1, (L, M)).astype("float32")
    c = kiln.nd.empty((N, M))
    func(kiln.nd.array(a), kiln.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_crashing_and_hanging_kernels_cost_one_measurement_each():
    task = autotvm.task.create("test_measure/bad_kernels", args=(7,), target="llvm")
    task.flop = 7
    results = []
    runner = autotvm.LocalRunner(timeout=2, number=2, repeat=2, cooldown_interval=0)
    opt = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=2, timeout=60), runner=runner)
    tuner = autotvm.tuner.GridSearchTuner(task)
    tic = time.time()
    tuner.tune(n_trial=4, measure_option=opt, callbacks=[lambda t, i, r: results.extend(r)])
    assert time.time() - tic < 120
    assert [r.error_no for r in results] == [MeasureErrorNo.NO_ERROR, MeasureErrorNo.RUN_TIMEOUT,
                                             MeasureErrorNo.RUNTIME_DEVICE, MeasureErrorNo.NO_ERROR]
    assert tuner.best_config.index in (0, 3)


class _ArgInfoRunner(FunctionRunner):
    """Runs nothing: records the argument shapes of each built config (and a fixed cost)."""

    def __init__(self):
        super().__init__(lambda cfg: 1e-3)
        self.arg_shapes: list = []

    def run(self, measure_inputs, build_results):
        for res in build_results:
            assert isinstance(res, BuildResult) and res.error is None, res
            self.arg_shapes.append(sorted(tuple(shape) for shape, _ in res.arg_info))
        return super().run(measure_inputs, build_results)


def test_measure_batch_builds_configs_as_the_tuner_does():
    """A script that re-measures configs with ``create_measure_batch`` (e.g. benchmarks/tune_resnet.py's
    verification of the best configs) gets the build the tuner measured: the x86 conv template measured
    alone takes packed data and weights while tuning, so a build outside ``in_tuning`` timed the weight
    packing on every call too (1x1 convs measured 1.8x slower on Zen 5) and the verified records were not
    comparable with the search's. Compiled for AVX-512, not run."""
    from kiln.autotvm.env import GLOBAL_SCOPE
    importlib.import_module("kiln.topi.x86.conv2d")  # registers the conv2d_NCHWc.x86 template
    target = "llvm -mcpu=skylake-avx512"
    with Target(target):
        task = autotvm.task.create(
            "conv2d_NCHWc.x86", args=(("TENSOR", (1, 32, 7, 9), "float32"), ("TENSOR", (48, 32, 1, 1), "float32"),
                                      (1, 1), (0, 0, 0, 0), (1, 1), "NCHW", "NCHW", "float32"), target=target)
    idx = next(i for i in range(task.config_space.range_length) if task.config_space.is_index_valid(i))
    cfg = task.config_space.get(idx)
    ic_bn, oc_bn = cfg["tile_ic"].size[-1], cfg["tile_oc"].size[-1]
    packed = sorted([(1, 32 // ic_bn, 7, 9, ic_bn), (48 // oc_bn, 32 // ic_bn, 1, 1, ic_bn, oc_bn),
                     (1, 48 // oc_bn, 7, 9, oc_bn)])

    tuned = _ArgInfoRunner()
    option = autotvm.measure_option(builder=autotvm.LocalBuilder(timeout=60, n_parallel=1), runner=tuned)
    autotvm.tuner.GridSearchTuner(task, range_idx=(idx, idx)).tune(n_trial=1, measure_option=option)
    assert tuned.arg_shapes == [packed]

    direct = _ArgInfoRunner()
    option = autotvm.measure_option(builder=autotvm.LocalBuilder(timeout=60, n_parallel=1), runner=direct)
    measure_batch = autotvm.measure.create_measure_batch(task, option)
    try:
        results = measure_batch([MeasureInput(task.target, task, cfg)])
    finally:
        option["builder"].executor.close()
    assert results[0].error_no == 0
    assert direct.arg_shapes == tuned.arg_shapes
    assert GLOBAL_SCOPE.in_tuning is False  # restored after the build
