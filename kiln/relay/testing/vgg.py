"""VGG 11/13/16/19, with optional batch norm (TVM's ``relay.testing.vgg``)."""
from __future__ import annotations

from ...error import KilnError
from .. import op as _op
from ..analysis import free_vars
from ..expr import Function, var
from . import layers
from .init import create_workload

_SPEC = {11: ([1, 1, 2, 2, 2], [64, 128, 256, 512, 512]), 13: ([2, 2, 2, 2, 2], [64, 128, 256, 512, 512]),
         16: ([2, 2, 3, 3, 3], [64, 128, 256, 512, 512]), 19: ([2, 2, 4, 4, 4], [64, 128, 256, 512, 512])}


def get_feature(internal_layer, layer_counts, filters, batch_norm=False):
    for i, num in enumerate(layer_counts):
        for j in range(num):
            internal_layer = layers.conv2d(internal_layer, kernel_size=(3, 3), padding=(1, 1), channels=filters[i],
                                           name=f"conv{i + 1}_{j + 1}")
            internal_layer = layers.bias_add(internal_layer, f"conv{i + 1}_{j + 1}_bias")
            if batch_norm:
                internal_layer = layers.batch_norm_infer(internal_layer, name=f"bn{i + 1}_{j + 1}")
            internal_layer = _op.nn.relu(internal_layer)
        internal_layer = _op.nn.max_pool2d(internal_layer, pool_size=(2, 2), strides=(2, 2))
    return internal_layer


def get_classifier(input_data, num_classes):
    flatten = _op.nn.batch_flatten(input_data)
    x = _op.nn.dropout(_op.nn.relu(layers.dense_add_bias(flatten, units=4096, name="fc6")), rate=0.5)
    x = _op.nn.dropout(_op.nn.relu(layers.dense_add_bias(x, units=4096, name="fc7")), rate=0.5)
    return layers.dense_add_bias(x, units=num_classes, name="fc8")


def get_net(batch_size, image_shape, num_classes, dtype, num_layers=11, batch_norm=False) -> Function:
    if num_layers not in _SPEC:
        raise KilnError(f"vgg: num_layers must be one of {sorted(_SPEC)}, got {num_layers}")
    counts, filters = _SPEC[num_layers]
    data = var("data", shape=(batch_size,) + tuple(image_shape), dtype=dtype)
    feature = get_feature(data, counts, filters, batch_norm)
    out = _op.nn.softmax(get_classifier(feature, num_classes))
    return Function(free_vars(out), out)


def get_workload(batch_size=1, num_classes=1000, image_shape=(3, 224, 224), dtype="float32", num_layers=11,
                 batch_norm=False):
    """``(mod, params)`` of VGG."""
    return create_workload(get_net(batch_size, image_shape, num_classes, dtype, num_layers, batch_norm))
