"""Per-op layout rules for the layout rewriter (TVM's FInferCorrectLayout, one function per op family).

Each rule sees the original call, the attrs to use, and the rewritten arguments; it either returns the
call in a new layout (marking its output with ``rw.mark(expr, original, current)``) or None, which sends
every input back to its original layout. What stays in a split layout such as NCHW16c:

- pools (max/avg, global, adaptive; 1-D/2-D/3-D): their computes index spatial axes by letter, so any
  layout whose spatial axes are unsplit works; the ``layout`` attr becomes the input's layout;
- ``nn.bias_add``: a permuted layout moves ``axis``; a split one turns into ``add`` with the bias
  expanded and transformed (FoldConstant folds a constant bias);
- ``concatenate`` along any axis: every input is brought to the most common layout among the altered
  inputs (exact only when each input's size divides that axis' block, which ``can_transform`` checks);
- ``nn.softmax`` / ``nn.log_softmax`` along an unsplit axis, reductions over unsplit axes (keepdims or
  not), ``nn.pad`` that pads no split axis;
- ``layout_transform`` of an altered value composes with its current layout.
"""
from __future__ import annotations

from ..expr import Call, Tuple
from ._util import op_call, tensor_type
from .layout_rewrite import (LAYOUT_ATTR_RULE, can_transform, is_permutation, parse_layout, primal,
                             register_layout_rule)

POOL_OPS = ("nn.max_pool1d", "nn.avg_pool1d", "nn.max_pool2d", "nn.avg_pool2d", "nn.max_pool3d", "nn.avg_pool3d",
            "nn.global_max_pool2d", "nn.global_avg_pool2d", "nn.adaptive_max_pool1d", "nn.adaptive_avg_pool1d",
            "nn.adaptive_max_pool2d", "nn.adaptive_avg_pool2d", "nn.adaptive_max_pool3d", "nn.adaptive_avg_pool3d")
REDUCE_OPS = ("sum", "mean", "max", "min", "prod", "all", "any", "argmax", "argmin")


def split_letters(layout: str) -> set:
    """Primal axes that have a sub-axis in ``layout`` ("NCHW16c" -> {"C"})."""
    return {a.upper() for a, _ in parse_layout(layout) if a.islower()}


def axis_index(layout: str, letter: str) -> int:
    """Position of the primal axis ``letter`` among the axes of ``layout``."""
    return [a for a, _ in parse_layout(layout)].index(letter)


def _norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _same_primal(cur: str, orig: str) -> bool:
    try:
        return sorted(primal(cur)) == sorted(orig) and primal(orig) == orig
    except Exception:  # noqa: BLE001 - an unparsable layout simply does not qualify
        return False


def _same_primal_input(rw, arg):
    """(original layout, current layout) of ``arg`` when the rewrite changed its layout to one over the same
    axes (a permutation or a packing of them), else None."""
    info = rw.altered.get(arg)
    if info is None or not _same_primal(info[1], info[0]):
        return None
    return info


# -- pooling ------------------------------------------------------------------------------------------------
def _layout_rule(rw, orig_call, op, attrs, args):
    """Ops with a ``layout`` attr (pools, upsampling, ...): follow the input's layout when the spatial axes
    stay unsplit (split layouts only for the pools, whose computes handle them)."""
    if attrs is None or "layout" not in attrs.keys() or len(args) != 1 or orig_call.attrs is None:
        return None
    orig = orig_call.attrs.layout
    if attrs.layout != orig:  # the chooser asked for another layout (ConvertLayout)
        x = rw.to_layout(args[0], orig, attrs.layout)
        return rw.mark(Call(op, [x], attrs, orig_call.type_args), orig, attrs.layout)
    info = rw.altered.get(args[0])
    if info is None or info[0] != orig:
        return None
    cur = info[1]
    if is_permutation(cur, orig):
        pass
    elif op.name in POOL_OPS and _same_primal(cur, orig):
        spatial = set(orig) - {"N", "C"}
        if split_letters(cur) & spatial:
            return None
    else:
        return None
    new_attrs = attrs.with_values(layout=cur)
    if "out_layout" in attrs.keys() and attrs.out_layout:
        new_attrs = new_attrs.with_values(out_layout=cur)
    return rw.mark(Call(op, args, new_attrs, orig_call.type_args), orig, cur)


register_layout_rule(*POOL_OPS, LAYOUT_ATTR_RULE)(_layout_rule)


# -- bias_add -----------------------------------------------------------------------------------------------
@register_layout_rule("nn.bias_add")
def _bias_add_rule(rw, orig_call, op, attrs, args):
    info = rw.altered.get(args[0])
    if info is None:
        return None
    orig, cur = info
    rank = len(orig)
    axis = _norm_axis(int(attrs.axis), rank)
    if is_permutation(cur, orig):
        new_axis = cur.index(orig[axis])
        return rw.mark(Call(op, [args[0], rw.to_original(args[1])], attrs.with_values(axis=new_axis)), orig, cur)
    if not _same_primal(cur, orig) or axis >= rank:
        return None
    b_t = tensor_type(orig_call.args[1])
    if b_t is None or b_t.is_dynamic() or len(b_t.shape) != 1:
        return None
    bias = rw.to_original(args[1])
    trailing = rank - axis - 1
    if trailing:
        bias = op_call("expand_dims", [bias], axis=1, num_newaxis=trailing)
    shape = (int(b_t.shape[0]),) + (1,) * trailing
    b = rw.bring(bias, shape, orig, cur)
    if b is None:
        return None
    return rw.mark(op_call("add", [args[0], b]), orig, cur)


# -- layout_transform ---------------------------------------------------------------------------------------
@register_layout_rule("layout_transform")
def _layout_transform_rule(rw, orig_call, op, attrs, args):
    info = rw.altered.get(args[0])
    if info is not None and info[0] == attrs.src_layout:
        if info[1] == attrs.dst_layout:
            return args[0]
        return op_call("layout_transform", [args[0]], src_layout=info[1], dst_layout=attrs.dst_layout)
    return None


# -- concatenate --------------------------------------------------------------------------------------------
def _concat_rule(rw, orig_call, op, attrs, fields):
    infos = [rw.altered.get(f) for f in fields]
    altered = [i for i in infos if i is not None]
    if not altered:
        return None
    orig = altered[0][0]
    if any(i[0] != orig for i in altered) or primal(orig) != orig:
        return None
    counts: dict = {}
    for _, cur in altered:
        counts[cur] = counts.get(cur, 0) + 1
    cur = max(counts, key=lambda c: (counts[c], -list(counts).index(c)))
    orig_fields = orig_call.args[0].fields
    rank = len(orig)
    new_fields = []
    for f, of, info in zip(fields, orig_fields, infos):
        t = tensor_type(of)
        if t is None or t.is_dynamic() or len(t.shape) != rank:
            return None
        if info is not None and info[1] == cur:
            new_fields.append(f)
            continue
        if not can_transform(tuple(int(d) for d in t.shape), orig, cur):
            return None
        new_fields.append(rw.to_layout(f, orig, cur))
    letter = orig[_norm_axis(int(attrs.axis), rank)]
    new_attrs = attrs.with_values(axis=axis_index(cur, letter))
    return rw.mark(Call(op, [Tuple(new_fields)], new_attrs, orig_call.type_args), orig, cur)


_concat_rule.takes_tuple = True
register_layout_rule("concatenate")(_concat_rule)


# -- softmax ------------------------------------------------------------------------------------------------
@register_layout_rule("nn.softmax", "nn.log_softmax")
def _softmax_rule(rw, orig_call, op, attrs, args):
    info = _same_primal_input(rw, args[0])
    if info is None:
        return None
    orig, cur = info
    letter = orig[_norm_axis(int(attrs.axis), len(orig))]
    if letter in split_letters(cur):
        return None
    return rw.mark(Call(op, args, attrs.with_values(axis=axis_index(cur, letter)), orig_call.type_args), orig, cur)


# -- reductions ---------------------------------------------------------------------------------------------
@register_layout_rule(*REDUCE_OPS)
def _reduce_rule(rw, orig_call, op, attrs, args):
    info = _same_primal_input(rw, args[0])
    if info is None or attrs.axis is None or attrs.exclude:
        return None
    orig, cur = info
    rank = len(orig)
    letters = [orig[_norm_axis(int(a), rank)] for a in attrs.axis]
    if set(letters) & split_letters(cur):
        return None
    new_axes = [axis_index(cur, c) for c in letters]
    new_attrs = attrs.with_values(axis=new_axes)
    out = Call(op, args, new_attrs, orig_call.type_args)
    if attrs.keepdims:
        return rw.mark(out, orig, cur)
    out_orig = "".join(c for c in orig if c not in letters)
    out_cur = "".join(f"{n or ''}{a}" for a, n in parse_layout(cur) if a not in letters)
    if not out_orig:
        return out
    return rw.mark(out, out_orig, out_cur)


# -- pad ----------------------------------------------------------------------------------------------------
@register_layout_rule("nn.pad")
def _pad_rule(rw, orig_call, op, attrs, args):
    info = _same_primal_input(rw, args[0])
    if info is None:
        return None
    orig, cur = info
    widths = [tuple(int(v) for v in p) for p in attrs.pad_width]
    if len(widths) != len(orig):
        return None
    by_letter = dict(zip(orig, widths))
    split = split_letters(cur)
    if any(by_letter[c] != (0, 0) for c in split):
        return None
    new_widths = [by_letter[a] if a.isupper() else (0, 0) for a, _ in parse_layout(cur)]
    rest = [rw.to_original(a) for a in args[1:]]
    return rw.mark(Call(op, [args[0], *rest], attrs.with_values(pad_width=new_widths), orig_call.type_args),
                   orig, cur)
