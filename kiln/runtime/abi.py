"""The compiled-code ABI, runtime side: the C prelude every generated file starts with, and ctypes
mirrors of its types (see docs/abi.md).

Library-level symbols in the prelude are weak, so several translation units can each include it and
still link into one shared library; the loader fills ``__kiln_call_packed`` and ``__kiln_num_threads``.
"""
from __future__ import annotations

import ctypes

# TVM's argument type codes for packed calls.
kInt = 0
kUInt = 1
kFloat = 2
kHandle = 3
kNull = 4
kDLTensorHandle = 7
kStr = 11
kNDArrayHandle = 13

TYPE_CODE_NAMES = {
    kInt: "int", kUInt: "uint", kFloat: "float", kHandle: "handle", kNull: "null",
    kDLTensorHandle: "DLTensor*", kStr: "str", kNDArrayHandle: "NDArray",
}

C_PRELUDE = r"""/* ---- kiln ABI prelude (kiln.runtime.abi.C_PRELUDE; see docs/abi.md) ---- */
#if defined(__STRICT_ANSI__) && !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#endif
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <stdlib.h>
#include <math.h>
#include <time.h>

#ifndef KILN_PRELUDE_DEFINED
#define KILN_PRELUDE_DEFINED 1

typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
} KilnValue;

typedef struct {
  int32_t device_type;
  int32_t device_id;
} DLDevice;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

/* Packed-call type codes (TVM's numbering). */
#define KILN_ARG_INT 0
#define KILN_ARG_UINT 1
#define KILN_ARG_FLOAT 2
#define KILN_ARG_HANDLE 3
#define KILN_ARG_NULL 4
#define KILN_ARG_DLTENSOR 7
#define KILN_ARG_STR 11
#define KILN_ARG_NDARRAY 13

typedef int32_t (*KilnKernelFn)(KilnValue* args, int32_t num_args);
typedef int32_t (*KilnCallPackedFn)(const char* name, KilnValue* args, int32_t* type_codes,
                                    int32_t num_args, KilnValue* ret, int32_t* ret_code);

/* Set by the loader: a callback into the global function registry (tir.call_packed). */
__attribute__((weak)) KilnCallPackedFn __kiln_call_packed = 0;

/* Set by the loader: thread count for parallel loops (0 = OpenMP default). */
__attribute__((weak)) int32_t __kiln_num_threads = 0;

/* Error message of the last failed call, per thread. */
__attribute__((weak)) __thread char __kiln_last_error[1024];

__attribute__((weak)) void __kiln_set_last_error(const char* msg) {
  size_t n = msg ? strlen(msg) : 0;
  if (n > sizeof(__kiln_last_error) - 1) n = sizeof(__kiln_last_error) - 1;
  if (n) memcpy(__kiln_last_error, msg, n);
  __kiln_last_error[n] = '\0';
}

__attribute__((weak)) const char* __kiln_get_last_error(void) {
  return __kiln_last_error;
}

/* Run fn `number` times; mean seconds per call, or -1.0 if a call failed. */
__attribute__((weak)) double __kiln_time_call(KilnKernelFn fn, KilnValue* args, int32_t num_args,
                                              int32_t number) {
  struct timespec t0, t1;
  int32_t i;
  if (number <= 0) return -1.0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (i = 0; i < number; ++i) {
    if (fn(args, num_args) != 0) return -1.0;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec)) / (double)number;
}

#endif /* KILN_PRELUDE_DEFINED */
/* ---- end of kiln ABI prelude ---- */
"""


class KilnValue(ctypes.Union):
    """Mirror of the C ``KilnValue`` union: one argument or return value slot."""

    _fields_ = [("v_int64", ctypes.c_int64), ("v_float64", ctypes.c_double), ("v_handle", ctypes.c_void_p)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


KERNEL_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_int64), ctypes.c_int32)

CALL_PACKED_FN = ctypes.CFUNCTYPE(
    ctypes.c_int32,
    ctypes.c_char_p,
    ctypes.POINTER(KilnValue),
    ctypes.POINTER(ctypes.c_int32),
    ctypes.c_int32,
    ctypes.POINTER(KilnValue),
    ctypes.POINTER(ctypes.c_int32),
)
