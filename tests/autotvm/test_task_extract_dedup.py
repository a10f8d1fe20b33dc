"""Task extraction lists each workload once: identical layers give one task, and the packed-layout copies of
conv2d / dense that AlterOpLayout would create (same workloads in 5-D / packed form) are not traced."""
from __future__ import annotations

import collections

import kiln as tvm
from kiln import autotvm, relay


def _model():
    """Two identical 3x3 convs, a 1x1 conv and a dense layer (odd channel counts)."""
    x = relay.var("x", shape=(1, 8, 9, 9), dtype="float32")
    w1 = relay.var("w1", shape=(8, 8, 3, 3), dtype="float32")
    w2 = relay.var("w2", shape=(8, 8, 3, 3), dtype="float32")
    w3 = relay.var("w3", shape=(6, 8, 1, 1), dtype="float32")
    wd = relay.var("wd", shape=(5, 486), dtype="float32")
    y = relay.nn.relu(relay.nn.conv2d(x, w1, padding=(1, 1), channels=8, kernel_size=(3, 3)))
    y = relay.nn.relu(relay.nn.conv2d(y, w2, padding=(1, 1), channels=8, kernel_size=(3, 3)))
    y = relay.nn.conv2d(y, w3, channels=6, kernel_size=(1, 1))
    y = relay.nn.dense(relay.nn.batch_flatten(y), wd)
    return relay.Function(relay.analysis.free_vars(y), y)


def test_each_workload_is_extracted_once():
    with tvm.transform.PassContext(opt_level=3):
        tasks = autotvm.task.extract_from_program(_model(), params={}, target="llvm -mcpu=core-avx2")
    keys = collections.Counter((t.name, t.args) for t in tasks)
    assert all(n == 1 for n in keys.values()), keys
    # no packed-layout copies: every conv task has 4-D data, every dense task 2-D weights
    for t in tasks:
        data, weight = t.args[0], t.args[1]
        assert data[0] == "TENSOR" and len(data[1]) in (2, 4), t
        if t.name.startswith("dense"):
            assert len(weight[1]) == 2, t
    conv3 = [t for t in tasks if t.name == "conv2d_NCHWc.x86" and t.args[1][1] == (8, 8, 3, 3)]
    assert len(conv3) == 1                      # the two identical 3x3 layers share one task
    assert any(t.name == "conv2d_NCHWc.x86" and t.args[1][1] == (6, 8, 1, 1) for t in tasks)
    assert any(t.name.startswith("dense") for t in tasks)


def test_cli_tune_loop_skips_repeated_tasks():
    from kiln.cli.cmd_tune import unique_tasks
    with tvm.transform.PassContext(opt_level=3):
        tasks = autotvm.task.extract_from_program(_model(), params={}, target="llvm -mcpu=core-avx2")
    again = tasks + [autotvm.task.create(t.name, t.args, target=t.target) for t in tasks]
    assert [t.workload for t in unique_tasks(again)] == [t.workload for t in tasks]
