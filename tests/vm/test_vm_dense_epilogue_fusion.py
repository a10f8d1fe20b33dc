"""A dense over ``(b*s, K)`` with unknown b, s fuses its epilogue in the VM build as in the static build:
SinkReshape moves ``reshape_like`` / ``dyn.reshape`` / ``reshape`` over ``?`` dims below the elementwise
chain (only with operands provably of the data's shape), FuseOps takes a residual of the same symbolic shape
as an elementwise edge. Numerics against numpy at several (batch, seq), including sizes where an unrelated
operand broadcasts at run time."""
import math

import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.relay import transform as T
from kiln.relay.expr import Call
from kiln.relay.expr_functor import post_order_visit
from kiln.relay.transform.sink_reshape import sink_reshape
from kiln.runtime.vm import VirtualMachine

TARGET = "llvm"  # runs on the host; nothing here depends on the ISA
H, F = 24, 40
SIZES = [(1, 1), (2, 7), (3, 13), (4, 5)]


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float32])(x)


def _consts(seed=0):
    rng = np.random.default_rng(seed)
    f = lambda *s: (rng.standard_normal(s) * 0.3).astype("float32")  # noqa: E731
    return {"emb": f(50, H), "w1": f(F, H), "b1": f(F), "w2": f(H, F), "b2": f(H), "g": f(H)}


def _ffn(form: str, c: dict):
    """BERT's FFN block as the ONNX importer leaves it with unknown (batch, seq): embeddings of ids, dense on
    ``(b*s, K)``, back to ``(b, s, N)`` by ``form`` ('reshape_like', 'dyn.reshape' or 'reshape' when only the
    batch is unknown), bias + erf GELU, second dense, bias, residual add, LayerNorm-like mean."""
    seq = 6 if form == "reshape" else relay.Any()
    ids = relay.var("ids", shape=(relay.Any(), seq), dtype="int64")
    x = relay.take(relay.const(c["emb"]), ids, axis=0)  # (b, s, H)

    def back(d, n):
        if form == "reshape_like":
            return relay.reshape_like(d, ids, lhs_begin=0, lhs_end=1, rhs_begin=0, rhs_end=2)
        if form == "dyn.reshape":
            bs = relay.strided_slice(relay.shape_of(ids, "int64"), [0], [2])  # (b, s)
            return relay.reshape(d, relay.concatenate([bs, relay.const(np.array([n], "int64"), "int64")], 0))
        return relay.reshape(d, [-1, seq, n])
    h = relay.nn.dense(relay.reshape(x, [-1, H]), relay.const(c["w1"]))
    h = relay.add(back(h, F), relay.const(c["b1"]))
    h = relay.multiply(relay.multiply(h, relay.add(relay.erf(relay.divide(h, relay.const(1.4142135, "float32"))),
                                                   relay.const(1.0, "float32"))), relay.const(0.5, "float32"))
    o = relay.nn.dense(relay.reshape(h, [-1, F]), relay.const(c["w2"]))
    o = relay.add(relay.add(back(o, H), relay.const(c["b2"])), x)
    o = relay.subtract(o, relay.mean(o, axis=[2], keepdims=True))
    return kiln.IRModule.from_expr(relay.Function([ids], relay.multiply(o, relay.const(c["g"]))))


def _ffn_ref(ids, c):
    x = c["emb"][ids]
    h = x.reshape(-1, H) @ c["w1"].T + c["b1"]
    h = h * (_erf(h / np.float32(1.4142135)) + 1) * 0.5
    o = (h @ c["w2"].T + c["b2"]).reshape(x.shape) + x
    return (o - o.mean(axis=2, keepdims=True)) * c["g"]


def _calls(expr, name):
    out = []
    post_order_visit(expr, lambda e: out.append(e) if isinstance(e, Call) and getattr(e.op, "name", "") == name
                     else None)
    return out


def _sunk(mod):
    mod = T.InferType()(mod)
    return sink_reshape(mod["main"])


def _dense_consumers(func):
    """Op names of the direct consumers of each dense call."""
    users = {}

    def visit(e):
        if isinstance(e, Call):
            for a in e.args:
                users.setdefault(a, []).append(getattr(e.op, "name", "?"))
    post_order_visit(func, visit)
    return [sorted(users.get(d, [])) for d in _calls(func, "nn.dense")]


@pytest.mark.parametrize("form", ["reshape_like", "dyn.reshape", "reshape"])
def test_sink_moves_dynamic_reshape_below_the_epilogue(form):
    c = _consts()
    before = T.InferType()(_ffn(form, c))["main"]
    assert [u for u in _dense_consumers(before)] == [[form]] * 2
    after = _sunk(_ffn(form, c))
    assert after is not before
    # bias adds follow the dense directly; the reshape back moved below GELU / the residual add
    assert _dense_consumers(after) == [["add"], ["add"]]
    # the function ends with the reshape back (after the residual add and the LayerNorm-like ops on 3-D data)
    assert len(T.InferType()(kiln.IRModule.from_expr(after))["main"].body.checked_type.shape) == 3


def test_residual_of_unrelated_unknown_shape_is_not_flattened():
    """``y`` is a second input ``(?, ?, H)``: nothing proves it has the dense's rows (at run time its batch may
    be 1 and broadcast), so the add with it stays after the reshape back; the bias add still sinks."""
    c = _consts()
    ids = relay.var("ids", shape=(relay.Any(), relay.Any()), dtype="int64")
    y = relay.var("y", shape=(relay.Any(), relay.Any(), H))
    x = relay.take(relay.const(c["emb"]), ids, axis=0)
    d = relay.nn.dense(relay.reshape(x, [-1, H]), relay.const(c["w2"][:, :H].copy()))
    r = relay.reshape_like(d, ids, lhs_begin=0, lhs_end=1, rhs_begin=0, rhs_end=2)
    out = relay.add(relay.add(r, relay.const(c["b2"])), y)
    mod = kiln.IRModule.from_expr(relay.Function([ids, y], out))
    after = _sunk(mod)
    assert _dense_consumers(after) == [["add"]]
    assert isinstance(after.body, Call) and after.body.op.name == "add"  # the residual add, after the reshape
    with kiln.transform.PassContext(opt_level=3):
        vm = VirtualMachine(relay.vm.compile(mod, TARGET), kiln.cpu())
    rng = np.random.default_rng(1)
    w = c["w2"][:, :H]
    for b, s, yb in [(3, 5, 1), (2, 4, 2), (1, 7, 1)]:
        idv = rng.integers(0, 50, (b, s)).astype("int64")
        yv = rng.standard_normal((yb, s, H)).astype("float32")
        ref = (c["emb"][idv].reshape(-1, H) @ w.T).reshape(b, s, H) + c["b2"] + yv
        np.testing.assert_allclose(vm.run(idv, yv).numpy(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("form", ["reshape_like", "dyn.reshape", "reshape"])
def test_vm_dense_kernels_fuse_their_epilogue_and_match_numpy(form):
    c = _consts()
    with kiln.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(_ffn(form, c), TARGET)
    dense = [n for n in exe.packed_names if "dense" in n]
    assert len(dense) == 2, exe.packed_names
    assert any("dense_pack_add_divide_erf_add_multiply_multiply" in n for n in dense), dense
    assert any(n.endswith("dense_pack_add_add") or "dense_pack_add_add_" in n for n in dense), dense
    # no kernel re-reads a dense output just to add its bias
    assert not [n for n in exe.packed_names if "dense" not in n and ("_add_divide_erf" in n or
                                                                      "reshape_like_add" in n)], exe.packed_names
    vm = VirtualMachine(exe, kiln.cpu())
    rng = np.random.default_rng(2)
    for b, s in SIZES if form != "reshape" else [(1, 6), (3, 6), (5, 6)]:
        idv = rng.integers(0, 50, (b, s)).astype("int64")
        np.testing.assert_allclose(vm.run(idv).numpy(), _ffn_ref(idv, c), rtol=2e-5, atol=2e-5)


def test_static_build_unchanged_by_symbolic_shapes():
    """The same block at a static size: still one dense kernel with the GELU epilogue and one with bias +
    residual (the static path of SinkReshape / FuseOps)."""
    c = _consts()
    ids = relay.var("ids", shape=(2, 6), dtype="int64")
    x = relay.take(relay.const(c["emb"]), ids, axis=0)
    h = relay.reshape(relay.nn.dense(relay.reshape(x, [-1, H]), relay.const(c["w2"][:, :H].copy())), [2, 6, H])
    out = relay.add(relay.add(h, relay.const(c["b2"])), x)
    mod = kiln.IRModule.from_expr(relay.Function([ids], out))
    with kiln.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(mod, TARGET)
    prims = []
    post_order_visit(opt["main"], lambda e: prims.append(e.op) if isinstance(e, Call) and
                     isinstance(e.op, relay.Function) else None)
    names = [sorted(n.op.name for n in _calls(p.body, "add") + _calls(p.body, "nn.contrib_dense_pack") +
                    _calls(p.body, "nn.dense")) for p in prims]
    assert any(len(n) == 3 and n.count("add") == 2 for n in names), names


def test_merge_same_dims_unions_the_proven_classes():
    from kiln.relay.backend.vm.symdims import merge_same_dims
    ty = lambda *s: relay.TensorType(s, "float32")  # noqa: E731
    types = [ty(relay.Any(), 256), ty(16, 256, 16), ty(256), ty(relay.Any(), 256)]
    assert merge_same_dims((0, 1), types, "0.0=3.0") == (0, 0)
    assert merge_same_dims((0, 1), types, None) == (0, 1)
    types = [ty(relay.Any(), relay.Any()), ty(relay.Any(), relay.Any())]
    assert merge_same_dims((0, 1, 2, 3), types, "0.1=1.1") == (0, 1, 2, 1)
    assert merge_same_dims((0, 1, 2, 3), types, "0.0=1.0,0.1=1.1") == (0, 1, 0, 1)
    assert merge_same_dims((0, 1, 2), types, "0.0=1.0") == (0, 1, 2)  # counts disagree: unchanged


def _bert_onnx(tmp_path):
    import os
    from benchmarks.dynamic import export_bert_encoder
    import sys
    import types
    torch = pytest.importorskip("torch")
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=128, max_position_embeddings=64)
    model = transformers.BertModel(cfg).eval()
    with torch.no_grad():  # non-zero biases: every bias add is real work the kernels must fuse
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.1)

    path = os.path.join(str(tmp_path), "bert_epilogue.onnx")
    export_bert_encoder(model, path, torch)
    return path


@pytest.mark.slow
def test_bert_vm_dense_kernels_carry_bias_gelu_and_residual(tmp_path):
    """BERT from ONNX with unknown (batch, seq): every dense kernel carries its bias; FFN1 its GELU; the
    attention output and FFN2 projections their residual add (the attention output's rows are a different
    VM expression than the residual's: FuseOps' proven equality makes them one kernel variable)."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    path = _bert_onnx(tmp_path)
    mod, params = relay.frontend.from_onnx(onnx.load(path))
    with kiln.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, TARGET, params=params)
    names = exe.packed_names
    dense = [n for n in names if "dense" in n]
    assert dense and all("dense_pack_add" in n for n in dense), dense
    assert any("dense_pack_add_add" in n for n in dense), dense
    assert any("dense_pack_add_divide_erf" in n for n in dense), dense
    assert not [n for n in names if "reshape_like_add" in n or n.endswith("_add_reshape_like")], names
    vm = VirtualMachine(exe, kiln.cpu())
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for b, s in [(1, 5), (3, 13), (2, 7), (1, 1), (3, 13)]:
        ids = rng.integers(0, 100, (b, s)).astype("int64")
        np.testing.assert_allclose(vm.run(ids).numpy(), sess.run(None, {"x": ids})[0], rtol=1e-4, atol=2e-5)
