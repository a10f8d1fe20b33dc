"""Tuning a model end to end: tasks extracted from a Relay program are the NCHW conv2d workloads, a tuned
record (with non-default channel blocks and register row) is honoured by relay.build through the AlterOpLayout
hook (which forwards the config to the packed NCHWc workload), and a short real tuning run builds and runs."""
import json
import re
import time

import numpy as np

import kiln
from kiln import autotvm, relay
from kiln.autotvm.measure import MeasureInput, MeasureResult
from kiln.runtime.graph_executor import GraphModule

# the records and layouts below are AVX2 ones (8-lane vectors, 16-channel blocks); every x86 CPU kiln supports
# runs AVX2 code, so the numerical checks run on any host
TARGET = "llvm -mcpu=core-avx2"


def tiny_net(seed=0):
    """conv(8->16, 3x3) -> relu -> conv(16->16, 1x1) on an odd 10x13 image, and its reference output."""
    rng = np.random.default_rng(seed)
    x = relay.var("data", shape=(1, 8, 10, 13))
    w1 = relay.const(rng.standard_normal((16, 8, 3, 3)).astype("float32") * 0.3)
    w2 = relay.const(rng.standard_normal((16, 16, 1, 1)).astype("float32") * 0.3)
    y = relay.nn.relu(relay.nn.conv2d(x, w1, padding=(1, 1), channels=16, kernel_size=(3, 3)))
    y = relay.nn.conv2d(y, w2, channels=16, kernel_size=(1, 1))
    mod = kiln.IRModule.from_expr(relay.Function([x], y))
    xv = rng.standard_normal((1, 8, 10, 13)).astype("float32")
    ref = relay.create_executor("debug", mod=mod).evaluate()(xv).numpy()
    return mod, xv, ref


def extract(mod, template="conv2d_NCHWc.x86"):
    """The conv2d tasks of the direct template (None: all), ordered by input channels (the first conv first)."""
    tasks = autotvm.task.extract_from_program(mod["main"], target=TARGET, params={},
                                              ops=(relay.op.get("nn.conv2d"),))
    return sorted((t for t in tasks if template is None or t.name == template), key=lambda t: t.args[0][1][1])


def build(mod, log=None):
    target = kiln.target.Target(TARGET)
    with kiln.transform.PassContext(opt_level=3), target:
        if log is None:
            return relay.build(mod, target=target), None
        ctx = autotvm.apply_history_best(log)
        with ctx:
            lib = relay.build(mod, target=target)
        return lib, ctx


def run(lib, xv):
    m = GraphModule(lib["default"](kiln.cpu(0)))
    m.set_input("data", xv)
    m.run()
    return m.get_output(0).numpy()


def conv_kernels(lib):
    return [c for c in lib.lowered if c.anchor_op == "nn.contrib_conv2d_NCHWc"]


def graph_shapes(lib):
    g = json.loads(lib.get_graph_json())
    return [tuple(s) for s in g["attrs"]["shape"][1]]


def pick(space, oc_bn, reg_n, unroll_kw, order=None):
    for i in range(space.range_length):
        if not space.is_index_valid(i):
            continue
        e = space.get(i)
        if (e["tile_oc"].size[-1], e["tile_ow"].size[-1], bool(e["unroll_kw"].val)) == (oc_bn, reg_n, unroll_kw) \
                and (order is None or e["order"].val == order):
            return e
    raise AssertionError(f"no config ({oc_bn}, {reg_n}, {unroll_kw}, {order}) in the space")


def test_extracted_tasks_are_the_nchw_workloads():
    mod, _, _ = tiny_net()
    # the 3x3 stride-1 conv is also a Winograd task (relay.build takes it only where its record is faster)
    assert sorted((t.name, t.args[0][1][1]) for t in extract(mod, None)) == [
        ("conv2d_NCHWc.x86", 8), ("conv2d_NCHWc.x86", 16), ("conv2d_NCHWc_winograd.x86", 8)]
    tasks = extract(mod)
    assert [t.name for t in tasks] == ["conv2d_NCHWc.x86"] * 2
    assert sorted(t.args[0][1] for t in tasks) == [(1, 8, 10, 13), (1, 16, 10, 13)]
    assert all(len(t.args[0][1]) == 4 and len(t.args[1][1]) == 4 for t in tasks)  # NCHW / OIHW, not packed


def test_tuned_record_with_non_default_config_is_honoured(tmp_path):
    mod, xv, ref = tiny_net()
    tasks = extract(mod)
    task = tasks[0]
    # fallback: row of 5 (5 + 5 + 3), channel chunks outside the rows, kernel row not unrolled; the record asks for
    # 2 x 3 pixel tiles, rows outside the chunks and the kernel row unrolled
    cfg = pick(task.config_space, oc_bn=16, reg_n=3, unroll_kw=True, order=1)
    log = tmp_path / "tuned.log"
    with open(log, "w") as f:
        res = MeasureResult((1e-5,), 0, 0.1, time.time())
        f.write(autotvm.record.encode(MeasureInput(task.target, task, cfg), res) + "\n")
    untuned, _ = build(mod)
    tuned, ctx = build(mod, str(log))
    np.testing.assert_allclose(run(tuned, xv), ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(run(untuned, xv), ref, rtol=1e-4, atol=1e-4)
    # the graph carries the blocks of the config (the channel_block rule: NCHW8c in, NCHW16c out)
    shapes = graph_shapes(tuned)
    assert (1, 1, 10, 13, 8) in shapes and (1, 1, 10, 13, 16) in shapes
    # the packed workload of the first conv answers the tuned config (forwarded by the alter hook) ...
    first = [c for c in conv_kernels(tuned) if tuple(int(d) for d in c.inputs[0].shape) == (1, 1, 10, 13, 8)]
    assert len(first) == 1
    wkl = autotvm.task.get_workload(first[0].outputs)
    assert wkl[1][1] == (1, 1, 10, 13, 8) and wkl[2][1] == (1, 1, 3, 3, 8, 16)
    with kiln.target.Target(TARGET) as target:
        with ctx:
            got = autotvm.task.DispatchContext.current.query(target, wkl)
    assert not got.is_fallback and got["order"].val == 1 and bool(got["unroll_kw"].val)
    # ... and the kernel's schedule reflects it: rows outside the channel chunks, the kernel row unrolled
    text = str(first[0].prim_func)
    untuned_text = str(conv_kernels(untuned)[0].prim_func)
    assert "T.unroll(3)" in text and "T.unroll(3)" not in untuned_text
    assert "i0_i2_outer_fused_i1_outer_fused" in text and "i0_i2_outer_fused_i1_outer_fused" not in untuned_text


def test_tuned_dense_block_is_honoured(tmp_path):
    rng = np.random.default_rng(3)
    x = relay.var("data", shape=(3, 24))
    w = relay.const(rng.standard_normal((48, 24)).astype("float32"))
    mod = kiln.IRModule.from_expr(relay.Function([x], relay.nn.relu(relay.nn.dense(x, w))))
    xv = rng.standard_normal((3, 24)).astype("float32")
    tasks = autotvm.task.extract_from_program(mod["main"], target=TARGET, params={}, ops=(relay.op.get("nn.dense"),))
    assert [t.name for t in tasks] == ["dense_pack.x86"]
    space = tasks[0].config_space
    cfg = next(space.get(i) for i in range(len(space)) if space.get(i)["tile_x"].size[-1] == 8)
    log = tmp_path / "dense.log"
    with open(log, "w") as f:
        f.write(autotvm.record.encode(MeasureInput(tasks[0].target, tasks[0], cfg),
                                      MeasureResult((1e-6,), 0, 0.1, time.time())) + "\n")
    lib, _ = build(mod, str(log))
    params = [tuple(p.shape) for p in lib.get_params().values()]
    assert (6, 24, 8) in params and (3, 24, 16) not in params  # weight packed NC8n, not the default NC16n
    np.testing.assert_allclose(run(lib, xv), np.maximum(xv @ w.data.numpy().T, 0), rtol=1e-4, atol=1e-4)


def test_short_tuning_run_builds_with_the_log(tmp_path):
    """Tune both conv tasks for a few real measurements, then build with the log."""
    mod, xv, ref = tiny_net(seed=1)
    tasks = extract(mod)
    log = str(tmp_path / "tune.log")
    measure_option = autotvm.measure_option(builder=autotvm.LocalBuilder(timeout=60),
                                            runner=autotvm.LocalRunner(number=2, repeat=1, timeout=20))
    best = []
    for task, tuner in zip(tasks, (autotvm.tuner.XGBTuner(tasks[0], plan_size=4, feature_type="knob"),
                                   autotvm.tuner.RandomTuner(tasks[1]))):
        tuner.tune(n_trial=3, measure_option=measure_option, callbacks=[autotvm.callback.log_to_file(log)])
        assert tuner.best_flops > 0, f"no valid measurement for {task}"
        best.append(tuner.best_config)
    records = list(autotvm.record.load_from_file(log))
    assert len(records) == sum(min(3, len(t.config_space)) for t in tasks) >= 5
    assert all(r.error_no == 0 for _, r in records)
    lib, ctx = build(mod, log)
    np.testing.assert_allclose(run(lib, xv), ref, rtol=1e-4, atol=1e-4)
    # the configs used are the best records: their channel blocks are the graph's layouts
    with kiln.target.Target(TARGET) as target:
        chosen = [ctx.query(target, t.workload) for t in tasks]
    assert all(not c.is_fallback for c in chosen)
    ic_bn = chosen[0]["tile_ic"].size[-1]
    oc_bn = chosen[0]["tile_oc"].size[-1]
    shapes = graph_shapes(lib)
    assert (1, 8 // ic_bn, 10, 13, ic_bn) in shapes and (1, 16 // oc_bn, 10, 13, oc_bn) in shapes
    rows = {c["tile_ow"].size[-1] for c in chosen}
    texts = " ".join(str(c.prim_func) for c in conv_kernels(lib))
    assert all(re.search(rf"T\.unroll\({r}\)", texts) for r in rows if r > 1)
