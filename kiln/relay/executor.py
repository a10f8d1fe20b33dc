"""Executor configuration for ``relay.build`` (TVM's ``relay.backend.Executor``): which executor the
build targets ("graph" or "aot") and its options."""
from __future__ import annotations

from ..error import KilnError

_OPTIONS = {
    "graph": {"link-params": bool},
    "aot": {"link-params": bool, "unpacked-api": bool, "interface-api": str, "workspace-byte-alignment": int,
            "constant-byte-alignment": int},
}


class Executor:
    """``Executor("graph")`` / ``Executor("aot", {"interface-api": "c"})``: a build option, not a runner."""

    def __init__(self, name: str = "graph", options: dict | None = None):
        if name not in _OPTIONS:
            raise KilnError(f"unknown executor {name!r}; known executors: {sorted(_OPTIONS)}")
        options = dict(options or {})
        for key, value in options.items():
            kind = _OPTIONS[name].get(key)
            if kind is None:
                raise KilnError(f"executor {name!r} has no option {key!r}; its options: {sorted(_OPTIONS[name])}")
            if not isinstance(value, kind):
                raise KilnError(f"executor option {key!r} must be a {kind.__name__}, got {value!r}")
        self.name = name
        self.options = options

    def __getitem__(self, key):
        return self.options[key]

    def get(self, key, default=None):
        return self.options.get(key, default)

    def __contains__(self, key) -> bool:
        return key in self.options

    @staticmethod
    def list_registered_options(name: str) -> dict:
        if name not in _OPTIONS:
            raise KilnError(f"unknown executor {name!r}; known executors: {sorted(_OPTIONS)}")
        return {k: v.__name__ for k, v in _OPTIONS[name].items()}

    def __repr__(self) -> str:
        return f"Executor({self.name!r}, {self.options})" if self.options else f"Executor({self.name!r})"

    __str__ = __repr__
