"""``check_grad``: analytical gradients (``relay.transform.gradient``) against central finite differences."""
from __future__ import annotations

import numpy as np

from ...error import ArgumentError
from ...ir.type import TensorType
from ... import relay
from ..transform.gradient import gradient


def _np_randn_from_type(ty, scale: float = 1.0, mean: float = 0.0) -> np.ndarray:
    """Normal random values of a tensor type's shape and dtype (TVM's ``_np_randn_from_type``)."""
    if not isinstance(ty, TensorType):
        raise ArgumentError(f"check_grad: cannot make random inputs of type {ty}; pass inputs=")
    res = mean + scale * np.random.randn(*(int(d) for d in ty.shape))
    return np.asarray(res).astype(ty.dtype)


def _numpy(v) -> np.ndarray:
    return v.numpy() if hasattr(v, "numpy") else np.asarray(v)


def check_grad(func, inputs=None, test_inputs=None, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
               scale=None, mean: float = 0, mode: str = "higher_order", target_devices=None,
               executor_kind: str = "debug") -> None:
    """Check ``func``'s gradient against two-sided finite differences (TVM's ``relay.testing.check_grad``).

    Inputs default to normal random values (``scale`` defaults to ``10 * eps``) of each parameter's type; use
    float64 parameters where the ops allow, as the differences lose precision in float32. ``test_inputs``
    (a subset of ``inputs``, by identity) limits which gradients are compared. With ``executor_kind="debug"``
    the interpreter ignores the target, so it runs once rather than once per target.
    """
    from ...testing import enabled_targets
    from . import run_infer_type

    fwd_func = run_infer_type(func)
    bwd_func = run_infer_type(gradient(fwd_func, mode=mode)) if mode == "higher_order" else \
        _first_order(fwd_func)
    if scale is None:
        scale = 10 * eps
    if inputs is None:
        inputs = [_np_randn_from_type(p.checked_type, scale=scale, mean=mean) for p in fwd_func.params]
    if test_inputs is None:
        test_inputs = inputs
    if target_devices is None:
        target_devices = enabled_targets()
        if executor_kind == "debug":
            target_devices = target_devices[:1]
    for target, dev in target_devices:
        bwd = relay.create_executor(executor_kind, device=dev, target=target).evaluate(bwd_func)
        fwd = relay.create_executor(executor_kind, device=dev, target=target).evaluate(fwd_func)
        _, grads = bwd(*inputs)
        grads = [_numpy(g).astype("float64") for g in grads]
        if inputs is not test_inputs:
            picked = []
            for t in test_inputs:
                for i, g in enumerate(grads):
                    if inputs[i] is t:
                        picked.append(g)
                        break
            grads = picked
        assert grads, "You must test at least one gradient."
        approx_grads = []
        for x in test_inputs:
            approx = np.zeros(x.shape)
            for i in np.ndindex(*x.shape):
                x_i = x[i]
                x[i] = x_i + eps
                plus = _numpy(fwd(*inputs)).astype("float64")
                x[i] = x_i - eps
                minus = _numpy(fwd(*inputs)).astype("float64")
                x[i] = x_i
                approx[i] = np.sum((plus - minus) / (2 * eps))
            approx_grads.append(approx)
        for grad, approx in zip(grads, approx_grads):
            np.testing.assert_allclose(grad, approx, atol=atol, rtol=rtol)


def _first_order(fwd_func):
    import warnings
    from . import run_infer_type
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return run_infer_type(gradient(fwd_func, mode="first_order"))
