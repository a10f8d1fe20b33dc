"""The C prelude: compiles cleanly in several C modes and links from several translation units."""
import ctypes

import numpy as np
import pytest

import kiln
from kiln import nd
from kiln.runtime import abi, load_module
from kiln.runtime.library import Library
from kiln.runtime.module import CModule
from kiln.target import compiler


@pytest.mark.parametrize("std", ["-std=c99", "-std=c11", "-std=gnu17"])
def test_prelude_is_warning_free(std):
    compiler.compile_object(abi.C_PRELUDE + "int32_t f(KilnValue* a, int32_t n) { (void)a; return n; }\n",
                            [std, "-Wall", "-Wextra", "-Werror", "-pedantic"])


def test_struct_mirrors():
    assert ctypes.sizeof(abi.KilnValue) == 8
    assert ctypes.sizeof(abi.DLDevice) == 8
    assert ctypes.sizeof(abi.DLDataType) == 4
    assert ctypes.sizeof(abi.DLTensor) == 48
    assert (abi.kInt, abi.kUInt, abi.kFloat, abi.kHandle, abi.kNull, abi.kDLTensorHandle, abi.kStr,
            abi.kNDArrayHandle) == (0, 1, 2, 3, 4, 7, 11, 13)


TU1 = abi.C_PRELUDE + r"""
int32_t scale_tu1(KilnValue* args, int32_t num_args) {
  float* A = (float*)args[0].v_handle;
  double s = args[1].v_float64;
  int64_t n = args[2].v_int64;
  for (int64_t i = 0; i < n; ++i) A[i] = (float)(A[i] * s);
  if (__kiln_call_packed == NULL) { __kiln_set_last_error("tu1: no callback"); return -1; }
  return 0;
}
"""
TU2 = abi.C_PRELUDE + r"""
int32_t fail_tu2(KilnValue* args, int32_t num_args) {
  __kiln_set_last_error("tu2 failed on purpose");
  return 1;
}
"""
FUNCS = [{"name": "scale_tu1", "args": [{"name": "A", "kind": "buffer", "dtype": "float32", "shape": ["n"]},
                                         {"name": "s", "kind": "scalar", "dtype": "float64"}],
          "shape_vars": ["n"]},
         {"name": "fail_tu2", "args": []}]


def test_two_translation_units(tmp_path, rng):
    objs = [compiler.compile_object(TU1), compiler.compile_object(TU2)]
    mod = CModule(Library(compiler.link_cached(objs), verify=False), FUNCS, objects=objs)
    x = rng.standard_normal(11).astype("float32")
    a = nd.array(x)
    mod["scale_tu1"](a, 3.0)
    np.testing.assert_allclose(a.numpy(), x * 3, rtol=1e-6)
    with pytest.raises(kiln.KilnError, match="tu2 failed on purpose"):
        mod["fail_tu2"]()
    path = str(tmp_path / "two.so")
    mod.export_library(path)
    loaded = load_module(path)
    loaded["scale_tu1"](a, 0.5)
    np.testing.assert_allclose(a.numpy(), x * 1.5, rtol=1e-6)


def test_bind(add_module, rng):
    x = rng.standard_normal(9).astype("float32")
    a, c = nd.array(x), nd.empty((9,))
    run = add_module["vadd"].bind(a, a, c)
    run()
    np.testing.assert_allclose(c.numpy(), 2 * x, rtol=1e-6)
    assert add_module["vadd"].address == add_module["vadd"].address != 0
    with pytest.raises(kiln.error.ArgumentError):
        add_module["vadd"].bind(a, a)
    fail = add_module["maybe_fail"].bind(1)
    with pytest.raises(kiln.KilnError, match="flag was set"):
        fail()
