import kiln
from kiln import relay
from kiln.ir import IRModule, assert_structural_equal, structural_equal

import relay_test_ops  # noqa: F401


def parse(text):
    return kiln.parser.parse(text)


def test_to_anf_binds_every_call_and_back():
    mod = parse("""
        def @main(%x: Tensor[(2), float32], %c: bool) {
          %0 = test.add(%x, %x);
          %1 = test.add(%0, %0);
          if (%c) { %1 } else { test.add(%1, %x) }
        }""")
    anf = relay.transform.ToANormalForm()(mod)
    body = anf["main"].body
    lets = []
    while isinstance(body, relay.Let):
        lets.append(body)
        body = body.body
    assert len(lets) == 3 and isinstance(body, relay.Var)
    assert isinstance(lets[2].value, relay.If)
    for let in lets[:2]:
        assert all(isinstance(a, (relay.Var, relay.Constant)) for a in let.value.args)
    # the inferred types agree before and after
    t1 = relay.transform.InferType()(mod)["main"].checked_type
    t2 = relay.transform.InferType()(anf)["main"].checked_type
    assert t1 == t2
    back = relay.transform.ToGraphNormalForm()(anf)
    assert_structural_equal(back, mod)


def test_dead_code_elimination():
    mod = parse("""
        def @main(%x: Tensor[(2), float32]) {
          let %a = test.add(%x, %x);
          let %dead = test.add(%a, %a);
          let %dead2 = test.add(%dead, %x);
          let %b = test.add(%a, %x);
          test.add(%b, %b)
        }""")
    out = relay.transform.DeadCodeElimination()(mod)
    expected = parse("""
        def @main(%x: Tensor[(2), float32]) {
          let %a = test.add(%x, %x);
          let %b = test.add(%a, %x);
          test.add(%b, %b)
        }""")
    assert_structural_equal(out, expected)
    inlined = relay.transform.DeadCodeElimination(inline_once=True)(mod)
    expected_inline = parse("""
        def @main(%x: Tensor[(2), float32]) {
          let %b = test.add(test.add(%x, %x), %x);
          test.add(%b, %b)
        }""")
    assert_structural_equal(inlined, expected_inline)


def test_remove_unused_functions():
    mod = parse("""
        def @used(%a: float32) { test.add(%a, %a) }
        def @indirect(%a: float32) { @used(%a) }
        def @unused(%a: float32) { %a }
        def @main(%x: float32) { @indirect(%x) }""")
    out = relay.transform.RemoveUnusedFunctions()(mod)
    assert sorted(gv.name_hint for gv in out.get_global_vars()) == ["indirect", "main", "used"]
    out2 = relay.transform.RemoveUnusedFunctions(["unused"])(mod)
    assert [gv.name_hint for gv in out2.get_global_vars()] == ["unused"]


def test_inline_marked_functions():
    mod = parse("""
        def @sq(%a: Tensor[(2), float32], Inline=1) {
          let %t = test.add(%a, %a);
          %t
        }
        def @main(%x: Tensor[(2), float32]) {
          %0 = @sq(%x);
          @sq(%0)
        }""")
    out = relay.transform.Inline()(mod)
    assert "sq" not in out
    expected = parse("""
        def @main(%x: Tensor[(2), float32]) {
          %0 = {
            let %t1 = test.add(%x, %x);
            %t1
          };
          let %t2 = test.add(%0, %0);
          %t2
        }""")
    assert_structural_equal(out, expected)
    assert relay.analysis.well_formed(out["main"])
    # the original module is untouched
    assert "sq" in mod


def test_passes_compose_in_sequential():
    mod = parse("""
        def @main(%x: Tensor[(2), float32]) {
          let %dead = test.add(%x, %x);
          test.add(%x, %x)
        }""")
    seq = kiln.transform.Sequential([relay.transform.DeadCodeElimination(), relay.transform.InferType()])
    with kiln.transform.PassContext(opt_level=1):
        out = seq(mod)
    assert isinstance(out["main"].body, relay.Call)
    assert out["main"].body.checked_type == relay.TensorType((2,), "float32")
    with kiln.transform.PassContext(opt_level=0):
        out0 = seq(mod)
    assert isinstance(out0["main"].body, relay.Let)  # DCE (opt_level 1) skipped
