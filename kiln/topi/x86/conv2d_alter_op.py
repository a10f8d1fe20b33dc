"""x86 layout decisions for AlterOpLayout (TVM's ``topi/x86/conv2d_alter_op.py`` / ``dense_alter_op.py``): the
channel blocks of a packed conv read from its template's config or tensors, the Winograd tile, the packing width of
a dense weight. The Relay rewrite that uses them is ``kiln/relay/op/strategy/x86_alter_op.py`` (registered on
``relay.op.nn``'s ``conv2d_alter_layout`` / ``dense_alter_layout`` for ``"cpu"``): TOPI sits below Relay and never
builds Relay calls.
"""
from __future__ import annotations

from ..utils import get_const_tuple


def find_op(outs, tag_part: str):
    """The first op feeding ``outs`` (them included) whose tag contains ``tag_part``, or None."""
    stack, seen = [t.op for t in outs], set()
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        if tag_part in getattr(op, "tag", ""):
            return op
        stack.extend(t.op for t in getattr(op, "input_tensors", []))
    return None


def conv_blocks(cfg, outs) -> tuple:
    """(ic_bn, oc_bn) of an NCHWc conv template: from the config, else from its packed tensors."""
    try:
        return int(cfg["tile_ic"].size[-1]), int(cfg["tile_oc"].size[-1])
    except (KeyError, TypeError, AttributeError, IndexError):
        pass
    conv = find_op(outs, "NCHWc")
    if conv is None:
        return 0, 0
    return get_const_tuple(conv.input_tensors[1].shape)[-2], get_const_tuple(conv.output(0).shape)[-1]


def winograd_tile(cfg, outs) -> int:
    """The output tile m of a Winograd conv: from the config, else from its transformed weight (alpha - 2)."""
    try:
        return int(cfg["tile_size"].val)
    except (KeyError, TypeError, AttributeError):
        pass
    op = find_op(outs, "winograd_weight_transform")
    return int(get_const_tuple(op.output(0).shape)[0]) - 2 if op is not None else 4


def dense_pack_width(units: int, lanes: int) -> int:
    """Packing width for a dense weight of ``units`` rows: 2 or 1 SIMD vectors, 0 when neither divides."""
    for bn in (2 * lanes, lanes):
        if units >= bn and units % bn == 0:
            return bn
    return 0


def dense_pack_block(units: int, lanes: int) -> int:
    """Packing width AlterOpLayout uses: the dividing one of :func:`dense_pack_width`, else 2 SIMD vectors
    (1 below that many rows) with the last panel zero-padded; 0 for fewer rows than one vector (such a
    GEMV-like layer keeps the per-call packing)."""
    bn = dense_pack_width(units, lanes)
    if bn or units < lanes:
        return bn
    return 2 * lanes if units >= 2 * lanes else lanes
