"""x86 injective schedule of a transposing copy (NCHW <-> NCHW{x}c, NHWC <-> NCHW with few channels, a transpose
with a short side): the innermost loop runs along an axis contiguous in one tensor with the short axis unrolled
inside it, so gcc permutes whole vectors in registers instead of gathering one element per lane
(kiln/topi/x86/injective.py, ``_transposing_copy``). Numerics against numpy on odd shapes and several dtypes; the
generated code of named targets compiled, not run."""
import re

import numpy as np
import pytest

import kiln as tvm
from kiln import topi

from tests.vector_code_util import build_injective as _build, random_array as _random, target_asm

AVX2 = "llvm -mcpu=core-avx2"
AVX512 = "llvm -mcpu=skylake-avx512"


def _to_blocked(x, b):
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // b, b, h, w).transpose(0, 1, 3, 4, 2))


def _from_blocked(x):
    n, cb, h, w, b = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w))


def _run(f, x, out_shape):
    o = tvm.nd.array(np.zeros(out_shape, x.dtype))
    f(tvm.nd.array(x), o)
    return o.numpy()


# channel blocks (3 or 5 of them, so no multiple of 2 or 4 blocks), H and W of 1, 3, 17, 61 (no multiple of the lanes)
_SHAPES = [(1, 3, 17, 61), (2, 5, 3, 17), (1, 3, 61, 3), (1, 5, 1, 1), (1, 4, 56, 56)]


@pytest.mark.parametrize("dtype", ["float32", "int8", "uint8", "float16", "int32"])
@pytest.mark.parametrize("block", [3, 4, 8, 16])
@pytest.mark.parametrize("blocks_shape", _SHAPES)
def test_nchw_to_blocked_and_back_match_numpy(dtype, block, blocks_shape):
    n, cb, h, w = blocks_shape
    x = _random((n, cb * block, h, w), dtype, seed=block * 7 + h)
    to, shape = _build(x.shape, dtype, "llvm", lambda a: topi.layout_transform(a, "NCHW", f"NCHW{block}c"))
    y = _run(to, x, shape)
    np.testing.assert_array_equal(y, _to_blocked(x, block))
    back, shape = _build(y.shape, dtype, "llvm", lambda a: topi.layout_transform(a, f"NCHW{block}c", "NCHW"))
    np.testing.assert_array_equal(_run(back, y, shape), x)


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
@pytest.mark.parametrize("shape", [(1, 3, 17, 61), (2, 16, 3, 5), (1, 1, 7, 3)])
def test_nchw_nhwc_match_numpy(dtype, shape):
    x = _random(shape, dtype, seed=sum(shape))
    f, out_shape = _build(shape, dtype, "llvm", lambda a: topi.layout_transform(a, "NCHW", "NHWC"))
    y = _run(f, x, out_shape)
    np.testing.assert_array_equal(y, x.transpose(0, 2, 3, 1))
    g, out_shape = _build(y.shape, dtype, "llvm", lambda a: topi.layout_transform(a, "NHWC", "NCHW"))
    np.testing.assert_array_equal(_run(g, y, out_shape), x)


@pytest.mark.parametrize("shape", [(61, 3), (3, 61), (17, 16), (16, 17), (5, 2, 61), (300, 300)])
def test_transpose_matches_numpy(shape):
    x = _random(shape, "float32", seed=shape[0])
    axes = list(range(len(shape)))[::-1]
    f, out_shape = _build(shape, "float32", "llvm", lambda a: topi.transpose(a, axes))
    np.testing.assert_array_equal(_run(f, x, out_shape), x.transpose(axes))


@pytest.mark.parametrize("dtype,scalar_stores", [("float32", 16), ("float16", 0)])
def test_float16_keeps_the_vectorized_output_axis(dtype, scalar_stores):
    """Compile only: gcc 12 vectorizes no _Float16 code without AVX512-FP16, so a float16 copy keeps kiln's
    vectorized output axis (a vector store) where float32 unrolls its 16 channels into scalar statements for gcc."""
    f, _ = _build((1, 3, 5, 32, 16), dtype, AVX512, lambda a: topi.layout_transform(a, "NCHW16c", "NCHW"))
    src = f.get_source()
    assert len(re.findall(r"T_layout_trans\[[^;]*\] = ", src)) == scalar_stores
    assert ("kiln_vstore" in src) == (scalar_stores == 0)


def _kernel_asm(target, x_shape, src_layout, dst_layout, dtype="float32"):
    f, _ = _build(x_shape, dtype, target, lambda a: topi.layout_transform(a, src_layout, dst_layout))
    asm = target_asm(f.get_source(), target)
    return [m.group(1) for m in re.finditer(r"^\s+(v\w+)", asm, re.M)]


@pytest.mark.parametrize("src_layout,dst_layout,x_shape", [("NCHW16c", "NCHW", (1, 4, 56, 56, 16)),
                                                           ("NCHW", "NCHW16c", (1, 64, 56, 56)),
                                                           ("NCHW8c", "NCHW", (1, 8, 56, 56, 8))])
def test_avx512_transpose_permutes_whole_vectors(src_layout, dst_layout, x_shape):
    """Compile only: the 16 x 16 (or 8 x 16) float32 tile is transposed with two-source permutes of zmm registers,
    no element inserts or gathers (the output-axis vector gathered one element per lane)."""
    ops = _kernel_asm(AVX512, x_shape, src_layout, dst_layout)
    assert ops.count("vpermt2ps") >= 32
    assert not {"vinsertps", "vgatherdps", "vgatherqps", "vpinsrd"} & set(ops)


@pytest.mark.parametrize("src_layout,dst_layout,x_shape", [("NCHW16c", "NCHW", (1, 4, 56, 56, 16)),
                                                           ("NCHW", "NCHW16c", (1, 64, 56, 56)),
                                                           ("NCHW8c", "NCHW", (1, 8, 56, 56, 8)),
                                                           ("NCHW", "NCHW8c", (1, 64, 56, 56))])
def test_avx2_transpose_permutes_whole_vectors(src_layout, dst_layout, x_shape):
    """Compile only: on AVX2 the tile is transposed with ymm permutes / unpacks, no element inserts or gathers."""
    ops = _kernel_asm(AVX2, x_shape, src_layout, dst_layout)
    permutes = sum(ops.count(k) for k in ("vpermd", "vpermps", "vunpcklps", "vunpckhps", "vperm2f128", "vshufps"))
    assert permutes >= 32
    assert not {"vinsertps", "vgatherdps", "vpinsrd"} & set(ops)


def test_image_input_transform_stays_unrolled_for_gcc():
    """Compile only: NCHW -> NCHW3c of a 224 x 224 image keeps its 3 channels unrolled in a loop along W that gcc
    vectorizes (a store group of 3: permutes, no element inserts)."""
    ops = _kernel_asm(AVX512, (1, 3, 224, 224), "NCHW", "NCHW3c")
    assert "vpermt2ps" in ops
    assert not {"vinsertps", "vgatherdps"} & set(ops)


@pytest.mark.parametrize("target,lanes", [(AVX2, 8), (AVX512, 16)])
def test_image_rows_are_one_loop_in_whole_vectors(target, lanes):
    """Compile only: the rows of a 56 x 56 image are contiguous in both NCHW16c and NCHW, so H and W are one loop
    (no 8-lane tail after every row of 56), cut into pieces of whole vectors when the channel blocks alone give the
    cores too few chunks."""
    f, _ = _build((1, 4, 56, 56, 16), "float32", target, lambda a: topi.layout_transform(a, "NCHW16c", "NCHW"))
    loops = re.findall(r"for \(int32_t (i2_i3_fused\w*) = 0; \1 < (\d+);", f.get_source())
    assert loops, "H and W are not one loop"
    name, extent = loops[-1]
    assert int(extent) == 3136 or (name.endswith("_inner") and int(extent) % lanes == 0 and 3136 % int(extent) == 0)
