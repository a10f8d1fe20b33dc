"""kiln's disk caches stay under $KILN_CACHE_MAX_MB: least recently used files go first, recent ones never."""
import os
import time

import numpy as np

from kiln.runtime import disk_cache


def _file(path, size, used):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"x" * size)
    os.utime(path, (used, used))


def test_prune_removes_least_recently_used_first(tmp_path):
    now = time.time()
    day = 86400.0
    old = tmp_path / "obj" / "ab" / "old.o"
    mid = tmp_path / "lib" / "cd" / "mid.so"
    new = tmp_path / "lowered" / "ef" / "new.json"
    _file(str(old), 4000, now - 3 * day)
    _file(str(mid), 4000, now - 2 * day)
    _file(str(new), 4000, now - 1 * day)
    # the old entry's record was touched by a recent cache hit: the pair counts as used then
    _file(str(old) + ".sha256", 80, now - 0.5 * day)
    out = disk_cache.prune(str(tmp_path), limit=10000, now=now)
    assert out["bytes_before"] == 12080
    assert not mid.exists() and not new.exists()
    assert old.exists() and (tmp_path / "obj" / "ab" / "old.o.sha256").exists()
    assert out["bytes_after"] <= 0.8 * 10000 and out["removed"] == 2


def test_prune_keeps_recent_files_and_the_runtime_copy(tmp_path):
    now = time.time()
    recent = tmp_path / "obj" / "aa" / "r.o"
    _file(str(recent), 9000, now - 60)  # used a minute ago: a concurrent build may be about to link it
    pool = tmp_path / "runtime" / "thread_pool-0123.so"
    _file(str(pool), 9000, now - 30 * 86400)
    out = disk_cache.prune(str(tmp_path), limit=1000, now=now)
    assert recent.exists() and pool.exists() and out["removed"] == 0


def test_no_cap_and_under_cap_remove_nothing(tmp_path):
    now = time.time()
    f = tmp_path / "lib" / "x.so"
    _file(str(f), 5000, now - 10 * 86400)
    assert disk_cache.prune(str(tmp_path), limit=0, now=now)["removed"] == 0
    assert disk_cache.prune(str(tmp_path), limit=6000, now=now)["removed"] == 0
    assert f.exists()


def test_cap_from_environment(monkeypatch):
    monkeypatch.setenv("KILN_CACHE_MAX_MB", "2")
    assert disk_cache.max_bytes() == 2 << 20
    monkeypatch.setenv("KILN_CACHE_MAX_MB", "0")
    assert disk_cache.max_bytes() == 0
    monkeypatch.setenv("KILN_CACHE_MAX_MB", "lots")
    assert disk_cache.max_bytes() == disk_cache.DEFAULT_MAX_MB << 20


def test_a_build_prunes_an_oversized_cache_and_still_runs(tmp_path, monkeypatch):
    """End to end: a stale 3 MB file in a cache capped at 1 MB is removed by the next build's write; the
    build's own fresh entries stay and its kernel runs."""
    import kiln as tvm
    from kiln import te
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("KILN_CACHE_MAX_MB", "1")
    monkeypatch.setitem(disk_cache._state, "checked", False)
    stale = tmp_path / "onnx_backend" / "stale.so"
    _file(str(stale), 3 << 20, time.time() - 7 * 86400)
    n = te.var("n")
    a = te.placeholder((n,), name="a")
    b = te.compute((n,), lambda i: a[i] * 2.0 + 1.0, name="b")
    f = tvm.build(te.create_schedule(b.op), [a, b], "llvm")
    x = np.random.rand(37).astype("float32")
    y = tvm.nd.empty((37,), "float32")
    f(tvm.nd.array(x), y)
    np.testing.assert_allclose(y.numpy(), x * 2 + 1, rtol=1e-6)
    assert not stale.exists()
    assert (tmp_path / disk_cache._STAMP).exists()
    assert any(p.suffix == ".o" for p in (tmp_path / "obj").rglob("*.o"))
