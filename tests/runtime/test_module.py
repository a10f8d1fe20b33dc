import numpy as np
import pytest

import kiln
from kiln import nd
from kiln.error import ArgumentError, KilnError
from kiln.runtime import Module
from kiln.target import create_c_module
from kiln.runtime.abi import C_PRELUDE

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("n", [1, 7, 64, 1001])
def test_vadd(add_module, rng, n):
    x = rng.standard_normal(n).astype("float32")
    y = rng.standard_normal(n).astype("float32")
    a, b, c = nd.array(x), nd.array(y), nd.empty((n,))
    add_module["vadd"](a, b, c)
    np.testing.assert_allclose(c.numpy(), x + y, rtol=1e-6)
    add_module(a, b, c)  # entry function
    np.testing.assert_allclose(c.numpy(), x + y, rtol=1e-6)


def test_scalars(add_module, rng):
    x = rng.standard_normal((5, 3))
    y = nd.empty((5, 3), "float64")
    add_module["axpb"](nd.array(x), y, 0.5, 3)
    np.testing.assert_allclose(y.numpy(), 0.5 * x + 3)
    add_module["axpb"](nd.array(x), y, 2, np.int32(-1))  # an int is a fine float
    np.testing.assert_allclose(y.numpy(), 2 * x - 1)


def test_composite_extent(add_module, rng):
    x = rng.integers(-50, 50, 9).astype("int32")
    b = nd.empty((10,), "int32")
    add_module["pad1"](nd.array(x), b)
    np.testing.assert_array_equal(b.numpy(), np.concatenate([x, [0]]))
    with pytest.raises(ArgumentError, match=r"argument 1 \(B\).*n \+ 1.*\(10,\).*\(9,\)"):
        add_module["pad1"](nd.array(x), nd.empty((9,), "int32"))


def test_argument_count(add_module):
    a = nd.empty((3,))
    with pytest.raises(ArgumentError, match=r"vadd: expected 3 arguments \(A: NDArray\[float32, \(n,\)\].*got 2"):
        add_module["vadd"](a, a)


def test_argument_dtype(add_module):
    a = nd.empty((3,))
    with pytest.raises(ArgumentError, match=r"argument 1 \(B\): expected dtype float32, got float64"):
        add_module["vadd"](a, nd.empty((3,), "float64"), a)


def test_argument_shape(add_module):
    a = nd.empty((3,))
    with pytest.raises(ArgumentError, match=r"argument 2 \(C\).*n=3, got \(4,\)"):
        add_module["vadd"](a, a, nd.empty((4,)))
    with pytest.raises(ArgumentError, match=r"argument 0 \(A\): expected a 1-d array"):
        add_module["vadd"](nd.empty((3, 1)), a, a)
    x = nd.empty((4, 3), "float64")
    with pytest.raises(ArgumentError, match=r"argument 1 \(Y\).*axis 1 must be 3"):
        add_module["axpb"](x, nd.empty((4, 2), "float64"), 1.0, 1)


def test_argument_not_ndarray(add_module):
    a = nd.empty((3,))
    with pytest.raises(ArgumentError, match=r"argument 0 \(A\).*numpy array.*kiln.nd.array"):
        add_module["vadd"](np.zeros(3, "float32"), a, a)
    with pytest.raises(ArgumentError, match=r"argument 2 \(C\).*got list"):
        add_module["vadd"](a, a, [0, 0, 0])


def test_argument_non_contiguous(add_module):
    t = torch.zeros(6, dtype=torch.float32)[::2]
    view = nd.from_dlpack(t)
    a = nd.empty((3,))
    with pytest.raises(ArgumentError, match=r"argument 1 \(B\).*C-contiguous"):
        add_module["vadd"](a, view, a)


def test_zero_copy_torch_output(add_module, rng):
    x = torch.from_numpy(rng.standard_normal(17).astype("float32"))
    out = torch.zeros(17)
    add_module["vadd"](nd.from_dlpack(x), nd.from_dlpack(x), nd.from_dlpack(out))
    np.testing.assert_allclose(out.numpy(), 2 * x.numpy(), rtol=1e-6)


def test_scalar_kinds(add_module):
    x = nd.empty((2, 3), "float64")
    with pytest.raises(ArgumentError, match=r"argument 3 \(k\): expected an integer \(int32\), got float"):
        add_module["axpb"](x, x, 1.0, 2.5)
    with pytest.raises(ArgumentError, match=r"argument 2 \(alpha\): expected a float64 scalar, got str"):
        add_module["axpb"](x, x, "1", 2)
    with pytest.raises(ArgumentError, match="does not fit in int32"):
        add_module["axpb"](x, x, 1.0, 2 ** 40)


def test_kernel_failure_message(add_module):
    add_module["maybe_fail"](0)
    with pytest.raises(KilnError, match="maybe_fail: flag was set"):
        add_module["maybe_fail"](1)


def test_module_api(add_module):
    assert add_module.type_key == "llvm"
    assert add_module.entry_name == "vadd"
    assert "int32_t vadd(" in add_module.get_source()
    assert "vadd" in add_module and "nope" not in add_module
    with pytest.raises(AttributeError, match="no function 'nope'.*vadd"):
        add_module.get_function("nope")
    parent = Module()
    parent.import_module(add_module)
    assert parent.imported_modules == [add_module]
    assert parent.get_function("vadd", query_imports=True) is add_module["vadd"]
    with pytest.raises(KilnError):
        parent.get_function("vadd")
    with pytest.raises(KilnError, match="cycle"):
        add_module.import_module(parent)


def test_save(add_module, tmp_path):
    add_module.save(str(tmp_path / "k.c"))
    assert (tmp_path / "k.c").read_text() == add_module.get_source()
    add_module.save(str(tmp_path / "k.o"))
    assert (tmp_path / "k.o").read_bytes()[:4] == b"\x7fELF"
    with pytest.raises(KilnError, match="cannot be saved"):
        add_module.save(str(tmp_path / "k.bin"))


def test_bad_metadata():
    with pytest.raises(KilnError, match="never appear alone"):
        create_c_module(C_PRELUDE + "int32_t f(KilnValue* a, int32_t n) { return 0; }\n",
                        [{"name": "f", "args": [{"name": "A", "kind": "buffer", "dtype": "float32",
                                                 "shape": [{"expr": "n * 2"}]}], "shape_vars": ["n"]}])
    with pytest.raises(KilnError, match="only \\+ - \\* // % min max"):
        create_c_module(C_PRELUDE + "int32_t f(KilnValue* a, int32_t n) { return 0; }\n",
                        [{"name": "f", "args": [{"name": "A", "kind": "buffer", "dtype": "float32",
                                                 "shape": ["n", {"expr": "n ** 2"}]}], "shape_vars": ["n"]}])
    with pytest.raises(KilnError, match="no symbol 'g'"):
        create_c_module(C_PRELUDE + "int32_t f(KilnValue* a, int32_t n) { return 0; }\n",
                        [{"name": "g", "args": [], "shape_vars": []}])


def test_scalar_shape_variable_is_checked():
    src = C_PRELUDE + r"""
int32_t fill(KilnValue* args, int32_t num_args) {
  float* A = (float*)args[0].v_handle;
  int64_t n = args[1].v_int64;
  for (int64_t i = 0; i < n; ++i) A[i] = (float)i;
  return 0;
}
"""
    mod = create_c_module(src, [{"name": "fill", "args": [
        {"name": "A", "kind": "buffer", "dtype": "float32", "shape": ["n"]},
        {"name": "n", "kind": "scalar", "dtype": "int32"}], "shape_vars": []}])
    a = nd.empty((5,))
    mod["fill"](a, 5)
    np.testing.assert_array_equal(a.numpy(), np.arange(5))
    with pytest.raises(ArgumentError, match=r"argument 0 \(A\).*n=6, got \(5,\)"):
        mod["fill"](a, 6)  # would write out of bounds


def test_enabled():
    assert kiln.runtime.enabled("cpu")
    assert kiln.runtime.enabled("llvm")
    assert kiln.runtime.enabled("c")
    assert not kiln.runtime.enabled("cuda")


@pytest.mark.parametrize("env, expected", [({"KILN_NUM_THREADS": "3"}, 3), ({"TVM_NUM_THREADS": "2"}, 2)])
def test_num_threads_set_by_loader(monkeypatch, env, expected):
    src = C_PRELUDE + r"""
int32_t read_threads(KilnValue* args, int32_t num_args) {
  int32_t* out = (int32_t*)args[0].v_handle;
  out[0] = __kiln_num_threads;
  return 0;
}
"""
    for var in ("KILN_NUM_THREADS", "TVM_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    funcs = [{"name": "read_threads", "args": [{"name": "out", "kind": "buffer", "dtype": "int32", "shape": [1]}]}]
    out = nd.empty((1,), "int32")
    create_c_module(src, funcs)["read_threads"](out)
    assert out.numpy()[0] == expected
    monkeypatch.delenv("KILN_NUM_THREADS", raising=False)
    monkeypatch.delenv("TVM_NUM_THREADS", raising=False)
    import os

    create_c_module(src, funcs)["read_threads"](out)
    assert out.numpy()[0] == len(os.sched_getaffinity(0))
