"""SimplifyInference and CanonicalizeOps against expected programs."""
import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.relay.transform import CanonicalizeOps, SimplifyInference

from pass_helpers import assert_same_numerics, check, need_ops, parse, run

X = "Tensor[(1, 8, 4, 4), float32]"
V = "Tensor[(8), float32]"


@pytest.fixture(autouse=True)
def _ops():
    need_ops("nn.batch_norm", "nn.dropout", "nn.bias_add", "expand_dims", "sqrt")


def test_batch_norm_becomes_scale_and_shift():
    before = f"""
    def @main(%x: {X}, %g: {V}, %b: {V}, %m: {V}, %v: {V}) {{
      %0 = nn.batch_norm(%x, %g, %b, %m, %v, epsilon=2e-05f);
      %0.0
    }}"""
    expected = f"""
    def @main(%x: {X}, %g: {V}, %b: {V}, %m: {V}, %v: {V}) {{
      %0 = add(%v, 2e-05f);
      %1 = sqrt(%0);
      %2 = divide(1f, %1);
      %3 = multiply(%2, %g);
      %4 = expand_dims(%3, axis=1, num_newaxis=2);
      %5 = multiply(%x, %4);
      %6 = negative(%m);
      %7 = multiply(%6, %3);
      %8 = add(%7, %b);
      %9 = expand_dims(%8, axis=1, num_newaxis=2);
      add(%5, %9)
    }}"""
    out = check(SimplifyInference(), before, expected)
    assert_same_numerics(parse(before), out)


def test_batch_norm_last_axis_without_scale_and_center():
    before = f"""
    def @main(%x: Tensor[(2, 8), float32], %g: {V}, %b: {V}, %m: {V}, %v: {V}) {{
      %0 = nn.batch_norm(%x, %g, %b, %m, %v, axis=1, center=False, scale=False);
      %0.0
    }}"""
    expected = f"""
    def @main(%x: Tensor[(2, 8), float32], %g: {V}, %b: {V}, %m: {V}, %v: {V}) {{
      %0 = add(%v, 1e-05f);
      %1 = sqrt(%0);
      %2 = divide(1f, %1);
      %3 = multiply(%x, %2);
      %4 = negative(%m);
      %5 = multiply(%4, %2);
      add(%3, %5)
    }}"""
    check(SimplifyInference(), before, expected)


def test_batch_norm_other_fields_are_kept_and_dropout_removed():
    before = f"""
    def @main(%x: {X}, %g: {V}, %b: {V}, %m: {V}, %v: {V}) {{
      %0 = nn.batch_norm(%x, %g, %b, %m, %v);
      %1 = %0.1;
      %2 = nn.dropout(%x, rate=0.3f);
      (%1, %2.0)
    }}"""
    expected = f"""
    def @main(%x: {X}, %g: {V}, %b: {V}, %m: {V}, %v: {V}) {{
      %0 = nn.batch_norm(%x, %g, %b, %m, %v);
      (%0.1, %x)
    }}"""
    check(SimplifyInference(), before, expected)


def test_layer_norm_decomposed_and_numerically_equal():
    need_ops("nn.layer_norm", "mean", "variance")
    before = """
    def @main(%x: Tensor[(2, 5, 6), float32], %g: Tensor[(6), float32], %b: Tensor[(6), float32]) {
      nn.layer_norm(%x, %g, %b, axis=-1, epsilon=1e-05f)
    }"""
    expected = """
    def @main(%x: Tensor[(2, 5, 6), float32], %g: Tensor[(6), float32], %b: Tensor[(6), float32]) {
      %0 = mean(%x, axis=[2], keepdims=True);
      %1 = variance(%x, %0, axis=[2], keepdims=True);
      %2 = add(%1, 1e-05f);
      %3 = subtract(%x, %0);
      %4 = sqrt(%2);
      %5 = divide(%3, %4);
      %6 = multiply(%5, %g);
      add(%6, %b)
    }"""
    out = check(SimplifyInference(), before, expected)
    assert_same_numerics(parse(before), out, rtol=1e-4, atol=1e-4)


def test_group_norm_numerically_equal():
    need_ops("nn.group_norm", "mean", "variance", "reshape")
    before = """
    def @main(%x: Tensor[(2, 6, 3, 5), float32], %g: Tensor[(6), float32], %b: Tensor[(6), float32]) {
      nn.group_norm(%x, %g, %b, num_groups=3)
    }"""
    out = run(SimplifyInference(), parse(before))
    names = set()
    relay.expr_functor.post_order_visit(out["main"], lambda n: names.add(n.op.name)
                                        if isinstance(n, relay.Call) else None)
    assert "nn.group_norm" not in names and {"mean", "variance", "reshape"} <= names
    assert_same_numerics(parse(before), out, rtol=1e-4, atol=1e-4)


def test_nothing_to_do():
    before = f"def @main(%x: {X}) {{ nn.relu(%x) }}"
    check(SimplifyInference(), before, before)


def test_canonicalize_bias_add():
    before = f"""
    def @main(%x: {X}, %b: {V}, %y: Tensor[(3, 8), float32]) {{
      %0 = nn.bias_add(%x, %b);
      %1 = nn.bias_add(%y, %b, axis=-1);
      (%0, %1)
    }}"""
    expected = f"""
    def @main(%x: {X}, %b: {V}, %y: Tensor[(3, 8), float32]) {{
      %0 = expand_dims(%b, axis=1, num_newaxis=2);
      (add(%x, %0), add(%y, %b))
    }}"""
    out = check(CanonicalizeOps(), before, expected)
    assert_same_numerics(parse(before), out)


def test_levels():
    assert SimplifyInference().info.opt_level == 0
    assert CanonicalizeOps().info.opt_level == 3
