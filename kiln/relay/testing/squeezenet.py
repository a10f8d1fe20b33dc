"""SqueezeNet 1.0 / 1.1 (TVM's ``relay.testing.squeezenet``)."""
from __future__ import annotations

from ...error import KilnError
from .. import op as _op
from ..analysis import free_vars
from ..expr import Function, var
from . import layers
from .init import create_workload


def _make_fire_conv(net, channels, kernel_size, padding=0, prefix=""):
    net = layers.conv2d(net, channels=channels, kernel_size=(kernel_size, kernel_size), padding=(padding, padding),
                        name=f"{prefix}_conv")
    net = layers.bias_add(net, f"{prefix}_conv_bias")
    return _op.nn.relu(net)


def _make_fire(net, squeeze_channels, expand1x1_channels, expand3x3_channels, prefix):
    net = _make_fire_conv(net, squeeze_channels, 1, 0, f"{prefix}_input")
    left = _make_fire_conv(net, expand1x1_channels, 1, 0, f"{prefix}_left")
    right = _make_fire_conv(net, expand3x3_channels, 3, 1, f"{prefix}_right")
    return _op.concatenate((left, right), axis=1)


def get_net(batch_size, image_shape, num_classes, version, dtype) -> Function:
    if version not in ("1.0", "1.1"):
        raise KilnError(f"squeezenet: version must be '1.0' or '1.1', got {version!r}")
    data = var("data", shape=(batch_size,) + tuple(image_shape), dtype=dtype)
    pool = lambda x: _op.nn.max_pool2d(x, pool_size=(3, 3), strides=(2, 2))  # noqa: E731
    if version == "1.0":
        net = layers.conv2d(data, channels=96, kernel_size=(7, 7), strides=(2, 2), padding=(3, 3), name="conv1")
        net = pool(_op.nn.relu(layers.bias_add(net, "conv1_bias")))
        net = _make_fire(net, 16, 64, 64, "fire1")
        net = _make_fire(net, 16, 64, 64, "fire2")
        net = _make_fire(net, 32, 128, 128, "fire3")
        net = pool(net)
        net = _make_fire(net, 32, 128, 128, "fire4")
        net = _make_fire(net, 48, 192, 192, "fire5")
        net = _make_fire(net, 48, 192, 192, "fire6")
        net = _make_fire(net, 64, 256, 256, "fire7")
        net = pool(net)
        net = _make_fire(net, 64, 256, 256, "fire8")
    else:
        net = layers.conv2d(data, channels=64, kernel_size=(3, 3), strides=(2, 2), padding=(1, 1), name="conv1")
        net = pool(_op.nn.relu(layers.bias_add(net, "conv1_bias")))
        net = _make_fire(net, 16, 64, 64, "fire1")
        net = _make_fire(net, 16, 64, 64, "fire2")
        net = pool(net)
        net = _make_fire(net, 32, 128, 128, "fire3")
        net = _make_fire(net, 32, 128, 128, "fire4")
        net = pool(net)
        net = _make_fire(net, 48, 192, 192, "fire5")
        net = _make_fire(net, 48, 192, 192, "fire6")
        net = _make_fire(net, 64, 256, 256, "fire7")
        net = _make_fire(net, 64, 256, 256, "fire8")
    net = _op.nn.dropout(net, rate=0.5)
    net = layers.conv2d(net, channels=num_classes, kernel_size=(1, 1), name="conv_final")
    net = _op.nn.relu(layers.bias_add(net, "conv_final_bias"))
    net = _op.nn.batch_flatten(_op.nn.global_avg_pool2d(net))
    out = _op.nn.softmax(net)
    return Function(free_vars(out), out)


def get_workload(batch_size=1, num_classes=1000, version="1.0", image_shape=(3, 224, 224), dtype="float32"):
    """``(mod, params)`` of SqueezeNet."""
    return create_workload(get_net(batch_size, image_shape, num_classes, version, dtype))
