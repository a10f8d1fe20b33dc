import time

import numpy as np
import pytest

import kiln
from kiln import nd
from kiln.error import KilnError
from kiln.runtime import BenchmarkResult, Module


def test_counts_and_stats(add_module):
    counter = nd.array(np.zeros(1, "int64"))
    ftimer = add_module.time_evaluator("bump", kiln.cpu(0), number=7, repeat=4)
    res = ftimer(counter)
    assert isinstance(res, BenchmarkResult)
    assert counter.numpy()[0] == 1 + 7 * 4  # one warm-up call, then number * repeat
    assert len(res.results) == 4
    assert all(r > 0 for r in res.results)
    assert res.min <= res.median <= res.max
    assert res.min <= res.mean <= res.max
    assert res.std >= 0
    text = str(res)
    assert text.startswith("Execution time summary:") and "mean (ms)" in text and "std (ms)" in text
    assert "BenchmarkResult(" in repr(res)


def test_min_repeat_ms_grows_number(add_module):
    counter = nd.array(np.zeros(1, "int64"))
    res = add_module.time_evaluator("bump", kiln.cpu(0), number=1, repeat=2, min_repeat_ms=20)(counter)
    calls = int(counter.numpy()[0]) - 1
    assert calls > 2
    # the last repeat alone lasted at least min_repeat_ms
    assert res.results[-1] * calls >= 20e-3 * 0.99


def test_preproc_and_cooldown(add_module):
    seen = []
    kiln.register_func("test.te.preproc", lambda *args: seen.append(len(args)), override=True)
    try:
        counter = nd.array(np.zeros(1, "int64"))
        start = time.perf_counter()
        add_module.time_evaluator("bump", kiln.cpu(0), number=2, repeat=3, cooldown_interval_ms=30,
                                  f_preproc="test.te.preproc")(counter)
        assert time.perf_counter() - start >= 0.085
        assert seen == [1, 1, 1]
    finally:
        kiln.remove_global_func("test.te.preproc")


def test_real_kernel_timing(add_module, rng):
    n = 1 << 16
    a = nd.array(rng.standard_normal(n).astype("float32"))
    c = nd.empty((n,))
    res = add_module.time_evaluator(add_module.entry_name, kiln.cpu(0), number=20, repeat=3)(a, a, c)
    np.testing.assert_allclose(c.numpy(), 2 * a.numpy())
    assert 0 < res.mean < 0.1


def test_failure_inside_timer(add_module):
    with pytest.raises(KilnError, match="flag was set"):
        add_module.time_evaluator("maybe_fail", kiln.cpu(0), number=3)(1)


def test_arguments_checked_once(add_module):
    with pytest.raises(kiln.error.ArgumentError):
        add_module.time_evaluator("vadd", kiln.cpu(0))(nd.empty((3,)), nd.empty((3,)), nd.empty((4,)))


class PyModule(Module):
    type_key = "test_py"

    def __init__(self):
        super().__init__()
        self.calls = 0

    def _get_local_function(self, name):
        if name == "work":
            def work(x):
                self.calls += 1
                time.sleep(0.001)
                return x
            return work
        return None


def test_python_function_timing():
    mod = PyModule()
    res = mod.time_evaluator("work", kiln.cpu(), number=3, repeat=2)(5)
    assert mod.calls == 1 + 6
    assert all(r >= 0.001 for r in res.results)


def test_bad_parameters(add_module):
    with pytest.raises(KilnError, match="number and repeat"):
        add_module.time_evaluator("bump", kiln.cpu(0), number=0)(nd.empty((1,), "int64"))
    with pytest.raises(KilnError, match="no function"):
        add_module.time_evaluator("nope", kiln.cpu(0))


def test_cache_flush_preproc(add_module):
    counter = nd.array(np.zeros(1, "int64"))
    assert kiln.get_global_func("cache_flush_cpu_non_first_arg") is not None
    res = add_module.time_evaluator("bump", kiln.cpu(0), number=3, repeat=2,
                                    f_preproc="cache_flush_cpu_non_first_arg")(counter)
    assert len(res.results) == 2 and counter.numpy()[0] == 7
    # called directly: it reads the first argument back (any dtype, empty included) and changes no argument
    flush = kiln.get_global_func("cache_flush_cpu_non_first_arg")
    first, second = nd.array(np.arange(50000, dtype="float16")), nd.array(np.ones((3, 5), "int8"))
    flush(first, second)
    flush(nd.empty((0,), "float32"), second)
    flush()
    np.testing.assert_array_equal(first.numpy(), np.arange(50000, dtype="float16"))
    np.testing.assert_array_equal(second.numpy(), np.ones((3, 5), "int8"))
