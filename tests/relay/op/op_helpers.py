"""Helpers for the Relay op tests: build a function of typed inputs, infer, run the debug interpreter."""
import numpy as np

import kiln
from kiln import relay


def infer(expr_or_func):
    func = expr_or_func if isinstance(expr_or_func, relay.Function) else relay.Function(
        relay.analysis.free_vars(expr_or_func), expr_or_func)
    mod = relay.transform.InferType()(kiln.IRModule.from_expr(func))
    return mod["main"]


def out_type(build, *arrays):
    xs = [relay.var(f"x{i}", shape=a.shape, dtype=str(a.dtype)) for i, a in enumerate(arrays)]
    return infer(relay.Function(xs, build(*xs))).ret_type


def run(build, *arrays):
    """Evaluate ``build(*vars)`` on ``arrays`` with the debug interpreter; numpy result(s)."""
    xs = [relay.var(f"x{i}", shape=a.shape, dtype=str(a.dtype)) for i, a in enumerate(arrays)]
    body = build(*xs)
    if isinstance(body, relay.TupleWrapper):
        body = body.astuple()
    func = relay.Function(xs, body)
    res = relay.create_executor("debug", mod=kiln.IRModule.from_expr(func)).evaluate()(*arrays)
    if isinstance(res, tuple):
        return [r.numpy() for r in res]
    return res.numpy()


def rnd(*shape, dtype="float32", low=-1.0, high=1.0, seed=0):
    rng = np.random.default_rng(seed + sum(shape))
    if np.dtype(dtype).kind in "iu":
        return rng.integers(int(low), int(high), size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)
