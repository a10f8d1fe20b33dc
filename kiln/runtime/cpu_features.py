"""The instruction-set features of the CPU kiln runs on, and the check that a compiled library can run here.

A library records the ISA features its code may use (``required_features`` in its module blob, LLVM feature
names such as ``avx2``, ``avx512f``, ``avx512vnni``). Before the dynamic loader maps it, the runtime compares
them with the features this CPU reports, so that a library built for a newer CPU raises a ModuleLoadError
naming what is missing instead of dying by SIGILL at its first AVX-512 instruction. Runtime-only code: no
compiler, no kiln.target.
"""
from __future__ import annotations

from functools import lru_cache

from ..error import ModuleLoadError

#: ISA features a library records and the loader checks: LLVM name -> the /proc/cpuinfo flag of the same
#: extension. Only extensions a C compiler emits for arithmetic code are listed; crypto and system extensions
#: (aes, sha, rdrand, ...) are not generated from kiln's kernels and are not required.
ISA_FEATURES = {
    "sse": "sse", "sse2": "sse2", "sse3": "pni", "ssse3": "ssse3", "sse4.1": "sse4_1", "sse4.2": "sse4_2",
    "popcnt": "popcnt", "avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c", "bmi": "bmi1",
    "bmi2": "bmi2", "lzcnt": "abm", "movbe": "movbe",
    "avx512f": "avx512f", "avx512cd": "avx512cd", "avx512bw": "avx512bw", "avx512dq": "avx512dq",
    "avx512vl": "avx512vl", "avx512ifma": "avx512ifma", "avx512vbmi": "avx512vbmi",
    "avx512vbmi2": "avx512_vbmi2", "avx512vnni": "avx512_vnni", "avx512bitalg": "avx512_bitalg",
    "avx512vpopcntdq": "avx512_vpopcntdq", "avx512bf16": "avx512_bf16", "avx512fp16": "avx512_fp16",
    "avx512vp2intersect": "avx512_vp2intersect", "avxvnni": "avx_vnni",
    "amx-tile": "amx_tile", "amx-int8": "amx_int8", "amx-bf16": "amx_bf16", "amx-fp16": "amx_fp16",
}
_FROM_CPUINFO = {flag: name for name, flag in ISA_FEATURES.items()}


def features_from_cpuinfo_flags(flags) -> frozenset:
    """LLVM names of the ISA features in a set of ``/proc/cpuinfo`` flags."""
    return frozenset(_FROM_CPUINFO[f] for f in flags if f in _FROM_CPUINFO)


@lru_cache(maxsize=1)
def _cpuinfo_flags() -> frozenset:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def host_features() -> frozenset:
    """The ISA features (LLVM names) this CPU reports in ``/proc/cpuinfo``."""
    return features_from_cpuinfo_flags(_cpuinfo_flags())


def missing_features(required) -> list:
    """The features of ``required`` this CPU lacks (sorted); names kiln does not check are ignored."""
    have = host_features()
    return sorted(f for f in required if f in ISA_FEATURES and f not in have)


def check_runnable(required, target: str = "", what: str = "this library") -> None:
    """Raise ModuleLoadError naming the missing features when ``required`` is not all on this CPU."""
    missing = missing_features(required or ())
    if missing:
        built = f" was compiled for {target!r} and" if target else ""
        raise ModuleLoadError(
            f"{what}{built} needs CPU features this machine lacks: {', '.join(missing)}. Rebuild it for this "
            "CPU (e.g. target 'llvm' on this machine, or a lower -mcpu such as 'llvm -mcpu=core-avx2' / "
            "'llvm -mcpu=x86-64-v3')")
