"""``requires_*`` markers for host CPU features (TVM's ``tvm.testing.requires_cascadelake`` etc.).

A test that *runs* code for an ISA needs the host to have it; these read the host's flags (/proc/cpuinfo via
:func:`kiln.target.x86.host_cpu_info`) and skip otherwise. Code for an ISA the host lacks can still be
compiled without them. Backends kiln does not have (DNNL, TensorRT, Ethos, ...) are features that are
never present, so TVM tests marked with them skip with a reason instead of failing at import.
"""
from __future__ import annotations

from .targets import Feature, requires_x86
from ..target.x86 import host_cpu_info

_AVX512_CORE = ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl")


def host_cpu_flags() -> frozenset:
    """The host CPU's feature flags (empty where /proc/cpuinfo is unreadable)."""
    return host_cpu_info().flags


def _has_all(*flags: str):
    return lambda: all(f in host_cpu_flags() for f in flags)


def _has_any(*flags: str):
    return lambda: any(f in host_cpu_flags() for f in flags)


requires_x86_avx512 = Feature("x86_avx512", "x86 AVX-512 (F, CD, BW, DQ, VL)", _has_all(*_AVX512_CORE),
                              parent_features=[requires_x86])
requires_skylake_avx512 = Feature("skylake_avx512", "an x86 CPU with Skylake-AVX512's ISA",
                                  _has_all(*_AVX512_CORE), parent_features=[requires_x86])
requires_cascadelake = Feature("cascadelake", "an x86 CPU with CascadeLake's ISA (AVX-512 VNNI)",
                               _has_all(*_AVX512_CORE, "avx512_vnni"), parent_features=[requires_x86])
requires_x86_vnni = Feature("x86_vnni", "x86 VNNI (AVX512-VNNI or AVX-VNNI)", _has_any("avx512_vnni", "avx_vnni"),
                            parent_features=[requires_x86])
requires_x86_amx = Feature("x86_amx", "x86 AMX (amx_tile, amx_int8)", _has_all("amx_tile", "amx_int8"),
                           parent_features=[requires_x86])
requires_arm_dot = Feature("arm_dot", "ARM dot-product instructions", _has_any("asimddp"))
requires_arm_fp16 = Feature("arm_fp16", "ARM fp16 arithmetic", _has_any("asimdhp"))
requires_aarch64_sve = Feature("aarch64_sve", "AArch64 SVE", _has_any("sve"))

_ABSENT_BACKENDS = {
    "dnnl": "the DNNL (oneDNN) BYOC backend", "tensorrt": "TensorRT", "ethosn": "Arm Ethos-N",
    "ethosu": "Arm Ethos-U", "corstone300": "the Corstone-300 FVP", "vitis_ai": "Vitis AI",
    "cmsisnn": "CMSIS-NN", "libtorch": "the libtorch BYOC backend", "openclml": "OpenCLML",
    "matrixcore": "AMD Matrix Cores", "cutlass": "CUTLASS", "mrvl": "the Marvell backend",
    "usmp": "the unified static memory planner (AOT)", "hexagon_runtime": "the Hexagon runtime",
}
for _name, _long in _ABSENT_BACKENDS.items():
    globals()[f"requires_{_name}"] = Feature(_name, f"{_long}, which kiln does not have", lambda: False)

__all__ = ["host_cpu_flags", "requires_x86_avx512", "requires_skylake_avx512", "requires_cascadelake",
           "requires_x86_vnni", "requires_x86_amx", "requires_arm_dot", "requires_arm_fp16", "requires_aarch64_sve"]
__all__ += [f"requires_{n}" for n in _ABSENT_BACKENDS]
