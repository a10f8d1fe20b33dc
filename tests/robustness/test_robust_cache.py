"""Corrupted compile-cache entries: every hit is checked against the size and sha256 recorded beside it; a
truncated, same-size-corrupted, empty or unrecorded ``.o``/``.so`` is evicted and rebuilt, never linked or
dlopen'ed (which died by SIGBUS/SIGSEGV/SIGILL before)."""
import glob
import os

import numpy as np
import pytest

import kiln
from kiln import te
from kiln.target import compiler


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("KILN_CACHE_DIR", str(folder))
    compiler.stats.reset()
    return folder


def _build_and_check(scale: float) -> None:
    n = 19
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * scale + 1.0, name="B")
    s = te.create_schedule(B.op)
    f = kiln.build(s, [A, B], "llvm")
    a = np.arange(n, dtype="float32")
    b = kiln.nd.empty((n,), "float32")
    f(kiln.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), a * scale + 1.0)


def _entries(cache, kind):
    ext = ".o" if kind == "obj" else ".so"
    return sorted(glob.glob(os.path.join(str(cache), kind, "*", "*" + ext)))


def _truncate(path):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size // 2)


def _empty(path):
    with open(path, "r+b") as f:
        f.truncate(0)


def _flip(path):
    """Same size, different bytes (what a bad disk block or a stray write does)."""
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        for off in range(64, size, max(size // 16, 1)):
            f.seek(off)
            f.write(b"\xcc\xcc\xcc\xcc")
    assert os.path.getsize(path) == size


def _drop_record_and_truncate(path):
    os.remove(path + ".sha256")
    _truncate(path)


def _bad_record(path):
    with open(path + ".sha256", "w") as f:
        f.write("garbage")


DAMAGE = {"truncated": _truncate, "empty": _empty, "same_size": _flip, "no_record_truncated": _drop_record_and_truncate,
          "bad_record": _bad_record}


@pytest.mark.parametrize("kind", ["lib", "obj"])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_entry_is_evicted_and_rebuilt(cache, kind, damage):
    scale = 2.0 + len(damage) + (0.5 if kind == "obj" else 0.0)  # a kernel of its own per case
    _build_and_check(scale)
    (entry,) = _entries(cache, kind)
    assert os.path.isfile(entry + ".sha256")
    DAMAGE[damage](entry)
    compiler._verified.clear()  # as a fresh process finds the cache
    compiler.stats.reset()
    _build_and_check(scale)
    assert compiler.stats.evictions >= 1
    # the entry is repaired: present again, and a further build is a verified hit
    entries = _entries(cache, kind)
    assert entries and all(compiler._entry_is_intact(e) for e in entries)
    compiler.stats.reset()
    _build_and_check(scale)
    assert compiler.stats.evictions == 0 and compiler.stats.misses == 0


def test_damage_after_a_verified_hit_in_the_same_process_is_seen(cache):
    """The per-process memo of verified entries is keyed by the file's version (inode, mtime, size)."""
    _build_and_check(3.25)
    _build_and_check(3.25)  # verified hit, memoized
    (entry,) = _entries(cache, "lib")
    _flip(entry)
    os.utime(entry, ns=(1, 1))  # a write in the same mtime tick is still a new version
    compiler.stats.reset()
    _build_and_check(3.25)
    assert compiler.stats.evictions == 1


def test_records_are_written_atomically_beside_entries(cache):
    _build_and_check(4.75)
    for kind in ("obj", "lib"):
        for entry in _entries(cache, kind):
            size, digest = open(entry + ".sha256").read().split()
            assert int(size) == os.path.getsize(entry) and digest == compiler.file_sha256(entry)
    leftovers = [f for d, _, fs in os.walk(str(cache)) for f in fs if f.endswith(".tmp")]
    assert not leftovers


def test_export_refuses_an_object_damaged_after_the_build(cache, tmp_path):
    n = 7
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 5.5, name="B")
    f = kiln.build(te.create_schedule(B.op), [A, B], "llvm")
    (entry,) = _entries(cache, "obj")
    _truncate(entry)
    with pytest.raises(kiln.error.KilnError, match="altered or truncated"):
        f.export_library(str(tmp_path / "m.so"))
    assert not os.path.exists(tmp_path / "m.so")


def test_intact_entry_without_record_is_adopted(cache):
    """Entries written by an older kiln (no record) are kept when their ELF structure is whole."""
    _build_and_check(6.5)
    for kind in ("obj", "lib"):
        for entry in _entries(cache, kind):
            os.remove(entry + ".sha256")
    compiler._verified.clear()
    compiler.stats.reset()
    _build_and_check(6.5)
    assert compiler.stats.evictions == 0 and compiler.stats.misses == 0
    assert all(os.path.exists(e + ".sha256") for k in ("obj", "lib") for e in _entries(cache, k))
