"""Issue 15 (robustd): logical and bitwise ops on operands of the wrong dtype. They used to type-check
(the result typed as the input) and then fail at load (a bool kernel against a float32 graph tensor) or
in the C compiler (``bitwise_not`` of a float). As TVM (whose TIR refuses non-bool operands of logical
ops and float operands of bitwise ops when the op is lowered), kiln refuses them, at InferType, with the
op's name and the expected dtype. The accepted dtypes still build and match numpy."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay, te, topi
from kiln.contrib import graph_executor
from kiln.error import DataTypeError, TypeInferenceError

LOGICAL = ["logical_and", "logical_or", "logical_xor", "logical_not"]
BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "bitwise_not"]
UNARY = {"logical_not", "bitwise_not"}
NUMPY = {"logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
         "logical_not": np.logical_not, "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
         "bitwise_xor": np.bitwise_xor, "left_shift": np.left_shift, "right_shift": np.right_shift,
         "bitwise_not": np.invert}


def _module(name, dtype, shape=(7,)):
    xs = [relay.var(n, shape=shape, dtype=dtype) for n in ("x", "y")[: 1 if name in UNARY else 2]]
    return tvm.IRModule.from_expr(relay.Function(xs, getattr(relay, name)(*xs))), xs


@pytest.mark.parametrize("name", LOGICAL)
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8"])
def test_logical_ops_refuse_non_bool_at_infer_type(name, dtype):
    mod, _ = _module(name, dtype)
    with pytest.raises(TypeInferenceError, match=rf"{name}.*needs bool operands, got {dtype}"):
        relay.transform.InferType()(mod)


@pytest.mark.parametrize("name", BITWISE)
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_bitwise_ops_refuse_float_at_infer_type(name, dtype):
    mod, _ = _module(name, dtype)
    with pytest.raises(TypeInferenceError, match=rf"{name}.*needs integer \(or bool\) operands, got {dtype}"):
        relay.transform.InferType()(mod)


def test_refused_before_build_and_constant_folding():
    mod, _ = _module("logical_and", "float32")
    with pytest.raises(TypeInferenceError, match="logical_and"):
        with tvm.transform.PassContext(opt_level=3):
            relay.build(mod, target="llvm")
    folded = relay.Function([], relay.logical_or(relay.const(np.float32(1.0)), relay.const(np.float32(0.0))))
    with pytest.raises(TypeInferenceError, match="logical_or"):
        relay.transform.FoldConstant()(tvm.IRModule.from_expr(folded))


def test_topi_bitwise_not_of_float_is_a_dtype_error():
    with pytest.raises(DataTypeError, match="bitwise_not needs an integer operand, got float32"):
        topi.bitwise_not(te.placeholder((4,), name="A"))


@pytest.mark.parametrize("name,dtype", [(n, "bool") for n in LOGICAL + BITWISE]
                         + [(n, d) for n in BITWISE for d in ("int32", "uint8", "int64")])
def test_accepted_dtypes_build_and_match_numpy(name, dtype):
    mod, xs = _module(name, dtype, shape=(13,))
    rng = np.random.default_rng(7)
    if dtype == "bool":
        data = [rng.integers(0, 2, 13).astype(bool) for _ in xs]
    else:
        data = [rng.integers(0, 100, 13).astype(dtype) for _ in xs]
        if name in ("left_shift", "right_shift"):
            data[1] = rng.integers(0, 5, 13).astype(dtype)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    for v, d in zip(xs, data):
        m.set_input(v.name_hint, d)
    m.run()
    out = m.get_output(0).numpy()
    ref = NUMPY[name](*data)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, ref.astype(dtype))
