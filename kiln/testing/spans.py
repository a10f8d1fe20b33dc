"""``enable_span_filling`` / ``disable_span_filling`` (TVM's ``tvm.testing``): a PassContext that sets
``relay.frontend.fill_span``, keeping the current context's other settings.

Spans never take part in structural equality, so a module imported with and without span filling compares
equal, which is what the TVM-era frontend tests assert.
"""
from __future__ import annotations
from ..transform import PassContext


def _with_fill_span(value: bool):
    cur = PassContext.current()
    config = dict(cur.config) if cur is not None and cur.config else {}
    config["relay.frontend.fill_span"] = value
    return PassContext(opt_level=cur.opt_level if cur is not None else 2,
                       required_pass=list(cur.required_pass) if cur is not None else None,
                       disabled_pass=list(cur.disabled_pass) if cur is not None else None,
                       config=config)


def enable_span_filling():
    """A PassContext (use in ``with``) under which frontends record source spans."""
    return _with_fill_span(True)


def disable_span_filling():
    """A PassContext (use in ``with``) under which frontends leave spans empty."""
    return _with_fill_span(False)
