"""Annotation ops (TVM's ``relay.annotation``): ``stop_fusion``, ``checkpoint`` and ``on_device``.

``stop_fusion`` and ``checkpoint`` are identities that FuseOps never fuses across (pattern OPAQUE; each
compiles to a copy kernel, as in TVM). ``on_device`` records where a value lives; kiln builds a graph for one
device, so ``relay.build`` checks the annotation names that device and removes it (TVM's PlanDevices does
the same when every annotation agrees).
"""
from __future__ import annotations

from ...error import KilnError
from ...ir.attrs import Attrs, Field
from ...ir.op import Op, OpPattern
from ._define import define_op, topi_compute
from ...target.virtual_device import VirtualDevice
from ..expr_functor import ExprMutator
from ..expr import Call, Function

__all__ = ["stop_fusion", "checkpoint", "on_device", "function_on_device", "strip_on_device"]


def _virtual_device(value):
    if value is None or isinstance(value, VirtualDevice):
        return value if value is not None else VirtualDevice()
    return VirtualDevice(value)


class OnDeviceAttrs(Attrs):
    type_key = "relay.attrs.OnDeviceAttrs"
    fields = {"virtual_device": Field(None, _virtual_device), "constrain_result": Field(False, bool),
              "constrain_body": Field(True, bool)}


def _identity(attrs, inputs, out_type):
    return inputs[0]


for _name, _attrs in (("annotation.stop_fusion", None), ("annotation.checkpoint", None), ("on_device", OnDeviceAttrs)):
    define_op(_name, num_inputs=1, rel="Identity", pattern=OpPattern.OPAQUE, reference=_identity, attrs=_attrs,
              compute=topi_compute("identity", _name), level=10)


def stop_fusion(data):
    """``data`` unchanged, with a fusion boundary: FuseOps fuses nothing across it."""
    return Call(Op.get("annotation.stop_fusion"), [data])


def checkpoint(data):
    """``data`` unchanged; marks a checkpoint for gradient rewriting (an identity elsewhere)."""
    return Call(Op.get("annotation.checkpoint"), [data])


def on_device(body, device, constrain_result: bool = False, constrain_body: bool = True):
    """Annotate ``body`` as living on ``device`` (a Device, a device name such as "cpu", or a VirtualDevice)."""
    op = Op.get("on_device")
    return Call(op, [body], op.make_attrs(virtual_device=device, constrain_result=constrain_result,
                                          constrain_body=constrain_body))


def function_on_device(function, param_devices, result_device):
    """``function`` with the devices of its parameters and result recorded as attributes."""
    params = [d if isinstance(d, VirtualDevice) else VirtualDevice(d) for d in param_devices]
    if len(params) != len(function.params):
        raise KilnError(f"function_on_device: {len(params)} parameter devices for a function of "
                        f"{len(function.params)} parameters")
    for p, vd in zip(function.params, params):
        p.virtual_device_ = vd
    res = result_device if isinstance(result_device, VirtualDevice) else VirtualDevice(result_device)
    return function.with_attr("result_virtual_device", res)


def strip_on_device(mod, device_type: int = 1):
    """``mod`` without ``on_device`` annotations, after checking each names ``device_type`` (or none).

    kiln's graph executor runs every kernel on one device, so an annotation for another device cannot be
    honoured: that is an error naming the annotation, not a silent move to the CPU.
    """
    on_dev = Op.get("on_device")

    class _Strip(ExprMutator):
        def visit_call(self, call):
            if call.op is on_dev:
                vd = call.attrs.virtual_device
                if vd is not None and vd.device_type_int not in (-1, device_type):
                    raise NotImplementedError(
                        f"on_device asks for device type {vd.device_type_int}, but kiln's graph executor runs the "
                        f"whole graph on one device (type {device_type}); heterogeneous execution is not supported")
                return self.visit(call.args[0])
            return super().visit_call(call)

    changed = False
    funcs = {}
    for gv, fn in mod.functions.items():
        if isinstance(fn, Function):
            new = _Strip().visit(fn)
            changed = changed or new is not fn
            funcs[gv] = new
        else:
            funcs[gv] = fn
    if not changed:
        return mod
    new_mod = mod.copy()
    for gv, fn in funcs.items():
        new_mod[gv] = fn
    return new_mod
