"""FoldConstant: constant subgraphs are evaluated with the ops' numpy references."""
import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.relay.transform import FoldConstant

import fuse_test_ops  # noqa: F401
from pass_helpers import check, need_ops, parse, run

T = "Tensor[(2, 3), float32]"


def c(v, dtype="float32"):
    return relay.const(np.asarray(v, dtype=dtype))


def test_folds_constant_chain_and_keeps_variables():
    a = np.arange(6, dtype="float32").reshape(2, 3)
    b = np.full((2, 3), 0.5, dtype="float32")
    before = f"""
    def @main(%x: {T}) {{
      %0 = ftest.add(meta[relay.Constant][0], meta[relay.Constant][1]);
      %1 = ftest.exp(%0);
      ftest.add(%x, %1)
    }}"""
    folded = np.exp(a + b).astype("float32")
    expected = f"def @main(%x: {T}) {{ ftest.add(%x, meta[relay.Constant][2]) }}"
    check(FoldConstant(), before, expected, consts=[c(a), c(b), c(folded)])


def test_tuple_of_constants_and_tuple_result():
    a = np.ones((1, 2, 1, 1), "float32")
    b = np.full((1, 2, 1, 1), 2.0, "float32")
    before = """
    def @main(%x: Tensor[(1, 2, 1, 1), float32]) {
      %0 = (meta[relay.Constant][0], meta[relay.Constant][1]);
      %1 = ftest.concat(%0);
      %2 = ftest.split(%1);
      %3 = %2.1;
      ftest.add(%x, %3)
    }"""
    expected = "def @main(%x: Tensor[(1, 2, 1, 1), float32]) { ftest.add(%x, meta[relay.Constant][2]) }"
    cat = np.concatenate([a, b], axis=1)
    check(FoldConstant(), before, expected, consts=[c(a), c(b), c(np.split(cat, 2, axis=1)[1])])


def test_does_not_fold_stateful_or_variable_dependent():
    a = np.ones((2, 3), "float32")
    before = f"""
    def @main(%x: {T}) {{
      %0 = ftest.random(meta[relay.Constant][0]);
      %1 = ftest.add(%x, meta[relay.Constant][0]);
      ftest.add(%0, %1)
    }}"""
    mod = parse(before, [c(a)])
    check(FoldConstant(), mod, mod, consts=[c(a)])


def test_let_bound_constants_propagate():
    a = np.ones((2, 3), "float32")
    before = f"""
    def @main(%x: {T}) {{
      let %c = ftest.exp(meta[relay.Constant][0]);
      ftest.add(%x, %c)
    }}"""
    expected = f"def @main(%x: {T}) {{ ftest.add(%x, meta[relay.Constant][1]) }}"
    check(FoldConstant(), before, expected, consts=[c(a), c(np.exp(a))])


def test_opt_level_2():
    p = FoldConstant()
    assert p.info.opt_level == 2
    a = np.ones((2, 3), "float32")
    mod = parse(f"def @main(%x: {T}) {{ ftest.add(%x, ftest.exp(meta[relay.Constant][0])) }}", [c(a)])
    seq = kiln.transform.Sequential([FoldConstant()])
    with kiln.transform.PassContext(opt_level=1):
        same = seq(mod)
    kiln.ir.assert_structural_equal(same, mod)
    with kiln.transform.PassContext(opt_level=2):
        folded = seq(mod)
    assert isinstance(folded["main"].body.args[1], relay.Constant)


def test_real_ops_keep_dtype_and_shape():
    need_ops("add", "cast", "reshape")
    before = """
    def @main(%x: Tensor[(2, 3), int32]) {
      %0 = cast(meta[relay.Constant][0], dtype="int32");
      %1 = add(%0, 1);
      %2 = reshape(%1, newshape=[2, 3]);
      add(%x, %2)
    }"""
    expected = "def @main(%x: Tensor[(2, 3), int32]) { add(%x, meta[relay.Constant][1]) }"
    consts = [c(np.arange(6, dtype="int8"), "int8"), c(np.arange(1, 7, dtype="int32").reshape(2, 3), "int32")]
    out = check(FoldConstant(), before, expected, consts=consts)
    assert out["main"].body.args[1].numpy().dtype == np.int32


def test_shape_of_static_folds():
    need_ops("shape_of", "add")
    before = """
    def @main(%x: Tensor[(2, 3), float32]) {
      %0 = shape_of(%x, dtype="int32");
      add(%0, 1)
    }"""
    expected = "def @main(%x: Tensor[(2, 3), float32]) { meta[relay.Constant][0] }"
    check(FoldConstant(), before, expected, consts=[c(np.array([3, 4], "int32"), "int32")])
