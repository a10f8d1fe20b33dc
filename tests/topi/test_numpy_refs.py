"""The numpy references of kiln.topi.testing against torch.nn.functional on random inputs."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kiln.error import KilnError
import kiln.topi.testing as tt

rng = np.random.default_rng(0)


def rand(*shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


def t(x):
    return torch.from_numpy(np.ascontiguousarray(x))


def close(a, b, tol=1e-4):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("n,c,h,w,f,k,stride,pad,dil,groups", [
    (1, 3, 7, 9, 5, 3, 1, 1, 1, 1),
    (2, 4, 11, 8, 6, 3, 2, 0, 1, 2),
    (1, 6, 9, 9, 6, 3, 1, 2, 2, 6),
    (1, 2, 5, 6, 3, 1, 3, 0, 1, 1),
])
def test_conv2d_nchw_nhwc(n, c, h, w, f, k, stride, pad, dil, groups):
    a, wt = rand(n, c, h, w), rand(f, c // groups, k, k)
    ref = F.conv2d(t(a), t(wt), stride=stride, padding=pad, dilation=dil, groups=groups).numpy()
    close(tt.conv2d_nchw_python(a, wt, stride, pad, groups, dilation=dil), ref)
    got = tt.conv2d_nhwc_python(a.transpose(0, 2, 3, 1), wt.transpose(2, 3, 1, 0), stride, pad, groups, dil)
    close(got.transpose(0, 3, 1, 2), ref)


def test_conv2d_asymmetric_and_same_padding():
    a, wt = rand(1, 2, 6, 7), rand(3, 2, 3, 2)
    ref = F.conv2d(F.pad(t(a), (0, 1, 1, 2)), t(wt)).numpy()  # torch pad: (left, right, top, bottom)
    close(tt.conv2d_nchw_python(a, wt, 1, (1, 0, 2, 1)), ref)
    same = tt.conv2d_nchw_python(a, rand(3, 2, 3, 3), 1, "SAME")
    assert same.shape == (1, 3, 6, 7)
    assert tt.conv2d_nchw_python(a, wt, 1, "VALID").shape == (1, 3, 4, 6)
    with pytest.raises(KilnError):
        tt.conv2d_nchw_python(a, rand(3, 3, 3, 3), 1, 0)


def test_conv2d_int_dtype_keeps_dtype():
    a = rng.integers(-5, 5, (1, 2, 5, 5)).astype("int32")
    wt = rng.integers(-3, 3, (2, 2, 3, 3)).astype("int32")
    got = tt.conv2d_nchw_python(a, wt, 1, 1)
    assert got.dtype == np.int32
    ref = F.conv2d(t(a).double(), t(wt).double(), padding=1).numpy()
    np.testing.assert_array_equal(got, ref.astype("int32"))


def test_conv1d():
    a, wt = rand(2, 3, 11), rand(4, 3, 3)
    close(tt.conv1d_ncw_python(a, wt, 2, (1, 1), dilation=2),
          F.conv1d(t(a), t(wt), stride=2, padding=1, dilation=2).numpy())


@pytest.mark.parametrize("mult,stride,pad", [(1, 1, 1), (2, 2, 0), (3, 1, 2)])
def test_depthwise(mult, stride, pad):
    a, wt = rand(2, 3, 8, 7), rand(3, mult, 3, 3)
    ref = F.conv2d(t(a), t(wt.reshape(3 * mult, 1, 3, 3)), stride=stride, padding=pad, groups=3).numpy()
    close(tt.depthwise_conv2d_python_nchw(a, wt, stride, pad), ref)
    got = tt.depthwise_conv2d_python_nhwc(a.transpose(0, 2, 3, 1), wt.transpose(2, 3, 0, 1), stride, pad)
    close(got.transpose(0, 3, 1, 2), ref)


@pytest.mark.parametrize("stride,pad,opad,groups,dil", [
    (1, 0, 0, 1, 1), (2, 1, 1, 1, 1), (3, 2, 2, 1, 1), (2, 1, 0, 2, 1), (2, 0, 1, 1, 2)])
def test_conv2d_transpose(stride, pad, opad, groups, dil):
    a, wt = rand(2, 4, 5, 6), rand(4, 3, 3, 3)
    ref = F.conv_transpose2d(t(a), t(wt), stride=stride, padding=pad, output_padding=opad, groups=groups,
                             dilation=dil).numpy()
    close(tt.conv2d_transpose_nchw_python(a, wt, stride, pad, (opad, opad), groups, dil), ref)


def test_conv2d_transpose_nhwc():
    a, wt = rand(1, 3, 4, 5), rand(3, 2, 3, 3)
    ref = F.conv_transpose2d(t(a), t(wt), stride=2, padding=1, output_padding=1).numpy()
    got = tt.conv2d_transpose_nhwc_python(a.transpose(0, 2, 3, 1), wt.transpose(2, 3, 1, 0), "HWOI", 2, 1, (1, 1))
    close(got.transpose(0, 3, 1, 2), ref)


def test_dilate():
    x = rand(2, 3)
    d = tt.dilate_python(x, (1, 3), 7.0)
    assert d.shape == (2, 7)
    close(d[:, ::3], x)
    assert np.all(d[:, 1::3] == 7.0) and np.all(d[:, 2::3] == 7.0)


@pytest.mark.parametrize("k,s,p,ceil,cip,dil", [
    (3, 2, 1, False, True, 1), (3, 2, 1, True, True, 1), (2, 2, 0, True, False, 1),
    (3, 1, 1, False, False, 1), (3, 2, 1, False, True, 2), (2, 3, 0, True, True, 1)])

def test_pool2d(k, s, p, ceil, cip, dil):
    x = rand(2, 3, 10, 11)
    if dil == 1:
        ref_avg = F.avg_pool2d(t(x), k, s, p, ceil_mode=ceil, count_include_pad=cip).numpy()
        got = tt.pool2d_python(x, (k, k), (s, s), (p, p, p, p), "avg", ceil, cip)
        close(got, ref_avg)
    ref_max = F.max_pool2d(t(x), k, s, p, dilation=dil, ceil_mode=ceil).numpy()
    got = tt.pool2d_python(x, (k, k), (s, s), (p, p), "max", ceil, cip, dilation=(dil, dil))
    close(got, ref_max)
    nhwc = tt.pool2d_python(x.transpose(0, 2, 3, 1), (k, k), (s, s), (p, p), "max", ceil, cip, layout="NHWC",
                            dilation=(dil, dil))
    close(nhwc.transpose(0, 3, 1, 2), ref_max)


def test_pool_ceil_mode_window_in_padding_follows_tvm():
    # TVM keeps a last ceil-mode window that starts inside the padding (it pools to 0); PyTorch drops it.
    x = rand(1, 1, 8, 8)
    got = tt.pool2d_python(x, (2, 2), (3, 3), (1, 1), "avg", True, True)
    assert got.shape == (1, 1, 4, 4)
    assert np.all(got[..., 3] == 0)
    close(got[..., :3, :3], F.avg_pool2d(t(x), 2, 3, 1, ceil_mode=True).numpy())


def test_pool1d_3d():
    x = rand(2, 3, 10)
    close(tt.pool1d_ncw_python(x, (3,), (2,), (1, 1), pool_type="avg"),
          F.avg_pool1d(t(x), 3, 2, 1).numpy())
    y = rand(1, 2, 5, 6, 7)
    close(tt.pool3d_ncdhw_python(y, (2, 2, 2), (2, 2, 2), (0,) * 6, pool_type="max"),
          F.max_pool3d(t(y), 2, 2).numpy())
    with pytest.raises(KilnError):
        tt.poolnd_python(x, (3,), (1,), (1,), (0,), (0,), "min")


@pytest.mark.parametrize("out", [(1, 1), (3, 2), (4, 5), (7, 9)])
def test_adaptive_pool(out):
    x = rand(2, 3, 7, 9)
    close(tt.adaptive_pool(x, out, "avg", "NCHW"), F.adaptive_avg_pool2d(t(x), out).numpy())
    close(tt.adaptive_pool(x, out, "max", "NCHW"), F.adaptive_max_pool2d(t(x), out).numpy())
    got = tt.adaptive_pool(x.transpose(0, 2, 3, 1), out, "avg", "NHWC")
    close(got.transpose(0, 3, 1, 2), F.adaptive_avg_pool2d(t(x), out).numpy())


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax(axis):
    x = rand(3, 5, 4) * 10
    close(tt.softmax_python(x, axis), F.softmax(t(x), axis).numpy())
    close(tt.log_softmax_python(x, axis), F.log_softmax(t(x), axis).numpy())


def test_layer_norm_group_norm_instance_norm():
    x = rand(2, 6, 5, 3)
    g, b = rand(5, 3), rand(5, 3)
    close(tt.layer_norm_python(x, g, b, (2, 3)), F.layer_norm(t(x), (5, 3), t(g), t(b)).numpy())
    g1, b1 = rand(3), rand(3)
    close(tt.layer_norm_python(x, g1, b1, -1, 1e-3), F.layer_norm(t(x), (3,), t(g1), t(b1), 1e-3).numpy())
    gc, bc = rand(6), rand(6)
    close(tt.group_norm_python(x, gc, bc, 3, 1, (2, 3)), F.group_norm(t(x), 3, t(gc), t(bc)).numpy())
    close(tt.group_norm_python(x, gc, None, 2, 1, (2, 3)), F.group_norm(t(x), 2, t(gc)).numpy())
    close(tt.instance_norm_python(x, gc, bc, (2, 3)), F.instance_norm(t(x), weight=t(gc), bias=t(bc)).numpy())
    with pytest.raises(KilnError):
        tt.group_norm_python(x, gc, bc, 4, 1, (2, 3))


def test_batch_norm_inference_and_training():
    x = rand(3, 4, 5, 2)
    g, b, m = rand(4), rand(4), rand(4)
    v = np.abs(rand(4)) + 0.5
    out, mm, mv = tt.batch_norm(x, g, b, m, v, 1, 1e-5, True, True, False, 0.1)
    close(out, F.batch_norm(t(x), t(m), t(v), t(g), t(b), training=False).numpy())
    assert mm is m and mv is v
    tm, tv = t(m.copy()), t(v.copy())
    ref = F.batch_norm(t(x), tm, tv, t(g), t(b), training=True, momentum=0.1).numpy()
    out, mm, _ = tt.batch_norm(x, g, b, m, v, 1, 1e-5, True, True, True, 0.1)
    close(out, ref)
    close(mm, tm.numpy())
    # scale/center off
    out, _, _ = tt.batch_norm(x, g, b, m, v, 1, 1e-5, False, False, False, 0.1)
    close(out, F.batch_norm(t(x), t(m), t(v), training=False).numpy())


def test_lrn_l2norm():
    x = rand(2, 7, 3, 4)
    close(tt.lrn_python(x, 5, 1, 2.0, 1e-3, 0.75), F.local_response_norm(t(x), 5, 1e-3, 0.75, 2.0).numpy())
    close(tt.l2_normalize_python(x, 1e-12, (1,)), F.normalize(t(x), dim=1).numpy())


def test_dense_matmul_batch_matmul():
    x, w, b = rand(5, 7), rand(3, 7), rand(3)
    close(tt.dense_python(x, w, b), F.linear(t(x), t(w), t(b)).numpy())
    close(tt.dense(x, w, b, use_bias=True, use_relu=True), F.relu(F.linear(t(x), t(w), t(b))).numpy())
    close(tt.matmul_python(x, w, transpose_b=True), x @ w.T)
    close(tt.matmul_python(x.T, w.T, transpose_a=True), x @ w.T)
    bx, by = rand(4, 3, 5), rand(4, 6, 5)
    close(tt.batch_matmul(bx, by), torch.bmm(t(bx), t(by).transpose(1, 2)).numpy())
    close(tt.batch_matmul(bx, by.transpose(0, 2, 1), trans_y=False), torch.bmm(t(bx), t(by).transpose(1, 2)).numpy())
    close(tt.batch_matmul(bx[:1], by), np.matmul(bx[:1], by.transpose(0, 2, 1)))
    with pytest.raises(KilnError):
        tt.batch_matmul(bx[:2], by)


def test_gather_take_one_hot():
    x = rand(3, 4, 5)
    idx = rng.integers(0, 4, (3, 2, 5))
    close(tt.gather_python(x, 1, idx), torch.gather(t(x), 1, t(idx)).numpy())
    close(tt.take_python(x, np.array([[0, 7], [-1, 2]]), 1, "clip"), x[:, [[0, 3], [0, 2]], :])
    close(tt.take_python(x, np.array([5, -1]), 2, "wrap"), x[:, :, [0, 4]])
    close(tt.take_python(x, np.array([1, 2]), None), x.reshape(-1)[[1, 2]])
    ind = rng.integers(0, 5, (3, 4))
    oh = tt.one_hot(ind, 1.0, 0.0, 5, -1, "float32")
    close(oh, F.one_hot(t(ind), 5).numpy().astype("float32"))
    oh0 = tt.one_hot(ind, 3, -1, 5, 0, "int32")
    assert oh0.shape == (5, 3, 4) and oh0.dtype == np.int32
    np.testing.assert_array_equal(oh0.argmax(0), ind)
    nd = tt.gather_nd_python(x, np.array([[0, 2], [1, 3]]))
    close(nd, x[[0, 2], [1, 3]])


def test_strided_slice():
    x = rand(5, 6, 7)
    close(tt.strided_slice_python(x, [1, -1], [4, 0], [2, -2]), x[1:4:2, -1:0:-2])
    close(tt.strided_slice_python(x, [2], [5], [1], axes=[2]), x[:, :, 2:5])
    close(tt.strided_slice_python(x, [1, 2], [2, -1], None, slice_mode="size"), x[1:3, 2:])
    close(tt.slice_axis_python(x, 1, 2, 4), x[:, 2:4])


def test_sequence_mask():
    x = rand(4, 3, 2)
    got = tt.sequence_mask(x, np.array([1, 4, 2]), -9.0, 0)
    assert np.all(got[1:, 0] == -9.0) and np.all(got[:, 1] == x[:, 1])
    close(got[:2, 2], x[:2, 2])


def test_layout_transform():
    x = rand(2, 8, 3, 5)
    y = tt.layout_transform_python(x, "NCHW", "NCHW4c")
    assert y.shape == (2, 2, 3, 5, 4)
    close(y[:, 1, :, :, 3], x[:, 7])
    close(tt.layout_transform_python(y, "NCHW4c", "NCHW"), x)
    close(tt.layout_transform_python(x, "NCHW", "NHWC"), x.transpose(0, 2, 3, 1))
    close(tt.layout_transform_python(y, "NCHW4c", "NCHW2c"), tt.layout_transform_python(x, "NCHW", "NCHW2c"))
    w = rand(8, 4, 3, 3)
    wp = tt.layout_transform_python(w, "OIHW", "OIHW2i4o")
    assert wp.shape == (2, 2, 3, 3, 2, 4)
    close(wp[1, 0, 2, 1, 1, 3], w[7, 1, 2, 1])
    for bad in ("NCHW3c", "NCH", "NC4"):
        with pytest.raises(KilnError):
            tt.layout_transform_python(x, "NCHW", bad)


@pytest.mark.parametrize("size", [(6, 10), (3, 4), (11, 7)])
def test_resize_against_torch(size):
    x = rand(2, 3, 5, 6)
    scale = (size[0] / 5, size[1] / 6)
    close(tt.resize2d_python(x, scale, "NCHW", "linear", "align_corners"),
          F.interpolate(t(x), size=size, mode="bilinear", align_corners=True).numpy())
    close(tt.resize2d_python(x, scale, "NCHW", "linear", "half_pixel"),
          F.interpolate(t(x), size=size, mode="bilinear", align_corners=False).numpy())
    close(tt.resize2d_python(x, scale, "NCHW", "nearest_neighbor", "asymmetric"),
          F.interpolate(t(x), size=size, mode="nearest").numpy())
    close(tt.resize2d_python(x, scale, "NCHW", "cubic", "half_pixel", cubic_alpha=-0.75),
          F.interpolate(t(x), size=size, mode="bicubic", align_corners=False).numpy(), 1e-3)
    nhwc = tt.resize2d_python(x.transpose(0, 2, 3, 1), scale, "NHWC", "linear", "align_corners")
    close(nhwc.transpose(0, 3, 1, 2), F.interpolate(t(x), size=size, mode="bilinear", align_corners=True).numpy())


def test_upsampling():
    x = rand(1, 2, 3, 4)
    close(tt.upsampling_python(x, (2, 3)), F.interpolate(t(x), scale_factor=(2, 3), mode="nearest").numpy())
    close(tt.bilinear_resize_python(x, (5, 7), "NCHW"),
          F.interpolate(t(x), size=(5, 7), mode="bilinear", align_corners=True).numpy())
    with pytest.raises(KilnError):
        tt.resize2d_python(x, (2, 2), "NCHW", "area")
