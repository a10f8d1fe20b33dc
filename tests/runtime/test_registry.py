import numpy as np
import pytest

import kiln
from kiln.error import KilnError
from kiln.runtime import PackedFunc, get_global_func
from kiln.target import create_c_module
from kiln.runtime.abi import C_PRELUDE


@pytest.fixture
def cleanup():
    names = []
    yield names
    for n in names:
        kiln.remove_global_func(n)


def test_register_call_forms(cleanup):
    cleanup += ["test.reg.a", "test_reg_b", "test.reg.c"]

    @kiln.register_func("test.reg.a")
    def a(x, y):
        return x + y

    @kiln.register_func
    def test_reg_b(x):
        return x * 2

    assert kiln.register_func("test.reg.c", lambda: 3) is not None
    assert a(1, 2) == 3  # decorator returns the function itself
    f = kiln.get_global_func("test.reg.a")
    assert isinstance(f, PackedFunc)
    assert f(2, 3) == 5
    assert kiln.get_global_func("test_reg_b")(4) == 8
    assert kiln.get_global_func("test.reg.c")() == 3
    assert {"test.reg.a", "test_reg_b", "test.reg.c"} <= set(kiln.list_global_func_names())


def test_duplicate_and_override(cleanup):
    cleanup.append("test.reg.dup")
    kiln.register_func("test.reg.dup", lambda: 1)
    with pytest.raises(KilnError, match="already registered.*override=True"):
        kiln.register_func("test.reg.dup", lambda: 2)
    kiln.register_func("test.reg.dup", lambda: 3, override=True)
    assert kiln.get_global_func("test.reg.dup")() == 3


def test_missing_and_remove(cleanup):
    cleanup.append("test.reg.present")
    kiln.register_func("test.reg.present", lambda: 0)
    with pytest.raises(KilnError, match="cannot find global function 'test.reg.presnt'.*test.reg.present"):
        kiln.get_global_func("test.reg.presnt")
    assert kiln.get_global_func("test.reg.nothing.like.it", allow_missing=True) is None
    kiln.remove_global_func("test.reg.present")
    assert kiln.get_global_func("test.reg.present", allow_missing=True) is None
    kiln.remove_global_func("test.reg.present")  # removing twice is harmless, as in TVM


def test_bad_registration():
    with pytest.raises(KilnError, match="not callable"):
        kiln.register_func("test.reg.bad", 42)
    with pytest.raises(KilnError, match="string"):
        kiln.register_func(3, lambda: 0)


CALLBACK_SRC = C_PRELUDE + r"""
/* Calls the global function "test.cb.combine"(7, 2.5, A, "tag") and stores its float result in out[0],
   then calls "test.cb.count"() and stores its int result in out[1]. */
int32_t use_callback(KilnValue* args, int32_t num_args) {
  float* A = (float*)args[0].v_handle;
  double* out = (double*)args[1].v_handle;
  int64_t n = args[2].v_int64;
  int64_t shape[1];
  DLTensor t;
  KilnValue cargs[4];
  int32_t codes[4];
  KilnValue ret;
  int32_t ret_code = -1;
  shape[0] = n;
  t.data = A; t.device.device_type = 1; t.device.device_id = 0; t.ndim = 1;
  t.dtype.code = 2; t.dtype.bits = 32; t.dtype.lanes = 1;
  t.shape = shape; t.strides = NULL; t.byte_offset = 0;
  cargs[0].v_int64 = 7; codes[0] = KILN_ARG_INT;
  cargs[1].v_float64 = 2.5; codes[1] = KILN_ARG_FLOAT;
  cargs[2].v_handle = &t; codes[2] = KILN_ARG_DLTENSOR;
  cargs[3].v_handle = (void*)"tag"; codes[3] = KILN_ARG_STR;
  if (__kiln_call_packed == NULL) { __kiln_set_last_error("no packed-call callback installed"); return -1; }
  if (__kiln_call_packed("test.cb.combine", cargs, codes, 4, &ret, &ret_code) != 0) return -1;
  if (ret_code != KILN_ARG_FLOAT) { __kiln_set_last_error("expected a float return"); return -2; }
  out[0] = ret.v_float64;
  if (__kiln_call_packed("test.cb.count", cargs, codes, 0, &ret, &ret_code) != 0) return -1;
  if (ret_code != KILN_ARG_INT) { __kiln_set_last_error("expected an int return"); return -2; }
  out[1] = (double)ret.v_int64;
  return 0;
}
"""

CALLBACK_FUNCS = [{"name": "use_callback",
                   "args": [{"name": "A", "kind": "buffer", "dtype": "float32", "shape": ["n"]},
                            {"name": "out", "kind": "buffer", "dtype": "float64", "shape": [2]}],
                   "shape_vars": ["n"]}]


@pytest.fixture(scope="module")
def callback_module():
    return create_c_module(CALLBACK_SRC, CALLBACK_FUNCS)


def test_kernel_calls_python(callback_module, cleanup, rng):
    cleanup += ["test.cb.combine", "test.cb.count"]
    seen = {}

    @kiln.register_func("test.cb.combine")
    def combine(i, x, arr, tag):
        seen.update(i=i, x=x, tag=tag, shape=arr.shape, dtype=arr.dtype)
        total = float(arr.numpy().sum())
        arr.copyfrom(arr.numpy() * 2)  # zero-copy view: the kernel's buffer changes
        return i * x + total

    calls = []
    kiln.register_func("test.cb.count", lambda: len(calls) + 41)

    x = rng.standard_normal(13).astype("float32")
    a = kiln.nd.array(x)
    out = kiln.nd.empty((2,), "float64")
    callback_module["use_callback"](a, out)
    assert seen == {"i": 7, "x": 2.5, "tag": "tag", "shape": (13,), "dtype": "float32"}
    np.testing.assert_allclose(out.numpy()[0], 7 * 2.5 + float(x.sum()), rtol=1e-5)
    assert out.numpy()[1] == 41
    np.testing.assert_allclose(a.numpy(), x * 2, rtol=1e-6)


def test_python_exception_surfaces(callback_module, cleanup):
    cleanup += ["test.cb.combine", "test.cb.count"]

    @kiln.register_func("test.cb.combine")
    def combine(i, x, arr, tag):
        raise ValueError("boom from python 1234")

    kiln.register_func("test.cb.count", lambda: 0)
    a = kiln.nd.array(np.ones(3, "float32"))
    out = kiln.nd.empty((2,), "float64")
    with pytest.raises(KilnError, match="boom from python 1234") as info:
        callback_module["use_callback"](a, out)
    assert "test.cb.combine" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)
    # the next call works again
    kiln.register_func("test.cb.combine", lambda i, x, arr, tag: 1.0, override=True)
    callback_module["use_callback"](a, out)
    assert out.numpy()[0] == 1.0


def test_missing_global_function_from_kernel(callback_module):
    assert get_global_func("test.cb.combine", allow_missing=True) is None
    a = kiln.nd.array(np.ones(3, "float32"))
    out = kiln.nd.empty((2,), "float64")
    with pytest.raises(KilnError, match="cannot find global function 'test.cb.combine'"):
        callback_module["use_callback"](a, out)


def test_bad_return_type(callback_module, cleanup):
    cleanup += ["test.cb.combine"]
    kiln.register_func("test.cb.combine", lambda *a: object())
    a = kiln.nd.array(np.ones(3, "float32"))
    with pytest.raises(KilnError, match="returned object"):
        callback_module["use_callback"](a, kiln.nd.empty((2,), "float64"))


PARALLEL_SRC = C_PRELUDE + r"""
/* out[i] = test.par.sq(i), called from OpenMP worker threads */
int32_t par_cb(KilnValue* args, int32_t num_args) {
  double* out = (double*)args[0].v_handle;
  int64_t n = args[1].v_int64;
  int32_t failed = 0;
  #pragma omp parallel for num_threads(__kiln_num_threads > 0 ? __kiln_num_threads : 1)
  for (int64_t i = 0; i < n; ++i) {
    KilnValue a, r;
    int32_t code = KILN_ARG_INT, rc;
    a.v_int64 = i;
    if (__kiln_call_packed("test.par.sq", &a, &code, 1, &r, &rc) != 0) {
      #pragma omp atomic write
      failed = 1;
    } else {
      out[i] = r.v_float64;
    }
  }
  return failed ? -1 : 0;
}
"""


def test_callback_from_worker_threads(cleanup, monkeypatch):
    cleanup.append("test.par.sq")
    monkeypatch.setenv("KILN_NUM_THREADS", "4")
    mod = create_c_module(PARALLEL_SRC, [{"name": "par_cb", "args": [
        {"name": "out", "kind": "buffer", "dtype": "float64", "shape": ["n"]}], "shape_vars": ["n"]}])
    kiln.register_func("test.par.sq", lambda i: float(i * i))
    out = kiln.nd.empty((101,), "float64")
    mod["par_cb"](out)
    np.testing.assert_array_equal(out.numpy(), np.arange(101.0) ** 2)

    def bad(i):
        if i == 57:
            raise RuntimeError("bad index 57")
        return 0.0

    kiln.register_func("test.par.sq", bad, override=True)
    with pytest.raises(KilnError, match="bad index 57"):
        mod["par_cb"](out)
