"""C compiler flags for a Target: ``-march`` from ``-mcpu``, feature flags from ``-mattr``.

kiln's CPU targets ("llvm", "c") generate C compiled by the system C compiler (gcc), so LLVM's
CPU names are translated to gcc's: the name when gcc knows it (probed once per compiler), else the
nearest older CPU gcc knows plus ``-m<feature>`` flags for what it lacks. A target without ``-mcpu``
compiles for ``$KILN_HOST_TARGET`` when set, else for the build machine (``-march=native``).

AVX512-FP16 stays off (``-mno-avx512fp16``) unless ``-mattr=+avx512fp16`` asks for it, also for CPUs that have
it (sapphirerapids, znver5 hosts): kiln's kernels never use its instructions on purpose, ``float16``
arithmetic then rounds the same on every CPU (gcc evaluates ``_Float16`` in float without AVX512-FP16 and in
half precision with it), and gcc 13 emits AVX512-FP16 stores with zero-masking (``vmovsh %xmm1,
(%rcx){%k1}{z}``) that the assembler rejects, failing every float16 model on such a host.

AMX (``amx-tile``, ``amx-int8``, ``amx-bf16``, ``amx-fp16``, ``amx-complex``) and AVX512-VP2INTERSECT are turned
off too (``-mno-<feature>``, where the compiler's ``-march`` enables them and ``-mattr`` does not ask for them):
their instructions come only from their intrinsics, which kiln's C never calls, so the code cannot contain them
and a library need not require them (:func:`compiled_features`): code for sapphirerapids loads on a CPU, or a
VM, that hides AMX. gcc 12's ``-march=sapphirerapids`` also enables AVX512-VP2INTERSECT, which LLVM's (and kiln's)
sapphirerapids does not list.
"""
from __future__ import annotations

import os
import subprocess
import threading

from ..error import KilnError
from ..runtime.cpu_features import ISA_FEATURES
from .compiler import DEFAULT_CFLAGS, compiler_identity, find_compiler
from .cpus import known_cpu_names, UnknownCpuError, cpu_ancestors, cpu_features


class TargetFlagsError(KilnError, ValueError):
    """A target option that cannot be turned into compiler flags."""


def unknown_cpu_error(mcpu: str) -> TargetFlagsError:
    return TargetFlagsError(
        f"unknown -mcpu={mcpu!r}: kiln knows the x86 CPU names {', '.join(known_cpu_names())} "
        "(LLVM's spellings, e.g. core-avx2, skylake-avx512, znver4, sapphirerapids, x86-64-v3)")


def _probe(args: tuple) -> bool:
    """Whether the C compiler accepts ``args`` (preprocessing an empty file)."""
    cc = tuple(find_compiler())
    key = (compiler_identity(list(cc)), args)
    with _probe_lock:
        hit = _probe_cache.get(key)
    if hit is None:
        try:
            proc = subprocess.run(list(cc) + list(args) + ["-E", "-x", "c", os.devnull, "-o", os.devnull],
                                  capture_output=True, timeout=60)
            hit = proc.returncode == 0
        except (OSError, subprocess.SubprocessError):
            hit = False
        with _probe_lock:
            _probe_cache[key] = hit
    return hit


_probe_cache: dict = {}
_probe_lock = threading.Lock()


def march_and_flags(mcpu: str) -> tuple:
    """``(-march name, [-m<feature> ...])`` for CPU ``mcpu``: the name itself when the C compiler knows it,
    else its nearest ancestor the compiler knows plus the features that ancestor lacks (those the compiler
    has flags for). gcc 12 builds ``znver4`` as ``-march=znver3 -mavx512f -mavx512bw ...``."""
    if mcpu == "native":
        return "native", []
    try:
        chain = cpu_ancestors(mcpu)
    except UnknownCpuError:
        raise unknown_cpu_error(mcpu) from None
    for name in chain:
        if _probe((f"-march={name}",)):
            extra = sorted(cpu_features(mcpu) - cpu_features(name))
            return name, [f"-m{f}" for f in extra if _probe((f"-m{f}",))]
    raise TargetFlagsError(f"the C compiler accepts none of -march={', '.join(chain)} for -mcpu={mcpu!r}")


def march_for(mcpu: str) -> str:
    """The C compiler's ``-march`` name for an LLVM ``-mcpu`` name (see :func:`march_and_flags`)."""
    return march_and_flags(mcpu)[0]


def cpu_cflags(target) -> list:
    """``-march=...`` and the feature flags for the CPU of ``target`` (``$KILN_HOST_TARGET`` or the build
    machine, ``-march=native``, when it names none)."""
    from .x86 import host_target
    mcpu = target.mcpu
    if not mcpu:
        host = host_target()
        if host is not None:
            return cpu_cflags(host) + [_mattr_flag(a) for a in host.mattr]
        mcpu = "native"
    march, extra = march_and_flags(mcpu)
    return [f"-march={march}"] + extra


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
    flags.extend(cpu_cflags(target))
    flags.extend(_mattr_flag(a) for a in target.mattr)
    asked = _asked_features(target)
    if "avx512fp16" not in asked and _probe(("-mno-avx512fp16",)):
        flags.append("-mno-avx512fp16")
    enabled = compiled_features(flags) or frozenset()
    amx_asked = any(f.startswith("amx-") for f in asked)
    for feat in UNUSED_FEATURES:
        # an asked AMX extension keeps amx-tile, whose tile loads and configuration it needs
        if feat in enabled and feat not in asked and not (feat == "amx-tile" and amx_asked):
            flags.append(f"-mno-{feat}")
    if target.attrs.get("fast-math"):
        flags.append("-ffast-math")
    return flags


#: ISA extensions kiln compiles without (``-mno-<feature>``) where the compiler's ``-march`` enables them, unless
#: ``-mattr`` asks for them: only their intrinsics emit their instructions, and kiln's C calls none of them.
#: (AVX512-FP16 is off as well, for every target: see the module docstring.)
UNUSED_FEATURES = ("amx-tile", "amx-int8", "amx-bf16", "amx-fp16", "amx-complex", "avx512vp2intersect")


def _asked_features(target) -> set:
    """The features ``-mattr`` turns on: the target's, and ``$KILN_HOST_TARGET``'s when the target names no CPU
    (its ``-mattr`` flags are in :func:`cpu_cflags`)."""
    attrs = list(target.mattr)
    if not target.mcpu:
        from .x86 import host_target
        host = host_target()
        if host is not None:
            attrs += list(host.mattr)
    return {a[1:].lower().replace("_", ".") for a in attrs if a.startswith("+")}


def _feature_macro(feature: str) -> str:
    """The macro a C compiler predefines when ``feature`` is enabled: ``avx512f`` -> ``__AVX512F__``,
    ``sse4.1`` -> ``__SSE4_1__``, ``amx-tile`` -> ``__AMX_TILE__``."""
    return "__" + feature.upper().replace("-", "_").replace(".", "_") + "__"


def compiled_features(flags) -> frozenset | None:
    """The ISA features (LLVM names, those :data:`kiln.runtime.cpu_features.ISA_FEATURES` lists) the C compiler
    may use when it compiles with ``flags`` (after kiln's default flags): those whose macro it predefines
    (``__AVX512F__``, ``__AMX_TILE__``, ...), so ``-march``, ``-m<feature>`` and ``-mno-<feature>`` count as the
    compiler applies them. None when the compiler cannot be asked."""
    cc = tuple(find_compiler())
    args = tuple(DEFAULT_CFLAGS) + tuple(flags)
    key = (compiler_identity(list(cc)), "macros", args)
    with _probe_lock:
        hit = _probe_cache.get(key, _MISSING)
    if hit is _MISSING:
        hit = None
        try:
            proc = subprocess.run(list(cc) + list(args) + ["-dM", "-E", "-x", "c", os.devnull],
                                  capture_output=True, text=True, timeout=60)
            if proc.returncode == 0:
                defined = {line.split()[1] for line in proc.stdout.splitlines()
                           if line.startswith("#define ") and len(line.split()) > 1}
                hit = frozenset(f for f in ISA_FEATURES if _feature_macro(f) in defined)
        except (OSError, subprocess.SubprocessError):
            pass
        with _probe_lock:
            _probe_cache[key] = hit
    return hit


_MISSING = object()
