"""Tuning logs: TVM's JSON format, round trips, corrupt lines, pick_best, databases."""
import json
import logging
import time

import pytest

from kiln import autotvm
from kiln.autotvm import record
from kiln.autotvm.measure import MeasureErrorNo, MeasureInput, MeasureResult
from kiln.testing.autotvm import get_sample_records, get_synthetic_task


@pytest.fixture
def task():
    return get_synthetic_task(16, 8, 3)[0]


def test_error_codes_match_tvm():
    assert [(e.name, int(e)) for e in MeasureErrorNo] == [
        ("NO_ERROR", 0), ("INSTANTIATION_ERROR", 1), ("COMPILE_HOST", 2), ("COMPILE_DEVICE", 3),
        ("RUNTIME_DEVICE", 4), ("WRONG_ANSWER", 5), ("BUILD_TIMEOUT", 6), ("RUN_TIMEOUT", 7), ("UNKNOWN_ERROR", 8)]
    assert "RUN_TIMEOUT" in repr(MeasureResult((1.0,), 7, 1.0, 0.0))


def test_json_line_has_tvm_layout(task):
    inp = MeasureInput(task.target, task, task.config_space.get(7))
    res = MeasureResult((0.5, 0.25), 0, 1.5, 123.0)
    line = record.encode(inp, res)
    obj = json.loads(line)
    assert set(obj) == {"input", "config", "result", "version", "tvm_version"}
    assert obj["input"] == ["llvm -keys=cpu", "testing/synthetic", [16, 8, 3], {}]
    assert obj["config"] == {"index": 7, "code_hash": None,
                             "entity": [["tile_x", "sp", [-1, 4]], ["tile_y", "sp", [-1, 2]], ["opt", "ot", 0]]}
    assert obj["result"] == [[0.5, 0.25], 0, 1.5, 123.0]
    assert obj["version"] == 0.2 and obj["tvm_version"] == "0.13.0"
    # an error result is written with the placeholder cost 1e9
    bad = MeasureResult(("traceback", RuntimeError("x")), MeasureErrorNo.COMPILE_HOST, 0.1, 1.0)
    assert json.loads(record.encode(inp, bad))["result"] == [[1e9], 2, 0.1, 1.0]


@pytest.mark.parametrize("protocol", ["json", "pickle"])
def test_round_trip(task, protocol):
    for i in [0, 5, len(task.config_space) - 1]:
        inp = MeasureInput(task.target, task, task.config_space.get(i))
        res = MeasureResult((0.001 * (i + 1),), 0, 0.2, time.time())
        inp2, res2 = record.decode(record.encode(inp, res, protocol), protocol, allow_unsafe_pickle=True)
        assert str(inp2.target) == str(inp.target)
        assert inp2.task.name == task.name and inp2.task.args == task.args
        assert inp2.task.workload == task.workload
        assert inp2.config == inp.config and inp2.config.index == i
        assert tuple(res2.costs) == tuple(res.costs) and res2.error_no == 0
        assert inp2.config.cost == pytest.approx(0.001 * (i + 1))


def test_tensor_args_round_trip():
    """Tensor arguments are logged as ["TENSOR", shape, dtype] and read back as tuples."""
    line = json.dumps({"input": ["llvm -keys=cpu", "dense_nopack.x86",
                                 [["TENSOR", [1, 64], "float32"], ["TENSOR", [32, 64], "float32"], None, "float32"],
                                 {}],
                       "config": {"index": 3, "code_hash": None, "entity": [["tile_y", "sp", [-1, 1]]]},
                       "result": [[1e-5], 0, 0.5, 1.0], "version": 0.2, "tvm_version": "0.13.0"})
    inp, res = record.decode(line)
    assert inp.task.args == (("TENSOR", (1, 64), "float32"), ("TENSOR", (32, 64), "float32"), None, "float32")
    assert inp.task.workload[0] == "dense_nopack.x86"
    assert inp.target.keys == ["cpu"]
    assert json.loads(record.encode(inp, res))["input"][2][0] == ["TENSOR", [1, 64], "float32"]


def test_corrupt_lines_skipped_with_one_warning(task, tmp_path, caplog):
    path = tmp_path / "t.log"
    recs = get_sample_records(4, task)
    lines = [record.encode(*r) for r in recs]
    content = [lines[0], "this is not json", lines[1], '{"foo": 1}', "", "# comment", lines[2],
               '{"input": ["llvm", "x"]', lines[3], "\tgarbage\tmore"]
    path.write_text("\n".join(content) + "\n")
    with caplog.at_level(logging.WARNING, logger="autotvm"):
        loaded = list(record.load_from_file(path))
    assert [r[0].config.index for r in loaded] == [r[0].config.index for r in recs]
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    msg = warnings[0].getMessage()
    assert str(path) in msg and "4 corrupt" in msg and "line 2, 4, 8, 10" in msg


def test_old_version_line_skipped(tmp_path):
    path = tmp_path / "old.log"
    path.write_text('{"v": 0.1, "i": []}\n')
    assert list(record.load_from_file(path)) == []


def test_save_and_pick_best(tmp_path):
    task_a = get_synthetic_task(16, 8, 3)[0]
    task_b = get_synthetic_task(32, 8, 2)[0]
    recs = []
    costs_a = [0.5, 0.2, 0.9, 0.1, 0.3]
    for i, c in enumerate(costs_a):
        recs.append((MeasureInput(task_a.target, task_a, task_a.config_space.get(i)),
                     MeasureResult((c,), 0, c, float(i))))
    recs.append((MeasureInput(task_a.target, task_a, task_a.config_space.get(9)),
                 MeasureResult(("tb", RuntimeError("x")), 4, 0.01, 9.0)))  # failed: never best
    for i, c in enumerate([0.4, 0.05, 0.6]):
        recs.append((MeasureInput(task_b.target, task_b, task_b.config_space.get(i)),
                     MeasureResult((c,), 0, c, float(i))))
    log = tmp_path / "all.log"
    record.save_to_file(recs, log)
    assert len(log.read_text().splitlines()) == len(recs)
    best = tmp_path / "best.log"
    record.pick_best(str(log), str(best))
    picked = list(record.load_from_file(best))
    assert sorted((r[0].task.name, r[0].task.args, r[0].config.index) for r in picked) == sorted([
        ("testing/synthetic", (16, 8, 3), 3), ("testing/synthetic", (32, 8, 2), 1)])


def test_split_workload(tmp_path):
    task_a = get_synthetic_task(16, 8, 3)[0]
    task_b = get_synthetic_task(32, 8, 2)[0]
    recs = get_sample_records(3, task_a) + get_sample_records(2, task_b)
    log = tmp_path / "m.log"
    record.save_to_file(recs, log)
    record.split_workload(str(log))
    parts = sorted(tmp_path.glob("m.log.*.wkl"))
    assert [len(list(record.load_from_file(p))) for p in parts] == [3, 2]


def test_memory_database():
    from kiln.autotvm import database
    task = get_synthetic_task(16, 8, 3)[0]
    (inp, res), (inp2, res2) = get_sample_records(2, task)
    db = database.DummyDatabase()
    assert db.load(inp) is None
    db.save(inp, res)
    assert db.load(inp).costs == res.costs
    later = MeasureResult((9.0,), 0, 1.0, res.timestamp + 10)
    db.save(inp, later, extend=True)
    assert db.load(inp).costs == (9.0,)
    assert len(db.load(inp, get_all=True)) == 2
    assert database.filter_inputs(db, [inp, inp2]) == [inp2]
    assert len(db.filter(lambda i, r: r.costs[0] > 5)) == 1
    db.flush()
    assert db.load(inp) is None
    cb = autotvm.callback.log_to_database(db)
    cb(None, [inp2], [res2])
    assert db.load(inp2) is not None
