"""Hold the other contenders to AVX2 on an AVX-512 machine, so that kiln built with ``-mcpu=core-avx2`` meets
them on the same ISA (``python -m benchmarks.run --isa avx2``).

Why: issue 13 asks for kiln at or ahead of ONNX Runtime "with ``-mcpu=core-avx2``" as well as on AVX-512. On an
AVX-512 machine ONNX Runtime runs its AVX-512 kernels whatever kiln is built for, so the ``core-avx2`` column
compared half-width vectors with full-width ones. What an AVX2-only CPU would show needs ONNX Runtime's AVX2
kernels, which every wheel carries.

How each contender is held:

* **ONNX Runtime** has no switch for its CPU kernels: MLAS and its CPU-feature table pick them at start-up from
  CPUID and from XCR0, the register-state mask the OS enabled (read by ``xgetbv``); AVX-512 kernels need XCR0's
  opmask / ZMM bits (0xE0). :func:`onnxruntime_held_to_avx2` copies the installed ``onnxruntime`` package into a
  scratch folder and, in the copy's native libraries, replaces every ``xgetbv`` (3 bytes, ``0f 01 d0``) with
  ``lea eax, [rcx+7]`` (3 bytes, ``8d 41 07``): an XCR0 read (ecx = 0) then says x87 + SSE + AVX state only, as
  on a CPU or OS without AVX-512, and ONNX Runtime takes the AVX2 / FMA3 kernels it takes there. The instruction
  addresses come from ``objdump -d`` (binutils, installed with gcc), not from a byte search, and each site's
  bytes are checked before they are changed. The installed package is not touched. On this project's Zen 5 VM a
  one-thread 1024^3 MatMul went from 9.0 to 17.0 ms (the two FMA pipes at half width), with the same result.
* **PyTorch**: its own switches, set before torch is imported: ``ATEN_CPU_CAPABILITY=avx2`` (ATen's vectorized
  kernels), ``ONEDNN_MAX_CPU_ISA=AVX2`` (oneDNN convolutions), ``MKL_ENABLE_INSTRUCTIONS=AVX2`` (MKL GEMM).
  The capability torch reports is recorded, so a run where torch was imported first says so.
* **kiln**: its target string (``llvm -mcpu=core-avx2``).

What this is not: an AVX2 *CPU*. The cores, caches and clocks are the AVX-512 machine's (on Zen 5 a 256-bit FMA
issues on the same two pipes as a 512-bit one), so the figures say how the three compilers' AVX2 code compares
on this machine, not what a Zen 3 would measure.
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile

XGETBV = b"\x0f\x01\xd0"
# lea eax, [rcx + 7]: XCR0 (ecx = 0) reads as x87 | SSE | AVX state, without the AVX-512 bits 5-7
XCR0_AVX2_READ = b"\x8d\x41\x07"
TORCH_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
ISAS = ("avx2",)
#: kiln's target for each ISA the other contenders can be held to
KILN_TARGETS = {"avx2": "llvm -mcpu=core-avx2"}

_held: dict = {}


class HoldError(RuntimeError):
    """A contender could not be held to the requested ISA (the message says which and why)."""


def _objdump(*args: str) -> str:
    tool = shutil.which("objdump")
    if tool is None:
        raise HoldError("objdump (binutils) is needed to find ONNX Runtime's xgetbv instructions; "
                        "install binutils (it comes with gcc)")
    return subprocess.run([tool, *args], capture_output=True, text=True, check=True).stdout


def xgetbv_offsets(path: str) -> list:
    """File offsets of the ``xgetbv`` instructions in the code sections of the ELF file ``path``."""
    sections = []
    for m in re.finditer(r"^\s*\d+\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\S+\n"
                         r"\s+([A-Z, ]+)$", _objdump("-h", path), re.M):
        name, size, vma, offset, flags = m.groups()
        if "CODE" in flags:
            sections.append((int(vma, 16), int(size, 16), int(offset, 16)))
    out = []
    for m in re.finditer(r"^\s*([0-9a-f]+):\s+xgetbv\s*$", _objdump("-d", "--no-show-raw-insn", path), re.M):
        addr = int(m.group(1), 16)
        for vma, size, offset in sections:
            if vma <= addr < vma + size:
                out.append(addr - vma + offset)
                break
        else:
            raise HoldError(f"{path}: xgetbv at {addr:#x} lies in no code section")
    return out


def patch_xcr0_reads(path: str) -> int:
    """Make every XCR0 read in ``path`` (in place) report no AVX-512 state; returns the number of sites."""
    offsets = xgetbv_offsets(path)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    for off in offsets:
        if data[off:off + 3] != XGETBV:
            raise HoldError(f"{path}: the bytes at {off:#x} are {bytes(data[off:off + 3]).hex()}, not xgetbv")
        data[off:off + 3] = XCR0_AVX2_READ
    with open(path, "wb") as f:
        f.write(data)
    return len(offsets)


def onnxruntime_held_to_avx2(workdir: str) -> dict:
    """Copy the installed ``onnxruntime`` package to ``workdir/onnxruntime`` with its XCR0 reads patched
    (module docstring); returns {library file name: patched sites}. Put ``workdir`` first on ``sys.path``
    before ``import onnxruntime``."""
    import importlib.util
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or not spec.origin:
        raise HoldError("onnxruntime is not installed")
    src = os.path.dirname(spec.origin)
    dst = os.path.join(workdir, "onnxruntime")
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    sites = {}
    for root, _, files in os.walk(dst):
        for name in files:
            if ".so" in name:
                path = os.path.join(root, name)
                n = patch_xcr0_reads(path)
                if n:
                    sites[os.path.relpath(path, dst)] = n
    if not sites:
        raise HoldError(f"no xgetbv found in {src}'s native libraries: this ONNX Runtime does not read XCR0 "
                        "the way this hold expects, so it cannot be held to AVX2")
    return sites


def hold(isa: str, pytorch: bool = True, onnxruntime: bool = True) -> dict:
    """Hold PyTorch and ONNX Runtime to ``isa`` for the rest of this process (call before importing either);
    returns (and keeps, for :func:`status`) what was done."""
    if isa not in ISAS:
        raise HoldError(f"unknown ISA {isa!r}; this module can hold contenders to: {', '.join(ISAS)}")
    done = {"isa": isa}
    if pytorch:
        if "torch" in sys.modules:
            raise HoldError("torch is already imported: its ISA switches are read when it loads; hold first")
        os.environ.update(TORCH_ENV)
        done["pytorch"] = " ".join(f"{k}={v}" for k, v in TORCH_ENV.items())
    if onnxruntime:
        if "onnxruntime" in sys.modules:
            raise HoldError("onnxruntime is already imported: it picked its kernels when it loaded; hold first")
        workdir = tempfile.mkdtemp(prefix="kiln-ort-avx2-")
        # removed when the process ends (a loaded library stays mapped after its file is gone)
        atexit.register(shutil.rmtree, workdir, True)
        sites = onnxruntime_held_to_avx2(workdir)
        sys.path.insert(0, workdir)
        import onnxruntime as ort
        if not os.path.dirname(ort.__file__).startswith(workdir):
            raise HoldError(f"onnxruntime loaded from {os.path.dirname(ort.__file__)}, not the held copy in {workdir}")
        done["onnxruntime"] = ("a copy whose XCR0 reads report no AVX-512 state ("
                               + ", ".join(f"{k}: {n} xgetbv" for k, n in sorted(sites.items())) + ")")
        done["onnxruntime_path"] = workdir
    _held.clear()
    _held.update(done)
    return dict(done)


def status() -> dict:
    """What :func:`hold` did in this process, with what the held libraries now report ({} when nothing)."""
    if not _held:
        return {}
    out = {k: v for k, v in _held.items() if k != "onnxruntime_path"}
    torch = sys.modules.get("torch")
    if torch is not None and "pytorch" in out:
        out["pytorch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    return out


def status_line(held: dict) -> str:
    """The results header's sentence on the held contenders ('' when none)."""
    if not held:
        return ""
    parts = []
    if "onnxruntime" in held:
        parts.append(f"onnxruntime: {held['onnxruntime']}")
    if "pytorch" in held:
        cap = held.get("pytorch_cpu_capability")
        parts.append(f"pytorch: {held['pytorch']}" + (f" (reports {cap})" if cap else ""))
    return f"Contenders held to {held['isa'].upper()} (benchmarks/isa_hold.py): " + "; ".join(parts) + "."


def add_argument(parser, held: str) -> None:
    """The scripts' ``--isa`` option (``held``: which contenders it holds)."""
    parser.add_argument("--isa", choices=ISAS, default=None,
                        help=f"hold {held} to this ISA (benchmarks/isa_hold.py) and build kiln for it "
                             f"({', '.join(f'{k}: {v}' for k, v in KILN_TARGETS.items())}): an AVX2 comparison on "
                             "an AVX-512 machine")


def apply(parser, isa, pytorch: bool = True, onnxruntime: bool = True):
    """For a script's ``--isa`` value: hold the contenders (a usage error if they cannot be held) and return kiln's
    target for the ISA; None without one."""
    if not isa:
        return None
    try:
        hold(isa, pytorch=pytorch, onnxruntime=onnxruntime)
    except HoldError as err:
        parser.error(f"--isa {isa}: {err}")
    return KILN_TARGETS[isa]


def with_status(line: str, held: dict) -> str:
    """A results header's first line, followed by :func:`status_line` of ``held`` when something was held."""
    text = status_line(held or {})
    return f"{line} {text}" if text else line
