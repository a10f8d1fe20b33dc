"""FuseOps: TVM's fusion rules, checked against expected programs written as text."""
import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.ir import assert_structural_equal
from kiln.relay.transform.fuse_ops import FuseOps

import fuse_test_ops  # noqa: F401  (registers ftest.* ops)

T = "Tensor[(1, 4, 5, 5), float32]"
W = "Tensor[(4, 4, 1, 1), float32]"


def parse(text):
    return kiln.parser.parse(text)


def run_fuse(mod, opt_level=3, **kw):
    with kiln.transform.PassContext(opt_level=opt_level, config=kw.get("config")):
        return FuseOps(kw.get("fuse_opt_level", -1))(mod)


def check(before, expected, opt_level=3, **kw):
    out = run_fuse(parse(before), opt_level, **kw)
    exp = relay.transform.InferType()(parse(expected))
    assert_structural_equal(out, exp)
    return out


def primitive_groups(mod):
    """The op names of each fused function, in execution order."""
    groups = []

    def visit(node):
        if isinstance(node, relay.Call) and isinstance(node.op, relay.Function) and node.op.get_attr("Primitive"):
            ops = []
            relay.expr_functor.post_order_visit(
                node.op.body, lambda n: ops.append(n.op.name) if isinstance(n, relay.Call) and
                isinstance(n.op, kiln.ir.Op) else None)
            groups.append(ops)
    relay.expr_functor.post_order_visit(mod["main"], visit)
    return groups


RESIDUAL = f"""
def @main(%x: {T}, %w1: {W}, %b1: Tensor[(4, 1, 1), float32], %w2: {W}, %b2: Tensor[(4, 1, 1), float32]) {{
  %0 = ftest.conv(%x, %w1);
  %1 = ftest.add(%0, %b1);
  %2 = ftest.relu(%1);
  %3 = ftest.conv(%2, %w2);
  %4 = ftest.add(%3, %b2);
  %5 = ftest.add(%4, %x);
  ftest.relu(%5)
}}"""


def test_residual_block_groups():
    expected = f"""
    def @main(%x: {T}, %w1: {W}, %b1: Tensor[(4, 1, 1), float32], %w2: {W}, %b2: Tensor[(4, 1, 1), float32]) {{
      %0 = fn (%p0: {T}, %p1: {W}, %p2: Tensor[(4, 1, 1), float32], Primitive=1) {{
        %10 = ftest.conv(%p0, %p1);
        %11 = ftest.add(%10, %p2);
        ftest.relu(%11)
      }};
      %1 = %0(%x, %w1, %b1);
      %2 = fn (%p0: {T}, %p1: {W}, %p2: Tensor[(4, 1, 1), float32], %p3: {T}, Primitive=1) {{
        %12 = ftest.conv(%p0, %p1);
        %13 = ftest.add(%12, %p2);
        %14 = ftest.add(%13, %p3);
        ftest.relu(%14)
      }};
      %2(%1, %w2, %b2, %x)
    }}"""
    out = check(RESIDUAL, expected)
    assert primitive_groups(out) == [["ftest.conv", "ftest.add", "ftest.relu"],
                                     ["ftest.conv", "ftest.add", "ftest.add", "ftest.relu"]]


def test_opt_level_0_wraps_each_op_alone():
    out = run_fuse(parse(RESIDUAL), opt_level=0)
    assert primitive_groups(out) == [["ftest.conv"], ["ftest.add"], ["ftest.relu"], ["ftest.conv"],
                                     ["ftest.add"], ["ftest.add"], ["ftest.relu"]]
    # fuse_opt_level overrides the context
    out2 = run_fuse(parse(RESIDUAL), opt_level=3, fuse_opt_level=0)
    assert_structural_equal(out, out2)


def test_two_out_elemwise_ops_never_share_a_group():
    # the first conv's output feeds the second conv: conv is not elementwise, so they stay apart
    before = f"""
    def @main(%x: {T}, %w: {W}) {{
      %0 = ftest.conv(%x, %w);
      ftest.conv(%0, %w)
    }}"""
    assert primitive_groups(run_fuse(parse(before))) == [["ftest.conv"], ["ftest.conv"]]


def test_elemwise_into_reduction_and_reduction_ends_group():
    before = f"""
    def @main(%x: {T}) {{
      %0 = ftest.exp(%x);
      %1 = ftest.sum(%0);
      ftest.exp(%1)
    }}"""
    expected = f"""
    def @main(%x: {T}) {{
      %0 = fn (%p0: {T}, Primitive=1) {{
        %10 = ftest.exp(%p0);
        ftest.sum(%10)
      }};
      %1 = %0(%x);
      %2 = fn (%p0: Tensor[(1), float32], Primitive=1) {{ ftest.exp(%p0) }};
      %2(%1)
    }}"""
    check(before, expected)


def test_injective_fuses_into_consumer_and_producer():
    before = f"""
    def @main(%x: {T}) {{
      %0 = ftest.exp(%x);
      %1 = ftest.copy(%0);
      ftest.relu(%1)
    }}"""
    expected = f"""
    def @main(%x: {T}) {{
      %0 = fn (%p0: {T}, Primitive=1) {{
        %10 = ftest.exp(%p0);
        %11 = ftest.copy(%10);
        ftest.relu(%11)
      }};
      %0(%x)
    }}"""
    check(before, expected)


def test_opaque_stands_alone():
    before = f"""
    def @main(%x: {T}) {{
      %0 = ftest.exp(%x);
      %1 = ftest.opaque(%0);
      ftest.relu(%1)
    }}"""
    assert primitive_groups(run_fuse(parse(before))) == [["ftest.exp"], ["ftest.opaque"], ["ftest.relu"]]


def test_tuple_feeding_concatenate_fuses():
    before = f"""
    def @main(%x: {T}, %y: {T}) {{
      %0 = ftest.exp(%x);
      %1 = ftest.relu(%y);
      %2 = (%0, %1);
      %3 = ftest.concat(%2);
      ftest.exp(%3)
    }}"""
    expected = f"""
    def @main(%x: {T}, %y: {T}) {{
      %0 = fn (%p0: {T}, %p1: {T}, Primitive=1) {{
        %10 = ftest.exp(%p0);
        %11 = ftest.relu(%p1);
        %12 = (%10, %11);
        %13 = ftest.concat(%12);
        ftest.exp(%13)
      }};
      %0(%x, %y)
    }}"""
    check(before, expected)


def test_tuple_output_is_not_fused():
    before = f"""
    def @main(%x: {T}) {{
      %0 = ftest.exp(%x);
      %1 = ftest.relu(%0);
      (%0, %1)
    }}"""
    out = run_fuse(parse(before))
    assert isinstance(out["main"].body, relay.Tuple)
    assert primitive_groups(out) == [["ftest.exp"], ["ftest.relu"]]


def test_diamond_fuses_into_post_dominator():
    before = f"""
    def @main(%x: {T}, %w: {W}) {{
      %0 = ftest.conv(%x, %w);
      %1 = ftest.exp(%0);
      %2 = ftest.relu(%0);
      %3 = ftest.add(%1, %2);
      ftest.add(%3, %0)
    }}"""
    assert primitive_groups(run_fuse(parse(before))) == [
        ["ftest.conv", "ftest.exp", "ftest.relu", "ftest.add", "ftest.add"]]


def test_diamond_through_opaque_is_not_fused():
    before = f"""
    def @main(%x: {T}) {{
      %0 = ftest.exp(%x);
      %1 = ftest.opaque(%0);
      ftest.add(%0, %1)
    }}"""
    # exp's post-dominator is the add, but one path goes through an opaque op
    assert primitive_groups(run_fuse(parse(before))) == [["ftest.exp"], ["ftest.opaque"], ["ftest.add"]]


def test_scalar_constants_are_inlined_tensor_constants_are_params():
    before = f"""
    def @main(%x: {T}) {{
      %0 = ftest.add(%x, 1f);
      ftest.mul(%0, meta[relay.Constant][0])
    }}"""
    c = relay.const(np.arange(4, dtype="float32").reshape(4, 1, 1))
    mod = kiln.parser.parse(before, init_meta_table={"relay.Constant": [c]})
    out = run_fuse(mod)
    fn = out["main"].body.op
    assert fn.get_attr("Primitive") == 1
    assert len(fn.params) == 2  # %x and the tensor constant; the scalar 1f is inside
    assert isinstance(out["main"].body.args[1], relay.Constant)


def test_max_depth_limits_group_size():
    chain = "\n".join(f"  %{i + 1} = ftest.exp(%{i});" for i in range(7))
    before = f"def @main(%x: {T}) {{\n  %0 = ftest.exp(%x);\n{chain}\n  %7\n}}"
    groups = primitive_groups(run_fuse(parse(before), config={"relay.FuseOps.max_depth": 3}))
    assert sum(len(g) for g in groups) == 8
    assert max(len(g) for g in groups) <= 3
    assert len(primitive_groups(run_fuse(parse(before)))) == 1


def test_split_and_tuple_getitem():
    before = f"""
    def @main(%x: Tensor[(1, 8, 5, 5), float32]) {{
      %0 = ftest.exp(%x);
      %1 = ftest.split(%0);
      %2 = %1.0;
      %3 = %1.1;
      ftest.add(%2, %3)
    }}"""
    assert primitive_groups(run_fuse(parse(before))) == [["ftest.exp", "ftest.split", "ftest.add"]]


def test_already_fused_functions_are_left_alone():
    once = run_fuse(parse(RESIDUAL))
    twice = run_fuse(once)
    assert_structural_equal(once, twice)


def test_fuse_ops_registered_at_level_0_and_inside_sequential():
    p = FuseOps()
    assert p.info.opt_level == 0 and p.info.name == "FuseOps"
    seq = kiln.transform.Sequential([relay.transform.FuseOps()])
    with kiln.transform.PassContext(opt_level=2, disabled_pass=["FuseOps"]):
        out = seq(parse(RESIDUAL))
    assert primitive_groups(out) == []


def test_nothing_fuses_across_let_or_if():
    before = f"""
    def @main(%x: {T}, %c: bool) {{
      let %a = ftest.exp(%x);
      let %b = ftest.relu(%a);
      %0 = if (%c) {{ ftest.exp(ftest.relu(%b)) }} else {{ %b }};
      ftest.add(%0, %a)
    }}"""
    expected = f"""
    def @main(%x: {T}, %c: bool) {{
      %0 = fn (%p0: {T}, Primitive=1) {{ ftest.exp(%p0) }};
      let %a = %0(%x);
      %1 = fn (%p0: {T}, Primitive=1) {{ ftest.relu(%p0) }};
      let %b = %1(%a);
      %2 = if (%c) {{
        %3 = fn (%p0: {T}, Primitive=1) {{
          %10 = ftest.relu(%p0);
          ftest.exp(%10)
        }};
        %3(%b)
      }} else {{
        %b
      }};
      %4 = fn (%p0: {T}, %p1: {T}, Primitive=1) {{ ftest.add(%p0, %p1) }};
      %4(%2, %a)
    }}"""
    check(before, expected)
