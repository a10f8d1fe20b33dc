"""Einsum as Relay transposes, sums, reshapes and one ``nn.batch_matmul`` per pair of operands.

Shared by the ONNX (``Einsum``) and aten (``torch.einsum``) converters: kiln has no Relay einsum operator,
so each frontend lowers the equation with :func:`einsum`. Operands are contracted pairwise, left to right.
For each pair, letters split into batch letters (in both operands and still needed), contracted letters (in
both, no longer needed), and letters private to one side; the pair becomes one ``nn.batch_matmul`` of
[batch, left, contracted] x [batch, contracted, right]. Letters needed by no later operand and not in the
output are summed out first. Size-1 dimensions broadcast against their letter's size. Repeated letters
inside one operand (diagonals, e.g. ``ii->i``) and repeated output letters are not supported.
"""
from __future__ import annotations

import numpy as np

from ...error import FrontendError, OpNotImplemented
from .. import op as _op
from ..op import nn as _nn

__all__ = ["einsum", "parse_equation"]

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def parse_equation(equation: str, ranks: list) -> tuple:
    """(one term per operand with ``...`` spelled out as spare letters, the output term).

    Without ``->`` the output is the ellipsis letters then the letters used once, sorted (numpy's rule).
    """
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, out = eq.split("->")
    else:
        lhs, out = eq, None
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise FrontendError(f"einsum equation {equation!r} has {len(terms)} operands, the node has {len(ranks)} "
                            f"inputs")
    used = set(c for c in eq if c.isalpha())
    spare = [c for c in _LETTERS if c not in used]
    ell_rank = 0
    for t, r in zip(terms, ranks):
        if "..." in t:
            ell_rank = max(ell_rank, r - (len(t) - 3))
    ell = "".join(spare[:ell_rank])
    expanded = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            n = r - (len(t) - 3)
            t = t.replace("...", ell[ell_rank - n:] if n else "")
        if len(t) != r:
            raise FrontendError(f"operand term {t!r} of {equation!r} does not match a rank-{r} input")
        expanded.append(t)
    if out is None:
        counts = {}
        for t in expanded:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    return expanded, out


def _sum_out(x, term, keep):
    axes = [k for k, c in enumerate(term) if c not in keep]
    if not axes:
        return x, term
    return _op.sum(x, axis=axes), "".join(c for c in term if c in keep)


def _contract(ctx, a, ta, b, tb, keep):
    sa, sb = ctx.shape(a), ctx.shape(b)
    size = {}
    for t, s in ((ta, sa), (tb, sb)):
        for c, d in zip(t, s):
            if c in size and size[c] != d and 1 not in (size[c], d):
                raise FrontendError(f"einsum letter {c!r} has sizes {size[c]} and {d}")
            size[c] = max(size.get(c, d), d)
    batch = [c for c in ta if c in tb and c in keep]
    contr = [c for c in ta if c in tb and c not in keep]
    left = [c for c in ta if c not in tb]
    right = [c for c in tb if c not in ta]

    def arrange(x, term, order):
        perm = [term.index(c) for c in order]
        x = _op.transpose(x, perm) if perm != list(range(len(term))) else x
        shape = ctx.shape(x)
        want = [size[c] for c in order]
        if list(shape) != want:
            x = _op.broadcast_to(x, want)
        return x

    nb = int(np.prod([size[c] for c in batch])) if batch else 1
    nl = int(np.prod([size[c] for c in left])) if left else 1
    nr = int(np.prod([size[c] for c in right])) if right else 1
    nk = int(np.prod([size[c] for c in contr])) if contr else 1
    a3 = _op.reshape(arrange(a, ta, batch + left + contr), [nb, nl, nk])
    b3 = _op.reshape(arrange(b, tb, batch + contr + right), [nb, nk, nr])
    y = _nn.batch_matmul(a3, b3, transpose_b=False)
    order = batch + left + right
    return _op.reshape(y, [size[c] for c in order]), "".join(order)


def einsum(ctx, equation: str, operands: list):
    """The Relay expression for ``einsum(equation, *operands)``.

    ``ctx`` is the frontend's converter context; only ``ctx.shape(expr)`` (a static shape) is used.
    Malformed equations raise FrontendError; diagonals raise OpNotImplemented.
    """
    ops = list(operands)
    terms, out = parse_equation(equation, [len(ctx.shape(x)) for x in ops])
    for t in terms:
        if len(set(t)) != len(t):
            raise OpNotImplemented(f"a repeated index inside one operand ({t!r}, a diagonal) is not supported by "
                                   f"kiln")
    if len(set(out)) != len(out):
        raise OpNotImplemented(f"a repeated output index ({out!r}) is not supported by kiln")
    x, tx = ops[0], terms[0]
    later = set(out).union(*[set(t) for t in terms[1:]]) if len(terms) > 1 else set(out)
    x, tx = _sum_out(x, tx, later)
    for k in range(1, len(ops)):
        y, ty = ops[k], terms[k]
        need_after = set(out).union(*[set(t) for t in terms[k + 1:]]) if k + 1 < len(terms) else set(out)
        y, ty = _sum_out(y, ty, need_after | set(tx))
        x, tx = _sum_out(x, tx, need_after | set(ty))
        x, tx = _contract(ctx, x, tx, y, ty, need_after)
    x, tx = _sum_out(x, tx, set(out))
    missing = [c for c in out if c not in tx]
    if missing:
        raise FrontendError(f"einsum {equation!r}: output letters {missing} do not appear in any operand")
    perm = [tx.index(c) for c in out]
    if perm != list(range(len(tx))):
        x = _op.transpose(x, perm)
    return x
