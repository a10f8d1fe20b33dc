"""``torch.einsum`` as transposes, reshapes, sums and one batch_matmul per pair of operands."""
from __future__ import annotations

import numpy as np

from ....error import FrontendError


def _op():
    from ... import op
    return op


def _parse(equation: str, ndims: list) -> tuple:
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, out = eq.split("->")
    else:
        lhs, out = eq, None
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise FrontendError(f"einsum {equation!r}: {len(terms)} operand subscripts for {len(ndims)} tensors")
    ell_letters = "".join(chr(c) for c in range(ord("A"), ord("Z") + 1) if chr(c) not in eq)
    n_ell = max([nd - (len(t) - 3) for t, nd in zip(terms, ndims) if "..." in t] or [0])
    fixed = []
    for t, nd in zip(terms, ndims):
        if "..." in t:
            k = nd - (len(t) - 3)
            t = t.replace("...", ell_letters[n_ell - k:n_ell])
        if len(t) != nd:
            raise FrontendError(f"einsum {equation!r}: subscripts {t!r} do not match a {nd}-d operand")
        fixed.append(t)
    if out is None:
        counts = {}
        for t in fixed:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell_letters[:n_ell] + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell_letters))
    else:
        out = out.replace("...", ell_letters[:n_ell])
    return fixed, out


def _reduce_only(ctx, x, subs, keep: set):
    """Sum out letters of ``x`` not in ``keep``; take diagonals of repeated letters."""
    if len(set(subs)) != len(subs):
        raise FrontendError("einsum with a repeated subscript in one operand (a diagonal) is not supported")
    drop = [i for i, c in enumerate(subs) if c not in keep]
    if drop:
        x = _op().sum(x, axis=drop)
        subs = "".join(c for c in subs if c in keep)
    return x, subs


def _contract(ctx, a, sa, b, sb, keep: set):
    """Contract two operands; the result keeps the letters in ``keep`` (in a chosen order)."""
    a, sa = _reduce_only(ctx, a, sa, keep | set(sb))
    b, sb = _reduce_only(ctx, b, sb, keep | set(sa))
    shape_a, shape_b = ctx.shape(a), ctx.shape(b)
    size = {}
    for s, shp in ((sa, shape_a), (sb, shape_b)):
        for c, d in zip(s, shp):
            size[c] = max(size.get(c, 1), d)
    batch = [c for c in sa if c in sb and c in keep]
    contract = [c for c in sa if c in sb and c not in keep]
    afree = [c for c in sa if c not in sb]
    bfree = [c for c in sb if c not in sa]

    def arrange(x, subs, order):
        shp = dict(zip(subs, ctx.shape(x)))
        perm = [subs.index(c) for c in order]
        if perm != list(range(len(perm))):
            x = _op().transpose(x, perm)
        target = [size[c] for c in order]
        if [shp[c] for c in order] != target:
            x = _op().broadcast_to(x, target)
        return x

    nb = int(np.prod([size[c] for c in batch], dtype=np.int64))
    na = int(np.prod([size[c] for c in afree], dtype=np.int64))
    nc = int(np.prod([size[c] for c in contract], dtype=np.int64))
    nf = int(np.prod([size[c] for c in bfree], dtype=np.int64))
    a3 = _op().reshape(arrange(a, sa, batch + afree + contract), [nb, na, nc])
    b3 = _op().reshape(arrange(b, sb, batch + contract + bfree), [nb, nc, nf])
    out = _op().nn.batch_matmul(a3, b3, transpose_a=False, transpose_b=False)
    subs = batch + afree + bfree
    return _op().reshape(out, [size[c] for c in subs]), "".join(subs)


def einsum(ctx, equation: str, tensors: list):
    terms, out = _parse(equation, [ctx.ndim(t) for t in tensors])
    x, sx = tensors[0], terms[0]
    for i in range(1, len(tensors)):
        later = set(out).union(*[set(t) for t in terms[i + 1:]])
        x, sx = _contract(ctx, x, sx, tensors[i], terms[i], later)
    x, sx = _reduce_only(ctx, x, sx, set(out))
    if sorted(sx) != sorted(out):
        raise FrontendError(f"einsum {equation!r}: output subscripts {out!r} cannot be formed")
    perm = [sx.index(c) for c in out]
    if perm != list(range(len(perm))):
        x = _op().transpose(x, perm)
    return x
