"""Host CPU facts for CPU schedules: SIMD width, FMA, core count (read once from /proc/cpuinfo).

A target that names a CPU (``-mcpu=skylake-avx512``) or features (``-mattr=+avx2``) answers
for that CPU; a plain ``llvm`` target answers for the machine kiln runs on.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache


@dataclass(frozen=True)
class CpuInfo:
    """What kiln needs to know about a CPU."""

    flags: frozenset = field(default_factory=frozenset)
    num_cores: int = 1
    model_name: str = ""

    @property
    def has_avx512(self) -> bool:
        return "avx512f" in self.flags

    @property
    def has_avx2(self) -> bool:
        return "avx2" in self.flags

    @property
    def has_fma(self) -> bool:
        return "fma" in self.flags

    def simd_bytes(self) -> int:
        if "avx512f" in self.flags:
            return 64
        if "avx2" in self.flags or "avx" in self.flags:
            return 32
        return 16


def _read_cpuinfo(text: str) -> CpuInfo:
    flags: set = set()
    model = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("flags", "Features") and not flags:
            flags = set(value.split())
        elif key == "model name" and not model:
            model = value.strip()
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return CpuInfo(frozenset(flags), max(cores, 1), model)


@lru_cache(maxsize=1)
def host_cpu_info() -> CpuInfo:
    """The host CPU's flags and usable core count (cached for the process)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return _read_cpuinfo(f.read())
    except OSError:
        return _read_cpuinfo("")


# Features implied by a named CPU (the -mcpu names LLVM and gcc use).
_CPU_FEATURES = {
    "x86-64": {"sse2"},
    "nehalem": {"sse4_2"}, "westmere": {"sse4_2"},
    "sandybridge": {"avx"}, "corei7-avx": {"avx"}, "ivybridge": {"avx"}, "core-avx-i": {"avx"},
    "haswell": {"avx", "avx2", "fma"}, "core-avx2": {"avx", "avx2", "fma"}, "broadwell": {"avx", "avx2", "fma"},
    "skylake": {"avx", "avx2", "fma"}, "znver1": {"avx", "avx2", "fma"}, "znver2": {"avx", "avx2", "fma"},
    "znver3": {"avx", "avx2", "fma"}, "alderlake": {"avx", "avx2", "fma"},
    "skylake-avx512": {"avx", "avx2", "fma", "avx512f"}, "cascadelake": {"avx", "avx2", "fma", "avx512f"},
    "cooperlake": {"avx", "avx2", "fma", "avx512f"}, "icelake-server": {"avx", "avx2", "fma", "avx512f"},
    "icelake-client": {"avx", "avx2", "fma", "avx512f"}, "tigerlake": {"avx", "avx2", "fma", "avx512f"},
    "sapphirerapids": {"avx", "avx2", "fma", "avx512f"}, "znver4": {"avx", "avx2", "fma", "avx512f"},
}


def target_cpu_flags(target=None) -> frozenset:
    """The CPU features a target promises: from -mcpu/-mattr, or the host's when it names none."""
    from .target import Target
    if target is None:
        target = Target.current(allow_none=True)
    if target is not None and not isinstance(target, Target):
        target = Target(target)
    if target is None or (not target.mcpu and not target.mattr) or target.mcpu == "native":
        flags = set(host_cpu_info().flags)
    else:
        flags = set(_CPU_FEATURES.get(target.mcpu, set()))
    if target is not None:
        for attr in target.mattr:
            name = attr.lstrip("+-").replace(".", "_").lower()
            if attr.startswith("-"):
                flags.discard(name)
            else:
                flags.add(name)
    return frozenset(flags)


def get_simd_width(target=None, dtype: str = "float32") -> int:
    """Vector lanes of ``dtype`` in one SIMD register (fp32: 16 with AVX-512, 8 with AVX/AVX2, else 4)."""
    from ..runtime.dtype import parse_dtype
    flags = target_cpu_flags(target)
    if "avx512f" in flags:
        nbytes = 64
    elif "avx2" in flags or "avx" in flags:
        nbytes = 32
    else:
        nbytes = 16
    return max(1, nbytes // parse_dtype(dtype).itemsize)


def target_has_fma(target=None) -> bool:
    return "fma" in target_cpu_flags(target)


def target_has_avx512(target=None) -> bool:
    return "avx512f" in target_cpu_flags(target)


def target_has_avx2(target=None) -> bool:
    return "avx2" in target_cpu_flags(target)


def get_num_cores(target=None) -> int:
    from .target import Target
    if target is None:
        target = Target.current(allow_none=True)
    if target is not None and not isinstance(target, Target):
        target = Target(target)
    return target.num_cores if target is not None else host_cpu_info().num_cores
