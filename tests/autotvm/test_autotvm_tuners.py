"""Tuners on a synthetic space: each finds the optimum, never proposes a duplicate; the tune loop's
early stopping, error handling, callbacks."""
import io
import logging
import math
import random

import numpy as np
import pytest

from kiln import autotvm
from kiln.autotvm import record
from kiln.autotvm.tuner import GATuner, GridSearchTuner, RandomTuner, XGBTuner
from kiln.autotvm.tuner.callback import Monitor
from kiln.autotvm.tuner.plot import plot_tuning_curve, tuning_curve
from kiln.error import KilnError
from kiln.testing.autotvm import DummyBuilder, FunctionRunner, get_synthetic_task


def cost(cfg):
    """Seconds; unique minimum 1.0 at tile_x inner 8, tile_y inner 16, opt 2."""
    x = math.log2(cfg["tile_x"].size[-1])
    y = math.log2(cfg["tile_y"].size[-1])
    return 1.0 + (x - 3) ** 2 + 0.5 * (y - 4) ** 2 + 0.7 * (cfg["opt"].val != 2)


@pytest.fixture
def task():
    np.random.seed(0)
    random.seed(0)
    return get_synthetic_task(64, 64, 4)[0]


def optimum_index(task):
    space = task.config_space
    return min(range(len(space)), key=lambda i: cost(space.get(i)))


def run(tuner, n_trial, n_parallel=4, early_stopping=None, callbacks=(), fn=cost):
    runner = FunctionRunner(fn)
    option = autotvm.measure_option(builder=DummyBuilder(n_parallel=n_parallel), runner=runner)
    tuner.tune(n_trial=n_trial, measure_option=option, early_stopping=early_stopping, callbacks=callbacks)
    return runner.measured


@pytest.mark.parametrize("make, n_trial", [
    (lambda t: GridSearchTuner(t), 196),
    (lambda t: RandomTuner(t), 196),
    (lambda t: GATuner(t, pop_size=16, elite_num=2, mutation_prob=0.1), 120),
    (lambda t: XGBTuner(t, plan_size=16, feature_type="knob"), 100),
    (lambda t: XGBTuner(t, plan_size=16, feature_type="knob", loss_type="rank"), 100),
    (lambda t: XGBTuner(t, plan_size=16, feature_type="knob", diversity_filter_ratio=2), 100),
])
def test_tuner_finds_optimum_without_duplicates(task, make, n_trial):
    tuner = make(task)
    measured = run(tuner, n_trial)
    assert len(measured) == len(set(measured)), "a config was proposed twice"
    assert len(measured) <= n_trial
    best = optimum_index(task)
    assert tuner.best_config.index == best
    assert tuner.best_flops == pytest.approx(task.flop / 1.0)
    inp, res = tuner.best_measure_pair
    assert inp.config.index == best and res.costs == (1.0,)


def test_exhaustive_tuners_cover_space_exactly_once(task):
    for tuner in (GridSearchTuner(task), RandomTuner(task), GATuner(task, pop_size=30)):
        measured = run(tuner, 1000)
        assert sorted(measured) == list(range(len(task.config_space)))
        assert not tuner.has_next()


def test_xgb_exhausts_small_space_without_duplicates():
    task = get_synthetic_task(8, 4, 2)[0]  # 4 * 3 * 2 = 24 configs
    tuner = XGBTuner(task, plan_size=4, feature_type="knob")
    measured = run(tuner, 100)
    assert sorted(measured) == list(range(24))


def test_range_idx(task):
    measured = run(GridSearchTuner(task, range_idx=(10, 19)), 100)
    assert measured == list(range(10, 20))
    measured = run(RandomTuner(task, range_idx=(50, 59)), 100)
    assert sorted(measured) == list(range(50, 60)) and measured != sorted(measured)
    with pytest.raises(KilnError):
        GridSearchTuner(task, range_idx=(0, 1000))


def test_multi_filter_respected():
    @autotvm.template("test_tuners/filtered")
    def filtered():
        cfg = autotvm.get_config()
        cfg.define_split("a", cfg.axis(32), num_outputs=2)
        cfg.define_split("b", cfg.axis(32), num_outputs=2)
        cfg.multi_filter(filter=lambda e: e["a"].size[-1] * e["b"].size[-1] <= 16)
        cfg.add_flop(1e9)
        return None, []

    task = autotvm.task.create("test_tuners/filtered", args=(), target="llvm")
    valid = [i for i in range(task.config_space.range_length) if task.config_space.is_index_valid(i)]
    assert len(task.config_space) == len(valid) < task.config_space.range_length
    for tuner in (GridSearchTuner(task), RandomTuner(task), GATuner(task, pop_size=5)):
        measured = run(tuner, 1000, fn=lambda c: 1.0)
        assert sorted(measured) == valid
    # the task (with its lambda filter) still pickles for builder processes, keeping the mask
    import pickle
    back = pickle.loads(pickle.dumps(task))
    assert [i for i in range(back.config_space.range_length) if back.config_space.is_index_valid(i)] == valid
    assert len(back.config_space) == len(valid)


def test_early_stopping_counts_trials_since_best(task):
    # grid search meets its best at trial 0 (cost decreasing nowhere after): stops after 10 more trials
    measured = run(GridSearchTuner(task), 196, n_parallel=1, early_stopping=10, fn=lambda c: 1.0 + c.index)
    assert len(measured) == 10
    # with batches of 4 the check happens per batch
    tuner = GridSearchTuner(task)
    measured = run(tuner, 196, n_parallel=4, early_stopping=6, fn=lambda c: 1.0 + abs(c.index - 20))
    assert tuner.best_iter == 20 and len(measured) == 28
    assert tuner.ttl == 26 - 28


def test_errors_counted_and_reported(task, caplog):
    tuner = RandomTuner(task)
    with caplog.at_level(logging.WARNING, logger="autotvm"):
        measured = run(tuner, 160, fn=lambda c: None)
    assert len(measured) == 160
    assert tuner.best_config is None and tuner.best_flops == 0
    msgs = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("Too many errors" in m for m in msgs)
    final = [m for m in msgs if "Could not find any valid schedule" in m]
    assert len(final) == 1
    path = final[0].rsplit(" ", 1)[-1].rstrip(".")
    with open(path) as f:
        assert "failed" in f.read()
    assert logging.getLogger("autotvm").level == logging.NOTSET  # debug mode switched back off


def test_instantiation_errors_become_failed_results():
    @autotvm.template("test_tuners/raises")
    def raises():
        cfg = autotvm.get_config()
        cfg.define_knob("k", [0, 1, 2, 3])
        cfg.add_flop(1e9)
        if cfg["k"].val % 2:
            cfg.raise_error("odd knob")
        return None, []

    task = autotvm.task.create("test_tuners/raises", args=(), target="llvm")
    results = []
    tuner = GridSearchTuner(task)
    run(tuner, 4, fn=lambda c: 1.0, callbacks=[lambda t, i, r: results.extend(r)])
    assert [r.error_no for r in results] == [0, 1, 0, 1]
    assert "odd knob" in str(results[1].costs[1])


def test_callbacks_progress_bar_log_to_file_monitor(task, tmp_path, capsys):
    log = tmp_path / "tune.log"
    buf = io.StringIO()
    mon = Monitor()
    tuner = GridSearchTuner(task)
    run(tuner, 12, callbacks=[autotvm.callback.progress_bar(12, prefix="[Task 1/1]"),
                              autotvm.callback.log_to_file(str(log)), autotvm.callback.log_to_file(buf), mon])
    out = capsys.readouterr().out
    assert "[Task 1/1] Current/Best:" in out and "GFLOPS | Progress: (12/12)" in out and " Done." in out
    last = out.strip().split("\r")[-1]
    best = max(1e9 / cost(task.config_space.get(i)) for i in range(12)) / 1e9
    assert f"{best:7.2f} GFLOPS" in last
    recs = list(record.load_from_file(log))
    assert [r[0].config.index for r in recs] == list(range(12))
    assert len(buf.getvalue().splitlines()) == 12
    assert len(mon.trial_scores()) == 12
    curve = tuning_curve(mon)
    assert np.all(np.diff(curve) >= 0) and curve[-1] == pytest.approx(best * 1e9)
    assert np.allclose(tuning_curve(str(log)), curve)
    assert np.allclose(tuning_curve(recs, flop=1e9), curve)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        with pytest.raises(KilnError, match="needs matplotlib"):
            plot_tuning_curve(mon, tmp_path / "c.png")
    else:
        out_png = plot_tuning_curve(mon, tmp_path / "c.png")
        assert open(out_png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(KilnError):
        autotvm.callback.progress_bar(10, si_prefix="Q")


def test_xgb_load_history_transfer(task, tmp_path):
    log = tmp_path / "hist.log"
    run(RandomTuner(task), 60, callbacks=[autotvm.callback.log_to_file(str(log))])
    tuner = XGBTuner(task, plan_size=16, feature_type="knob")
    tuner.load_history(record.load_from_file(log), min_seed_records=50)
    assert len(tuner.trials) > 0 and tuner.cost_model.base_model is not None
    # the base model's plan favours good configs: the first planned trials beat random on average
    planned = [cost(task.config_space.get(i)) for i in tuner.trials[:8]]
    average = np.mean([cost(task.config_space.get(i)) for i in range(len(task.config_space))])
    assert np.mean(planned) < average
    measured = run(tuner, 40)
    assert len(set(measured)) == len(measured)
    # too few records: nothing happens
    t2 = XGBTuner(task, plan_size=16, feature_type="knob")
    t2.load_history(record.load_from_file(log), min_seed_records=500)
    assert t2.trials == [] and t2.cost_model.base_model is None


def test_xgb_rejects_bad_options(task):
    with pytest.raises(KilnError):
        XGBTuner(task, feature_type="nope")
    with pytest.raises(KilnError):
        XGBTuner(task, feature_type="knob", loss_type="nope")
    with pytest.raises(KilnError):
        XGBTuner(task, feature_type="knob", optimizer="nope")
    XGBTuner(task, feature_type="knob", loss_type="rank-binary")
