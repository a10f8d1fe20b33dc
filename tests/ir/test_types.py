import pytest

from kiln import relay
from kiln.error import KilnError
from kiln.ir import FuncType, IncompleteType, TensorType, TupleType, TypeVar, structural_equal


def test_tensor_type_text_and_equality():
    t = TensorType((1, 3, 224, 224), "float32")
    assert t.astext() == "Tensor[(1, 3, 224, 224), float32]"
    assert TensorType((), "int64").astext() == "int64"
    assert TensorType([3], "float32").astext() == "Tensor[(3), float32]"
    assert t == TensorType([1, 3, 224, 224], "float32")
    assert t != TensorType((1, 3, 224, 224), "float16")
    assert hash(t) == hash(TensorType((1, 3, 224, 224), "float32"))
    assert t.concrete_shape == (1, 3, 224, 224)


def test_any_dim():
    t = TensorType((relay.Any(), 3), "float32")
    assert t.astext() == "Tensor[(?, 3), float32]"
    assert t.is_dynamic()
    with pytest.raises(KilnError):
        t.concrete_shape


def test_tuple_and_func_types():
    a = TensorType((2,), "float32")
    tt = TupleType([a, a])
    assert tt.astext() == "(Tensor[(2), float32], Tensor[(2), float32])"
    ft = FuncType([a], tt)
    assert ft.astext() == "fn (Tensor[(2), float32]) -> (Tensor[(2), float32], Tensor[(2), float32])"


def test_type_var_alpha_equivalence():
    a, b = TypeVar("A"), TypeVar("B")
    assert structural_equal(FuncType([a], a, [a]), FuncType([b], b, [b]))
    assert not structural_equal(FuncType([a], a, [a]), FuncType([b], a, [b]))
    assert IncompleteType() != IncompleteType()


def test_bad_dim():
    with pytest.raises(KilnError):
        TensorType((1.5,), "float32")
    with pytest.raises(Exception):
        TensorType((1,), "floaty32")
