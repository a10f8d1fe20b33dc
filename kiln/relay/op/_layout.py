"""Data layout strings as TVM writes them ("NCHW", "NHWC", "NCHW8c", "OIHW4i8o").

Upper-case letters are primal axes; a lower-case letter with a factor (``8c``) is a sub-axis that splits
its primal axis. Type relations use this to find axes and to convert shapes between layouts.
"""
from __future__ import annotations

from ...error import TypeInferenceError
from ...tir.layout import parse_layout as _parse_layout

def parse_layout(layout: str) -> list:
    """``"NCHW8c"`` -> ``[("N", None), ..., ("c", 8)]`` (kiln.tir.layout), errors as TypeInferenceError."""
    return _parse_layout(layout, TypeInferenceError)


def to_primal(shape, layout: str) -> dict:
    """Sizes of the primal axes (``{"N": 1, "C": 64, ...}``) of a tensor laid out as ``layout``."""
    axes = parse_layout(layout)
    if len(shape) != len(axes):
        raise TypeInferenceError(f"a tensor of rank {len(shape)} (shape {tuple(shape)}) does not fit layout {layout}")
    sizes = {}
    for (name, _), n in zip(axes, shape):
        if name.isupper():
            sizes[name] = sizes.get(name, 1) * n
        else:
            sizes[name.upper()] = sizes.get(name.upper(), 1) * n
    return sizes


def from_primal(sizes: dict, layout: str) -> tuple:
    """The shape in ``layout`` of a tensor with primal axis sizes ``sizes``."""
    axes = parse_layout(layout)
    factor = {n.upper(): f for n, f in axes if f is not None}
    out = []
    for name, f in axes:
        if f is not None:
            out.append(f)
        else:
            size = sizes[name]
            fac = factor.get(name, 1)
            if size % fac:
                raise TypeInferenceError(f"axis {name} of size {size} does not split by {fac} (layout {layout})")
            out.append(size // fac)
    return tuple(out)


def transform_shape(shape, src: str, dst: str) -> tuple:
    """Shape after converting a tensor from layout ``src`` to ``dst``."""
    s_primal = sorted(n for n, f in parse_layout(src) if f is None)
    d_primal = sorted(n for n, f in parse_layout(dst) if f is None)
    if s_primal != d_primal:
        raise TypeInferenceError(f"layouts {src} and {dst} have different primal axes")
    return from_primal(to_primal(shape, src), dst)
