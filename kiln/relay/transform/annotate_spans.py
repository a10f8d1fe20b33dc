"""AnnotateSpans (TVM's ``relay.transform.AnnotateSpans``): print the module and parse it back, so every
expression carries a Span into that text. Diagnostics on programmatically built modules can then point at
a line of the printed program."""
from __future__ import annotations

from ...transform import ModulePass


def _annotate(mod, ctx):
    from ...parser import parse
    text = mod.astext(show_meta_data=True)
    return parse(text, "GeneratedSource")


def AnnotateSpans() -> ModulePass:  # noqa: N802 (TVM's name)
    """A module pass giving every expression a span in the module's printed text."""
    return ModulePass(_annotate, opt_level=0, name="AnnotateSpans")
