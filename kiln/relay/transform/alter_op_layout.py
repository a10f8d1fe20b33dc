"""AlterOpLayout and ConvertLayout: change the data layouts ops compute in.

AlterOpLayout asks each op's ``FTVMAlterOpLayout`` hook (``relay.op.register_alter_op_layout``),
called as ``hook(attrs, inputs, tinfos, out_type)`` with the call's inputs (in their original
layouts) and their types; the hook returns a replacement expression or None. A replacement that is a
call of the given inputs with new layout attrs (e.g. ``data_layout="NCHW16c"``) keeps its neighbours in
the new layout; see :mod:`layout_rewrite` for how layouts propagate and where ``layout_transform`` is
inserted. ConvertLayout does the same for the ops named in ``desired_layouts``
(``{"nn.conv2d": ["NHWC", "default"]}``), through the op's ``FTVMConvertOpLayout`` hook when it has one,
else by setting the layout attrs directly.
"""
from __future__ import annotations

from ...error import RelayError
from ...transform.pass_base import register_pass
from ..expr import Call
from ._util import tensor_type, type_of, typed_function_pass
from .layout_rewrite import default_kernel_layout, rewrite_layouts


def _tinfos(args):
    return [type_of(a) for a in args]


def _alter_chooser(call, args):
    hook = call.op.get_attr("FTVMAlterOpLayout")
    if hook is None:
        return None
    return hook(call.attrs, args, _tinfos(args), type_of(call))


def alter_op_layout(func):
    return rewrite_layouts(func, _alter_chooser)


def AlterOpLayout():  # noqa: N802 (TVM's name)
    """Let each op's FTVMAlterOpLayout hook pick the layout it computes in (opt level 3)."""
    return typed_function_pass(lambda f, mod, ctx: alter_op_layout(f), 3, "AlterOpLayout")


def _convert_chooser(desired_layouts: dict):
    def choose(call, args):
        layouts = desired_layouts.get(call.op.name)
        if layouts is None:
            return None
        layouts = list(layouts)
        hook = call.op.get_attr("FTVMConvertOpLayout")
        if hook is not None:
            return hook(call.attrs, args, _tinfos(args), layouts)
        attrs = call.attrs
        if attrs is not None and "data_layout" in attrs.keys() and "kernel_layout" in attrs.keys():
            data_layout = layouts[0]
            kernel_layout = layouts[1] if len(layouts) > 1 and layouts[1] != "default" else \
                default_kernel_layout(data_layout)
            if not kernel_layout:
                raise RelayError(f"ConvertLayout: no default kernel layout for {call.op.name} with data layout "
                                 f"{data_layout}; give one in desired_layouts")
            changes = {"data_layout": data_layout, "kernel_layout": kernel_layout}
            if "out_layout" in attrs.keys():
                changes["out_layout"] = ""
            return Call(call.op, args, attrs.with_values(**changes), call.type_args)
        if attrs is not None and "layout" in attrs.keys():
            changes = {"layout": layouts[0]}
            if "out_layout" in attrs.keys():
                changes["out_layout"] = ""
            return Call(call.op, args, attrs.with_values(**changes), call.type_args)
        raise RelayError(f"ConvertLayout: operator {call.op.name} has no layout attributes and no "
                         "FTVMConvertOpLayout hook")
    return choose


def convert_layout(func, desired_layouts: dict):
    return rewrite_layouts(func, _convert_chooser(desired_layouts))


def ConvertLayout(desired_layouts):  # noqa: N802 (TVM's name)
    """Convert the ops named in ``desired_layouts`` (op name -> [data layout, kernel layout or
    "default"]) to those layouts, inserting layout_transform at the boundaries (opt level 3)."""
    if not isinstance(desired_layouts, dict):
        raise RelayError(f"ConvertLayout expects a dict op name -> list of layouts, got {desired_layouts!r}")
    desired = {k: list(v) if isinstance(v, (list, tuple)) else [v] for k, v in desired_layouts.items()}
    return typed_function_pass(lambda f, mod, ctx: convert_layout(f, desired), 3, "ConvertLayout")


register_pass("AlterOpLayout", AlterOpLayout)
