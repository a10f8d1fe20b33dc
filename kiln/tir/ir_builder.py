"""``tvm.tir.ir_builder``: build TIR statements imperatively (loops, ifs, allocations, stores).

TVM-era code writes ``te.extern`` bodies and tensor-intrinsic bodies with it::

    ib = tvm.tir.ir_builder.create()
    with ib.for_range(0, n, name="i") as i:
        ptr = ib.buffer_ptr(buf)
        ptr[i] = ptr[i] + 1.0
    stmt = ib.get()

Each scope (``for_range``, ``if_scope``, ...) collects the statements emitted inside it; statements that wrap
what follows them (``let``, ``allocate``, ``scope_attr``) are kept as callables and applied to the rest of
their scope when the scope closes.
"""
from __future__ import annotations

from typing import Callable

from ..error import KilnError
from ..runtime.dtype import parse_dtype
from . import expr as E
from . import stmt as S
from .buffer import Buffer, decl_buffer
from .op import const, convert

_FOR_KINDS = {"serial": S.ForKind.SERIAL, "parallel": S.ForKind.PARALLEL, "vectorize": S.ForKind.VECTORIZED,
              "unroll": S.ForKind.UNROLLED}


class IRBuilderError(KilnError):
    """Misuse of the IR builder (an else without an if, ``get`` inside a scope, a wrong store type)."""


class WithScope:
    """The object a builder scope returns: ``with`` yields ``enter_value`` and closes the scope on exit."""

    def __init__(self, enter_value, exit_cb: Callable[[], None]):
        self._enter_value = enter_value
        self._exit_cb = exit_cb

    def __enter__(self):
        return self._enter_value

    def __exit__(self, ptype, value, trace):
        if ptype is None:
            self._exit_cb()


class BufferVar:
    """A buffer seen through the builder: ``x[i]`` loads, ``x[i] = v`` emits a store.

    Indexing takes one index per dimension, or one flat index into a multi-dimensional buffer (TVM's older
    builder code indexes flat). A vector ``dtype`` (``float32x4``) reads/writes ``lanes`` consecutive elements
    at ``index * lanes``.
    """

    def __init__(self, builder: "IRBuilder", buffer: Buffer, content_type: str):
        self._builder = builder
        self._buffer = buffer
        self._content_type = str(parse_dtype(content_type))

    def asobject(self):
        return self._buffer.data

    @property
    def data(self):
        return self._buffer.data

    @property
    def buffer(self) -> Buffer:
        return self._buffer

    @property
    def dtype(self) -> str:
        return self._content_type

    def _indices(self, index) -> list:
        idx = list(index) if isinstance(index, (tuple, list)) else [index]
        idx = [convert(i.var if isinstance(i, E.IterVar) else i) for i in idx]
        shape = self._buffer.shape
        if len(idx) == 1 and len(shape) > 1:  # a flat index: unravel it over the shape
            flat, out = idx[0], []
            for d in reversed(shape[1:]):
                out.append(flat % d)
                flat = flat // d
            idx = [flat] + list(reversed(out))
        if len(idx) != len(shape):
            raise IRBuilderError(f"buffer {self._buffer.name} has {len(shape)} dimensions but was indexed with "
                                 f"{len(idx)} indices")
        lanes = parse_dtype(self._content_type).lanes
        if lanes > 1:
            base = idx[-1] * lanes
            idx[-1] = E.Ramp(base, const(1, base.dtype), lanes)
        return idx

    def __getitem__(self, index):
        return E.BufferLoad(self._buffer, self._indices(index))

    def __setitem__(self, index, value):
        value = convert(value)
        if value.dtype != self._content_type:
            raise IRBuilderError(f"store to buffer {self._buffer.name}: value of dtype {value.dtype} but the buffer "
                                 f"holds {self._content_type}; cast the value")
        self._builder.emit(S.BufferStore(self._buffer, value, self._indices(index)))


class IRBuilder:
    """Builds one statement: ``emit`` statements and open scopes, then ``get()`` the result."""

    def __init__(self):
        self._seq_stack: list = [[]]
        self.nidx = 0

    def _pop_seq(self):
        seq = self._seq_stack.pop()
        if not seq or callable(seq[-1]):
            seq.append(S.Evaluate(const(0, "int32")))
        body: list = []
        for item in reversed(seq):  # a wrapper takes everything emitted after it in its scope
            if callable(item):
                body = [item(_seq_of(body))]
            else:
                body.insert(0, item)
        return _seq_of(body)

    def emit(self, stmt) -> None:
        """Append a statement (or an expression, as ``Evaluate``, or a callable wrapping the rest of the scope)."""
        if isinstance(stmt, E.PrimExpr):
            stmt = S.Evaluate(stmt)
        if not (isinstance(stmt, S.Stmt) or callable(stmt)):
            raise IRBuilderError(f"emit expects a TIR statement or expression, got {stmt!r}")
        self._seq_stack[-1].append(stmt)

    def scope_attr(self, node, attr_key: str, value) -> None:
        """An AttrStmt over the rest of the current scope."""
        if isinstance(node, str):
            node = E.StringImm(node)
        value = E.StringImm(value) if isinstance(value, str) else convert(value)
        if attr_key == "thread_extent":
            from .op import max as _max
            value = _max(1, value)
        self.emit(lambda body: S.AttrStmt(node, attr_key, value, body))

    def for_range(self, begin, end, name: str = "i", dtype: str = "int32", kind: str = "serial") -> WithScope:
        """A loop scope; ``with`` yields the loop variable."""
        if name == "i":
            name = chr(ord("i") + self.nidx) if self.nidx < 3 else f"i_{self.nidx - 3}"
            self.nidx += 1
        if kind not in _FOR_KINDS:
            raise IRBuilderError(f"for_range: unknown loop kind {kind!r}; expected one of {', '.join(_FOR_KINDS)}")
        self._seq_stack.append([])
        loop_var = E.Var(name, dtype)
        begin, end = convert(begin), convert(end)
        extent = end if isinstance(begin, E.IntImm) and begin.value == 0 else end - begin

        def _exit_cb():
            self.emit(S.For(loop_var, begin, extent, _FOR_KINDS[kind], self._pop_seq()))

        return WithScope(loop_var, _exit_cb)

    def while_loop(self, condition) -> WithScope:
        self._seq_stack.append([])

        def _exit_cb():
            self.emit(S.While(convert(condition), self._pop_seq()))

        return WithScope(None, _exit_cb)

    def if_scope(self, cond) -> WithScope:
        self._seq_stack.append([])

        def _exit_cb():
            self.emit(S.IfThenElse(convert(cond), self._pop_seq(), None))

        return WithScope(None, _exit_cb)

    def else_scope(self) -> WithScope:
        """The else branch of the if scope just closed."""
        seq = self._seq_stack[-1]
        prev = seq[-1] if seq else None
        if not isinstance(prev, S.IfThenElse) or prev.else_case is not None:
            raise IRBuilderError("else_scope can only follow an if_scope")
        seq.pop()
        self._seq_stack.append([])

        def _exit_cb():
            self.emit(S.IfThenElse(prev.condition, prev.then_case, self._pop_seq()))

        return WithScope(None, _exit_cb)

    def new_scope(self) -> WithScope:
        """A nested scope (bounds where ``let``/``allocate``/``scope_attr`` apply)."""
        self._seq_stack.append([])

        def _exit_cb():
            self.emit(self._pop_seq())

        return WithScope(None, _exit_cb)

    def let(self, var_name: str, value):
        """Bind ``value`` to a new variable over the rest of the scope; returns the variable."""
        value = convert(value)
        var = E.Var(var_name, value.dtype)
        self.emit(lambda body: S.LetStmt(var, value, body))
        return var

    def allocate(self, dtype: str, shape, name: str = "buf", scope: str = "", axis_separators=None) -> BufferVar:
        """Allocate a buffer over the rest of the scope."""
        if not isinstance(shape, (list, tuple)):
            shape = [shape]
        buf = decl_buffer(shape, dtype, name=name, scope=scope, axis_separators=axis_separators)
        extents = list(buf.shape)
        self.emit(lambda body: S.Allocate(buf.data, dtype, extents, const(1, "bool"), body))
        return BufferVar(self, buf, dtype)

    def pointer(self, content_type: str, name: str = "ptr", scope: str = "") -> BufferVar:
        """A pointer variable indexed flat (a one-dimensional buffer of unknown size)."""
        buf = decl_buffer([E.Var(name + "_n", "int32")], content_type, name=name, scope=scope)
        return BufferVar(self, buf, content_type)

    def buffer_ptr(self, buf: Buffer, shape=None) -> BufferVar:
        """Index ``buf`` (optionally as if it had ``shape``)."""
        if not isinstance(buf, Buffer):
            raise IRBuilderError(f"buffer_ptr expects a tir.Buffer, got {buf!r}")
        if shape is not None:
            buf = Buffer(buf.data, buf.dtype, list(shape), None, buf.elem_offset, buf.name, buf.data_alignment,
                         buf.offset_factor, buf.buffer_type, buf.scope())
        return BufferVar(self, buf, buf.dtype)

    def likely(self, expr):
        expr = convert(expr)
        return E.Call(expr.dtype, "tir.likely", [expr])

    def get(self):
        """The statement built."""
        seq = self._pop_seq()
        if self._seq_stack:
            raise IRBuilderError("ir_builder.get() called inside an open scope")
        return seq


def _seq_of(stmts: list):
    return stmts[0] if len(stmts) == 1 else S.SeqStmt(stmts)


def create() -> IRBuilder:
    """A new IRBuilder (``tvm.tir.ir_builder.create()``)."""
    return IRBuilder()


__all__ = ["create", "IRBuilder", "BufferVar", "WithScope", "IRBuilderError"]
