"""A tuned AutoTVM record of an int kernel's plain workload (the task extract_from_program finds: NCHW conv,
unpacked dense / batch_matmul) also serves the packed workload AlterOpLayout turns the call into, as for the fp32
templates: the int16 dense (NC16n2c weight), the int16 batch_matmul with a constant y, the uint8 x int8 conv
(NCHW4c / OIHW16o4i) and depthwise conv (NCHW16c). Results checked against numpy with the tuned build."""
import time

import numpy as np
import pytest

import kiln
from kiln import autotvm, relay
from kiln.autotvm.measure import MeasureInput, MeasureResult
from kiln.contrib import graph_executor

TARGET = "llvm -mcpu=core-avx2"  # no VNNI; every x86 CPU kiln supports runs AVX2 code
RNG = np.random.default_rng(11)


def _dense():
    x = relay.var("x", shape=(7, 38), dtype="int16")
    w = RNG.integers(-255, 256, (20, 38)).astype("int16")
    f = relay.Function([x], relay.nn.dense(x, relay.const(w), out_dtype="int32"))
    xv = RNG.integers(-255, 256, (7, 38)).astype("int16")
    return f, xv, xv.astype(np.int64) @ w.astype(np.int64).T, "nn.dense", "nn.contrib_dense_pack"


def _batch_matmul():
    x = relay.var("x", shape=(2, 9, 21), dtype="int16")
    y = RNG.integers(-255, 256, (2, 18, 21)).astype("int16")
    f = relay.Function([x], relay.nn.batch_matmul(x, relay.const(y), out_dtype="int32"))
    xv = RNG.integers(-255, 256, (2, 9, 21)).astype("int16")
    return (f, xv, np.einsum("bmk,bnk->bmn", xv.astype(np.int64), y.astype(np.int64)), "nn.batch_matmul",
            "nn.contrib_batch_matmul_pack")


def _conv(groups):
    c = 16 if groups > 1 else 8
    o = 16
    x = relay.var("x", shape=(1, c, 9, 11), dtype="uint8")
    w = RNG.integers(-63, 64, (o, c // groups, 3, 3)).astype("int8")
    f = relay.Function([x], relay.nn.conv2d(x, relay.const(w), padding=(1, 1), channels=o, kernel_size=(3, 3),
                                            groups=groups, out_dtype="int32"))
    xv = RNG.integers(0, 256, (1, c, 9, 11)).astype("uint8")
    xp = np.pad(xv.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, o, 9, 11), np.int64)
    for oc in range(o):
        g = oc // (o // groups)
        cin = range(g * (c // groups), (g + 1) * (c // groups))
        for ki, ci in enumerate(cin):
            for dy in range(3):
                for dx in range(3):
                    want[0, oc] += xp[0, ci, dy:dy + 9, dx:dx + 11] * int(w[oc, ki, dy, dx])
    anchor = "nn.contrib_depthwise_conv2d_NCHWc" if groups > 1 else "nn.contrib_conv2d_NCHWc"
    return f, xv, want, "nn.conv2d", anchor


CASES = {"dense_int16.x86": _dense, "batch_matmul_int16.x86": _batch_matmul,
         "conv2d_NCHWc_int8.x86": lambda: _conv(1), "depthwise_conv2d_NCHWc_int8.x86": lambda: _conv(16)}


def _non_default(task):
    """A config of the task's space other than its fallback (the last valid index: a different tile)."""
    space = task.config_space
    for i in reversed(range(space.range_length)):
        if space.is_index_valid(i):
            return space.get(i)
    raise AssertionError(f"{task.name}: empty space")


@pytest.mark.parametrize("task_name", sorted(CASES))
def test_tuned_int_config_reaches_the_packed_kernel(task_name, tmp_path):
    func, xv, want, op, anchor = CASES[task_name]()
    mod = kiln.IRModule.from_expr(func)
    with kiln.transform.PassContext(opt_level=3):
        tasks = autotvm.task.extract_from_program(mod["main"], target=TARGET, params={}, ops=(relay.op.get(op),))
    tasks = [t for t in tasks if t.name == task_name]
    assert len(tasks) == 1, [t.name for t in tasks]
    cfg = _non_default(tasks[0])
    log = tmp_path / "tuned.log"
    log.write_text(autotvm.record.encode(MeasureInput(tasks[0].target, tasks[0], cfg),
                                         MeasureResult((1e-6,), 0, 0.1, time.time())) + "\n")
    target = kiln.target.Target(TARGET)
    ctx = autotvm.apply_history_best(str(log))
    with kiln.transform.PassContext(opt_level=3), target, ctx:
        lib = relay.build(mod, target=target)
    packed = [c for c in lib.lowered if c.anchor_op == anchor]
    assert len(packed) == 1, [c.anchor_op for c in lib.lowered]
    wkl = autotvm.task.get_workload(packed[0].outputs)
    assert wkl is not None and wkl != tasks[0].workload  # the packed workload, not the extracted one
    with target, ctx:
        got = autotvm.task.DispatchContext.current.query(target, wkl)
    assert not got.is_fallback and got.index == cfg.index, (got, cfg)
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input("x", xv)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), want.astype(np.int32))
