"""kiln.target.compiler: the compiler driver and its content-addressed cache."""
import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

from kiln.error import CompileError, KilnError
from kiln.target import create_c_module
from kiln.runtime.abi import C_PRELUDE
from kiln.target import compiler

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SRC = C_PRELUDE + r"""
int32_t twice(KilnValue* args, int32_t num_args) {
  int64_t* A = (int64_t*)args[0].v_handle;
  int64_t n = args[1].v_int64;
  for (int64_t i = 0; i < n; ++i) A[i] *= 2;
  return 0;
}
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("KILN_CACHE_DIR", str(folder))
    compiler.stats.reset()
    return folder


def _tmp_files(folder):
    return [os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs if f.endswith(".tmp")]


def test_cache_hit_on_second_build(cache):
    first = compiler.compile_object(SRC, ["-DKILN_TEST=1"])
    assert compiler.stats.as_dict() == {"hits": 0, "misses": 1, "compiles": 1, "links": 0}
    second = compiler.compile_object(SRC, ["-DKILN_TEST=1"])
    assert second == first
    assert compiler.stats.hits == 1 and compiler.stats.compiles == 1
    third = compiler.compile_object(SRC, ["-DKILN_TEST=2"])  # flags are part of the key
    assert third != first and compiler.stats.compiles == 2
    assert str(cache) in first and not _tmp_files(cache)


def test_build_shared_cached(cache):
    so1 = compiler.build_shared([SRC])
    links = compiler.stats.links
    so2 = compiler.build_shared([SRC])
    assert so1 == so2 and compiler.stats.links == links
    lib = ctypes.CDLL(so1)
    assert lib.twice


def test_create_c_module_uses_cache(cache):
    funcs = [{"name": "twice", "args": [{"name": "A", "kind": "buffer", "dtype": "int64", "shape": ["n"]}],
              "shape_vars": ["n"]}]
    create_c_module(SRC, funcs)
    compiles, links = compiler.stats.compiles, compiler.stats.links
    mod = create_c_module(SRC, funcs)
    assert (compiler.stats.compiles, compiler.stats.links) == (compiles, links)
    assert compiler.stats.hits >= 2
    import numpy as np
    import kiln

    a = kiln.nd.array(np.arange(5, dtype="int64"))
    mod["twice"](a)
    assert a.numpy().tolist() == [0, 2, 4, 6, 8]


def test_compile_error(cache):
    bad = C_PRELUDE + "int32_t broken(KilnValue* args, int32_t n) { return undeclared_thing + ; }\n"
    with pytest.raises(CompileError) as info:
        compiler.compile_object(bad)
    err = info.value
    assert "undeclared_thing" in err.compiler_output and "error" in err.compiler_output
    assert err.source_path and os.path.isfile(err.source_path)
    assert open(err.source_path).read() == bad
    assert err.source_path in str(err) and "undeclared_thing" in str(err)
    assert not _tmp_files(cache)


def test_link_error(cache, tmp_path):
    obj = compiler.compile_object("int missing_fn(void); int f(void) { return missing_fn(); }\n")
    with pytest.raises(CompileError, match="linking"):
        compiler.link_shared([obj], str(tmp_path / "x.so"), ["-Wl,--no-undefined"])


def test_no_compiler(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    assert not compiler.has_compiler()
    with pytest.raises(KilnError, match="no C compiler found"):
        compiler.compile_object(SRC)
    monkeypatch.setenv("CC", "definitely-not-a-compiler-xyz")
    with pytest.raises(KilnError, match="definitely-not-a-compiler-xyz"):
        compiler.find_compiler()


def test_cc_env_is_used(monkeypatch, cache):
    monkeypatch.setenv("CC", "gcc -DFROM_CC_ENV=1")
    assert compiler.find_compiler()[1:] == ["-DFROM_CC_ENV=1"]
    obj = compiler.compile_object("#ifndef FROM_CC_ENV\n#error CC words were dropped\n#endif\nint x;\n")
    assert os.path.isfile(obj)


def test_identity_memoized():
    a = compiler.compiler_identity()
    assert "gcc" in a or "clang" in a or "cc" in a
    assert compiler.compiler_identity() is a


def test_blob_object(cache, tmp_path):
    data = bytes(range(256)) * 40 + b'"quote\\'
    obj = compiler.blob_object(data, str(tmp_path / "blob.o"))
    so = compiler.link_shared([obj], str(tmp_path / "blob.so"))
    lib = ctypes.CDLL(so)
    size = ctypes.c_uint64.in_dll(lib, "__kiln_dev_mblob_size").value
    start = ctypes.addressof(ctypes.c_uint8.in_dll(lib, "__kiln_dev_mblob"))
    assert size == len(data) and start % 64 == 0
    assert ctypes.string_at(start, size) == data


def test_concurrent_processes(cache, tmp_path):
    """Several processes compiling the same source into one empty cache all succeed with one result."""
    big = SRC + "".join(f"int32_t extra_{i}(KilnValue* a, int32_t n) {{ return {i}; }}\n" for i in range(300))
    (tmp_path / "src.c").write_text(big)
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {REPO!r})
        from kiln.target import compiler
        src = open({str(tmp_path / "src.c")!r}).read()
        print(compiler.build_shared([src]))
    """)
    env = dict(os.environ, KILN_CACHE_DIR=str(cache))
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    paths = {o[0].strip() for o in outs}
    assert len(paths) == 1
    lib = ctypes.CDLL(paths.pop())
    assert lib.extra_299() == 299
    assert not _tmp_files(cache)
