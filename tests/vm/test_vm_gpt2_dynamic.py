"""GPT-2 exported to ONNX with dynamic (batch, seq) runs on the VM, and the import mechanisms it needs:
reshapes over computed shapes made static while converting (dense keeps a static K), shared dim_param
symbols, static slices over unknown dims, and nn.dense with an unknown K checked at run time."""
import io
import sys
import types
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import kiln as tvm  # noqa: E402
from kiln import relay  # noqa: E402
from kiln.relay.expr import Call  # noqa: E402
from kiln.relay.expr_functor import post_order_visit  # noqa: E402
from relay_exec_util import vm_of  # noqa: E402


def _calls(mod, prefix=""):
    out = []
    post_order_visit(mod["main"], lambda e: out.append(e) if isinstance(e, Call) and
                     getattr(e.op, "name", "").startswith(prefix) else None)
    return out


def _static(d) -> bool:
    return isinstance(getattr(d, "value", d), (int, np.integer))


# -- GPT-2 ---------------------------------------------------------------------------------------------------
def _transformers():
    # torchvision (imported by transformers) is a CUDA build whose meta registrations fail on the CPU wheel
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    return pytest.importorskip("transformers")


def _gpt2_onnx(attn: str):
    tf = _transformers()
    torch.manual_seed(0)
    cfg = tf.GPT2Config(vocab_size=97, n_embd=64, n_layer=2, n_head=4, n_positions=64, use_cache=False)
    cfg._attn_implementation = attn
    model = tf.GPT2LMHeadModel(cfg).eval()

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, ids, mask):
            return self.m(input_ids=ids, attention_mask=mask, use_cache=False, return_dict=False)[0]
    wrapper = Logits().eval()
    return wrapper, _export_ids_mask(wrapper, "logits")


def _export_ids_mask(module, output: str) -> bytes:
    """``module(input_ids, attention_mask)`` as ONNX bytes, both inputs and ``output`` dynamic in (batch, seq)."""
    buf = io.BytesIO()
    axes = {0: "batch", 1: "seq"}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.randint(0, 97, (2, 7)), torch.ones(2, 7, dtype=torch.int64)), buf,
                          input_names=["input_ids", "attention_mask"], output_names=[output],
                          dynamic_axes={"input_ids": axes, "attention_mask": axes, output: axes},
                          opset_version=14, dynamo=False)
    return buf.getvalue()


@pytest.mark.parametrize("attn", ["sdpa", pytest.param("eager", marks=pytest.mark.slow)])
def test_gpt2_dynamic_batch_and_seq_vs_pytorch(attn):
    model, data = _gpt2_onnx(attn)
    mod, params = relay.frontend.from_onnx(onnx.load_from_string(data), freeze_params=True)
    assert [p.type_annotation.astext() for p in mod["main"].params] == ["Tensor[(?, ?), int64]"] * 2
    assert not _calls(mod, "dyn."), "every reshape over computed shapes is static"
    dense = _calls(mod, "nn.dense")
    assert len(dense) == 9  # 4 per layer + the LM head
    for d in dense:  # weights are static: K of the data is too
        assert _static(d.args[0].checked_type.shape[-1]), d.args[0].checked_type
    vm = vm_of(mod, params)
    rng = np.random.default_rng(3)
    for batch, seq in [(1, 5), (2, 17), (3, 32)]:
        ids = rng.integers(0, 97, (batch, seq)).astype("int64")
        mask = np.ones((batch, seq), "int64")
        if batch > 1:
            mask[-1, seq // 2:] = 0  # right padding in the last sequence
        with torch.no_grad():
            want = model(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
        got = vm.run(ids, mask).numpy()
        assert got.shape == (batch, seq, 97)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_bert_encoder_dynamic_batch_and_seq_vs_pytorch():
    """The same import path on BERT (reshapes to heads, position ids sliced from a buffer, extended mask)."""
    tf = _transformers()
    torch.manual_seed(1)
    model = tf.BertModel(tf.BertConfig(vocab_size=97, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=96, max_position_embeddings=64)).eval()

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, ids, mask):
            return self.m(input_ids=ids, attention_mask=mask, return_dict=False)[0]
    enc = Encoder().eval()
    mod, params = relay.frontend.from_onnx(onnx.load_from_string(_export_ids_mask(enc, "hidden")))
    assert not _calls(mod, "dyn.reshape")
    for d in _calls(mod, "nn.dense"):
        assert _static(d.args[0].checked_type.shape[-1]), d.args[0].checked_type
    vm = vm_of(mod, params)
    rng = np.random.default_rng(7)
    for batch, seq in [(1, 5), (2, 17), (3, 32)]:
        ids = rng.integers(0, 97, (batch, seq)).astype("int64")
        mask = np.ones((batch, seq), "int64")
        mask[-1, seq - seq // 3:] = 0
        with torch.no_grad():
            want = enc(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
        np.testing.assert_allclose(vm.run(ids, mask).numpy(), want, rtol=1e-4, atol=1e-4)


class _BiasBufferAttention(torch.nn.Module):
    """Attention as GPT-2 wrote it before transformers' mask utilities: position ids from ``arange(s)``, q/k/v
    unbound from one projection (Split + Squeeze), a causal bias buffer sliced to the sequence
    (``bias[:, :, :s, :s]``, a run-time end) and the heads merged back with ``reshape(b, s, 8)``."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.register_buffer("bias", torch.tril(torch.ones(16, 16, dtype=torch.bool)).view(1, 1, 16, 16))
        self.wpe = torch.nn.Embedding(16, 8)
        self.qkv = torch.nn.Linear(8, 24)

    def forward(self, x):
        b, s, _ = x.shape
        x = x + self.wpe(torch.arange(s).unsqueeze(0))
        q, k, v = self.qkv(x).view(b, s, 3, 2, 4).permute(2, 0, 3, 1, 4)
        w = torch.where(self.bias[:, :, :s, :s], q @ k.transpose(-1, -2), torch.tensor(-1e4))
        return (w.softmax(-1) @ v).transpose(1, 2).reshape(b, s, 8)


def test_causal_bias_buffer_sliced_to_the_sequence():
    model = _BiasBufferAttention().eval()
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(2, 5, 8),), buf, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "b", 1: "s"}, "y": {0: "b", 1: "s"}}, opset_version=14, dynamo=False)
    mod, params = relay.frontend.from_onnx(onnx.load_from_string(buf.getvalue()))
    # the slice of the buffer keeps its run-time end (dyn); every reshape is static (the slice's clamped
    # length min(s, 16) broadcast against s is s)
    assert {c.op.name for c in _calls(mod, "dyn.")} == {"dyn.strided_slice"}
    assert mod["main"].ret_type.astext() == "Tensor[(?, ?, 8), float32]"
    vm = vm_of(mod, params)
    for b, s in [(1, 1), (2, 7), (3, 16)]:
        x = torch.randn(b, s, 8)
        with torch.no_grad():
            want = model(x).numpy()
        np.testing.assert_allclose(vm.run(x.numpy()).numpy(), want, rtol=1e-5, atol=1e-5)


# -- the import mechanisms, one ONNX graph each ---------------------------------------------------------------
def _model(nodes, inputs, outputs, inits=(), opset=14):
    graph = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _i64(name, values):
    return (name, np.asarray(values, "int64"))


def _flatten_gemm_model():
    """GPT-2's Conv1D: ``x.view(-1, x.size(-1)) @ W + b`` then ``view(b, s, n)``, shapes read at run time."""
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((8, 16)).astype("float32"), rng.standard_normal(16).astype("float32")
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Gather", ["shp", "last"], ["k"], axis=0),
        helper.make_node("Unsqueeze", ["k", "zero"], ["k1"]),
        helper.make_node("Concat", ["minus1", "k1"], ["tgt"], axis=0),
        helper.make_node("Reshape", ["x", "tgt"], ["x2"]),
        helper.make_node("Gemm", ["x2", "w", "b"], ["y2"]),
        helper.make_node("Slice", ["shp", "zero", "two"], ["lead"]),
        helper.make_node("Concat", ["lead", "n"], ["tgt2"], axis=0),
        helper.make_node("Reshape", ["y2", "tgt2"], ["y"]),
    ]
    inits = [("w", w), ("b", b), _i64("last", -1), _i64("zero", [0]), _i64("two", [2]), _i64("minus1", [-1]),
             _i64("n", [16])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 16])], inits)


def test_reshape_to_minus1_and_last_dim_before_gemm_keeps_static_k():
    model = _flatten_gemm_model()
    mod, params = relay.frontend.from_onnx(model)
    assert not _calls(mod, "dyn.")
    (dense,) = _calls(mod, "nn.dense")
    assert dense.args[0].checked_type.astext() == "Tensor[(?, 8), float32]"
    assert mod["main"].ret_type.astext() == "Tensor[(?, ?, 16), float32]"
    vm = vm_of(mod, params)
    sess = ort.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(1)
    for shape in [(1, 1, 8), (3, 5, 8)]:
        x = rng.standard_normal(shape).astype("float32")
        np.testing.assert_allclose(vm.run(x).numpy(), sess.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)


def _reshape_like_other_input(dims_y):
    nodes = [helper.make_node("Shape", ["y"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["out"])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"]),
                          helper.make_tensor_value_info("y", TensorProto.FLOAT, dims_y)],
                  [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["o1", "o2"])])


def test_inputs_sharing_a_dim_param_share_the_symbol():
    # y's dims are named like x's: reshaping x to y's shape is a copy of x's own shape
    mod, _ = relay.frontend.from_onnx(_reshape_like_other_input(["batch", "seq"]))
    assert not _calls(mod, "dyn.")
    # other names (or none): nothing says the sizes agree, the reshape stays dynamic
    mod, _ = relay.frontend.from_onnx(_reshape_like_other_input(["b2", "s2"]))
    assert len(_calls(mod, "dyn.reshape")) == 1
    # shape= names dims too
    mod, _ = relay.frontend.from_onnx(_reshape_like_other_input(["b2", "s2"]),
                                      shape={"x": ("n", "m"), "y": ("n", "m")})
    assert not _calls(mod, "dyn.")


def test_position_ids_from_range_over_the_sequence_length():
    """``arange(seq)`` reshaped to ``(1, seq)`` and added to ``x``: the range's length is the sequence's symbol
    (not a fresh one), so the unsqueeze of the range and the reshape back to x's shape are static."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Gather", ["shp", "one"], ["seq"], axis=0),
        helper.make_node("Range", ["zero", "seq", "step"], ["pos"]),
        helper.make_node("Unsqueeze", ["pos", "axes0"], ["pos2"]),
        helper.make_node("Cast", ["pos2"], ["posf"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "posf"], ["sum"]),
        helper.make_node("Shape", ["pos2"], ["pshape"]),
        helper.make_node("Reshape", ["sum", "pshape"], ["out"]),
    ]
    inits = [_i64("one", 1), _i64("zero", 0), _i64("step", 1), _i64("axes0", [0])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq"])],
                   [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, "seq"])], inits)
    mod, params = relay.frontend.from_onnx(model)
    assert not _calls(mod, "dyn.")
    vm = vm_of(mod, params)
    x = np.random.default_rng(2).standard_normal((1, 9)).astype("float32")
    np.testing.assert_allclose(vm.run(x).numpy(), x + np.arange(9, dtype="float32")[None], rtol=1e-6)


def test_split_of_unknown_rows_is_a_static_slice():
    """ONNX Split of ``(?, ?, 12)`` along the static axis: static strided_slices (the kernel clamps the unknown
    axes at run time), so the pieces keep their static width."""
    nodes = [helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=2),
             helper.make_node("Sub", ["a", "b"], ["out"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "m", 12])],
                   [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", "m", 6])], [_i64("sizes", [6, 6])])
    mod, params = relay.frontend.from_onnx(model)
    assert not _calls(mod, "dyn.")
    assert mod["main"].ret_type.astext() == "Tensor[(?, ?, 6), float32]"
    vm = vm_of(mod, params)
    x = np.random.default_rng(3).standard_normal((2, 3, 12)).astype("float32")
    np.testing.assert_allclose(vm.run(x).numpy(), x[..., :6] - x[..., 6:], rtol=1e-6)


def test_static_strided_slice_over_unknown_dims():
    """strided_slice with constant begin/end over unknown dims: clamped negative begins and INT64_MAX ends
    computed at run time, vs numpy at several sizes (including sizes smaller than the begin)."""
    x = relay.var("x", shape=(relay.Any(), relay.Any(), 5), dtype="float32")
    big = 2 ** 63 - 1
    body = relay.Tuple([relay.strided_slice(x, [1, -3, 1], [big, big, 4], [1, 2, 2]),
                        relay.strided_slice(x, [0, 2], [2, 7])])
    mod = tvm.IRModule.from_expr(relay.Function([x], body))
    vm = vm_of(mod)
    rng = np.random.default_rng(4)
    for n, m in [(1, 1), (3, 2), (4, 9)]:
        a = rng.standard_normal((n, m, 5)).astype("float32")
        got = vm.run(a)
        np.testing.assert_array_equal(got[0].numpy(), a[1:, -3::2, 1:4:2])
        np.testing.assert_array_equal(got[1].numpy(), a[0:2, 2:7])


def test_dense_with_unknown_k_is_checked_at_run_time():
    """A dense whose data K is unknown (nothing at import made it static) types as TVM's (K deferred), runs
    with the weight's static K, and a wrong K at run time fails with a message, not garbage."""
    x = relay.var("x", shape=(relay.Any(), relay.Any()), dtype="float32")
    w = np.random.default_rng(5).standard_normal((16, 8)).astype("float32")
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], relay.nn.dense(x, relay.const(w)))))
    assert mod["main"].ret_type.astext() == "Tensor[(?, 16), float32]"
    vm = vm_of(mod)
    a = np.random.default_rng(6).standard_normal((5, 8)).astype("float32")
    np.testing.assert_allclose(vm.run(a).numpy(), a @ w.T, rtol=1e-5, atol=1e-5)
    with pytest.raises(tvm.KilnError, match="must have size 8 at run time"):
        vm.run(np.ones((5, 7), "float32"))
    # a static K that disagrees is still a type error
    y = relay.var("y", shape=(relay.Any(), 7), dtype="float32")
    with pytest.raises(tvm.KilnError, match="K=7"):
        relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([y], relay.nn.dense(y, relay.const(w)))))


def test_squeeze_unsqueeze_with_constant_axes_over_unknown_dims():
    """Constant axes: static squeeze/expand_dims even with unknown dims elsewhere; squeezing an axis whose size
    is unknown is checked at run time (the run-time-axes converter)."""
    nodes = [helper.make_node("Unsqueeze", ["x", "ax"], ["u"]), helper.make_node("Squeeze", ["u", "sq"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, "m"])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "n", "m", 1])],
                   [_i64("ax", [0, 4]), _i64("sq", [2])])
    mod, params = relay.frontend.from_onnx(model)
    assert not _calls(mod, "dyn.")
    assert mod["main"].ret_type.astext() == "Tensor[(1, ?, ?, 1), float32]"
    x = np.random.default_rng(8).standard_normal((3, 1, 5)).astype("float32")
    np.testing.assert_array_equal(vm_of(mod, params).run(x).numpy(), x.reshape(1, 3, 5, 1))
    nodes = [helper.make_node("Squeeze", ["x", "sq"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, "m"])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 1])], [_i64("sq", [2])])
    mod, _ = relay.frontend.from_onnx(model)
    assert _calls(mod, "dyn.reshape")
