"""Target parsing, scoping, CPU facts and compiler flags."""
import pytest

import kiln
from kiln.target import Target, TargetError
from kiln.target import x86
from kiln.target.flags import TargetFlagsError, march_for, target_cflags


def test_parse_and_canonical_string():
    t = Target("llvm -mcpu=core-avx2 -mattr=+avx2,+fma -num-cores=2")
    assert t.kind.name == "llvm" and t.keys == ["cpu"]
    assert t.mcpu == "core-avx2" and t.mattr == ["+avx2", "+fma"] and t.num_cores == 2
    assert str(t) == "llvm -keys=cpu -mattr=+avx2,+fma -mcpu=core-avx2 -num-cores=2"
    assert Target(str(t)) == t and t == "llvm -num-cores=2 -mcpu=core-avx2 -mattr=+avx2,+fma"
    assert Target("c").keys == ["cpu"] and str(Target("c")) == "c -keys=cpu"
    assert Target("cuda").keys == ["cuda", "gpu"]
    assert Target("llvm") != Target("c")
    assert hash(Target("llvm")) == hash(Target("llvm"))


def test_options_and_dicts():
    t = Target({"kind": "llvm", "mcpu": "skylake-avx512", "libs": ["cblas"], "opt-level": 2})
    assert t.libs == ["cblas"] and t.opt_level == 2 and t.attrs["mcpu"] == "skylake-avx512"
    assert Target.from_config(t.export()) == t
    d = Target("llvm -device=arm_cpu -model=bcm2837")
    assert d.keys == ["arm_cpu", "cpu"] and d.model == "bcm2837"
    assert kiln.target.create("llvm") == Target("llvm")
    assert kiln.target.arm_cpu("rasp3b").keys[0] == "arm_cpu"
    host = Target("cuda", host="llvm")
    assert host.host == Target("llvm")


@pytest.mark.parametrize("bad,msg", [
    ("tpu", "unknown target kind 'tpu'"),
    ("llvm -frobnicate=3", "has no option -frobnicate"),
    ("llvm -num-cores=many", "should be an integer"),
    ("llvm mcpu", "should look like -name=value"),
    ("", "empty target string"),
])
def test_parse_errors(bad, msg):
    with pytest.raises(TargetError, match=msg):
        Target(bad)


def test_current_scoping():
    assert Target.current() is None
    with Target("llvm -mcpu=haswell") as outer:
        assert Target.current() is outer
        with Target("c"):
            assert Target.current().kind.name == "c"
        assert Target.current() is outer
    assert Target.current(allow_none=True) is None
    with pytest.raises(TargetError):
        Target.current(allow_none=False)


def test_simd_width_and_features(monkeypatch):
    monkeypatch.delenv("KILN_HOST_TARGET", raising=False)  # the host is this machine
    assert x86.get_simd_width("llvm -mcpu=skylake-avx512") == 16
    assert x86.get_simd_width("llvm -mcpu=core-avx2") == 8
    assert x86.get_simd_width("llvm -mcpu=x86-64") == 4
    assert x86.get_simd_width("llvm -mcpu=core-avx2", "float64") == 4
    assert x86.get_simd_width("llvm -mcpu=x86-64 -mattr=+avx2") == 8
    info = x86.host_cpu_info()
    assert info.num_cores >= 1
    host = x86.get_simd_width()
    assert host == {64: 16, 32: 8, 16: 4}[info.simd_bytes()]
    assert x86.target_has_fma("llvm -mcpu=haswell") and not x86.target_has_fma("llvm -mcpu=x86-64")
    with Target("llvm -mcpu=cascadelake"):
        assert x86.get_simd_width() == 16 and x86.target_has_avx512()


def test_cpuinfo_parsing():
    info = x86._read_cpuinfo("processor: 0\nmodel name\t: Fake CPU\nflags\t\t: fpu sse2 avx avx2 fma\n")
    assert info.model_name == "Fake CPU" and info.has_avx2 and info.has_fma and not info.has_avx512
    assert info.simd_bytes() == 32


def test_cflags(monkeypatch):
    monkeypatch.delenv("KILN_HOST_TARGET", raising=False)
    assert "-march=native" in target_cflags("llvm")
    assert "-march=core-avx2" in target_cflags("llvm -mcpu=core-avx2")   # gcc knows LLVM's name
    assert "-march=skylake-avx512" in target_cflags(Target("c -mcpu=skylake-avx512"))
    assert "-mavx2" in target_cflags("llvm -mcpu=x86-64 -mattr=+avx2") and "-O2" in target_cflags("llvm -opt-level=2")
    assert march_for("generic") == "x86-64"
    with pytest.raises(TargetFlagsError, match="unknown -mcpu='pentium-pro-9000'.*core-avx2"):
        target_cflags("llvm -mcpu=pentium-pro-9000")
    with pytest.raises(NotImplementedError, match="cuda"):
        target_cflags("cuda")
