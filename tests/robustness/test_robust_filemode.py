"""Files kiln writes get the mode the C compiler would give them under the process umask (0755 for a shared
library under umask 022), not a mkstemp file's 0600 turned into 0711 by the linker."""
import os
import stat

import pytest

import kiln
from kiln import te
from kiln.contrib import cc
from kiln.target import compiler


@pytest.fixture
def umask022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _module():
    A = te.placeholder((5,), name="A")
    B = te.compute((5,), lambda i: A[i] + 1.0, name="B")
    return kiln.build(te.create_schedule(B.op), [A, B], "llvm")


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_export_library_mode(tmp_path, umask022):
    path = tmp_path / "m.so"
    _module().export_library(str(path))
    assert _mode(path) == 0o755
    assert kiln.runtime.load_module(str(path)) is not None
    assert sorted(os.listdir(tmp_path)) == ["m.so"]  # no staging leftovers


def test_export_library_respects_umask(tmp_path):
    old = os.umask(0o077)
    try:
        path = tmp_path / "private.so"
        _module().export_library(str(path))
    finally:
        os.umask(old)
    assert _mode(path) == 0o700


def test_create_shared_and_cache_modes(tmp_path, monkeypatch, umask022):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    obj = compiler.compile_object(kiln.runtime.abi.C_PRELUDE + "int kiln_mode_probe(void) { return 3; }\n")
    assert _mode(obj) == 0o644 and _mode(obj + ".sha256") == 0o644
    out = tmp_path / "lib.so"
    cc.create_shared(str(out), [obj])
    assert _mode(out) == 0o755
    so = compiler.link_cached([obj])
    assert _mode(so) == 0o755
