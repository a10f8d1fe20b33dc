"""SinkReshape: a reshape after dense / batch_matmul that only merges or splits leading axes moves below its
elementwise epilogue, so FuseOps fuses the epilogue into the anchor's kernel; numerics unchanged."""
import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.contrib import graph_executor
from kiln.relay import transform as T
from kiln.relay.transform.sink_reshape import sink_reshape

from pass_helpers import need_ops, parse

TARGET = "llvm -mcpu=core-avx2"


@pytest.fixture(autouse=True)
def _ops():
    need_ops("nn.dense", "nn.batch_matmul", "reshape", "add", "erf", "cast", "nn.bias_add", "mean")


def _run(mod):
    with kiln.transform.PassContext(opt_level=3):
        return T.SinkReshape()(mod)


def _kernels(mod, disabled=()):
    """Op lists of the fused groups relay.build would make (reshape-only groups are no-ops: left out)."""
    with kiln.transform.PassContext(opt_level=3, disabled_pass=list(disabled)):
        opt, _ = relay.optimize(mod, TARGET)
    groups = []

    def visit(n):
        if isinstance(n, relay.Call) and isinstance(n.op, relay.Function) and n.op.get_attr("Primitive"):
            ops = []
            relay.expr_functor.post_order_visit(
                n.op.body, lambda m: ops.append(m.op.name) if isinstance(m, relay.Call) else None)
            if set(ops) != {"reshape"}:
                groups.append(tuple(ops))
    relay.expr_functor.post_order_visit(opt["main"], visit)
    return groups


def _build_run(mod, inputs, disabled=()):
    with kiln.transform.PassContext(opt_level=3, disabled_pass=list(disabled)):
        lib = relay.build(mod, "llvm")
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    for k, v in inputs.items():
        m.set_input(k, v)
    m.run()
    return m.get_output(0).numpy()


def _erf(x):
    import math
    return np.vectorize(math.erf, otypes=[np.float32])(x)


# A BERT feed-forward block as the ONNX importer writes it: dense on [b*s, K], reshape back to [b, s, N],
# bias, GELU (its input used twice), residual add of a [b, s, N] tensor, then a LayerNorm-like mean.
FFN = """
def @main(%x: Tensor[(2, 7, 24), float32], %w: Tensor[(40, 24), float32], %bias: Tensor[(40), float32],
          %w2: Tensor[(24, 40), float32], %b2: Tensor[(1, 1, 24), float32]) {
  %0 = reshape(%x, newshape=[14, 24]);
  %1 = nn.dense(%0, %w, units=40);
  %2 = reshape(%1, newshape=[2, 7, 40]);
  %3 = add(%2, %bias);
  %4 = divide(%3, 1.41421f);
  %5 = erf(%4);
  %6 = add(%5, 1f);
  %7 = multiply(%3, %6);
  %8 = multiply(%7, 0.5f);
  %9 = reshape(%8, newshape=[14, 40]);
  %10 = nn.dense(%9, %w2, units=24);
  %11 = reshape(%10, newshape=[2, 7, 24]);
  %12 = add(%11, %b2);
  %13 = add(%12, %x);
  %14 = mean(%13, axis=[2], keepdims=True);
  subtract(%13, %14)
}
"""


def _ffn_inputs(seed=0):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((2, 7, 24)).astype("float32"),
            "w": rng.standard_normal((40, 24)).astype("float32") * 0.2,
            "bias": rng.standard_normal(40).astype("float32"),
            "w2": rng.standard_normal((24, 40)).astype("float32") * 0.2,
            "b2": rng.standard_normal((1, 1, 24)).astype("float32")}


def test_ffn_epilogues_move_into_the_dense_kernels():
    mod = T.InferType()(parse(FFN))
    before, after = _kernels(mod, disabled=["SinkReshape"]), _kernels(mod)
    assert len(after) == len(before) - 2
    dense_groups = [g for g in after if "nn.contrib_dense_pack" in g or "nn.dense" in g]
    assert len(dense_groups) == 2
    assert "erf" in dense_groups[0] and dense_groups[0].count("multiply") == 2
    assert dense_groups[1].count("add") == 2  # bias and residual
    assert not any("reshape" in g and ("erf" in g or "add" in g) for g in after if len(g) > 1 and g[0] == "reshape")


def test_ffn_numerics_identical():
    mod = T.InferType()(parse(FFN))
    inp = _ffn_inputs()
    ref_off = _build_run(mod, inp, disabled=["SinkReshape"])
    got = _build_run(mod, inp)
    np.testing.assert_array_equal(got, ref_off)
    x, w, b, w2, b2 = (inp[k] for k in ("x", "w", "bias", "w2", "b2"))
    h = (x.reshape(14, 24) @ w.T).reshape(2, 7, 40) + b
    h = h * (_erf(h / np.float32(1.41421)) + 1) * 0.5
    y = (h.reshape(14, 40) @ w2.T).reshape(2, 7, 24) + b2 + x
    np.testing.assert_allclose(got, y - y.mean(axis=2, keepdims=True), rtol=1e-4, atol=1e-4)


def test_rewritten_graph_shape():
    mod = T.InferType()(parse(FFN))
    out = T.InferType()(_run(mod))
    text = out["main"].astext(show_meta_data=False)
    # the bias stays (40,), the residual operand %x is reshaped to (14, 24), the [1, 1, 24] bias to (24,)
    assert "reshape(%x, newshape=[14, 24])" in text
    assert "reshape(%b2, newshape=[24])" in text
    body = out["main"].body
    # the mean reads a reshape of the flat residual sum: the reshape is after the epilogue
    assert body.op.name == "subtract"
    assert body.args[0].op.name == "reshape" and body.args[0].args[0].op.name == "add"


def test_int8_dequantize_epilogue():
    text = """
def @main(%x: Tensor[(1, 9, 16), int16], %w: Tensor[(12, 16), int16], %s: Tensor[(), float32],
          %bias: Tensor[(12), float32]) {
  %0 = reshape(%x, newshape=[9, 16]);
  %1 = nn.dense(%0, %w, units=12, out_dtype="int32");
  %2 = reshape(%1, newshape=[1, 9, 12]);
  %3 = cast(%2, dtype="float32");
  %4 = multiply(%3, %s);
  add(%4, %bias)
}
"""
    mod = T.InferType()(parse(text))
    before, after = _kernels(mod, disabled=["SinkReshape"]), _kernels(mod)
    assert len(after) == len(before) - 1
    assert any("cast" in g and "add" in g and ("nn.dense" in g or "nn.contrib_dense_pack" in g) for g in after)
    rng = np.random.default_rng(3)
    inp = {"x": rng.integers(-300, 300, (1, 9, 16)).astype("int16"),
           "w": rng.integers(-128, 128, (12, 16)).astype("int16"),
           "s": np.array(0.013, "float32"), "bias": rng.standard_normal(12).astype("float32")}
    got = _build_run(mod, inp)
    np.testing.assert_array_equal(got, _build_run(mod, inp, disabled=["SinkReshape"]))
    acc = (inp["x"].reshape(9, 16).astype(np.int64) @ inp["w"].T.astype(np.int64)).astype(np.float32)
    np.testing.assert_allclose(got, (acc * inp["s"]).reshape(1, 9, 12) + inp["bias"], rtol=1e-6, atol=1e-5)


def test_batch_matmul_split_leading_axes():
    text = """
def @main(%a: Tensor[(6, 5, 8), float32], %b: Tensor[(6, 8, 4), float32], %c: Tensor[(2, 3, 5, 4), float32]) {
  %0 = nn.batch_matmul(%a, %b, transpose_b=False);
  %1 = reshape(%0, newshape=[2, 3, 5, 4]);
  %2 = multiply(%1, %c);
  nn.relu(%2)
}
"""
    mod = T.InferType()(parse(text))
    after = _kernels(mod)
    assert len(after) == len(_kernels(mod, disabled=["SinkReshape"])) - 1
    rng = np.random.default_rng(1)
    inp = {"a": rng.standard_normal((6, 5, 8)).astype("float32"), "b": rng.standard_normal((6, 8, 4)).astype("float32"),
           "c": rng.standard_normal((2, 3, 5, 4)).astype("float32")}
    got = _build_run(mod, inp)
    np.testing.assert_array_equal(got, _build_run(mod, inp, disabled=["SinkReshape"]))
    np.testing.assert_allclose(got, np.maximum((inp["a"] @ inp["b"]).reshape(2, 3, 5, 4) * inp["c"], 0),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("text", [
    # the reshape splits the last axis (attention heads): not a leading-axes reshape
    """def @main(%x: Tensor[(16, 8), float32], %w: Tensor[(8, 8), float32]) {
  %0 = nn.dense(%x, %w, units=8);
  %1 = reshape(%0, newshape=[1, 16, 2, 4]);
  add(%1, 1f)
}""",
    # an operand that broadcasts along the middle axis only: not expressible on [b*s, N]
    """def @main(%x: Tensor[(6, 8), float32], %w: Tensor[(8, 8), float32], %y: Tensor[(2, 1, 8), float32]) {
  %0 = nn.dense(%x, %w, units=8);
  %1 = reshape(%0, newshape=[2, 3, 8]);
  add(%1, %y)
}""",
    # the dense output is used twice: it cannot fuse its epilogue anyway
    """def @main(%x: Tensor[(6, 8), float32], %w: Tensor[(8, 8), float32]) {
  %0 = nn.dense(%x, %w, units=8);
  %1 = reshape(%0, newshape=[2, 3, 8]);
  %2 = add(%1, 1f);
  (%2, %0)
}""",
    # an op with an axis attribute (bias_add on the 3-D shape's axis 1) stays on the 3-D shape
    """def @main(%x: Tensor[(6, 8), float32], %w: Tensor[(8, 8), float32], %b: Tensor[(3), float32]) {
  %0 = nn.dense(%x, %w, units=8);
  %1 = reshape(%0, newshape=[2, 3, 8]);
  nn.bias_add(%1, %b, axis=1)
}""",
    # the reshape follows an elementwise op, not a fusable anchor
    """def @main(%x: Tensor[(6, 8), float32]) {
  %0 = exp(%x);
  %1 = reshape(%0, newshape=[2, 3, 8]);
  add(%1, 1f)
}""",
    # no reshape at all (an MLP)
    """def @main(%x: Tensor[(6, 8), float32], %w: Tensor[(8, 8), float32], %b: Tensor[(8), float32]) {
  %0 = nn.dense(%x, %w, units=8);
  %1 = add(%0, %b);
  nn.relu(%1)
}""",
])
def test_unchanged_without_the_pattern(text):
    mod = T.InferType()(parse(text))
    assert sink_reshape(mod["main"]) is mod["main"]
    assert _kernels(mod) == _kernels(mod, disabled=["SinkReshape"])


def test_opt_level_two_leaves_it():
    mod = T.InferType()(parse(FFN))
    seq = kiln.transform.Sequential([T.SinkReshape()])  # a Sequential runs a pass only at its opt level
    with kiln.transform.PassContext(opt_level=2):
        out = seq(mod)
    kiln.ir.assert_structural_equal(out["main"], mod["main"])
    with kiln.transform.PassContext(opt_level=3):
        out = seq(mod)
    assert out["main"].body.args[0].op.name == "reshape"
