"""Convolutions whose data has an unknown (``relay.Any``) channel dimension.

The weight says how many input channels a convolution reads (``in_channels * groups``, or a transposed
convolution's ``in_channels``), so an unknown data channel count does not keep the output from being typed:
as TVM's conv relations, the output channels come from the weight. The relation sees the data's channel axis
filled in from the weight; the kernel checks at run time that the data really has that many channels
(:func:`static_channel_inputs`, ``topi.checked_dim``) and fails with an error naming the size it had.
"""
from __future__ import annotations

from ....ir.type import TensorType
from .._layout import to_primal
from ..type_relations import call_relation, is_any


def _channel_axis(layout: str):
    """The data axis holding the channels in a plain layout (``NCHW``: 1, ``NHWC``: 3); None when the
    channels are split (``NCHW8c``) or there are none."""
    if not layout or "c" in layout or "C" not in layout:
        return None
    return layout.index("C")


def _static(v):
    v = getattr(v, "value", v)
    return int(v) if isinstance(v, int) else None


def expected_channels(kind: str, attrs, weight_shape, ndim: int):
    """How many channels the data must have for this weight (None when the weight does not say)."""
    if kind == "conv":
        default = {3: "OIW", 4: "OIHW", 5: "OIDHW"}.get(ndim, "")
        layout = getattr(attrs, "kernel_layout", "") or default
        try:
            i = to_primal(tuple(weight_shape), layout).get("I")
        except Exception:  # noqa: BLE001 - a layout the relation itself will refuse
            return None
        i = _static(i)
        return None if i is None else i * int(getattr(attrs, "groups", 1) or 1)
    # transposed: the weight's first primal axis is the input channels (IOW / IOHW / IODHW, or OIHW read literally)
    layout = getattr(attrs, "kernel_layout", "") or {3: "IOW", 4: "IOHW", 5: "IODHW"}.get(ndim, "")
    try:
        i = to_primal(tuple(weight_shape), layout).get("I")
    except Exception:  # noqa: BLE001
        return None
    return _static(i)


def _weight_channel_axis(kind: str, attrs, ndim: int, data_channels):
    """(axis of the weight's input channels in a plain kernel layout, the size the data's static channel count
    gives it), or (None, None)."""
    if data_channels is None:
        return None, None
    if kind == "conv":
        layout = getattr(attrs, "kernel_layout", "") or {3: "OIW", 4: "OIHW", 5: "OIDHW"}.get(ndim, "")
        groups = int(getattr(attrs, "groups", 1) or 1)
        per = data_channels // groups if data_channels % groups == 0 else None
    else:
        layout = getattr(attrs, "kernel_layout", "") or {3: "IOW", 4: "IOHW", 5: "IODHW"}.get(ndim, "")
        per = data_channels
    if per is None or "i" in layout or "I" not in layout or len(layout) != ndim:
        return None, None
    return layout.index("I"), per


def _data_layout(attrs, ndim: int) -> str:
    return getattr(attrs, "data_layout", "") or {3: "NCW", 4: "NCHW", 5: "NCDHW"}.get(ndim, "")


def channels_from_weight(rel, kind: str = "conv"):
    """``rel`` (a convolution's type relation) accepting data with an unknown channel dimension when the
    weight's is known: the relation sees that dimension as the weight requires (the kernel checks it)."""
    def relation(arg_types, attrs):
        data, weight = arg_types[0], arg_types[1]
        if isinstance(data, TensorType) and isinstance(weight, TensorType):
            axis = _channel_axis(_data_layout(attrs, len(data.shape)))
            if axis is not None and axis < len(data.shape) and is_any(data.shape[axis]):
                c = expected_channels(kind, attrs, weight.shape, len(data.shape))
                if c is not None:
                    shape = list(data.shape)
                    shape[axis] = c
                    arg_types = [TensorType(tuple(shape), data.dtype), weight, *arg_types[2:]]
            elif axis is not None and axis < len(data.shape):
                waxis, per = _weight_channel_axis(kind, attrs, len(weight.shape), _static(data.shape[axis]))
                if waxis is not None and is_any(weight.shape[waxis]):
                    shape = list(weight.shape)
                    shape[waxis] = per
                    arg_types = [data, TensorType(tuple(shape), weight.dtype), *arg_types[2:]]
        return call_relation(rel, arg_types, attrs)
    relation.handles_any = True  # call_relation must not probe it: it probes ``rel`` itself after the fill
    relation.__name__ = getattr(rel, "__name__", "relation")
    relation.__doc__ = rel.__doc__
    return relation


#: ops whose data channels the weight fixes: name -> "conv" | "transpose"
CHANNEL_OPS = {"nn.conv1d": "conv", "nn.conv2d": "conv", "nn.conv3d": "conv",
               "nn.conv1d_transpose": "transpose", "nn.conv2d_transpose": "transpose",
               "nn.conv3d_transpose": "transpose"}


def static_channel_inputs(op_name: str, attrs, inputs: list) -> list:
    """The compute's inputs with an unknown data channel extent fixed to the weight's (a VM kernel): a view
    of the data whose kernel first checks the size at run time (``topi.checked_dim``), so the convolution's
    computes and schedules see the static channel count they are written for."""
    kind = CHANNEL_OPS.get(op_name)
    if kind is None or len(inputs) < 2:
        return inputs
    data, weight = inputs[0], inputs[1]
    axis = _channel_axis(_data_layout(attrs, len(data.shape)))
    if axis is None or axis >= len(data.shape):
        return inputs
    if _static(data.shape[axis]) is not None:  # known data channels: a run-time weight's unknown ones must match
        waxis, per = _weight_channel_axis(kind, attrs, len(weight.shape), _static(data.shape[axis]))
        if waxis is None or _static(weight.shape[waxis]) is not None:
            return inputs
        from ....topi.transform import checked_dim
        per_group = " / groups" if kind == "conv" and per != _static(data.shape[axis]) else ""
        what = f"{op_name} (the weight's in_channels are the data's channels{per_group})"
        return [data, checked_dim(weight, waxis, per, what)] + list(inputs[2:])
    c = expected_channels(kind, attrs, [_static(d) if _static(d) is not None else d for d in weight.shape],
                          len(data.shape))
    if c is None:
        return inputs
    from ....topi.transform import checked_dim
    what = (f"{op_name} (the data's channels are the weight's in_channels"
            + (" * groups" if kind == "conv" and int(getattr(attrs, "groups", 1) or 1) > 1 else "") + ")")
    return [checked_dim(data, axis, c, what)] + list(inputs[1:])
