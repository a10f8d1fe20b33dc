import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kiln import relay
from kiln.error import TypeInferenceError
from kiln.ir import Op, OpPattern, TensorType, TupleType

from op_helpers import out_type, rnd, run


def T(x):
    return torch.tensor(x)


@pytest.mark.parametrize("cin,cout,k,stride,pad,dil,groups", [
    (3, 4, 3, 1, 1, 1, 1), (4, 6, 3, 2, 0, 1, 2), (5, 5, 3, 1, 2, 2, 5), (3, 2, (1, 3), (2, 1), (0, 1), 1, 1),
])
def test_conv2d_nchw_vs_torch(cin, cout, k, stride, pad, dil, groups):
    kh, kw = (k, k) if isinstance(k, int) else k
    x = rnd(2, cin, 7, 9)
    w = rnd(cout, cin // groups, kh, kw, seed=1)
    got = run(lambda a, b: relay.nn.conv2d(a, b, strides=stride, padding=pad, dilation=dil, groups=groups), x, w)
    expect = F.conv2d(T(x), T(w), stride=stride, padding=pad, dilation=dil, groups=groups).numpy()
    np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-5)


def test_conv2d_nhwc_and_nchwc_and_asymmetric_padding():
    x = rnd(1, 8, 6, 5)
    w = rnd(16, 8, 3, 3, seed=1)
    expect = F.conv2d(F.pad(T(x), (1, 0, 2, 1)), T(w)).numpy()  # (left, right, top, bottom)
    got = run(lambda a, b: relay.nn.conv2d(a, b, padding=(2, 1, 1, 0)), x, w)
    np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-5)
    got = run(lambda a, b: relay.nn.conv2d(a, b, padding=(2, 1, 1, 0), data_layout="NHWC", kernel_layout="HWIO"),
              x.transpose(0, 2, 3, 1).copy(), w.transpose(2, 3, 1, 0).copy())
    np.testing.assert_allclose(got, expect.transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-5)
    xp = x.reshape(1, 2, 4, 6, 5).transpose(0, 1, 3, 4, 2).copy()               # NCHW4c
    wp = w.reshape(4, 4, 4, 2, 3, 3).transpose(0, 2, 4, 5, 3, 1).copy()         # OIHW2i4o: O/4, I/2, H, W, 2i, 4o
    got = run(lambda a, b: relay.nn.contrib_conv2d_nchwc(a, b, padding=(2, 1, 1, 0), channels=16, kernel_size=3,
                                                         data_layout="NCHW4c", kernel_layout="OIHW2i4o"), xp, wp)
    assert got.shape == (1, 4, expect.shape[2], expect.shape[3], 4)
    np.testing.assert_allclose(got, expect.reshape(1, 4, 4, *expect.shape[2:]).transpose(0, 1, 3, 4, 2),
                               rtol=1e-4, atol=1e-5)


def test_conv2d_type_errors_and_attrs():
    with pytest.raises(TypeInferenceError, match=r"data \(1, 3, 8, 8\) \(NCHW\) has 3 input channels but weight "
                                                 r"\(4, 2, 3, 3\) \(OIHW\) with groups=1 expects 2"):
        out_type(relay.nn.conv2d, np.zeros((1, 3, 8, 8), "float32"), np.zeros((4, 2, 3, 3), "float32"))
    with pytest.raises(TypeInferenceError, match="does not fit"):
        out_type(relay.nn.conv2d, np.zeros((1, 3, 2, 2), "float32"), np.zeros((4, 3, 3, 3), "float32"))
    c = relay.nn.conv2d(relay.var("x"), relay.var("w"), strides=2, padding=1, channels=4, kernel_size=3)
    a = c.attrs
    assert a.type_key == "relay.attrs.Conv2DAttrs"
    assert (a.strides, a.padding, a.dilation, a.groups, a.channels, a.kernel_size) == \
        ((2, 2), (1, 1, 1, 1), (1, 1), 1, 4, (3, 3))
    assert (a.data_layout, a.kernel_layout, a.out_layout, a.out_dtype) == ("NCHW", "OIHW", "", "")
    assert Op.get("nn.conv2d").get_attr("TOpPattern") == OpPattern.OUT_ELEMWISE_FUSABLE
    t = out_type(lambda a, b: relay.nn.conv2d(a, b, out_dtype="int32"), np.zeros((1, 2, 4, 4), "int8"),
                 np.zeros((3, 2, 1, 1), "int8"))
    assert t == TensorType((1, 3, 4, 4), "int32")


@pytest.mark.parametrize("stride,pad,opad,groups,dil", [(2, 1, 1, 1, 1), (1, 0, 0, 2, 1), (3, 2, 2, 1, 2)])
def test_conv2d_transpose_vs_torch(stride, pad, opad, groups, dil):
    x = rnd(1, 4, 5, 6)
    w = rnd(4, 3, 3, 3, seed=1)  # IOHW: in, out/groups
    got = run(lambda a, b: relay.nn.conv2d_transpose(a, b, strides=stride, padding=pad, output_padding=opad,
                                                     groups=groups, dilation=dil), x, w)
    expect = F.conv_transpose2d(T(x), T(w), stride=stride, padding=pad, output_padding=opad, groups=groups,
                                dilation=dil).numpy()
    np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-5)


def test_dense_matmul_batch_matmul():
    x, w = rnd(3, 7), rnd(5, 7, seed=1)
    np.testing.assert_allclose(run(relay.nn.dense, x, w), x @ w.T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run(lambda a, b: relay.nn.matmul(a, b, transpose_b=True), x, w), x @ w.T, rtol=1e-5)
    np.testing.assert_allclose(run(lambda a, b: relay.nn.matmul(a, b), x, w.T.copy()), x @ w.T, rtol=1e-5)
    a, b = rnd(2, 3, 4), rnd(1, 5, 4, seed=2)
    np.testing.assert_allclose(run(relay.nn.batch_matmul, a, b), a @ b.transpose(0, 2, 1), rtol=1e-5)
    np.testing.assert_allclose(run(lambda p, q: relay.nn.batch_matmul(p, q, transpose_b=False), a,
                                   b.transpose(0, 2, 1).copy()), a @ b.transpose(0, 2, 1), rtol=1e-5)
    with pytest.raises(TypeInferenceError, match=r"dense: data \(3, 7\) has K=7 but weight \(5, 6\) has K=6"):
        out_type(relay.nn.dense, x, np.zeros((5, 6), "float32"))
    assert out_type(lambda p, q: relay.nn.dense(p, q, out_dtype="int32"), np.zeros((2, 3), "int8"),
                    np.zeros((4, 3), "int8")) == TensorType((2, 4), "int32")


def test_bias_add_and_norms_vs_torch():
    x = rnd(2, 6, 4, 3)
    b = rnd(6, seed=1)
    np.testing.assert_allclose(run(relay.nn.bias_add, x, b), x + b[:, None, None], rtol=1e-6)
    np.testing.assert_allclose(run(lambda p, q: relay.nn.bias_add(p, q, axis=-1), x, rnd(3, seed=2)),
                               x + rnd(3, seed=2), rtol=1e-6)
    g, be, m, v = rnd(6, seed=3), rnd(6, seed=4), rnd(6, seed=5), rnd(6, low=0.5, high=2, seed=6)
    outs = run(lambda *a: relay.nn.batch_norm(*a, epsilon=1e-3), x, g, be, m, v)
    expect = F.batch_norm(T(x), T(m), T(v), T(g), T(be), training=False, eps=1e-3).numpy()
    np.testing.assert_allclose(outs[0], expect, rtol=1e-4, atol=1e-5)
    assert out_type(lambda *a: relay.nn.batch_norm(*a).astuple(), x, g, be, m, v) == TupleType(
        [TensorType(x.shape), TensorType((6,)), TensorType((6,))])
    with pytest.raises(TypeInferenceError, match=r"gamma must have shape \(6,\).*got \(5,\)"):
        out_type(lambda *a: relay.nn.batch_norm(*a).astuple(), x, rnd(5), be, m, v)
    lg, lb = rnd(3, seed=7), rnd(3, seed=8)
    np.testing.assert_allclose(run(relay.nn.layer_norm, x, lg, lb),
                               F.layer_norm(T(x), (3,), T(lg), T(lb)).numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(run(lambda p, q, r: relay.nn.group_norm(p, q, r, num_groups=3), x, g, be),
                               F.group_norm(T(x), 3, T(g), T(be)).numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeInferenceError, match="not divisible by num_groups=4"):
        out_type(lambda p, q, r: relay.nn.group_norm(p, q, r, num_groups=4), x, g, be)


def test_softmax_activations():
    x = rnd(3, 5, low=-4, high=4)
    np.testing.assert_allclose(run(relay.nn.softmax, x), F.softmax(T(x), -1).numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(run(lambda v: relay.nn.log_softmax(v, axis=0), x), F.log_softmax(T(x), 0).numpy(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run(relay.nn.relu, x), np.maximum(x, 0))
    np.testing.assert_allclose(run(lambda v: relay.nn.leaky_relu(v, 0.1), x), F.leaky_relu(T(x), 0.1).numpy(),
                               rtol=1e-6)
    a = rnd(5, seed=3)
    np.testing.assert_allclose(run(relay.nn.prelu, x.reshape(1, 5, 3), a), F.prelu(T(x.reshape(1, 5, 3)), T(a)).numpy(),
                               rtol=1e-6)
    assert Op.get("nn.softmax").get_attr("TOpPattern") == OpPattern.OUT_ELEMWISE_FUSABLE  # as TVM v0.13
    assert Op.get("nn.relu").get_attr("TOpPattern") == OpPattern.ELEMWISE


@pytest.mark.parametrize("k,s,p,ceil", [(3, 2, 1, False), (2, 2, 0, True), (3, 1, (0, 1), False)])
def test_pooling_vs_torch(k, s, p, ceil):
    x = rnd(1, 3, 7, 8)
    ph, pw = (p, p) if isinstance(p, int) else p
    got = run(lambda v: relay.nn.max_pool2d(v, k, s, padding=p, ceil_mode=ceil), x)
    np.testing.assert_allclose(got, F.max_pool2d(T(x), k, s, (ph, pw), ceil_mode=ceil).numpy())
    for cip in (False, True):
        got = run(lambda v: relay.nn.avg_pool2d(v, k, s, padding=p, ceil_mode=ceil, count_include_pad=cip), x)
        np.testing.assert_allclose(got, F.avg_pool2d(T(x), k, s, (ph, pw), ceil_mode=ceil,
                                                     count_include_pad=cip).numpy(), rtol=1e-5, atol=1e-6)


def test_global_adaptive_pool_and_layouts():
    x = rnd(2, 3, 7, 5)
    np.testing.assert_allclose(run(relay.nn.global_avg_pool2d, x), x.mean((2, 3), keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(run(lambda v: relay.nn.global_max_pool2d(v, layout="NHWC"), x.transpose(0, 2, 3, 1)),
                               x.max((2, 3), keepdims=True).transpose(0, 2, 3, 1))
    np.testing.assert_allclose(run(lambda v: relay.nn.adaptive_avg_pool2d(v, (3, 2)), x),
                               F.adaptive_avg_pool2d(T(x), (3, 2)).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run(lambda v: relay.nn.max_pool2d(v, 2, 2, layout="NHWC"), x.transpose(0, 2, 3, 1)),
                               F.max_pool2d(T(x), 2, 2).numpy().transpose(0, 2, 3, 1))
    with pytest.raises(TypeInferenceError, match="window does not fit"):
        out_type(lambda v: relay.nn.max_pool2d(v, 9), x)


def test_dropout_pad_upsampling_flatten_resize():
    x = rnd(1, 2, 3, 4)
    np.testing.assert_array_equal(run(relay.nn.dropout, x), x)
    d = relay.nn.dropout_raw(relay.var("x", shape=(2,)))
    assert out_type(lambda v: relay.nn.dropout_raw(v), x) == TupleType([TensorType(x.shape)] * 2)
    assert d.attrs.rate == 0.5
    widths = ((0, 0), (1, 0), (2, 1), (0, 3))
    np.testing.assert_array_equal(run(lambda v: relay.nn.pad(v, widths, 1.5), x),
                                  np.pad(x, widths, constant_values=1.5))
    np.testing.assert_array_equal(run(lambda v: relay.nn.pad(v, widths, pad_mode="edge"), x),
                                  np.pad(x, widths, mode="edge"))
    with pytest.raises(TypeInferenceError, match="pad_width has 2 entries but the data"):
        out_type(lambda v: relay.nn.pad(v, ((0, 0), (1, 1))), x)
    np.testing.assert_allclose(run(lambda v: relay.nn.upsampling(v, 2, 3), x),
                               F.interpolate(T(x), scale_factor=(2, 3), mode="nearest").numpy())
    np.testing.assert_allclose(run(lambda v: relay.nn.upsampling(v, 2, 2, method="bilinear", align_corners=True), x),
                               F.interpolate(T(x), scale_factor=2, mode="bilinear", align_corners=True).numpy(),
                               rtol=1e-5, atol=1e-6)
    assert run(relay.nn.batch_flatten, x).shape == (1, 24)
    np.testing.assert_allclose(run(lambda v: relay.image.resize2d(v, (5, 7)), x),
                               F.interpolate(T(x), size=(5, 7), mode="bilinear", align_corners=False).numpy(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        run(lambda v: relay.image.resize2d(v, (6, 8), method="nearest_neighbor",
                                           coordinate_transformation_mode="asymmetric", rounding_method="floor"), x),
        F.interpolate(T(x), size=(6, 8), mode="nearest").numpy())
