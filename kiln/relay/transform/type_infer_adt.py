"""Type inference of ADT expressions (constructors, ``match``) for :mod:`type_infer`.

A constructor's type is its polymorphic function type (instantiated afresh at each call by the call rule).
A match: the data's type is unified with each clause's pattern, pattern variables take the types of the
fields they bind, every clause's right-hand side has the match's type. A complete match (``match``, not
``match?``) must cover every value: checked on the pattern matrix (constructor by constructor).
"""
from __future__ import annotations

from ...ir.type import IncompleteType, TupleType, TypeCall
from ..adt import Constructor, Match, PatternConstructor, PatternTuple, PatternVar, PatternWildcard


def infer_adt_expr(inf, e):
    """The type of a Constructor or a Match (``inf`` is the running TypeInferencer)."""
    if isinstance(e, Constructor):
        if e.type_data is None:
            inf.fail(e, f"constructor {e.name_hint} belongs to no TypeData; register its type in the module")
        return e.func_type()
    return _infer_match(inf, e)


def _infer_match(inf, m: Match):
    from .type_infer import _substitute, _type_text
    data_t = inf.infer(m.data)

    def bind(pat, ty):
        if isinstance(pat, PatternWildcard):
            return
        if isinstance(pat, PatternVar):
            v = pat.var
            if v.type_annotation is not None:
                inf.unify(v.type_annotation, ty, m, f"pattern variable %{v.name_hint}")
            t = v.type_annotation if v.type_annotation is not None else ty
            inf.var_types[v] = t
            inf.types[v] = t
            return
        if isinstance(pat, PatternTuple):
            t = inf.solver.resolve(ty)
            if isinstance(t, IncompleteType):
                t = TupleType([IncompleteType() for _ in pat.patterns])
                inf.unify(ty, t, m, "the matched value")
            if not isinstance(t, TupleType) or len(t.fields) != len(pat.patterns):
                inf.fail(m, f"a tuple pattern of {len(pat.patterns)} fields cannot match a value of type "
                            f"{_type_text(inf.solver.full(t))}")
            for p, f in zip(pat.patterns, t.fields):
                bind(p, f)
            return
        if isinstance(pat, PatternConstructor):
            c = pat.constructor
            if c.type_data is None:
                inf.fail(m, f"constructor {c.name_hint} belongs to no TypeData")
            fresh = {tv: IncompleteType() for tv in c.type_data.type_vars}
            expected = TypeCall(c.belong_to, [fresh[tv] for tv in c.type_data.type_vars])
            inf.unify(expected, ty, m, f"pattern {c.name_hint}(...) against the matched value")
            for p, it in zip(pat.patterns, c.inputs):
                bind(p, _substitute(it, fresh))
            return
        inf.fail(m, f"unknown pattern {type(pat).__name__}")

    if not m.clauses:
        inf.fail(m, "a match needs at least one clause")
    out = None
    for clause in m.clauses:
        bind(clause.lhs, data_t)
        rt = inf.infer(clause.rhs)
        out = rt if out is None else inf.unify(out, rt, clause.rhs, "the clauses of a match have different types")
    if m.complete and not _exhaustive([[c.lhs] for c in m.clauses]):
        inf.fail(m, "match is not exhaustive: some values of the matched type match no clause "
                    "(add the missing cases, a wildcard `_` clause, or use Match(..., complete=False))")
    return out


def _irrefutable(p) -> bool:
    return isinstance(p, (PatternWildcard, PatternVar))


def _exhaustive(rows: list) -> bool:
    """Whether the rows of patterns (each a list, one column per matched value) cover every value."""
    if not rows:
        return False
    if not rows[0]:
        return True
    heads = [r[0] for r in rows]
    tuples = [h for h in heads if isinstance(h, PatternTuple)]
    if tuples:
        n = len(tuples[0].patterns)
        return _exhaustive([(list(r[0].patterns) if isinstance(r[0], PatternTuple) else [PatternWildcard()] * n)
                            + r[1:] for r in rows])
    ctors = [h.constructor for h in heads if isinstance(h, PatternConstructor)]
    if ctors:
        all_ctors = ctors[0].type_data.constructors
        used = {c.tag for c in ctors}
        if len(used) == len(all_ctors):
            for c in all_ctors:
                sub = []
                for r in rows:
                    h = r[0]
                    if isinstance(h, PatternConstructor):
                        if h.constructor.tag == c.tag:
                            sub.append(list(h.patterns) + r[1:])
                    else:
                        sub.append([PatternWildcard()] * len(c.inputs) + r[1:])
                if not _exhaustive(sub):
                    return False
            return True
    return _exhaustive([r[1:] for r in rows if _irrefutable(r[0])])
