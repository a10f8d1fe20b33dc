"""CombineParallelConv2D / CombineParallelDense."""
import numpy as np
import pytest

from kiln import relay
from kiln.relay.transform import CombineParallelConv2D, CombineParallelDense

from pass_helpers import assert_same_numerics, check, need_ops, parse, run

X = "Tensor[(1, 4, 5, 5), float32]"


@pytest.fixture(autouse=True)
def _ops():
    need_ops("nn.conv2d", "nn.dense", "concatenate", "strided_slice", "nn.batch_matmul", "stack", "split",
             "squeeze", "expand_dims", "add", "nn.relu")


def test_three_convs_with_bias_and_relu_combine():
    before = f"""
    def @main(%x: {X}, %w1: Tensor[(2, 4, 3, 3), float32], %w2: Tensor[(3, 4, 3, 3), float32],
              %w3: Tensor[(4, 4, 3, 3), float32], %b1: Tensor[(2, 1, 1), float32],
              %b2: Tensor[(3, 1, 1), float32], %b3: Tensor[(4, 1, 1), float32]) {{
      %0 = nn.conv2d(%x, %w1, padding=[1, 1, 1, 1], channels=2, kernel_size=[3, 3]);
      %1 = nn.conv2d(%x, %w2, padding=[1, 1, 1, 1], channels=3, kernel_size=[3, 3]);
      %2 = nn.conv2d(%x, %w3, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
      %3 = add(%0, %b1);
      %4 = add(%1, %b2);
      %5 = add(%2, %b3);
      %6 = nn.relu(%3);
      %7 = nn.relu(%4);
      %8 = nn.relu(%5);
      (%6, %7, %8)
    }}"""
    expected = f"""
    def @main(%x: {X}, %w1: Tensor[(2, 4, 3, 3), float32], %w2: Tensor[(3, 4, 3, 3), float32],
              %w3: Tensor[(4, 4, 3, 3), float32], %b1: Tensor[(2, 1, 1), float32],
              %b2: Tensor[(3, 1, 1), float32], %b3: Tensor[(4, 1, 1), float32]) {{
      %0 = (%w1, %w2, %w3);
      %1 = concatenate(%0);
      %2 = nn.conv2d(%x, %1, padding=[1, 1, 1, 1], channels=9, kernel_size=[3, 3]);
      %3 = (%b1, %b2, %b3);
      %4 = concatenate(%3);
      %5 = add(%2, %4);
      %6 = nn.relu(%5);
      %7 = strided_slice(%6, begin=[0, 0], end=[-1, 2], strides=[1, 1], slice_mode="size");
      %8 = strided_slice(%6, begin=[0, 2], end=[-1, 3], strides=[1, 1], slice_mode="size");
      %9 = strided_slice(%6, begin=[0, 5], end=[-1, 4], strides=[1, 1], slice_mode="size");
      (%7, %8, %9)
    }}"""
    out = check(CombineParallelConv2D(min_num_branches=3), before, expected)
    assert_same_numerics(parse(before), out, rtol=1e-4, atol=1e-4)


def test_conv_not_combined_below_min_branches_or_when_incompatible():
    before = f"""
    def @main(%x: {X}, %w1: Tensor[(2, 4, 3, 3), float32], %w2: Tensor[(3, 4, 1, 1), float32],
              %w3: Tensor[(4, 4, 3, 3), float32]) {{
      %0 = nn.conv2d(%x, %w1, padding=[1, 1, 1, 1], channels=2, kernel_size=[3, 3]);
      %1 = nn.conv2d(%x, %w2, channels=3, kernel_size=[1, 1]);
      %2 = nn.conv2d(%x, %w3, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
      (%0, %1, %2)
    }}"""
    check(CombineParallelConv2D(3), before, before)
    # two compatible ones are enough with min_num_branches=2
    out = run(CombineParallelConv2D(2), parse(before))
    convs = []
    relay.expr_functor.post_order_visit(out["main"], lambda n: convs.append(n) if isinstance(n, relay.Call)
                                        and n.op.name == "nn.conv2d" else None)
    assert len(convs) == 2
    assert_same_numerics(parse(before), out, rtol=1e-4, atol=1e-4)


def test_dense_to_batch_matmul():
    before = """
    def @main(%x: Tensor[(3, 4), float32], %w1: Tensor[(5, 4), float32], %w2: Tensor[(5, 4), float32],
              %w3: Tensor[(5, 4), float32], %b1: Tensor[(5), float32], %b2: Tensor[(5), float32],
              %b3: Tensor[(5), float32]) {
      %0 = nn.dense(%x, %w1, units=5);
      %1 = nn.dense(%x, %w2, units=5);
      %2 = nn.dense(%x, %w3, units=5);
      %3 = add(%0, %b1);
      %4 = add(%1, %b2);
      %5 = add(%2, %b3);
      (%3, %4, %5)
    }"""
    expected = """
    def @main(%x: Tensor[(3, 4), float32], %w1: Tensor[(5, 4), float32], %w2: Tensor[(5, 4), float32],
              %w3: Tensor[(5, 4), float32], %b1: Tensor[(5), float32], %b2: Tensor[(5), float32],
              %b3: Tensor[(5), float32]) {
      %0 = (%x, %x, %x);
      %1 = stack(%0);
      %2 = (%w1, %w2, %w3);
      %3 = stack(%2);
      %4 = nn.batch_matmul(%1, %3, transpose_b=True);
      %5 = expand_dims(%b1, axis=0);
      %6 = expand_dims(%b2, axis=0);
      %7 = expand_dims(%b3, axis=0);
      %8 = (%5, %6, %7);
      %9 = stack(%8);
      %10 = add(%4, %9);
      %11 = split(%10, indices_or_sections=3);
      %12 = %11.0;
      %13 = %11.1;
      %14 = %11.2;
      (squeeze(%12, axis=[0]), squeeze(%13, axis=[0]), squeeze(%14, axis=[0]))
    }"""
    out = check(CombineParallelDense(3, to_batch=True), before, expected)
    assert_same_numerics(parse(before), out, rtol=1e-4, atol=1e-4)


def test_dense_to_wider_dense():
    before = """
    def @main(%x: Tensor[(3, 4), float32], %w1: Tensor[(5, 4), float32], %w2: Tensor[(2, 4), float32],
              %w3: Tensor[(6, 4), float32]) {
      %0 = nn.dense(%x, %w1, units=5);
      %1 = nn.dense(%x, %w2, units=2);
      %2 = nn.dense(%x, %w3, units=6);
      (nn.relu(%0), nn.relu(%1), nn.relu(%2))
    }"""
    out = run(CombineParallelDense(3, to_batch=False), parse(before))
    dense = []
    relay.expr_functor.post_order_visit(out["main"], lambda n: dense.append(n) if isinstance(n, relay.Call)
                                        and n.op.name == "nn.dense" else None)
    assert len(dense) == 1 and dense[0].checked_type.shape == (3, 13)
    assert_same_numerics(parse(before), out, rtol=1e-4, atol=1e-4)


def test_levels():
    assert CombineParallelConv2D().info.opt_level == 4
    assert CombineParallelDense().info.opt_level == 4
