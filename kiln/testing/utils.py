"""Numeric assertions and small helpers that TVM test files call through ``tvm.testing``."""
from __future__ import annotations

import inspect
import sys

import numpy as np


def _as_numpy(x):
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        return x.numpy()
    return np.asanyarray(x)


def assert_allclose(actual, desired, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """``np.testing.assert_allclose`` that also accepts NDArrays and checks shapes first."""
    actual, desired = _as_numpy(actual), _as_numpy(desired)
    if actual.shape != desired.shape:
        raise AssertionError(f"shapes differ: actual {actual.shape}, desired {desired.shape}")
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, verbose=True)


def check_numerical_grads(function, input_values, grad_values, function_value=None, delta=1e-3,
                          atol=1e-2, rtol=0.1) -> None:
    """Compare analytic gradients with central differences of ``function``.

    ``input_values`` and ``grad_values`` are lists of arrays (or dicts by name); ``function``
    takes the inputs (positionally or by name) and returns a scalar.
    """
    if isinstance(input_values, dict):
        names = list(input_values)
        inputs = [np.asarray(input_values[n], dtype="float64") for n in names]
        grads = [np.asarray(grad_values[n]) for n in names]

        def call(vals):
            return float(np.sum(function(**dict(zip(names, vals)))))
    else:
        inputs = [np.asarray(v, dtype="float64") for v in input_values]
        grads = [np.asarray(g) for g in grad_values]

        def call(vals):
            return float(np.sum(function(*vals)))

    for i, (x, g) in enumerate(zip(inputs, grads)):
        if x.shape != g.shape:
            raise AssertionError(f"gradient {i} has shape {g.shape}, its input has shape {x.shape}")
        numeric = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            vals = [v.copy() for v in inputs]
            vals[i][idx] += delta
            up = call(vals)
            vals[i][idx] -= 2 * delta
            down = call(vals)
            numeric[idx] = (up - down) / (2 * delta)
        err = np.abs(numeric - g)
        if np.any(err > atol + rtol * np.abs(numeric)):
            worst = np.unravel_index(np.argmax(err), err.shape)
            raise AssertionError(
                f"gradient of input {i} differs from the numerical one at {worst}: analytic {g[worst]}, "
                f"numerical {numeric[worst]} (atol={atol}, rtol={rtol})")


def main() -> None:
    """Run the calling test file with pytest (``if __name__ == "__main__": tvm.testing.main()``)."""
    import pytest
    test_file = inspect.getsourcefile(sys._getframe(1))
    sys.exit(pytest.main([test_file] + sys.argv[1:]))
