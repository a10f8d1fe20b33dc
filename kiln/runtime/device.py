"""Device: where an NDArray lives and a kernel runs, numbered as DLPack / TVM number device types."""
from __future__ import annotations

from ..error import DeviceError


class Device:
    """A (device_type, device_id) pair; prints as ``cpu(0)``."""

    __slots__ = ("device_type", "device_id")

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16

    MASK2STR = {
        1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 5: "aocl", 7: "vulkan", 8: "metal", 9: "vpi",
        10: "rocm", 11: "rocm_host", 12: "ext_dev", 13: "cuda_managed", 14: "oneapi", 15: "webgpu",
        16: "hexagon",
    }
    STR2MASK = {
        "llvm": 1, "stackvm": 1, "cpu": 1, "c": 1, "hybrid": 1, "composite": 1, "ext_dev": 12,
        "cuda": 2, "nvptx": 2, "gpu": 2, "cl": 4, "opencl": 4, "sdaccel": 4, "aocl": 5, "aocl_sw_emu": 5,
        "vulkan": 7, "metal": 8, "vpi": 9, "rocm": 10, "hexagon": 16, "webgpu": 15,
    }

    def __init__(self, device_type: int, device_id: int = 0):
        device_type = int(device_type)
        if device_type not in self.MASK2STR:
            raise DeviceError(f"unknown device type code {device_type}; known: {sorted(self.MASK2STR)}")
        self.device_type = device_type
        self.device_id = int(device_id)

    @property
    def exist(self) -> bool:
        """Whether this device is usable by kiln (only the CPU is, for now)."""
        return self.device_type == self.kDLCPU and self.device_id == 0

    def sync(self) -> None:
        """Wait for all work queued on the device; CPU work is synchronous."""
        if not self.exist:
            raise DeviceError(f"device {self} is not available")

    @property
    def device_name(self) -> str | None:
        return "cpu" if self.exist else None

    def _check_exists(self) -> None:
        if not self.exist:
            raise DeviceError(f"device {self} is not available; kiln runs on cpu(0) only")

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, Device)
            and self.device_type == other.device_type
            and self.device_id == other.device_id
        )

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __str__(self) -> str:
        return f"{self.MASK2STR[self.device_type]}({self.device_id})"

    __repr__ = __str__

    def __dlpack_device__(self):
        return (self.device_type, self.device_id)


def cpu(dev_id: int = 0) -> Device:
    return Device(Device.kDLCPU, dev_id)


def cuda(dev_id: int = 0) -> Device:
    return Device(Device.kDLCUDA, dev_id)


gpu = cuda


def device(dev_type, dev_id: int = 0) -> Device:
    """``device("cpu", 0)``, ``device("llvm -mcpu=x")``, ``device("cuda")`` or ``device(1, 0)``."""
    if isinstance(dev_type, Device):
        return dev_type
    if isinstance(dev_type, int):
        return Device(dev_type, dev_id)
    if not isinstance(dev_type, str):
        # a Target (or anything that prints as a target string)
        kind = getattr(dev_type, "kind", None)
        dev_type = getattr(kind, "name", None) or str(dev_type)
    text = dev_type.strip()
    name = text.split()[0] if text else ""
    if ":" in name:  # "cuda:1"
        name, _, num = name.partition(":")
        if num.isdigit():
            dev_id = int(num)
    if name not in Device.STR2MASK:
        raise DeviceError(f"unknown device type {dev_type!r}; expected one of {sorted(Device.STR2MASK)}")
    return Device(Device.STR2MASK[name], dev_id)


def context(dev_type, dev_id: int = 0) -> Device:
    """Old (pre-0.8) spelling of :func:`device`; also accepts a Target."""
    return device(dev_type, dev_id)
