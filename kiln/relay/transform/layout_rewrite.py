"""The layout-propagation mechanism shared by AlterOpLayout and ConvertLayout.

Walking a type-checked function, every rewritten tensor value is either in its original layout or
*altered*: it carries (original layout, current layout), e.g. ("NCHW", "NCHW16c"). A chooser decides,
per call, whether the op takes new layouts (an AlterOpLayout hook, a ConvertLayout desired layout).
Then the op's layout rule (TVM's FInferCorrectLayout idea) says which layouts its inputs are taken in,
which attrs change, and which layout its output has. Rules live in :mod:`layout_rules`, registered per op
name with :func:`register_layout_rule`; the generic ones, by attrs or fusion pattern, are:

- conv-like ops (attrs with ``data_layout`` and ``kernel_layout``): inputs in the call's data/kernel
  layouts, output in ``out_layout`` (or the data layout);
- elementwise unary ops: the output keeps the input's layout;
- elementwise / broadcast ops: the other operands are brought to the altered layout (lower-rank operands
  get leading axes first; scalars and all-ones shapes stay; a per-channel constant is expanded and
  transformed, which FoldConstant folds), or, when that cannot be done exactly, everything goes back;
- any op without a rule that accepts the layout, tuples and the function result: inputs go back to the
  original layout.

``layout_transform`` calls are inserted only where a value crosses from one layout to another, so a
chain of altered ops stays in the new layout; transforms of constant weights are left for FoldConstant.
"""
from __future__ import annotations

from ...error import RelayError
from ...tir.layout import parse_layout as _parse_layout
from ...ir.op import Op, OpPattern
from ..expr_functor import NonPrimitiveMutator, Substituter
from ._util import op_call, op_pattern, tensor_type, type_of
from ..expr import Call, Function, Tuple, TupleGetItem, Var, Let, If

def parse_layout(layout: str) -> list:
    """"NCHW16c" -> [("N", 0), ("C", 0), ("H", 0), ("W", 0), ("c", 16)] (kiln.tir.layout, factor 0 = primal)."""
    return [(a, f or 0) for a, f in _parse_layout(layout, RelayError)]


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


_RULES: dict = {}
LAYOUT_ATTR_RULE = "<ops with a layout attr>"  # the rule for unregistered nn./image. ops with a ``layout`` attr


def register_layout_rule(*op_names: str):
    """Register ``rule(rewriter, call, op, attrs, args)`` as the layout rule of the named ops (TVM's
    FInferCorrectLayout role). ``call`` is the original typed call, ``attrs`` the (possibly chosen) attrs,
    ``args`` the rewritten arguments (``rewriter.altered`` says which are in which layout). The rule
    returns the new expression (``rewriter.mark`` its output layout) or None to send every input back
    to its original layout. For ops whose single argument is a tuple (concatenate), ``args`` holds the
    rewritten tuple fields."""
    def register(rule):
        for name in op_names:
            _RULES[name] = rule
        return rule
    return register


def _has_layout_fields(attrs, *names) -> bool:
    return attrs is not None and all(n in attrs.keys() for n in names)


class LayoutRewriter(NonPrimitiveMutator):
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
    def visit_non_primitive_function(self, fn):
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

    def visit_let_binding(self, let):
        return let.var, self.to_original(self.visit(let.value))

    def visit_let_body(self, body):
        return self.to_original(self.visit(body))

    def visit_if(self, i):
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
        proposal = self.choose(call, list(call.args))
        if (proposal is None and getattr(_RULES.get(call.op.name), "takes_tuple", False) and len(call.args) == 1
                and isinstance(call.args[0], Tuple)):
            fields = [self.visit(f) for f in call.args[0].fields]
            out = _RULES[call.op.name](self, call, call.op, call.attrs, fields)
            if out is not None:
                return out
            tup = Tuple([self.to_original(f) for f in fields], call.args[0].span)
            return Call(call.op, [tup], call.attrs, call.type_args, call.span)
        args = [self.visit(a) for a in call.args]
        if proposal is None:
            return self.apply_rule(call, call.op, call.attrs, args)
        if (isinstance(proposal, Call) and isinstance(proposal.op, Op) and len(proposal.args) == len(args)
                and all(p is a for p, a in zip(proposal.args, call.args))):
            return self.apply_rule(call, proposal.op, proposal.attrs, args)
        pre = proposal.args[0] if isinstance(proposal, Call) and proposal.args else None
        if (isinstance(pre, Call) and isinstance(proposal.op, Op) and isinstance(pre.op, Op)
                and pre.op.name == "nn.pad" and len(pre.args) >= 1 and pre.args[0] is call.args[0]
                and len(proposal.args) == len(args) and all(p is a for p, a in zip(proposal.args[1:], call.args[1:]))
                and _has_layout_fields(proposal.attrs, "data_layout", "kernel_layout")):
            # a conv-like call of a padded data (the x86 hook moves a narrow-block conv's padding into an nn.pad):
            # the pad by its own rule, then the conv's, so the data's layout_transform lands next to the pad
            padded = self.apply_rule(pre, pre.op, pre.attrs, [args[0]] + [self.visit(a) for a in pre.args[1:]])
            return self.apply_rule(call, proposal.op, proposal.attrs, [padded] + args[1:])
        subst = {a: self.to_original(n) for a, n in zip(call.args, args)}
        if (isinstance(proposal, Call) and isinstance(proposal.op, Op) and proposal.args
                and proposal.args[0] is call.args[0] and len(call.args) >= 2
                and _has_layout_fields(proposal.attrs, "data_layout", "kernel_layout")):
            # a conv-like call of the data whose other operands are expressions of the original inputs (a
            # Winograd weight transform): the data comes in the call's layout, the operands as given
            operands = [Substituter(subst).visit(p) for p in proposal.args[1:]]
            return self.conv_rule(call, proposal.op, proposal.attrs, args, operands)
        # a general expression over the original-layout inputs: feed it the inputs in their original layout
        return Substituter(subst).visit(proposal)

    # -- the per-op layout rules -------------------------------------------------------------------
    def apply_rule(self, orig_call, op, attrs, args):
        name = op.name
        if _has_layout_fields(attrs, "data_layout", "kernel_layout") and len(args) >= 2:
            return self.conv_rule(orig_call, op, attrs, args)
        rule = _RULES.get(name)
        if rule is None and _has_layout_fields(attrs, "layout") and name.startswith(("nn.", "image.")):
            rule = _RULES.get(LAYOUT_ATTR_RULE)
        if rule is not None:
            out = rule(self, orig_call, op, attrs, args)
            if out is not None:
                return out
        elif any(a in self.altered for a in args):
            pattern = op_pattern(op)
            if pattern == int(OpPattern.ELEMWISE) and len(args) == 1:
                info = self.altered[args[0]]
                return self.mark(Call(op, args, attrs, orig_call.type_args), *info)
            if pattern in (int(OpPattern.ELEMWISE), int(OpPattern.BROADCAST)) and len(args) >= 2:
                out = self.broadcast_rule(orig_call, op, attrs, args)
                if out is not None:
                    return out
        return self.keep_original(orig_call, op, attrs, args)

    def keep_original(self, orig_call, op, attrs, args):
        """The call with every input back in its original layout."""
        return Call(op, [self.to_original(a) for a in args], attrs, orig_call.type_args, orig_call.span)

    def bring(self, e, shape, orig: str, cur: str):
        """An operand of ``shape`` that broadcasts against an ``orig``-layout tensor, rewritten to broadcast
        the same way against its ``cur``-layout form (None when no exact rewrite exists)."""
        rank = len(shape)
        if rank == 0 or (all(int(d) == 1 for d in shape) and rank <= len(parse_layout(cur))):
            return e  # broadcasts the same way in any layout
        n = len(parse_layout(orig))
        full = (1,) * (n - rank) + tuple(int(d) for d in shape)
        if rank > n or not can_transform(full, orig, cur):
            return None
        x = e if rank == n else op_call("expand_dims", [e], axis=0, num_newaxis=n - rank)
        return self.transform(x, orig, cur)

    def conv_rule(self, orig_call, op, attrs, args, operands=None):
        """Data in ``attrs.data_layout``; the kernel in ``attrs.kernel_layout`` (or ``operands``, the
        non-data arguments already built), output marked as ``out_layout``."""
        oa = orig_call.attrs
        orig_data = oa.data_layout if _has_layout_fields(oa, "data_layout") else attrs.data_layout
        orig_kernel = oa.kernel_layout if _has_layout_fields(oa, "kernel_layout") else attrs.kernel_layout
        orig_out = (getattr(oa, "out_layout", "") or orig_data) if oa is not None else orig_data
        new_args = [self.to_layout(args[0], orig_data, attrs.data_layout)]
        if operands is None:
            new_args.append(self.to_layout(args[1], orig_kernel, attrs.kernel_layout))
            new_args += [self.to_original(a) for a in args[2:]]
        else:
            new_args += list(operands)
        new_out = getattr(attrs, "out_layout", "") or attrs.data_layout
        return self.mark(Call(op, new_args, attrs, orig_call.type_args, orig_call.span), orig_out, new_out)

    def broadcast_rule(self, orig_call, op, attrs, args):
        altered = [i for i, a in enumerate(args) if a in self.altered]
        orig, cur = self.altered[args[altered[0]]]
        out_t = tensor_type(orig_call)
        if out_t is None or len(out_t.shape) != len(parse_layout(orig)) or not primal(orig) == orig:
            return None
        new_args = []
        for i, a in enumerate(args):
            info = self.altered.get(a)
            if info is not None:
                if info[0] != orig:
                    return None
                if info[1] != cur and not can_transform(_static(orig_call.args[i]), orig, cur):
                    return None
                new_args.append(a if info[1] == cur else self.to_layout(a, orig, cur))
                continue
            shape = _static(orig_call.args[i])
            x = None if shape is None else self.bring(a, shape, orig, cur)
            if x is None:
                return None
            new_args.append(x)
        return self.mark(Call(op, new_args, attrs, orig_call.type_args), orig, cur)


def _static(expr):
    t = tensor_type(expr)
    if t is None or t.is_dynamic():
        return None
    return tuple(int(d) for d in t.shape)


def rewrite_layouts(func, choose):
    from . import layout_rules  # noqa: F401  (registers the per-op rules)
    return LayoutRewriter(choose).visit(func)
