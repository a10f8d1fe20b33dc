"""int8 dot-product tensor intrinsics for x86 (TVM's ``topi/x86/tensor_intrin.py``).

One intrinsic computes ``c[i] += sum_k a[k] * b[i, k]`` for ``k < 4`` and ``i < lanes``: four ``uint8``
values of the data (one int32 broadcast to every lane) against ``lanes x 4`` ``int8`` weights (the kernel
packed ``...{oc}o4i``), accumulated into ``lanes`` int32 (one SIMD register: 8 with AVX2, 16 with AVX-512).
The replacing TIR is ``c = kiln_dot4_u8s8_<mode>_i32x<lanes>(c, a as int32, b)``, a ``call_pure_extern`` of a
static inline C helper written with gcc's x86 intrinsics (registered with
:func:`kiln.target.c_support.register_extern_helper`, compiled into the module): the accumulator is a value, so
PromoteRegisters keeps the register tile in registers as it does for fp32.

Modes (what the instruction sequence does with the int16 intermediate of ``vpmaddubsw``):

* ``vnni``: ``vpdpbusd`` (AVX512-VNNI, or AVX-VNNI's VEX form): four products summed straight into int32. Exact.
* ``maddubs``: ``vpmaddubsw`` (pairs ``a0*b0 + a1*b1`` in int16, **saturating** at +-32767) then
  ``vpmaddwd`` by ones. Exact only while every pair sum fits int16, e.g. weights within 7 bits
  (ONNX Runtime's ``reduce_range``: 255 * 64 * 2 = 32640); full-range weights can saturate.
* ``maddubs_exact``: the data split into nibbles (``a = 16 * hi + lo``), two ``vpmaddubsw`` whose pair sums are
  at most 15 * 128 * 2 and so never saturate, two ``vpmaddwd`` (by 1 and by 16). Exact, about twice the work.

Where the compiler is not given the ISA of a mode (the ``#if`` of the helper), a scalar loop computes the same
result (with ``maddubs``' saturation emulated), so the C always compiles.

``asm_step=True`` (the conv2d kernel, ``maddubs`` on 8 lanes): the three instructions of one step are one
``__asm__`` statement whose accumulator is a ``"+x"`` operand. Written with intrinsics, gcc 12 reassociates the
int32 adds of an unrolled reduction into a tree of live products and spills the register tile (measured 60-80
GMAC/s on one Zen 3 core); as one opaque statement per step the tile stays in registers (87-92 GMAC/s, the
two multiply pipes' limit being ~96). Same instructions, same results.
"""
from __future__ import annotations

from ... import te
from ...target.c_support import register_extern_helper
from ...tir import expr as E
from ...tir import op as T
from ...tir.buffer import decl_buffer

MODES = ("vnni", "maddubs", "maddubs_exact")


ASM_STEP = {("maddubs", 8)}
"""(mode, lanes) with an ``asm_step`` form."""


def helper_name(mode: str, lanes: int, asm_step: bool = False) -> str:
    return f"kiln_dot4_u8s8_{mode}{'_asm' if asm_step else ''}_i32x{lanes}"


def _scalar_body(mode: str, lanes: int) -> str:
    pair = ("int32_t s = 0; for (int j = 0; j < 2; ++j) { int32_t p = (int32_t)pa[2 * j] * w[4 * i + 2 * j] + "
            "(int32_t)pa[2 * j + 1] * w[4 * i + 2 * j + 1]; ")
    if mode == "maddubs":
        pair += "p = p > 32767 ? 32767 : (p < -32768 ? -32768 : p); "
    pair += "s += p; } acc[i] += s;"
    return (f"  const uint8_t* pa = (const uint8_t*)&a; const int8_t* w = (const int8_t*)&b;\n"
            f"  for (int i = 0; i < {lanes}; ++i) {{ {pair} }}\n  return acc;")


def _simd(lanes: int) -> tuple:
    """(vector type, intrinsic prefix, preprocessor condition of the base ISA) of ``lanes`` int32 lanes."""
    if lanes == 16:
        return "__m512i", "_mm512", "defined(__AVX512BW__)"
    return "__m256i", "_mm256", "defined(__AVX2__)"


def _vector_head(v: str, p: str) -> str:
    """The helpers' opening: the 4-byte data broadcast, the weights and the accumulator as vectors."""
    return (f"  {v} va = {p}_set1_epi32(a);\n  {v} vb; memcpy(&vb, &b, sizeof(vb));\n"
            f"  {v} vc; memcpy(&vc, &acc, sizeof(vc));\n")


_VECTOR_TAIL = "  memcpy(&acc, &vc, sizeof(vc));\n  return acc;"


def _helper_c(name: str, lanes: int, w_ctype: str, cond: str, body: str, scalar: str) -> str:
    """A static inline helper ``acc_t name(acc_t acc, int32_t a, w_t b)`` on GCC vector types: ``body`` where the
    compiler has the ISA (``cond``), ``scalar`` otherwise."""
    ti, tb = f"{name}_acc_t", f"{name}_w_t"
    return (f"typedef int32_t {ti} __attribute__((vector_size({4 * lanes})));\n"
            f"typedef {w_ctype} {tb} __attribute__((vector_size({4 * lanes})));\n"
            f"static inline __attribute__((always_inline)) {ti} {name}({ti} acc, int32_t a, {tb} b) {{\n"
            f"#if {cond}\n{body}\n#else\n{scalar}\n#endif\n}}")


def _x86_body(mode: str, lanes: int, asm_step: bool = False) -> tuple:
    """(preprocessor condition, body) of the intrinsic (or asm-step) form of ``mode`` at ``lanes`` int32 lanes."""
    v, p, base = _simd(lanes)
    head = _vector_head(v, p)
    if mode == "vnni":
        if lanes == 16:
            cond = "defined(__AVX512VNNI__)"
            op = f"  vc = {p}_dpbusd_epi32(vc, va, vb);\n"
        else:
            cond = "(defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)"
            op = ("#if defined(__AVX512VNNI__) && defined(__AVX512VL__)\n"
                  f"  vc = {p}_dpbusd_epi32(vc, va, vb);\n#else\n"
                  f"  vc = {p}_dpbusd_avx_epi32(vc, va, vb);\n#endif\n")
    elif mode == "maddubs" and asm_step:
        cond = base  # AT&T operand order: vpmaddubsw signed(b), unsigned(a), dst
        op = (f"  {v} one = {p}_set1_epi16(1), t;\n"
              "  __asm__(\"vpmaddubsw %[b], %[a], %[t]\\n\\tvpmaddwd %[one], %[t], %[t]\\n\\t"
              "vpaddd %[t], %[c], %[c]\" : [c] \"+x\" (vc), [t] \"=&x\" (t) : [a] \"x\" (va), [b] \"xm\" (vb), "
              "[one] \"x\" (one));\n")
    elif mode == "maddubs":
        cond = base
        op = (f"  {v} t = {p}_maddubs_epi16(va, vb);\n"
              f"  vc = {p}_add_epi32(vc, {p}_madd_epi16(t, {p}_set1_epi16(1)));\n")
    else:
        cond = base
        op = (f"  {v} nib = {p}_set1_epi8(0x0f);\n"
              f"  {v} lo = {p}_and_si{lanes * 32}(va, nib);\n"
              f"  {v} hi = {p}_and_si{lanes * 32}({p}_srli_epi16(va, 4), nib);\n"
              f"  {v} tl = {p}_madd_epi16({p}_maddubs_epi16(lo, vb), {p}_set1_epi16(1));\n"
              f"  {v} th = {p}_madd_epi16({p}_maddubs_epi16(hi, vb), {p}_set1_epi16(16));\n"
              f"  vc = {p}_add_epi32(vc, {p}_add_epi32(tl, th));\n")
    return cond, head + op + _VECTOR_TAIL


def helper_code(mode: str, lanes: int, asm_step: bool = False) -> str:
    """The C of the helper: intrinsics (or one asm statement) where the compiler has the ISA, a scalar loop
    otherwise."""
    cond, body = _x86_body(mode, lanes, asm_step)
    return _helper_c(helper_name(mode, lanes, asm_step), lanes, "int8_t", cond, body, _scalar_body(mode, lanes))


for _m in MODES:
    for _l in (8, 16):
        register_extern_helper(helper_name(_m, _l), helper_code(_m, _l), x86_intrinsics=True)
for _m, _l in ASM_STEP:
    register_extern_helper(helper_name(_m, _l, True), helper_code(_m, _l, True), x86_intrinsics=True)


def dot_u8s8_intrin(lanes: int, mode: str, asm_step: bool = False):
    """The tensor intrinsic ``c[i] += sum_{k<4} a[k] * b[i, k]`` (uint8 a, int8 b, int32 c; ``i < lanes``);
    ``asm_step`` picks the one-asm-statement form where (mode, lanes) has one (else it is ignored)."""
    if mode not in MODES or lanes not in (8, 16):
        raise ValueError(f"dot_u8s8_intrin: mode must be one of {MODES} and lanes 8 or 16, got {mode!r}, {lanes}")
    asm_step = bool(asm_step) and (mode, lanes) in ASM_STEP
    return _dot_intrin(lanes, 4, "uint8", "int8", helper_name(mode, lanes, asm_step))


def _dot_intrin(lanes: int, group: int, a_dtype: str, b_dtype: str, fname: str):
    """``c[i] += sum_{k<group} a[k] * b[i, k]`` (int32 c, ``i < lanes``) replaced by the C helper ``fname``
    (``acc = fname(acc, a as one int32, b)``): the declaration the int8 and int16 intrinsics share."""
    a = te.placeholder((group,), a_dtype, name="a")
    b = te.placeholder((lanes, group), b_dtype, name="b")
    k = te.reduce_axis((0, group), name="k")
    c = te.compute((lanes,), lambda i: te.sum(T.cast(a[k], "int32") * T.cast(b[i, k], "int32"), axis=k),
                   name="c")
    ab = decl_buffer((group,), a_dtype, name="a_buf", offset_factor=1, strides=[1])
    bb = decl_buffer((lanes, group), b_dtype, name="b_buf", offset_factor=1, strides=[group, 1])
    cb = decl_buffer((lanes,), "int32", name="c_buf", offset_factor=1, strides=[1])

    def fcompute(ins, outs):
        a_buf, b_buf = ins
        c_buf = outs[0]
        acc_t = f"int32x{lanes}"
        a_word = T.reinterpret("int32", E.BufferLoad(a_buf, [E.Ramp(T.const(0, "int32"), T.const(1, "int32"), group)]))
        w = E.BufferLoad(b_buf, [T.const(0, "int32"), E.Ramp(T.const(0, "int32"), T.const(1, "int32"), group * lanes)])
        ramp = E.Ramp(T.const(0, "int32"), T.const(1, "int32"), lanes)
        acc = E.BufferLoad(c_buf, [ramp])
        update = c_buf.vstore([ramp], T.call_pure_extern(acc_t, fname, acc, a_word, w))
        zero = E.Broadcast(T.const(0, "int32"), lanes)
        reset = c_buf.vstore([ramp], zero)
        body = c_buf.vstore([ramp], T.call_pure_extern(acc_t, fname, zero, a_word, w))
        return body, reset, update

    return te.decl_tensor_intrin(c.op, fcompute, name=fname, binds={a: ab, b: bb, c: cb})


# -- int16 pairs: vpmaddwd -----------------------------------------------------------------------------------------
def dot2_helper_name(lanes: int) -> str:
    return f"kiln_dot2_s16s16_i32x{lanes}"


def dot2_helper_code(lanes: int) -> str:
    """``acc[i] += a[0] * b[i, 0] + a[1] * b[i, 1]`` (int16 a, b; int32 acc): one ``vpmaddwd`` and one add. Exact:
    a pair sum of int16 products is at most 2^31 in magnitude (only -32768 * -32768 * 2 reaches it, and the int8
    kernels' operands stay within +-255)."""
    v, p, cond = _simd(lanes)
    # the empty asm keeps the weight vector in a register: GCC would otherwise fold its load into every
    # vpmaddwd of the tile (one load per row instead of one per panel: the loop then waits on the load ports)
    body = (_vector_head(v, p) + "  __asm__(\"\" : \"+v\"(vb));\n"
            f"  vc = {p}_add_epi32(vc, {p}_madd_epi16(va, vb));\n" + _VECTOR_TAIL)
    scalar = ("  int16_t pa[2]; memcpy(pa, &a, sizeof(pa)); const int16_t* w = (const int16_t*)&b;\n"
              f"  for (int i = 0; i < {lanes}; ++i) acc[i] += (int32_t)((uint32_t)((int32_t)pa[0] * w[2 * i]) + "
              "(uint32_t)((int32_t)pa[1] * w[2 * i + 1]));\n  return acc;")
    return _helper_c(dot2_helper_name(lanes), lanes, "int16_t", cond, body, scalar)


for _l in (8, 16):
    register_extern_helper(dot2_helper_name(_l), dot2_helper_code(_l), x86_intrinsics=True)


def dot_s16s16_intrin(lanes: int):
    """The tensor intrinsic ``c[i] += sum_{k<2} a[k] * b[i, k]`` (int16 a, b; int32 c; ``i < lanes``): the exact
    int8 dense of targets without VNNI on int16 operands (``vpmaddwd``, :mod:`kiln.topi.x86.dense_int16`)."""
    if lanes not in (8, 16):
        raise ValueError(f"dot_s16s16_intrin: lanes must be 8 or 16, got {lanes}")
    return _dot_intrin(lanes, 2, "int16", "int16", dot2_helper_name(lanes))
