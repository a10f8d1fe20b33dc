"""Algebraic data types in Relay (TVM's ``relay.adt``): ``TypeData``, ``Constructor``, ``Match`` and patterns.

A type definition ``TypeData(List, [A], [Cons, Nil])`` is registered in a module under its GlobalTypeVar
(``mod[List] = data``). A ``Constructor`` is a Relay expression: called (``Cons(x, xs)``) it builds a value;
used bare it is a function value. ``Match(data, [Clause(pattern, rhs), ...])`` picks the first clause whose
pattern matches. A constructor's ``tag`` is its index in its TypeData (values carry it at run time).
"""
from __future__ import annotations

from typing import Sequence

from ..error import RelayError
from ..ir.node import Node
from ..ir.type import FuncType, GlobalTypeVar, Type, TypeCall, TypeKind, TypeVar
from .expr import Call, ExprWithOp, Var, _check_expr
from .expr_functor import register_expr_class


class Constructor(ExprWithOp):
    """A constructor of an ADT: ``Constructor("Cons", [a, List(a)], List)``; ``ctor(*args)`` builds a Call."""

    _fields = ("name_hint", "tag", "belong_to")

    def __init__(self, name_hint: str, inputs: Sequence[Type], belong_to: GlobalTypeVar, span=None):
        if not isinstance(belong_to, GlobalTypeVar):
            raise RelayError(f"Constructor {name_hint!r}: belong_to must be the GlobalTypeVar of its type, "
                             f"got {type(belong_to).__name__}")
        for i, t in enumerate(inputs):
            if not isinstance(t, Type):
                raise RelayError(f"Constructor {name_hint!r}: input {i} must be a Type, got {type(t).__name__}")
        self.name_hint = str(name_hint)
        self.inputs = tuple(inputs)
        self.belong_to = belong_to
        self.tag = -1           # set by the TypeData that lists this constructor
        self.type_data = None   # the TypeData (not a compared field: it refers back to this constructor)
        self.span = span

    def __call__(self, *args):
        return Call(self, list(args))

    def func_type(self) -> FuncType:
        """``fn[type vars](inputs) -> Type[type vars]``: the constructor's (polymorphic) function type."""
        if self.type_data is None:
            raise RelayError(f"constructor {self.name_hint} belongs to no TypeData; build "
                             f"TypeData({self.belong_to.name_hint}, type_vars, [..., {self.name_hint}]) first")
        tvs = self.type_data.type_vars
        return FuncType(self.inputs, TypeCall(self.belong_to, tvs), tvs)

    def __repr__(self) -> str:
        return f"Constructor({self.name_hint}, tag={self.tag})"

    __str__ = __repr__


class TypeData(Type):
    """The definition of an ADT: its header (GlobalTypeVar), type parameters and constructors."""

    _fields = ("header", "type_vars", "constructors")
    _def_fields = ("type_vars",)

    def __init__(self, header: GlobalTypeVar, type_vars: Sequence[TypeVar], constructors: Sequence[Constructor]):
        if not isinstance(header, GlobalTypeVar):
            raise RelayError(f"TypeData header must be a GlobalTypeVar, got {type(header).__name__}")
        self.header = header
        self.type_vars = tuple(type_vars)
        self.constructors = tuple(constructors)
        for tag, c in enumerate(self.constructors):
            if not isinstance(c, Constructor):
                raise RelayError(f"TypeData {header.name_hint}: constructor {tag} is a {type(c).__name__}")
            if c.belong_to.name_hint != header.name_hint:
                raise RelayError(f"constructor {c.name_hint} belongs to {c.belong_to.name_hint}, "
                                 f"not to {header.name_hint}")
            if c.type_data is not None and c.tag != tag:
                raise RelayError(f"constructor {c.name_hint} is already constructor {c.tag} of a TypeData")
            c.tag = tag
            c.type_data = self


# -- patterns -----------------------------------------------------------------------------------------
class Pattern(Node):
    """Base of match patterns."""


class PatternWildcard(Pattern):
    """``_``: matches anything, binds nothing."""

    _fields = ()


class PatternVar(Pattern):
    """``%x``: matches anything and binds it to ``var``."""

    _fields = ("var",)
    _def_fields = ("var",)

    def __init__(self, var: Var):
        if not isinstance(var, Var):
            raise RelayError(f"PatternVar binds a relay.Var, got {type(var).__name__}")
        self.var = var


class PatternConstructor(Pattern):
    """``Cons(p1, p2)``: matches a value built by ``constructor`` whose fields match the sub-patterns."""

    _fields = ("constructor", "patterns")

    def __init__(self, constructor: Constructor, patterns: Sequence[Pattern] | None = None):
        if not isinstance(constructor, Constructor):
            raise RelayError(f"PatternConstructor needs a Constructor, got {type(constructor).__name__}")
        patterns = tuple(patterns or ())
        if len(patterns) != len(constructor.inputs):
            raise RelayError(f"pattern {constructor.name_hint}(...) has {len(patterns)} sub-patterns, but the "
                             f"constructor takes {len(constructor.inputs)} fields")
        _check_patterns(patterns)
        self.constructor = constructor
        self.patterns = patterns


class PatternTuple(Pattern):
    """``(p1, p2, ...)``: matches a tuple whose fields match the sub-patterns."""

    _fields = ("patterns",)

    def __init__(self, patterns: Sequence[Pattern] | None = None):
        self.patterns = tuple(patterns or ())
        _check_patterns(self.patterns)


def _check_patterns(patterns) -> None:
    for i, p in enumerate(patterns):
        if not isinstance(p, Pattern):
            raise RelayError(f"sub-pattern {i} must be a Pattern, got {type(p).__name__}")


class Clause(Node):
    """One case of a Match: ``lhs => rhs``."""

    _fields = ("lhs", "rhs")

    def __init__(self, lhs: Pattern, rhs):
        if not isinstance(lhs, Pattern):
            raise RelayError(f"Clause lhs must be a Pattern, got {type(lhs).__name__}")
        self.lhs = lhs
        self.rhs = _check_expr(rhs, "Clause rhs")


class Match(ExprWithOp):
    """``match (data) { clauses }``: the first clause whose pattern matches ``data`` gives the value.
    ``complete=False`` (``match?``) allows a non-exhaustive match (a miss is a run-time error)."""

    _fields = ("data", "clauses", "complete")

    def __init__(self, data, clauses: Sequence[Clause], complete: bool = True, span=None):
        self.data = _check_expr(data, "Match data")
        self.clauses = tuple(clauses)
        for i, c in enumerate(self.clauses):
            if not isinstance(c, Clause):
                raise RelayError(f"Match clause {i} must be a Clause, got {type(c).__name__}")
        self.complete = bool(complete)
        self.span = span


class ConstructorValue:
    """An ADT value as the debug interpreter returns it: ``tag``, ``fields``, ``constructor``."""

    __slots__ = ("tag", "fields", "constructor")

    def __init__(self, tag: int, fields, constructor=None):
        self.tag = int(tag)
        self.fields = list(fields)
        self.constructor = constructor

    def __repr__(self) -> str:
        name = self.constructor.name_hint if self.constructor is not None else f"tag{self.tag}"
        return f"{name}(" + ", ".join(repr(f) for f in self.fields) + ")"


def match_pattern(pattern: Pattern, value, bind: dict) -> bool:
    """Whether ``value`` (a ConstructorValue / tuple / tensor) matches ``pattern``; binds its variables."""
    stack = [(pattern, value)]
    while stack:
        p, v = stack.pop()
        if isinstance(p, PatternVar):
            bind[p.var] = v
        elif isinstance(p, PatternConstructor):
            if getattr(v, "tag", None) != p.constructor.tag:
                return False
            fields = v.fields if isinstance(v, ConstructorValue) else list(v)
            stack.extend(zip(p.patterns, fields))
        elif isinstance(p, PatternTuple):
            stack.extend(zip(p.patterns, list(v)))
    return True


def pattern_vars(pattern: Pattern) -> list:
    """The variables a pattern binds, left to right."""
    out, stack = [], [pattern]
    while stack:
        p = stack.pop()
        if isinstance(p, PatternVar):
            out.append(p.var)
        elif isinstance(p, (PatternConstructor, PatternTuple)):
            stack.extend(reversed(p.patterns))
    return out


register_expr_class(Constructor, "visit_constructor")
register_expr_class(Match, "visit_match")

__all__ = ["Constructor", "TypeData", "Pattern", "PatternWildcard", "PatternVar", "PatternConstructor",
           "PatternTuple", "Clause", "Match", "ConstructorValue", "match_pattern", "pattern_vars", "TypeKind"]
