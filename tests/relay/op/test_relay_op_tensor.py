import math

import numpy as np
import pytest
import torch

from kiln import relay
from kiln.error import TypeInferenceError
from kiln.ir import Op, OpPattern, TensorType

from op_helpers import out_type, rnd, run

UNARY = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "tanh": np.tanh, "abs": np.abs, "negative": np.negative,
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "sign": np.sign, "copy": lambda x: x,
    "erf": lambda x: torch.erf(torch.tensor(x)).numpy(),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    x = rnd(3, 5, low=0.1, high=3.0) if name in ("log", "sqrt", "rsqrt") else rnd(3, 5, low=-3, high=3)
    got = run(getattr(relay, name), x)
    np.testing.assert_allclose(got, UNARY[name](x), rtol=1e-5, atol=1e-6)
    assert got.dtype == np.float32
    assert Op.get(name).get_attr("TOpPattern") == OpPattern.ELEMWISE


BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
          "maximum": np.maximum, "minimum": np.minimum, "power": np.power,
          "floor_divide": lambda a, b: np.floor(a / b), "floor_mod": np.mod}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcast(name):
    a = rnd(4, 1, 3, low=0.5, high=2)
    b = rnd(5, 1, low=0.5, high=2, seed=1)
    got = run(getattr(relay, name), a, b)
    assert got.shape == (4, 5, 3)
    np.testing.assert_allclose(got, BINARY[name](a, b), rtol=1e-5, atol=1e-6)
    assert Op.get(name).get_attr("TOpPattern") == OpPattern.BROADCAST


def test_integer_division_truncates_like_tvm():
    a = np.array([7, -7, 7, -7], "int32")
    b = np.array([2, 2, -2, -2], "int32")
    np.testing.assert_array_equal(run(relay.divide, a, b), [3, -3, -3, 3])
    np.testing.assert_array_equal(run(relay.floor_divide, a, b), [3, -4, -4, 3])
    np.testing.assert_array_equal(run(relay.floor_mod, a, b), np.mod(a, b))


@pytest.mark.parametrize("name,fn", [("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less),
                                     ("less_equal", np.less_equal), ("greater", np.greater),
                                     ("greater_equal", np.greater_equal)])
def test_comparisons(name, fn):
    a = rnd(3, 4, dtype="int32", low=0, high=3)
    b = rnd(4, dtype="int32", low=0, high=3, seed=2)
    got = run(getattr(relay, name), a, b)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, fn(a, b))


def test_logical_where_clip_cast():
    a = rnd(6, low=-1, high=1) > 0
    b = rnd(6, low=-1, high=1, seed=3) > 0
    np.testing.assert_array_equal(run(relay.logical_and, a, b), a & b)
    np.testing.assert_array_equal(run(relay.logical_or, a, b), a | b)
    np.testing.assert_array_equal(run(relay.logical_not, a), ~a)
    x, y = rnd(2, 3), rnd(2, 3, seed=5)
    c = x > 0
    np.testing.assert_array_equal(run(relay.where, c, x, y), np.where(c, x, y))
    np.testing.assert_allclose(run(lambda v: relay.clip(v, -0.2, 0.3), x), np.clip(x, -0.2, 0.3))
    got = run(lambda v: relay.cast(v, "int32"), x * 10)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, (x * 10).astype("int32"))


def test_creation_ops():
    x = rnd(2, 3)
    np.testing.assert_array_equal(run(lambda: relay.zeros((2, 3), "float32")), np.zeros((2, 3)))
    np.testing.assert_array_equal(run(lambda: relay.ones((4,), "int32")), np.ones(4, "int32"))
    got = run(lambda: relay.full(relay.const(2.5), (2, 2), "float32"))
    np.testing.assert_array_equal(got, np.full((2, 2), 2.5, "float32"))
    np.testing.assert_array_equal(run(relay.zeros_like, x), np.zeros_like(x))
    np.testing.assert_array_equal(run(relay.ones_like, x), np.ones_like(x))
    np.testing.assert_array_equal(run(lambda v: relay.full_like(v, relay.const(7.0)), x), np.full_like(x, 7.0))


def test_python_operators_build_op_calls():
    x = relay.var("x", shape=(2,))
    y = x * 2.0 + relay.const(1.0)
    assert y.op.name == "add" and y.args[0].op.name == "multiply"
    np.testing.assert_allclose(run(lambda v: -(v * relay.const(2.0)) / relay.const(4.0), np.ones(2, "float32")),
                               [-0.5, -0.5])


def test_broadcast_type_errors_name_shapes():
    with pytest.raises(TypeInferenceError, match=r"\(3, 4\).*\(5,\).*not broadcastable"):
        out_type(relay.add, np.zeros((3, 4), "float32"), np.zeros((5,), "float32"))
    with pytest.raises(TypeInferenceError, match="add.*float32 and int32"):
        out_type(relay.add, np.zeros((3,), "float32"), np.zeros((3,), "int32"))
    with pytest.raises(TypeInferenceError, match="x and y must have the same dtype"):
        out_type(relay.where, np.zeros(3, bool), np.zeros(3, "float32"), np.zeros(3, "int32"))


def test_relations_give_types():
    assert out_type(relay.less, np.zeros((2, 1), "float32"), np.zeros((3,), "float32")) == TensorType((2, 3), "bool")
    assert out_type(relay.isnan, np.zeros((2,), "float32")) == TensorType((2,), "bool")
    assert out_type(lambda v: relay.cast(v, "float16"), np.zeros((2,), "int8")) == TensorType((2,), "float16")


def test_constructors_attrs():
    c = relay.clip(relay.var("x", shape=(1,)), 0, 6)
    assert c.attrs.type_key == "relay.attrs.ClipAttrs" and c.attrs.a_min == 0.0 and c.attrs.a_max == 6.0
    assert relay.cast(relay.var("x"), "int8").attrs.dtype == "int8"
    z = relay.zeros([2, 3], "float16")
    assert z.attrs.type_key == "relay.attrs.InitOpAttrs" and z.attrs.shape == (2, 3) and z.attrs.dtype == "float16"


def test_gelu_from_erf():
    x = rnd(3, 7, low=-3, high=3)

    def gelu(v):
        return v * (relay.erf(v * relay.const(1 / math.sqrt(2))) * relay.const(0.5) + relay.const(0.5))
    np.testing.assert_allclose(run(gelu, x), torch.nn.functional.gelu(torch.tensor(x)).numpy(), rtol=1e-5,
                               atol=1e-6)
