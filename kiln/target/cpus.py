"""x86 CPU names (LLVM's ``-mcpu`` spellings) and the ISA features each implies (LLVM feature names).

Each name has a *parent*: an older CPU whose features are a subset. When the installed C compiler does not
know a name (gcc 12 has no ``znver4``, ``znver5``, ``graniterapids``), kiln compiles for the nearest ancestor
it knows plus ``-m<feature>`` for each feature the ancestor lacks (see :func:`kiln.target.flags.march_for`).
"""
from __future__ import annotations

_X86_64 = {"sse", "sse2"}
_V2 = _X86_64 | {"sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16", "sahf"}
_V3 = _V2 | {"avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave"}
_AVX512_BASE = {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}
_ICL_AVX512 = {"avx512ifma", "avx512vbmi", "avx512vbmi2", "avx512vnni", "avx512bitalg", "avx512vpopcntdq",
               "vaes", "vpclmulqdq", "gfni"}

# name -> (parent, features added to the parent's)
_TABLE = {
    "x86-64": (None, _X86_64),
    "x86-64-v2": ("x86-64", _V2),
    "x86-64-v3": ("x86-64-v2", _V3),
    "x86-64-v4": ("x86-64-v3", _AVX512_BASE),
    "nehalem": ("x86-64", _V2),
    "corei7": ("x86-64", _V2),
    "westmere": ("nehalem", {"pclmul", "aes"}),
    "sandybridge": ("westmere", {"avx", "xsave"}),
    "corei7-avx": ("westmere", {"avx", "xsave"}),
    "ivybridge": ("sandybridge", {"f16c", "rdrnd", "fsgsbase"}),
    "core-avx-i": ("sandybridge", {"f16c", "rdrnd", "fsgsbase"}),
    "haswell": ("ivybridge", {"avx2", "bmi", "bmi2", "fma", "lzcnt", "movbe"}),
    "core-avx2": ("ivybridge", {"avx2", "bmi", "bmi2", "fma", "lzcnt", "movbe"}),
    "broadwell": ("haswell", {"adx", "rdseed", "prfchw"}),
    "skylake": ("broadwell", {"clflushopt", "xsavec", "xsaves"}),
    "skylake-avx512": ("skylake", _AVX512_BASE | {"clwb", "pku"}),
    "cascadelake": ("skylake-avx512", {"avx512vnni"}),
    "cooperlake": ("cascadelake", {"avx512bf16"}),
    "cannonlake": ("skylake", _AVX512_BASE | {"avx512ifma", "avx512vbmi", "sha", "pku"}),
    "icelake-client": ("cannonlake", _ICL_AVX512 | {"rdpid"}),
    "rocketlake": ("cannonlake", _ICL_AVX512 | {"rdpid"}),
    "icelake-server": ("icelake-client", {"clwb", "wbnoinvd"}),
    "tigerlake": ("icelake-client", {"avx512vp2intersect", "movdiri", "movdir64b", "shstk", "clwb"}),
    "sapphirerapids": ("icelake-server", {"avx512bf16", "avx512fp16", "avxvnni", "amx-tile", "amx-int8",
                                          "amx-bf16", "movdiri", "movdir64b", "serialize", "waitpkg",
                                          "cldemote", "enqcmd", "tsxldtrk", "uintr", "ptwrite", "shstk"}),
    "emeraldrapids": ("sapphirerapids", set()),
    "graniterapids": ("sapphirerapids", {"amx-fp16", "prefetchi"}),
    "graniterapids-d": ("graniterapids", {"amx-complex"}),
    "alderlake": ("skylake", {"avxvnni", "gfni", "vaes", "vpclmulqdq", "sha", "waitpkg", "serialize",
                              "movdiri", "movdir64b", "ptwrite", "shstk", "rdpid", "clwb", "pku"}),
    "raptorlake": ("alderlake", set()),
    "meteorlake": ("alderlake", set()),
    "gracemont": ("alderlake", set()),
    "arrowlake": ("alderlake", {"avxifma", "avxvnniint8", "avxneconvert", "cmpccxadd"}),
    "znver1": ("broadwell", {"aes", "clflushopt", "xsavec", "xsaves", "sha", "sse4a", "clzero", "mwaitx"}),
    "znver2": ("znver1", {"clwb", "rdpid", "wbnoinvd"}),
    "znver3": ("znver2", {"invpcid", "pku", "vaes", "vpclmulqdq"}),
    "znver4": ("znver3", _AVX512_BASE | _ICL_AVX512 | {"avx512bf16", "shstk"}),
    "znver5": ("znver4", {"avxvnni", "movdiri", "movdir64b", "avx512vp2intersect", "prefetchi"}),
}
# spellings that mean the same CPU
_ALIASES = {"generic": "x86-64", "x86_64": "x86-64"}


class UnknownCpuError(LookupError):
    """Raised by :func:`cpu_features` for a name not in the table (kiln.target.flags reports it)."""


def known_cpu_names() -> list:
    """Every x86 ``-mcpu`` name kiln knows (plus ``native``: the build machine)."""
    return sorted(set(_TABLE) | set(_ALIASES) | {"native"})


def canonical_cpu(name: str) -> str:
    name = _ALIASES.get(name, name)
    if name not in _TABLE:
        raise UnknownCpuError(name)
    return name


def cpu_features(name: str) -> frozenset:
    """The features (LLVM names) CPU ``name`` implies, inherited through its parents."""
    feats: set = set()
    cur = canonical_cpu(name)
    while cur is not None:
        parent, added = _TABLE[cur]
        feats |= added
        cur = parent
    return frozenset(feats)


def cpu_ancestors(name: str) -> list:
    """``name`` and its parents, nearest first (the compiler fallbacks)."""
    out, cur = [], canonical_cpu(name)
    while cur is not None:
        out.append(cur)
        cur = _TABLE[cur][0]
    return out
