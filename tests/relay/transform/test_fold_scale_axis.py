"""FoldScaleAxis: per-channel constant scales folded into conv2d / dense weights."""
import numpy as np
import pytest

from kiln import relay
from kiln.relay.transform import BackwardFoldScaleAxis, FoldScaleAxis, ForwardFoldScaleAxis

from pass_helpers import assert_same_numerics, check, need_ops, parse, run

X = "Tensor[(1, 3, 6, 6), float32]"
W = "Tensor[(4, 3, 3, 3), float32]"


@pytest.fixture(autouse=True)
def _ops():
    need_ops("nn.conv2d", "nn.dense", "multiply", "add", "nn.relu")


def c(v):
    return relay.const(np.asarray(v, dtype="float32"))


def test_backward_conv_bias_scale():
    scale = np.array([1.5, -2.0, 0.5, 3.0], "float32").reshape(4, 1, 1)
    bias = np.arange(4, dtype="float32").reshape(4, 1, 1)
    before = f"""
    def @main(%x: {X}, %w: {W}) {{
      %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
      %1 = add(%0, meta[relay.Constant][0]);
      multiply(%1, meta[relay.Constant][1])
    }}"""
    expected = f"""
    def @main(%x: {X}, %w: {W}) {{
      %0 = multiply(%w, meta[relay.Constant][2]);
      %1 = nn.conv2d(%x, %0, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
      add(%1, meta[relay.Constant][3])
    }}"""
    consts = [c(bias), c(scale), c(scale.reshape(4, 1, 1, 1)), c(bias * scale)]
    out = check(BackwardFoldScaleAxis(), before, expected, consts=consts)
    assert_same_numerics(parse(before, consts), out, rtol=1e-4, atol=1e-4)


def test_forward_scale_through_relu_into_conv():
    scale = np.array([0.5, 2.0, 1.5], "float32").reshape(3, 1, 1)
    before = f"""
    def @main(%x: {X}, %w: {W}) {{
      %0 = multiply(%x, meta[relay.Constant][0]);
      %1 = nn.relu(%0);
      nn.conv2d(%1, %w, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3])
    }}"""
    expected = f"""
    def @main(%x: {X}, %w: {W}) {{
      %0 = nn.relu(%x);
      %1 = multiply(%w, meta[relay.Constant][1]);
      nn.conv2d(%0, %1, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3])
    }}"""
    consts = [c(scale), c(scale.reshape(1, 3, 1, 1))]
    out = check(ForwardFoldScaleAxis(), before, expected, consts=consts)
    assert_same_numerics(parse(before, consts), out, rtol=1e-4, atol=1e-4)


def test_does_not_fire_for_negative_scale_through_relu_or_spatial_scale_or_variable():
    neg = np.array([0.5, -2.0, 1.5], "float32").reshape(3, 1, 1)
    spatial = np.linspace(0.5, 2, 6, dtype="float32").reshape(1, 6)
    before = f"""
    def @main(%x: {X}, %w: {W}, %s: Tensor[(4, 1, 1), float32]) {{
      %0 = multiply(%x, meta[relay.Constant][0]);
      %1 = nn.relu(%0);
      %2 = nn.conv2d(%1, %w, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
      %3 = multiply(%2, meta[relay.Constant][1]);
      %4 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
      %5 = multiply(%4, %s);
      (%3, %5)
    }}"""
    mod = parse(before, [c(neg), c(spatial)])
    check(FoldScaleAxis(), mod, mod, consts=[c(neg), c(spatial)])


def test_does_not_fire_when_conv_output_has_other_users():
    scale = np.array([1.5, -2.0, 0.5, 3.0], "float32").reshape(4, 1, 1)
    before = f"""
    def @main(%x: {X}, %w: {W}) {{
      %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
      %1 = multiply(%0, meta[relay.Constant][0]);
      (%0, %1)
    }}"""
    mod = parse(before, [c(scale)])
    check(FoldScaleAxis(), mod, mod, consts=[c(scale)])


def test_dense_both_directions_and_constant_folding():
    w = np.random.default_rng(1).standard_normal((5, 4)).astype("float32")
    s_in = np.array([1.0, 2.0, 3.0, 4.0], "float32")
    s_out = np.array([0.5, 1.0, -1.0, 2.0, 3.0], "float32")
    before = """
    def @main(%x: Tensor[(2, 4), float32]) {
      %0 = multiply(%x, meta[relay.Constant][0]);
      %1 = nn.dense(%0, meta[relay.Constant][1], units=5);
      multiply(%1, meta[relay.Constant][2])
    }"""
    folded = w * s_out[:, None] * s_in[None, :]
    consts = [c(s_in), c(w), c(s_out)]
    out = run(FoldScaleAxis(), parse(before, consts))
    body = out["main"].body
    assert isinstance(body, relay.Call) and body.op.name == "nn.dense" and body.args[0] is out["main"].params[0]
    np.testing.assert_allclose(body.args[1].numpy(), folded, rtol=1e-6)
    assert_same_numerics(parse(before, consts), out, rtol=1e-4, atol=1e-4)
    assert FoldScaleAxis().info.opt_level == 3
