"""TIR statements: loop nests, stores, allocations, attributes."""
from __future__ import annotations

from enum import IntEnum

from ..ir.node import Node
from ..runtime.dtype import parse_dtype
from .op import convert
from .expr import StringImm


class Stmt(Node):
    """Base of all TIR statements."""

    def astext(self) -> str:
        from .printer import stmt_to_str
        return stmt_to_str(self)


class ForKind(IntEnum):
    SERIAL = 0
    PARALLEL = 1
    VECTORIZED = 2
    UNROLLED = 3
    THREAD_BINDING = 4


class LetStmt(Stmt):
    _fields = ("var", "value", "body")
    _def_fields = ("var",)

    def __init__(self, var, value, body):
        self.var, self.value, self.body = var, value, body


class AttrStmt(Stmt):
    """Annotates ``body`` with ``attr_key = value`` about ``node`` (e.g. thread_extent, pragma_*)."""

    _fields = ("node", "attr_key", "value", "body")

    def __init__(self, node, attr_key: str, value, body):
        self.node, self.attr_key, self.value, self.body = node, attr_key, convert(value), body


class AssertStmt(Stmt):
    _fields = ("condition", "message", "body")

    def __init__(self, condition, message, body):
        self.condition = condition
        self.message = message if not isinstance(message, str) else StringImm(message)
        self.body = body


class BufferStore(Stmt):
    """``buffer[indices] = value``."""

    _fields = ("buffer", "value", "indices")

    def __init__(self, buffer, value, indices):
        self.buffer, self.value = buffer, convert(value)
        self.indices = [convert(i) for i in indices]


class BufferRealize(Stmt):
    """``buffer`` is materialized over ``bounds`` (a list of Range) inside ``body``."""

    _fields = ("buffer", "bounds", "condition", "body")
    _def_fields = ("buffer",)

    def __init__(self, buffer, bounds, condition, body):
        self.buffer, self.bounds, self.condition, self.body = buffer, list(bounds), condition, body


class ProducerStore(Stmt):
    _fields = ("producer", "value", "indices")

    def __init__(self, producer, value, indices):
        self.producer, self.value, self.indices = producer, value, list(indices)


class ProducerRealize(Stmt):
    _fields = ("producer", "bounds", "condition", "body", "storage_scope")

    def __init__(self, producer, bounds, condition, body, storage_scope: str = ""):
        self.producer, self.bounds, self.condition = producer, list(bounds), condition
        self.body, self.storage_scope = body, storage_scope


class Allocate(Stmt):
    """Allocate ``prod(extents)`` elements of ``dtype`` bound to the handle ``buffer_var``."""

    _fields = ("buffer_var", "dtype", "extents", "condition", "body", "annotations")
    _def_fields = ("buffer_var",)

    def __init__(self, buffer_var, dtype, extents, condition, body, annotations=None):
        self.buffer_var = buffer_var
        self.dtype = str(parse_dtype(dtype))
        self.extents = list(extents)
        self.condition = condition
        self.body = body
        self.annotations = dict(annotations or {})


class DeclBuffer(Stmt):
    """Declares ``buffer`` (a view over an existing data pointer) for ``body``."""

    _fields = ("buffer", "body")
    _def_fields = ("buffer",)

    def __init__(self, buffer, body):
        self.buffer, self.body = buffer, body


class For(Stmt):
    """``for loop_var in [min, min + extent)`` of the given kind."""

    _fields = ("loop_var", "min", "extent", "kind", "body", "thread_binding", "annotations")
    _def_fields = ("loop_var",)

    def __init__(self, loop_var, min, extent, kind, body, thread_binding=None, annotations=None):
        self.loop_var = loop_var
        self.min = convert(min)
        self.extent = convert(extent)
        self.kind = ForKind(kind)
        self.body = body
        self.thread_binding = thread_binding
        self.annotations = dict(annotations or {})


class While(Stmt):
    _fields = ("condition", "body")

    def __init__(self, condition, body):
        self.condition, self.body = condition, body


class IfThenElse(Stmt):
    _fields = ("condition", "then_case", "else_case")

    def __init__(self, condition, then_case, else_case=None):
        self.condition, self.then_case, self.else_case = convert(condition), then_case, else_case


class SeqStmt(Stmt):
    _fields = ("seq",)

    def __init__(self, seq):
        flat = []
        for s in seq:
            if isinstance(s, SeqStmt):
                flat.extend(s.seq)
            elif s is not None:
                flat.append(s)
        self.seq = flat

    def __len__(self):
        return len(self.seq)

    def __getitem__(self, i):
        return self.seq[i]


class Evaluate(Stmt):
    """Evaluate an expression for its side effect (e.g. a packed call)."""

    _fields = ("value",)

    def __init__(self, value):
        self.value = convert(value)


class Prefetch(Stmt):
    _fields = ("buffer", "bounds")

    def __init__(self, buffer, bounds):
        self.buffer, self.bounds = buffer, list(bounds)


def seq(*stmts) -> Stmt:
    """A SeqStmt of the non-None statements, or the single statement if there is one."""
    flat = SeqStmt(stmts).seq
    if len(flat) == 1:
        return flat[0]
    return SeqStmt(flat)


def stmt_seq(*args):
    return seq(*args)


def stmt_list(stmt):
    if isinstance(stmt, SeqStmt):
        return list(stmt.seq)
    return [stmt]
