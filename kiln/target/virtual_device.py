"""VirtualDevice: where an expression's value lives (TVM's ``tvm.target.VirtualDevice``).

kiln runs a whole graph on one device, so a VirtualDevice is a description only: ``relay.annotation.on_device``
records it and ``relay.build`` checks it names the device being built for, then drops the annotation.
"""
from __future__ import annotations

from ..error import KilnError
from ..ir.node import Node
from ..runtime.device import Device, device as _make_device
from .target import Target


class VirtualDevice(Node):
    """A device type and id, an optional Target and a memory scope; -1 / None means "unconstrained"."""

    _fields = ("device_type_int", "virtual_device_id", "target", "memory_scope")

    def __init__(self, device=None, target=None, memory_scope: str = ""):
        if isinstance(device, str):
            device = _make_device(device)
        if device is not None and not isinstance(device, Device):
            raise KilnError(f"VirtualDevice: device must be a kiln Device (tvm.cpu(0)) or a device name, "
                            f"got {type(device).__name__}")
        if isinstance(target, str):
            target = Target(target)
        self.device_type_int = int(device.device_type) if device is not None else -1
        self.virtual_device_id = int(device.device_id) if device is not None else -1
        self.target = target
        self.memory_scope = str(memory_scope or "")

    @property
    def device_type(self) -> int:
        return self.device_type_int

    def is_fully_unconstrained(self) -> bool:
        return self.device_type_int == -1 and self.target is None and not self.memory_scope

    def __repr__(self) -> str:
        return (f"VirtualDevice(device_type={self.device_type_int}, virtual_device_id={self.virtual_device_id}, "
                f"target={self.target}, memory_scope={self.memory_scope!r})")


__all__ = ["VirtualDevice"]
