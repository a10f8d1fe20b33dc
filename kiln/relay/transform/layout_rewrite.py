"""The layout-propagation mechanism shared by AlterOpLayout and ConvertLayout.

Walking a type-checked function, every rewritten tensor value is either in its original layout or
*altered*: it carries (original layout, current layout), e.g. ("NCHW", "NCHW16c"). A chooser decides,
per call, whether the op takes new layouts (an AlterOpLayout hook, a ConvertLayout desired layout).
Then each op's layout rule says which layouts its inputs must be in and which layout its output has:

- conv-like ops (attrs with ``data_layout`` and ``kernel_layout``): inputs in the call's data/kernel
  layouts, output in ``out_layout`` (or the data layout);
- pooling ops (attrs with ``layout``): follow an input whose layout is a permutation of the original;
- ``nn.bias_add``: follows a permuted input by moving its ``axis``;
- elementwise unary ops: the output keeps the input's layout;
- broadcast binary ops: the other operand is brought to the altered layout (lower-rank operands get
  leading axes first; scalars stay), or, when that cannot be done exactly, everything goes back;
- any other op, tuples and the function result: inputs are transformed back to the original layout.

``layout_transform`` calls are inserted only where a value crosses from one layout to another, so a
chain of altered ops stays in the new layout; transforms of constant weights are left for FoldConstant.
"""
from __future__ import annotations

import re

from ...error import RelayError
from ...ir.op import Op, OpPattern
from ..expr import Call, Function, Tuple, TupleGetItem, Var
from ..expr_functor import ExprMutator
from ._util import op_call, op_pattern, tensor_type, type_of

_AXIS = re.compile(r"(\d*)([A-Za-z])")


def parse_layout(layout: str) -> list:
    """"NCHW16c" -> [("N", 0), ("C", 0), ("H", 0), ("W", 0), ("c", 16)]."""
    out = [(m.group(2), int(m.group(1) or 0)) for m in _AXIS.finditer(layout)]
    if "".join(f"{n or ''}{a}" for a, n in out) != layout:
        raise RelayError(f"cannot parse layout {layout!r}")
    return out


def primal(layout: str) -> str:
    return "".join(a for a, _ in parse_layout(layout) if a.isupper())


def is_permutation(layout: str, of: str) -> bool:
    """``layout`` uses exactly the primal axes of ``of`` with no split sub-axes."""
    return layout.isalpha() and layout.isupper() and sorted(layout) == sorted(of)


def can_transform(shape, src: str, dst: str) -> bool:
    """Whether a tensor of ``shape`` in ``src`` can be laid out exactly as ``dst``."""
    try:
        src_axes, dst_axes = parse_layout(src), parse_layout(dst)
    except RelayError:
        return False
    if len(shape) != len(src_axes) or sorted(primal(src)) != sorted(primal(dst)):
        return False
    sizes: dict = {}
    for (a, f), n in zip(src_axes, shape):
        sizes[a.upper()] = sizes.get(a.upper(), 1) * int(n)
    for a, f in dst_axes:
        if a.islower() and sizes[a.upper()] % f != 0:
            return False
    return True


def default_kernel_layout(data_layout: str) -> str:
    return {"NCHW": "OIHW", "NHWC": "HWIO", "HWCN": "HWIO", "NCW": "OIW", "NWC": "WIO",
            "NCDHW": "OIDHW", "NDHWC": "DHWIO"}.get(data_layout, "")


def _has_layout_fields(attrs, *names) -> bool:
    return attrs is not None and all(n in attrs.keys() for n in names)


class LayoutRewriter(ExprMutator):
    """``choose(call, args) -> Expr | None`` proposes a replacement for an op call given its arguments
    in their original layouts (the original argument nodes); None keeps the call as it is."""

    def __init__(self, choose):
        super().__init__()
        self.choose = choose
        self.altered: dict = {}  # new expr -> (original layout, current layout)
        self.transforms: dict = {}  # (expr, src, dst) -> layout_transform call, so each is made once

    # -- layout conversions ------------------------------------------------------------------------
    def transform(self, e, src: str, dst: str):
        key = (e, src, dst)
        t = self.transforms.get(key)
        if t is None:
            t = self.transforms[key] = op_call("layout_transform", [e], src_layout=src, dst_layout=dst)
        return t

    def to_original(self, e):
        info = self.altered.get(e)
        if info is None:
            return e
        orig, cur = info
        return self.transform(e, cur, orig)

    def to_layout(self, e, orig: str, target: str):
        """``e`` (whose original layout is ``orig``) laid out as ``target``."""
        info = self.altered.get(e)
        cur = info[1] if info is not None else orig
        if cur == target:
            return e
        return self.transform(e, cur, target)

    def mark(self, e, orig: str, cur: str):
        if orig and cur and orig != cur:
            self.altered[e] = (orig, cur)
        return e

    # -- traversal ---------------------------------------------------------------------------------
    def visit_function(self, fn):
        if fn.get_attr("Primitive"):
            return fn
        body = self.to_original(self.visit(fn.body))
        if body is fn.body:
            return fn
        return Function(fn.params, body, fn.ret_type, fn.type_params, fn.attrs, fn.span)

    def visit_tuple(self, t):
        fields = [self.to_original(self.visit(f)) for f in t.fields]
        if all(a is b for a, b in zip(fields, t.fields)):
            return t
        return Tuple(fields, t.span)

    def visit_tuple_getitem(self, t):
        tup = self.to_original(self.visit(t.tuple_value))
        return t if tup is t.tuple_value else TupleGetItem(tup, t.index, t.span)

    def visit_let(self, let):
        from ..expr import Let
        value = self.to_original(self.visit(let.value))
        body = self.to_original(self.visit(let.body))
        if value is let.value and body is let.body:
            return let
        return Let(let.var, value, body, let.span)

    def visit_if(self, i):
        from ..expr import If
        c = self.to_original(self.visit(i.cond))
        tb = self.to_original(self.visit(i.true_branch))
        fb = self.to_original(self.visit(i.false_branch))
        if c is i.cond and tb is i.true_branch and fb is i.false_branch:
            return i
        return If(c, tb, fb, i.span)

    def visit_call(self, call):
        if not isinstance(call.op, Op):
            op = self.visit(call.op)
            args = [self.to_original(self.visit(a)) for a in call.args]
            return Call(op, args, call.attrs, call.type_args, call.span)
        args = [self.visit(a) for a in call.args]
        proposal = self.choose(call, list(call.args))
        if proposal is None:
            return self.apply_rule(call, call.op, call.attrs, args)
        if (isinstance(proposal, Call) and isinstance(proposal.op, Op) and len(proposal.args) == len(args)
                and all(p is a for p, a in zip(proposal.args, call.args))):
            return self.apply_rule(call, proposal.op, proposal.attrs, args)
        # a general expression over the original-layout inputs: feed it the inputs in their original layout
        subst = {a: self.to_original(n) for a, n in zip(call.args, args)}
        return _Replace(subst).visit(proposal)

    # -- the per-op layout rules -------------------------------------------------------------------
    def apply_rule(self, orig_call, op, attrs, args):
        name = op.name
        if _has_layout_fields(attrs, "data_layout", "kernel_layout") and len(args) >= 2:
            return self.conv_rule(orig_call, op, attrs, args)
        if _has_layout_fields(attrs, "layout") and len(args) == 1 and name.startswith(("nn.", "image.")):
            return self.pool_rule(orig_call, op, attrs, args)
        if name == "nn.bias_add":
            return self.bias_add_rule(op, attrs, args)
        if name == "layout_transform":
            return self.layout_transform_rule(op, attrs, args)
        if any(a in self.altered for a in args):
            pattern = op_pattern(op)
            if pattern == int(OpPattern.ELEMWISE) and len(args) == 1:
                info = self.altered[args[0]]
                return self.mark(Call(op, args, attrs, orig_call.type_args), *info)
            if pattern in (int(OpPattern.ELEMWISE), int(OpPattern.BROADCAST)) and len(args) == 2:
                out = self.broadcast_rule(orig_call, op, attrs, args)
                if out is not None:
                    return out
        return Call(op, [self.to_original(a) for a in args], attrs, orig_call.type_args, orig_call.span)

    def conv_rule(self, orig_call, op, attrs, args):
        oa = orig_call.attrs
        orig_data = oa.data_layout if _has_layout_fields(oa, "data_layout") else attrs.data_layout
        orig_kernel = oa.kernel_layout if _has_layout_fields(oa, "kernel_layout") else attrs.kernel_layout
        orig_out = (getattr(oa, "out_layout", "") or orig_data) if oa is not None else orig_data
        new_args = [self.to_layout(args[0], orig_data, attrs.data_layout),
                    self.to_layout(args[1], orig_kernel, attrs.kernel_layout)]
        new_args += [self.to_original(a) for a in args[2:]]
        new_out = getattr(attrs, "out_layout", "") or attrs.data_layout
        return self.mark(Call(op, new_args, attrs, orig_call.type_args, orig_call.span), orig_out, new_out)

    def pool_rule(self, orig_call, op, attrs, args):
        info = self.altered.get(args[0])
        orig = orig_call.attrs.layout
        if info is not None and is_permutation(info[1], orig) and attrs.layout == orig:
            new_attrs = attrs.with_values(layout=info[1])
            if "out_layout" in attrs.keys() and attrs.out_layout:
                new_attrs = new_attrs.with_values(out_layout=info[1])
            return self.mark(Call(op, args, new_attrs, orig_call.type_args), orig, info[1])
        if attrs.layout != orig:  # the chooser asked for another layout
            x = self.to_layout(args[0], orig, attrs.layout)
            return self.mark(Call(op, [x], attrs, orig_call.type_args), orig, attrs.layout)
        return Call(op, [self.to_original(args[0])], attrs, orig_call.type_args)

    def bias_add_rule(self, op, attrs, args):
        info = self.altered.get(args[0])
        data_t = tensor_type(args[0])
        if info is not None and is_permutation(info[1], info[0]):
            orig, cur = info
            axis = int(attrs.axis)
            axis = axis + len(orig) if axis < 0 else axis
            new_axis = cur.index(orig[axis])
            return self.mark(Call(op, [args[0], self.to_original(args[1])], attrs.with_values(axis=new_axis)),
                             orig, cur)
        return Call(op, [self.to_original(a) for a in args], attrs)

    def layout_transform_rule(self, op, attrs, args):
        info = self.altered.get(args[0])
        if info is not None and info[0] == attrs.src_layout:
            if info[1] == attrs.dst_layout:
                return args[0]
            return op_call("layout_transform", [args[0]], src_layout=info[1], dst_layout=attrs.dst_layout)
        return Call(op, [self.to_original(args[0])], attrs)

    def broadcast_rule(self, orig_call, op, attrs, args):
        altered = [i for i, a in enumerate(args) if a in self.altered]
        orig, cur = self.altered[args[altered[0]]]
        out_t = tensor_type(orig_call)
        if out_t is None or len(out_t.shape) != len(parse_layout(orig)):
            return None
        new_args = []
        for i, a in enumerate(args):
            info = self.altered.get(a)
            if info is not None:
                if info[0] != orig:
                    return None
                new_args.append(a if info[1] == cur else self.to_layout(a, orig, cur))
                continue
            t = tensor_type(orig_call.args[i])
            if t is None or t.is_dynamic():
                return None
            rank = len(t.shape)
            if rank == 0 or (all(int(d) == 1 for d in t.shape) and rank <= len(parse_layout(cur))):
                new_args.append(a)  # broadcasts the same way in any layout
                continue
            full = (1,) * (len(orig) - rank) + tuple(int(d) for d in t.shape)
            if rank > len(orig) or not can_transform(full, orig, cur):
                return None
            x = a if rank == len(orig) else op_call("expand_dims", [a], axis=0, num_newaxis=len(orig) - rank)
            new_args.append(self.transform(x, orig, cur))
        return self.mark(Call(op, new_args, attrs, orig_call.type_args), orig, cur)


class _Replace(ExprMutator):
    def __init__(self, subst):
        super().__init__()
        self.subst = subst

    def visit(self, expr):
        if expr in self.subst:
            return self.subst[expr]
        return super().visit(expr)


def rewrite_layouts(func, choose):
    return LayoutRewriter(choose).visit(func)
