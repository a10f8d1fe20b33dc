"""x86 injective schedule of a transposing copy with both sides over 16 (a 300 x 300 transpose, NCHW -> NHWC with 64
channels, attention's (batch, seq, heads, dim) -> (batch, heads, dim, seq)): tiles of the input copied to a local
buffer and transposed from there with the input rows unrolled, so gcc permutes whole vectors in registers
(kiln/topi/x86/injective.py, ``_tiled_transpose``). Numerics against numpy on sizes that do not divide the tiles and
several dtypes; the generated code of named targets compiled, not run."""
import re

import numpy as np
import pytest

import kiln as tvm
from kiln import topi

from tests.vector_code_util import build_injective as _build, random_array as _random, target_asm

AVX2 = "llvm -mcpu=core-avx2"
AVX512 = "llvm -mcpu=skylake-avx512"
GATHERS = {"vinsertps", "vgatherdps", "vgatherqps", "vpgatherdd", "vpinsrd", "vpinsrb", "vpinsrw", "vpinsrq",
           "vinsertf128", "vinserti128", "vpextrb", "vpextrw", "vextractps"}


def _check(shape, axes, dtype):
    x = _random(shape, dtype, seed=sum(shape) + len(dtype))
    f, out_shape = _build(shape, dtype, "llvm", lambda a: topi.transpose(a, axes))
    o = tvm.nd.array(np.zeros(out_shape, dtype))
    f(tvm.nd.array(x), o)
    np.testing.assert_array_equal(o.numpy(), x.transpose(axes))


# 300 (groups of 4, tiles of 50 with a 2-element epilogue), 17 x 61 / 63 x 65 / 301 (no group or tile divides:
# not tiled), 1-sized axes, batch axes outside the tile, tiles that divide exactly
_CASES = [((300, 300), (1, 0)), ((17, 61), (1, 0)), ((63, 65), (1, 0)), ((301, 301), (1, 0)), ((320, 96), (1, 0)),
          ((48, 40), (1, 0)), ((1, 300, 1, 48), (3, 1, 2, 0)), ((2, 3, 48, 40), (0, 1, 3, 2)),
          ((2, 40, 3, 64), (0, 2, 3, 1)), ((3, 24, 72), (2, 0, 1)), ((1, 32, 5, 33), (0, 3, 2, 1))]


@pytest.mark.parametrize("dtype", ["float32", "int8", "uint8", "float16", "int32", "int16", "float64"])
@pytest.mark.parametrize("shape,axes", _CASES)
def test_large_transposes_match_numpy(shape, axes, dtype):
    _check(shape, axes, dtype)


@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("src,dst,shape", [("NCHW", "NHWC", (1, 64, 56, 56)), ("NHWC", "NCHW", (2, 17, 9, 48)),
                                           ("NCHW", "NHWC", (1, 40, 7, 9))])
def test_layout_transform_matches_numpy(src, dst, shape, dtype):
    x = _random(shape, dtype, seed=shape[1])
    f, out_shape = _build(shape, dtype, "llvm", lambda a: topi.layout_transform(a, src, dst))
    o = tvm.nd.array(np.zeros(out_shape, dtype))
    f(tvm.nd.array(x), o)
    perm = (0, 2, 3, 1) if src == "NCHW" else (0, 3, 1, 2)
    np.testing.assert_array_equal(o.numpy(), x.transpose(perm))


def _ops(target, shape, axes, dtype="float32"):
    f, _ = _build(shape, dtype, target, lambda a: topi.transpose(a, axes))
    src = f.get_source()
    asm = target_asm(src, target)
    return src, [m.group(1) for m in re.finditer(r"^\s+(v\w+)", asm, re.M)]


_TILED = [((1024, 1024), (1, 0)), ((128, 768), (1, 0)), ((1, 128, 12, 64), (0, 2, 3, 1)),
          ((1, 64, 56, 56), (0, 2, 3, 1)), ((1, 56, 56, 64), (0, 3, 1, 2))]


@pytest.mark.parametrize("shape,axes", _TILED)
def test_avx512_tiles_permute_whole_vectors(shape, axes):
    """Compile only: each 16 x 16 (or 8 x 16) float32 tile goes through a local buffer and is transposed with
    two-source zmm permutes, no element inserts or gathers (the output-axis vector gathered one element per lane)."""
    src, ops = _ops(AVX512, shape, axes)
    assert "a_local" in src and "kiln_gather" not in src
    assert ops.count("vpermt2ps") >= 24
    assert not GATHERS & set(ops), GATHERS & set(ops)


@pytest.mark.parametrize("shape,axes", _TILED)
def test_avx2_tiles_permute_whole_vectors(shape, axes):
    """Compile only: on AVX2 the tile is transposed with ymm permutes / blends, no element inserts or gathers."""
    src, ops = _ops(AVX2, shape, axes)
    assert "a_local" in src and "kiln_gather" not in src
    permutes = sum(ops.count(k) for k in ("vpermd", "vpermps", "vunpcklps", "vunpckhps", "vperm2f128", "vshufps"))
    assert permutes >= 32
    assert not GATHERS & set(ops), GATHERS & set(ops)


@pytest.mark.parametrize("target", [AVX2, AVX512])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_int8_tiles_pack_whole_vectors(target, dtype):
    """Compile only: an int8 tile (16 rows of 64 or 32 bytes) is transposed with byte packs and permutes."""
    src, ops = _ops(target, (128, 768), (1, 0), dtype)
    assert "a_local" in src and "kiln_gather" not in src
    assert ops.count("vpackuswb") >= 32
    assert not GATHERS & set(ops), GATHERS & set(ops)


def test_300_is_tiled_in_groups_of_four():
    """Compile only: 300 rows take groups of 4 (16 and 8 do not divide 300: a guarded partial tile would keep gcc's
    loop scalar) and tiles of 50 along the output rows; gcc still permutes whole vectors."""
    src, ops = _ops(AVX512, (300, 300), (1, 0))
    assert "a_local[200]" in src
    assert "vpermt2ps" in ops
    assert not GATHERS & set(ops), GATHERS & set(ops)


def test_odd_sides_keep_the_output_axis_vector():
    """Compile only: 301 x 301 (no group of 2 to 16 divides 301) is not tiled."""
    src, _ = _ops(AVX512, (301, 301), (1, 0))
    assert "a_local" not in src


def _key_transpose(a, heads, scale):
    """The int8 BERT's (quantize_dynamic ONNX) attention key transpose as Relay fuses it: (seq, hidden) reshaped to
    (1, seq, heads, dim), transposed to (1, heads, dim, seq), multiplied by the scale, reshaped to (heads, dim, seq)."""
    seq, hidden = (int(d) for d in a.shape)
    r = topi.reshape(a, (1, seq, heads, hidden // heads))
    t = topi.transpose(r, (0, 2, 3, 1))
    m = topi.multiply(t, tvm.tir.const(scale, a.dtype))
    return topi.reshape(m, (heads, hidden // heads, seq))


@pytest.mark.parametrize("seq,hidden,heads", [(128, 256, 4), (61, 96, 3), (40, 80, 5), (17, 68, 4)])
def test_fused_key_transpose_matches_numpy(seq, hidden, heads):
    x = _random((seq, hidden), "float32", seed=seq)
    f, out_shape = _build((seq, hidden), "float32", "llvm", lambda a: _key_transpose(a, heads, 0.125))
    o = tvm.nd.array(np.zeros(out_shape, "float32"))
    f(tvm.nd.array(x), o)
    ref = (x.reshape(1, seq, heads, hidden // heads).transpose(0, 2, 3, 1) * np.float32(0.125)).reshape(out_shape)
    np.testing.assert_array_equal(o.numpy(), ref)


@pytest.mark.parametrize("target", [AVX2, AVX512])
def test_fused_key_transpose_tiles_whole_vectors(target):
    """Compile only: through the inlined reshapes the read is p0[s, h * 64 + d]; the tile buffer holds exactly one
    16-column tile of it (4 vectors x 16, not the whole head), the scale is multiplied in vectors, no gathers."""
    f, _ = _build((128, 256), "float32", target, lambda a: _key_transpose(a, 4, 0.125))
    src = f.get_source()
    sizes = [int(n) for n in re.findall(r"a_local\[(\d+)\]", src)]
    assert sizes and all(n in (16 * 32, 16 * 64) for n in sizes), sizes  # 4 vectors of 8 or 16 lanes x 16 columns
    assert "kiln_gather" not in src
    ops = [m.group(1) for m in re.finditer(r"^\s+(v\w+)", target_asm(src, target), re.M)]
    assert "vmulps" in ops
    assert not GATHERS & set(ops), GATHERS & set(ops)


def test_head_split_keeps_its_contiguous_rows():
    """Compile only: splitting heads, (seq, hidden) -> (heads, seq, dim), keeps dim innermost on both sides: not a
    transpose of the innermost axis, not tiled."""
    f, _ = _build((128, 768), "float32", AVX512,
                  lambda a: topi.transpose(topi.reshape(a, (128, 12, 64)), (1, 0, 2)))
    assert "_local" not in f.get_source()
