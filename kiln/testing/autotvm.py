"""AutoTVM helpers for tests (TVM's ``tvm.testing.autotvm``): sample templates, tasks and records, and
runners/builders that measure nothing real."""
from __future__ import annotations

import time

import numpy as np

from kiln.autotvm.measure.measure import Builder, MeasureErrorNo, MeasureInput, MeasureResult, Runner
from kiln.autotvm.measure.measure_methods import BuildResult
from kiln.autotvm.task.space import InstantiationError
from kiln import autotvm, te
from kiln.target.target import Target


@autotvm.template("testing/matmul")
def matmul(N, L, M, dtype):
    """A tiled matmul template with two split knobs."""
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


@autotvm.template("testing/bad_matmul")
def bad_matmul(N, L, M, dtype):
    """Like testing/matmul, but on targets with the "bad_device" key the reduction misses one element."""
    tgt = Target.current()
    if tgt is not None and "bad_device" in tgt.keys:
        A = te.placeholder((N, L), name="A", dtype=dtype)
        B = te.placeholder((L, M), name="B", dtype=dtype)
        k = te.reduce_axis((0, L - 1), name="k")
        C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
        s = te.create_schedule(C.op)
        y, x = s[C].op.axis
        cfg = autotvm.get_config()
        cfg.define_split("tile_y", y, num_outputs=2)
        cfg.define_split("tile_x", x, num_outputs=2)
        return s, [A, B, C]
    return matmul(N, L, M, dtype)


@autotvm.template("testing/synthetic")
def synthetic(n_x, n_y, n_opts):
    """A template with no compute: virtual axes only, for tuner tests that need no compiler.

    Knobs: tile_x (split of n_x), tile_y (split of n_y), opt (define_knob of range(n_opts)). FLOPs are
    set to 1e9 so a cost of 1 s means 1 GFLOPS."""
    cfg = autotvm.get_config()
    cfg.define_split("tile_x", cfg.axis(n_x), num_outputs=2)
    cfg.define_split("tile_y", cfg.axis(n_y), num_outputs=2)
    cfg.define_knob("opt", list(range(n_opts)))
    cfg.add_flop(1e9)
    return None, []


def get_sample_task(n: int = 128):
    """(task, target): the testing/matmul template for n x n x n on llvm."""
    target = Target("llvm")
    task = autotvm.task.create("testing/matmul", args=(n, n, n, "float32"), target=target)
    return task, target


def get_synthetic_task(n_x: int = 64, n_y: int = 64, n_opts: int = 4, target: str = "llvm"):
    """(task, target) of the compiler-free testing/synthetic template."""
    tgt = Target(target)
    return autotvm.task.create("testing/synthetic", args=(n_x, n_y, n_opts), target=tgt), tgt


def get_sample_records(n: int, task=None):
    """``n`` (MeasureInput, MeasureResult) pairs for a task (default: get_sample_task()); the i-th has
    cost i + 1."""
    if task is None:
        task, target = get_sample_task()
    else:
        target = task.target
    records = []
    for i in range(n):
        inp = MeasureInput(target, task, task.config_space.get(i % len(task.config_space)))
        records.append((inp, MeasureResult((i + 1,), 0, i, time.time())))
    return records


class DummyRunner(Runner):
    """A runner returning random costs without running anything."""

    def __init__(self):
        super().__init__(1, 1)

    def run(self, measure_inputs, build_results):
        return [MeasureResult((np.random.random(),), 0, 0.2, time.time()) for _ in measure_inputs]

    def get_build_kwargs(self):
        return {}


class DummyBuilder(Builder):
    """Instantiates each config in-process (so InstantiationErrors are reported) and compiles nothing."""

    def __init__(self, n_parallel: int = 1):
        super().__init__(timeout=10, n_parallel=n_parallel)

    def build(self, measure_inputs):
        out = []
        for inp in measure_inputs:
            tic = time.time()
            try:
                tgt = Target.canon_target(inp.target)
                with tgt:
                    inp.task.instantiate(inp.config)
                if not inp.config.valid():
                    raise InstantiationError(inp.config.errors)
                out.append(BuildResult(None, (), None, time.time() - tic))
            except InstantiationError as exc:
                out.append(MeasureResult(("", exc), MeasureErrorNo.INSTANTIATION_ERROR, time.time() - tic,
                                         time.time()))
        return out


class FunctionRunner(Runner):
    """A runner whose cost for a config is ``cost_fn(config)`` (seconds; None or an exception = failed
    run). Records every config it is asked to measure in ``measured``."""

    def __init__(self, cost_fn, n_parallel: int = 1):
        super().__init__(timeout=1, n_parallel=n_parallel)
        self.cost_fn = cost_fn
        self.measured: list = []

    def run(self, measure_inputs, build_results):
        out = []
        for inp, build in zip(measure_inputs, build_results):
            self.measured.append(inp.config.index)
            if isinstance(build, MeasureResult):
                out.append(build)
                continue
            try:
                cost = self.cost_fn(inp.config)
            except Exception as exc:  # a synthetic runtime failure
                out.append(MeasureResult(("", exc), MeasureErrorNo.RUNTIME_DEVICE, 0.0, time.time()))
                continue
            if cost is None:
                out.append(MeasureResult(("", RuntimeError("failed")), MeasureErrorNo.RUNTIME_DEVICE, 0.0,
                                         time.time()))
            else:
                out.append(MeasureResult((float(cost),), MeasureErrorNo.NO_ERROR, float(cost), time.time()))
        return out
