"""InferType fills in unannotated weights through each op's FInferArgTypes hook (as TVM scripts expect)."""
import pytest

import kiln
from kiln import relay
from kiln.error import TypeInferenceError


def _infer(func):
    return relay.transform.InferType()(kiln.IRModule.from_expr(func))["main"]


def test_conv_bias_dense_weights_are_inferred():
    x = relay.var("x", shape=(1, 3, 16, 16))
    w, b, dw = relay.var("w"), relay.var("b"), relay.var("dw")
    y = relay.nn.bias_add(relay.nn.conv2d(x, w, channels=8, kernel_size=(3, 3), padding=(1, 1)), b)
    z = relay.nn.dense(relay.nn.batch_flatten(y), dw, units=10)
    f = _infer(relay.Function([x, w, b, dw], z))
    shapes = [tuple(int(d) for d in p.type_annotation.shape) for p in f.params]
    assert shapes == [(1, 3, 16, 16), (8, 3, 3, 3), (8,), (10, 8 * 16 * 16)]
    assert tuple(int(d) for d in f.ret_type.shape) == (1, 10)


def test_weight_without_channels_still_needs_annotation():
    x = relay.var("x", shape=(1, 3, 8, 8))
    w = relay.var("w")
    f = relay.Function([x, w], relay.nn.conv2d(x, w))  # no channels / kernel_size: nothing to infer from
    with pytest.raises(TypeInferenceError, match="nn.conv2d"):
        _infer(f)
