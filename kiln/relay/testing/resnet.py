"""ResNet v2 (pre-activation) as in TVM's ``relay.testing.resnet``: 18/34/50/101/152 layers, CIFAR variants."""
from __future__ import annotations

from ...error import KilnError
from .. import op as _op
from ..analysis import free_vars
from ..expr import Function, var
from . import layers
from .init import create_workload


def residual_unit(data, num_filter, stride, dim_match, name, bottle_neck=True, data_layout="NCHW",
                  kernel_layout="OIHW"):
    """One pre-activation residual unit (basic or bottleneck)."""
    bn_axis = data_layout.index("C")
    conv_kw = dict(data_layout=data_layout, kernel_layout=kernel_layout)
    bn1 = layers.batch_norm_infer(data, epsilon=2e-5, axis=bn_axis, name=name + "_bn1")
    act1 = _op.nn.relu(bn1)
    if bottle_neck:
        c = int(num_filter * 0.25)
        conv1 = layers.conv2d(act1, channels=c, kernel_size=(1, 1), strides=stride, padding=(0, 0),
                              name=name + "_conv1", **conv_kw)
        act2 = _op.nn.relu(layers.batch_norm_infer(conv1, epsilon=2e-5, axis=bn_axis, name=name + "_bn2"))
        conv2 = layers.conv2d(act2, channels=c, kernel_size=(3, 3), strides=(1, 1), padding=(1, 1),
                              name=name + "_conv2", **conv_kw)
        act3 = _op.nn.relu(layers.batch_norm_infer(conv2, epsilon=2e-5, axis=bn_axis, name=name + "_bn3"))
        out = layers.conv2d(act3, channels=num_filter, kernel_size=(1, 1), strides=(1, 1), padding=(0, 0),
                            name=name + "_conv3", **conv_kw)
    else:
        conv1 = layers.conv2d(act1, channels=num_filter, kernel_size=(3, 3), strides=stride, padding=(1, 1),
                              name=name + "_conv1", **conv_kw)
        act2 = _op.nn.relu(layers.batch_norm_infer(conv1, epsilon=2e-5, axis=bn_axis, name=name + "_bn2"))
        out = layers.conv2d(act2, channels=num_filter, kernel_size=(3, 3), strides=(1, 1), padding=(1, 1),
                            name=name + "_conv2", **conv_kw)
    if dim_match:
        shortcut = data
    else:
        shortcut = layers.conv2d(act1, channels=num_filter, kernel_size=(1, 1), strides=stride, name=name + "_sc",
                                 **conv_kw)
    return _op.add(out, shortcut)


def resnet(units, num_stages, filter_list, num_classes, image_shape, batch_size=1, bottle_neck=True, layout="NCHW",
           dtype="float32") -> Function:
    """The network: stem, ``num_stages`` stages of residual units, global pool, dense, softmax."""
    data_shape = (batch_size,) + tuple(image_shape)
    if layout == "NHWC":
        data_shape = (batch_size, image_shape[1], image_shape[2], image_shape[0])
    kernel_layout = "OIHW" if layout == "NCHW" else "HWIO"
    bn_axis = layout.index("C")
    conv_kw = dict(data_layout=layout, kernel_layout=kernel_layout)
    data = var("data", shape=data_shape, dtype=dtype)
    body = layers.batch_norm_infer(data, epsilon=2e-5, scale=False, axis=bn_axis, name="bn_data")
    height = image_shape[1]
    if height <= 32:  # cifar-sized input
        body = layers.conv2d(body, channels=filter_list[0], kernel_size=(3, 3), strides=(1, 1), padding=(1, 1),
                             name="conv0", **conv_kw)
    else:
        body = layers.conv2d(body, channels=filter_list[0], kernel_size=(7, 7), strides=(2, 2), padding=(3, 3),
                             name="conv0", **conv_kw)
        body = _op.nn.relu(layers.batch_norm_infer(body, epsilon=2e-5, axis=bn_axis, name="bn0"))
        body = _op.nn.max_pool2d(body, pool_size=(3, 3), strides=(2, 2), padding=(1, 1), layout=layout)
    for i in range(num_stages):
        stride = (1, 1) if i == 0 else (2, 2)
        body = residual_unit(body, filter_list[i + 1], stride, False, name=f"stage{i + 1}_unit1",
                             bottle_neck=bottle_neck, data_layout=layout, kernel_layout=kernel_layout)
        for j in range(units[i] - 1):
            body = residual_unit(body, filter_list[i + 1], (1, 1), True, name=f"stage{i + 1}_unit{j + 2}",
                                 bottle_neck=bottle_neck, data_layout=layout, kernel_layout=kernel_layout)
    body = _op.nn.relu(layers.batch_norm_infer(body, epsilon=2e-5, axis=bn_axis, name="bn1"))
    pool = _op.nn.global_avg_pool2d(body, layout=layout)
    flat = _op.nn.batch_flatten(pool)
    fc1 = layers.dense_add_bias(flat, units=num_classes, name="fc1")
    net = _op.nn.softmax(fc1)
    return Function(free_vars(net), net)


_UNITS = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3], 50: [3, 4, 6, 3], 101: [3, 4, 23, 3], 152: [3, 8, 36, 3],
          200: [3, 24, 36, 3], 269: [3, 30, 48, 8]}


def get_net(batch_size, num_classes, num_layers=50, image_shape=(3, 224, 224), layout="NCHW", dtype="float32",
            **kwargs) -> Function:
    """The ResNet of ``num_layers`` for ``image_shape`` (CHW); images of height <= 28 use the CIFAR variant."""
    height = image_shape[1]
    if height <= 28:
        num_stages = 3
        if (num_layers - 2) % 9 == 0 and num_layers >= 164:
            per_unit, filter_list, bottle_neck = [(num_layers - 2) // 9], [16, 64, 128, 256], True
        elif (num_layers - 2) % 6 == 0 and num_layers < 164:
            per_unit, filter_list, bottle_neck = [(num_layers - 2) // 6], [16, 16, 32, 64], False
        else:
            raise KilnError(f"resnet: no CIFAR-style network with {num_layers} layers (use 6n+2, e.g. 8, 20, 32)")
        units = per_unit * num_stages
    else:
        if num_layers not in _UNITS:
            raise KilnError(f"resnet: no network with {num_layers} layers; choose one of {sorted(_UNITS)}")
        filter_list = [64, 256, 512, 1024, 2048] if num_layers >= 50 else [64, 64, 128, 256, 512]
        bottle_neck = num_layers >= 50
        num_stages = 4
        units = _UNITS[num_layers]
    return resnet(units, num_stages, filter_list, num_classes, image_shape, batch_size, bottle_neck, layout, dtype)


def get_workload(batch_size=1, num_classes=1000, num_layers=18, image_shape=(3, 224, 224), layout="NCHW",
                 dtype="float32", **kwargs):
    """``(mod, params)`` of a ResNet."""
    net = get_net(batch_size, num_classes, num_layers, image_shape, layout, dtype, **kwargs)
    return create_workload(net)
