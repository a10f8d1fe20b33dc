"""CUDA toolkit helpers under TVM's names (``tvm.contrib.nvcc``).

The capability checks (``have_fp16``, ``have_int8``, ``have_tensorcore``, ``have_bf16``) are pure functions of
a compute version such as ``"8.0"``; given no version (what a CPU-only machine has) they answer False.
The GPU, when there is one, is found through the CUDA driver library (``libcuda``) with ctypes, so this module
imports and answers honestly on machines without CUDA. ``compile_cuda`` runs the ``nvcc`` it finds.
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
import warnings

from ..error import ArgumentError, CompileError, DeviceError
from ..target import Target

__all__ = ["compile_cuda", "find_cuda_path", "get_cuda_version", "parse_compute_version", "have_fp16",
           "have_int8", "have_tensorcore", "have_bf16", "have_cudagraph", "get_target_compute_version"]


# -- the toolkit -----------------------------------------------------------------------------------------
def find_cuda_path() -> str:
    """The CUDA toolkit folder: $CUDA_HOME / $CUDA_PATH, the folder above ``nvcc`` on PATH, or /usr/local/cuda."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        path = os.environ.get(var)
        if path and os.path.isdir(path):
            return path
    if os.path.isfile("/usr/local/cuda/bin/nvcc"):
        return "/usr/local/cuda"
    nvcc = shutil.which("nvcc")
    if nvcc:
        return os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    raise DeviceError("no CUDA toolkit found: nvcc is not on PATH, CUDA_HOME/CUDA_PATH are unset and "
                      "/usr/local/cuda does not exist")


def _nvcc_path(cuda_path: str | None = None) -> str:
    folder = cuda_path or find_cuda_path()
    nvcc = os.path.join(folder, "bin", "nvcc")
    if os.path.isfile(nvcc):
        return nvcc
    found = shutil.which("nvcc")
    if found:
        return found
    raise DeviceError(f"no nvcc in the CUDA toolkit at {folder!r}")


def get_cuda_version(cuda_path: str | None = None) -> tuple:
    """(major, minor) of the CUDA toolkit, from ``version.json`` / ``version.txt`` or ``nvcc --version``."""
    folder = cuda_path or find_cuda_path()
    json_path = os.path.join(folder, "version.json")
    if os.path.isfile(json_path):
        import json
        with open(json_path, encoding="utf-8") as f:
            version = json.load(f).get("cuda", {}).get("version", "")
        m = re.match(r"(\d+)\.(\d+)", version)
        if m:
            return int(m.group(1)), int(m.group(2))
    txt_path = os.path.join(folder, "version.txt")
    if os.path.isfile(txt_path):
        with open(txt_path, encoding="utf-8") as f:
            m = re.search(r"(\d+)\.(\d+)", f.read())
        if m:
            return int(m.group(1)), int(m.group(2))
    out = subprocess.run([_nvcc_path(folder), "--version"], capture_output=True, text=True, check=False).stdout
    m = re.search(r"release (\d+)\.(\d+)", out)
    if not m:
        raise DeviceError(f"cannot tell the CUDA version of the toolkit at {folder!r}")
    return int(m.group(1)), int(m.group(2))


def compile_cuda(code: str, target_format: str = "ptx", arch=None, options=None, path_target=None) -> bytes:
    """Compile CUDA C ``code`` with nvcc to ``ptx``, ``cubin`` or ``fatbin`` and return the bytes."""
    if target_format not in ("ptx", "cubin", "fatbin"):
        raise ArgumentError(f"compile_cuda: target_format must be 'ptx', 'cubin' or 'fatbin', got {target_format!r}")
    if arch is None:
        major, minor = parse_compute_version(get_target_compute_version())
        arch = [f"-arch=sm_{major}{minor}"]
    elif isinstance(arch, str):
        arch = [arch if arch.startswith("-") else f"-arch={arch}"]
    nvcc = _nvcc_path()
    with tempfile.TemporaryDirectory(prefix="kiln_nvcc_") as work:
        src = os.path.join(work, "kernel.cu")
        out = path_target or os.path.join(work, f"kernel.{target_format}")
        with open(src, "w", encoding="utf-8") as f:
            f.write(code)
        cmd = [nvcc, f"--{target_format}", "-O3", *arch]
        if isinstance(options, str):
            cmd.append(options)
        elif options:
            cmd.extend(options)
        cmd += ["-o", out, src]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            kept = os.path.join(tempfile.gettempdir(), f"kiln_nvcc_failed_{os.getpid()}.cu")
            shutil.copy(src, kept)
            raise CompileError(f"nvcc failed ({' '.join(cmd)}):\n{proc.stdout}{proc.stderr}", kept,
                               proc.stdout + proc.stderr)
        with open(out, "rb") as f:
            return f.read()


# -- compute versions ------------------------------------------------------------------------------------
def parse_compute_version(compute_version) -> tuple:
    """``"8.6"`` -> (8, 6)."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", str(compute_version))
    if not m:
        raise ArgumentError(f"cannot parse compute version {compute_version!r}: expected MAJOR.MINOR, e.g. '8.0'")
    return int(m.group(1)), int(m.group(2))


def _version_or_none(compute_version):
    if compute_version is None or compute_version == "":
        return None
    return parse_compute_version(compute_version)


def have_fp16(compute_version) -> bool:
    """Whether a GPU of ``compute_version`` has fast fp16 arithmetic (5.3, and 6.0 or later); False for None."""
    v = _version_or_none(compute_version)
    return v is not None and (v == (5, 3) or v[0] >= 6)


def have_int8(compute_version) -> bool:
    """Whether a GPU of ``compute_version`` has int8 dot products (6.x or later, as TVM decides); False for None."""
    v = _version_or_none(compute_version)
    return v is not None and v[0] >= 6


def have_bf16(compute_version) -> bool:
    """Whether a GPU of ``compute_version`` has bf16 tensor arithmetic (8.0 or later); False for None."""
    v = _version_or_none(compute_version)
    return v is not None and v[0] >= 8


def have_tensorcore(compute_version=None, target=None) -> bool:
    """Whether tensor cores exist (7.0 or later): for ``compute_version``, else ``target``'s ``-arch``, else the
    GPU of this machine; False when there is none of these."""
    if compute_version is None and target is not None:
        compute_version = _arch_version(target)
    if compute_version is None:
        compute_version = _gpu_compute_version()
        if compute_version is None:
            warnings.warn("have_tensorcore: no compute version given and no CUDA GPU found; answering False",
                          stacklevel=2)
            return False
    v = parse_compute_version(compute_version)
    return v[0] >= 7


def have_cudagraph() -> bool:
    """Whether the CUDA toolkit supports CUDA graphs (10.0 or later); False without a toolkit."""
    try:
        return get_cuda_version()[0] >= 10
    except DeviceError:
        return False


def _arch_version(target) -> str | None:
    if isinstance(target, str):
        target = Target(target)
    arch = (getattr(target, "attrs", {}) or {}).get("arch")
    if not arch:
        return None
    m = re.fullmatch(r"sm_(\d+)(\d)[a-z]?", str(arch))
    if not m:
        raise ArgumentError(f"cannot read a compute version from -arch={arch!r}; expected e.g. sm_80")
    return f"{m.group(1)}.{m.group(2)}"


def get_target_compute_version(target=None) -> str:
    """The compute version (``"8.0"``) of ``target``'s ``-arch``, of the current target, or of this machine's
    GPU; raises a DeviceError when none of them gives one."""
    target = target if target is not None else Target.current(allow_none=True)
    if target is not None:
        version = _arch_version(target)
        if version:
            return version
    version = _gpu_compute_version()
    if version is None:
        raise DeviceError("no CUDA compute version: the target has no -arch (e.g. Target('cuda -arch=sm_80')) and "
                          "no CUDA GPU was found on this machine")
    return version


def _gpu_compute_version(dev_id: int = 0) -> str | None:
    """Compute version of GPU ``dev_id`` via the CUDA driver API, or None (no driver, no GPU)."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll", "libcuda.dylib"):
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return None
    try:
        if lib.cuInit(0) != 0:
            return None
        count = ctypes.c_int(0)
        if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value <= dev_id:
            return None
        dev = ctypes.c_int(0)
        if lib.cuDeviceGet(ctypes.byref(dev), dev_id) != 0:
            return None
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
        if lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev) != 0:
            return None
        if lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev) != 0:
            return None
    except AttributeError:
        return None
    return f"{major.value}.{minor.value}"
