"""The DCGAN generator (TVM's ``relay.testing.dcgan``)."""
from __future__ import annotations

from ...error import KilnError
from .. import op as _op
from ..analysis import free_vars
from ..expr import Function, var
from . import layers
from .init import create_workload


def deconv2d(data, ishape, oshape, kshape, layout, name, stride=(2, 2)):
    """A transposed convolution from ``ishape`` to ``oshape`` (CHW) with a ``kshape`` kernel."""
    target = oshape[-2:] if layout == "NCHW" else oshape[1:3]
    pad_y, pad_x = (kshape[0] - 1) // 2, (kshape[1] - 1) // 2
    adj_y = (target[0] + 2 * pad_y - kshape[0]) % stride[0]
    adj_x = (target[1] + 2 * pad_x - kshape[1]) % stride[1]
    if layout != "NCHW":
        raise KilnError("dcgan: kiln builds the NCHW generator only")
    return layers.conv2d_transpose(data, kernel_size=kshape, strides=stride, channels=oshape[0],
                                   padding=(pad_y, pad_x), output_padding=(adj_y, adj_x), data_layout=layout,
                                   kernel_layout="IOHW", name=name)


def deconv2d_bn_relu(data, prefix, layout, **kwargs):
    net = deconv2d(data, name=f"{prefix}_deconv", layout=layout, **kwargs)
    net = layers.batch_norm_infer(net, epsilon=1e-5 + 1e-12, scale=False, axis=layout.find("C"),
                                  name=f"{prefix}_batch_norm")
    return _op.nn.relu(net)


def get_net(batch_size, random_len=100, oshape=(3, 64, 64), ngf=128, code=None, layout="NCHW",
            dtype="float32") -> Function:
    if oshape[-1] != 64:
        raise KilnError(f"dcgan: the output must be 64x64, got {oshape}")
    code = var("data", dtype=dtype, shape=(batch_size, random_len)) if code is None else code
    dense = _op.nn.dense(code, var("dense_weight", shape=(4 * 4 * ngf * 8, random_len), dtype=dtype),
                         units=4 * 4 * ngf * 8)
    x = _op.reshape(_op.nn.relu(dense), newshape=(-1, ngf * 8, 4, 4))
    x = deconv2d_bn_relu(x, ishape=(ngf * 8, 4, 4), oshape=(ngf * 4, 8, 8), kshape=(4, 4), prefix="g2", layout=layout)
    x = deconv2d_bn_relu(x, ishape=(ngf * 4, 8, 8), oshape=(ngf * 2, 16, 16), kshape=(4, 4), prefix="g3",
                         layout=layout)
    x = deconv2d_bn_relu(x, ishape=(ngf * 2, 16, 16), oshape=(ngf, 32, 32), kshape=(4, 4), prefix="g4", layout=layout)
    x = deconv2d(x, ishape=(ngf, 32, 32), oshape=oshape[-3:], kshape=(4, 4), name="g5_deconv", layout=layout)
    out = _op.tanh(x)
    return Function(free_vars(out), out)


def get_workload(batch_size=1, oshape=(3, 64, 64), ngf=128, random_len=100, layout="NCHW", dtype="float32"):
    """``(mod, params)`` of the DCGAN generator."""
    return create_workload(get_net(batch_size, random_len, oshape=oshape, ngf=ngf, layout=layout, dtype=dtype))
