"""Which unknown (``Any``) extents of the VM's tensors are the same size (symbolic dim provenance).

Relay types say only ``Any``: the conv output and the residual operand of a ResNet block are both
``(?, 64, 28, 28)`` but nothing says their batches are equal, so a fused ``conv + residual`` kernel lowered
with one variable per unknown dim broadcasts two different extents: the output extent is ``max(a, b)``, each
operand reads index 0 where its extent is 1, and the conv stage is computed under guards (10x slower).

The VM compiler knows more: it follows every register from the function's parameters through the kernels.
Each unknown dim of a parameter gets a symbol; a kernel's output extents are its shape expressions (traced
from the ops' shape functions) with the caller's symbols substituted for the kernel's variables; values of
unknown origin (an ``If``, a call of a VM function, a data-dependent shape) get fresh symbols. A kernel
call then passes the *classes* of its operands' unknown dims (equal expressions, one class) to the lowering,
which gives one ``te.var`` per class. The kernel ABI binds a variable from its first occurrence and checks
every other one, so a wrong equality would be an ArgumentError at the call, never a silent wrong result.
"""
from __future__ import annotations

from .... import te
from ....ir.type import TensorType, TupleType
from ....tir.expr import Var
from ....tir.stmt_functor import substitute
from ...transform.symbolic_reshape import _int as _static, fresh_shape  # _static: a dim's int, or None
from .lower import SHAPE_VAR_DTYPE  # the compiler's symbols meet the kernels' variables in one expression


class SymDims:
    """Symbolic shapes of the registers of one VM function (tensor: tuple of int | PrimExpr; tuple value:
    ``("tuple", [fields])``; anything else: None)."""

    def __init__(self):
        self.of: dict = {}
        self._n = 0

    def fresh(self, ty):
        """New symbols for the unknown dims of ``ty``."""
        return fresh_shape(ty, self._new_dim)

    def _new_dim(self):
        self._n += 1
        return te.size_var(f"sym{self._n - 1}", SHAPE_VAR_DTYPE)

    def get(self, reg: int, ty):
        """The symbolic shape of ``reg`` (fresh symbols the first time an unknown register is asked). The
        Relay type is authoritative: its static dims replace whatever was derived."""
        v = self.of.get(reg)
        if v is None or not _fits(v, ty):
            v = self.of[reg] = self.fresh(ty)
        elif isinstance(ty, TensorType):
            fixed = tuple(_static(d) if _static(d) is not None else x for d, x in zip(ty.shape, v))
            if fixed != v:
                v = self.of[reg] = fixed
        return v

    def set(self, reg: int, value) -> None:
        if value is not None:
            self.of[reg] = value

    def field(self, reg: int, ty, k: int, dst: int) -> None:
        """``dst`` = field ``k`` of the tuple value in ``reg`` (of type ``ty``)."""
        v = self.get(reg, ty)
        if isinstance(v, tuple) and len(v) == 2 and v[0] == "tuple" and k < len(v[1]):
            self.set(dst, v[1][k])


def _fits(v, ty) -> bool:
    if isinstance(ty, TupleType):
        return isinstance(v, tuple) and len(v) == 2 and v[0] == "tuple" and len(v[1]) == len(ty.fields)
    if isinstance(ty, TensorType):
        return isinstance(v, tuple) and len(v) == len(ty.shape) and (not v or v[0] != "tuple")
    return True


def _key(d) -> str:
    from ....arith import Analyzer
    return str(Analyzer().simplify(d))


def dim_classes(shapes: list, types: list) -> tuple:
    """For the ``Any`` dims of ``types`` (in order; the tensors' symbolic ``shapes`` beside them), class ids:
    equal expressions share a class. A dim whose expression folded to a number gets a class of its own."""
    keys: dict = {}
    out = []
    for shape, ty in zip(shapes, types):
        for d, td in zip(shape, ty.shape):
            if _static(td) is not None:
                continue
            key = _key(d) if not isinstance(d, int) else ("own", len(out))
            out.append(keys.setdefault(key, len(keys)))
    return tuple(out)


def output_shapes(kernel_inputs: list, caller_shapes: list, kernel_outputs: list, syms: SymDims) -> list:
    """The caller-side symbolic shapes of a kernel's outputs: the kernel's output extents with the caller's
    symbols for the kernel variables bound by its inputs (an extent over any other variable: a fresh symbol)."""
    vmap: dict = {}
    for t, shape in zip(kernel_inputs, caller_shapes):
        for kd, cd in zip(t.shape, shape):
            if isinstance(kd, Var):
                vmap.setdefault(kd, cd)
    bound = set(vmap)
    out = []
    for t in kernel_outputs:
        dims = []
        for d in t.shape:
            s = _static(d)
            if s is not None:
                dims.append(s)
                continue
            if _free_vars(d) <= bound:
                r = substitute(d, vmap)
                s = _static(r)
                dims.append(s if s is not None else r)
            else:
                dims.append(te.size_var(f"sym{syms._n}", SHAPE_VAR_DTYPE))
                syms._n += 1
        out.append(tuple(dims))
    return out


def _free_vars(expr) -> set:
    from ....tir.analysis import undefined_vars
    return set(undefined_vars(expr))


def merge_same_dims(classes: tuple, types: list, spec) -> tuple:
    """``classes`` (from :func:`dim_classes`) with the classes of dims that FuseOps proved equal merged
    (``spec``: the primitive function's ``kiln.same_dims``, ``"k.j=k.j,..."`` over parameter k, axis j).
    Sound either way: the kernel binds one variable per class and checks every other dim against it at call
    time, so a wrong equality is an ``ArgumentError``, never a wrong result."""
    if not spec:
        return classes
    pos: dict = {}
    for k, ty in enumerate(types):
        for j, td in enumerate(getattr(ty, "shape", ())):
            if _static(td) is None:
                pos[(k, j)] = len(pos)
    out = list(classes)
    if len(out) != len(pos):
        return classes
    for group in str(spec).split(","):
        idx = []
        for item in group.split("="):
            k, _, j = item.partition(".")
            p = pos.get((int(k), int(j)))
            if p is not None:
                idx.append(p)
        if len(idx) < 2:
            continue
        target = min(out[p] for p in idx)
        merged = {out[p] for p in idx}
        out = [target if c in merged else c for c in out]
    renum: dict = {}
    return tuple(renum.setdefault(c, len(renum)) for c in out)
