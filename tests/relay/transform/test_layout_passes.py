"""ConvertLayout and AlterOpLayout: the layout-propagation mechanism."""

import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.ir.op import Op
from kiln.relay.transform import AlterOpLayout, ConvertLayout, FoldConstant

from pass_helpers import alter_hook, assert_same_numerics, check, nchw4c_hook, need_ops, parse, run

X = "Tensor[(1, 8, 6, 6), float32]"
W = "Tensor[(8, 8, 3, 3), float32]"


@pytest.fixture(autouse=True)
def _ops():
    need_ops("nn.conv2d", "layout_transform", "nn.bias_add", "nn.relu", "nn.max_pool2d", "add", "nn.softmax",
             "nn.contrib_conv2d_NCHWc")


BLOCK = f"""
def @main(%x: {X}, %w: {W}, %b: Tensor[(8), float32]) {{
  %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3]);
  %1 = nn.bias_add(%0, %b);
  %2 = nn.relu(%1);
  %3 = nn.max_pool2d(%2, pool_size=[2, 2], strides=[2, 2]);
  %4 = nn.conv2d(%3, %w, padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3]);
  %5 = add(%4, %3);
  nn.softmax(%5, axis=1)
}}"""


def test_convert_layout_nhwc():
    expected = f"""
    def @main(%x: {X}, %w: {W}, %b: Tensor[(8), float32]) {{
      %0 = layout_transform(%x, src_layout="NCHW", dst_layout="NHWC");
      %1 = layout_transform(%w, src_layout="OIHW", dst_layout="HWIO");
      %2 = nn.conv2d(%0, %1, padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3], data_layout="NHWC",
                     kernel_layout="HWIO");
      %3 = nn.bias_add(%2, %b, axis=3);
      %4 = nn.relu(%3);
      %5 = nn.max_pool2d(%4, pool_size=[2, 2], strides=[2, 2], layout="NHWC");
      %6 = nn.conv2d(%5, %1, padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3], data_layout="NHWC",
                     kernel_layout="HWIO");
      %7 = add(%6, %5);
      %8 = nn.softmax(%7, axis=3);
      layout_transform(%8, src_layout="NHWC", dst_layout="NCHW")
    }}"""
    out = check(ConvertLayout({"nn.conv2d": ["NHWC", "default"]}), BLOCK, expected)
    assert_same_numerics(parse(BLOCK), out, rtol=1e-4, atol=1e-4)


def test_convert_layout_no_op_when_already_in_layout_or_not_listed():
    check(ConvertLayout({"nn.conv2d": ["NCHW", "default"]}), BLOCK, BLOCK)
    check(ConvertLayout({"nn.dense": ["NC"]}), BLOCK, BLOCK)


def test_alter_op_layout_keeps_chain_in_new_layout():
    before = f"""
    def @main(%x: {X}, %w: {W}, %b: Tensor[(8, 1, 1), float32]) {{
      %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3]);
      %1 = add(%0, %b);
      %2 = nn.relu(%1);
      %3 = nn.conv2d(%2, %w, padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3]);
      add(%3, 1f)
    }}"""
    expected = f"""
    def @main(%x: {X}, %w: {W}, %b: Tensor[(8, 1, 1), float32]) {{
      %0 = layout_transform(%x, src_layout="NCHW", dst_layout="NCHW4c");
      %1 = layout_transform(%w, src_layout="OIHW", dst_layout="OIHW4i4o");
      %2 = nn.contrib_conv2d_NCHWc(%0, %1, padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3],
                                   data_layout="NCHW4c", kernel_layout="OIHW4i4o", out_layout="NCHW4c");
      %3 = expand_dims(%b, axis=0);
      %4 = layout_transform(%3, src_layout="NCHW", dst_layout="NCHW4c");
      %5 = add(%2, %4);
      %6 = nn.relu(%5);
      %7 = nn.contrib_conv2d_NCHWc(%6, %1, padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3],
                                   data_layout="NCHW4c", kernel_layout="OIHW4i4o", out_layout="NCHW4c");
      %8 = add(%7, 1f);
      layout_transform(%8, src_layout="NCHW4c", dst_layout="NCHW")
    }}"""
    with alter_hook("nn.conv2d", nchw4c_hook):
        out = check(AlterOpLayout(), before, expected)
    assert_same_numerics(parse(before), out, rtol=1e-4, atol=1e-4)


def test_alter_op_layout_weight_transform_folds_and_hook_can_decline():
    w = np.random.default_rng(0).standard_normal((8, 8, 3, 3)).astype("float32")
    before = f"""
    def @main(%x: {X}) {{
      nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3])
    }}"""
    consts = [relay.const(w)]
    with alter_hook("nn.conv2d", nchw4c_hook):
        out = run(kiln.transform.Sequential([AlterOpLayout(), FoldConstant()]), parse(before, consts))
    conv = out["main"].body.args[0]
    assert conv.op.name == "nn.contrib_conv2d_NCHWc"
    assert isinstance(conv.args[1], relay.Constant) and conv.args[1].numpy().shape == (2, 2, 3, 3, 4, 4)
    assert_same_numerics(parse(before, consts), out, rtol=1e-4, atol=1e-4)
    with alter_hook("nn.conv2d", lambda *a: None):
        check(AlterOpLayout(), before, before, consts=consts)
    # without a hook nothing changes either
    check(AlterOpLayout(), before, before, consts=consts)


def test_alter_hook_returning_other_expression():
    def hook(attrs, inputs, tinfos, out_type):
        return relay.Call(Op.get("nn.relu"), [relay.Call(Op.get("nn.conv2d"), list(inputs), attrs)])

    before = f"def @main(%x: {X}, %w: {W}) {{ nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3]) }}"
    expected = f"""def @main(%x: {X}, %w: {W}) {{
      nn.relu(nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3])) }}"""
    with alter_hook("nn.conv2d", hook):
        check(AlterOpLayout(), before, expected)


def test_levels():
    assert AlterOpLayout().info.opt_level == 3
    assert ConvertLayout({"nn.conv2d": ["NHWC", "default"]}).info.opt_level == 3
