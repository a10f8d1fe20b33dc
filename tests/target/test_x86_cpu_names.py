"""x86 CPU names: every LLVM -mcpu name builds (mapped to the nearest -march the C compiler knows plus feature
flags), the features a name implies, unknown names, and $KILN_HOST_TARGET standing for the host."""
import numpy as np
import pytest

import kiln as tvm
from kiln import te
from kiln.target import Target, x86
from kiln.target.cpus import cpu_features, known_cpu_names
from kiln.runtime.cpu_features import ISA_FEATURES
from kiln.target.flags import TargetFlagsError, march_and_flags, target_cflags

# names LLVM 17 knows for x86-64 CPUs of the last decade (gcc 12 lacks znver4, znver5, graniterapids,
# emeraldrapids, raptorlake, meteorlake, arrowlake)
LLVM_NAMES = ["znver1", "znver2", "znver3", "znver4", "znver5", "sapphirerapids", "graniterapids", "emeraldrapids",
              "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "alderlake", "raptorlake", "meteorlake", "arrowlake",
              "icelake-server", "icelake-client", "cascadelake", "cooperlake", "skylake", "skylake-avx512",
              "haswell", "broadwell", "core-avx2", "tigerlake", "rocketlake", "cannonlake", "sandybridge",
              "ivybridge", "nehalem", "westmere", "generic"]


def test_feature_sets():
    assert {"avx2", "fma"} <= cpu_features("core-avx2") and "avx512f" not in cpu_features("core-avx2")
    assert {"avx512f", "avx512bw", "avx512vl"} <= cpu_features("skylake-avx512")
    assert "avx512vnni" in cpu_features("cascadelake") and "avx512vnni" not in cpu_features("skylake-avx512")
    assert {"avx512bf16", "avx512vnni", "avx512f"} <= cpu_features("znver4") and "avx512f" not in cpu_features("znver3")
    assert {"amx-tile", "amx-int8", "amx-bf16", "avx512fp16"} <= cpu_features("sapphirerapids")
    assert "amx-fp16" in cpu_features("graniterapids") and cpu_features("sapphirerapids") < cpu_features("graniterapids")
    assert "avxvnni" in cpu_features("alderlake") and "avx512f" not in cpu_features("alderlake")
    assert cpu_features("x86-64-v4") - cpu_features("x86-64-v3") == {"avx512f", "avx512cd", "avx512bw", "avx512dq",
                                                                     "avx512vl"}
    assert x86.target_has_vnni("llvm -mcpu=cascadelake") and not x86.target_has_vnni("llvm -mcpu=skylake-avx512")
    assert x86.target_has_amx("llvm -mcpu=sapphirerapids") and not x86.target_has_amx("llvm -mcpu=znver4")
    assert x86.target_has_features(["avx512f", "avx512bf16"], "llvm -mcpu=znver4")
    assert not x86.target_has_features("avx512f", "llvm -mcpu=znver4 -mattr=-avx512f")
    assert x86.get_vector_registers("llvm -mcpu=znver4") == 32 and x86.get_vector_registers("llvm -mcpu=znver3") == 16


@pytest.mark.parametrize("name", LLVM_NAMES)
def test_every_llvm_name_builds(name):
    """Each name gives flags the installed compiler accepts: a kernel compiles for it (and runs where the host
    has every feature the name implies)."""
    assert name in known_cpu_names()
    target = f"llvm -mcpu={name}"
    march, extra = march_and_flags(name)
    flags = target_cflags(target)
    assert f"-march={march}" in flags and all(f in flags for f in extra)
    # whatever gcc lacks from the name's features is added as -m flags (those gcc has)
    n = 37
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    f = tvm.build(s, [A, B], target=target)
    assert "B" in f.get_source() or f.get_source()
    if x86.host_can_run(target):
        a = np.random.default_rng(0).standard_normal(n).astype("float32")
        b = tvm.nd.empty((n,))
        f(tvm.nd.array(a), b)
        np.testing.assert_allclose(b.numpy(), a * 2 + 1, rtol=1e-6)


def test_names_gcc12_lacks_fall_back_to_an_ancestor_plus_flags():
    march, extra = march_and_flags("znver5")
    # gcc 12.2 has no znver4/znver5: znver3 plus the AVX-512 flags; a newer gcc takes the name itself
    assert march in ("znver5", "znver4", "znver3")
    if march == "znver3":
        assert {"-mavx512f", "-mavx512bw", "-mavx512vnni", "-mavx512bf16", "-mavxvnni"} <= set(extra)
    march, extra = march_and_flags("graniterapids")
    assert march in ("graniterapids", "sapphirerapids")
    assert march_and_flags("skylake-avx512") == ("skylake-avx512", [])


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(TargetFlagsError, match=r"unknown -mcpu='znver9'.*znver5.*sapphirerapids"):
        target_cflags("llvm -mcpu=znver9")
    with pytest.raises(TargetFlagsError, match="unknown -mcpu='pentium-4000'"):
        x86.get_simd_width("llvm -mcpu=pentium-4000")


def test_host_target_env(monkeypatch):
    """$KILN_HOST_TARGET stands for the host: plain 'llvm' schedules and compiles for it."""
    monkeypatch.setenv("KILN_HOST_TARGET", "llvm -mcpu=core-avx2")
    assert x86.get_simd_width() == 8 and x86.get_simd_width("llvm") == 8 and x86.get_vector_registers() == 16
    assert "-march=core-avx2" in target_cflags("llvm") and "-march=native" not in target_cflags("llvm")
    assert x86.get_simd_width("llvm -mcpu=skylake-avx512") == 16          # a named CPU is itself
    monkeypatch.setenv("KILN_HOST_TARGET", "llvm -mcpu=skylake-avx512")
    assert x86.get_simd_width() == 16 and x86.target_has_avx512(Target("llvm"))
    assert "-march=skylake-avx512" in target_cflags("llvm -opt-level=2")
    monkeypatch.setenv("KILN_HOST_TARGET", "cuda")
    with pytest.raises(tvm.target.TargetError, match="KILN_HOST_TARGET"):
        x86.get_simd_width()
    monkeypatch.delenv("KILN_HOST_TARGET")
    assert "-march=native" in target_cflags("llvm")


def test_target_cpu_summary(monkeypatch):
    monkeypatch.delenv("KILN_HOST_TARGET", raising=False)
    line = x86.target_cpu_summary("llvm -mcpu=sapphirerapids")
    assert line.startswith("sapphirerapids: AVX-512+VNNI+BF16+AMX, 16 fp32 lanes (-march=")
    assert x86.target_cpu_summary("llvm -mcpu=core-avx2").startswith("core-avx2: AVX2, 8 fp32 lanes")
    assert x86.target_cpu_summary("llvm").startswith("native (")
    monkeypatch.setenv("KILN_HOST_TARGET", "llvm -mcpu=x86-64-v3")
    assert x86.target_cpu_summary("llvm").startswith("x86-64-v3: AVX2")


def test_avx512fp16_stays_off_unless_asked():
    """gcc 13 emits zero-masked AVX512-FP16 stores the assembler rejects (every float16 model failed to build on
    a Sapphire Rapids host), and with AVX512-FP16 gcc would round _Float16 arithmetic differently than on every
    other CPU: kiln compiles without it unless -mattr asks for it."""
    from kiln.target import target_cflags
    for t in ("llvm -mcpu=sapphirerapids", "llvm -mcpu=znver5", "llvm -mcpu=core-avx2", "llvm"):
        assert "-mno-avx512fp16" in target_cflags(t), t
    flags = target_cflags("llvm -mcpu=sapphirerapids -mattr=+avx512fp16")
    assert "-mno-avx512fp16" not in flags and "-mavx512fp16" in flags


def _compiles(code, flags):
    import subprocess
    from kiln.target.compiler import DEFAULT_CFLAGS, find_compiler
    proc = subprocess.run(find_compiler() + list(DEFAULT_CFLAGS) + list(flags) + ["-S", "-x", "c", "-", "-o", "/dev/null"],
                          input=code, capture_output=True, text=True)
    return proc.returncode == 0


def test_amx_fp16_vp2intersect_compiled_out(monkeypatch):
    """kiln compiles without AMX, AVX512-FP16 and AVX512-VP2INTERSECT (their instructions come only from their
    intrinsics, which kiln's C never calls): the flags turn them off, so the code cannot contain them (their
    intrinsics no longer compile) and a library for sapphirerapids / graniterapids / znver5 does not require
    them. What the flags allow stays required (AVX-VNNI: gcc may encode vpdpbusd in its VEX form)."""
    from kiln.target.flags import compiled_features
    flags = target_cflags("llvm -mcpu=sapphirerapids")
    assert {"-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16", "-mno-avx512fp16"} <= set(flags)
    enabled = compiled_features(flags)
    assert {"avx512f", "avx512bw", "avx512vnni", "avx512bf16", "avxvnni"} <= enabled
    assert not enabled & {"amx-tile", "amx-int8", "amx-bf16", "amx-fp16", "avx512fp16", "avx512vp2intersect"}
    head = "#include <immintrin.h>\n"
    assert _compiles(head + "__m512i f(__m512i a, __m512i b, __m512i c) { return _mm512_dpbusd_epi32(a, b, c); }",
                     flags)
    # AMX code starts by loading a tile configuration: that intrinsic no longer compiles (gcc 12 writes some AMX
    # intrinsics as asm macros, which compile anywhere; without a loaded configuration they fault)
    assert not _compiles(head + "void f(const void *cfg) { _tile_loadconfig(cfg); }", flags)
    assert not _compiles(head + "__m512h f(__m512h a) { return _mm512_add_ph(a, a); }", flags)
    for name, absent in (("sapphirerapids", {"amx-tile", "amx-int8", "amx-bf16", "avx512fp16"}),
                         ("graniterapids", {"amx-tile", "amx-fp16", "avx512fp16"}),
                         ("znver5", {"avx512vp2intersect"})):
        target = f"llvm -mcpu={name}"
        assert absent <= cpu_features(name)             # the CPU has them ...
        required = set(x86.required_features(target))
        assert not required & absent                    # ... the code does not use them
        assert absent & set(x86.unused_features(target)) == absent & ISA_FEATURES.keys()
        assert {"avx512f", "avx512vnni", "avx512bf16", "avxvnni"} <= required
    # CPUs without these extensions keep their flags; -mattr brings one back (and amx-tile with an AMX extension)
    assert not [f for f in target_cflags("llvm -mcpu=skylake-avx512") if "amx" in f or "vp2intersect" in f]
    asked = target_cflags("llvm -mcpu=sapphirerapids -mattr=+amx-int8")
    assert "-mno-amx-int8" not in asked and "-mno-amx-tile" not in asked and "-mno-amx-bf16" in asked
    assert {"amx-tile", "amx-int8"} <= set(x86.required_features("llvm -mcpu=sapphirerapids -mattr=+amx-int8"))
    # no compiler to ask: the CPU's features less those kiln compiles without
    monkeypatch.setattr(x86, "compiled_features", lambda flags: None)
    fallback = set(x86.required_features("llvm -mcpu=sapphirerapids"))
    assert "avx512f" in fallback and not fallback & {"amx-tile", "amx-int8", "amx-bf16", "avx512fp16"}


def test_required_features_without_a_compiler(monkeypatch):
    """With no C compiler on the machine (one that only loads exported libraries), required_features and
    host_can_run fall back to the CPU's features less those kiln compiles without (they raised NoCompilerError)."""
    from kiln.target import flags
    from kiln.target.compiler import NoCompilerError

    def none():
        raise NoCompilerError("no C compiler found (test)")
    monkeypatch.setattr(flags, "find_compiler", none)
    spr = set(x86.required_features("llvm -mcpu=sapphirerapids"))
    assert {"avx512f", "avx512vnni", "avx512bf16", "avxvnni"} <= spr
    assert not spr & {"amx-tile", "amx-int8", "amx-bf16", "avx512fp16", "avx512vp2intersect"}
    assert set(x86.required_features("llvm -mcpu=core-avx2")) >= {"avx2", "fma"}
    assert x86.host_can_run("llvm -mcpu=x86-64") is True
    assert "amx-tile" in x86.unused_features("llvm -mcpu=sapphirerapids")
