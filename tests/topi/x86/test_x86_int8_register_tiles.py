"""The int8 kernels' register tiles on every x86 ISA (compiled for the named target; run only where the host can):
the requantize/cast epilogue reads the accumulator tile one int32 register at a time (8 lanes on AVX2, 16 on
AVX-512), the width the tile is computed at, so the tile stays in registers; on AVX-512 an 8-lane epilogue left
the VNNI conv's 28 accumulators on the stack, stored after every vpdpbusd (measured on Sapphire Rapids: int8
resnet18 barely faster than fp32)."""
import re

import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.contrib import graph_executor
from kiln.target import x86 as x86_target

TARGETS = {"avx2": ("llvm -mcpu=core-avx2", 8), "avx512": ("llvm -mcpu=skylake-avx512", 16),
           "vnni": ("llvm -mcpu=cascadelake", 16), "spr": ("llvm -mcpu=sapphirerapids", 16)}


def _build(expr, params, target):
    mod = tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(expr), expr))
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(mod, target=target, params=params)


def _run(lib, **inputs):
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input(**inputs)
    m.run()
    return m.get_output(0).numpy()


def _tile(src: str, name: str) -> set:
    """The register slots of accumulator tile ``name`` (PromoteRegisters' ``name_r<k>`` variables); fails where
    the tile stayed a C array."""
    assert not re.search(rf"int32_t {name}\w*\[", src), f"the accumulator tile {name} is a C array, not registers"
    slots = set(re.findall(rf"\b{name}(?:_global)?_r(\d+)\b", src))
    assert slots, f"no register slots of {name}"
    return slots


@pytest.mark.parametrize("isa", sorted(TARGETS))
def test_conv_epilogue_reads_the_tile_at_its_width(isa):
    target, lanes = TARGETS[isa]
    rng = np.random.default_rng(1)
    x = relay.var("x", shape=(1, 32, 9, 28), dtype="uint8")
    w = rng.integers(-64, 64, (32, 32, 3, 3)).astype("int8")
    scale = rng.random(32).astype("float32")
    y = relay.multiply(relay.cast(relay.nn.conv2d(x, relay.const(w), kernel_size=(3, 3), padding=(1, 1),
                                                  out_dtype="int32"), "float32"),
                       relay.const(scale.reshape(32, 1, 1)))
    lib = _build(y, {}, target)
    src = lib.get_lib().get_source()
    tile = _tile(src, "conv2d_NCHWc_int8")
    if lanes == 16:
        assert len(tile) == 14        # rows of 14 pixels: 28 accumulators spilled (gcc, 32 zmm)
    if x86_target.host_can_run(target):
        xv = rng.integers(0, 256, (1, 32, 9, 28)).astype("uint8")
        ref = np.zeros((1, 32, 9, 28), "int64")
        xp = np.pad(xv.astype("int64"), ((0, 0), (0, 0), (1, 1), (1, 1)))
        for i in range(3):
            for j in range(3):
                ref += np.einsum("oc,nchw->nohw", w[:, :, i, j].astype("int64"), xp[:, :, i:i + 9, j:j + 28])
        np.testing.assert_allclose(_run(lib, x=xv), ref.astype("float32") * scale.reshape(32, 1, 1), rtol=1e-6)


@pytest.mark.parametrize("isa", sorted(TARGETS))
def test_dense_epilogue_reads_the_tile_at_its_width(isa):
    target, lanes = TARGETS[isa]
    rng = np.random.default_rng(2)
    x = relay.var("x", shape=(37, 64), dtype="uint8")
    w = rng.integers(-128, 128, (48, 64)).astype("int8")
    scale = rng.random(48).astype("float32")
    y = relay.multiply(relay.cast(relay.nn.dense(x, relay.const(w), out_dtype="int32"), "float32"),
                       relay.const(scale))
    lib = _build(y, {}, target)
    src = lib.get_lib().get_source()
    _tile(src, "dense_int8")
    if x86_target.host_can_run(target):
        xv = rng.integers(0, 256, (37, 64)).astype("uint8")
        ref = (xv.astype("int64") @ w.T.astype("int64")).astype("float32") * scale
        np.testing.assert_allclose(_run(lib, x=xv), ref, rtol=1e-6)
