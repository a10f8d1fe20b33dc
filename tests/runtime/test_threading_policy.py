"""Threading policy: the OpenMP wait-policy default set at kiln.runtime import, and relay.build making the
parallel loops of small kernels serial (numerics unchanged, big kernels still parallel)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
from kiln.runtime.thread_policy import configure_openmp_env, openmp_status

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fresh(code: str, **env) -> dict:
    """Run ``code`` in a fresh interpreter with a clean OpenMP environment plus ``env``; it prints JSON."""
    e = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KILN_OMP_WAIT_POLICY")}
    e.update(env)
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


STATUS = ("import json, os, kiln.runtime; from kiln.runtime.thread_policy import openmp_status; "
          "print(json.dumps({'env': os.environ.get('OMP_WAIT_POLICY'), 'spin': os.environ.get('GOMP_SPINCOUNT'), "
          "**openmp_status()}))")


def test_default_is_a_bounded_spin_set_before_libgomp_loads():
    st = _fresh(STATUS)
    assert st["env"] is None and st["spin"] == "10000" and st["policy"] == "GOMP_SPINCOUNT=10000"
    assert st["set_by_kiln"] and not st["libgomp_preloaded"] and "warning" not in st


def test_suite_runs_passive():
    # tests/conftest.py: two pytest workers on two cores must not spin against each other
    choice = os.environ.get("KILN_OMP_WAIT_POLICY")
    assert choice is not None, "tests/conftest.py did not choose a wait policy before importing kiln"
    if choice == "passive":
        assert openmp_status()["policy"] == "PASSIVE" and os.environ["OMP_WAIT_POLICY"] == "PASSIVE"


@pytest.mark.parametrize("env, expected, by_kiln", [
    ({"OMP_WAIT_POLICY": "ACTIVE"}, "ACTIVE", False),
    ({"GOMP_SPINCOUNT": "1000"}, None, False),
    ({"KILN_OMP_WAIT_POLICY": "keep"}, None, False),
    ({"KILN_OMP_WAIT_POLICY": "active"}, "ACTIVE", True),
])
def test_user_choice_is_respected(env, expected, by_kiln):
    st = _fresh(STATUS, **env)
    assert st["env"] == expected and st["set_by_kiln"] == by_kiln


def test_bad_choice_and_dict_environment():
    env = {}
    assert configure_openmp_env(env)["policy"] == "GOMP_SPINCOUNT=10000" and env == {"GOMP_SPINCOUNT": "10000"}
    env = {"KILN_OMP_WAIT_POLICY": "passive"}
    assert configure_openmp_env(env)["policy"] == "PASSIVE" and env["OMP_WAIT_POLICY"] == "PASSIVE"
    with pytest.raises(kiln.error.KilnError, match="KILN_OMP_WAIT_POLICY"):
        configure_openmp_env({"KILN_OMP_WAIT_POLICY": "spin"})
    assert "libgomp_loaded" in openmp_status()


def test_runtime_loaded_earlier_is_reported():
    pytest.importorskip("torch")
    st = _fresh("import torch\n" + STATUS.replace("; ", "\n"))
    assert st["libgomp_preloaded"] and "warning" in st


# -- small kernels run serially -----------------------------------------------------------------------------
def _mlp_and_big():
    """A small dense (4x128 by 256 units: 131k iterations, 262k flops, which its schedule parallelizes) and a
    big elementwise kernel (640k elements)."""
    from kiln import relay
    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(4, 128))
    small = relay.nn.relu(relay.nn.dense(x, relay.const(rng.standard_normal((256, 128)).astype("float32"))))
    z = relay.var("z", shape=(1, 64, 100, 100))
    big = relay.nn.relu(z * relay.const(np.float32(2.0)))
    mod = kiln.IRModule.from_expr(relay.Function([x, z], relay.Tuple([small, big])))
    inputs = {"x": rng.standard_normal((4, 128)).astype("float32"),
              "z": rng.standard_normal((1, 64, 100, 100)).astype("float32")}
    return mod, inputs


def _build(mod, **config):
    from kiln import relay
    target = kiln.target.Target("llvm")
    with kiln.transform.PassContext(opt_level=3, config=config), target:
        return relay.build(mod, target=target)


def _parallel(cached) -> bool:
    return "T.parallel" in str(cached.prim_func)


def test_small_kernels_become_serial_and_numerics_hold():
    from kiln.runtime.graph_executor import GraphModule
    mod, inputs = _mlp_and_big()
    ref = None
    for threshold, expect_small, expect_big in ((1 << 18, False, True), (0, True, True), (1 << 30, False, False)):
        lib = _build(mod, **{"relay.backend.parallel_min_work": threshold,
                             "relay.backend.parallel_min_read_bytes": threshold})
        by_anchor = {c.anchor_op: c for c in lib.lowered}
        dense = [c for a, c in by_anchor.items() if "dense" in a][0]
        elem = [c for c in lib.lowered if "dense" not in c.anchor_op][0]
        assert dense.prim_func.attrs["kiln.work"] < 1 << 18 <= elem.prim_func.attrs["kiln.work"]
        assert _parallel(dense) == expect_small and _parallel(elem) == expect_big, threshold
        m = GraphModule(lib["default"](kiln.cpu(0)))
        m.set_input(**inputs)
        m.run()
        outs = [m.get_output(i).numpy() for i in range(2)]
        if ref is None:
            ref = outs
        for a, b in zip(outs, ref):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ref[1], np.maximum(inputs["z"] * 2, 0), rtol=1e-6)
    w = mod["main"].body.fields[0].args[0].args[1].data.numpy()
    np.testing.assert_allclose(ref[0], np.maximum(inputs["x"] @ w.T, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("getter,env,key,good,bad", [
    ("min_work", "KILN_PARALLEL_MIN_WORK", "relay.backend.parallel_min_work", "123", "lots"),
    ("min_read_bytes", "KILN_PARALLEL_MIN_READ_BYTES", "relay.backend.parallel_min_read_bytes", "4096", "1MB"),
])
def test_threshold_from_environment_and_validation(monkeypatch, getter, env, key, good, bad):
    from kiln.relay.backend import parallel_policy as P
    get = getattr(P, getter)
    default = {"min_work": P.DEFAULT_MIN_WORK, "min_read_bytes": P.DEFAULT_MIN_READ_BYTES}[getter]
    monkeypatch.delenv(env, raising=False)
    assert get() == default
    monkeypatch.setenv(env, good)
    assert get() == int(good)
    with kiln.transform.PassContext(config={key: 7}):
        assert get() == 7
    monkeypatch.setenv(env, bad)
    with pytest.raises(kiln.error.KilnError, match=env):
        get()
    with pytest.raises(kiln.error.KilnError):
        kiln.transform.PassContext(config={key: "big"})


def test_work_estimate_counts_loop_nests():
    from kiln import te
    from kiln.relay.backend.parallel_policy import apply_parallel_policy, estimate_work
    a = te.placeholder((37, 50), name="a")
    k = te.reduce_axis((0, 50), name="k")
    b = te.compute((37,), lambda i: te.sum(a[i, k] * 2.0, axis=k), name="b")
    s = te.create_schedule(b.op)
    s[b].parallel(b.op.axis[0])
    f = te.schedule_to_primfunc(s, [a, b], name="rowsum")
    assert estimate_work(f.body) == 37 * 50 + 37  # the reduction updates plus the initialisations
    assert "T.parallel" not in str(apply_parallel_policy(f, 37 * 51 + 1).body)
    assert "T.parallel" in str(apply_parallel_policy(f, 37 * 51).body)


def test_read_bytes_estimate_counts_each_buffer_at_most_once():
    """A GEMV reads its weight once (its size, though its loads are that many) and its input once per row (its
    size again); a gather reads only the rows it takes (its loads), not the table."""
    from kiln import te
    from kiln.relay.backend.parallel_policy import apply_parallel_policy, estimate_read_bytes
    x = te.placeholder((1, 784), name="x")
    w = te.placeholder((512, 784), name="w")
    k = te.reduce_axis((0, 784), name="k")
    y = te.compute((1, 512), lambda i, j: te.sum(x[i, k] * w[j, k], axis=k), name="y")
    s = te.create_schedule(y.op)
    s[y].parallel(y.op.axis[1])
    f = te.schedule_to_primfunc(s, [x, w, y], name="gemv")
    inputs = [b.data for b in f.buffer_map.values()]
    assert estimate_read_bytes(f.body, inputs) == 512 * 784 * 4 + 784 * 4 + 512 * 4  # y: its += updates
    assert apply_parallel_policy(f).attrs["kiln.read_bytes"] == estimate_read_bytes(f.body, inputs)
    # below the work threshold, above the bytes threshold: parallel; above both thresholds: serial
    assert "T.parallel" in str(apply_parallel_policy(f, 1 << 20, 1 << 20).body)
    assert "T.parallel" not in str(apply_parallel_policy(f, 1 << 20, 1 << 21).body)

    table = te.placeholder((30000, 64), name="table")
    idx = te.placeholder((8,), name="idx", dtype="int32")
    rows = te.compute((8, 64), lambda i, j: table[idx[i], j], name="rows")
    s = te.create_schedule(rows.op)
    s[rows].parallel(rows.op.axis[0])
    g = te.schedule_to_primfunc(s, [table, idx, rows], name="gather")
    inputs = [b.data for b in g.buffer_map.values()]
    assert estimate_read_bytes(g.body, inputs) == 8 * 64 * 4 + 8 * 4  # the rows taken, the indices
    assert "T.parallel" not in str(apply_parallel_policy(g).body)


def test_mlp_at_batch_1_streams_its_weights_on_every_thread_and_matches_numpy():
    """The dense layers of an MLP at batch 1 have little work but read their weights: parallel by the bytes rule,
    serial when the bytes threshold is raised; the results match numpy either way."""
    from kiln import relay
    from kiln.runtime.graph_executor import GraphModule
    rng = np.random.default_rng(3)
    w1 = rng.standard_normal((509, 781)).astype("float32")  # 1.59 MB, odd sizes
    w2 = rng.standard_normal((10, 509)).astype("float32")
    x = relay.var("x", shape=(1, 781))
    y = relay.nn.dense(relay.nn.relu(relay.nn.dense(x, relay.const(w1))), relay.const(w2))
    mod = kiln.IRModule.from_expr(relay.Function([x], y))
    xv = rng.standard_normal((1, 781)).astype("float32")
    ref = np.maximum(xv @ w1.T, 0) @ w2.T
    for min_bytes, big_parallel in ((1 << 20, True), (1 << 30, False)):
        lib = _build(mod, **{"relay.backend.parallel_min_read_bytes": min_bytes})
        kernels = sorted(lib.lowered, key=lambda c: -c.prim_func.attrs["kiln.read_bytes"])
        assert kernels[0].prim_func.attrs["kiln.work"] < 1 << 20 <= kernels[0].prim_func.attrs["kiln.read_bytes"]
        assert _parallel(kernels[0]) == big_parallel, min_bytes
        assert not _parallel(kernels[-1])  # 20 KB of weights
        m = GraphModule(lib["default"](kiln.cpu(0)))
        m.set_input(x=xv)
        m.run()
        np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-3)


# -- time_evaluator's clock -------------------------------------------------------------------------------
def test_time_evaluator_cpu_clock_ignores_waiting(monkeypatch):
    import time as _time
    from kiln.runtime.benchmark import measure

    def sleepy():
        _time.sleep(0.02)  # waiting, as a descheduled kernel would: wall time, no CPU time

    wall = measure(sleepy, (), None, number=2, repeat=2)
    monkeypatch.setenv("KILN_TIME_EVALUATOR_CLOCK", "cpu")
    cpu = measure(sleepy, (), None, number=2, repeat=2)
    assert wall.min >= 0.019 and cpu.max < 0.01

    def busy():
        end = _time.process_time() + 0.01
        while _time.process_time() < end:
            pass
    assert measure(busy, (), None, number=1, repeat=2).min >= 0.009
    monkeypatch.setenv("KILN_TIME_EVALUATOR_CLOCK", "sundial")
    with pytest.raises(kiln.error.KilnError, match="KILN_TIME_EVALUATOR_CLOCK"):
        measure(busy, (), None)
