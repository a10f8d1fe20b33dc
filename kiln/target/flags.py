"""C compiler flags for a Target: ``-march`` from ``-mcpu``, feature flags from ``-mattr``.

kiln's CPU targets ("llvm", "c") generate C compiled by the system C compiler (gcc), so LLVM's
CPU names are translated to gcc's. A target without ``-mcpu`` compiles for the build machine
(``-march=native``).
"""
from __future__ import annotations

from ..error import KilnError

# LLVM -mcpu names whose gcc -march spelling differs.
_LLVM_TO_GCC = {
    "core-avx2": "haswell",
    "corei7-avx": "sandybridge",
    "core-avx-i": "ivybridge",
    "corei7": "nehalem",
    "x86-64-v2": "x86-64-v2",
    "generic": "x86-64",
}

# -march names gcc 12 accepts for x86-64 (the ones kiln passes through unchanged).
_GCC_X86 = {
    "native", "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "nehalem", "westmere", "sandybridge",
    "ivybridge", "haswell", "broadwell", "skylake", "skylake-avx512", "cascadelake", "cooperlake",
    "cannonlake", "icelake-client", "icelake-server", "tigerlake", "sapphirerapids", "alderlake",
    "rocketlake", "znver1", "znver2", "znver3", "znver4", "bdver4", "btver2", "knl", "knm",
}


class TargetFlagsError(KilnError, ValueError):
    """A target option that cannot be turned into compiler flags."""


def march_for(mcpu: str) -> str:
    """gcc's ``-march`` name for an LLVM/gcc ``-mcpu`` name."""
    name = _LLVM_TO_GCC.get(mcpu, mcpu)
    if name not in _GCC_X86:
        examples = "core-avx2, skylake-avx512, cascadelake, znver3, haswell, x86-64-v3, native"
        raise TargetFlagsError(
            f"unknown -mcpu={mcpu!r} for the C backend; known CPU names include {examples} "
            f"(all: {', '.join(sorted(_GCC_X86 | set(_LLVM_TO_GCC)))})"
        )
    return name


def _mattr_flag(attr: str) -> str:
    name = attr.lstrip("+-").lower().replace("_", ".")
    if not name:
        raise TargetFlagsError(f"empty -mattr entry {attr!r}; expected e.g. +avx2,+fma")
    return ("-mno-" if attr.startswith("-") else "-m") + name


def target_cflags(target) -> list:
    """Compiler flags for ``target`` (a Target or target string)."""
    from .target import Target
    if target is None:
        target = Target("llvm")
    elif not isinstance(target, Target):
        target = Target(target)
    if target.kind.name not in ("llvm", "c"):
        raise NotImplementedError(
            f"kiln cannot compile for target kind {target.kind.name!r} yet; use 'llvm' or 'c' (the host CPU)"
        )
    mtriple = target.attrs.get("mtriple", "")
    if mtriple and not (mtriple.startswith("x86_64") or mtriple.startswith("x86-64")):
        raise NotImplementedError(
            f"cross-compiling for -mtriple={mtriple} is not supported; kiln builds for the host x86-64 CPU"
        )
    level = target.opt_level
    flags = [f"-O{min(max(level, 0), 3)}"]
    flags.append("-march=" + (march_for(target.mcpu) if target.mcpu else "native"))
    flags.extend(_mattr_flag(a) for a in target.mattr)
    if target.attrs.get("fast-math"):
        flags.append("-ffast-math")
    return flags
