"""Process-wide AutoTVM switches (TVM's ``autotvm.env``): whether a tuning run is in progress, and
whether fallback warnings are silenced."""
from __future__ import annotations


class AutotvmGlobalScope:
    """Global flags read by templates and dispatch contexts."""

    current: "AutotvmGlobalScope | None" = None

    def __init__(self):
        self._old = AutotvmGlobalScope.current
        AutotvmGlobalScope.current = self
        self.in_tuning = False
        self.silent = False

    def deep_copy(self, global_scope: "AutotvmGlobalScope") -> None:
        """Copy the flags of another scope into this one (used in worker processes)."""
        self.in_tuning = global_scope.in_tuning
        self.silent = global_scope.silent

    def __getstate__(self):
        return {"in_tuning": self.in_tuning, "silent": self.silent}

    def __setstate__(self, state):
        self._old = None
        self.in_tuning = state["in_tuning"]
        self.silent = state["silent"]


GLOBAL_SCOPE = AutotvmGlobalScope()


def reset_global_scope(global_scope: AutotvmGlobalScope) -> None:
    """Worker-process initializer: make the child's flags match the parent's."""
    GLOBAL_SCOPE.deep_copy(global_scope)
