"""MobileNet v1 (TVM's ``relay.testing.mobilenet``)."""
from __future__ import annotations

from .. import op as _op
from ..analysis import free_vars
from ..expr import Function, var
from . import layers
from .init import create_workload


def conv_block(data, name, channels, kernel_size=(3, 3), strides=(1, 1), padding=(1, 1), epsilon=1e-5,
               layout="NCHW"):
    conv = layers.conv2d(data, channels=channels, kernel_size=kernel_size, strides=strides, padding=padding,
                         data_layout=layout, kernel_layout=layers.conv_kernel_layout(layout), name=name + "_conv")
    bn = layers.batch_norm_infer(conv, epsilon=epsilon, axis=layout.index("C"), name=name + "_bn")
    return _op.nn.relu(bn)


def separable_conv_block(data, name, depthwise_channels, pointwise_channels, kernel_size=(3, 3), downsample=False,
                         padding=(1, 1), epsilon=1e-5, layout="NCHW", dtype="float32"):
    strides = (2, 2) if downsample else (1, 1)
    wshape = (depthwise_channels, 1) + tuple(kernel_size) if layout == "NCHW" else \
        tuple(kernel_size) + (depthwise_channels, 1)
    weight = var(name + "_weight", shape=wshape, dtype=dtype)
    conv1 = layers.conv2d(data, weight=weight, channels=depthwise_channels, groups=depthwise_channels,
                          kernel_size=kernel_size, strides=strides, padding=padding, data_layout=layout,
                          kernel_layout=layers.conv_kernel_layout(layout, True), name=name + "_depthwise_conv1")
    act1 = _op.nn.relu(layers.batch_norm_infer(conv1, epsilon=epsilon, axis=layout.index("C"), name=name + "_bn1"))
    conv2 = layers.conv2d(act1, channels=pointwise_channels, kernel_size=(1, 1), strides=(1, 1), padding=(0, 0),
                          data_layout=layout, kernel_layout=layers.conv_kernel_layout(layout), name=name + "_conv2")
    return _op.nn.relu(layers.batch_norm_infer(conv2, epsilon=epsilon, axis=layout.index("C"), name=name + "_bn2"))


def mobile_net(num_classes=1000, data_shape=(1, 3, 224, 224), dtype="float32", alpha=1.0, is_shallow=False,
               layout="NCHW") -> Function:
    data = var("data", shape=data_shape, dtype=dtype)
    a = alpha
    body = conv_block(data, "conv_block_1", int(32 * a), strides=(2, 2), layout=layout)
    plan = [(32, 64, False), (64, 128, True), (128, 128, False), (128, 256, True), (256, 256, False),
            (256, 512, True)]
    if is_shallow:
        plan += [(512, 1024, True), (1024, 1024, True)]
    else:
        plan += [(512, 512, False)] * 5 + [(512, 1024, True), (1024, 1024, False)]
    for k, (dw, pw, down) in enumerate(plan, start=1):
        body = separable_conv_block(body, f"separable_conv_block_{k}", int(dw * a), int(pw * a), downsample=down,
                                    layout=layout, dtype=dtype)
    pool = _op.nn.global_avg_pool2d(body, layout=layout)
    flat = _op.nn.batch_flatten(pool)
    k = layers.shape_of(flat)[1]
    fc = _op.nn.dense(flat, var("fc_weight", shape=(num_classes, k), dtype=dtype), units=num_classes)
    fc = _op.nn.bias_add(fc, var("fc_bias", shape=(num_classes,), dtype=dtype))
    out = _op.nn.softmax(fc)
    return Function(free_vars(out), out)


def get_workload(batch_size=1, num_classes=1000, image_shape=(3, 224, 224), dtype="float32", layout="NCHW"):
    """``(mod, params)`` of MobileNet (image_shape is CHW for NCHW, HWC for NHWC)."""
    data_shape = tuple([batch_size] + list(image_shape))
    return create_workload(mobile_net(num_classes, data_shape, dtype, 1.0, False, layout))
