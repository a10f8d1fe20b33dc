"""ScopeBuilder: write nested ``let`` / ``if`` Relay programs imperatively (TVM's ``relay.ScopeBuilder``).

Each scope collects ``let`` bindings and one returned value; ``get()`` folds them into nested ``Let``s.
``if_scope``/``else_scope`` open child scopes whose results become the branches of an ``If``, which is the
value of the enclosing scope unless it calls ``ret`` itself.
"""
from __future__ import annotations

from ..error import RelayError
from ..ir.type import IncompleteType
from .expr import If, Let, Var, var


class WithScope:
    """A context manager that yields ``enter_value`` and runs ``exit_cb`` on a normal exit."""

    def __init__(self, enter_value, exit_cb):
        self._enter_value = enter_value
        self._exit_cb = exit_cb

    def __enter__(self):
        return self._enter_value

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self._exit_cb()
        return False


class _PendingIf:
    """An ``if_scope`` that has closed but still waits for its ``else_scope``."""

    def __init__(self, cond, true_branch):
        self.cond = cond
        self.true_branch = true_branch


def _make_lets(bindings: list, ret_value):
    body = ret_value
    for v, value in reversed(bindings):
        body = Let(v, value, body)
    return body


class ScopeBuilder:
    """Builds ``let x = ...; if (c) {...} else {...}`` programs.

    >>> sb = ScopeBuilder()
    >>> x = sb.let("x", relay.const(1))
    >>> with sb.if_scope(cond):
    ...     sb.ret(x)
    >>> with sb.else_scope():
    ...     sb.ret(relay.const(2))
    >>> body = sb.get()
    """

    def __init__(self):
        self._bindings: list = [[]]
        self._ret_values: list = [None]

    def _enter_scope(self) -> None:
        self._bindings.append([])
        self._ret_values.append(None)

    def _exit_scope(self):
        bindings = self._bindings.pop()
        ret_value = self._ret_values.pop()
        return bindings, ret_value

    def let(self, var_spec, value) -> Var:
        """Bind ``value`` to a new variable: ``var_spec`` is a name, a ``(name, type)`` pair or a Var."""
        if isinstance(var_spec, (tuple, list)):
            if len(var_spec) > 2:
                raise RelayError("ScopeBuilder.let: the variable is a Var, a name, or a (name, type) pair")
            var_spec = var(*var_spec)
        elif isinstance(var_spec, str):
            var_spec = var(var_spec)
        elif not isinstance(var_spec, Var):
            raise RelayError(f"ScopeBuilder.let: the variable is a Var, a name, or a (name, type) pair, "
                             f"got {type(var_spec).__name__}")
        self._bindings[-1].append((var_spec, value))
        return var_spec

    def if_scope(self, cond) -> WithScope:
        """Open the true branch of an ``If`` on ``cond``; an ``else_scope`` must follow."""
        self._enter_scope()

        def _on_exit():
            bindings, ret_value = self._exit_scope()
            if self._ret_values[-1] is not None:
                raise RelayError("ScopeBuilder: this scope already returned a value before the if_scope")
            if ret_value is None:
                raise RelayError("ScopeBuilder: the if_scope did not call ret()")
            self._ret_values[-1] = _PendingIf(cond, _make_lets(bindings, ret_value))

        return WithScope(None, _on_exit)

    def else_scope(self) -> WithScope:
        """Open the false branch of the ``If`` the preceding ``if_scope`` started."""
        pending = self._ret_values[-1]
        if not isinstance(pending, _PendingIf):
            raise RelayError("ScopeBuilder: else_scope must follow an if_scope")
        self._ret_values[-1] = None
        self._enter_scope()

        def _on_exit():
            bindings, ret_value = self._exit_scope()
            if ret_value is None:
                raise RelayError("ScopeBuilder: the else_scope did not call ret()")
            self._ret_values[-1] = If(pending.cond, pending.true_branch, _make_lets(bindings, ret_value))

        return WithScope(None, _on_exit)

    def type_of(self, expr):
        """The type of ``expr``: a Var's annotation, else an IncompleteType that type inference fills in."""
        if isinstance(expr, Var) and expr.type_annotation is not None:
            return expr.type_annotation
        ity = IncompleteType()
        self.let(var("unify", ity), expr)
        return ity

    def ret(self, value) -> None:
        """Set the value of the current scope (once)."""
        if self._ret_values[-1] is not None:
            raise RelayError("ScopeBuilder: ret() was already called in this scope")
        self._ret_values[-1] = value

    def get(self):
        """The expression of the outermost scope: its lets around its returned value."""
        if len(self._bindings) != 1:
            raise RelayError("ScopeBuilder.get: an if_scope/else_scope is still open")
        bindings = self._bindings.pop()
        ret_value = self._ret_values.pop()
        self._bindings.append([])
        self._ret_values.append(None)
        if ret_value is None:
            raise RelayError("ScopeBuilder.get: ret() was not called in this scope")
        if isinstance(ret_value, _PendingIf):
            raise RelayError("ScopeBuilder.get: an if_scope has no else_scope (an If needs both branches)")
        return _make_lets(bindings, ret_value)


__all__ = ["ScopeBuilder", "WithScope"]
