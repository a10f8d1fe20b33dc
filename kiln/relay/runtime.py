"""Runtime configuration for ``relay.build`` (TVM's ``relay.backend.Runtime``): "cpp" (kiln's runtime,
the default) or "crt" (accepted for compatibility; builds the same artifact)."""
from __future__ import annotations

from ..error import KilnError

_OPTIONS = {"cpp": {"system-lib": bool}, "crt": {"system-lib": bool}}


class Runtime:
    """``Runtime("cpp")``: which runtime the built artifact is for."""

    def __init__(self, name: str = "cpp", options: dict | None = None):
        if name not in _OPTIONS:
            raise KilnError(f"unknown runtime {name!r}; known runtimes: {sorted(_OPTIONS)}")
        options = dict(options or {})
        for key, value in options.items():
            kind = _OPTIONS[name].get(key)
            if kind is None:
                raise KilnError(f"runtime {name!r} has no option {key!r}; its options: {sorted(_OPTIONS[name])}")
            if not isinstance(value, kind):
                raise KilnError(f"runtime option {key!r} must be a {kind.__name__}, got {value!r}")
        self.name = name
        self.options = options

    def __getitem__(self, key):
        return self.options[key]

    def get(self, key, default=None):
        return self.options.get(key, default)

    @staticmethod
    def list_registered_options(name: str) -> dict:
        if name not in _OPTIONS:
            raise KilnError(f"unknown runtime {name!r}; known runtimes: {sorted(_OPTIONS)}")
        return {k: v.__name__ for k, v in _OPTIONS[name].items()}

    def __repr__(self) -> str:
        return f"Runtime({self.name!r}, {self.options})" if self.options else f"Runtime({self.name!r})"

    __str__ = __repr__
