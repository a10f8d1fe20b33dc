"""CPU facts for CPU schedules: ISA features, SIMD width, vector registers, core count.

A target that names a CPU (``-mcpu=skylake-avx512``) answers for that CPU (``kiln.target.cpus``), with its
``-mattr`` applied; a target that names none answers for the host: ``$KILN_HOST_TARGET`` when set, else the
machine kiln runs on (``/proc/cpuinfo``, read once).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from .cpus import UnknownCpuError, cpu_features
from ..runtime.cpu_features import features_from_cpuinfo_flags, missing_features, ISA_FEATURES
from ..runtime.dtype import parse_dtype
from .flags import UNUSED_FEATURES, compiled_features, cpu_cflags, target_cflags, unknown_cpu_error


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


#: Environment variable naming the CPU target that stands for "the host" (``llvm`` with no ``-mcpu``):
#: ``KILN_HOST_TARGET="llvm -mcpu=core-avx2"`` makes an AVX-512 machine build and schedule as an AVX2 one.
HOST_TARGET_ENV = "KILN_HOST_TARGET"


@lru_cache(maxsize=8)
def _parse_host_target(text: str):
    from .target import Target, TargetError
    target = Target(text)
    if target.kind.name not in ("llvm", "c") or not (target.mcpu or target.mattr):
        raise TargetError(f"${HOST_TARGET_ENV}={text!r} should be a CPU target naming -mcpu (e.g. "
                          "'llvm -mcpu=core-avx2')")
    if target.mcpu == "native":
        return None
    return target


def host_target():
    """The Target that stands for the host: ``$KILN_HOST_TARGET`` when set, else None (the machine itself)."""
    text = os.environ.get(HOST_TARGET_ENV, "").strip()
    return _parse_host_target(text) if text else None


def _named_features(target) -> set:
    """Features of a target that names its CPU (-mcpu), with its -mattr applied; the host's when it names none."""
    if target is None or not target.mcpu or target.mcpu == "native":
        ht = host_target()
        if ht is not None and ht is not target:
            flags = _named_features(ht)
        else:
            # cpuinfo spellings (avx512_vnni, ...) and the LLVM names of the ISA extensions
            flags = set(host_cpu_info().flags) | set(features_from_cpuinfo_flags(host_cpu_info().flags))
    else:
        try:
            flags = set(cpu_features(target.mcpu))
        except UnknownCpuError:
            raise unknown_cpu_error(target.mcpu) from None
    if target is not None:
        for attr in target.mattr:
            name = attr.lstrip("+-").lower()
            if attr.startswith("-"):
                flags.discard(name)
            else:
                flags.add(name)
    return flags


def target_cpu_flags(target=None) -> frozenset:
    """The CPU features a target promises (LLVM names: ``avx2``, ``fma``, ``avx512f``, ``avx512vnni``, ...):
    from -mcpu/-mattr, or the host's (``$KILN_HOST_TARGET``, else this machine) when it names no CPU."""
    from .target import Target
    if target is None:
        target = Target.current(allow_none=True)
    if target is not None and not isinstance(target, Target):
        target = Target(target)
    return frozenset(_named_features(target))


def target_has_features(features, target=None) -> bool:
    """Whether the target has every feature of ``features`` (a name or a list; TVM's
    ``tvm.target.codegen.target_has_features``)."""
    if isinstance(features, str):
        features = [features]
    flags = target_cpu_flags(target)
    return all(f in flags for f in features)


def target_has_vnni(target=None) -> bool:
    return "avx512vnni" in target_cpu_flags(target)


def target_has_amx(target=None) -> bool:
    return {"amx-tile", "amx-int8"} <= target_cpu_flags(target)


def host_can_run(target=None) -> bool:
    """Whether code built for ``target`` runs on this machine (every ISA feature it needs is here)."""
    return not missing_features(required_features(target))


def required_features(target=None) -> list:
    """The ISA features (LLVM names, those the runtime checks at load) code built for ``target`` may use: those the
    C compiler enables with kiln's flags for it (:func:`kiln.target.flags.compiled_features` of
    :func:`~kiln.target.flags.target_cflags`), so not the extensions kiln compiles without (AVX512-FP16, AMX,
    AVX512-VP2INTERSECT: ``flags.UNUSED_FEATURES``) even where the CPU has them. Where the compiler cannot be
    asked (none installed, e.g. a machine that only loads exported libraries and asks :func:`host_can_run`): the
    target CPU's features less those."""
    from .compiler import NoCompilerError
    t = _as_target(target)
    try:
        enabled = compiled_features(target_cflags(t))
    except (NotImplementedError, NoCompilerError):  # not a CPU target kiln compiles C for; no C compiler here
        enabled = None
    if enabled is None:
        off = set(UNUSED_FEATURES) | {"avx512fp16"}
        enabled = {f for f in target_cpu_flags(t) if f not in off or f"+{f}" in [a.lower() for a in t.mattr]}
    return sorted(f for f in enabled if f in ISA_FEATURES)


def unused_features(target=None) -> list:
    """The ISA features the target CPU has that code built for it cannot contain (kiln compiles without them,
    see :func:`required_features`): recorded in a library for information, never checked."""
    t = _as_target(target)
    return sorted(set(target_cpu_flags(t)) & set(ISA_FEATURES) - set(required_features(t)))


def _as_target(target):
    from .target import Target
    if target is None:
        target = Target.current(allow_none=True) or Target("llvm")
    return target if isinstance(target, Target) else Target(target)


def get_simd_width(target=None, dtype: str = "float32") -> int:
    """Vector lanes of ``dtype`` in one SIMD register (fp32: 16 with AVX-512, 8 with AVX/AVX2, else 4)."""
    flags = target_cpu_flags(target)
    if "avx512f" in flags:
        nbytes = 64
    elif "avx2" in flags or "avx" in flags:
        nbytes = 32
    else:
        nbytes = 16
    return max(1, nbytes // parse_dtype(dtype).itemsize)


def get_vector_registers(target=None) -> int:
    """SIMD registers the target's ISA names: 32 (zmm0-31) with AVX-512, else 16 (ymm/xmm0-15)."""
    return 32 if "avx512f" in target_cpu_flags(target) else 16


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


def target_cpu_summary(target=None) -> str:
    """One line naming the CPU code for ``target`` is built for: the CPU, its vector ISA and the compiler's
    ``-march`` flags (``kiln compile`` prints it)."""
    from .target import Target
    if target is None:
        target = Target.current(allow_none=True) or Target("llvm")
    elif not isinstance(target, Target):
        target = Target(target)
    host = host_target()
    mcpu = target.mcpu or (host.mcpu if host is not None and host.mcpu else "native")
    cpu = f"native ({host_cpu_info().model_name or 'the build machine'})" if mcpu == "native" else mcpu
    flags = target_cpu_flags(target)
    isa = ("AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "AVX" if "avx" in flags else "SSE")
    extras = [name for feat, name in (("avx512vnni", "VNNI"), ("avx512bf16", "BF16"), ("amx-tile", "AMX"))
              if feat in flags]
    return (f"{cpu}: {'+'.join([isa] + extras)}, {get_simd_width(target)} fp32 lanes "
            f"({' '.join(cpu_cflags(target))})")
