"""Modules that TVM users' test files import at top level exist in kiln and answer honestly on a machine
without a GPU: contrib.nvcc, contrib.cudnn, contrib.pickle_memoize, script (T / I)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kiln.error import ArgumentError, DeviceError, OpNotImplemented

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_top_level_imports_of_tvm_test_files():
    """The import block of TVM's relay/topi/frontend tests, with ``tvm`` spelled ``kiln``."""
    code = textwrap.dedent("""
        import kiln as tvm
        import kiln.testing
        import kiln.topi.testing
        from kiln import te, topi, relay
        from kiln.contrib import graph_executor, utils
        from kiln.contrib.nvcc import have_fp16, have_int8, have_tensorcore, have_bf16
        from kiln.contrib import cudnn, nvcc
        from kiln.contrib.pickle_memoize import memoize
        from kiln.script import tir as T
        from kiln.script import ir as I
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=REPO)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"


# -- nvcc ------------------------------------------------------------------------------------------------
def test_capabilities_are_pure_functions_of_the_version():
    from kiln.contrib import nvcc
    assert nvcc.parse_compute_version("8.6") == (8, 6)
    assert nvcc.have_fp16("5.3") and nvcc.have_fp16("6.0") and nvcc.have_fp16("9.0")
    assert not nvcc.have_fp16("5.2") and not nvcc.have_fp16("3.5")
    assert nvcc.have_int8("6.1") and not nvcc.have_int8("5.3")
    assert nvcc.have_tensorcore("7.0") and nvcc.have_tensorcore("8.9") and not nvcc.have_tensorcore("6.1")
    assert nvcc.have_bf16("8.0") and not nvcc.have_bf16("7.5")


def test_no_version_means_no_capability():
    from kiln.contrib import nvcc
    for check in (nvcc.have_fp16, nvcc.have_int8, nvcc.have_bf16):
        assert check(None) is False
        assert check("") is False


def test_parse_compute_version_rejects_garbage():
    from kiln.contrib import nvcc
    for bad in ("8", "sm_80", "x.y", "8.0.1"):
        with pytest.raises(ArgumentError, match="compute version"):
            nvcc.parse_compute_version(bad)


def test_target_arch_gives_the_compute_version():
    from kiln.contrib import nvcc
    from kiln.target import Target
    assert nvcc.get_target_compute_version(Target("cuda -arch=sm_86")) == "8.6"
    assert nvcc.have_tensorcore(target=Target("cuda -arch=sm_75")) is True
    assert nvcc.have_tensorcore(target="cuda -arch=sm_61") is False


def test_without_gpu_or_arch_answers_honestly():
    from kiln.contrib import nvcc
    gpu = nvcc._gpu_compute_version()
    if gpu is not None:
        assert nvcc.get_target_compute_version() == gpu
        return
    with pytest.raises(DeviceError, match="no CUDA GPU"):
        nvcc.get_target_compute_version()
    with pytest.warns(UserWarning, match="no CUDA GPU"):
        assert nvcc.have_tensorcore() is False
    import kiln
    assert kiln.cuda(0).exist is False   # what TVM tests check before touching the GPU


@pytest.mark.skipif(shutil.which("nvcc") is None and not os.path.isfile("/usr/local/cuda/bin/nvcc"),
                    reason="no CUDA toolkit")
def test_compile_cuda_to_ptx_without_a_gpu():
    from kiln.contrib import nvcc
    from kiln.error import CompileError
    assert len(nvcc.get_cuda_version()) == 2
    ptx = nvcc.compile_cuda('extern "C" __global__ void add_one(float* a) { a[threadIdx.x] += 1.0f; }',
                            arch="sm_80")
    assert b".entry add_one" in ptx and b".target sm_80" in ptx
    with pytest.raises(CompileError, match="nvcc failed"):
        nvcc.compile_cuda("this is not CUDA", arch="sm_80")


# -- cudnn -----------------------------------------------------------------------------------------------
def test_cudnn_absent_and_ops_refuse():
    from kiln.contrib import cudnn
    assert cudnn.exists() is False
    with pytest.raises(OpNotImplemented, match="no cuDNN backend"):
        cudnn.conv_forward(None, None, 1, 1, 1, 1, 0, -1, "float32")
    with pytest.raises(NotImplementedError):
        cudnn.softmax(None, -1)


def test_cudnn_shape_helpers_match_numpy_conv():
    from kiln.contrib import cudnn
    rng = np.random.default_rng(0)
    for _ in range(5):
        h, w = (int(v) for v in rng.integers(5, 12, 2))
        k = int(rng.integers(1, 5))
        pad, stride, dil = int(rng.integers(0, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 3))
        x = np.zeros((1, 2, h, w))
        xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        span = (k - 1) * dil + 1
        oh = len(range(0, xp.shape[2] - span + 1, stride))
        ow = len(range(0, xp.shape[3] - span + 1, stride))
        assert cudnn.conv_output_shape(0, pad, stride, dil, list(x.shape), [3, 2, k, k], "float32",
                                       "float32") == [1, 3, oh, ow]
    assert cudnn.conv_output_shape(1, [1, 0], [1, 2], 1, [2, 9, 8, 6], [4, 3, 3, 3], "float32", "float32",
                                   groups=2) == [2, 9, 3, 4]
    # the data gradient shape inverts the forward shape (output_padding restores the stride remainder)
    assert cudnn.conv_dgrad_shape(0, 1, 2, 1, [1, 4, 4, 5], [4, 3, 3, 3], (1, 1)) == [1, 3, 8, 10]
    assert cudnn.conv_output_shape(0, 1, 2, 1, [1, 3, 8, 10], [4, 3, 3, 3], "float32", "float32") == [1, 4, 4, 5]
    with pytest.raises(ArgumentError, match="input channels"):
        cudnn.conv_output_shape(0, 1, 1, 1, [1, 3, 8, 8], [4, 2, 3, 3], "float32", "float32")
    assert cudnn.algo_to_index("fwd", "CUDNN_CONVOLUTION_FWD_ALGO_GEMM") == 2
    assert cudnn.algo_to_index("bwd_data", "CUDNN_CONVOLUTION_BWD_DATA_ALGO_0") == 0
    with pytest.raises(ArgumentError, match="unknown cuDNN"):
        cudnn.algo_to_index("fwd", "CUDNN_CONVOLUTION_FWD_ALGO_MAGIC")


# -- pickle_memoize --------------------------------------------------------------------------------------
def test_memoize_caches_per_arguments(monkeypatch, tmp_path):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    from kiln.contrib.pickle_memoize import memoize
    calls = []

    @memoize("kiln.tests.compat")
    def ref_data(n, scale):
        calls.append((n, scale))
        return np.arange(n) * scale

    a = ref_data(4, 2.0)
    b = ref_data(4, 2.0)
    np.testing.assert_array_equal(a, [0, 2, 4, 6])
    assert a is b and calls == [(4, 2.0)]
    ref_data(5, 2.0)
    assert len(calls) == 2
    with pytest.raises(ArgumentError, match="positional"):
        ref_data(n=4, scale=2.0)
    with pytest.raises(ArgumentError, match="ndarray"):
        ref_data(np.zeros(2), 1.0)


def test_memoize_save_at_exit_persists_across_processes(tmp_path):
    code = textwrap.dedent("""
        import sys
        from kiln.contrib.pickle_memoize import memoize
        @memoize("kiln.tests.persist", save_at_exit=True)
        def f(x):
            print("computed", flush=True)
            return x * 3
        assert f(7) == 21
    """)
    env = dict(os.environ, PYTHONPATH=REPO, KILN_CACHE_DIR=str(tmp_path))
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
            for _ in range(2)]
    assert all(o.returncode == 0 for o in outs), [o.stderr for o in outs]
    assert outs[0].stdout.count("computed") == 1 and outs[1].stdout.count("computed") == 0
    assert (tmp_path / "pkl_memoize" / "kiln.tests.persist.f.pkl").is_file()


# -- TVMScript -------------------------------------------------------------------------------------------
def test_script_types_build_tir_objects():
    from kiln import tir
    from kiln.script import tir as T
    c = T.int32(5)
    assert isinstance(c, tir.IntImm) and c.value == 5 and c.dtype == "int32"
    assert T.float32(T.int32(3)).dtype == "float32"
    assert T.int64().dtype == "int64"
    buf = T.Buffer((3, 4), "float16")
    assert [int(s) for s in buf.shape] == [3, 4] and buf.dtype == "float16"
    assert [int(s) for s in T.Buffer[(8,), "int8"].shape] == [8]
    assert T.handle().dtype == "handle"


def test_script_parsing_raises_clear_not_implemented():
    from kiln.script import ir as I
    from kiln.script import tir as T
    with pytest.raises(NotImplementedError, match="cannot parse TVMScript yet.*kiln.te"):
        @T.prim_func
        def main(a: T.handle, b: T.Buffer((128,), "float32")):
            T.evaluate(0)
    with pytest.raises(NotImplementedError, match="T.prim_func"):
        T.prim_func(private=True)
    with pytest.raises(NotImplementedError, match="I.ir_module"):
        @I.ir_module
        class Module:
            pass
    with pytest.raises(NotImplementedError, match="T.grid"):
        T.grid(4, 4)
    import kiln.script
    with pytest.raises(NotImplementedError, match="from_source"):
        kiln.script.from_source("# from tvm.script import tir as T")
