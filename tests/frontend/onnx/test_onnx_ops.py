"""ONNX importer: per-op conversions compiled with relay.build (and run on the interpreter) against ONNX Runtime,
on random inputs with odd sizes; attribute-vs-input forms checked at the opsets where ONNX changed them."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from onnx_helpers import check_against_ort, make_model, run_kiln

rng = np.random.default_rng(0)


def rand(*shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


def one_node(op, inputs: dict, out_shape, out_dtype="float32", opset=17, inits=None, n_out=1, **attrs):
    outs = {f"y{k}": (out_shape, out_dtype) for k in range(n_out)}
    names = list(inputs) + list(inits or {})
    node = helper.make_node(op, names, list(outs), **attrs)
    spec = {n: (v.shape, str(v.dtype)) for n, v in inputs.items()}
    return make_model([node], spec, outs, initializers=inits, opset=opset)


def check(op, inputs, inits=None, opset=17, n_out=1, out_dtype="float32", rtol=1e-5, atol=1e-5, out_shape=None,
          **attrs):
    m = one_node(op, inputs, out_shape, out_dtype=out_dtype, opset=opset, inits=inits, n_out=n_out, **attrs)
    return check_against_ort(m, inputs, rtol=rtol, atol=atol)


# -- convolution and matrix products -------------------------------------------------------------------------------
@pytest.mark.parametrize("attrs, xshape, wshape", [
    (dict(pads=[1, 1, 1, 1]), (1, 3, 9, 7), (5, 3, 3, 3)),
    (dict(strides=[2, 2], auto_pad="SAME_UPPER"), (2, 4, 11, 10), (6, 4, 3, 3)),
    (dict(group=3, dilations=[2, 1], pads=[2, 0, 1, 1]), (1, 6, 10, 9), (9, 2, 3, 3)),
    (dict(pads=[2, 1], strides=[2]), (2, 3, 17), (4, 3, 5)),  # 1-D
])
def test_conv(attrs, xshape, wshape):
    check("Conv", {"x": rand(*xshape)}, inits={"w": rand(*wshape), "b": rand(wshape[0])}, rtol=1e-4, atol=1e-4,
          **attrs)


@pytest.mark.parametrize("attrs, xshape, wshape", [
    (dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]), (1, 4, 5, 7), (4, 3, 3, 3)),
    (dict(strides=[2, 2], output_shape=[10, 12]), (1, 2, 5, 6), (2, 3, 3, 3)),
    (dict(strides=[3], pads=[1, 0]), (2, 3, 7), (3, 2, 4)),  # 1-D
])
def test_conv_transpose(attrs, xshape, wshape):
    check("ConvTranspose", {"x": rand(*xshape)}, inits={"w": rand(*wshape)}, rtol=1e-4, atol=1e-4, **attrs)


@pytest.mark.parametrize("ashape, bshape", [((3, 5), (5, 7)), ((2, 3, 5), (5, 4)), ((2, 1, 3, 5), (4, 5, 6)),
                                            ((5,), (3, 5, 2)), ((2, 3, 5), (5,))])
def test_matmul(ashape, bshape):
    check("MatMul", {"a": rand(*ashape), "b": rand(*bshape)}, rtol=1e-4, atol=1e-4)


def test_gemm_transposes_and_scalars():
    check("Gemm", {"a": rand(7, 3), "b": rand(5, 7), "c": rand(1, 5)}, transA=1, transB=1, alpha=0.5, beta=2.0,
          rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("eq, shapes", [("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij->ji", [(3, 4)]),
                                        ("bhqd,bhkd->bhqk", [(1, 2, 3, 5), (1, 2, 4, 5)]), ("i,i->", [(5,), (5,)]),
                                        ("...ij,...jk", [(2, 3, 4), (2, 4, 3)])])
def test_einsum(eq, shapes):
    inputs = {f"x{k}": rand(*s) for k, s in enumerate(shapes)}
    check("Einsum", inputs, equation=eq, opset=12, rtol=1e-4, atol=1e-4)


# -- pooling and normalization ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("op, attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("MaxPool", dict(kernel_shape=[3, 2], strides=[2, 2], ceil_mode=1)),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 1], pads=[1, 0, 1, 1], count_include_pad=1)),
    ("AveragePool", dict(kernel_shape=[2, 2], auto_pad="SAME_UPPER")),
    ("AveragePool", dict(kernel_shape=[3], strides=[2])),  # 1-D on a 3-D input below
])
def test_pool(op, attrs):
    shape = (2, 3, 11) if len(attrs["kernel_shape"]) == 1 else (2, 3, 11, 9)
    check(op, {"x": rand(*shape)}, **attrs)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 7, 5), (1, 4, 9)])
def test_global_pool(op, shape):
    check(op, {"x": rand(*shape)})


def test_batch_norm():
    c = 5
    inits = {"s": rand(c), "b": rand(c), "m": rand(c), "v": np.abs(rand(c)) + 0.5}
    check("BatchNormalization", {"x": rand(2, c, 3, 7)}, inits=inits, epsilon=1e-3, rtol=1e-4, atol=1e-4)


def test_instance_norm():
    check("InstanceNormalization", {"x": rand(2, 3, 5, 7)}, inits={"s": rand(3), "b": rand(3)}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_norm(axis):
    check("LayerNormalization", {"x": rand(2, 3, 7)}, inits={"s": rand(*((7,) if axis == -1 else (3, 7))),
                                                            "b": rand(*((7,) if axis == -1 else (3, 7)))},
          axis=axis, epsilon=1e-5, rtol=1e-4, atol=1e-4)


def test_group_norm_opset21():
    check("GroupNormalization", {"x": rand(2, 6, 5, 3)}, inits={"s": rand(6), "b": rand(6)}, num_groups=3,
          opset=21, out_shape=(2, 6, 5, 3), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset, axis", [(11, 1), (11, -1), (13, 1), (13, 0)])
def test_softmax_axis_semantics(op, opset, axis):
    # opset 11 flattens to 2-D at `axis`; opset 13 normalizes along `axis` only
    check(op, {"x": rand(2, 3, 5)}, opset=opset, axis=axis, rtol=1e-5, atol=1e-5)


# -- activations and elementwise -----------------------------------------------------------------------------------
@pytest.mark.parametrize("op, attrs", [("Relu", {}), ("LeakyRelu", {"alpha": 0.2}), ("Elu", {"alpha": 0.7}),
                                       ("Selu", {}), ("HardSigmoid", {}), ("HardSwish", {}), ("Softplus", {}),
                                       ("Sigmoid", {}), ("Tanh", {}), ("Erf", {}), ("Exp", {}), ("Neg", {}),
                                       ("Abs", {}), ("Reciprocal", {})])
def test_unary(op, attrs):
    check(op, {"x": rand(3, 7)}, rtol=1e-5, atol=1e-5, **attrs)


def test_gelu_opset20():
    check("Gelu", {"x": rand(4, 5)}, opset=20, rtol=1e-5, atol=1e-5)
    check("Gelu", {"x": rand(4, 5)}, opset=20, approximate="tanh", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean"])
def test_binary_broadcast(op):
    a, b = np.abs(rand(2, 3, 5)) + 0.1, rand(3, 1)
    check(op, {"a": a, "b": b}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_compare(op):
    a = rng.integers(0, 3, (4, 5)).astype("int64")
    check(op, {"a": a, "b": a.T[:1].reshape(1, 4).T.copy()}, out_dtype="bool")


def test_logic_and_where():
    c = rng.random((3, 4)) > 0.5
    d = rng.random((3, 4)) > 0.5
    check("And", {"c": c, "d": d}, out_dtype="bool")
    check("Not", {"c": c}, out_dtype="bool")
    check("Where", {"c": c, "x": rand(3, 4), "y": rand(1, 4)})


def test_clip_forms():
    x = rand(4, 6)
    check("Clip", {"x": x}, inits={"lo": np.float32(-0.5), "hi": np.float32(0.7)}, opset=11)
    check("Clip", {"x": x, "lo": np.array(-0.2, "float32")}, opset=13)  # min only, run-time
    xi = rng.integers(-10, 10, (5,)).astype("int64")
    check("Clip", {"x": xi}, inits={"lo": np.int64(-3), "hi": np.int64(4)}, out_dtype="int64", opset=13)


def test_cast():
    check("Cast", {"x": rand(3, 4) * 10}, to=7, out_dtype="int64")
    check("Cast", {"x": rng.integers(-5, 5, (6,)).astype("int32")}, to=1)


# -- shapes, indexing, joins -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_unsqueeze_axes_forms(opset):
    x = rand(3, 1, 5, 1)
    if opset < 13:
        check("Squeeze", {"x": x}, opset=opset, axes=[1, -1])
        check("Unsqueeze", {"x": x}, opset=opset, axes=[0, 5])
    else:
        check("Squeeze", {"x": x}, inits={"axes": np.array([1, -1])}, opset=opset)
        check("Unsqueeze", {"x": x}, inits={"axes": np.array([0, 5])}, opset=opset)


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_split_forms(opset):
    x = rand(2, 10)
    if opset == 11:
        check("Split", {"x": x}, opset=opset, n_out=3, axis=1, split=[2, 3, 5])
    elif opset == 13:
        check("Split", {"x": x}, inits={"s": np.array([4, 6])}, opset=opset, n_out=2, axis=-1)
    else:
        check("Split", {"x": x}, opset=opset, n_out=3, axis=1, num_outputs=3)  # 4, 4, 2


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_reduce_axes_forms(opset):
    x = rand(3, 4, 5)
    if opset == 11:
        check("ReduceSum", {"x": x}, opset=opset, axes=[0, 2], keepdims=0, rtol=1e-5)
        check("ReduceMean", {"x": x}, opset=opset, axes=[-1])
    elif opset == 13:
        check("ReduceSum", {"x": x}, inits={"axes": np.array([1])}, opset=opset, rtol=1e-5)
        check("ReduceMax", {"x": x}, opset=opset, axes=[1, 2], keepdims=0)
    else:
        for op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceL1",
                   "ReduceLogSumExp", "ReduceSumSquare"):
            check(op, {"x": x}, inits={"axes": np.array([0, -1])}, opset=opset, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_reduce(op):
    check(op, {"x": rand(3, 7, 2)}, axis=1, keepdims=0, out_dtype="int64")


def test_reshape_flatten_transpose():
    x = rand(2, 3, 4, 5)
    check("Reshape", {"x": x}, inits={"s": np.array([0, -1, 5])}, opset=13)
    check("Flatten", {"x": x}, axis=2)
    check("Transpose", {"x": x}, perm=[0, 2, 3, 1])


def test_concat_slice_gather():
    check("Concat", {"a": rand(2, 3), "b": rand(2, 5)}, axis=-1)
    x = rand(6, 7, 5)
    check("Slice", {"x": x}, inits={"st": np.array([5, 1]), "en": np.array([-100, 6]), "ax": np.array([0, 2]),
                                    "sp": np.array([-2, 2])}, opset=13)
    check("Gather", {"x": x}, inits={"i": np.array([[0, -1], [3, 2]])}, axis=1)
    check("GatherElements", {"x": x[:, :3, :2].copy(), "i": rng.integers(-3, 3, (4, 3, 2)).astype("int64")})


def test_expand_tile_pad():
    x = rand(3, 1, 4)
    check("Expand", {"x": x}, inits={"s": np.array([2, 1, 5, 1])})
    check("Tile", {"x": x}, inits={"r": np.array([1, 3, 2])})
    for mode in ("constant", "reflect", "edge"):
        check("Pad", {"x": rand(2, 5, 6)}, inits={"p": np.array([0, 1, 2, 0, 2, 1]), "v": np.float32(1.5)},
              mode=mode, opset=13)
    check("Pad", {"x": rand(4, 5)}, inits={"p": np.array([1, -1, -2, 2])}, opset=13)  # negative pads crop


def test_resize_and_cumsum():
    x = rand(1, 2, 5, 6)
    check("Resize", {"x": x}, inits={"roi": np.zeros(0, "float32"), "sc": np.array([1, 1, 2, 2], "float32")},
          mode="linear", opset=13, rtol=1e-4, atol=1e-5)
    check("Resize", {"x": x}, inits={"roi": np.zeros(0, "float32"), "sc": np.zeros(0, "float32"),
                                     "sz": np.array([1, 2, 8, 3])}, mode="nearest", opset=13)
    check("CumSum", {"x": rand(3, 6)}, inits={"a": np.array(1)}, rtol=1e-5, atol=1e-5)
    check("CumSum", {"x": rand(5, 3)}, inits={"a": np.array(0)}, exclusive=1, reverse=1, rtol=1e-5, atol=1e-5)


def test_shape_arithmetic_is_folded():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape (what exporters emit) becomes a static reshape."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"]),
             helper.make_node("Range", ["r0", "r1", "r2"], ["r"]),
             helper.make_node("ConstantOfShape", ["s"], ["z"], value=helper.make_tensor("v", 1, [1], [2.0]))]
    m = make_model(nodes, {"x": ((3, 4, 5), "float32")}, {"y": ((3, 20), "float32"), "r": ((3,), "int64"),
                                                          "z": ((3, 4, 5), "float32")},
                   initializers={"zero": np.array(0), "zero1": np.array([0]), "minus1": np.array([-1]),
                                 "r0": np.array(1), "r1": np.array(10), "r2": np.array(3)}, opset=13)
    check_against_ort(m, {"x": rand(3, 4, 5)})
    from kiln import relay
    mod, _ = relay.frontend.from_onnx(m)
    text = mod.astext()
    assert "shape_of" not in text and "dyn." not in text


def test_freeze_params_false_returns_params():
    m = one_node("Conv", {"x": rand(1, 2, 5, 5)}, None, inits={"w": rand(3, 2, 3, 3)}, pads=[1, 1, 1, 1])
    from kiln import relay
    mod, params = relay.frontend.from_onnx(m, freeze_params=False)
    assert set(params) == {"w"} and params["w"].shape == (3, 2, 3, 3)
    assert [p.name_hint for p in mod["main"].params] == ["x", "w"]
    x = rand(1, 2, 5, 5)
    out = run_kiln(m, {"x": x}, freeze_params=False)[0]
    from onnx_helpers import run_ort
    np.testing.assert_allclose(out, run_ort(m, {"x": x})[0], rtol=1e-4, atol=1e-4)
