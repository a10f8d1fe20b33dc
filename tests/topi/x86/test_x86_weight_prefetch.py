"""The x86 convs request the next task's weights between their arithmetic (``topi/x86/utils.prefetch_weights``,
``Stage.prefetch(..., spread_over=)``): the direct NCHWc conv's parallel loop over (output-channel chunk, row
tile), where each chunk's row tiles request the next chunk (order 0) or each task the next task's chunk (order 1),
and the Winograd GEMM's loop over the transformed tiles' positions, each requesting the next position's weights.
The dense's loop over (column panel, row block) likewise: a panel's row blocks request the next panel, a share
per slice of the reduction. Both ISAs' code is compiled (run where the host can), numerics against PyTorch /
numpy on odd shapes; weights under the threshold get no prefetch, nor do the weights of a network that fits the
last-level cache (relay.backend.te_compiler.weight_residency): the tests that expect requests build as on a CPU
whose last-level cache (1 MiB, ``small_cache``) the weights exceed."""
import re

import numpy as np
import pytest
import torch

import kiln as tvm
from kiln import relay
from kiln.target.x86 import host_can_run
from kiln.topi.x86.utils import PREFETCH_WEIGHT_BYTES

from conv_fusion_util import kernel_source, run

TARGETS = ["llvm -mcpu=core-avx2", "llvm -mcpu=skylake-avx512"]
SPREAD = re.compile(r"__builtin_prefetch\([^;]*, 0, 2\);")  # a spread request: read, into the caches below L1


@pytest.fixture
def small_cache(monkeypatch):
    """Build as on a CPU with a 1 MiB last-level cache: the weights of every network below exceed it."""
    import kiln.runtime.benchmark as bench
    monkeypatch.setattr(bench, "last_level_cache_bytes", lambda: 1 << 20)


@pytest.fixture
def big_cache(monkeypatch):
    """Build as on a CPU with a 1 GiB last-level cache: the weights stay in it."""
    import kiln.runtime.benchmark as bench
    monkeypatch.setattr(bench, "last_level_cache_bytes", lambda: 1 << 30)


def _conv(rng, cin, cout, h, w, k, stride):
    x = relay.var("x", shape=(1, cin, h, w))
    wt = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype("float32")
    y = relay.nn.relu(relay.nn.conv2d(x, relay.const(wt), strides=(stride, stride), padding=(k // 2, k // 2),
                                      channels=cout, kernel_size=(k, k)))

    def reference(a):
        return torch.relu(torch.nn.functional.conv2d(torch.from_numpy(a), torch.from_numpy(wt), stride=stride,
                                                     padding=k // 2)).numpy()
    return tvm.IRModule.from_expr(relay.Function([x], y)), reference, wt.nbytes


def _assert_close_with_nan(got, want):
    """NaN exactly where the reference has it, the finite values close."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-4, atol=2e-4)


def _build(mod, target):
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(mod, target=target)


def _conv_kernel(lib):
    (conv,) = [c for c in lib.lowered if c.anchor_op.startswith("nn.contrib_conv2d_")]
    return conv, kernel_source(lib, conv.func_name)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("cin,cout,h,w,k,stride,template", [
    (2048, 1000, 7, 9, 1, 1, "conv2d_NCHWc.x86"),              # 8 MB of weights, 1000 = 125 blocks of 8: order 0
    (256, 264, 15, 13, 3, 2, "conv2d_NCHWc.x86"),              # 2.4 MB, strided: order 1 (rows outside chunks)
    (256, 248, 14, 13, 3, 1, "conv2d_NCHWc_winograd.x86"),     # 2.2 MB, 9x the transformed
])
def test_weight_prefetch_in_big_convs(target, cin, cout, h, w, k, stride, template, small_cache):
    rng = np.random.default_rng(cin + cout)
    mod, reference, nbytes = _conv(rng, cin, cout, h, w, k, stride)
    assert nbytes >= PREFETCH_WEIGHT_BYTES
    lib = _build(mod, target)
    conv, body = _conv_kernel(lib)
    assert conv.implementation == template
    assert SPREAD.search(body), "no spread weight prefetch in the conv kernel"
    if not host_can_run(target):
        return
    a = rng.standard_normal((1, cin, h, w)).astype("float32")
    np.testing.assert_allclose(run(lib, a), reference(a), rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_no_weight_prefetch_under_the_threshold(target, small_cache):
    rng = np.random.default_rng(7)
    mod, reference, nbytes = _conv(rng, 256, 250, 7, 7, 1, 1)   # 250 KB
    assert nbytes < PREFETCH_WEIGHT_BYTES
    lib = _build(mod, target)
    _, body = _conv_kernel(lib)
    assert "__builtin_prefetch" not in body
    if host_can_run(target):
        a = rng.standard_normal((1, 256, 7, 7)).astype("float32")
        np.testing.assert_allclose(run(lib, a), reference(a), rtol=2e-4, atol=2e-4)


def test_weight_prefetch_keeps_nan_and_inf_where_torch_puts_them(small_cache):
    rng = np.random.default_rng(8)
    mod, reference, _ = _conv(rng, 2048, 1000, 7, 9, 1, 1)
    lib = _build(mod, "llvm")  # numerics on the host; the requests' code is checked per target above
    a = rng.standard_normal((1, 2048, 7, 9)).astype("float32")
    a[0, 5, 3, 4] = np.nan
    a[0, 100, 6, 8] = np.inf
    _assert_close_with_nan(run(lib, a), reference(a))


@pytest.mark.parametrize("target", TARGETS)
def test_weight_prefetch_with_a_symbolic_batch_in_the_vm(target, small_cache):
    # the parallel loop's extent is then symbolic; the request still stops at the weights' last chunk
    from kiln.runtime import vm as vm_rt
    rng = np.random.default_rng(9)
    cin, cout = 2048, 1000
    x = relay.var("x", shape=(relay.Any(), cin, 7, 9))
    wt = (rng.standard_normal((cout, cin, 1, 1)) / 45).astype("float32")
    y = relay.nn.relu(relay.nn.conv2d(x, relay.const(wt), channels=cout, kernel_size=(1, 1)))
    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(tvm.IRModule.from_expr(relay.Function([x], y)), target=target)
    assert SPREAD.search(exe.lib.get_source())
    if not host_can_run(target):
        return
    m = vm_rt.VirtualMachine(exe, tvm.cpu())
    for batch in (1, 3):
        a = rng.standard_normal((batch, cin, 7, 9)).astype("float32")
        want = torch.relu(torch.nn.functional.conv2d(torch.from_numpy(a), torch.from_numpy(wt))).numpy()
        np.testing.assert_allclose(m.invoke("main", tvm.nd.array(a)).numpy(), want, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_no_weight_prefetch_when_the_network_weights_stay_in_cache(target, big_cache):
    rng = np.random.default_rng(10)
    mod, reference, nbytes = _conv(rng, 2048, 1000, 7, 9, 1, 1)   # 8 MB: over the size threshold
    assert nbytes >= PREFETCH_WEIGHT_BYTES
    lib = _build(mod, target)
    assert "__builtin_prefetch" not in _conv_kernel(lib)[1]
    if host_can_run(target):
        a = rng.standard_normal((1, 2048, 7, 9)).astype("float32")
        np.testing.assert_allclose(run(lib, a), reference(a), rtol=2e-4, atol=2e-4)


def _dense(rng, m, k, n):
    x = relay.var("x", shape=(m, k))
    wt = (rng.standard_normal((n, k)) / np.sqrt(k)).astype("float32")
    y = relay.nn.dense(x, relay.const(wt))
    return tvm.IRModule.from_expr(relay.Function([x], y)), wt


def _dense_kernel(lib):
    (d,) = [c for c in lib.lowered if c.anchor_op.startswith("nn.contrib_dense_pack")]
    return kernel_source(lib, d.func_name)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m,k,n", [
    (37, 1000, 1100),   # 4.4 MB; rows not a multiple of the block, columns padded to whole panels
    (1, 768, 1301),     # batch 1: each task requests the next task's panel
    (64, 997, 520),     # a prime reduction: no slices, a share per step
])
def test_dense_weight_prefetch(target, m, k, n, small_cache):
    rng = np.random.default_rng(m + k + n)
    mod, wt = _dense(rng, m, k, n)
    assert wt.nbytes >= PREFETCH_WEIGHT_BYTES
    lib = _build(mod, target)
    assert SPREAD.search(_dense_kernel(lib)), "no spread weight prefetch in the dense kernel"
    if not host_can_run(target):
        return
    a = rng.standard_normal((m, k)).astype("float32")
    a[0, 3] = np.nan
    _assert_close_with_nan(run(lib, a), a.astype(np.float64) @ wt.T.astype(np.float64))


@pytest.mark.parametrize("target", TARGETS)
def test_no_dense_weight_prefetch_when_the_weights_stay_in_cache(target, big_cache):
    rng = np.random.default_rng(11)
    mod, wt = _dense(rng, 37, 1000, 1100)
    lib = _build(mod, target)
    assert "__builtin_prefetch" not in _dense_kernel(lib)
    if host_can_run(target):
        a = rng.standard_normal((37, 1000)).astype("float32")
        np.testing.assert_allclose(run(lib, a), a @ wt.T, rtol=2e-4, atol=2e-4)


def test_weight_residency_counts_the_module_constants(monkeypatch):
    import kiln.runtime.benchmark as bench
    from kiln.relay.backend.te_compiler import weight_residency
    from kiln.topi.utils import weights_stream_from_memory
    rng = np.random.default_rng(12)
    mod, wt = _dense(rng, 4, 256, 512)                   # 512 KiB of weights
    assert weights_stream_from_memory() is None          # no network being compiled
    for llc, expect in ((256 << 10, True), (wt.nbytes, False), (1 << 30, False)):
        monkeypatch.setattr(bench, "last_level_cache_bytes", lambda llc=llc: llc)
        with weight_residency(mod):
            assert weights_stream_from_memory() is expect
        assert weights_stream_from_memory() is None
