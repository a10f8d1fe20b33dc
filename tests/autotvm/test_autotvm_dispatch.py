"""Templates, tasks and dispatch contexts."""
import logging
import pickle

import pytest

from kiln import autotvm
from kiln.autotvm import record
from kiln.autotvm.measure import MeasureInput, MeasureResult
from kiln.autotvm.task import dispatcher
from kiln.autotvm.task.task import TemplateError
from kiln.target.target import Target
from kiln.testing.autotvm import get_sample_records, get_synthetic_task

SEEN = []


@autotvm.template("test_dispatch/knobs")
def knob_template(n):
    cfg = autotvm.get_config()
    cfg.define_split("tile", cfg.axis(n), num_outputs=2)
    cfg.define_knob("unroll", [0, 1, 2])
    cfg.add_flop(2 * n)
    SEEN.append((type(cfg).__name__, cfg["tile"].size, cfg["unroll"].val))
    return None, []


def test_create_collects_space_and_instantiate_applies_config():
    SEEN.clear()
    task = autotvm.task.create("test_dispatch/knobs", args=(8,), target="llvm")
    assert task.name == "test_dispatch/knobs" and task.args == (8,)
    assert task.workload == ("test_dispatch/knobs", 8)
    assert len(task.config_space) == 4 * 3
    assert task.flop == 16
    assert str(task.target) == "llvm -keys=cpu"
    assert SEEN[-1] == ("ConfigSpace", [-1, 1], 0)
    cfg = task.config_space.get(7)
    task.instantiate(cfg)
    assert SEEN[-1] == ("ConfigEntity", cfg["tile"].size, cfg["unroll"].val)
    assert cfg.flop == 16
    with pytest.raises(TemplateError, match="no AutoTVM template"):
        autotvm.task.create("test_dispatch/missing", args=(1,), target="llvm")


def test_task_pickles_and_keeps_template():
    task = autotvm.task.create("test_dispatch/knobs", args=(8,), target="llvm")
    back = pickle.loads(pickle.dumps(task))
    assert back.workload == task.workload and len(back.config_space) == len(task.config_space)
    SEEN.clear()
    back.instantiate(back.config_space.get(3))
    assert SEEN[-1][0] == "ConfigEntity"


def test_calling_template_queries_dispatch_context():
    SEEN.clear()
    task = autotvm.task.create("test_dispatch/knobs", args=(8,), target="llvm")
    cfg = task.config_space.get(5)
    with autotvm.ApplyConfig(cfg) as ctx:
        knob_template(8)
    assert ctx.workload == ("test_dispatch/knobs", 8)
    assert SEEN[-1] == ("ConfigEntity", cfg["tile"].size, cfg["unroll"].val)
    assert autotvm.DispatchContext.current is not ctx  # restored


def _records_for(task, costs, target=None):
    target = target or task.target
    return [(MeasureInput(target, task, task.config_space.get(i)), MeasureResult((c,), 0 if c else 4, 0.1, float(i)))
            for i, c in enumerate(costs)]


def test_apply_history_best_picks_lowest_cost(tmp_path):
    task = autotvm.task.create("test_dispatch/knobs", args=(8,), target="llvm")
    recs = _records_for(task, [0.3, 0.1, None, 0.2])
    SEEN.clear()
    with autotvm.apply_history_best(recs):
        with Target("llvm"):
            knob_template(8)
    best = task.config_space.get(1)
    assert SEEN[-1] == ("ConfigEntity", best["tile"].size, best["unroll"].val)

    # from files: a path and a list of paths
    f1, f2 = tmp_path / "a.log", tmp_path / "b.log"
    record.save_to_file(recs[:1], f1)
    record.save_to_file(recs[3:], f2)
    ctx = autotvm.apply_history_best([str(f1), f2])
    with Target("llvm"):
        assert ctx.query(Target("llvm"), task.workload).index == 3
    ctx = autotvm.apply_history_best(str(f1))
    assert ctx.query(Target("llvm"), task.workload).index == 0
    # only failed records: nothing to apply
    ctx = autotvm.apply_history_best(recs[2:3])
    assert ctx._query_inside(Target("llvm"), task.workload) is None


def test_apply_history_best_matches_model_before_keys():
    task = autotvm.task.create("test_dispatch/knobs", args=(8,), target="llvm")
    recs = _records_for(task, [0.5, 0.4], target=Target("llvm"))
    recs += [(MeasureInput(Target("llvm -model=fastbox"), task, task.config_space.get(5)),
              MeasureResult((0.9,), 0, 0.1, 0.0))]
    ctx = autotvm.apply_history_best(recs)
    assert ctx.query(Target("llvm -model=fastbox"), task.workload).index == 5  # same model wins
    assert ctx.query(Target("llvm"), task.workload).index == 1  # by key "cpu": overall best
    with pytest.raises(Exception, match="needs a target"):
        ctx.query(None, task.workload)
    ctx.update(Target("llvm"), task.workload, task.config_space.get(9))
    assert ctx.query(Target("llvm"), task.workload).index == 9


def test_fallback_warns_once_and_summarizes(caplog):
    root = dispatcher._root_fallback()
    root.memory.clear()
    dispatcher.FallbackContext._warned_once = False
    with caplog.at_level(logging.DEBUG, logger="autotvm"):
        with Target("llvm"):
            for n in range(2, 12):
                knob_template(n)
            knob_template(2)  # cached: not reported again
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "further untuned workloads are logged at DEBUG" in warnings[0].getMessage()
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG and "Cannot find config" in r.getMessage()]
    assert len(debug) == 10
    # the fallback entity of the last call was a FallbackConfigEntity
    assert SEEN[-1][0] == "FallbackConfigEntity"


def test_apply_history_best_one_summary_line(caplog):
    task = autotvm.task.create("test_dispatch/knobs", args=(8,), target="llvm")
    recs = _records_for(task, [0.3])
    dispatcher._root_fallback().memory.clear()
    with caplog.at_level(logging.WARNING, logger="autotvm"):
        with autotvm.apply_history_best(recs):
            with Target("llvm"):
                knob_template(8)
                for n in range(20, 40):
                    knob_template(n)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "20 of 21 workload(s)" in warnings[0] and "test_dispatch/knobs" in warnings[0]


def test_fallback_summary_block(caplog):
    dispatcher._root_fallback().memory.clear()
    with caplog.at_level(logging.WARNING, logger="autotvm"):
        with dispatcher.fallback_summary("relay.build") as misses:
            with Target("llvm"):
                knob_template(50)
                knob_template(51)
    assert len(misses) == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("relay.build: 2 workload(s)")


def test_apply_fixed_config():
    task = autotvm.task.create("test_dispatch/knobs", args=(8,), target="llvm")
    ctx = autotvm.apply_fixed_config([task], "test_dispatch/knobs")
    cfg = ctx.query(Target("llvm"), task.workload)
    assert cfg.index == 0 and cfg.cost == 1e-6
    ctx = autotvm.apply_fixed_config([task], ["other"])
    assert ctx.query(Target("llvm"), task.workload).cost == 100000
    with pytest.raises(Exception, match="not one of the given tasks"):
        ctx.query(Target("llvm"), ("nope", 1))


def test_clear_fallback_cache():
    with Target("llvm"):
        knob_template(64)
    root = dispatcher._root_fallback()
    key = ("llvm -keys=cpu", ("test_dispatch/knobs", 64))
    assert key in root.memory
    dispatcher.clear_fallback_cache(Target("llvm"), ("test_dispatch/knobs", 64))
    assert key not in root.memory


def test_tophub_context_is_offline(tmp_path, monkeypatch):
    monkeypatch.delenv("KILN_TOPHUB_DIR", raising=False)
    ctx = autotvm.tophub.context(Target("llvm"))
    with ctx:
        assert autotvm.DispatchContext.current is dispatcher.DispatchContext.current
    task = get_synthetic_task(16, 8, 3)[0]
    log = tmp_path / "llvm_v1.log"
    record.save_to_file(get_sample_records(2, task), log)
    monkeypatch.setenv("KILN_TOPHUB_DIR", str(tmp_path))
    ctx = autotvm.tophub.context(Target("llvm"))
    assert ctx.query(Target("llvm"), task.workload).index == 0
    assert len(autotvm.tophub.load_reference_log("llvm", "unknown", "testing/synthetic")) == 2
