"""EliminateCommonSubexpr and SimplifyExpr against expected programs."""
import numpy as np
import pytest

from kiln import relay
from kiln.relay.transform import EliminateCommonSubexpr, SimplifyExpr

import fuse_test_ops  # noqa: F401
from pass_helpers import assert_same_numerics, check, need_ops, parse

T = "Tensor[(2, 3), float32]"


def test_cse_merges_identical_calls():
    before = f"""
    def @main(%x: {T}) {{
      %0 = ftest.exp(%x);
      %1 = ftest.exp(%x);
      %2 = ftest.add(%0, 1f);
      %3 = ftest.add(%1, 1f);
      ftest.add(%2, %3)
    }}"""
    expected = f"""
    def @main(%x: {T}) {{
      %0 = ftest.exp(%x);
      %1 = ftest.add(%0, 1f);
      ftest.add(%1, %1)
    }}"""
    check(EliminateCommonSubexpr(), before, expected)


def test_cse_distinguishes_attrs_args_and_skips_stateful():
    need_ops("nn.relu", "nn.leaky_relu")
    before = f"""
    def @main(%x: {T}, %y: {T}) {{
      %0 = nn.leaky_relu(%x, alpha=0.1f);
      %1 = nn.leaky_relu(%x, alpha=0.2f);
      %2 = ftest.random(%x);
      %3 = ftest.random(%x);
      %4 = nn.relu(%x);
      %5 = nn.relu(%y);
      (%0, %1, %2, %3, %4, %5)
    }}"""
    check(EliminateCommonSubexpr(), before, before)


def test_cse_fskip_and_tuple_getitem():
    before = """
    def @main(%x: Tensor[(1, 8, 2, 2), float32]) {
      %0 = ftest.split(%x);
      %1 = %0.0;
      %2 = %0.0;
      %3 = ftest.exp(%1);
      %4 = ftest.exp(%2);
      ftest.add(%3, %4)
    }"""
    expected = """
    def @main(%x: Tensor[(1, 8, 2, 2), float32]) {
      %0 = ftest.split(%x);
      %1 = %0.0;
      %2 = ftest.exp(%1);
      ftest.add(%2, %2)
    }"""
    check(EliminateCommonSubexpr(), before, expected)
    skip_exp = EliminateCommonSubexpr(lambda e: isinstance(e, relay.Call) and e.op.name == "ftest.exp")
    expected_skip = """
    def @main(%x: Tensor[(1, 8, 2, 2), float32]) {
      %0 = ftest.split(%x);
      %1 = %0.0;
      %2 = ftest.exp(%1);
      %3 = ftest.exp(%1);
      ftest.add(%2, %3)
    }"""
    check(skip_exp, before, expected_skip)


def test_cse_does_not_reuse_across_if_branches():
    before = f"""
    def @main(%x: {T}, %c: bool) {{
      if (%c) {{ ftest.exp(%x) }} else {{ ftest.exp(%x) }}
    }}"""
    check(EliminateCommonSubexpr(), before, before)


def test_cse_level():
    assert EliminateCommonSubexpr().info.opt_level == 3
    assert SimplifyExpr().info.opt_level == 0


@pytest.fixture
def tensor_ops():
    need_ops("reshape", "transpose", "cast", "add", "multiply", "zeros_like", "ones", "zeros", "subtract")


def test_reshape_chain_collapses(tensor_ops):
    before = """
    def @main(%x: Tensor[(2, 3, 4), float32]) {
      %0 = reshape(%x, newshape=[6, 4]);
      %1 = reshape(%0, newshape=[24]);
      %2 = reshape(%1, newshape=[4, -1]);
      nn.relu(%2)
    }"""
    expected = """
    def @main(%x: Tensor[(2, 3, 4), float32]) {
      %0 = reshape(%x, newshape=[4, 6]);
      nn.relu(%0)
    }"""
    out = check(SimplifyExpr(), before, expected)
    assert_same_numerics(parse(before), out)


def test_reshape_back_to_input_shape_disappears(tensor_ops):
    before = """
    def @main(%x: Tensor[(2, 3), float32]) {
      %0 = reshape(%x, newshape=[3, 2]);
      reshape(%0, newshape=[2, 3])
    }"""
    check(SimplifyExpr(), before, "def @main(%x: Tensor[(2, 3), float32]) { %x }")


def test_transposes(tensor_ops):
    before = """
    def @main(%x: Tensor[(2, 3, 4), float32]) {
      %0 = transpose(%x, axes=[1, 2, 0]);
      %1 = transpose(%0, axes=[2, 0, 1]);
      %2 = transpose(%1, axes=[0, 2, 1]);
      %3 = transpose(%2, axes=[1, 0, 2]);
      %4 = transpose(%x, axes=[0, 1, 2]);
      (%3, %4)
    }"""
    expected = """
    def @main(%x: Tensor[(2, 3, 4), float32]) {
      %0 = transpose(%x, axes=[2, 0, 1]);
      (%0, %x)
    }"""
    out = check(SimplifyExpr(), before, expected)
    assert_same_numerics(parse(before), out)


def test_casts(tensor_ops):
    before = """
    def @main(%x: Tensor[(4), int8], %y: Tensor[(4), float32]) {
      %0 = cast(%x, dtype="int32");
      %1 = cast(%0, dtype="float32");
      %2 = cast(%y, dtype="float32");
      %3 = cast(%y, dtype="int32");
      %4 = cast(%3, dtype="float32");
      (%1, %2, %4)
    }"""
    # int8 -> int32 loses nothing, so the middle cast goes; float32 -> int32 -> float32 must stay
    expected = """
    def @main(%x: Tensor[(4), int8], %y: Tensor[(4), float32]) {
      %0 = cast(%x, dtype="float32");
      %1 = cast(%y, dtype="int32");
      (%0, %y, cast(%1, dtype="float32"))
    }"""
    check(SimplifyExpr(), before, expected)


def test_arithmetic_identities_only_when_types_match(tensor_ops):
    before = """
    def @main(%x: Tensor[(2, 3), float32], %s: Tensor[(3), float32]) {
      %0 = add(%x, 0f);
      %1 = multiply(1f, %0);
      %2 = subtract(%1, zeros_like(%x));
      %3 = divide(%2, 1f);
      %4 = multiply(%s, ones(shape=[2, 3], dtype="float32"));
      %5 = add(%x, 1f);
      (%3, %4, %5)
    }"""
    # %s * ones((2, 3)) broadcasts %s to a bigger shape: it must stay
    expected = """
    def @main(%x: Tensor[(2, 3), float32], %s: Tensor[(3), float32]) {
      %0 = ones(shape=[2, 3], dtype="float32");
      (%x, multiply(%s, %0), add(%x, 1f))
    }"""
    check(SimplifyExpr(), before, expected)


def test_like_ops_and_adjacent_constants(tensor_ops):
    before = """
    def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3, 2), float32]) {
      %0 = reshape_like(%x, %y);
      %1 = multiply(%x, 2f);
      %2 = multiply(%1, 3f);
      %3 = ones_like(%y);
      (%0, %2, %3)
    }"""
    expected = """
    def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3, 2), float32]) {
      %0 = reshape(%x, newshape=[3, 2]);
      %1 = multiply(%x, 6f);
      %2 = ones(shape=[3, 2], dtype="float32");
      (%0, %1, %2)
    }"""
    out = check(SimplifyExpr(), before, expected)
    assert_same_numerics(parse(before), out)


def test_arithmetic_identities_over_unknown_dims(tensor_ops):
    """``x + zeros(c)`` is ``x`` when broadcasting cannot change ``x``'s shape at any run-time size: ``c``'s dims
    (right-aligned) are 1 or equal static dims of ``x`` (a VM model's bias/LayerNorm of zeros and ones)."""
    before = """
    def @main(%x: Tensor[(?, ?, 4), float32], %y: Tensor[(?, ?), float32], %z: Tensor[(?, 1), float32]) {
      %0 = add(%x, zeros(shape=[4], dtype="float32"));
      %1 = multiply(%0, ones(shape=[1, 4], dtype="float32"));
      %2 = add(%y, zeros(shape=[4], dtype="float32"));
      %3 = multiply(%z, ones(shape=[4], dtype="float32"));
      %4 = add(%x, zeros(shape=[2, 1, 1, 4], dtype="float32"));
      (%1, %2, %3, %4)
    }"""
    # %y's last dim may be 1 (broadcast to 4), %z's is 1 (becomes 4), a rank-4 zeros adds a dim: they stay
    expected = """
    def @main(%x: Tensor[(?, ?, 4), float32], %y: Tensor[(?, ?), float32], %z: Tensor[(?, 1), float32]) {
      %0 = zeros(shape=[4], dtype="float32");
      %1 = ones(shape=[4], dtype="float32");
      %2 = zeros(shape=[2, 1, 1, 4], dtype="float32");
      (%x, add(%y, %0), multiply(%z, %1), add(%x, %2))
    }"""
    check(SimplifyExpr(), before, expected)
