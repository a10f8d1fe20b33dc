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
from ..arith import Analyzer, IntSet, eval_set
from .schedule import Fuse, Rebase, Singleton, Split


def _const_int(ana: Analyzer, e):
    """The value of ``e`` when it simplifies to an integer constant, else None."""
    e = ana.simplify(e)
    return e.value if isinstance(e, E.IntImm) else None


def _update(state, iv, r, ana: Analyzer):
    old = state.get(iv)
    if old is None:
        state[iv] = r
    elif not (ana.can_prove_equal(old.extent, r.extent) and ana.can_prove_equal(old.min, r.min)):
        raise InternalError(f"conflicting domains for axis {iv.var.name}: {old} vs {r}")


def _ready(state: dict, ivs, allow_missing: bool, what: str) -> bool:
    """Whether ``state`` holds every axis of ``ivs``. A relation with a missing axis is skipped when
    ``allow_missing`` (partial propagation), and is an internal error otherwise."""
    missing = [iv.var.name for iv in ivs if iv not in state]
    if not missing:
        return True
    if allow_missing:
        return False
    raise InternalError(f"no {what} for {' / '.join(missing)}")


def pass_down_domain(stage, state: dict, allow_missing: bool = False) -> None:
    """Fill the domains of derived axes from their parents' domains (in place)."""
    ana = Analyzer()
    for rel in stage.relations:
        if isinstance(rel, Split):
            if not _ready(state, (rel.parent,), allow_missing, "domain"):
                continue
            pr = state[rel.parent]
            dt = pr.extent.dtype
            if rel.factor is not None:
                factor = tir_op.cast(rel.factor, dt)
                inner_ext = factor
                pe, fe = _const_int(ana, pr.extent), _const_int(ana, factor)
                if pe is not None and fe is not None and pe < fe and _not_thread_bound(stage, rel.inner):
                    inner_ext = tir_op.const(pe, dt)
                _update(state, rel.inner, E.Range.from_min_extent(tir_op.const(0, dt), inner_ext), ana)
                _update(state, rel.outer, E.Range.from_min_extent(
                    tir_op.const(0, dt), ana.simplify(tir_op.ceildiv(pr.extent, inner_ext))), ana)
            else:
                nparts = tir_op.cast(rel.nparts, dt)
                _update(state, rel.outer, E.Range.from_min_extent(tir_op.const(0, dt), nparts), ana)
                _update(state, rel.inner, E.Range.from_min_extent(
                    tir_op.const(0, dt), ana.simplify(tir_op.ceildiv(pr.extent, nparts))), ana)
        elif isinstance(rel, Fuse):
            if not _ready(state, (rel.outer, rel.inner), allow_missing, "domain"):
                continue
            ro, ri = state[rel.outer], state[rel.inner]
            dt = rel.fused.var.dtype
            ext = ana.simplify(tir_op.mul(tir_op.cast(ro.extent, dt), tir_op.cast(ri.extent, dt)))
            state[rel.fused] = E.Range.from_min_extent(tir_op.const(0, dt), ext)
        elif isinstance(rel, Rebase):
            if not _ready(state, (rel.parent,), allow_missing, "domain"):
                continue
            pr = state[rel.parent]
            _update(state, rel.rebased, E.Range.from_min_extent(tir_op.const(0, pr.extent.dtype), pr.extent),
                    ana)
        elif isinstance(rel, Singleton):
            _update(state, rel.iter, E.Range(0, 1), ana)
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
    ana = Analyzer()
    for rel in reversed(stage.relations):
        if isinstance(rel, Split):
            if not _ready(state, (rel.outer, rel.inner), allow_missing, "value"):
                continue
            factor = dom_map[rel.inner].extent
            value = tir_op.add(tir_op.mul(state[rel.outer], factor), state[rel.inner])
            pmin = dom_map[rel.parent].min
            if not ana.can_prove_equal(pmin, 0):
                value = tir_op.add(value, pmin)
            state[rel.parent] = value
        elif isinstance(rel, Fuse):
            if not _ready(state, (rel.fused,), allow_missing, "value"):
                continue
            value = state[rel.fused]
            factor = dom_map[rel.inner].extent
            omin, imin = dom_map[rel.outer].min, dom_map[rel.inner].min
            vo = tir_op.floordiv(value, tir_op.cast(factor, value.dtype))
            vi = tir_op.floormod(value, tir_op.cast(factor, value.dtype))
            if not ana.can_prove_equal(omin, 0):
                vo = tir_op.add(vo, omin)
            if not ana.can_prove_equal(imin, 0):
                vi = tir_op.add(vi, imin)
            state[rel.outer] = tir_op.cast(vo, rel.outer.var.dtype)
            state[rel.inner] = tir_op.cast(vi, rel.inner.var.dtype)
        elif isinstance(rel, Rebase):
            if not _ready(state, (rel.rebased,), allow_missing, "value"):
                continue
            value = state[rel.rebased]
            pmin = dom_map[rel.parent].min
            state[rel.parent] = value if ana.can_prove_equal(pmin, 0) else tir_op.add(value, pmin)


def pass_down_index(stage, dom_map: dict, state: dict, allow_missing: bool = False) -> None:
    """Express derived axes through root axis values (used by cache_write's relayout)."""
    ana = Analyzer()
    for rel in stage.relations:
        if isinstance(rel, Split):
            if not _ready(state, (rel.parent,), allow_missing, "value"):
                continue
            factor = dom_map[rel.inner].extent
            value = tir_op.sub(state[rel.parent], dom_map[rel.parent].min)
            state[rel.outer] = ana.simplify(tir_op.floordiv(value, factor))
            state[rel.inner] = ana.simplify(tir_op.floormod(value, factor))
        elif isinstance(rel, Fuse):
            if not _ready(state, (rel.outer, rel.inner), allow_missing, "value"):
                continue
            factor = dom_map[rel.inner].extent
            vo = tir_op.sub(state[rel.outer], dom_map[rel.outer].min)
            vi = tir_op.sub(state[rel.inner], dom_map[rel.inner].min)
            state[rel.fused] = ana.simplify(tir_op.add(tir_op.mul(vo, factor), vi))
        elif isinstance(rel, Rebase):
            if not _ready(state, (rel.parent,), allow_missing, "value"):
                continue
            state[rel.rebased] = ana.simplify(tir_op.sub(state[rel.parent], dom_map[rel.parent].min))
        elif isinstance(rel, Singleton):
            state[rel.iter] = tir_op.const(0, "int32")


def pass_up_domain(stage, dom_map: dict, state: dict) -> None:
    """From IntSets of leaf axes to IntSets of root axes (``state``: IterVar -> IntSet)."""
    ana = Analyzer()
    for rel in reversed(stage.relations):
        if isinstance(rel, Split):
            outer, inner = state.get(rel.outer), state.get(rel.inner)
            if outer is None or inner is None:
                continue
            if outer.match_range(dom_map[rel.outer], ana) and inner.match_range(dom_map[rel.inner], ana):
                state[rel.parent] = IntSet.from_range(dom_map[rel.parent])
                continue
            factor = dom_map[rel.inner].extent
            pmin = dom_map[rel.parent].min
            expr = tir_op.add(tir_op.add(tir_op.mul(rel.outer.var, factor), rel.inner.var), pmin)
            state[rel.parent] = eval_set(expr, {rel.outer.var: outer, rel.inner.var: inner}, ana)
        elif isinstance(rel, Fuse):
            fused = state.get(rel.fused)
            if fused is None:
                continue
            ro, ri, rf = dom_map[rel.outer], dom_map[rel.inner], dom_map[rel.fused]
            if fused.match_range(rf, ana):
                state[rel.outer] = IntSet.from_range(ro)
                state[rel.inner] = IntSet.from_range(ri)
                continue
            factor = tir_op.cast(ri.extent, rel.fused.var.dtype)
            if fused.is_single_point():
                v = fused.min_value
                vo = tir_op.cast(tir_op.add(tir_op.floordiv(v, factor), tir_op.cast(ro.min, v.dtype)), ro.min.dtype)
                vi = tir_op.cast(tir_op.add(tir_op.floormod(v, factor), tir_op.cast(ri.min, v.dtype)), ri.min.dtype)
                state[rel.outer] = IntSet.single_point(ana.simplify(vo))
                state[rel.inner] = IntSet.single_point(ana.simplify(vi))
            elif fused.is_bounded():
                fmin, fmax = fused.min_value, fused.max_value
                state[rel.outer] = IntSet.interval(
                    ana.simplify(tir_op.add(ro.min, tir_op.cast(tir_op.floordiv(fmin, factor), ro.min.dtype))),
                    ana.simplify(tir_op.add(ro.min, tir_op.cast(tir_op.floordiv(fmax, factor), ro.min.dtype))))
                fext = tir_op.add(tir_op.sub(fmax, fmin), 1)
                fe, ie, fm = _const_int(ana, fext), _const_int(ana, factor), _const_int(ana, fmin)
                if fe is not None and ie is not None and fm is not None and ie % fe == 0 and fm % fe == 0 \
                        and (fm % ie) + fe <= ie:
                    state[rel.inner] = IntSet.interval(ana.simplify(tir_op.add(ri.min, fm % ie)),
                                                       ana.simplify(tir_op.add(ri.min, fm % ie + fe - 1)))
                else:
                    state[rel.inner] = IntSet.from_range(ri)
            else:
                state[rel.outer] = IntSet.from_range(ro)
                state[rel.inner] = IntSet.from_range(ri)
        elif isinstance(rel, Rebase):
            rb = state.get(rel.rebased)
            if rb is None:
                continue
            if rb.match_range(dom_map[rel.rebased], ana):
                state[rel.parent] = IntSet.from_range(dom_map[rel.parent])
                continue
            pmin = dom_map[rel.parent].min
            state[rel.parent] = eval_set(tir_op.add(rel.rebased.var, pmin), {rel.rebased.var: rb}, ana)


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
    ana = Analyzer()
    for rel in reversed(stage.relations):
        if isinstance(rel, Split):
            outer, inner = state.get(rel.outer, False), state.get(rel.inner, False)
            if rel.inner in dom_map and rel.outer in dom_map:
                factor = dom_map[rel.inner].extent
                step = dom_map[rel.outer].extent
                if outer or inner:
                    state[rel.parent] = True
                else:
                    state[rel.parent] = not ana.can_prove_equal(dom_map[rel.parent].extent,
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
    ana = Analyzer()
    iset = {iv.var: IntSet.from_range(r) for iv, r in dom_map.items()}

    preds = []
    for iv in stage.all_iter_vars:
        if iv in skip_iter or iv.iter_type == E.IterVar.Ordered:
            continue
        if bound_state.get(iv, False):
            dom = dom_map[iv]
            value = value_map[iv] if ana.can_prove_equal(dom.min, 0) else tir_op.sub(value_map[iv], dom.min)
            s = eval_set(value, iset, ana)
            if not (s.has_upper_bound() and ana.can_prove(tir_op.less(s.max_value, dom.extent))):
                preds.append(tir_op.less(value, dom.extent))
    for iv in stage.op.root_iter_vars:
        if iv in skip_iter:
            continue
        dom = dom_map[iv]
        if skip_ivar_domain:
            continue
        if ana.can_prove_equal(iv.dom.min, dom.min) and ana.can_prove_equal(iv.dom.extent, dom.extent):
            continue
        value = value_map[iv]
        if not ana.can_prove_equal(iv.dom.min, 0):
            value = tir_op.sub(value, iv.dom.min)
        s = eval_set(value, iset, ana)
        if not (s.has_lower_bound() and ana.can_prove(tir_op.greater_equal(s.min_value, 0))):
            preds.append(tir_op.greater_equal(value, 0))
        if not (s.has_upper_bound() and ana.can_prove(tir_op.less(s.max_value, iv.dom.extent))):
            preds.append(tir_op.less(value, iv.dom.extent))
    return preds
