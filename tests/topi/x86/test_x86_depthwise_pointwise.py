"""A depthwise conv fused into the 1x1 conv it feeds (FuseOps ``relay.FuseOps.depthwise_pointwise``, the x86
conv2d_NCHWc schedule computing the depthwise rows per row tile): which graphs fuse, numerics against PyTorch on odd
shapes and channel counts for both ISAs (NaN and inf included), the generated code, and the switch."""
import numpy as np
import pytest
import torch

import kiln as tvm
from kiln import relay
from kiln.relay.transform import fuse_ops
from kiln.target.codegen_c import parallel_loop_marker
from kiln.target.x86 import host_can_run

from conv_fusion_util import build, conv_kernels_with, kernel_source, run

TARGETS = ["llvm -mcpu=core-avx2", "llvm -mcpu=skylake-avx512"]


def _block(rng, cin, cmid, cout, h, w, stride=1, epilogue="clip", residual=False, k=3, batch=1):
    """An inverted-residual block: 1x1 expand + clip, kxk depthwise (+ epilogue), 1x1 project (+ residual)."""
    x = relay.var("x", shape=(batch, cin, h, w))
    we = (rng.standard_normal((cmid, cin, 1, 1)) / np.sqrt(cin)).astype("float32")
    wd = (rng.standard_normal((cmid, 1, k, k)) / k).astype("float32")
    wp = (rng.standard_normal((cout, cmid, 1, 1)) / np.sqrt(cmid)).astype("float32")
    bias = rng.standard_normal((cmid,)).astype("float32")
    y = relay.clip(relay.nn.conv2d(x, relay.const(we), channels=cmid, kernel_size=(1, 1)), 0.0, 6.0)
    y = relay.nn.conv2d(y, relay.const(wd), strides=(stride, stride), padding=(k // 2, k // 2), groups=cmid,
                        channels=cmid, kernel_size=(k, k))
    if epilogue == "clip":
        y = relay.clip(y, 0.0, 6.0)
    elif epilogue == "bias_relu":
        y = relay.nn.relu(relay.nn.bias_add(y, relay.const(bias)))
    y = relay.nn.conv2d(y, relay.const(wp), channels=cout, kernel_size=(1, 1))
    if residual:
        y = relay.add(y, x)
    mod = tvm.IRModule.from_expr(relay.Function([x], y))

    def reference(a):
        t = torch.from_numpy(a)
        t = torch.clamp(torch.nn.functional.conv2d(t, torch.from_numpy(we)), 0.0, 6.0)
        t = torch.nn.functional.conv2d(t, torch.from_numpy(wd), stride=stride, padding=k // 2, groups=cmid)
        if epilogue == "clip":
            t = torch.clamp(t, 0.0, 6.0)
        elif epilogue == "bias_relu":
            t = torch.relu(t + torch.from_numpy(bias)[None, :, None, None])
        t = torch.nn.functional.conv2d(t, torch.from_numpy(wp))
        if residual:
            t = t + torch.from_numpy(a)
        return t.numpy()
    return mod, reference


def _build(mod, target="llvm", fuse=True):
    return build(mod, "relay.FuseOps.depthwise_pointwise", target, fuse)


def _fused_kernels(lib) -> list:
    """The lowered kernels whose function holds both a depthwise and a pointwise conv."""
    return conv_kernels_with(lib, "depthwise")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("cin,cmid,cout,h,w,stride,epilogue,residual", [
    (24, 144, 24, 29, 31, 1, "clip", True),      # mobilenet_v2's 56x56 block, odd sizes, residual epilogue
    (16, 96, 24, 57, 58, 2, "clip", False),      # stride-2 depthwise -> 29x29
    (8, 40, 12, 28, 30, 1, "none", False),       # no epilogue: the depthwise accumulators get a stage of their own
    (16, 72, 20, 31, 29, 1, "bias_relu", False),  # a broadcast operand in the epilogue; 72 = AVX-512's 24-block
])
def test_fused_block_matches_torch(target, cin, cmid, cout, h, w, stride, epilogue, residual):
    rng = np.random.default_rng(cin * 1000 + cmid + h)
    mod, reference = _block(rng, cin, cmid, cout, h, w, stride, epilogue, residual)
    lib = _build(mod, target)
    fused = _fused_kernels(lib)
    assert len(fused) == 1 and fused[0].implementation == "conv2d_NCHWc.x86"
    body = kernel_source(lib, fused[0].func_name)  # its parallel closure (if any) and its function
    # one parallel loop over row tiles (the smallest block is under the parallel policy's work threshold); the
    # depthwise rows live in a stack array inside it, never in memory another kernel reads
    assert body.count(parallel_loop_marker()) == (1 if cmid >= 72 else 0)
    assert len(fused[0].outputs) == 1
    assert "__attribute__((aligned(64)))" in body
    if not host_can_run(target):
        return  # code for an ISA this CPU lacks is compiled, not run
    a = rng.standard_normal((1, cin, h, w)).astype("float32")
    np.testing.assert_allclose(run(lib, a), reference(a), rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_nan_and_inf_propagate_like_torch(target):
    rng = np.random.default_rng(7)
    mod, reference = _block(rng, 16, 48, 16, 28, 28, 1, "clip", True)
    lib = _build(mod, target)
    assert len(_fused_kernels(lib)) == 1
    if not host_can_run(target):
        return
    a = rng.standard_normal((1, 16, 28, 28)).astype("float32")
    a[0, 3, 5, 7] = np.nan
    a[0, 0, 20, 1] = np.inf
    a[0, 9, 0, 27] = -np.inf
    got, want = run(lib, a), reference(a)
    assert np.isnan(want).any() and np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4, equal_nan=True)


def test_same_numbers_with_the_switch_off_and_fewer_kernels_on():
    rng = np.random.default_rng(3)
    mod, reference = _block(rng, 24, 144, 24, 30, 29, 1, "clip", True)
    on, off = _build(mod, fuse=True), _build(mod, fuse=False)
    assert len(_fused_kernels(on)) == 1 and not _fused_kernels(off)
    assert len(off.lowered) == len(on.lowered) + 1
    a = rng.standard_normal((1, 24, 30, 29)).astype("float32")
    np.testing.assert_allclose(run(on, a), run(off, a), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(run(on, a), reference(a), rtol=2e-4, atol=2e-4)


def test_batch_of_three_with_a_5x5_depthwise():
    rng = np.random.default_rng(13)
    mod, reference = _block(rng, 8, 48, 16, 30, 33, 1, "clip", False, k=5, batch=3)
    lib = _build(mod)
    assert len(_fused_kernels(lib)) == 1
    a = rng.standard_normal((3, 8, 30, 33)).astype("float32")
    np.testing.assert_allclose(run(lib, a), reference(a), rtol=2e-4, atol=2e-4)


def test_vm_runs_the_fused_kernel():
    rng = np.random.default_rng(5)
    mod, reference = _block(rng, 16, 48, 16, 29, 28, 1, "clip", False)
    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm")
    vm = tvm.runtime.vm.VirtualMachine(exe, tvm.cpu())
    a = rng.standard_normal((1, 16, 29, 28)).astype("float32")
    np.testing.assert_allclose(vm.run(a).numpy(), reference(a), rtol=2e-4, atol=2e-4)


def test_what_does_not_fuse():
    rng = np.random.default_rng(11)
    # fewer output rows than the parallel loop needs
    mod, _ = _block(rng, 16, 48, 16, fuse_ops.MIN_FUSED_ROWS - 1, 40)
    assert not _fused_kernels(_build(mod))
    # the depthwise result also feeds another op
    x = relay.var("x", shape=(1, 32, 30, 30))
    d = relay.clip(relay.nn.conv2d(x, relay.const(rng.standard_normal((32, 1, 3, 3)).astype("float32")),
                                   padding=(1, 1), groups=32, channels=32, kernel_size=(3, 3)), 0.0, 6.0)
    p = relay.nn.conv2d(d, relay.const(rng.standard_normal((16, 32, 1, 1)).astype("float32")), channels=16,
                        kernel_size=(1, 1))
    two = tvm.IRModule.from_expr(relay.Function([x], relay.Tuple([p, relay.nn.max_pool2d(d)])))
    assert not _fused_kernels(_build(two))
    # a 3x3 consumer, and a strided 1x1 consumer
    for ks, st in (((3, 3), 1), ((1, 1), 2)):
        q = relay.nn.conv2d(d, relay.const(rng.standard_normal((16, 32) + ks).astype("float32")), channels=16,
                            kernel_size=ks, strides=(st, st), padding=(ks[0] // 2, ks[1] // 2))
        assert not _fused_kernels(_build(tvm.IRModule.from_expr(relay.Function([x], q))))


def test_tuned_depthwise_tile_reaches_the_fused_kernel(tmp_path):
    """The depthwise rows inside the fused kernel use the depthwise task's own tuned register tile."""
    import time
    from kiln import autotvm
    from kiln.autotvm.measure import MeasureInput, MeasureResult
    target = "llvm -mcpu=core-avx2"
    rng = np.random.default_rng(17)
    mod, reference = _block(rng, 8, 40, 16, 28, 28, 1, "clip", False)
    with tvm.transform.PassContext(opt_level=3):
        tasks = autotvm.task.extract_from_program(mod["main"], target=target, params={},
                                                  ops=(relay.op.get("nn.conv2d"),))
    dw_tasks = [t for t in tasks if t.name == "depthwise_conv2d_NCHWc.x86"]
    assert len(dw_tasks) == 1, [t.name for t in tasks]
    space = dw_tasks[0].config_space
    cfg = next(space.get(i) for i in range(space.range_length) if space.is_index_valid(i)
               and space.get(i)["tile_ow"].size[-1] == 4 and space.get(i)["unroll_kw"].val)
    log = tmp_path / "dw.log"
    log.write_text(autotvm.record.encode(MeasureInput(dw_tasks[0].target, dw_tasks[0], cfg),
                                         MeasureResult((1e-6,), 0, 0.1, time.time())) + "\n")
    sources = {}
    for name, ctx in (("tuned", autotvm.apply_history_best(str(log))), ("fallback", None)):
        with tvm.target.Target(target):
            if ctx is None:
                lib = _build(mod, target)
            else:
                with ctx:
                    lib = _build(mod, target)
        fused = _fused_kernels(lib)
        assert len(fused) == 1
        sources[name] = lib.get_lib().get_source()
    # 4 accumulator vectors a tile with the record (one 8-lane vector a pixel), the fallback's wider tile without
    assert "depthwise_conv2d_NCHWc_r3 " in sources["tuned"] or "depthwise_conv2d_NCHWc_r3," in sources["tuned"]
    assert "depthwise_conv2d_NCHWc_r4" not in sources["tuned"]
    assert "depthwise_conv2d_NCHWc_r4" in sources["fallback"]
