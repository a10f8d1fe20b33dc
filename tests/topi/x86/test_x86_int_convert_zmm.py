"""Integer vector casts that fill whole AVX-512 registers (``CSupport.int_convert``'s AVX-512 branch): on an
AVX-512 target a 16-lane uint8 -> int32 widening is one ``vpmovzxbd`` into a zmm, not two ymm halves stored to the
stack and reloaded as one zmm (the store-to-load forward fails: the int8 depthwise kernels ran ~15x slower than their
float32 twins on Sapphire Rapids). The code for AVX-512 targets is compiled and its assembly read (never run unless
the host has AVX-512); the values are checked on the host's own target against numpy's ``astype``."""
import re

import pytest

import kiln as tvm
from kiln import te
from vector_code_util import check_cast, target_asm, vector_cast_func

AVX512_TARGETS = ["llvm -mcpu=skylake-avx512", "llvm -mcpu=cascadelake", "llvm -mcpu=sapphirerapids"]
PAIRS = [("uint8", "int32"), ("int8", "int32"), ("uint8", "int16"), ("int8", "int16"), ("int16", "int32"),
         ("uint16", "int32"), ("int32", "uint8"), ("int32", "int8"), ("int32", "int16"), ("int16", "int8"),
         ("int16", "uint8")]


def function_asm(asm: str, name: str) -> list:
    """The instructions of function ``name`` in gcc's assembly (directives dropped)."""
    m = re.search(r"\n" + re.escape(name) + r":\n(.*?)\.cfi_endproc", asm, re.S)
    assert m, f"{name} not in the assembly"
    return [ln.strip() for ln in m.group(1).splitlines() if ln.startswith("\t") and not ln.strip().startswith(".")]


def vector_stack_ops(insns: list) -> int:
    return sum(1 for i in insns if re.search(r"\((%rsp|%rbp)\)", i) and "mm" in i)


HOST_CASES = ([(s, d, lanes) for s, d in PAIRS for lanes in (16, 64)]
              + [("uint8", "int32", 24), ("int32", "uint8", 24), ("uint8", "int16", 32), ("int16", "uint8", 48)])


@pytest.mark.parametrize("src,dst,lanes", HOST_CASES)
def test_casts_on_the_host_target_match_numpy(src, dst, lanes):
    # the host's own ISA (AVX-512 hosts run the zmm branch, AVX2 hosts the ymm one); 24 / 48 lanes: no whole zmm
    # of 32- / 16-bit lanes, the ymm form
    f = vector_cast_func(src, dst, lanes, "llvm")
    check_cast(f, src, dst, 3 * lanes, seed=lanes)


@pytest.mark.parametrize("target", AVX512_TARGETS)
def test_avx512_helpers_convert_whole_zmm_registers(target):
    for (src, dst, lanes), intrin in {("uint8", "int32", 16): "_mm512_cvtepu8_epi32",
                                      ("int8", "int32", 16): "_mm512_cvtepi8_epi32",
                                      ("int16", "int32", 32): "_mm512_cvtepi16_epi32",
                                      ("uint8", "int16", 32): "_mm512_cvtepu8_epi16",
                                      ("int32", "uint8", 16): "_mm512_cvtepi32_epi8",
                                      ("int32", "int16", 16): "_mm512_cvtepi32_epi16",
                                      ("int16", "int8", 32): "_mm512_cvtepi16_epi8"}.items():
        src_c = vector_cast_func(src, dst, lanes, target).get_source()
        assert intrin in src_c, (src, dst, lanes)


@pytest.mark.parametrize("target", AVX512_TARGETS)
def test_avx512_widening_stays_in_registers(target, tmp_path):
    # 16 uint8 lanes -> int32 -> float32 (the int8 depthwise kernel's input conversion): one vpmovzxbd into a zmm
    # per vector and no vector store / reload on the stack (the ymm-halves form did 3 stack ops per vector)
    n = 16 * 8
    a = te.placeholder((n,), "uint8", name="a")
    w = te.placeholder((n,), "float32", name="w")
    b = te.compute((n,), lambda i: a[i].astype("int32").astype("float32") * w[i], name="b")
    s = te.create_schedule(b.op)
    _, inner = s[b].split(b.op.axis[0], factor=16)
    s[b].vectorize(inner)
    f = tvm.build(s, [a, w, b], target, name="cvt_mul")
    insns = function_asm(target_asm(f.get_source(), target), "cvt_mul")
    widen = [i for i in insns if i.startswith("vpmovzxbd")]
    assert widen and all(re.search(r"%zmm\d+$", i) for i in widen), widen
    assert vector_stack_ops(insns) == 0, [i for i in insns if re.search(r"\((%rsp|%rbp)\)", i)]


def test_avx2_uint8_to_int16_is_one_ymm(tmp_path):
    # 16 uint8 lanes -> int16: one vpmovzxbw into a ymm (two xmm halves went through the stack)
    target = "llvm -mcpu=core-avx2"
    f = vector_cast_func("uint8", "int16", 16, target, n=16 * 4)
    insns = function_asm(target_asm(f.get_source(), target), "cast_kernel")
    widen = [i for i in insns if i.startswith("vpmovzxbw")]
    assert widen and all(re.search(r"%ymm\d+$", i) for i in widen), widen
    assert vector_stack_ops(insns) == 0, insns
