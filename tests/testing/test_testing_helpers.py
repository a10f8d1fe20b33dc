"""kiln.testing: assert_allclose, targets, parameter/parameters/fixture, markers, the pytest plugin."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
import kiln.testing as kt
from kiln.testing import targets as ktargets

ROOT = os.path.dirname(os.path.dirname(kiln.__file__))


def test_assert_allclose_accepts_ndarray_and_checks_shape():
    a = np.arange(6, dtype="float32").reshape(2, 3)
    kt.assert_allclose(a, a + 1e-9)
    nd = kiln.nd.array(a)
    kt.assert_allclose(nd, a)
    with pytest.raises(AssertionError, match="shapes differ"):
        kt.assert_allclose(a, a.reshape(3, 2))
    with pytest.raises(AssertionError):
        kt.assert_allclose(a, a + 1e-3)
    kt.assert_allclose(a, a + 1e-3, rtol=1e-2, atol=1e-2)


def test_check_numerical_grads():
    x = np.array([1.0, -2.0, 0.5])
    kt.check_numerical_grads(lambda v: np.sum(v ** 2), [x], [2 * x])
    with pytest.raises(AssertionError, match="differs"):
        kt.check_numerical_grads(lambda v: np.sum(v ** 2), [x], [3 * x])


def test_enabled_targets_reflect_compiler(monkeypatch):
    has_cc = ktargets._have_c_compiler()
    kinds = [t for t, _ in kt.enabled_targets()]
    assert ("llvm" in kinds) == has_cc
    assert "cuda" not in kinds or kiln.cuda(0).exist
    for _, dev in kt.enabled_targets():
        assert isinstance(dev, kiln.Device)
    assert kt.device_enabled("llvm -mcpu=core-avx2") == has_cc
    assert not kt.device_enabled("cuda") or kiln.cuda(0).exist
    monkeypatch.setenv("TVM_TEST_TARGETS", "cuda")
    assert not kt.device_enabled("llvm")


def test_target_marks_give_reasons():
    marks = kt.target_marks("cuda")
    if not kiln.cuda(0).exist:
        skip = [m for m in marks if m.name == "skip"]
        assert skip and "CUDA GPU" in skip[0].kwargs["reason"]
    assert any(m.name == "gpu" for m in marks)
    bogus = [m for m in kt.target_marks("hexagon") if m.name == "skip"]
    assert "no backend" in bogus[0].kwargs["reason"]


def test_features():
    assert kt.requires_llvm.run_time_check() == ktargets._have_c_compiler()
    assert kt.requires_cudnn.run_time_check() is False
    assert kt.requires_package("numpy").run_time_check()
    missing = kt.requires_package("no_such_package_kiln")
    assert not missing.run_time_check()
    skip = [m for m in missing.marks() if m.name == "skipif"][0]
    assert "no_such_package_kiln" in skip.kwargs["reason"]


@kt.parametrize_targets("llvm", "cuda")
def test_parametrize_targets_explicit(target, dev):
    assert kiln.device(target.split()[0]) == dev
    assert target in ("llvm", "cuda")
    assert dev.exist


@kt.parametrize_targets
def test_parametrize_targets_bare(target):
    assert target in kt.DEFAULT_TEST_TARGETS


def test_plain_target_fixture_from_plugin(target, dev):
    assert dev == kiln.device(target)


@kt.uses_gpu
def test_uses_gpu_still_runs_on_cpu():
    assert True


@kt.requires_cuda
def test_requires_cuda_skips_without_gpu():
    assert kiln.cuda(0).exist


size = kt.parameter(1, 3, 5)
shape_a, shape_b = kt.parameters((2, 3), (4, 5))


def test_parameter(size):
    assert size in (1, 3, 5)


def test_parameters_vary_together(shape_a, shape_b):
    assert (shape_a, shape_b) in ((2, 3), (4, 5))


@kt.fixture(cache_return_value=True)
def expensive(size):
    return [size]


def test_cached_fixture(expensive, size):
    expensive.append("mutated")  # callers get copies
    assert expensive[0] == size


def test_parameter_sets_and_fixture_cache_in_one_fresh_pytest_run(tmp_path):
    """How often a parametrized test ran and a cached fixture was computed can only be counted within one
    process: under pytest-xdist this module's tests are spread over several, so the counting runs in a fresh,
    single-process pytest."""
    body = textwrap.dedent('''
        import kiln.testing as kt

        size = kt.parameter(1, 3, 5)
        shape_a, shape_b = kt.parameters((2, 3), (4, 5))
        _seen_pairs, _calls = [], []

        def test_parameters_vary_together(shape_a, shape_b):
            _seen_pairs.append((shape_a, shape_b))

        @kt.fixture(cache_return_value=True)
        def expensive(size):
            _calls.append(size)
            return [size]

        def test_cached_fixture(expensive, size):
            expensive.append("mutated")  # callers get copies
            assert expensive == [size, "mutated"]

        def test_cached_fixture_again(expensive, size):
            assert expensive == [size]

        def test_zz_counts():
            assert sorted(_seen_pairs) == [(2, 3), (4, 5)]  # two runs, not four
            assert sorted(_calls) == [1, 3, 5]  # once per parameter value
    ''')
    (tmp_path / "test_counts.py").write_text(body)
    env = dict(os.environ, PYTHONPATH=ROOT)
    res = subprocess.run([sys.executable, "-m", "pytest", "-p", "kiln.testing.plugin", "-p", "no:cacheprovider",
                          "-p", "no:xdist", "-q", str(tmp_path / "test_counts.py")], capture_output=True, text=True,
                         env=env, cwd=tmp_path)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "9 passed" in out, out


def test_plugin_in_a_fresh_pytest_run(tmp_path):
    body = textwrap.dedent('''
        import kiln.testing as kt

        @kt.known_failing_targets("llvm")
        def test_fails_on_llvm(target):
            assert target != "llvm"

        @kt.exclude_targets("cuda")
        def test_no_cuda(target, dev):
            assert target != "cuda"
    ''')
    (tmp_path / "test_sample.py").write_text(body)
    env = dict(os.environ, PYTHONPATH=ROOT, TVM_TEST_TARGETS="llvm;cuda")
    res = subprocess.run([sys.executable, "-m", "pytest", "-p", "kiln.testing.plugin", "-q", "-rs",
                          str(tmp_path / "test_sample.py")], capture_output=True, text=True, env=env,
                         cwd=tmp_path)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    if ktargets._have_c_compiler():
        assert "1 xfailed" in out
    assert "excluded on target 'cuda'" in out or "needs a CUDA GPU" in out
