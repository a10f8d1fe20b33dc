"""Hand-written C kernels that follow docs/abi.md, for testing the runtime before the codegen exists."""
import numpy as np
import pytest

from kiln.target import create_c_module
from kiln.runtime.abi import C_PRELUDE

ADD_SRC = C_PRELUDE + r"""
/* C = A + B over n elements (n is an implicit shape variable, appended after the buffers) */
int32_t vadd(KilnValue* args, int32_t num_args) {
  const float* A = (const float*)args[0].v_handle;
  const float* B = (const float*)args[1].v_handle;
  float* C = (float*)args[2].v_handle;
  int64_t n = args[3].v_int64;
  if (num_args != 4) { __kiln_set_last_error("vadd: expected 4 arguments"); return -1; }
  for (int64_t i = 0; i < n; ++i) {
    C[i] = A[i] + B[i];
  }
  return 0;
}

/* Y[i, j] = alpha * X[i, j] + (double)k, X is (m, 3), Y is (m, 3); alpha float64 scalar, k int32 scalar */
int32_t axpb(KilnValue* args, int32_t num_args) {
  const double* X = (const double*)args[0].v_handle;
  double* Y = (double*)args[1].v_handle;
  double alpha = args[2].v_float64;
  int64_t k = args[3].v_int64;
  int64_t m = args[4].v_int64;
  for (int64_t i = 0; i < m * 3; ++i) {
    Y[i] = alpha * X[i] + (double)k;
  }
  return 0;
}

/* pad1: B = A with one zero appended; A is (n,), B is (n + 1,) -- a composite extent */
int32_t pad1(KilnValue* args, int32_t num_args) {
  const int32_t* A = (const int32_t*)args[0].v_handle;
  int32_t* B = (int32_t*)args[1].v_handle;
  int64_t n = args[2].v_int64;
  for (int64_t i = 0; i < n; ++i) {
    B[i] = A[i];
  }
  B[n] = 0;
  return 0;
}

/* fails on purpose when flag != 0 */
int32_t maybe_fail(KilnValue* args, int32_t num_args) {
  if (args[0].v_int64 != 0) {
    __kiln_set_last_error("maybe_fail: flag was set");
    return -1;
  }
  return 0;
}

/* counter[0] += 1 (used to count how often the timer runs a kernel) */
int32_t bump(KilnValue* args, int32_t num_args) {
  int64_t* counter = (int64_t*)args[0].v_handle;
  counter[0] += 1;
  return 0;
}
"""

ADD_FUNCS = [
    {"name": "vadd",
     "args": [{"name": "A", "kind": "buffer", "dtype": "float32", "shape": ["n"]},
              {"name": "B", "kind": "buffer", "dtype": "float32", "shape": ["n"]},
              {"name": "C", "kind": "buffer", "dtype": "float32", "shape": ["n"], "output": True}],
     "shape_vars": ["n"]},
    {"name": "axpb",
     "args": [{"name": "X", "kind": "buffer", "dtype": "float64", "shape": ["m", 3]},
              {"name": "Y", "kind": "buffer", "dtype": "float64", "shape": ["m", 3], "output": True},
              {"name": "alpha", "kind": "scalar", "dtype": "float64"},
              {"name": "k", "kind": "scalar", "dtype": "int32"}],
     "shape_vars": ["m"]},
    {"name": "pad1",
     "args": [{"name": "A", "kind": "buffer", "dtype": "int32", "shape": ["n"]},
              {"name": "B", "kind": "buffer", "dtype": "int32", "shape": [{"expr": "n + 1"}], "output": True}],
     "shape_vars": ["n"]},
    {"name": "maybe_fail", "args": [{"name": "flag", "kind": "scalar", "dtype": "int32"}], "shape_vars": []},
    {"name": "bump", "args": [{"name": "counter", "kind": "buffer", "dtype": "int64", "shape": [1]}],
     "shape_vars": []},
]


@pytest.fixture(scope="session")
def add_module():
    return create_c_module(ADD_SRC, ADD_FUNCS, entry_name="vadd", cflags=[])


@pytest.fixture
def rng():
    return np.random.default_rng(0)
