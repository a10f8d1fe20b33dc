"""TVM-era PyTorch frontend cases (v0.13 test_forward.py, after test_forward_clamp): layers, losses, norms,
products, attention, sampling. Traced, built at opt level 3, run on the graph executor, compared with PyTorch."""
import numpy as np
import pytest

from torchfe_tvm_era_util import check, torch
from torch_frontend_util import Fn

pytestmark = [pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning")]
nn = torch.nn
F = torch.nn.functional


def _losses():
    n, c = 10, 3
    w = torch.tensor([1.0, 2.0, 3.0])
    for shape in ((n, c), (n, c, 2, 3)):
        pred, tgt = torch.rand(*shape), torch.randint(0, 3, (shape[0],) + shape[2:])
        for kw in ({}, {"weight": w}, {"ignore_index": 1}, {"reduction": "sum"}, {"reduction": "none"}):
            yield "nll_loss", nn.NLLLoss(**kw), [pred, tgt]
    yield "cross_entropy_loss", nn.CrossEntropyLoss(), [torch.rand(n, c), torch.randint(0, 3, (n,))]
    yield "cross_entropy_loss", nn.CrossEntropyLoss(weight=w), [torch.rand(n, c), torch.randint(0, 3, (n,))]
    yield "cross_entropy_loss", nn.CrossEntropyLoss(), [torch.randn(n, c), torch.randn(n, c)]
    for loss in (nn.L1Loss, nn.MSELoss):
        for shape in ((n, c), (n, c, 2, 3)):
            for red in ("mean", "sum", "none"):
                yield loss.__name__, loss(reduction=red), [torch.rand(*shape), torch.rand(*shape)]


def _weight_norm():
    wn = torch.nn.utils.weight_norm
    x = torch.rand(1, 32, 17, 15)
    yield wn(nn.Conv2d(32, 64, 3)), [x]
    yield wn(nn.Conv2d(32, 64, 3, groups=2)), [x]
    yield wn(nn.Conv2d(32, 64, 3), dim=1), [x]
    yield wn(nn.Linear(32, 64)), [torch.rand(128, 32)]


class ParamList(nn.Module):
    def __init__(self, layers=2):
        super().__init__()
        self.biases = nn.ParameterList([torch.randn(10)] * layers)
        self.weights = nn.ParameterList([torch.randn(10, 10)] * layers)

    def forward(self, x):
        for i in range(len(self.weights) - 1):
            x = torch.addmm(self.biases[i], x, self.weights[i])
        return torch.addmm(self.biases[-1], x, self.weights[-1])


class SharedWeight(nn.Module):
    """A linear layer's weight used again by a matmul (tied embeddings)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 3)

    def forward(self, x):
        return self.lin(x) @ self.lin.weight


CASES = {
    "adaptive_max_pool1d": [(nn.AdaptiveMaxPool1d(3), [torch.randn(2, 2, 4)]),
                            (nn.AdaptiveMaxPool1d(4), [torch.randn(2, 3, 11)])],
    "instance_norm": [(Fn(lambda x: F.instance_norm(x, use_input_stats=True)), [torch.randn(1, 1, 1, 2)]),
                      (Fn(lambda x: F.instance_norm(x, use_input_stats=True)), [torch.randn(2, 3, 5, 7)]),
                      (Fn(lambda x: F.instance_norm(x, use_input_stats=True)), [torch.randn(1, 1, 1, 2).double()]),
                      (Fn(lambda x: F.instance_norm(x, use_input_stats=True)), [torch.randn(2, 3, 9).double()])],
    "weight_norm": list(_weight_norm()),
    "addmm": [(Fn(lambda m, a, b: torch.addmm(m, a, b, beta=0.8, alpha=0.4)),
               [torch.randn(3, 5), torch.randn(3, 4), torch.randn(4, 5)])],
    "baddbmm": [(Fn(lambda m, a, b: torch.baddbmm(m, a, b, beta=1.0, alpha=0.5)),
                 [torch.randn(10, 3, 5), torch.randn(10, 3, 4), torch.randn(10, 4, 5)])],
    "dot": [(Fn(lambda x: x.dot(x)), [torch.randn(4)])],
    "mv": [(Fn(lambda m, v: m.mv(v)), [torch.randn(*s), torch.randn(s[1])]) for s in ((4, 4), (2, 2), (3, 8))],
    "einsum": [(Fn(lambda x, y: torch.einsum("ij,jk", x, y)), [torch.randn(2, 3), torch.randn(3, 4)]),
               (Fn(lambda x, y, z: torch.einsum("ij,jk,km->im", x, y, z)),
                [torch.randn(2, 3), torch.randn(3, 4), torch.randn(4, 5)])],
    "linalg_vector_norm": [(Fn(lambda x, o=o: torch.linalg.vector_norm(x, ord=o)), [torch.rand(3, 3).to(dt)])
                           for dt in (torch.float32, torch.float64) for o in (2, 3.5, np.inf, -np.inf, 0)],
    "parameterlist": [(ParamList(), [torch.randn(20, 10)])],
    "duplicate_weight_use": [(SharedWeight(), [torch.randn(5, 5)])],
}
for _name, _m, _inputs in _losses():
    CASES.setdefault(_name, []).append((_m, _inputs))


@pytest.mark.parametrize("name,idx", [(k, i) for k, v in CASES.items() for i in range(len(v))])
def test_tvm_era_layers(name, idx):
    model, inputs = CASES[name][idx]
    check(model, inputs, rtol=1e-5, atol=1e-5)


# one case per mode, padding and rank runs by default; the full cross product is marked slow
_GRID_QUICK = {("bilinear", "zeros", False, 2), ("nearest", "border", True, 2), ("bicubic", "reflection", False, 2),
               ("bilinear", "reflection", True, 3), ("nearest", "zeros", False, 3)}


def _grid_cases():
    for method in ("nearest", "bilinear", "bicubic"):
        for pad in ("zeros", "border", "reflection"):
            for align in (True, False):
                for dims in ((2,) if method == "bicubic" else (2, 3)):
                    case = (method, pad, align, dims)
                    yield case if case in _GRID_QUICK else pytest.param(*case, marks=pytest.mark.slow)


@pytest.mark.parametrize("method,pad,align,dims", list(_grid_cases()))
def test_tvm_era_grid_sample(method, pad, align, dims):
    # grid points inside and outside [-1, 1], so that every padding mode matters (random: no ties for nearest)
    if dims == 2:
        data, grid = torch.rand(2, 3, 8, 7), torch.rand(2, 9, 11, 2) * 3 - 1.5
    else:
        data, grid = torch.rand(2, 3, 4, 5, 4), torch.rand(2, 5, 6, 4, 3) * 3 - 1.5
    f = Fn(lambda x, g: F.grid_sample(x, g, mode=method, padding_mode=pad, align_corners=align))
    check(f, [data, grid], rtol=1e-4, atol=1e-4)


SDPA_SHAPES = [(q, k, v) if (q, k, v) in ((4, 4, 4), (3, 4, 3)) else pytest.param((q, k, v), marks=pytest.mark.slow)
               for q in (4, 3) for k in (4, 3) for v in (4, 3)]


def _qkv(q, k, v, dtype=torch.float32, L=5, S=7, E=11, Ev=13):
    def make(rank, *tail):
        return torch.randn(*((2, 3) if rank == 4 else (3,)), *tail, dtype=dtype)
    return [make(q, L, E), make(k, S, E), make(v, S, Ev)]


@pytest.mark.parametrize("ranks", SDPA_SHAPES)
@pytest.mark.parametrize("mode", ["plain", "causal", "mask", "float64"])
def test_tvm_era_scaled_dot_product_attention(ranks, mode):
    mask = torch.ones((5, 7), dtype=torch.bool).tril(diagonal=0) if mode == "mask" else None
    f = Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mode == "causal"))
    check(f, _qkv(*ranks, dtype=torch.float64 if mode == "float64" else torch.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [(4, 4, 4), (3, 4, 3)])
def test_tvm_era_scaled_dot_product_attention_large(ranks):
    check(Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v)),
          _qkv(*ranks, L=128, S=128, E=64, Ev=64), rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_tvm_era_transformer():
    """nn.Transformer (6 encoder + 6 decoder layers, d_model 256), as TVM's test_transformer; eval mode."""
    torch.manual_seed(0)
    model = nn.Transformer(d_model=256, nhead=8, num_encoder_layers=6, num_decoder_layers=6).eval()
    check(model, [torch.rand(10, 32, 256), torch.rand(20, 32, 256)], rtol=1e-4, atol=1e-4)


class SoftmaxAfterConv(nn.Module):
    """TVM issue 12001: softmax over a conv output, with post-ops that mix in another branch."""

    def __init__(self, post_op):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, (1, 1), 1)
        self.post_op = post_op

    def forward(self, x):
        a = self.conv(x)
        b = torch.floor(x)
        s = torch.softmax(a, dim=2)
        if self.post_op:
            return (a - b) + (s - b)
        return s + 1


@pytest.mark.parametrize("post_op", [False, True])
def test_tvm_era_softmax_fuse(post_op):
    """Built at opt level 4 (TVM's test), so that every fusion-related pass runs."""
    from kiln import relay
    import kiln as tvm
    from torchfe_tvm_era_util import trace
    model = SoftmaxAfterConv(post_op).eval()
    x = torch.randn(3, 3, 10, 1)
    mod, params = relay.frontend.from_pytorch(trace(model, [x]), [("inp0", (3, 3, 10, 1))])
    with tvm.transform.PassContext(opt_level=4):
        out = relay.create_executor("graph", mod, params=params).evaluate()(inp0=x.numpy()).numpy()
    with torch.no_grad():
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-5, atol=1e-5)


def _stft_cases():
    w3, w2 = torch.tensor([2, 3, 4], dtype=torch.int32), torch.tensor([1, 3], dtype=torch.int32)
    x1, x2 = torch.rand(1, 12), torch.rand(2, 12)
    yield (3, 3, 3, False, "constant", False, True), [x1, w3]
    yield (3, 3, 3, True, "constant", False, True), [x1, w3]
    yield (3, 3, 3, False, "reflect", False, True), [x1, w3]
    yield (3, 3, 3, True, "reflect", False, True), [x1, w3]
    yield (3, 3, 3, True, "reflect", True, True), [x1, w3]
    yield (3, 3, 3, True, "reflect", False, False), [x1, w3]
    yield (3, 3, 3, False, "reflect", False, True), [x2, w3]
    yield (2, 1, 2, False, "reflect", False, True), [x2, w2]
    yield (2, 1, 2, False, "reflect", False, True), [x2]


@pytest.mark.parametrize("case", range(9))
def test_tvm_era_stft(case):
    (n_fft, hop, win, center, pad_mode, normalized, onesided), inputs = list(_stft_cases())[case]

    def f(x, window=None):
        return torch.stft(x, n_fft=n_fft, hop_length=hop, win_length=win, window=window, center=center,
                          pad_mode=pad_mode, normalized=normalized, onesided=onesided, return_complex=False)
    check(Fn(f), inputs, rtol=1e-5, atol=1e-5)
