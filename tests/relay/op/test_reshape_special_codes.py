"""Reshape's special codes (0, -1, -2, -3, -4, reverse, allowzero) have one home, ``topi.infer_reshape_shape``:
Relay's type relation, its shape function and TOPI's compute all answer the same, and the compiled kernel moves
the data as numpy's reshape does."""
import numpy as np
import pytest

import kiln
from kiln import relay, te, topi
from kiln.contrib import graph_executor
from kiln.error import KilnError, TypeInferenceError
from kiln.relay.op.shape_func import reshape_shape_func, reverse_reshape_shape_func
from kiln.topi.transform import infer_reshape_shape

from op_helpers import out_type, rnd

# (input shape, newshape, expected) -- TVM's documented examples of each code, plus odd sizes
CODES = [
    ((2, 3, 4), (0, -1), (2, 12)),            # 0 copies, -1 infers
    ((2, 3, 4), (0, 0, -1), (2, 3, 4)),
    ((7, 5), (-1,), (35,)),
    ((2, 3, 4), (-1, 0), (8, 3)),             # -1 consumes an input dim as well: 0 copies the second (3)
    ((2, 3, 4), (-2,), (2, 3, 4)),            # -2 copies the rest
    ((2, 3, 4), (6, 1, -2), (6, 1, 4)),
    ((2, 3, 4), (-3, 4), (6, 4)),             # -3 merges two
    ((2, 3, 5, 7), (-3, -3), (6, 35)),
    ((2, 3, 4), (-4, 1, 2, -2), (1, 2, 3, 4)),  # -4 splits one into the next two
    ((2, 3, 4), (2, -4, -1, 3, 4), (2, 1, 3, 4)),
    ((6, 5), (-4, 3, -1, 5), (3, 2, 5)),
]

# reverse reshape: the codes are read right to left (TVM's relay.reverse_reshape doc: (10, 5, 4), (-1, 0) -> (50, 4))
REVERSE = [
    ((10, 5, 4), (-1, 0), (50, 4)),
    ((10, 5, 4), (0, -1), (5, 40)),
    ((2, 3, 4), (-3, 0), (6, 4)),
    ((6, 5), (3, -1, 5), (3, 2, 5)),
]


@pytest.mark.parametrize("shape,newshape,expect", CODES)
def test_one_rule_for_topi_relay_and_shape_func(shape, newshape, expect):
    assert tuple(infer_reshape_shape(shape, newshape)) == expect
    x = rnd(*shape)
    assert tuple(out_type(lambda v: relay.reshape(v, newshape), x).shape) == expect
    attrs = relay.reshape(relay.var("x", shape=shape), newshape).attrs
    assert reshape_shape_func(attrs, [shape], [len(expect)]) == [expect]
    A = te.placeholder(shape, name="A")
    assert tuple(int(d) for d in topi.reshape(A, newshape).shape) == expect


@pytest.mark.parametrize("shape,newshape,expect", REVERSE)
def test_reverse_reshape(shape, newshape, expect):
    assert tuple(infer_reshape_shape(shape, newshape, reverse=True)) == expect
    x = rnd(*shape)
    assert tuple(out_type(lambda v: relay.reverse_reshape(v, newshape), x).shape) == expect
    attrs = relay.reverse_reshape(relay.var("x", shape=shape), newshape).attrs
    assert reverse_reshape_shape_func(attrs, [shape], [len(expect)]) == [expect]


def test_allowzero_keeps_a_literal_zero():
    assert tuple(infer_reshape_shape((0, 3), (3, 0), allowzero=True)) == (3, 0)
    assert tuple(infer_reshape_shape((0, 3), (0, 3))) == (0, 3)   # 0 copies the input's 0
    assert tuple(infer_reshape_shape((2, 3), (0, 3))) == (2, 3)   # 0 copies 2 without allowzero
    with pytest.raises(KilnError, match=r"6 elements.*\(0, 3\)"):
        infer_reshape_shape((2, 3), (0, 3), allowzero=True)       # a literal 0: 0 elements, not 6
    t = out_type(lambda v: relay.reshape(v, (3, 0), allowzero=True), np.zeros((0, 3), "float32"))
    assert tuple(t.shape) == (3, 0)
    attrs = relay.reshape(relay.var("x", shape=(0, 3)), (3, 0), allowzero=True).attrs
    assert reshape_shape_func(attrs, [(0, 3)], [2]) == [(3, 0)]


@pytest.mark.parametrize("newshape,match", [
    ((-1, -1), "more than one -1"), ((7, -1), "does not divide"), ((4, 4), r"\(2, 3, 4\).*24 elements"),
    ((0, 0, 0, 0), "no input dimension"), ((2, 3, -3), "-3 needs two input dimensions"),
    ((-4, -1, -1, -2), "two -1"), ((-4, 5, 2, -2), "cannot split"), ((-5,), "invalid value"),
])
def test_bad_codes_are_clear_errors(newshape, match):
    with pytest.raises(KilnError, match=match):
        infer_reshape_shape((2, 3, 4), newshape)
    with pytest.raises(TypeInferenceError, match=match):
        out_type(lambda v: relay.reshape(v, newshape), rnd(2, 3, 4))


def test_symbolic_dims_stay_expressions():
    n = te.var("n")
    out = infer_reshape_shape((n, 3, 4), (0, -1))
    assert out[1] == 12 and out[0] is n
    out = infer_reshape_shape((n, 3, 4), (-1, 4))
    assert isinstance(out[0], kiln.tir.PrimExpr) and out[1] == 4


@pytest.mark.parametrize("shape,newshape,reverse", [
    ((3, 5, 7), (-4, 1, 3, -3), False), ((6, 5, 3), (0, -1), False), ((10, 5, 4), (-1, 0), True),
])
def test_compiled_kernel_matches_numpy(shape, newshape, reverse):
    x = rnd(*shape)
    v = relay.var("x", shape=shape)
    body = relay.reverse_reshape(v, newshape) if reverse else relay.reshape(v, newshape)
    # an add after the reshape keeps it a real kernel (a lone reshape is a view in the graph executor)
    body = relay.add(body, relay.const(1.0))
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(kiln.IRModule.from_expr(relay.Function([v], body)), target="llvm")
    m = graph_executor.GraphModule(lib["default"](kiln.cpu(0)))
    m.set_input("x", x)
    m.run()
    expect = infer_reshape_shape(shape, newshape, reverse=reverse)
    np.testing.assert_array_equal(m.get_output(0).numpy(), x.reshape(expect) + 1.0)
