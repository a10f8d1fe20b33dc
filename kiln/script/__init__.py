"""TVMScript entry points under TVM's names (``tvm.script``): ``from kiln.script import tir as T`` and
``from kiln.script import ir as I`` import everywhere, so test files that use them at top level load.

Parsing TVMScript (``@T.prim_func`` / ``@I.ir_module`` bodies) is not supported yet: the decorators raise
NotImplementedError pointing at the TE / TIR builders. The type and buffer helpers that annotations evaluate
at definition time (``T.handle``, ``T.int32``, ``T.Buffer(...)``) are real and build kiln TIR objects.
"""
from __future__ import annotations

from . import ir, tir
from .tir import TVMSCRIPT_UNSUPPORTED

__all__ = ["ir", "tir", "from_source"]


def from_source(source, *args, **kwargs):
    """Parse TVMScript text (TVM's ``tvm.script.from_source``): not supported yet."""
    raise NotImplementedError(TVMSCRIPT_UNSUPPORTED.format(what="tvm.script.from_source"))
