"""C types and small inline helpers the C code generator asks for on demand.

Vectors use GCC vector extensions. A vector of N lanes is stored in a vector type of the next
power of two lanes (GCC requires it); loads, stores and lane-wise helpers touch only the N real
lanes. A boolean vector is a *mask*: an int32 vector whose lanes are 0 or -1 (what vector
comparisons yield), converted to the element width where a select needs it.
"""
from __future__ import annotations

from ..error import DataTypeError
from ..runtime.dtype import parse_dtype

_SCALAR = {
    "bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "float16": "_Float16", "float32": "float", "float64": "double", "handle": "void*",
}
_SHORT = {"int": "i", "uint": "u", "float": "f"}


def next_pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def scalar_ctype(dtype) -> str:
    dt = parse_dtype(dtype)
    name = str(dt.element_of())
    ctype = _SCALAR.get(name)
    if ctype is None:
        raise DataTypeError(f"the C backend has no type for dtype {name!r}")
    return ctype


# (element dtype, vector bits) -> (preprocessor guard, register type, min/max intrinsic with {} for
# min/max, blend by mask, mask of NaN lanes of {}). blendv needs SSE4.1 on 128-bit registers.
_X86_MINMAX = {
    ("float32", 256): ("defined(__AVX__)", "__m256", "_mm256_{}_ps", "_mm256_blendv_ps",
                       "_mm256_cmp_ps({0}, {0}, _CMP_UNORD_Q)"),
    ("float32", 128): ("defined(__SSE4_1__) && (defined(__x86_64__) || defined(__i386__))", "__m128", "_mm_{}_ps",
                       "_mm_blendv_ps", "_mm_cmpunord_ps({0}, {0})"),
    ("float64", 256): ("defined(__AVX__)", "__m256d", "_mm256_{}_pd", "_mm256_blendv_pd",
                       "_mm256_cmp_pd({0}, {0}, _CMP_UNORD_Q)"),
    ("float64", 128): ("defined(__SSE4_1__) && (defined(__x86_64__) || defined(__i386__))", "__m128d", "_mm_{}_pd",
                       "_mm_blendv_pd", "_mm_cmpunord_pd({0}, {0})"),
}
# AVX-512: one zmm register (no blendv there: the NaN lanes of a are put back by a mask blend, written as a
# format of r and a); without these a 16-lane clip was a compare + bit-mask select per bound
_X86_MINMAX[("float32", 512)] = ("defined(__AVX512F__)", "__m512", "_mm512_{}_ps",
                                 "_mm512_mask_blend_ps(_mm512_cmp_ps_mask({a}, {a}, _CMP_UNORD_Q), {r}, {a})", None)
_X86_MINMAX[("float64", 512)] = ("defined(__AVX512F__)", "__m512d", "_mm512_{}_pd",
                                 "_mm512_mask_blend_pd(_mm512_cmp_pd_mask({a}, {a}, _CMP_UNORD_Q), {r}, {a})", None)
# integer lanes (no NaN: one instruction, vpminsd / vpmaxub ...; gcc keeps the compare + blend form otherwise)
for _t, _sfx in (("int8", "epi8"), ("int16", "epi16"), ("int32", "epi32"), ("uint8", "epu8"), ("uint16", "epu16"),
                 ("uint32", "epu32")):
    _X86_MINMAX[(_t, 256)] = ("defined(__AVX2__)", "__m256i", "_mm256_{}_" + _sfx, None, None)
    _X86_MINMAX[(_t, 128)] = ("defined(__SSE4_1__) && (defined(__x86_64__) || defined(__i386__))", "__m128i",
                              "_mm_{}_" + _sfx, None, None)
    # one zmm (the int8 kernels' 16-lane requantize epilogues on AVX-512): vpminsd zmm, not two ymm halves
    _X86_MINMAX[(_t, 512)] = ("defined(__AVX512F__)" if _t.endswith("32") else "defined(__AVX512BW__)", "__m512i",
                              "_mm512_{}_" + _sfx, None, None)


# C helpers a ``call_extern``/``call_pure_extern`` may name (micro-kernels written with the compiler's
# intrinsics, e.g. the int8 dot products of kiln.topi.x86.tensor_intrin): name -> (code, needs <immintrin.h>).
_EXTERN_HELPERS: dict = {}


def register_extern_helper(name: str, code: str, x86_intrinsics: bool = False) -> None:
    """Make ``code`` (static inline C defining ``name``) part of every translation unit that calls ``name``
    through ``call_extern``/``call_pure_extern``: a micro-kernel in C compiled into the module, inlined by gcc."""
    _EXTERN_HELPERS[name] = (code, bool(x86_intrinsics))


# Lane-wise helpers with vector forms: a ``call_pure_extern`` of ``name`` that the vectorizer widened (see
# kiln.tir.transform.vectorize.register_vectorizable_extern) prints as a call of ``make(lanes)``'s helper:
# name -> make(lanes) -> (helper name, code, needs <immintrin.h>).
_VECTOR_EXTERNS: dict = {}


def register_vector_extern_helper(name: str, make) -> None:
    """The vector form of the scalar extern helper ``name``: ``make(lanes)`` returns ``(vector helper name, its
    static inline C, whether it uses x86 intrinsics)``; the helper takes and returns ``lanes``-lane vectors."""
    _VECTOR_EXTERNS[name] = make


def vector_extern_helper(name: str):
    """The ``make(lanes)`` registered for ``name`` (None when it has no vector form)."""
    return _VECTOR_EXTERNS.get(name)


class CSupport:
    """Collects the typedefs and static inline helpers one translation unit needs."""

    def __init__(self, max_vector_bytes: int = 32):
        self.max_vector_bytes = max_vector_bytes
        self._typedefs: dict[str, str] = {}
        self._helpers: dict[str, str] = {}
        self.uses_omp = False
        self.uses_x86_intrinsics = False
        self.uses_stdio = False  # snprintf: assertion messages that name run-time values

    # -- types ------------------------------------------------------------------------------
    def ctype(self, dtype) -> str:
        """The C type of a dtype; vector dtypes get a typedef (bool vectors are int32 masks)."""
        dt = parse_dtype(dtype)
        if dt.lanes == 1:
            return scalar_ctype(dt)
        if dt.is_bool:
            return self.vec_type("int32", dt.lanes)
        return self.vec_type(str(dt.element_of()), dt.lanes)

    def vec_type(self, elem: str, lanes: int) -> str:
        edt = parse_dtype(elem)
        if edt.is_handle or edt.is_bool:
            raise DataTypeError(f"no vector type of {elem}")
        name = f"kiln_{_SHORT[edt.type_code]}{edt.bits}x{lanes}"
        if name not in self._typedefs:
            nbytes = next_pow2(lanes) * edt.bits // 8
            self._typedefs[name] = (
                f"typedef {scalar_ctype(edt)} {name} __attribute__((vector_size({nbytes})));"
            )
        return name

    def mask_type(self, lanes: int) -> str:
        return self.vec_type("int32", lanes)

    def int_type_like(self, dtype) -> str:
        """A signed integer vector type with the element width and lanes of ``dtype``."""
        dt = parse_dtype(dtype)
        bits = 32 if dt.is_bool else dt.bits
        return self.vec_type(f"int{bits}", dt.lanes)

    # -- helper registry ----------------------------------------------------------------------
    def helper(self, name: str, code: str) -> str:
        if name not in self._helpers:
            self._helpers[name] = code
        return name

    def extern_helper(self, name: str) -> None:
        """Add the registered C helper ``name`` (see :func:`register_extern_helper`), if there is one."""
        entry = _EXTERN_HELPERS.get(name)
        if entry is not None:
            self.helper(name, entry[0])
            self.uses_x86_intrinsics = self.uses_x86_intrinsics or entry[1]

    def has_helper(self, name: str) -> bool:
        return name in self._helpers

    def preamble(self) -> str:
        parts = ["#include <stdbool.h>"]
        if self.uses_omp:
            parts.append("#include <omp.h>")
        if self.uses_stdio:
            parts.append("#include <stdio.h>")
        if self.uses_x86_intrinsics:
            parts.append("#if defined(__x86_64__) || defined(__i386__)\n#include <immintrin.h>\n#endif")
        parts.append("")
        if self._typedefs:
            parts.append("/* vector types (GCC vector extensions) */")
            parts.extend(self._typedefs.values())
            parts.append("")
        if self._helpers:
            parts.append("/* helpers */")
            for code in self._helpers.values():
                parts.append(code.rstrip())
            parts.append("")
        return "\n".join(parts)

    # -- scalar helpers -------------------------------------------------------------------------
    def floordiv(self, dtype) -> str:
        t = scalar_ctype(dtype)
        name = f"kiln_floordiv_{_suffix(dtype)}"
        return self.helper(name, (
            f"static inline {t} {name}({t} a, {t} b) {{\n"
            f"  {t} q = a / b;\n  {t} r = a % b;\n"
            f"  return (r != 0 && ((r < 0) != (b < 0))) ? (q - 1) : q;\n}}"))

    def floormod(self, dtype) -> str:
        t = scalar_ctype(dtype)
        name = f"kiln_floormod_{_suffix(dtype)}"
        return self.helper(name, (
            f"static inline {t} {name}({t} a, {t} b) {{\n"
            f"  {t} r = a % b;\n"
            f"  return (r != 0 && ((r < 0) != (b < 0))) ? (r + b) : r;\n}}"))

    def minmax(self, which: str, dtype, b_not_nan: bool = False) -> str:
        """``kiln_min_T(a, b)`` / ``kiln_max_T(a, b)``. For floats a NaN in either operand gives NaN, as
        numpy's and PyTorch's minimum/maximum do (relu, clip, max reductions and max pooling all lower to
        these). ``b_not_nan``: the caller knows ``b`` is never NaN (a constant), which allows a cheaper
        form (one x86 min/max instruction for vectors); that helper has an ``_nn`` suffix."""
        dt = parse_dtype(dtype)
        if dt.lanes > 1:
            return self._vec_minmax(which, dt, b_not_nan and dt.is_float)
        t = scalar_ctype(dt)
        cmp = "<" if which == "min" else ">"
        if not dt.is_float:
            name = f"kiln_{which}_{_suffix(dt)}"
            return self.helper(name, f"static inline {t} {name}({t} a, {t} b) {{ return a {cmp} b ? a : b; }}")
        if b_not_nan:
            name = f"kiln_{which}_{_suffix(dt)}_nn"
            # b is a number: when a is NaN the comparison is false and a (NaN) is returned
            return self.helper(name, f"static inline {t} {name}({t} a, {t} b) {{ return b {cmp} a ? b : a; }}")
        name = f"kiln_{which}_{_suffix(dt)}"
        return self.helper(name, (f"static inline {t} {name}({t} a, {t} b) {{ "
                                  f"return (a {cmp} b || a != a) ? a : b; }}"))

    def abs_int(self, dtype) -> str:
        t = scalar_ctype(dtype)
        name = f"kiln_abs_{_suffix(dtype)}"
        return self.helper(name, f"static inline {t} {name}({t} a) {{ return a < 0 ? ({t})-a : a; }}")

    def alloc(self) -> str:
        """``kiln_alloc`` / ``kiln_free`` for heap temporaries (a padded input, Winograd's transformed tiles):
        a per-thread cache of freed blocks (TVM's workspace pool idea) so a kernel called again reuses its
        buffers. Without it each call's ``aligned_alloc`` of a few MB could come back as fresh pages from the
        OS (glibc returns the top of its heap), and the page faults measured 4x slower on a Winograd conv.
        A block carries its size in a 64-byte header; a request takes a cached block of 1-2x its size."""
        self.helper("kiln_alloc", (
            "#define KILN_POOL_SLOTS 8\n"
            "static __thread char* kiln_pool[KILN_POOL_SLOTS];\n"
            "static inline void* kiln_alloc(size_t nbytes) {\n"
            "  size_t n = (nbytes + 63) / 64 * 64;\n"
            "  if (n == 0) n = 64;\n"
            "  for (int i = 0; i < KILN_POOL_SLOTS; ++i) {\n"
            "    char* b = kiln_pool[i];\n"
            "    if (b != NULL && *(size_t*)b >= n && *(size_t*)b <= 2 * n) {\n"
            "      kiln_pool[i] = NULL;\n"
            "      return b + 64;\n"
            "    }\n"
            "  }\n"
            "  char* b = (char*)aligned_alloc(64, n + 64);\n"
            "  if (b == NULL) return NULL;\n"
            "  *(size_t*)b = n;\n"
            "  return b + 64;\n}\n"
            "static inline void kiln_free(void* p) {\n"
            "  if (p == NULL) return;\n"
            "  char* b = (char*)p - 64;\n"
            "  for (int i = 0; i < KILN_POOL_SLOTS; ++i) {\n"
            "    if (kiln_pool[i] == NULL) { kiln_pool[i] = b; return; }\n"
            "  }\n"
            "  free(b);\n}"))
        return "kiln_alloc"

    def record_failure(self) -> str:
        """Inside a parallel loop: mark the loop failed and keep the first error message (each thread
        has its own last-error buffer, so the message is copied out for the calling thread)."""
        return self.helper("kiln_record_failure", (
            "static inline void kiln_record_failure(int32_t* failed, char* msg) {\n"
            "  if (__atomic_exchange_n(failed, 1, __ATOMIC_ACQ_REL) == 0) {\n"
            "    strncpy(msg, __kiln_get_last_error(), 1023);\n"
            "    msg[1023] = 0;\n  }\n}"))

    def omp_threads(self) -> str:
        self.uses_omp = True
        return self.helper("kiln_omp_threads", (
            "/* __kiln_num_threads == 0 means the OpenMP default. */\n"
            "static inline int kiln_omp_threads(void) {\n"
            "  return __kiln_num_threads > 0 ? (int)__kiln_num_threads : omp_get_max_threads();\n}"))

    def reinterpret(self, to_dtype, from_dtype) -> str:
        t, f = self.ctype(to_dtype), self.ctype(from_dtype)
        name = f"kiln_reinterpret_{_suffix(to_dtype)}_{_suffix(from_dtype)}"
        return self.helper(name, (
            f"static inline {t} {name}({f} x) {{\n"
            f"  {t} r;\n  memcpy(&r, &x, sizeof(r));\n  return r;\n}}"))

    # -- vector helpers -------------------------------------------------------------------------
    def vload(self, dtype) -> str:
        """``T kiln_vload_T(const E* p)``: N contiguous elements from an unaligned pointer."""
        dt = parse_dtype(dtype)
        vt = self.ctype(dt)
        name = f"kiln_vload_{_suffix(dt)}"
        if dt.is_bool:
            body = (f"  {vt} v = {{0}};\n  for (int k = 0; k < {dt.lanes}; ++k) v[k] = p[k] ? -1 : 0;\n"
                    "  return v;")
            return self.helper(name, f"static inline {vt} {name}(const bool* p) {{\n{body}\n}}")
        e = scalar_ctype(dt)
        nbytes = dt.lanes * dt.bits // 8
        init = " = {0}" if next_pow2(dt.lanes) != dt.lanes else ""
        return self.helper(name, (
            f"static inline {vt} {name}(const {e}* p) {{\n"
            f"  {vt} v{init};\n  memcpy(&v, p, {nbytes});\n  return v;\n}}"))

    def vstore(self, dtype) -> str:
        dt = parse_dtype(dtype)
        vt = self.ctype(dt)
        name = f"kiln_vstore_{_suffix(dt)}"
        if dt.is_bool:
            return self.helper(name, (
                f"static inline void {name}(bool* p, {vt} v) {{\n"
                f"  for (int k = 0; k < {dt.lanes}; ++k) p[k] = v[k] != 0;\n}}"))
        e = scalar_ctype(dt)
        nbytes = dt.lanes * dt.bits // 8
        return self.helper(name, (
            f"static inline void {name}({e}* p, {vt} v) {{\n  memcpy(p, &v, {nbytes});\n}}"))

    @staticmethod
    def _mask_pieces(lanes: int) -> list:
        """``(preprocessor condition, piece lanes)`` of the native masked forms for a ``lanes``-wide vector of 32-bit
        lanes, widest first: zmm pieces where the compiler targets AVX-512F, ymm ones where it targets AVX (a
        32-lane vector is two zmm or four ymm), an xmm for 4 lanes."""
        forms = []
        if lanes % 16 == 0:
            forms.append(("defined(__AVX512F__)", 16))
        if lanes % 8 == 0:
            forms.append(("defined(__AVX__)", 8))
        elif lanes == 4:
            forms.append(("defined(__AVX__)", 4))
        return forms

    def _piecewise(self, name: str, sig: str, loop: str, lanes: int, piece) -> str:
        """A helper whose body is ``piece(width, q)`` for each native piece ``q`` of the widest form the compiler's
        ISA has (see :meth:`_mask_pieces`), else ``loop``."""
        forms = self._mask_pieces(lanes)
        if not forms:
            return self.helper(name, f"{sig} {{\n{loop}\n}}")
        self.uses_x86_intrinsics = True
        parts = []
        for k, (cond, w) in enumerate(forms):
            body = "\n".join(piece(w, q) for q in range(lanes // w))
            parts.append(f"#{'if' if k == 0 else 'elif'} {cond}\n{body}")
        return self.helper(name, f"{sig} {{\n" + "\n".join(parts) + f"\n#else\n{loop}\n#endif\n}}")

    @staticmethod
    def _mask_piece(w: int, q: int) -> str:
        """C expression: piece ``q`` of ``w`` lanes of the int32 mask ``m``, as the native mask operand (a
        ``__mmask16`` for zmm pieces, the integer vector for vmaskmov)."""
        vec = {16: "__m512i", 8: "__m256i", 4: "__m128i"}[w]
        part = f"(*(const {vec}*)((const char*)&m + {4 * w * q}))"
        return f"_mm512_test_epi32_mask({part}, {part})" if w == 16 else part

    def any_lane(self, lanes: int) -> str:
        """``int kiln_any_lane_N(M m)``: whether some lane of an int32 mask is on (``vptestmd`` + ``kortest`` /
        ``vptest`` per native piece)."""
        mt = self.mask_type(lanes)
        name = f"kiln_any_lane_{lanes}"
        loop = f"  int32_t r = 0;\n  for (int k = 0; k < {lanes}; ++k) r |= m[k];\n  return r != 0;"

        def piece(w, q):
            m = self._mask_piece(w, q)
            test = f"{m} != 0" if w == 16 else f"!_mm{'256' if w == 8 else ''}_testz_si{'256' if w == 8 else '128'}({m}, {m})"
            return f"  if ({test}) return 1;" + ("\n  return 0;" if q == lanes // w - 1 else "")
        return self._piecewise(name, f"static inline int {name}({mt} m)", loop, lanes, piece)

    def masked_access(self, dtype, store: bool) -> str:
        """``T kiln_mload_T(const E* p, M m)`` / ``void kiln_mstore_T(E* p, M m, T v)``: the lanes of the int32
        mask ``m`` that are on, from / to ``p[0 .. N)``; the other elements are never touched (a load gives 0
        there). For 32-bit lanes: AVX-512 masked moves where the compiler targets AVX-512F, ``vmaskmov`` where it
        targets AVX (per native piece of a wider vector); else, and for other types, a loop over the lanes that
        are on."""
        return self._masked_move(dtype, store, count=False)

    def prefix_access(self, dtype, store: bool) -> str:
        """``T kiln_mloadn_T(const E* p, int64_t n)`` / ``void kiln_mstoren_T(E* p, int64_t n, T v)``: the first
        ``n`` lanes (``n`` may be <= 0 or >= N), from / to ``p``; the rest never touched (0 in a load). The lane
        mask of a split's last vector or of a padded panel is such a prefix (``ramp(b, 1) < broadcast(e)``: ``n =
        e - b``), so no vector compare is built: for 32-bit lanes a ``__mmask16`` from the count per zmm piece
        (AVX-512F), a float compare of a lane index vector per ymm piece (AVX; ``vmaskmovps``), else a loop."""
        return self._masked_move(dtype, store, count=True)

    def _masked_move(self, dtype, store: bool, count: bool) -> str:
        """The helpers of :meth:`masked_access` (``count`` False: an int32 mask ``m``) and :meth:`prefix_access`
        (``count`` True: the first ``n`` lanes)."""
        dt = parse_dtype(dtype)
        vt = self.ctype(dt)
        e = "bool" if dt.is_bool else scalar_ctype(dt)
        param, on = ("int64_t n", "k < n") if count else (f"{self.mask_type(dt.lanes)} m", "m[k]")
        name = f"kiln_{'mstore' if store else 'mload'}{'n' if count else ''}_{_suffix(dt)}"
        if store:
            lane = "v[k] != 0" if dt.is_bool else "v[k]"
            loop = f"  for (int k = 0; k < {dt.lanes}; ++k) if ({on}) p[k] = {lane};"
            sig = f"static inline void {name}({e}* p, {param}, {vt} v)"
        else:
            lane = "p[k] ? -1 : 0" if dt.is_bool else "p[k]"
            loop = f"  {vt} v = {{0}};\n  for (int k = 0; k < {dt.lanes}; ++k) if ({on}) v[k] = {lane};\n  return v;"
            sig = f"static inline {vt} {name}(const {e}* p, {param})"
        is_f32 = dt.is_float and dt.bits == 32
        if not (is_f32 or dt.is_integral and not dt.is_bool and dt.bits == 32):
            return self.helper(name, f"{sig} {{\n{loop}\n}}")
        kind = "ps" if is_f32 else "epi32"

        def native_mask(w, q):
            """Piece ``q``'s mask operand: a ``__mmask16`` for a zmm piece, an integer vector for vmaskmov."""
            if not count:
                return self._mask_piece(w, q)
            cnt = f"(n - {w * q})"
            if w == 16:
                return f"(__mmask16)({cnt} <= 0 ? 0u : {cnt} >= 16 ? 0xFFFFu : (1u << {cnt}) - 1u)"
            pre = "_mm256" if w == 8 else "_mm"
            iota = ", ".join(f"{i}.f" for i in range(w))
            clamp = f"(float)({cnt} <= 0 ? 0 : {cnt} >= {w} ? {w} : {cnt})"
            return (f"{pre}_castps_si{'256' if w == 8 else '128'}({pre}_cmp_ps({pre}_setr_ps({iota}), "
                    f"{pre}_set1_ps({clamp}), _CMP_LT_OQ))")

        def piece(w, q):
            m, off, at = native_mask(w, q), w * q, f"(char*)&v + {4 * w * q}"
            if w == 16:
                reg = "__m512" if is_f32 else "__m512i"
                if store:
                    return f"  _mm512_mask_storeu_{kind}(p + {off}, {m}, *(const {reg}*)({at}));"
                text = f"  *({reg}*)({at}) = _mm512_maskz_loadu_{kind}({m}, p + {off});"
            else:
                # vmaskmovps (AVX) moves int32 lanes too: a load or store copies bits, it does not compute on them
                pre, reg = ("_mm256", "__m256") if w == 8 else ("_mm", "__m128")
                if store:
                    return f"  {pre}_maskstore_ps((float*)(p + {off}), {m}, *(const {reg}*)({at}));"
                text = f"  *({reg}*)({at}) = {pre}_maskload_ps((const float*)(p + {off}), {m});"
            # a load declares the result before its first piece and returns it after the last
            return (f"  {vt} v;\n" if q == 0 else "") + text + ("\n  return v;" if q == dt.lanes // w - 1 else "")
        return self._piecewise(name, sig, loop, dt.lanes, piece)

    def gather(self, dtype, index_dtype, masked: bool = False) -> str:
        """``kiln_gather_T_I(p, idx)``: lane k reads ``p[idx[k]]``; ``masked``: ``kiln_mgather_T_I(p, idx, m)``
        reads only the lanes of the int32 mask ``m`` that are on (0 elsewhere)."""
        return self._indexed_access(dtype, index_dtype, store=False, masked=masked)

    def scatter(self, dtype, index_dtype, masked: bool = False) -> str:
        """``kiln_scatter_T_I(p, idx, v)``: lane k writes ``p[idx[k]]``; ``masked``: ``kiln_mscatter_T_I(p, idx,
        m, v)`` writes only the lanes of the int32 mask ``m`` that are on."""
        return self._indexed_access(dtype, index_dtype, store=True, masked=masked)

    def _indexed_access(self, dtype, index_dtype, store: bool, masked: bool) -> str:
        dt = parse_dtype(dtype)
        vt, it, e = self.ctype(dt), self.ctype(index_dtype), scalar_ctype(dt)
        name = f"kiln_{'m' if masked else ''}{'scatter' if store else 'gather'}_{_suffix(dt)}_{_suffix(index_dtype)}"
        mask = f", {self.mask_type(dt.lanes)} m" if masked else ""
        each = f"for (int k = 0; k < {dt.lanes}; ++k) " + ("if (m[k]) " if masked else "")
        if store:
            lane = "v[k] != 0" if dt.is_bool else "v[k]"
            return self.helper(name, (f"static inline void {name}({e}* p, {it} idx{mask}, {vt} v) {{\n"
                                      f"  {each}p[idx[k]] = {lane};\n}}"))
        lane = "p[idx[k]] ? -1 : 0" if dt.is_bool else "p[idx[k]]"
        return self.helper(name, (f"static inline {vt} {name}(const {e}* p, {it} idx{mask}) {{\n"
                                  f"  {vt} v = {{0}};\n  {each}v[k] = {lane};\n  return v;\n}}"))

    def broadcast(self, dtype) -> str:
        """``kiln_broadcast_T(x)``; for bool vectors x is 0 or -1."""
        dt = parse_dtype(dtype)
        vt = self.ctype(dt)
        e = "int32_t" if dt.is_bool else scalar_ctype(dt)
        name = f"kiln_broadcast_{_suffix(dt)}"
        init = ", ".join(["x"] * next_pow2(dt.lanes))
        return self.helper(name, f"static inline {vt} {name}({e} x) {{\n  {vt} v = {{{init}}};\n  return v;\n}}")

    def ramp(self, dtype) -> str:
        dt = parse_dtype(dtype)
        vt = self.ctype(dt)
        e = scalar_ctype(dt)
        name = f"kiln_ramp_{_suffix(dt)}"
        # a constant iota times the stride plus the base: a broadcast, a multiply and an add (gcc built the
        # initializer list {base + 0 * stride, base + 1 * stride, ...} one lane insert at a time)
        iota = ", ".join(f"({e}){k}" for k in range(next_pow2(dt.lanes)))
        return self.helper(name, (
            f"static inline {vt} {name}({e} base, {e} stride) {{\n  const {vt} iota = {{{iota}}};\n"
            f"  return iota * stride + base;\n}}"))

    def to_mask(self, expr: str, operand_dtype) -> str:
        """Turn the result of a vector comparison of ``operand_dtype`` operands into an int32 mask."""
        dt = parse_dtype(operand_dtype)
        mt = self.mask_type(dt.lanes)
        bits = 32 if dt.is_bool else dt.bits
        if bits == 32:
            return f"(({mt})({expr}))"
        return f"__builtin_convertvector({expr}, {mt})"

    def select(self, dtype, wide_mask: bool = False) -> str:
        """``kiln_select_T(mask, a, b)``: lane-wise ``mask ? a : b`` with bit operations. ``wide_mask``: the mask
        comes from compares of 32-bit lanes (a uint8 pad value chosen by an index compare) and ``T`` has 8- or
        16-bit lanes: it is narrowed by the shuffle helper (``kiln_select_T_w``), as ``__builtin_convertvector``
        narrows lane by lane on x86 (GCC 12). A mask widened from compares of ``T`` itself (the
        ``__builtin_convertvector(a > b, int32)`` of an 8-bit max) keeps the plain form, where gcc folds the
        widening and the narrowing away (the helper would hide that: an 8-bit max pool ran 4x slower)."""
        dt = parse_dtype(dtype)
        vt = self.ctype(dt)
        it = self.int_type_like(dt)
        mt = self.mask_type(dt.lanes)
        name = f"kiln_select_{_suffix(dt)}"
        conv = "m" if it == mt else f"__builtin_convertvector(m, {it})"
        if it != mt and wide_mask:
            bits = 32 if dt.is_bool else dt.bits
            narrow = self.int_convert(f"int32x{dt.lanes}", f"int{bits}x{dt.lanes}")
            if narrow:
                name, conv = f"{name}_w", f"({it}){narrow}(m)"
        return self.helper(name, (
            f"static inline {vt} {name}({mt} m, {vt} a, {vt} b) {{\n"
            f"  {it} mm = {conv};\n"
            f"  return ({vt})((({it})a & mm) | (({it})b & ~mm));\n}}"))

    def _vec_minmax(self, which: str, dt, b_not_nan: bool = False) -> str:
        """Lane-wise min/max with the NaN semantics of :meth:`minmax`. For float vectors of one x86
        register the x86 min/max instruction does the work: ``maxps(x, y)`` is ``x > y ? x : y`` and
        returns ``y`` when either lane is NaN, so ``maxps(b, a)`` already propagates a NaN in ``a``; when
        ``b`` may be NaN too, an unordered compare of ``a`` with itself blends ``a``'s NaN lanes back
        (three instructions). With a constant ``b`` (relu, clip: the fused epilogues of every CNN) it
        stays one instruction. gcc does not turn the compare-and-mask form into min/max itself."""
        vt = self.ctype(dt)
        suffix_nn = "_nn" if b_not_nan else ""
        name = f"kiln_{which}_{_suffix(dt)}{suffix_nn}"
        sel = self.select(dt)
        cmp = "<" if which == "min" else ">"
        if not dt.is_float:
            generic = f"return {sel}({self.to_mask(f'a {cmp} b', dt)}, a, b);"
        elif b_not_nan:
            generic = f"return {sel}({self.to_mask(f'b {cmp} a', dt)}, b, a);"
        else:
            mask = self.to_mask(f"(a {cmp} b) | (a != a)", dt)
            generic = f"return {sel}({mask}, a, b);"
        intrin = _X86_MINMAX.get((str(dt.element_of()), next_pow2(dt.lanes) * dt.bits))
        if intrin is None or next_pow2(dt.lanes) != dt.lanes:
            return self.helper(name, f"static inline {vt} {name}({vt} a, {vt} b) {{ {generic} }}")
        guard, reg, fn, blend, unord = intrin
        self.uses_x86_intrinsics = True
        if blend is None:   # integers
            fast = f"  return ({vt}){fn.format(which)}(({reg})a, ({reg})b);"
        elif b_not_nan:
            fast = f"  return ({vt}){fn.format(which)}(({reg})b, ({reg})a);"
        elif unord is None:  # AVX-512: a mask blend written as a format of r and a
            fast = (f"  {reg} r = {fn.format(which)}(({reg})a, ({reg})b);\n"
                    f"  return ({vt}){blend.format(r='r', a='(' + reg + ')a')};")
        else:
            fast = (f"  {reg} r = {fn.format(which)}(({reg})a, ({reg})b);\n"
                    f"  return ({vt}){blend}(r, ({reg})a, {unord.format('(' + reg + ')a')});")
        return self.helper(name, (
            f"static inline {vt} {name}({vt} a, {vt} b) {{\n"
            f"#if {guard}\n"
            f"{fast}\n"
            f"#else\n  {generic}\n#endif\n}}"))

    def int_convert(self, src, dst) -> str | None:
        """``kiln_cvt_S_D(v)`` for a conversion between integer vectors of 8-, 16- or 32-bit lanes (a multiple of
        8 lanes) with different widths, written with AVX2 / SSE4.1 intrinsics (``vpmovzx``/``vpmovsx`` to widen,
        ``vpshufb`` to truncate) and, where the target has AVX-512 and the lanes fill whole zmm registers, with the
        AVX-512 forms (:func:`_avx512_int_convert`); ``__builtin_convertvector`` otherwise (GCC 12 scalarizes
        these on x86, one byte at a time). None where no helper applies."""
        s, d = parse_dtype(src), parse_dtype(dst)
        if (not (s.is_integral and d.is_integral) or s.is_bool or d.is_bool or s.lanes != d.lanes or s.lanes % 8
                or s.bits == d.bits or s.bits not in (8, 16, 32) or d.bits not in (8, 16, 32)):
            return None
        lanes = s.lanes
        st, dt_ = self.ctype(s), self.ctype(d)
        name = f"kiln_cvt_{_suffix(s)}_{_suffix(d)}"
        sb, db = s.bits // 8, d.bits // 8
        sign = "epi" if s.type_code == parse_dtype("int8").type_code else "epu"
        step = 8
        if d.bits > s.bits:  # widen 8 lanes: 8 * sb bytes in, 8 * db bytes out
            if s.bits == 16:  # 16 -> 32 bits
                body = (f"__m128i t; memcpy(&t, (const char*)&v + i * 2, 16); "
                        f"__m256i r = _mm256_cvt{sign}16_epi32(t); memcpy((char*)&o + i * 4, &r, 32);")
            elif db == 4:  # 8 -> 32 bits
                body = (f"__m128i t = _mm_loadl_epi64((const __m128i*)((const char*)&v + i)); "
                        f"__m256i r = _mm256_cvt{sign}8_epi32(t); memcpy((char*)&o + i * 4, &r, 32);")
            elif lanes % 16 == 0:  # 8 -> 16 bits, 16 lanes into one ymm (two xmm halves went through memory)
                step = 16
                body = (f"__m128i t; memcpy(&t, (const char*)&v + i, 16); "
                        f"__m256i r = _mm256_cvt{sign}8_epi16(t); memcpy((char*)&o + i * 2, &r, 32);")
            else:  # 8 -> 16 bits
                body = (f"__m128i t = _mm_loadl_epi64((const __m128i*)((const char*)&v + i)); "
                        f"__m128i r = _mm_cvt{sign}8_epi16(t); memcpy((char*)&o + i * 2, &r, 16);")
        else:  # truncate 8 lanes: keep the low d.bits of each lane
            if sb == 4:
                idx = [b for k in range(4) for b in range(4 * k, 4 * k + db)]
                pad = [-1] * (16 - len(idx))
                mask = ", ".join(str(x) for x in (idx + pad) * 2)
                comb = "_mm_unpacklo_epi32(lo, hi)" if db == 1 else "_mm_unpacklo_epi64(lo, hi)"
                body = (f"__m256i t; memcpy(&t, (const char*)&v + i * 4, 32); "
                        f"__m256i sh = _mm256_shuffle_epi8(t, _mm256_setr_epi8({mask})); "
                        f"__m128i lo = _mm256_castsi256_si128(sh), hi = _mm256_extracti128_si256(sh, 1); "
                        f"__m128i r = {comb}; memcpy((char*)&o + i * {db}, &r, {8 * db});")
            else:  # 16 -> 8 bits
                mask = ", ".join(str(x) for x in list(range(0, 16, 2)) + [-1] * 8)
                body = (f"__m128i t; memcpy(&t, (const char*)&v + i * 2, 16); "
                        f"__m128i r = _mm_shuffle_epi8(t, _mm_setr_epi8({mask})); memcpy((char*)&o + i, &r, 8);")
        self.uses_x86_intrinsics = True
        wide = _avx512_int_convert(s.bits, d.bits, sign, lanes)
        wide_branch = ""
        if wide is not None:
            guard, zmm_step, zmm_body = wide
            wide_branch = (f"#if {guard}\n  {dt_} o;\n"
                           f"  for (int i = 0; i < {lanes}; i += {zmm_step}) {{ {zmm_body} }}\n  return o;\n#el")
        return self.helper(name, (
            f"static inline __attribute__((always_inline)) {dt_} {name}({st} v) {{\n"
            f"{wide_branch or '#'}if defined(__AVX2__)\n  {dt_} o;\n"
            f"  for (int i = 0; i < {lanes}; i += {step}) {{ {body} }}\n  return o;\n"
            f"#else\n  return __builtin_convertvector(v, {dt_});\n#endif\n}}"))

    def vector_round(self, fname: str, dtype) -> str | None:
        """A helper rounding a float32 vector by the SIMD round instruction (``floorf``/``ceilf``/``truncf``/
        ``rintf`` lane-wise), guarded by the ISA macro, with the lane loop as the fallback; None for other
        functions or widths. The lane loop costs 8 scalar ``roundss`` plus shuffles per vector (fast_exp's
        floor made a softmax 2x slower)."""
        modes = {"floorf": "_MM_FROUND_TO_NEG_INF", "ceilf": "_MM_FROUND_TO_POS_INF",
                 "truncf": "_MM_FROUND_TO_ZERO", "rintf": "_MM_FROUND_CUR_DIRECTION",
                 "nearbyintf": "_MM_FROUND_CUR_DIRECTION"}
        dt = parse_dtype(dtype)
        if fname not in modes or str(dt.element_of()) != "float32" or dt.lanes not in (4, 8, 16):
            return None
        # nearbyint = rint without the inexact exception: the current (round half to even) mode, no exception;
        # tir.round lowers to it (quantize's round: gcc split a 16-lane loop of nearbyintf into two ymm
        # vrndscaleps with the halves spilled to the stack)
        mode = modes[fname] + ("" if fname == "rintf" else " | _MM_FROUND_NO_EXC")
        guard, reg, call = {4: ("defined(__SSE4_1__)", "__m128", "_mm_round_ps"),
                            8: ("defined(__AVX__)", "__m256", "_mm256_round_ps"),
                            16: ("defined(__AVX512F__)", "__m512", "_mm512_roundscale_ps")}[dt.lanes]
        vt = self.ctype(dt)
        name = f"kiln_{fname}_{_suffix(dt)}"
        self.uses_x86_intrinsics = True
        return self.helper(name, (
            f"static inline {vt} {name}({vt} a) {{\n"
            f"#if {guard}\n  {reg} v;\n  memcpy(&v, &a, sizeof(v));\n  v = {call}(v, {mode});\n"
            f"  {vt} r;\n  memcpy(&r, &v, sizeof(r));\n  return r;\n"
            f"#else\n  {vt} r = {{0}};\n  for (int k = 0; k < {dt.lanes}; ++k) r[k] = {fname}(a[k]);\n  return r;\n"
            f"#endif\n}}"))

    def lanewise(self, name: str, out_dtype, in_dtypes, lane_expr: str) -> str:
        """A helper applying a scalar C expression lane by lane; ``lane_expr`` names lanes
        ``a[k]``, ``b[k]``, ``c[k]`` (mask outputs get 0/-1 from a C truth value)."""
        out = parse_dtype(out_dtype)
        ot = self.ctype(out)
        params = ", ".join(f"{self.ctype(d)} {'abc'[i]}" for i, d in enumerate(in_dtypes))
        value = f"({lane_expr}) ? -1 : 0" if out.is_bool else lane_expr
        return self.helper(name, (
            f"static inline {ot} {name}({params}) {{\n"
            f"  {ot} r = {{0}};\n  for (int k = 0; k < {out.lanes}; ++k) r[k] = {value};\n  return r;\n}}"))


def _avx512_int_convert(src_bits: int, dst_bits: int, sign: str, lanes: int) -> tuple | None:
    """``(guard, lanes per step, loop body)`` converting integer lanes one whole zmm at a time (``vpmovzx`` /
    ``vpmovsx`` into a zmm, ``vpmovdb`` / ``vpmovdw`` / ``vpmovwb`` out of one), or None where ``lanes`` is not
    a multiple of a zmm's lanes. Why: the AVX2 form assembles a 64-byte vector from 32-byte halves through
    memory; GCC does not merge the halves into one register, so on an AVX-512 target each 16-lane uint8 -> int32
    widening of the int8 depthwise kernel was two stores, a failed store-to-load forward and a reload (docs/qnn.md,
    "Integer vector casts and requantize epilogues on AVX-512")."""
    wide = max(src_bits, dst_bits)
    step = 512 // wide
    if lanes % step:
        if wide == 16 and src_bits > dst_bits and lanes % 16 == 0:  # 16 int16 lanes: one ymm -> xmm (vpmovwb)
            return ("defined(__AVX512BW__) && defined(__AVX512VL__)", 16,
                    "__m256i t; memcpy(&t, (const char*)&v + i * 2, 32); __m128i r = _mm256_cvtepi16_epi8(t); "
                    "memcpy((char*)&o + i, &r, 16);")
        return None
    guard = "defined(__AVX512BW__)" if min(src_bits, dst_bits) == 8 and wide == 16 else "defined(__AVX512F__)"
    narrow_bytes = step * min(src_bits, dst_bits) // 8
    narrow_reg = "__m128i" if narrow_bytes == 16 else "__m256i"
    if src_bits < dst_bits:   # narrow register in, zmm out
        body = (f"{narrow_reg} t; memcpy(&t, (const char*)&v + i * {src_bits // 8}, {narrow_bytes}); "
                f"__m512i r = _mm512_cvt{sign}{src_bits}_epi{dst_bits}(t); "
                f"memcpy((char*)&o + i * {dst_bits // 8}, &r, 64);")
    else:                     # zmm in, low bits of each lane out
        body = (f"__m512i t; memcpy(&t, (const char*)&v + i * {src_bits // 8}, 64); "
                f"{narrow_reg} r = _mm512_cvtepi{src_bits}_epi{dst_bits}(t); "
                f"memcpy((char*)&o + i * {dst_bits // 8}, &r, {narrow_bytes});")
    return guard, step, body


def _suffix(dtype) -> str:
    """A short type tag for helper names: i32, f32x8, b, bx8, u8 ..."""
    dt = parse_dtype(dtype)
    if dt.is_bool:
        base = "b"
    elif dt.is_handle:
        base = "h"
    else:
        base = f"{_SHORT[dt.type_code]}{dt.bits}"
    return base if dt.lanes == 1 else f"{base}x{dt.lanes}"


suffix = _suffix
