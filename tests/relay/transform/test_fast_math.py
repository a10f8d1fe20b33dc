"""FastMath: exp / tanh / erf replaced by their fast approximations."""
import pytest

import kiln
from kiln.relay.transform import FastMath

from pass_helpers import assert_same_numerics, check, need_ops, parse, run


def test_fast_math_replaces_and_stays_close():
    need_ops("exp", "tanh", "erf", "fast_exp", "fast_tanh", "fast_erf", "add")
    before = """
    def @main(%x: Tensor[(3, 7), float32]) {
      %0 = exp(%x);
      %1 = tanh(%x);
      %2 = erf(%x);
      %3 = add(%0, %1);
      add(%3, %2)
    }"""
    expected = """
    def @main(%x: Tensor[(3, 7), float32]) {
      %0 = fast_exp(%x);
      %1 = fast_tanh(%x);
      %2 = fast_erf(%x);
      %3 = add(%0, %1);
      add(%3, %2)
    }"""
    out = check(FastMath(), before, expected, opt_level=4)
    assert_same_numerics(parse(before), out, rtol=1e-4, atol=1e-4)


def test_fast_math_only_at_level_4_in_sequential():
    need_ops("exp", "fast_exp")
    mod = parse("def @main(%x: Tensor[(3), float32]) { exp(%x) }")
    seq = kiln.transform.Sequential([FastMath()])
    assert run(seq, mod, opt_level=3)["main"].body.op.name == "exp"
    assert run(seq, mod, opt_level=4)["main"].body.op.name == "fast_exp"
    assert run(seq, mod, opt_level=3, required_pass=["FastMath"])["main"].body.op.name == "fast_exp"
