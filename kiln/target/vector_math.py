"""Vectorizable float32 ``exp``, ``erf`` and ``tanh`` for the C backend, within 1 / 3 / 2 ulp of the exact value.

libm's ``expf`` / ``erff`` / ``tanhf`` run lane by lane in a vectorized loop (the C printer loops over the lanes), which
made BERT's exact-GELU epilogue cost three times its GEMM. These rules lower float32 ``tir.exp`` /
``tir.erf`` / ``tir.tanh`` (scalar or vector; float16 computes through them) to a static inline C helper written with GCC vector extensions only
(``+ - * /``, compares, bit masks, ``__builtin_convertvector``): gcc compiles it to SIMD code for whatever
ISA ``-march`` names (SSE2, AVX2, AVX-512), and the scalar form is the same code on a one-lane vector, so a
loop's vector body and its scalar tail agree bit for bit.

Method (coefficients fitted here with numpy in float64, Lawson-weighted least squares, see
docs/architecture.md): on ``a = |x|``, with the sign put back by a bit or (so ``f(-x) = -f(x)``, -0 stays -0),

* erf: ``a < 0.875``: ``a * P(a^2)`` (degree 5); else ``1 - Q(u)``, ``Q`` a degree-14 polynomial fitting
  ``erfc`` on [0.875, 3.9192] in ``u = 0.625 a - 1.5234375`` (evaluated as ``E(u^2) + u O(u^2)``), ``a`` clamped
  at 3.9192059, the least float32 whose erf rounds to 1 (``Q`` is below 2^-25 there, so erf is exactly +-1 from
  there on). No exp and no division: the form before (Nov 2026) was ``1 - exp(L(min(a, 4)))``, ``L`` a degree-9
  fit of ``log erfc``, and cost 1.6-1.9x as much (figures below);
* tanh: ``a < 0.625``: ``a + a^3 P(a^2)`` (degree 5); else ``1 - 2 / (exp(2 min(a, 10)) + 1)``;
* exp (``tir.exp``, whole range): as the next item on ``x`` clamped to [-104, 89] (a NaN lane is blended back), with ``2^n`` applied
  as two factors ``2^(n/2) 2^(n - n/2)`` so that subnormal results round once and large ones overflow to inf;
* exp inside erf / tanh, of an argument known to lie in [-30, 30]: ``2^n e^r``, ``n = round(y / ln 2)`` by an int conversion,
  ``r`` by a two-constant ln 2, ``e^r = 1 + r + r^2 Q(r)`` (degree 5), ``2^n`` added to the exponent bits.

Both branches are computed and one is kept per lane by a bit blend on ``a >= bound``, which is false for NaN:
a NaN lane takes the polynomial branch and stays NaN. ``erf(+-inf) = tanh(+-inf) = +-1``.
Measured max error against float64 (erf / tanh: every 7th positive float32 bit pattern; exp: every 1021st, both
signs; plus subnormals, +-0, +-inf, NaN):
exp 0.94 ulp (subnormal results included), erf 2.45 ulp with FMA / 2.52 without (AVX-512, AVX2 and AVX2
``-mno-fma`` builds; the largest errors are the small branch's, near 0.47; mean 0.27), tanh 1.3 ulp, in units of
the float32 ulp of the exact value (tests/topi/test_topi_erf_vectorized.py checks 1 / 3 / 2, erf with and without
FMA, and erf's saturation at +-1).

erf speed, AMD EPYC Zen 5 (2 cores shared with other jobs), one thread, A/B/C in one process, 15 interleaved
rounds of 40 runs each, median (min) ms, relay kernels over 128 x 3072 float32 (128 x 512 gave the same ratios):

| kernel, target | before (exp form) | now | rational ``x P(x^2) / Q(x^2)`` (tried, not kept) |
|---|---|---|---|
| erf, ``llvm`` (AVX-512) | 0.163 (0.161) | 0.088 (0.087): 1.85x | 0.057 (0.055) |
| GELU ``x/2 (1 + erf(x/sqrt 2))``, ``llvm`` | 0.207 (0.204) | 0.127 (0.125): 1.63x | 0.084 (0.081) |
| erf, ``llvm -mcpu=core-avx2`` | 0.306 (0.304) | 0.178 (0.176): 1.71x | 0.102 (0.101) |
| GELU, ``llvm -mcpu=core-avx2`` | 0.384 (0.380) | 0.238 (0.234): 1.61x | 0.151 (0.148) |

The rational form (degrees 5 / 5 in ``x^2``, one division, fitted here, relative error 1.9e-8 in float64) is the
cheapest tried but its float32 evaluation errs by 4.8 ulp with FMA and 7.0 without (near 1, where ``P`` and ``Q``
are large and each carries ~2 ulp of Horner rounding), so it breaks the 3 ulp contract; ``topi.fast_erf`` stays the
opt-in fast form. A single Horner chain for ``Q`` (14 dependent FMAs) was 10-13% slower than the even / odd split.
tanh keeps its exp form (0.110 ms on the erf table's kernel and machine, AVX-512): the same kind of odd rational
(degrees 4 / 4 to 5 / 5 in ``x^2`` on [-9.01, 9.01], where float32 tanh reaches 1) errs by 4.4-6.2 ulp in float32
for the same reason, against tanh's 2 ulp, and ``1 - tanh`` decays like ``e^-2a`` over [0.625, 9]: a polynomial
for it would need far more terms than erfc's.
"""
from __future__ import annotations

from ..ir.op import register_intrin_lowering
from ..runtime.dtype import parse_dtype
from ..tir import expr as E
from ..tir.transform.vectorize import register_vectorizable_extern
from .c_support import next_pow2, register_extern_helper, register_vector_extern_helper

# erf(a) / a = P(a^2) on [0, 0.875] (degree 5): relative error 8.5e-9 (float64)
ERF_SMALL = (1.1283791574901956, -0.37612550452055715, 0.11282455181924744, -0.026791456848143744,
             0.0050321708963054, -0.000620319438041515)
# erfc(a) = Q(u) on [0.875, ERF_CLAMP], u = a * 0.625 - 1.5234375 (= (a - 2.4375) / 1.6, exact constants; u in
# [-0.98, 0.93]) (degree 14): absolute error 1.0e-8 (float64). ERF_CLAMP is the least float32 whose erf rounds
# to 1 (erfc(ERF_CLAMP) = 2^-25 - 1.5e-14); Q there is 1.0e-8 (FMA) to 1.5e-8 in float32, below 2^-25, so
# 1 - Q rounds to exactly 1 for every |x| >= ERF_CLAMP.
ERF_BOUND, ERF_CLAMP = 0.875, 3.919205904006958
ERF_U_SCALE, ERF_U_SHIFT = 0.625, 1.5234375
ERFC_BIG = (0.0005665449656432715, -0.0047450461936546715, 0.01850608235626337, -0.04407409232474824,
            0.07014349104618682, -0.07548552032674936, 0.05032824209127285, -0.010547810186595253,
            -0.017693019984723418, 0.02189769230014552, -0.008107528013586385, -0.005359308844464547,
            0.005337854305876407, 0.00018652809289163526, -0.0009558769834096105)
# (tanh(a) - a) / a^3 = P(a^2) on [0, 0.625]: relative error of tanh 4.8e-10 (float64)
TANH_SMALL = (-0.33333332335569055, 0.1333326115929771, -0.05395322518221414, 0.021733798316642853,
              -0.008254411334449013, 0.0022096731495725307)
TANH_BOUND, TANH_CLAMP = 0.625, 10.0
# (e^r - 1 - r) / r^2 = Q(r) on [-ln2/2, ln2/2]: relative error of e^r 5.2e-11 (float64)
EXP_Q = (0.5000000067687569, 0.1666666586905623, 0.04166629494064472, 0.00833349703663712,
         0.0013944659514971806, 0.00019790363742028987)
_LN2_HI, _LN2_LO = 0.693145751953125, 1.428606765330187045e-06  # ln 2 = HI + LO, HI has 12 trailing zero bits

FUNCTIONS = ("erf", "tanh", "exp")
_CORE = {"erf": "erf", "tanh": "tanh", "exp": "expf"}  # the vector function of each


def helper_name(fn: str) -> str:
    """The scalar C helper of float32 ``fn``; its vector forms add ``x<lanes>``."""
    return f"kiln_{fn}_f32"


def _f(v: float) -> str:
    return f"{float(v)!r}f"


def _horner(var: str, coeffs) -> str:
    """``c0 + var*(c1 + var*(...))`` as one C expression."""
    expr = _f(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        expr = f"({expr} * {var} + {_f(c)})"
    return expr


def _types(nbytes: int) -> tuple[str, str, str]:
    vt, it = f"kiln_vm_f{nbytes}", f"kiln_vm_i{nbytes}"
    code = (f"typedef float {vt} __attribute__((vector_size({nbytes})));\n"
            f"typedef int32_t {it} __attribute__((vector_size({nbytes})));")
    return vt, it, code


def _core(nbytes: int) -> tuple[str, str]:
    """exp / erf / tanh on ``nbytes``-byte float vectors (lanes beyond the real ones are ignored)."""
    vt, it, types = _types(nbytes)
    sfx = f"v{nbytes}"
    blend = f"(({vt})((({it})(b) & (m)) | (({it})(a) & ~(m))))"  # m ? b : a
    code = f"""#ifndef KILN_VM_{sfx}
#define KILN_VM_{sfx}
{types}
#define KILN_VM_BLEND_{sfx}(m, b, a) {blend}
static inline __attribute__((always_inline)) {vt} kiln_vm_exp_{sfx}({vt} y) {{
  /* e^y for |y| <= 30: 2^n e^r (no rounding trick that -ffast-math could reassociate away) */
  {it} ni = __builtin_convertvector(y * 1.4426950408889634f + 256.5f, {it}) - 256;  /* floor of a positive */
  {vt} n = __builtin_convertvector(ni, {vt});
  {vt} r = y - n * {_f(_LN2_HI)} - n * {_f(_LN2_LO)};
  {vt} e = {_horner('r', EXP_Q)} * (r * r) + r + 1.0f;
  return ({vt})(({it})e + (ni << 23));
}}
static inline __attribute__((always_inline)) {vt} kiln_vm_expf_{sfx}({vt} x) {{
  /* e^x on the whole float32 range: 2^n split in two factors so that subnormal results round once */
  {vt} y = KILN_VM_BLEND_{sfx}(x < -104.0f, ({vt}){{}} - 104.0f, x);
  y = KILN_VM_BLEND_{sfx}(y > 89.0f, ({vt}){{}} + 89.0f, y);
  {it} ni = __builtin_convertvector(y * 1.4426950408889634f + 256.5f, {it}) - 256;  /* floor of a positive */
  {vt} n = __builtin_convertvector(ni, {vt});
  {vt} r = y - n * {_f(_LN2_HI)} - n * {_f(_LN2_LO)};
  {vt} e = {_horner('r', EXP_Q)} * (r * r) + r + 1.0f;
  {it} n1 = ni >> 1;
  /* e * 2^n1 exactly in the exponent bits (an integer add: no reassociation under -ffast-math), then one
     rounding multiply by 2^(n - n1) */
  {vt} res = ({vt})(({it})e + (n1 << 23)) * ({vt})((ni - n1 + 127) << 23);
  return KILN_VM_BLEND_{sfx}(x != x, x, res);  /* NaN: the bit scaling above would have made it a number */
}}
static inline __attribute__((always_inline)) {vt} kiln_vm_erf_{sfx}({vt} x) {{
  {it} sign = ({it})x & (int32_t)0x80000000;
  {vt} a = ({vt})(({it})x ^ sign);
  {vt} a2 = a * a;
  {vt} small = a * {_horner('a2', ERF_SMALL)};
  {vt} t = KILN_VM_BLEND_{sfx}(a < {_f(ERF_CLAMP)}, a, ({vt}){{}} + {_f(ERF_CLAMP)});
  {vt} u = t * {_f(ERF_U_SCALE)} - {_f(ERF_U_SHIFT)};
  {vt} u2 = u * u;  /* Q(u) = E(u^2) + u O(u^2): two chains of 7 instead of one of 14 */
  {vt} big = 1.0f - ({_horner('u2', ERFC_BIG[0::2])} + u * {_horner('u2', ERFC_BIG[1::2])});
  {vt} res = KILN_VM_BLEND_{sfx}(a >= {_f(ERF_BOUND)}, big, small);
  return ({vt})(({it})res | sign);
}}
static inline __attribute__((always_inline)) {vt} kiln_vm_tanh_{sfx}({vt} x) {{
  {it} sign = ({it})x & (int32_t)0x80000000;
  {vt} a = ({vt})(({it})x ^ sign);
  {vt} a2 = a * a;
  {vt} small = a + a * a2 * {_horner('a2', TANH_SMALL)};
  {vt} t = KILN_VM_BLEND_{sfx}(a < {_f(TANH_CLAMP)}, a, ({vt}){{}} + {_f(TANH_CLAMP)});
  {vt} big = 1.0f - 2.0f / (kiln_vm_exp_{sfx}(t + t) + 1.0f);
  {vt} res = KILN_VM_BLEND_{sfx}(a >= {_f(TANH_BOUND)}, big, small);
  return ({vt})(({it})res | sign);
}}
#endif"""
    return sfx, code


def scalar_code(fn: str) -> str:
    """The scalar helper: the 4-byte vector form on one lane."""
    sfx, core = _core(4)
    name = helper_name(fn)
    return (f"{core}\n#ifndef KILN_VM_SCALAR_{fn}\n#define KILN_VM_SCALAR_{fn}\n"
            f"static inline __attribute__((always_inline)) float {name}(float x) {{\n"
            f"  kiln_vm_f4 v = {{x}};\n  return kiln_vm_{_CORE[fn]}_{sfx}(v)[0];\n}}\n#endif")


def _vector_form(fn: str):
    def make(lanes: int):
        sfx, core = _core(4 * next_pow2(lanes))
        name = f"{helper_name(fn)}x{lanes}"
        code = (f"{core}\nstatic inline __attribute__((always_inline)) kiln_vm_f{4 * next_pow2(lanes)} "
                f"{name}(kiln_vm_f{4 * next_pow2(lanes)} x) {{ return kiln_vm_{_CORE[fn]}_{sfx}(x); }}")
        return name, code, False
    return make


def _rule(fn: str):
    """float32 ``tir.<fn>`` -> the helper; other dtypes keep the libm rule (returning the call unchanged
    lets LowerIntrin fall through to it)."""
    from ..tir.transform.intrin_rule import dispatch_libm

    def rule(call):
        dt = parse_dtype(call.dtype)
        if not (dt.is_float and dt.bits == 32):
            return dispatch_libm(call)
        return E.Call(call.dtype, "tir.call_pure_extern", [E.StringImm(helper_name(fn))] + list(call.args))
    return rule


RULE_LEVEL = 6  # above the libm rules (level 5), below a user's "default" rule (level 10)

for _fn in FUNCTIONS:
    register_extern_helper(helper_name(_fn), scalar_code(_fn))
    register_vector_extern_helper(helper_name(_fn), _vector_form(_fn))
    register_vectorizable_extern(helper_name(_fn))
    register_intrin_lowering(f"tir.{_fn}", "default", f=_rule(_fn), level=RULE_LEVEL)
