"""The disk cache of lowered kernel source (kiln.relay.backend.lowered_cache): a rebuild of the same model
skips TIR lowering and gives the same kernels and outputs; a different model or PassContext misses."""
import os

import numpy as np
import kiln
from kiln import relay
from kiln.relay.backend import lowered_cache
from kiln.runtime.vm import VirtualMachine

A = relay.Any()
rng = np.random.default_rng(7)


def _model(scale: float):
    x = relay.var("x", shape=(A, 37))
    w = relay.var("w", shape=(19, 37))
    y = relay.nn.softmax(relay.nn.dense(x, w) * relay.const(scale))
    return kiln.IRModule.from_expr(relay.Function([x, w], y))


def _compile(mod, **config):
    with kiln.transform.PassContext(opt_level=3, config=config):
        return relay.vm.compile(mod, target="llvm")


def _entries(root):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)


def _ref(x, w, scale):
    z = x @ w.T * scale
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def test_rebuild_hits_the_cache_and_runs_the_same(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_LOWERED_CACHE_DIR", str(tmp_path))
    exe1 = _compile(_model(0.5))
    first = _entries(tmp_path)
    assert len(first) == 1
    import kiln.driver.build_module as driver

    def no_lowering(*a, **k):
        raise AssertionError("a cached build must not lower again")
    monkeypatch.setattr(driver, "lower", no_lowering)
    exe2 = _compile(_model(0.5))
    assert _entries(tmp_path) == first
    assert exe2.lib.get_source() == exe1.lib.get_source()
    w = rng.standard_normal((19, 37)).astype("float32")
    for n in (1, 5, 33):
        x = rng.standard_normal((n, 37)).astype("float32")
        a = VirtualMachine(exe1, kiln.cpu()).run(x, w).numpy()
        b = VirtualMachine(exe2, kiln.cpu()).run(x, w).numpy()
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(b, _ref(x, w, 0.5), rtol=1e-5, atol=1e-6)


def test_other_model_or_config_misses(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_LOWERED_CACHE_DIR", str(tmp_path))
    _compile(_model(0.5))
    _compile(_model(0.25))
    assert len(_entries(tmp_path)) == 2
    exe = _compile(_model(0.5), **{"relay.backend.parallel_min_work": 0})
    assert len(_entries(tmp_path)) == 3
    x = rng.standard_normal((3, 37)).astype("float32")
    w = rng.standard_normal((19, 37)).astype("float32")
    np.testing.assert_allclose(VirtualMachine(exe, kiln.cpu()).run(x, w).numpy(), _ref(x, w, 0.5),
                               rtol=1e-5, atol=1e-6)


def test_cache_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_LOWERED_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("KILN_LOWERED_CACHE", "0")
    assert not lowered_cache.enabled()
    _compile(_model(0.5))
    assert _entries(tmp_path) == []


def test_unreadable_entry_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_LOWERED_CACHE_DIR", str(tmp_path))
    _compile(_model(0.5))
    (path,) = _entries(tmp_path)
    with open(path, "w") as f:
        f.write("{not json")
    exe = _compile(_model(0.5))
    x = rng.standard_normal((2, 37)).astype("float32")
    w = rng.standard_normal((19, 37)).astype("float32")
    np.testing.assert_allclose(VirtualMachine(exe, kiln.cpu()).run(x, w).numpy(), _ref(x, w, 0.5),
                               rtol=1e-5, atol=1e-6)


def test_key_names_the_parallel_backend_and_the_target_flags(monkeypatch):
    # the generated C depends on these too: a cache shared between settings or CPUs must not mix them up
    from kiln.target import Target
    mod = kiln.IRModule({})
    with kiln.transform.PassContext(opt_level=3):
        monkeypatch.setenv("KILN_PARALLEL_BACKEND", "pool")
        pool = lowered_cache.cache_key(mod, Target("llvm"))
        monkeypatch.setenv("KILN_PARALLEL_BACKEND", "openmp")
        omp = lowered_cache.cache_key(mod, Target("llvm"))
        avx2 = lowered_cache.cache_key(mod, Target("llvm -mcpu=core-avx2"))
        avx512 = lowered_cache.cache_key(mod, Target("llvm -mcpu=skylake-avx512"))
    assert len({pool, omp, avx2, avx512}) == 4
