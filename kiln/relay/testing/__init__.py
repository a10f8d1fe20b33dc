"""Model zoo and helpers for tests (TVM's ``relay.testing``).

``resnet.get_workload(num_layers=18, batch_size=1)`` and friends return ``(mod, params)`` with
deterministic random weights; ``run_infer_type`` / ``run_opt_pass`` run passes on an expression.
"""
from __future__ import annotations

import numpy as np

from ...ir.module import IRModule
from ..expr import Function
from . import init, layers, mlp, resnet, mobilenet, vgg, squeezenet, dcgan  # noqa: F401
from .init import create_workload, Xavier, Initializer  # noqa: F401
from .temp_op_attr import TempOpAttr  # noqa: F401
from .check_grad import check_grad, _np_randn_from_type  # noqa: F401
from ... import transform as _transform
from ..transform import InferType
from ...runtime import ndarray as nd
from ..expr_functor import post_order_visit


def run_opt_pass(expr, opt_pass, import_prelude: bool = False):
    """Run ``opt_pass`` (a Pass or a list of passes) on ``expr``; returns main (or the body of a non-function)."""
    if import_prelude:
        raise NotImplementedError("run_opt_pass(import_prelude=True): kiln has no Relay prelude")
    mod = IRModule.from_expr(expr)
    if isinstance(opt_pass, (list, tuple)):
        opt_pass = _transform.Sequential(list(opt_pass))
    mod = opt_pass(mod)
    entry = mod["main"]
    return entry if isinstance(expr, Function) else entry.body


def run_infer_type(expr):
    """``expr`` with types inferred (``checked_type`` set everywhere)."""
    return run_opt_pass(expr, InferType())


def rand(dtype: str, *shape):
    """A random NDArray of ``shape`` and ``dtype`` (uniform in [0, 1) for floats)."""
    if np.dtype(dtype).kind in "iu":
        return nd.array(np.random.randint(0, 10, size=shape).astype(dtype))
    return nd.array(np.random.rand(*shape).astype(dtype))


def count(expr, pred) -> int:
    """How many nodes of ``expr`` satisfy ``pred``."""
    hits = []
    post_order_visit(expr, lambda e: hits.append(1) if pred(e) else None)
    return len(hits)


__all__ = ["check_grad", "run_opt_pass", "run_infer_type", "rand", "count", "create_workload", "Xavier", "Initializer",
           "TempOpAttr", "init", "layers", "mlp", "resnet", "mobilenet", "vgg", "squeezenet", "dcgan"]
