"""kiln's thread pool outside a Python process that has one: a standalone executable linked from a kernel's
object file (the pool is linked in and wired at start-up), and an exported .so loaded where there is no C
compiler and no cached pool copy (the pool linked into the export serves the process)."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
from kiln.contrib import cc
from kiln.runtime import thread_pool
from thread_pool_util import expect_row_sum, row_sum

codegen_c = importlib.import_module("kiln.target.codegen_c")
compiler = importlib.import_module("kiln.target.compiler")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROWS, COLS = 1031, 37


@pytest.fixture(autouse=True)
def pool_backend(monkeypatch):
    monkeypatch.setattr(codegen_c, "PARALLEL_BACKEND", "pool")


def _row_sum(name: str):
    f = row_sum(ROWS, COLS, name)
    assert codegen_c.parallel_loop_marker("pool") in f.get_source()
    return f


_MAIN = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
typedef union { int64_t v_int64; double v_float64; void* v_handle; } KilnValue;
int32_t rowsum_exe(KilnValue* args, int32_t num_args);
int32_t kiln_pool_stats(int64_t* out, int32_t n);

/* in.bin out.bin: run the kernel until a pool worker has run a chunk (at most 2000 calls), then write the
 * result and print the pool's counters */
int main(int argc, char** argv) {
  static float a[%(rows)d * %(cols)d], c[%(rows)d];
  FILE* f = fopen(argv[1], "rb");
  if (!f || fread(a, sizeof(float), %(rows)d * %(cols)d, f) != %(rows)d * %(cols)d) return 2;
  fclose(f);
  int64_t stats[5] = {0};  /* the first five counters: the pool writes no more than it is asked for */
  int calls = 0;
  for (; calls < 2000; ++calls) {
    KilnValue args[2];
    args[0].v_handle = a;
    args[1].v_handle = c;
    if (rowsum_exe(args, 2) != 0) return 3;
    kiln_pool_stats(stats, 5);
    if (stats[4] > 0) { ++calls; break; }
  }
  f = fopen(argv[2], "wb");
  if (!f || fwrite(c, sizeof(float), %(rows)d, f) != %(rows)d) return 4;
  fclose(f);
  printf("workers %%lld jobs %%lld serial %%lld worker_chunks %%lld calls %%d\n", (long long)stats[0],
         (long long)stats[1], (long long)stats[2], (long long)stats[4], calls);
  return 0;
}
"""


def _stats(line: str) -> dict:
    words = line.split()
    return {words[i]: int(words[i + 1]) for i in range(0, len(words), 2)}


def test_standalone_executable_runs_parallel_loop_on_the_pool(tmp_path):
    f = _row_sum("rowsum_exe")
    f.save(str(tmp_path / "kernel.o"))
    main = tmp_path / "main.c"
    main.write_text(_MAIN % {"rows": ROWS, "cols": COLS})
    exe = str(tmp_path / "rowsum")
    cc.create_executable(exe, [str(main), str(tmp_path / "kernel.o")])
    a = np.random.default_rng(5).standard_normal((ROWS, COLS)).astype(np.float32)
    a.tofile(tmp_path / "a.bin")
    for threads in (2, 1):
        env = dict(os.environ, KILN_NUM_THREADS=str(threads))
        env.pop("TVM_NUM_THREADS", None)
        out = subprocess.run([exe, str(tmp_path / "a.bin"), str(tmp_path / "c.bin")], capture_output=True,
                             text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        np.testing.assert_allclose(np.fromfile(tmp_path / "c.bin", np.float32), expect_row_sum(a), rtol=1e-5, atol=1e-5)
        stats = _stats(out.stdout)
        if threads == 2:  # a second thread (the pool's one worker) ran part of the loop
            assert stats["workers"] == 1 and stats["jobs"] >= 1 and stats["worker_chunks"] > 0, out.stdout
        else:  # KILN_NUM_THREADS=1 reaches the pool of an executable: every loop ran serially on main's thread
            assert stats["workers"] == 0 and stats["jobs"] == 0 and stats["serial"] == stats["calls"], out.stdout


def test_executable_without_parallel_kernels_gets_no_pool(tmp_path):
    main = tmp_path / "hello.c"
    main.write_text("#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n")
    assert compiler.thread_pool_link_objects([str(main)]) == []
    exe = str(tmp_path / "hello")
    cc.create_executable(exe, [str(main)])
    assert subprocess.run([exe], capture_output=True, text=True).stdout == "hi\n"


_CHILD = textwrap.dedent(r"""
    import importlib.abc, json, os, shutil, sys
    BLOCKED = ("kiln.target", "kiln.relay", "kiln.te", "kiln.tir", "kiln.topi", "kiln.autotvm", "kiln.driver")

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ImportError("blocked for this test: " + name)
            return None

    sys.meta_path.insert(0, Block())
    assert shutil.which("gcc") is None and shutil.which("cc") is None
    import numpy as np
    import kiln.runtime
    from kiln.runtime import thread_pool, set_num_threads
    set_num_threads(2)
    a = np.load(sys.argv[3])
    result = {"addresses": []}
    for path in sys.argv[1:3]:
        m = kiln.runtime.load_module(path)
        lib = m.library
        import ctypes
        result["addresses"].append([ctypes.c_void_p.in_dll(lib._cdll, "__kiln_parallel_launch").value,
                                    ctypes.cast(lib._cdll.kiln_pool_launch, ctypes.c_void_p).value])
        c = kiln.runtime.nd.array(np.zeros(a.shape[0], np.float32))
        for _ in range(2000):
            m[m.entry_name](kiln.runtime.nd.array(a), c)
            if thread_pool.pool_stats()["chunks_by_workers"] > 0:
                break
        np.save(path + ".out.npy", c.numpy())
    result["stats"] = thread_pool.pool_stats()
    result["cache"] = sorted(os.listdir(os.environ["KILN_CACHE_DIR"]))
    print(json.dumps(result))
""")


def test_exported_module_brings_its_pool_without_compiler_or_cache(tmp_path):
    """A fresh process with the compiler packages blocked, no C compiler on PATH and an empty KILN_CACHE_DIR: the
    first export's pool becomes the process's pool, and the second export's loops run on that same one."""
    paths = []
    for name in ("rowsum_dep1", "rowsum_dep2"):
        path = str(tmp_path / f"{name}.so")
        _row_sum(name).export_library(path)
        paths.append(path)
    a = np.random.default_rng(8).standard_normal((ROWS, COLS)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    empty_cache = tmp_path / "empty_cache"
    empty_cache.mkdir()
    bin_dir = tmp_path / "bin"  # PATH holds only the Python interpreter: no gcc, no cc
    bin_dir.mkdir()
    os.symlink(sys.executable, bin_dir / "python")
    env = dict(os.environ, PATH=str(bin_dir), KILN_CACHE_DIR=str(empty_cache),
               PYTHONPATH=os.pathsep.join([ROOT] + [p for p in sys.path if p]))
    env.pop("CC", None)
    out = subprocess.run([str(bin_dir / "python"), "-c", _CHILD, *paths, str(tmp_path / "a.npy")],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    import json
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for path in paths:
        np.testing.assert_allclose(np.load(path + ".out.npy"), expect_row_sum(a), rtol=1e-5, atol=1e-5)
    (first_ptr, first_pool), (second_ptr, second_pool) = result["addresses"]
    assert first_ptr == first_pool and second_ptr == first_pool != second_pool  # one pool per process
    stats = result["stats"]
    assert stats["jobs"] >= 2 and stats["workers"] == 1 and stats["chunks_by_workers"] > 0, stats
    assert "runtime" not in result["cache"]  # no pool copy was built or found


def test_exported_module_uses_the_process_pool_when_there_is_one(tmp_path):
    path = str(tmp_path / "rowsum_own.so")
    _row_sum("rowsum_own").export_library(path)
    m = kiln.runtime.load_module(path)
    import ctypes
    slot = ctypes.c_void_p.in_dll(m.library._cdll, "__kiln_parallel_launch")
    own = ctypes.cast(m.library._cdll.kiln_pool_launch, ctypes.c_void_p).value
    assert slot.value == thread_pool.launch_address() != own
