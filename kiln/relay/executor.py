"""Executor configuration for ``relay.build`` (TVM's ``relay.backend.Executor``): which executor the
build targets ("graph" or "aot") and its options."""
from __future__ import annotations

from .build_option import BuildOption


class Executor(BuildOption):
    """``Executor("graph")`` / ``Executor("aot", {"interface-api": "c"})``: a build option, not a runner."""

    _KIND = "executor"
    _OPTIONS = {
        "graph": {"link-params": bool},
        "aot": {"link-params": bool, "unpacked-api": bool, "interface-api": str, "workspace-byte-alignment": int,
                "constant-byte-alignment": int},
    }

    def __init__(self, name: str = "graph", options: dict | None = None):
        super().__init__(name, options)
