"""export_library -> load_module, including in a process that has no C compiler, and damaged files."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
from kiln import nd
from kiln.error import ModuleLoadError
from kiln.runtime import Module, load_module, register_func

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class KVModule(Module):
    """A non-code module (stands in for the graph executor factory) to exercise the extension point."""

    type_key = "test_kv"

    def __init__(self, text, data):
        super().__init__()
        self.text, self.data = text, data

    def blob_header(self):
        return {"text": self.text}

    def blob_payloads(self):
        return {"data": self.data}

    def _get_local_function(self, name):
        if name == "get_text":
            return lambda: self.text
        return None


@register_func("runtime.module.loadbinary_test_kv", override=True)
def _load_kv(header, payloads, library):
    return KVModule(header["text"], payloads["data"])


def _check_vadd(mod, rng, n=33):
    x = rng.standard_normal(n).astype("float32")
    y = rng.standard_normal(n).astype("float32")
    c = nd.empty((n,))
    mod["vadd"](nd.array(x), nd.array(y), c)
    np.testing.assert_allclose(c.numpy(), x + y, rtol=1e-6)


@pytest.mark.parametrize("ext", ["so", "tar"])
def test_export_and_load(add_module, tmp_path, rng, ext):
    path = str(tmp_path / f"lib.{ext}")
    add_module.export_library(path)
    loaded = load_module(path)
    assert loaded.type_key == "library"
    assert loaded.entry_name == "vadd"
    assert loaded.get_source() == add_module.get_source()
    _check_vadd(loaded, rng)
    x = rng.standard_normal((4, 3))
    y = nd.empty((4, 3), "float64")
    loaded["axpb"](nd.array(x), y, 1.5, 2)
    np.testing.assert_allclose(y.numpy(), 1.5 * x + 2)


def test_module_tree_round_trip(add_module, tmp_path, rng):
    payload = bytes(range(256)) * 1000 + b"\x00tail"
    root = KVModule("hello", payload)
    root.import_module(add_module)
    path = str(tmp_path / "tree.so")
    root.export_library(path)
    loaded = load_module(path)
    assert isinstance(loaded, KVModule) and loaded.type_key == "test_kv"
    assert loaded.text == "hello" and loaded.data == payload
    assert loaded["get_text"]() == "hello"
    assert len(loaded.imported_modules) == 1
    _check_vadd(loaded.imported_modules[0], rng)
    assert loaded.get_function("vadd", query_imports=True) is loaded.imported_modules[0]["vadd"]


def test_module_without_code(tmp_path):
    path = str(tmp_path / "nocode.so")
    KVModule("only data", b"123").export_library(path)
    assert load_module(path).data == b"123"


def test_reexport_to_same_path(add_module, tmp_path):
    path = str(tmp_path / "same.so")
    KVModule("first", b"1").export_library(path)
    assert load_module(path).text == "first"
    KVModule("second", b"2").export_library(path)
    assert load_module(path).text == "second"  # not the stale, already-mapped library


def test_missing_loader(tmp_path):
    class Orphan(KVModule):
        type_key = "test_orphan_kind"

    path = str(tmp_path / "orphan.so")
    Orphan("x", b"").export_library(path)
    with pytest.raises(ModuleLoadError, match="runtime.module.loadbinary_test_orphan_kind"):
        load_module(path)


def test_missing_and_unknown_files(tmp_path):
    with pytest.raises(ModuleLoadError, match="no such file"):
        load_module(str(tmp_path / "absent.so"))
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(ModuleLoadError, match="unsupported file type"):
        load_module(str(tmp_path / "x.txt"))
    (tmp_path / "fake.so").write_bytes(b"not an elf at all" * 10)
    with pytest.raises(ModuleLoadError, match="not a shared library"):
        load_module(str(tmp_path / "fake.so"))


@pytest.fixture(scope="module")
def exported(add_module, tmp_path_factory):
    folder = tmp_path_factory.mktemp("exported")
    so, tar = str(folder / "m.so"), str(folder / "m.tar")
    add_module.export_library(so)
    add_module.export_library(tar)
    return {"so": open(so, "rb").read(), "tar": open(tar, "rb").read()}


@pytest.mark.parametrize("ext", ["so", "tar"])
@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.3, 0.5, 0.9, 0.999, "minus1"])
def test_truncated(exported, tmp_path, ext, fraction):
    data = exported[ext]
    cut = len(data) - 1 if fraction == "minus1" else int(len(data) * fraction)
    path = tmp_path / f"cut.{ext}"
    path.write_bytes(data[:cut])
    with pytest.raises(ModuleLoadError):
        load_module(str(path))


@pytest.mark.parametrize("ext", ["so", "tar"])
@pytest.mark.parametrize("where", [0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 0.9999])
def test_corrupted(exported, tmp_path, ext, where):
    data = bytearray(exported[ext])
    pos = min(int(len(data) * where), len(data) - 1)
    for i in range(pos, min(pos + 16, len(data))):
        data[i] ^= 0x5A
    path = tmp_path / f"bad.{ext}"
    path.write_bytes(bytes(data))
    with pytest.raises(ModuleLoadError):
        load_module(str(path))


def test_load_without_compiler(add_module, tmp_path, rng):
    """The exported .so runs in a fresh process with no C compiler on PATH and CC unset."""
    lib = str(tmp_path / "deploy.so")
    add_module.export_library(lib)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(sys.executable, bindir / "python3")
    x = rng.standard_normal(29).astype("float32")
    np.save(tmp_path / "x.npy", x)
    script = textwrap.dedent(f"""
        import json, shutil, sys
        import numpy as np
        assert all(shutil.which(c) is None for c in ("gcc", "cc", "clang")), "a compiler is visible"
        import kiln
        from kiln import nd
        assert not kiln.runtime.enabled("llvm")
        mod = kiln.runtime.load_module({lib!r})
        x = np.load({str(tmp_path / "x.npy")!r})
        c = nd.empty(x.shape)
        mod["vadd"](nd.array(x), nd.array(x), c)
        try:
            kiln.runtime.load_module({lib!r}.replace("deploy.so", "deploy.tar"))
        except kiln.error.ModuleLoadError:
            pass
        print(json.dumps({{"out": c.numpy().tolist(), "driver_imported": "kiln.target.compiler" in sys.modules,
                          "threads": kiln.runtime.library.num_threads()}}))
    """)
    # numpy's site directory too: a symlink to a virtualenv's interpreter outside the virtualenv runs as the
    # base interpreter, which need not have numpy
    site = os.path.dirname(os.path.dirname(np.__file__))
    env = {"PATH": str(bindir), "PYTHONPATH": os.pathsep.join([REPO, site]), "HOME": str(tmp_path),
           "KILN_CACHE_DIR": str(tmp_path / "cache"), "KILN_NUM_THREADS": "1"}
    proc = subprocess.run([str(bindir / "python3"), "-c", script], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(result["out"], 2 * x, rtol=1e-6)
    assert result["threads"] == 1


def test_load_tar_without_compiler_is_clear(add_module, tmp_path, monkeypatch):
    path = str(tmp_path / "m.tar")
    add_module.export_library(path)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(ModuleLoadError, match="needs a C compiler"):
        load_module(path)


def test_export_errors(add_module, tmp_path, monkeypatch):
    with pytest.raises(kiln.KilnError, match="unsupported file type"):
        add_module.export_library(str(tmp_path / "m.zip"))
    loaded_path = str(tmp_path / "m.so")
    add_module.export_library(loaded_path)
    with pytest.raises(kiln.KilnError, match="cannot be exported again"):
        load_module(loaded_path).export_library(str(tmp_path / "again.so"))


def test_export_with_workspace_and_fcompile(add_module, tmp_path, rng):
    from kiln.contrib import cc

    ws = tmp_path / "ws"
    ws.mkdir()
    calls = []

    def fcompile(output, files, **kwargs):
        calls.append((output, list(files), kwargs))
        return cc.create_shared(output, files, **kwargs)

    path = str(tmp_path / "custom.so")
    add_module.export_library(path, fcompile=fcompile, workspace_dir=str(ws), options=["-O2"])
    assert calls and calls[0][2] == {"options": ["-O2"]}
    assert "devc.o" in os.listdir(ws)
    _check_vadd(load_module(path), rng)
