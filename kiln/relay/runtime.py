"""Runtime configuration for ``relay.build`` (TVM's ``relay.backend.Runtime``): "cpp" (kiln's runtime,
the default) or "crt" (accepted for compatibility; builds the same artifact)."""
from __future__ import annotations

from .build_option import BuildOption


class Runtime(BuildOption):
    """``Runtime("cpp")``: which runtime the built artifact is for."""

    _KIND = "runtime"
    _OPTIONS = {"cpp": {"system-lib": bool}, "crt": {"system-lib": bool}}

    def __init__(self, name: str = "cpp", options: dict | None = None):
        super().__init__(name, options)
