import textwrap

import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.error import ParseError
from kiln.ir import IRModule, Op, assert_structural_equal, structural_equal

import relay_test_ops  # noqa: F401

ADD, SCALE, SPLIT = Op.get("test.add"), Op.get("test.scale"), Op.get("test.split2")


def add(a, b):
    return relay.Call(ADD, [a, b])


def _infer(mod):
    return relay.transform.InferType()(mod)


def test_golden_text_with_types():
    x = relay.var("x", shape=(1, 3))
    y = relay.var("y", shape=(1, 3))
    s = add(x, y)
    body = relay.Call(SCALE, [add(s, relay.const(2.0))], SCALE.make_attrs(scale=0.5, axes=[1, 2]))
    mod = _infer(IRModule.from_expr(relay.Function([x, y], relay.Tuple([s, body]))))
    expected = textwrap.dedent("""\
        #[version = "0.0.5"]
        def @main(%x: Tensor[(1, 3), float32], %y: Tensor[(1, 3), float32]) -> (Tensor[(1, 3), float32], Tensor[(1, 3), float32]) {
          %0 = test.add(%x, %y) /* ty=Tensor[(1, 3), float32] */;
          %1 = test.add(%0, 2f /* ty=float32 */) /* ty=Tensor[(1, 3), float32] */;
          %2 = test.scale(%1, scale=0.5f, axes=[1, 2]) /* ty=Tensor[(1, 3), float32] */;
          (%0, %2) /* ty=(Tensor[(1, 3), float32], Tensor[(1, 3), float32]) */
        }""")
    assert mod.astext() == expected


def test_golden_let_if_fn_and_meta():
    x = relay.var("x", shape=(2,))
    c = relay.var("c", "bool")
    v = relay.var("v")
    p = relay.var("p", shape=(2,))
    inner = relay.Function([p], add(p, p)).with_attr("Primitive", 1)
    body = relay.Let(v, relay.Call(inner, [x]),
                     relay.If(c, v, add(v, relay.const(np.array([1, 2], "float32")))))
    f = relay.Function([x, c], body)
    text = f.astext(show_meta_data=False)
    expected = textwrap.dedent("""\
        #[version = "0.0.5"]
        fn (%x: Tensor[(2), float32], %c: bool) {
          %0 = fn (%p: Tensor[(2), float32], Primitive=1) {
            test.add(%p, %p)
          };
          let %v = %0(%x);
          if (%c) {
            %v
          } else {
            test.add(%v, meta[relay.Constant][0])
          }
        }
        /* For debugging purposes the metadata section has been omitted.
         * If you would like to see the full metadata section you can set the 
         * option to `True` when invoking `astext`. 
         */""")
    assert text == expected
    assert "#[metadata]" in f.astext()


def test_scalar_literals():
    vals = [relay.const(1), relay.const(2, "int64"), relay.const(1.5), relay.const(0.1, "float64"),
            relay.const(True), relay.const(-3, "int8"), relay.const(7, "uint8"), relay.const(1e-5)]
    text = relay.Tuple(vals).astext()
    assert "(1, 2i64, 1.5f, 0.1f64, True, -3i8, 7u8, 1e-05f)" in text
    back = kiln.parser.parse_expr(text)
    assert_structural_equal(back, relay.Tuple(vals))
    for a, b in zip(back.fields, vals):
        assert a.data.numpy().dtype == b.data.numpy().dtype


ROUND_TRIP = [
    """
    #[version = "0.0.5"]
    def @main(%x: Tensor[(1, 3, 4, 4), float32], %w: Tensor[(4), float32]) -> Tensor[(1, 3, 4, 4), float32] {
      %0 = test.add(%x, %w);
      %1 = test.scale(%0, scale=2f, layout="NHWC");
      test.add(%1, %0)
    }
    """,
    """
    def @f(%a: Tensor[(4), float32]) -> (Tensor[(2), float32], Tensor[(2), float32]) {
      test.split2(%a)
    }
    def @main(%x: Tensor[(4), float32], %flag: bool) {
      %0 = @f(%x);
      %1 = %0.0;
      let %y: Tensor[(2), float32] = test.add(%1, %0.1);
      if (%flag) {
        %y
      } else {
        %2 = fn (%p: Tensor[(2), float32], Primitive=1) -> Tensor[(2), float32] {
          test.add(%p, 1f)
        };
        %2(%y)
      }
    }
    """,
    """
    def @main(%x: Tensor[(?, 3), float32]) {
      %0 = (%x, %x, ());
      %1 = (%0,);
      %1.0
    }
    """,
]


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_parse_print_round_trip(text):
    mod = kiln.parser.parse(text)
    printed = mod.astext()
    again = kiln.parser.parse(printed)
    assert_structural_equal(mod, again)
    assert again.astext() == printed
    inferred = _infer(mod) if "?" not in text else None
    if inferred is not None:
        assert_structural_equal(kiln.parser.parse(inferred.astext()), inferred)


def test_round_trip_keeps_dag_sharing():
    mod = kiln.parser.parse(ROUND_TRIP[0])
    body = mod["main"].body
    assert body.args[1] is body.args[0].args[0]  # %0 used twice is one node


def test_round_trip_with_meta_constants():
    x = relay.var("x", shape=(2, 3))
    w = relay.const(np.random.RandomState(0).randn(2, 3).astype("float32"))
    i = relay.const(np.arange(6, dtype="int64").reshape(2, 3))
    mod = IRModule.from_expr(relay.Function([x], relay.Tuple([add(x, w), i, w])))
    back = kiln.parser.parse(mod.astext())
    assert_structural_equal(back, mod)
    np.testing.assert_array_equal(back["main"].body.fields[2].data.numpy(), w.data.numpy())
    assert back["main"].body.fields[2] is back["main"].body.fields[0].args[1]
    # printing without metadata then parsing with an explicit table
    text = mod.astext(show_meta_data=False)
    back2 = kiln.parser.parse(text, init_meta_table={"relay.Constant": [w, i]})
    assert_structural_equal(back2, mod)


def test_fromtext_aliases_and_expression_module():
    mod = relay.fromtext("fn (%x: float32) { test.add(%x, %x) }")
    assert "main" in mod and isinstance(mod["main"], relay.Function)
    e = kiln.parser.parse_expr("%0 = (1, 2); %0.1")
    assert isinstance(e, relay.TupleGetItem) and e.index == 1
    assert kiln.parser.fromtext("def @main() { 1 }")["main"].body.data.numpy() == 1
    assert kiln.parser.parse_type("Tensor[(1, 2), int8]") == relay.TensorType((1, 2), "int8")


def test_default_attrs_are_not_printed_and_parse_fills_them():
    call = relay.Call(SCALE, [relay.var("x", shape=(1,))], SCALE.make_attrs())
    assert "test.scale(%x)" in call.astext()
    back = kiln.parser.parse_expr("fn (%x: Tensor[(1), float32]) { test.scale(%x) }")
    assert back.body.attrs.layout == "NCHW" and back.body.attrs.scale == 1.0


def _parse_error(text):
    with pytest.raises(ParseError) as err:
        kiln.parser.parse(text)
    return str(err.value)


def test_parse_error_unknown_op_suggests():
    msg = _parse_error("def @main(%x: float32) {\n  test.ad(%x, %x)\n}")
    assert "from_string:2:3" in msg and "test.add" in msg and "test.ad(%x, %x)" in msg and "^" in msg


def test_parse_error_unbound_variable():
    msg = _parse_error("def @main(%x: float32) {\n  test.add(%x, %y)\n}")
    assert "2:16" in msg and "unbound variable %y" in msg


def test_parse_error_bad_attribute():
    msg = _parse_error("def @main(%x: float32) {\n  test.scale(%x, scal=2f)\n}")
    assert "scal" in msg and "scale" in msg and "2:18" in msg
    msg = _parse_error("def @main(%x: float32) {\n  test.add(%x, %x, axis=1)\n}")
    assert "takes no attributes" in msg


def test_parse_error_syntax_and_types():
    assert "expected ')'" in _parse_error("def @main(%x: float32 {\n  %x\n}")
    assert "unknown type or dtype" in _parse_error("def @main(%x: flaot32) { %x }")
    assert "used before it is bound" in _parse_error("def @main(%x: float32) { %3 }")
    assert "unknown global function @g" in _parse_error("def @main(%x: float32) { @g(%x) }")
    assert "no metadata table" in _parse_error("def @main() { meta[relay.Constant][0] }")
    assert "does not fit" in _parse_error("def @main() { 300i8 }")
    assert "defined twice" in _parse_error("def @f() { 1 } def @f() { 2 }")
    assert "unterminated comment" in _parse_error("def @main() { /* 1 }")
    assert "unexpected character" in _parse_error("def @main() { 1 $ }")


def test_comments_and_type_annotations_are_ignored():
    mod = kiln.parser.parse("""
        // a line comment
        def @main(%x: float32) -> float32 {
          %0 = test.add(%x, %x) /* ty=float32 /* nested */ */;
          %0 /* ty=float32 */
        }""")
    assert isinstance(mod["main"].body, relay.Call)


def test_printer_sanitizes_and_uniquifies_names():
    a1, a2 = relay.var("input.1", shape=(1,)), relay.var("input.1", shape=(1,))
    b = relay.var("0", shape=(1,))
    f = relay.Function([a1, a2, b], relay.Tuple([a1, a2, b]))
    text = f.astext()
    assert "%input_1: " in text and "%input_1_1: " in text and "%v0: " in text
    assert_structural_equal(kiln.parser.parse_expr(text), f)


def test_node_shared_by_branches_prints_once_outside():
    x = relay.var("x", shape=(2,))
    c = relay.var("c", "bool")
    shared = add(x, x)
    f = relay.Function([x, c], relay.If(c, add(shared, x), shared))
    text = f.astext()
    assert text.count("test.add(%x, %x)") == 1
    back = kiln.parser.parse_expr(text)
    assert_structural_equal(back, f)
    assert back.body.true_branch.args[0] is back.body.false_branch
