"""Tutorial flow: "Auto-tuning a Convolutional Network for x86 CPU" (tune_relay_x86), small budget.

A small conv network with params: conv2d tasks extracted with extract_from_program, each tuned for a
couple of trials (XGB, GA, random and grid-search tuners as the tutorial's options) with progress_bar
and log_to_file, then relay.build under apply_history_best, run and timed with the graph executor,
and checked against the debug interpreter. The graph tuner (DPTuner / apply_graph_best) is not built:
that part is a strict xfail on its NotImplementedError.
"""
import numpy as np
import pytest

import kiln as tvm
import kiln.testing
from kiln import autotvm, relay
from kiln.autotvm.tuner import GATuner, GridSearchTuner, RandomTuner, XGBTuner
from kiln.contrib import graph_executor, utils

TARGET = "llvm"
INPUT_NAME = "data"
DATA_SHAPE = (1, 8, 11, 13)


def get_network():
    """conv(8->16, 3x3) -> relu -> conv(16->16, 1x1, stride 2) -> global avg pool -> dense; random params."""
    rng = np.random.default_rng(0)
    data = relay.var(INPUT_NAME, shape=DATA_SHAPE)
    w1 = relay.var("w1", shape=(16, 8, 3, 3))
    w2 = relay.var("w2", shape=(16, 16, 1, 1))
    wd = relay.var("wd", shape=(10, 16))
    y = relay.nn.relu(relay.nn.conv2d(data, w1, padding=(1, 1), channels=16, kernel_size=(3, 3)))
    y = relay.nn.conv2d(y, w2, strides=(2, 2), channels=16, kernel_size=(1, 1))
    y = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(y))
    y = relay.nn.dense(y, wd)
    mod = tvm.IRModule.from_expr(relay.Function([data, w1, w2, wd], y))
    params = {
        "w1": tvm.nd.array(rng.standard_normal((16, 8, 3, 3)).astype("float32") * 0.3),
        "w2": tvm.nd.array(rng.standard_normal((16, 16, 1, 1)).astype("float32") * 0.3),
        "wd": tvm.nd.array(rng.standard_normal((10, 16)).astype("float32") * 0.3),
    }
    return mod, params, DATA_SHAPE, (1, 10)


def tune_kernels(tasks, measure_option, tuner="gridsearch", early_stopping=None, log_filename="tuning.log",
                 n_trial=2):
    for i, task in enumerate(tasks):
        prefix = "[Task %2d/%2d] " % (i + 1, len(tasks))
        if tuner == "xgb":
            tuner_obj = XGBTuner(task, loss_type="reg")
        elif tuner == "ga":
            tuner_obj = GATuner(task, pop_size=4)
        elif tuner == "random":
            tuner_obj = RandomTuner(task)
        elif tuner == "gridsearch":
            tuner_obj = GridSearchTuner(task)
        else:
            raise ValueError("Invalid tuner: " + tuner)
        tuner_obj.tune(
            n_trial=min(n_trial, len(task.config_space)),
            early_stopping=early_stopping,
            measure_option=measure_option,
            callbacks=[autotvm.callback.progress_bar(n_trial, prefix=prefix),
                       autotvm.callback.log_to_file(log_filename)],
        )


def _reference(mod, params, data):
    return relay.create_executor("debug", mod=mod, device=tvm.cpu(), target=TARGET).evaluate()(
        data, **{k: v.numpy() for k, v in params.items()}).numpy()


def test_extract_tasks():
    mod, params, _, _ = get_network()
    tasks = autotvm.task.extract_from_program(mod["main"], target=TARGET, params=params,
                                              ops=(relay.op.get("nn.conv2d"),))
    # the direct template for both convs, and Winograd for the 3x3 stride-1 one (kiln's x86 strategy has it,
    # TVM's has not: relay.build takes it only where its record is faster)
    assert sorted(t.name for t in tasks) == ["conv2d_NCHWc.x86", "conv2d_NCHWc.x86", "conv2d_NCHWc_winograd.x86"]
    assert all(len(t.config_space) > 1 for t in tasks)


@pytest.mark.slow
@pytest.mark.parametrize("tuner", ["xgb", "random"])
def test_tune_and_evaluate(tuner, capsys):
    mod, params, data_shape, out_shape = get_network()
    tasks = autotvm.task.extract_from_program(mod["main"], target=TARGET, params=params,
                                              ops=(relay.op.get("nn.conv2d"),))
    tmp = utils.tempdir()
    log_file = tmp.relpath("net.log")
    measure_option = autotvm.measure_option(
        builder=autotvm.LocalBuilder(),
        runner=autotvm.LocalRunner(number=1, repeat=2, min_repeat_ms=0, enable_cpu_cache_flush=True))
    tune_kernels(tasks, measure_option, tuner=tuner, log_filename=log_file)
    assert "Done." in capsys.readouterr().out  # the progress bar
    records = list(autotvm.record.load_from_file(log_file))
    assert len(records) == 2 * len(tasks) == 6 and all(r.error_no == 0 for _, r in records)

    with autotvm.apply_history_best(log_file):
        with tvm.transform.PassContext(opt_level=3):
            lib = relay.build_module.build(mod, target=TARGET, params=params)

    dev = tvm.cpu()
    data = np.random.default_rng(1).uniform(size=data_shape).astype("float32")
    module = graph_executor.GraphModule(lib["default"](dev))
    module.set_input(INPUT_NAME, tvm.nd.array(data))
    module.run()
    out = module.get_output(0).numpy()
    assert out.shape == out_shape
    tvm.testing.assert_allclose(out, _reference(mod, params, data), rtol=1e-4, atol=1e-5)
    ftimer = module.module.time_evaluator("run", dev, number=2, repeat=2)
    assert len(ftimer().results) == 2
    assert module.benchmark(dev, number=2, repeat=2).mean > 0


@pytest.mark.xfail(raises=NotImplementedError, strict=True,
                   reason="autotvm.graph_tuner (DPTuner / PBQPTuner) and apply_graph_best are not built in kiln")
def test_graph_tuner():
    from kiln.autotvm.graph_tuner import DPTuner

    mod, params, data_shape, out_shape = get_network()
    tmp = utils.tempdir()
    log_file = tmp.relpath("net.log")
    open(log_file, "w").close()
    opt_sch_file = tmp.relpath("net_graph_opt.log")
    executor = DPTuner(mod["main"], {INPUT_NAME: data_shape}, log_file, [relay.op.get("nn.conv2d")], TARGET)
    executor.benchmark_layout_transform(min_exec_num=10)
    executor.run()
    executor.write_opt_sch2record_file(opt_sch_file)
    with autotvm.apply_graph_best(opt_sch_file):
        with tvm.transform.PassContext(opt_level=3):
            lib = relay.build_module.build(mod, target=TARGET, params=params)
    data = np.random.default_rng(1).uniform(size=data_shape).astype("float32")
    module = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    module.run(**{INPUT_NAME: data})
    tvm.testing.assert_allclose(module.get_output(0).numpy(), _reference(mod, params, data), rtol=1e-4)


def test_apply_graph_best_names_what_is_missing():
    with pytest.raises(tvm.error.OpNotImplemented, match="graph tuner"):
        autotvm.apply_graph_best("net_graph_opt.log")
