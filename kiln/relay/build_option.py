"""The shared shape of ``relay.build``'s option objects (``Executor``, ``Runtime``): a name chosen from
a fixed table and options validated against that name's typed option table."""
from __future__ import annotations

from ..error import KilnError


class BuildOption:
    """Base of ``Executor`` / ``Runtime``: subclasses set ``_KIND`` ("executor") and ``_OPTIONS``."""

    _KIND = "option"
    _OPTIONS: dict = {}

    def __init__(self, name: str, options: dict | None = None):
        self._check_name(name)
        options = dict(options or {})
        table = self._OPTIONS[name]
        for key, value in options.items():
            kind = table.get(key)
            if kind is None:
                raise KilnError(f"{self._KIND} {name!r} has no option {key!r}; its options: {sorted(table)}")
            if not isinstance(value, kind):
                raise KilnError(f"{self._KIND} option {key!r} must be a {kind.__name__}, got {value!r}")
        self.name = name
        self.options = options

    @classmethod
    def _check_name(cls, name: str) -> None:
        if name not in cls._OPTIONS:
            raise KilnError(f"unknown {cls._KIND} {name!r}; known {cls._KIND}s: {sorted(cls._OPTIONS)}")

    def __getitem__(self, key):
        return self.options[key]

    def get(self, key, default=None):
        return self.options.get(key, default)

    def __contains__(self, key) -> bool:
        return key in self.options

    @classmethod
    def list_registered_options(cls, name: str) -> dict:
        cls._check_name(name)
        return {k: v.__name__ for k, v in cls._OPTIONS[name].items()}

    def __repr__(self) -> str:
        cls = type(self).__name__
        return f"{cls}({self.name!r}, {self.options})" if self.options else f"{cls}({self.name!r})"

    __str__ = __repr__
