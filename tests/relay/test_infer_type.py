import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.error import TypeInferenceError
from kiln.ir import IRModule, Op, TensorType, TupleType, FuncType

import relay_test_ops  # noqa: F401

ADD, SCALE, SPLIT = Op.get("test.add"), Op.get("test.scale"), Op.get("test.split2")


def add(a, b):
    return relay.Call(ADD, [a, b])


def infer(expr):
    mod = relay.transform.InferType()(IRModule.from_expr(expr))
    return mod["main"]


def test_broadcast_call_and_checked_types():
    x = relay.var("x", shape=(4, 1))
    y = relay.var("y", shape=(1, 5))
    f = infer(relay.Function([x, y], add(x, y)))
    assert f.body.checked_type == TensorType((4, 5), "float32")
    assert f.ret_type == TensorType((4, 5), "float32")
    assert f.checked_type == FuncType([x.type_annotation, y.type_annotation], TensorType((4, 5), "float32"))
    assert f.params[0].checked_type == x.type_annotation


def test_tuple_getitem_let_if():
    x = relay.var("x", shape=(4, 3))
    c = relay.var("c", "bool")
    v = relay.var("v")
    parts = relay.Call(SPLIT, [x])
    body = relay.Let(v, relay.TupleGetItem(parts, 0),
                     relay.If(c, v, add(v, relay.TupleGetItem(parts, 1))))
    f = infer(relay.Function([x, c], body))
    half = TensorType((2, 3), "float32")
    assert f.ret_type == half
    assert f.body.var.type_annotation == half  # let var annotated by inference
    assert f.body.value.tuple_value.checked_type == TupleType([half, half])


def test_unannotated_params_of_called_function():
    x = relay.var("x", shape=(3,))
    p = relay.var("p")
    inner = relay.Function([p], add(p, p))
    f = infer(relay.Function([x], relay.Call(inner, [x])))
    assert f.body.checked_type == TensorType((3,), "float32")
    assert f.body.op.params[0].type_annotation == TensorType((3,), "float32")


def test_let_bound_function_solved_later():
    x = relay.var("x", shape=(2, 2))
    p = relay.var("p")
    g = relay.var("g")
    body = relay.Let(g, relay.Function([p], add(p, relay.const(1.0))), relay.Call(g, [x]))
    f = infer(relay.Function([x], body))
    assert f.ret_type == TensorType((2, 2), "float32")


def test_global_calls_and_polymorphism():
    mod = kiln.parser.parse("""
        def @id[T](%a: T) -> T { %a }
        def @double(%a: Tensor[(3), float32]) { test.add(%a, %a) }
        def @main(%x: Tensor[(3), float32], %i: int64) {
          %0 = @double(%x);
          %1 = @id(%0);
          (%1, @id(%i))
        }""")
    mod = relay.transform.InferType()(mod)
    t = mod["main"].checked_type.ret_type
    assert t == TupleType([TensorType((3,), "float32"), TensorType((), "int64")])
    assert mod.get_global_var("double").checked_type.ret_type == TensorType((3,), "float32")


def test_attrs_reach_the_relation():
    x = relay.var("x", shape=(2,))
    f = infer(relay.Function([x], relay.Call(SCALE, [x], SCALE.make_attrs(out_dtype="float16"))))
    assert f.ret_type == TensorType((2,), "float16")


def test_error_names_op_shapes_and_call():
    x = relay.var("x", shape=(2, 3))
    y = relay.var("y", shape=(4, 3))
    with pytest.raises(TypeInferenceError) as err:
        infer(relay.Function([x, y], add(add(x, x), y)))
    msg = str(err.value)
    assert "test.add" in msg and "(2, 3)" in msg and "(4, 3)" in msg
    assert "Tensor[(2, 3), float32], Tensor[(4, 3), float32]" in msg
    assert "offending expression: test.add(%0, %y)" in msg
    assert "def @main(" in msg and "an error occurred here" in msg


def test_error_dtype_clash_and_arity():
    x = relay.var("x", shape=(2,))
    i = relay.var("i", shape=(2,), dtype="int32")
    with pytest.raises(TypeInferenceError) as err:
        infer(relay.Function([x, i], add(x, i)))
    assert "float32 vs int32" in str(err.value)
    with pytest.raises(TypeInferenceError) as err:
        infer(relay.Function([x], relay.Call(ADD, [x])))
    assert "takes 2 inputs" in str(err.value)


def test_error_if_condition_and_branches():
    x = relay.var("x", shape=(2,))
    y = relay.var("y", shape=(3,))
    c = relay.var("c", "bool")
    with pytest.raises(TypeInferenceError) as err:
        infer(relay.Function([x, y, c], relay.If(c, x, y)))
    assert "branches" in str(err.value) and "Tensor[(2), float32]" in str(err.value)
    with pytest.raises(TypeInferenceError) as err:
        infer(relay.Function([x, y], relay.If(x, x, x)))
    assert "boolean scalar" in str(err.value)


def test_error_bad_tuple_index_and_return_type():
    x = relay.var("x", shape=(2,))
    with pytest.raises(TypeInferenceError) as err:
        infer(relay.Function([x], relay.TupleGetItem(relay.Tuple([x]), 3)))
    assert "out of range" in str(err.value)
    with pytest.raises(TypeInferenceError) as err:
        infer(relay.Function([x], x, ret_type=TensorType((3,), "float32")))
    assert "return type" in str(err.value)


def test_error_uninferable_and_missing_relation():
    x = relay.var("x")
    with pytest.raises(TypeInferenceError) as err:
        infer(relay.Function([x], add(x, x)))
    assert "annotate" in str(err.value)
    kiln.ir.register_op("test.norel")
    y = relay.var("y", shape=(1,))
    with pytest.raises(TypeInferenceError) as err:
        infer(relay.Function([y], relay.Call(Op.get("test.norel"), [y])))
    assert "no type relation" in str(err.value)


def test_infer_type_local_and_any_dims():
    x = relay.var("x", shape=(relay.Any(), 3))
    assert relay.transform.InferTypeLocal(relay.Tuple([x, x])) == TupleType([x.type_annotation] * 2)
    c = relay.const(np.zeros((2, 2)), "int64")
    assert relay.transform.InferTypeLocal(c) == TensorType((2, 2), "int64")


def test_infer_type_keeps_tir_functions():
    from kiln.tir import PrimFunc, Evaluate, IntImm
    prim = PrimFunc([], Evaluate(IntImm("int32", 0)))
    x = relay.var("x", shape=(1,))
    mod = IRModule({"main": relay.Function([x], x), "kernel": prim})
    out = relay.transform.InferType()(mod)
    assert out["kernel"] is prim and out["main"].ret_type == TensorType((1,), "float32")
