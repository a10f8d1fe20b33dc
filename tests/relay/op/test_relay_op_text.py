"""Every op call prints to text and parses back to a structurally equal program (attrs included)."""
import numpy as np
import pytest

import kiln
from kiln import relay


def v(name, shape, dtype="float32"):
    return relay.var(name, shape=shape, dtype=dtype)


x4 = v("x", (1, 4, 6, 6))
w4 = v("w", (8, 4, 3, 3))
x2 = v("a", (3, 4))
i2 = v("i", (2, 2), "int32")

CASES = {
    "conv2d": lambda: relay.nn.conv2d(x4, w4, strides=(2, 1), padding=(1, 0, 2, 1), dilation=2, channels=8,
                                      kernel_size=3, out_dtype="float32"),
    "conv2d_transpose": lambda: relay.nn.conv2d_transpose(x4, v("wt", (4, 2, 3, 3)), strides=2, padding=1,
                                                          output_padding=1),
    "pools": lambda: relay.Tuple([relay.nn.max_pool2d(x4, 3, 2, padding=1, ceil_mode=True),
                                  relay.nn.avg_pool2d(x4, 2, count_include_pad=True),
                                  relay.nn.adaptive_avg_pool2d(x4, (2, 3)), relay.nn.global_max_pool2d(x4)]),
    "norms": lambda: relay.nn.batch_norm(x4, v("g", (4,)), v("b", (4,)), v("m", (4,)), v("s", (4,)),
                                         epsilon=1e-3, scale=False).astuple(),
    "pad": lambda: relay.nn.pad(x4, ((0, 0), (0, 0), (1, 2), (3, 0)), 0.5),
    "upsampling": lambda: relay.nn.upsampling(x4, 2.0, 1.5, method="bilinear", align_corners=True),
    "resize": lambda: relay.image.resize2d(x4, (3, 9), roi=(0.1, 0.0, 0.9, 1.0), method="cubic",
                                           coordinate_transformation_mode="align_corners", cubic_alpha=-0.75),
    "softmax": lambda: relay.nn.log_softmax(relay.nn.leaky_relu(x2, 0.2), axis=0),
    "dense": lambda: relay.nn.bias_add(relay.nn.dense(x2, v("d", (5, 4)), units=5), v("db", (5,)), axis=-1),
    "matmuls": lambda: relay.nn.batch_matmul(v("p", (2, 3, 4)), v("q", (2, 5, 4)), transpose_b=True),
    "reshape": lambda: relay.reshape(relay.transpose(x4, (0, 2, 3, 1)), (0, -1, -3)),
    "slicing": lambda: relay.strided_slice(x4, [0, 1], [1, -1], [1, 2], axes=[0, 1]),
    "split": lambda: relay.split(x2, [1, 3], axis=1).astuple(),
    "take": lambda: relay.take(x2, i2, axis=1, mode="wrap"),
    "creation": lambda: relay.Tuple([relay.arange(relay.const(0.5), relay.const(3.0), relay.const(0.5)),
                                     relay.full(relay.const(1.0), (2, 2), "float32"), relay.zeros((3,), "int8")]),
    "reduce": lambda: relay.Tuple([relay.sum(x4, axis=(1, 2), keepdims=True), relay.argmax(x4, axis=[1]),
                                   relay.std(x4, axis=1, unbiased=True)]),
    "layout": lambda: relay.layout_transform(x4, "NCHW", "NCHW2c"),
    "misc": lambda: relay.Tuple([relay.clip(x2, -1.5, 2), relay.cast(x2, "float16"), relay.where(
        relay.greater(x2, relay.const(0.0)), x2, relay.negative(x2)), relay.tile(x2, (2, 1)),
        relay.repeat(x2, 2, 1), relay.expand_dims(x2, 1, 2), relay.squeeze(relay.expand_dims(x2, 0), [0])]),
    "more": lambda: relay.Tuple([relay.topk(x2, 2, is_ascend=True).astuple(), relay.cumsum(x2, 1, exclusive=True),
                                 relay.one_hot(i2, relay.const(1.0), relay.const(0.0), 3, 1, "float32"),
                                 relay.shape_of(x2, "int64"), relay.nn.mirror_pad(x2, ((1, 1), (0, 2)))]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_print_parse_round_trip(name):
    body = CASES[name]()
    func = relay.Function(relay.analysis.free_vars(body), body)
    mod = relay.transform.InferType()(kiln.IRModule.from_expr(func))
    text = mod.astext(show_meta_data=False)
    parsed = relay.transform.InferType()(kiln.parser.parse(text))
    kiln.ir.assert_structural_equal(mod["main"], parsed["main"])
    assert parsed["main"].ret_type == mod["main"].ret_type
