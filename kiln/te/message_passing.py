"""Propagation along a stage's iteration-variable relations (split, fuse, rebase, singleton).

"Down" goes from root axes to derived (leaf) axes: domains of loops. "Up" goes from leaf
axes back to root axes: the value of an original axis in terms of loop variables
(``i = i_outer * 8 + i_inner``), the region a set of loop values covers, and whether a root
axis needs a bounds guard because a split did not divide it evenly.
"""
from __future__ import annotations

from ..error import InternalError
from ..tir import expr as E
from ..tir import op as tir_op
from . import _arith as A
from .schedule import Fuse, Rebase, Singleton, Split


def _update(state, iv, r):
    old = state.get(iv)
    if old is None:
        state[iv] = r
    elif not (A.can_prove_equal(old.extent, r.extent) and A.can_prove_equal(old.min, r.min)):
        raise InternalError(f"conflicting domains for axis {iv.var.name}: {old} vs {r}")


def pass_down_domain(stage, state: dict, allow_missing: bool = False) -> None:
    """Fill the domains of derived axes from their parents' domains (in place)."""
    for rel in stage.relations:
        if isinstance(rel, Split):
            if rel.parent not in state:
                if allow_missing:
                    continue
                raise InternalError(f"no domain for {rel.parent.var.name}")
            pr = state[rel.parent]
            dt = pr.extent.dtype
            if rel.factor is not None:
                factor = tir_op.cast(rel.factor, dt)
                inner_ext = factor
                pe, fe = A.const_value(pr.extent), A.const_value(factor)
                if pe is not None and fe is not None and pe < fe and _not_thread_bound(stage, rel.inner):
                    inner_ext = tir_op.const(pe, dt)
                _update(state, rel.inner, E.Range.from_min_extent(tir_op.const(0, dt), inner_ext))
                _update(state, rel.outer, E.Range.from_min_extent(tir_op.const(0, dt),
                                                                  A.ceil_div(pr.extent, inner_ext)))
            else:
                nparts = tir_op.cast(rel.nparts, dt)
                _update(state, rel.outer, E.Range.from_min_extent(tir_op.const(0, dt), nparts))
                _update(state, rel.inner, E.Range.from_min_extent(tir_op.const(0, dt),
                                                                  A.ceil_div(pr.extent, nparts)))
        elif isinstance(rel, Fuse):
            if rel.outer not in state or rel.inner not in state:
                if allow_missing:
                    continue
                raise InternalError(f"no domain for {rel.outer.var.name} / {rel.inner.var.name}")
            ro, ri = state[rel.outer], state[rel.inner]
            dt = rel.fused.var.dtype
            ext = A.simplify(tir_op.mul(tir_op.cast(ro.extent, dt), tir_op.cast(ri.extent, dt)))
            state[rel.fused] = E.Range.from_min_extent(tir_op.const(0, dt), ext)
        elif isinstance(rel, Rebase):
            if rel.parent not in state:
                if allow_missing:
                    continue
                raise InternalError(f"no domain for {rel.parent.var.name}")
            pr = state[rel.parent]
            _update(state, rel.rebased, E.Range.from_min_extent(tir_op.const(0, pr.extent.dtype), pr.extent))
        elif isinstance(rel, Singleton):
            _update(state, rel.iter, E.Range(0, 1))
    for iv, attr in stage.iter_var_attrs.items():
        if attr.bind_thread is not None and iv in state:
            r = state[iv]
            if attr.bind_thread not in state:
                state[attr.bind_thread] = r


def _not_thread_bound(stage, iv) -> bool:
    a = stage.iter_var_attrs.get(iv)
    return a is None or a.bind_thread is None


def pass_up_index(stage, dom_map: dict, state: dict, allow_missing: bool = False) -> None:
    """Express parent axes through derived axis values: ``state`` maps IterVar -> PrimExpr."""
    for rel in reversed(stage.relations):
        if isinstance(rel, Split):
            if rel.outer not in state or rel.inner not in state:
                if allow_missing:
                    continue
                raise InternalError(f"no value for {rel.outer.var.name}/{rel.inner.var.name}")
            factor = dom_map[rel.inner].extent
            value = tir_op.add(tir_op.mul(state[rel.outer], factor), state[rel.inner])
            pmin = dom_map[rel.parent].min
            if not A.is_zero(pmin):
                value = tir_op.add(value, pmin)
            state[rel.parent] = value
        elif isinstance(rel, Fuse):
            if rel.fused not in state:
                if allow_missing:
                    continue
                raise InternalError(f"no value for {rel.fused.var.name}")
            value = state[rel.fused]
            factor = dom_map[rel.inner].extent
            omin, imin = dom_map[rel.outer].min, dom_map[rel.inner].min
            vo = tir_op.floordiv(value, tir_op.cast(factor, value.dtype))
            vi = tir_op.floormod(value, tir_op.cast(factor, value.dtype))
            if not A.is_zero(omin):
                vo = tir_op.add(vo, omin)
            if not A.is_zero(imin):
                vi = tir_op.add(vi, imin)
            state[rel.outer] = tir_op.cast(vo, rel.outer.var.dtype)
            state[rel.inner] = tir_op.cast(vi, rel.inner.var.dtype)
        elif isinstance(rel, Rebase):
            if rel.rebased not in state:
                if allow_missing:
                    continue
                raise InternalError(f"no value for {rel.rebased.var.name}")
            value = state[rel.rebased]
            pmin = dom_map[rel.parent].min
            state[rel.parent] = value if A.is_zero(pmin) else tir_op.add(value, pmin)


def pass_down_index(stage, dom_map: dict, state: dict, allow_missing: bool = False) -> None:
    """Express derived axes through root axis values (used by cache_write's relayout)."""
    for rel in stage.relations:
        if isinstance(rel, Split):
            if rel.parent not in state:
                if allow_missing:
                    continue
                raise InternalError(f"no value for {rel.parent.var.name}")
            factor = dom_map[rel.inner].extent
            value = tir_op.sub(state[rel.parent], dom_map[rel.parent].min)
            state[rel.outer] = A.simplify(tir_op.floordiv(value, factor))
            state[rel.inner] = A.simplify(tir_op.floormod(value, factor))
        elif isinstance(rel, Fuse):
            if rel.outer not in state or rel.inner not in state:
                if allow_missing:
                    continue
                raise InternalError(f"no value for {rel.outer.var.name}")
            factor = dom_map[rel.inner].extent
            vo = tir_op.sub(state[rel.outer], dom_map[rel.outer].min)
            vi = tir_op.sub(state[rel.inner], dom_map[rel.inner].min)
            state[rel.fused] = A.simplify(tir_op.add(tir_op.mul(vo, factor), vi))
        elif isinstance(rel, Rebase):
            if rel.parent not in state:
                if allow_missing:
                    continue
                raise InternalError(f"no value for {rel.parent.var.name}")
            state[rel.rebased] = A.simplify(tir_op.sub(state[rel.parent], dom_map[rel.parent].min))
        elif isinstance(rel, Singleton):
            state[rel.iter] = tir_op.const(0, "int32")


def pass_up_domain(stage, dom_map: dict, state: dict) -> None:
    """From IntSets of leaf axes to IntSets of root axes (``state``: IterVar -> IntSet)."""
    for rel in reversed(stage.relations):
        if isinstance(rel, Split):
            outer, inner = state.get(rel.outer), state.get(rel.inner)
            if outer is None or inner is None:
                continue
            if (outer.match_range(dom_map[rel.outer]) and inner.match_range(dom_map[rel.inner])):
                state[rel.parent] = A.IntSet.from_range(dom_map[rel.parent])
                continue
            factor = dom_map[rel.inner].extent
            pmin = dom_map[rel.parent].min
            expr = tir_op.add(tir_op.add(tir_op.mul(rel.outer.var, factor), rel.inner.var), pmin)
            state[rel.parent] = A.eval_set(expr, {rel.outer.var: outer, rel.inner.var: inner})
        elif isinstance(rel, Fuse):
            fused = state.get(rel.fused)
            if fused is None:
                continue
            ro, ri, rf = dom_map[rel.outer], dom_map[rel.inner], dom_map[rel.fused]
            if fused.match_range(rf):
                state[rel.outer] = A.IntSet.from_range(ro)
                state[rel.inner] = A.IntSet.from_range(ri)
                continue
            factor = tir_op.cast(ri.extent, rel.fused.var.dtype)
            if fused.is_point():
                v = fused.min
                vo = tir_op.cast(tir_op.add(tir_op.floordiv(v, factor), tir_op.cast(ro.min, v.dtype)), ro.min.dtype)
                vi = tir_op.cast(tir_op.add(tir_op.floormod(v, factor), tir_op.cast(ri.min, v.dtype)), ri.min.dtype)
                state[rel.outer] = A.IntSet.point(vo)
                state[rel.inner] = A.IntSet.point(vi)
            elif fused.is_bounded():
                state[rel.outer] = A.IntSet(
                    tir_op.add(ro.min, tir_op.cast(tir_op.floordiv(fused.min, factor), ro.min.dtype)),
                    tir_op.add(ro.min, tir_op.cast(tir_op.floordiv(fused.max, factor), ro.min.dtype)))
                fext = A.simplify(tir_op.add(tir_op.sub(fused.max, fused.min), 1))
                fe, ie, fm = A.const_value(fext), A.const_value(factor), A.const_value(fused.min)
                if fe is not None and ie is not None and fm is not None and ie % fe == 0 and fm % fe == 0 \
                        and (fm % ie) + fe <= ie:
                    state[rel.inner] = A.IntSet(tir_op.add(ri.min, fm % ie), tir_op.add(ri.min, fm % ie + fe - 1))
                else:
                    state[rel.inner] = A.IntSet.from_range(ri)
            else:
                state[rel.outer] = A.IntSet.from_range(ro)
                state[rel.inner] = A.IntSet.from_range(ri)
        elif isinstance(rel, Rebase):
            rb = state.get(rel.rebased)
            if rb is None:
                continue
            if rb.match_range(dom_map[rel.rebased]):
                state[rel.parent] = A.IntSet.from_range(dom_map[rel.parent])
                continue
            pmin = dom_map[rel.parent].min
            state[rel.parent] = A.eval_set(tir_op.add(rel.rebased.var, pmin), {rel.rebased.var: rb})


def pass_up_bitmask_or(stage, state: dict, allow_missing: bool = False) -> None:
    for rel in reversed(stage.relations):
        if isinstance(rel, Split):
            if rel.inner not in state and rel.outer not in state:
                continue
            res = state.get(rel.parent, 0) | state.get(rel.inner, 0) | state.get(rel.outer, 0)
            state[rel.parent] = res
        elif isinstance(rel, Fuse):
            if rel.fused not in state:
                continue
            state[rel.outer] = state.get(rel.outer, 0) | state[rel.fused]
            state[rel.inner] = state.get(rel.inner, 0) | state[rel.fused]
        elif isinstance(rel, Rebase):
            if rel.rebased not in state:
                continue
            state[rel.parent] = state.get(rel.parent, 0) | state[rel.rebased]


def pass_down_bitmask_or(stage, state: dict, allow_missing: bool = False) -> None:
    for rel in stage.relations:
        if isinstance(rel, Split):
            if rel.parent not in state:
                continue
            state[rel.outer] = state.get(rel.outer, 0) | state[rel.parent]
            state[rel.inner] = state.get(rel.inner, 0) | state[rel.parent]
        elif isinstance(rel, Fuse):
            if rel.outer not in state and rel.inner not in state:
                continue
            state[rel.fused] = state.get(rel.outer, 0) | state.get(rel.inner, 0) | state.get(rel.fused, 0)
        elif isinstance(rel, Rebase):
            if rel.parent not in state:
                continue
            state[rel.rebased] = state.get(rel.rebased, 0) | state[rel.parent]
        elif isinstance(rel, Singleton):
            state[rel.iter] = 0


def pass_up_bound_check(stage, dom_map: dict, state: dict) -> None:
    """Mark root axes whose loops may run past their extent (a split that does not divide)."""
    for rel in reversed(stage.relations):
        if isinstance(rel, Split):
            outer, inner = state.get(rel.outer, False), state.get(rel.inner, False)
            if rel.inner in dom_map and rel.outer in dom_map:
                factor = dom_map[rel.inner].extent
                step = dom_map[rel.outer].extent
                if outer or inner:
                    state[rel.parent] = True
                else:
                    state[rel.parent] = not A.can_prove_equal(dom_map[rel.parent].extent,
                                                              tir_op.mul(factor, step))
            else:
                state[rel.parent] = True
        elif isinstance(rel, Fuse):
            fused = state.get(rel.fused, False)
            state[rel.outer] = fused
            state[rel.inner] = fused
        elif isinstance(rel, Rebase):
            state[rel.parent] = state.get(rel.rebased, False)


def make_bound_check(stage, dom_map: dict, value_map: dict, skip_ivar_domain: bool, skip_iter) -> list:
    """The guard conditions a loop nest of ``stage`` needs so no axis leaves its domain."""
    bound_state = {iv: False for iv in stage.leaf_iter_vars}
    pass_up_bound_check(stage, dom_map, bound_state)
    iset = {iv.var: A.IntSet.from_range(r) for iv, r in dom_map.items()}
    preds = []
    for iv in stage.all_iter_vars:
        if iv in skip_iter or iv.iter_type == E.IterVar.Ordered:
            continue
        if bound_state.get(iv, False):
            dom = dom_map[iv]
            value = tir_op.sub(value_map[iv], dom.min) if not A.is_zero(dom.min) else value_map[iv]
            s = A.eval_set(value, iset)
            if s.max is None or not A.can_prove_lt(s.max, dom.extent):
                preds.append(tir_op.less(value, dom.extent))
    for iv in stage.op.root_iter_vars:
        if iv in skip_iter:
            continue
        dom = dom_map[iv]
        if skip_ivar_domain:
            continue
        if A.can_prove_equal(iv.dom.min, dom.min) and A.can_prove_equal(iv.dom.extent, dom.extent):
            continue
        value = value_map[iv]
        if not A.is_zero(iv.dom.min):
            value = tir_op.sub(value, iv.dom.min)
        s = A.eval_set(value, iset)
        if s.min is None or not A.can_prove_nonneg(s.min):
            preds.append(tir_op.greater_equal(value, 0))
        if s.max is None or not A.can_prove_lt(s.max, iv.dom.extent):
            preds.append(tir_op.less(value, iv.dom.extent))
    return preds
