"""Requantization's fixed-point multiply as one vectorizable step (the compute of ``fixed_point_multiply_broadcast``).

``y = round(((x << l) * m) / 2**r)`` with ``x``, ``m`` int32, the product exact in 64 bits, ``r`` the total right
shift (31 + the multiplier's negative exponent, 31..62) and ``l`` its positive exponent; ``UPWARD`` adds
``2**(r-1)`` before the arithmetic shift (ties toward +inf), ``TONEAREST`` adds ``2**(r-1) - 1`` to negative
products (ties away from zero). Bit for bit the int64 Relay chain TVM's requantize lowers to (``cast``,
``left_shift``, ``multiply``, ``add``, ``right_shift``, ``cast``).

Why its own step: in C, that chain is a vector of int64 lanes; AVX2 has no 64-bit vector multiply and no
64-bit arithmetic shift, so GCC emulates both lane by lane and the fused epilogue of an int8 conv costs more
than the conv. The helper states the AVX2 sequence instead (TVM's LLVM lowering of ``q_multiply_shift`` does
the same): ``vpmuldq`` on the even and the odd int32 lanes (exact 64-bit products), ``vpsllvq`` /
``vpsrlvq`` for the per-lane shifts, the arithmetic shift as ``((p ^ s) >>> r) ^ s`` with ``s`` the sign
mask, and a blend of the two halves' low words. Without AVX2 a scalar loop computes the same.

The TIR is ``call_pure_extern("int32", "kiln_q_multiply_shift_<up|tn>", x, m, l, r)``; the helper is
registered lane-wise (:func:`kiln.tir.transform.vectorize.register_vectorizable_extern`) with vector forms
for any lane count (:func:`kiln.target.c_support.register_vector_extern_helper`), so an epilogue vectorized
over 16 channels becomes two ``vpmuldq`` pairs per 8 lanes on AVX2, and on AVX-512 one ``vpmuldq`` pair per zmm
with AVX-512F's 64-bit arithmetic shift (``vpsravq``; :func:`_avx512_core`).
"""
from __future__ import annotations

from ... import te
from ...error import KilnError
from ...target.c_support import register_extern_helper, register_vector_extern_helper
from ...tir import op as T
from ...tir.transform.vectorize import register_vectorizable_extern
from ..utils import get_const_tuple

ROUNDINGS = {"UPWARD": "up", "TONEAREST": "tn"}


def helper_name(rounding: str) -> str:
    return f"kiln_q_multiply_shift_{ROUNDINGS[rounding]}"


def _scalar_code(tag: str, name: str | None = None) -> str:
    name = name or f"kiln_q_multiply_shift_{tag}"
    neg = " - (int64_t)(p < 0)" if tag == "tn" else ""
    return (f"#ifndef KILN_QMS_SCALAR_{name}\n#define KILN_QMS_SCALAR_{name}\n"
            f"static inline __attribute__((always_inline)) int32_t {name}(int32_t x, int32_t m, int32_t l, int32_t r) {{\n"
            f"  int64_t p = (int64_t)((uint64_t)(int64_t)x * ((uint64_t)1 << l) * (uint64_t)(int64_t)m);\n"
            f"  p = (int64_t)((uint64_t)p + ((uint64_t)1 << (r - 1))){neg};\n"
            f"  return (int32_t)(p >> r);\n}}\n#endif")


def _avx2_core(tag: str) -> str:
    """8 int32 lanes: even lanes and odd lanes as two sets of 4 exact 64-bit products."""
    name = f"kiln_qms8_{tag}"
    rnd = ("  pe = _mm256_add_epi64(pe, _mm256_cmpgt_epi64(z, pe));\n"
           "  po = _mm256_add_epi64(po, _mm256_cmpgt_epi64(z, po));\n") if tag == "tn" else ""
    return (f"#if defined(__AVX2__) && !defined(KILN_QMS8_{tag})\n#define KILN_QMS8_{tag}\n"
            f"static inline __attribute__((always_inline)) __m256i {name}(__m256i x, __m256i m, __m256i l, __m256i r) {{\n"
            "  const __m256i lo = _mm256_set1_epi64x(0xffffffffLL), one = _mm256_set1_epi64x(1);\n"
            "  const __m256i z = _mm256_setzero_si256();\n"
            "  __m256i pe = _mm256_mul_epi32(x, m);\n"
            "  __m256i po = _mm256_mul_epi32(_mm256_srli_epi64(x, 32), _mm256_srli_epi64(m, 32));\n"
            "  pe = _mm256_sllv_epi64(pe, _mm256_and_si256(l, lo));\n"
            "  po = _mm256_sllv_epi64(po, _mm256_srli_epi64(l, 32));\n"
            "  __m256i re = _mm256_and_si256(r, lo), ro = _mm256_srli_epi64(r, 32);\n"
            f"{rnd}"
            "  pe = _mm256_add_epi64(pe, _mm256_sllv_epi64(one, _mm256_sub_epi64(re, one)));\n"
            "  po = _mm256_add_epi64(po, _mm256_sllv_epi64(one, _mm256_sub_epi64(ro, one)));\n"
            "  __m256i se = _mm256_cmpgt_epi64(z, pe), so = _mm256_cmpgt_epi64(z, po);\n"
            "  pe = _mm256_xor_si256(_mm256_srlv_epi64(_mm256_xor_si256(pe, se), re), se);\n"
            "  po = _mm256_xor_si256(_mm256_srlv_epi64(_mm256_xor_si256(po, so), ro), so);\n"
            "  return _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xAA);\n}\n#endif")


def _avx2_core_high() -> str:
    """8 lanes, ``UPWARD`` with ``r >= 33`` and ``l = 0``: only the high word ``h`` of ``x * m`` matters,
    ``floor((x*m + 2**(r-1)) / 2**r) = (h + 2**(r-33)) >> (r-32)`` (the low word adds less than 1 to a
    numerator divided by a power of two), all in int32 lanes (``vpsravd``)."""
    return ("#if defined(__AVX2__) && !defined(KILN_QMS8_hi)\n#define KILN_QMS8_hi\n"
            "static inline __attribute__((always_inline)) __m256i kiln_qms8_hi(__m256i x, __m256i m, __m256i l, __m256i r) {\n"
            "  (void)l;\n"
            "  __m256i pe = _mm256_mul_epi32(x, m);\n"
            "  __m256i po = _mm256_mul_epi32(_mm256_srli_epi64(x, 32), _mm256_srli_epi64(m, 32));\n"
            "  __m256i hi = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);\n"
            "  __m256i sh = _mm256_sub_epi32(r, _mm256_set1_epi32(32));\n"
            "  __m256i rc = _mm256_sllv_epi32(_mm256_set1_epi32(1), _mm256_sub_epi32(sh, _mm256_set1_epi32(1)));\n"
            "  return _mm256_srav_epi32(_mm256_add_epi32(hi, rc), sh);\n}\n#endif")


def _avx512_core(tag: str) -> str:
    """16 int32 lanes in one zmm, the AVX2 core's arithmetic with AVX-512F's own 64-bit lane operations: even and
    odd lanes as two sets of 8 exact 64-bit products (``vpmuldq``), ``vpsllvq`` for the left shifts, and the
    arithmetic right shift as one ``vpsravq`` (AVX2 has none: its core flips the sign around a logical shift);
    ``TONEAREST``'s -1 on negative products is ``p >> 63`` (``vpsraq``); the low words merge with a mask blend."""
    name = f"kiln_qms16_{tag}"
    rnd = ("  pe = _mm512_add_epi64(pe, _mm512_srai_epi64(pe, 63));\n"
           "  po = _mm512_add_epi64(po, _mm512_srai_epi64(po, 63));\n") if tag == "tn" else ""
    return (f"#if defined(__AVX512F__) && !defined(KILN_QMS16_{tag})\n#define KILN_QMS16_{tag}\n"
            f"static inline __attribute__((always_inline)) __m512i {name}(__m512i x, __m512i m, __m512i l, __m512i r) {{\n"
            "  const __m512i lo = _mm512_set1_epi64(0xffffffffLL), one = _mm512_set1_epi64(1);\n"
            "  __m512i pe = _mm512_mul_epi32(x, m);\n"
            "  __m512i po = _mm512_mul_epi32(_mm512_srli_epi64(x, 32), _mm512_srli_epi64(m, 32));\n"
            "  pe = _mm512_sllv_epi64(pe, _mm512_and_si512(l, lo));\n"
            "  po = _mm512_sllv_epi64(po, _mm512_srli_epi64(l, 32));\n"
            "  __m512i re = _mm512_and_si512(r, lo), ro = _mm512_srli_epi64(r, 32);\n"
            f"{rnd}"
            "  pe = _mm512_add_epi64(pe, _mm512_sllv_epi64(one, _mm512_sub_epi64(re, one)));\n"
            "  po = _mm512_add_epi64(po, _mm512_sllv_epi64(one, _mm512_sub_epi64(ro, one)));\n"
            "  pe = _mm512_srav_epi64(pe, re);\n"
            "  po = _mm512_srav_epi64(po, ro);\n"
            "  return _mm512_mask_blend_epi32((__mmask16)0xAAAA, pe, _mm512_slli_epi64(po, 32));\n}\n#endif")


def _avx512_core_high() -> str:
    """16 lanes of :func:`_avx2_core_high`'s high-word form (``UPWARD``, ``r >= 33``, ``l = 0``) in one zmm."""
    return ("#if defined(__AVX512F__) && !defined(KILN_QMS16_hi)\n#define KILN_QMS16_hi\n"
            "static inline __attribute__((always_inline)) __m512i kiln_qms16_hi(__m512i x, __m512i m, __m512i l, __m512i r) {\n"
            "  (void)l;\n"
            "  __m512i pe = _mm512_mul_epi32(x, m);\n"
            "  __m512i po = _mm512_mul_epi32(_mm512_srli_epi64(x, 32), _mm512_srli_epi64(m, 32));\n"
            "  __m512i hi = _mm512_mask_blend_epi32((__mmask16)0xAAAA, _mm512_srli_epi64(pe, 32), po);\n"
            "  __m512i sh = _mm512_sub_epi32(r, _mm512_set1_epi32(32));\n"
            "  __m512i rc = _mm512_sllv_epi32(_mm512_set1_epi32(1), _mm512_sub_epi32(sh, _mm512_set1_epi32(1)));\n"
            "  return _mm512_srav_epi32(_mm512_add_epi32(hi, rc), sh);\n}\n#endif")


def _avx512_loop(tag: str, lanes: int) -> str:
    """On AVX-512, whole zmm vectors of 16 lanes through :func:`_avx512_core` (or the high-word form). Until
    session 13 each zmm went through the AVX2 core in two halves (``vextracti64x4`` / ``vinserti64x4``): no
    AVX-512 host was at hand to test a native port. Same arithmetic, so the same bits as the AVX2 core and the
    scalar form (tests/qnn/test_qnn_fixed_point_x86.py checks the 16-lane form on the host against the
    definition)."""
    if lanes % 16:
        return ""
    loads = "".join(f"    __m512i z{v}; memcpy(&z{v}, (int32_t*)&{v} + i, 64);\n" for v in "xmlr")
    return ("#if defined(__AVX512F__)\n"
            f"  for (; i + 16 <= {lanes}; i += 16) {{\n"
            f"{loads}"
            f"    __m512i zo = kiln_qms16_{tag}(zx, zm, zl, zr);\n"
            "    memcpy((int32_t*)&o + i, &zo, 64);\n  }\n"
            "#endif\n")


def _vector_form(tag: str):
    def make(lanes: int):
        name = f"kiln_q_multiply_shift_{tag}_i32x{lanes}"
        nbytes = 4 * (1 << (lanes - 1).bit_length())
        vt = f"{name}_t"
        scalar_tag = "up" if tag == "hi" else tag
        core = _avx2_core_high() if tag == "hi" else _avx2_core(tag)
        if lanes % 16 == 0:
            core += "\n" + (_avx512_core_high() if tag == "hi" else _avx512_core(tag))
        code = (f"{_scalar_code(scalar_tag)}\n{core}\n"
                f"typedef int32_t {vt} __attribute__((vector_size({nbytes})));\n"
                f"static inline __attribute__((always_inline)) {vt} {name}({vt} x, {vt} m, {vt} l, {vt} r) {{\n"
                f"  {vt} o;\n  int i = 0;\n"
                f"{_avx512_loop(tag, lanes)}"
                "#if defined(__AVX2__)\n"
                f"  for (; i + 8 <= {lanes}; i += 8) {{\n"
                "    __m256i vx, vm, vl, vr, vo;\n"
                "    memcpy(&vx, (int32_t*)&x + i, 32); memcpy(&vm, (int32_t*)&m + i, 32);\n"
                "    memcpy(&vl, (int32_t*)&l + i, 32); memcpy(&vr, (int32_t*)&r + i, 32);\n"
                f"    vo = kiln_qms8_{tag}(vx, vm, vl, vr);\n"
                "    memcpy((int32_t*)&o + i, &vo, 32);\n  }\n"
                "#endif\n"
                f"  for (; i < {lanes}; ++i) o[i] = kiln_q_multiply_shift_{scalar_tag}(x[i], m[i], l[i], r[i]);\n"
                "  return o;\n}")
        return name, code, True
    return make


HIGH = "kiln_q_multiply_shift_hi"  # UPWARD, every right shift >= 33 and left shift 0 (the high-word form)
for _name, _tag, _scalar in [(helper_name(r), t, t) for r, t in ROUNDINGS.items()] + [(HIGH, "hi", "up")]:
    register_extern_helper(_name, _scalar_code(_scalar, _name))
    register_vector_extern_helper(_name, _vector_form(_tag))
    register_vectorizable_extern(_name)


def _bcast_index(t, idx):
    shape = get_const_tuple(t.shape)
    lead = len(idx) - len(shape)
    return t[tuple(0 if d == 1 else idx[lead + k] for k, d in enumerate(shape))]


def fixed_point_multiply(x, multiplier, left_shift, right_shift, rounding: str = "UPWARD", high_word: bool = False):
    """``round(((x << left_shift) * multiplier) / 2**right_shift)`` (int32; the parameters broadcast against
    ``x``, e.g. per channel); see the module doc. ``high_word``: the caller guarantees ``UPWARD``, every right
    shift >= 33 and every left shift 0, so the cheaper high-word form applies."""
    if rounding not in ROUNDINGS:
        raise KilnError(f"fixed_point_multiply: rounding must be UPWARD or TONEAREST, got {rounding!r}")
    for what, t in (("data", x), ("multiplier", multiplier), ("left_shift", left_shift),
                    ("right_shift", right_shift)):
        if str(t.dtype) != "int32":
            raise KilnError(f"fixed_point_multiply: {what} must be int32, got {t.dtype}")
    if high_word and rounding != "UPWARD":
        raise KilnError("fixed_point_multiply: the high-word form is for UPWARD rounding only")
    fname = HIGH if high_word else helper_name(rounding)

    def f(*idx):
        return T.call_pure_extern("int32", fname, x[idx], _bcast_index(multiplier, idx),
                                  _bcast_index(left_shift, idx), _bcast_index(right_shift, idx))
    return te.compute(x.shape, f, name="fixed_point_multiply", tag="broadcast")
