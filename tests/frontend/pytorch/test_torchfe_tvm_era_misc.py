"""TVM-era PyTorch frontend cases (v0.13 test_forward.py, after test_forward_clamp) about the importer itself:
parameter names, span annotation, lists of tuples in traced graphs, the renamed-graph export option."""
import os

import numpy as np
import pytest

from torch_frontend_util import import_torchvision, run_relay
from torchfe_tvm_era_util import trace, torch

import kiln as tvm
from kiln import relay

pytestmark = [pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def test_tvm_era_weight_names():
    """Parameters are keyed by attribute path; their last component is the module's parameter name."""
    lin = torch.nn.Linear(3, 4)
    traced = torch.jit.trace(lin, [torch.randn(2, 3)])
    _, params = relay.frontend.from_pytorch(traced, [("input", (2, 3))])
    assert {k.split(".")[-1] for k in params} == {n for n, _ in traced.named_parameters()}


@pytest.mark.slow
def test_tvm_era_annotate_span_on_resnet18():
    """A torchvision resnet18 (random weights) imported with parser-friendly names; AnnotateSpans runs on it
    and the annotated module still computes the model."""
    tv = import_torchvision()
    torch.manual_seed(0)
    model = tv.models.resnet18().eval()
    x = torch.randn(1, 3, 64, 64)
    mod, params = relay.frontend.from_pytorch(trace(model, [x]), [("input", tuple(x.shape))],
                                              use_parser_friendly_name=True)
    assert all("." not in k for k in params)
    annotated = relay.transform.AnnotateSpans()(mod)
    assert tvm.ir.structural_equal(annotated, mod)
    (got,) = run_relay(annotated, params, [x.numpy()], "graph")
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-4, atol=1e-4)


class ListOfTuples(torch.nn.Module):
    """Python lists of tuples inside forward; traced, they become prim::TupleConstruct / ListConstruct."""

    def forward(self, x):
        merged, masks = [], []
        for _ in range(3):
            s = torch.sigmoid(x)
            merged.append((s, s))
            masks.append(x)
        for i in range(3):
            merged[i] = merged[i][0] + merged[i][1]
        return masks[2], merged


def test_tvm_era_list_tuple():
    x = torch.rand(4, 4, 16, 32)
    model = ListOfTuples().eval()
    traced = torch.jit.trace(model, x, strict=False).eval()
    mod, params = relay.frontend.from_pytorch(traced, [("x", tuple(x.shape))])
    got = run_relay(mod, params, [x.numpy()], "graph")
    with torch.no_grad():
        mask, merged = model(x)
    want = [mask] + list(merged)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)


class Conv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, bias=True)

    def forward(self, x):
        return self.conv(x)


def test_tvm_era_exporting_renamed_c_graph(tmp_path):
    """export_renamed_c_graph_path writes the TorchScript graph with outputs renamed after their operator."""
    x = torch.rand(1, 3, 10, 10)
    _, _ = relay.frontend.from_pytorch(torch.jit.trace(Conv(), [x]), [("input", (1, 3, 10, 10))],
                                       export_renamed_c_graph_path=str(tmp_path))
    (name,) = os.listdir(tmp_path)
    assert "tvm_exported_c_graph_" in name
    assert "%aten::_convolution_0" in (tmp_path / name).read_text()


# -- spans (TVM's TestSetSpan) ---------------------------------------------------------------------------
def _span(name):
    return relay.Span(relay.SourceName(name), 0, 0, 0, 0)


def _tagged(expr, name):
    expr.span = _span(name)
    return expr


def _span_pairs(a, b):
    """Walk two structurally equal expressions side by side, yielding their span source names."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        sx = x.span.source_name.name if getattr(x, "span", None) is not None else None
        sy = y.span.source_name.name if getattr(y, "span", None) is not None else None
        yield type(x).__name__, sx, sy
        if isinstance(x, relay.Function):
            stack.extend(zip(list(x.params) + [x.body], list(y.params) + [y.body]))
        elif isinstance(x, relay.Call):
            stack.extend(zip(x.args, y.args))
        elif isinstance(x, relay.TupleGetItem):
            stack.append((x.tuple_value, y.tuple_value))
        elif isinstance(x, relay.Tuple):
            stack.extend(zip(x.fields, y.fields))


def _import_main(model, shape):
    traced = torch.jit.trace(model.eval(), [torch.rand(shape)])
    return relay.frontend.from_pytorch(traced, [("input0", shape)])[0]["main"]


def _check_spans(model, shape, golden):
    with tvm.testing.enable_span_filling():
        with_span = _import_main(model, shape)
    with tvm.testing.disable_span_filling():
        without = _import_main(model, shape)
    assert tvm.ir.structural_equal(with_span, without)
    assert all(s is None for _, s, _ in _span_pairs(without, without))
    assert tvm.ir.structural_equal(with_span, golden)
    for kind, got, want in _span_pairs(with_span, golden):
        assert got == want, f"{kind}: span {got!r}, TVM gives {want!r}"


def _v(name, shape):
    return relay.var(name, shape=shape, span=_span(name))


def test_tvm_era_span_conv2d_bias_add():
    src = "aten::_convolution_0"
    x, w, b = _v(f"{src}.input0", (1, 3, 10, 10)), _v(f"{src}.weight", (6, 3, 7, 7)), _v(f"{src}.bias", (6,))
    conv = _tagged(relay.nn.conv2d(x, w, padding=[0] * 4, channels=6, kernel_size=[7, 7]), src)
    golden = relay.Function([x, w, b], _tagged(relay.nn.bias_add(conv, b), src))
    _check_spans(torch.nn.Conv2d(3, 6, 7, bias=True), [1, 3, 10, 10], relay.transform.InferType()(
        tvm.IRModule.from_expr(golden))["main"])


def test_tvm_era_span_batch_norm():
    src = "aten::batch_norm_0"
    args = [_v(f"{src}.input0", (1, 16, 10, 10))] + [_v(f"{src}.{n}", (16,)) for n in
                                                      ("weight", "bias", "running_mean", "running_var")]
    bn = relay.nn.batch_norm(*args)
    _tagged(bn.tuple_value, src)
    golden = relay.Function(args, _tagged(relay.TupleGetItem(bn.tuple_value, 0), src))
    _check_spans(torch.nn.BatchNorm2d(16), [1, 16, 10, 10],
                 relay.transform.InferType()(tvm.IRModule.from_expr(golden))["main"])


class _Reshape(torch.nn.Module):
    def forward(self, x):
        return x.reshape([2, 1, 10, 10])


def test_tvm_era_span_reshape():
    src = "aten::reshape_0"
    x = _v(f"{src}.input0", (2, 1, 10, 1, 10))
    golden = relay.Function([x], _tagged(relay.reshape(x, newshape=[2, 1, 10, 10]), src))
    _check_spans(_Reshape(), [2, 1, 10, 1, 10], relay.transform.InferType()(tvm.IRModule.from_expr(golden))["main"])


def test_tvm_era_span_dense_bias_add():
    src = "aten::linear_0"
    x, w, b = _v(f"{src}.input0", (10, 10)), _v(f"{src}.weight", (7, 10)), _v(f"{src}.bias", (7,))
    dense = _tagged(relay.nn.dense(x, w), src)
    golden = relay.Function([x, w, b], _tagged(relay.nn.bias_add(dense, b, axis=-1), src))
    _check_spans(torch.nn.Linear(10, 7), [10, 10], relay.transform.InferType()(tvm.IRModule.from_expr(golden))["main"])


# -- refusals of the new converters: a KilnError naming what is unsupported ------------------------------------
class _Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


@pytest.mark.parametrize("fn,inputs,match", [
    (lambda p: torch.multinomial(p, 2, replacement=False), [torch.rand(4, 5)], "without replacement"),
    (lambda x: torch.stft(x, 4, return_complex=True), [torch.rand(1, 16)], "return_complex=True"),
    (lambda x, t: torch.nn.functional.cross_entropy(x, t, label_smoothing=0.1),
     [torch.rand(4, 3), torch.randint(0, 3, (4,))], "label_smoothing"),
])
def test_tvm_era_converters_refuse_what_they_do_not_support(fn, inputs, match):
    from kiln.error import KilnError
    traced = torch.jit.trace(_Fn(fn), tuple(inputs), check_trace=False)
    infos = [(f"i{k}", (tuple(x.shape), str(x.dtype).replace("torch.", ""))) for k, x in enumerate(inputs)]
    with pytest.raises(KilnError, match=match):
        relay.frontend.from_pytorch(traced, infos)
