"""Per-op tests of the PyTorch frontend: small modules, imported through TorchScript and torch.export,
run by the debug interpreter and compared with PyTorch."""
import math

import pytest

from torch_frontend_util import Fn, torch, verify_model

F = torch.nn.functional
nn = torch.nn


def r(*shape):
    return torch.randn(*shape)


torch.manual_seed(0)

ELEMWISE = {
    "add": (lambda a, b: a + b, [r(2, 3, 5), r(3, 5)]),
    "add_alpha": (lambda a, b: torch.add(a, b, alpha=2.5), [r(2, 7), r(2, 7)]),
    "add_scalar": (lambda a: a + 3, [r(3, 5)]),
    "sub_rsub": (lambda a, b: (a - b) - (1.5 - a), [r(4, 5), r(5)]),
    "mul_div": (lambda a, b: a * b / (b.abs() + 1), [r(3, 5), r(3, 5)]),
    "div_floor": (lambda a, b: torch.div(a, b.abs() + 0.5, rounding_mode="floor"), [r(3, 5), r(3, 5)]),
    "div_trunc": (lambda a, b: torch.div(a, b.abs() + 0.5, rounding_mode="trunc"), [r(3, 5), r(3, 5)]),
    "pow": (lambda a: torch.pow(a.abs(), 1.7) + a ** 2, [r(3, 5)]),
    "unary": (lambda a: torch.sqrt(a.abs() + 1) + torch.rsqrt(a.abs() + 1) + torch.exp(a) + torch.log(a.abs() + 1)
              - torch.neg(a) + torch.abs(a), [r(3, 7)]),
    "trig": (lambda a: torch.sin(a) + torch.cos(a) + torch.erf(a) + torch.floor(a) + torch.ceil(a), [r(5)]),
    "compare": (lambda a, b: torch.stack([(a < b), (a <= b), (a > b), (a >= b), (a == a), (a != b)]),
                [r(3, 5), r(3, 5)]),
    "where": (lambda a, b: torch.where(a > 0, a, b), [r(3, 5), r(3, 5)]),
    "where_scalar": (lambda a: torch.where(a > 0, a, 0.5), [r(3, 5)]),
    "masked_fill": (lambda a: a.masked_fill(a < 0, -7.0), [r(4, 3)]),
    "clamp": (lambda a: torch.clamp(a, -0.5, 0.7) + a.clamp(min=0.1), [r(3, 5)]),
    "maximum": (lambda a, b: torch.maximum(a, b) + torch.minimum(a, b), [r(3, 5), r(5)]),
    "reciprocal": (lambda a: torch.reciprocal(a.abs() + 1), [r(4)]),
    "int_promote": (lambda a: a.long() * 2 + 1, [r(3, 5)]),
    "float_int_mix": (lambda a: (a > 0).float() + a.long(), [r(3, 5)]),
    "bool_ops": (lambda a: ((a > 0) & (a < 1)) | ~(a > -1), [r(3, 5)]),
}

ACTIVATIONS = {
    "relu": nn.ReLU(), "relu6": nn.ReLU6(), "gelu": nn.GELU(), "gelu_tanh": nn.GELU(approximate="tanh"),
    "silu": nn.SiLU(), "hardswish": nn.Hardswish(), "hardsigmoid": nn.Hardsigmoid(), "sigmoid": nn.Sigmoid(),
    "tanh": nn.Tanh(), "leaky_relu": nn.LeakyReLU(0.13), "elu": nn.ELU(0.7), "softplus": nn.Softplus(),
    "softplus_beta": nn.Softplus(beta=2.0, threshold=3.0), "hardtanh": nn.Hardtanh(-0.3, 0.4),
    "softmax": nn.Softmax(dim=1), "log_softmax": nn.LogSoftmax(dim=-1), "dropout": nn.Dropout(0.3),
    "mish": nn.Mish(),
}

SHAPES = {
    "view": (lambda a: a.view(3, -1), [r(3, 4, 5)]),
    "reshape": (lambda a: a.reshape(-1, 2, 5).contiguous(), [r(3, 4, 5)]),
    "flatten": (lambda a: torch.flatten(a, 1), [r(2, 3, 4, 5)]),
    "flatten_mid": (lambda a: torch.flatten(a, 1, 2), [r(2, 3, 4, 5)]),
    "permute": (lambda a: a.permute(2, 0, 1), [r(3, 4, 5)]),
    "transpose": (lambda a: a.transpose(-1, 0), [r(3, 4, 5)]),
    "t": (lambda a: a.t(), [r(3, 7)]),
    "squeeze": (lambda a: a.squeeze(1).squeeze(-1) + a.squeeze().sum(), [r(3, 1, 5, 1)]),
    "unsqueeze": (lambda a: a.unsqueeze(0).unsqueeze(-1), [r(3, 5)]),
    "expand": (lambda a: a.expand(2, 3, 5), [r(3, 1)]),
    "expand_as": (lambda a, b: a.expand_as(b), [r(1, 5), r(4, 5)]),
    "repeat": (lambda a: a.repeat(2, 1, 3), [r(3, 5)]),
    "cat": (lambda a, b: torch.cat([a, b, a], dim=1), [r(2, 3), r(2, 5)]),
    "stack": (lambda a, b: torch.stack([a, b], dim=-1), [r(2, 3), r(2, 3)]),
    "chunk": (lambda a: a.chunk(3, dim=1)[2] * 2, [r(2, 7)]),
    "split": (lambda a: torch.split(a, 2, dim=1), [r(2, 7)]),
    "split_sizes": (lambda a: torch.split(a, [1, 4, 2], dim=1), [r(2, 7)]),
    "unbind": (lambda a: torch.unbind(a, 1), [r(2, 3, 4)]),
    "slice": (lambda a: a[:, 1:4, ::2] + 0, [r(2, 5, 7)]),
    "slice_neg": (lambda a: a[..., -3:-1], [r(2, 5, 7)]),
    "select": (lambda a: a[:, -1] + a[0], [r(3, 3)]),
    "index_select": (lambda a: torch.index_select(a, 1, torch.tensor([0, 2, 2, -1 + 4])), [r(3, 4)]),
    "index_tensor": (lambda a: a[torch.tensor([2, 0, 1])], [r(3, 4)]),
    "index_two": (lambda a: a[torch.tensor([2, 0]), torch.tensor([1, 3])], [r(3, 4)]),
    "gather": (lambda a: torch.gather(a, 1, torch.tensor([[0, 1], [2, 2], [1, 0]])), [r(3, 4)]),
    "to_dtype": (lambda a: a.to(torch.float64).to(torch.float32) + a.type_as(a), [r(3, 4)]),
    "size_view": (lambda a: a.view(a.size(0), -1) * a.dim() + a.numel(), [r(2, 3, 4)]),
    "flip": (lambda a: torch.flip(a, [1]), [r(2, 5)]),
}

CREATION = {
    "arange": (lambda a: a + torch.arange(5), [r(3, 5)]),
    "arange_float": (lambda a: a + torch.arange(0.5, 3.0, 0.5), [r(2, 5)]),
    "zeros_ones": (lambda a: a + torch.zeros(3, 5) + torch.ones(5) * 2, [r(3, 5)]),
    "full": (lambda a: a * torch.full((3, 5), 1.5), [r(3, 5)]),
    "like": (lambda a: torch.zeros_like(a) + torch.ones_like(a) + torch.full_like(a, 3.0) + a, [r(2, 3)]),
    "new": (lambda a: a.new_zeros(2, 3) + a.new_ones((2, 3)), [r(4)]),
}

REDUCE = {
    "sum": (lambda a: a.sum(), [r(3, 5)]),
    "sum_dim": (lambda a: a.sum(dim=(0, 2), keepdim=True), [r(3, 4, 5)]),
    "mean": (lambda a: a.mean(-1), [r(3, 5)]),
    "max_dim": (lambda a: torch.max(a, 1), [r(3, 5)]),
    "max_all": (lambda a: a.max() + a.min(), [r(3, 5)]),
    "amax": (lambda a: torch.amax(a, dim=1), [r(3, 5)]),
    "argmax": (lambda a: torch.argmax(a, dim=1), [r(3, 5)]),
    "var_std": (lambda a: torch.var(a, dim=1) + torch.std(a, dim=1, unbiased=False), [r(3, 5)]),
    "prod": (lambda a: torch.prod(a, 1), [r(3, 4)]),
    "diff": (lambda a: torch.diff(a, dim=1) + torch.diff(a, n=2, dim=0, prepend=a[:1]).sum(), [r(4, 5)]),
    "diff_bool": (lambda a: torch.diff(a > 0).float(), [r(3, 6)]),
}

MATH = {
    "matmul_2d": (lambda a, b: torch.matmul(a, b), [r(3, 5), r(5, 4)]),
    "matmul_bcast": (lambda a, b: a @ b, [r(2, 3, 5), r(5, 4)]),
    "matmul_batch": (lambda a, b: a @ b, [r(2, 1, 3, 5), r(3, 5, 4)]),
    "matmul_vec": (lambda a, b: a @ b, [r(3, 5), r(5)]),
    "bmm": (lambda a, b: torch.bmm(a, b), [r(2, 3, 5), r(2, 5, 4)]),
    "mm": (lambda a, b: torch.mm(a, b), [r(3, 5), r(5, 4)]),
    "addmm": (lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), [r(4), r(3, 5), r(5, 4)]),
    "baddbmm": (lambda c, a, b: torch.baddbmm(c, a, b, alpha=0.5), [r(2, 3, 4), r(2, 3, 5), r(2, 5, 4)]),
    "einsum_bmm": (lambda a, b: torch.einsum("bij,bjk->bik", a, b), [r(2, 3, 5), r(2, 5, 4)]),
    "einsum_attn": (lambda a, b: torch.einsum("bhqd,bhkd->bhqk", a, b), [r(2, 3, 4, 5), r(2, 3, 6, 5)]),
    "einsum_outer": (lambda a, b: torch.einsum("i,j->ij", a, b), [r(3), r(4)]),
    "einsum_sum": (lambda a: torch.einsum("ij->j", a), [r(3, 4)]),
    "einsum_ell": (lambda a, b: torch.einsum("...ij,...jk->...ik", a, b), [r(2, 3, 5), r(2, 5, 4)]),
    "einsum_implicit": (lambda a, b: torch.einsum("ij,jk", a, b), [r(3, 5), r(5, 4)]),
    "einsum_chain": (lambda a, b, c: torch.einsum("ij,jk,kl->li", a, b, c), [r(3, 5), r(5, 4), r(4, 7)]),
    "einsum_bcast": (lambda a, b: torch.einsum("bij,bjk->bik", a, b), [r(1, 3, 5), r(2, 5, 4)]),
    "rsub_alpha": (lambda a, b: torch.rsub(a, b, alpha=2.0), [r(4, 5), r(5)]),
    "sub_alpha": (lambda a, b: torch.sub(a, b, alpha=0.5), [r(4, 5), r(4, 5)]),
    "addmm_beta0": (lambda c, a, b: torch.addmm(c, a, b, beta=0.0), [r(4), r(3, 5), r(5, 4)]),
}


def _cases(table):
    return [pytest.param(f, xs, id=name) for name, (f, xs) in table.items()]


@pytest.mark.parametrize("f, xs", _cases(ELEMWISE) + _cases(SHAPES) + _cases(CREATION) + _cases(REDUCE)
                         + _cases(MATH))
def test_functional(f, xs):
    verify_model(Fn(f), xs)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation(name):
    verify_model(ACTIVATIONS[name], [r(2, 7, 3) * 4])


NN_MODULES = {
    "conv2d": (lambda: nn.Conv2d(3, 5, 3, stride=2, padding=1), [r(1, 3, 9, 11)]),
    "conv2d_group_dil": (lambda: nn.Conv2d(4, 6, 3, padding=2, dilation=2, groups=2, bias=False), [r(2, 4, 7, 7)]),
    "conv2d_depthwise": (lambda: nn.Conv2d(4, 4, 5, padding=2, groups=4), [r(1, 4, 9, 9)]),
    "conv_transpose2d": (lambda: nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1), [r(1, 4, 5, 6)]),
    "linear": (lambda: nn.Linear(7, 5), [r(3, 7)]),
    "linear_3d": (lambda: nn.Linear(7, 5), [r(2, 3, 7)]),
    "linear_nobias": (lambda: nn.Linear(7, 5, bias=False), [r(3, 7)]),
    "batchnorm": (lambda: nn.BatchNorm2d(3), [r(2, 3, 5, 5)]),
    "batchnorm1d": (lambda: nn.BatchNorm1d(5), [r(4, 5)]),
    "layernorm": (lambda: nn.LayerNorm(7), [r(2, 3, 7)]),
    "layernorm_2d": (lambda: nn.LayerNorm([3, 7]), [r(2, 3, 7)]),
    "groupnorm": (lambda: nn.GroupNorm(2, 6), [r(2, 6, 5, 3)]),
    "maxpool": (lambda: nn.MaxPool2d(3, stride=2, padding=1), [r(1, 3, 9, 10)]),
    "maxpool_ceil": (lambda: nn.MaxPool2d(2, ceil_mode=True), [r(1, 3, 7, 7)]),
    "avgpool": (lambda: nn.AvgPool2d(3, stride=2, padding=1), [r(1, 3, 9, 10)]),
    "avgpool_nopad_count": (lambda: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), [r(1, 2, 7, 7)]),
    "adaptive_avg": (lambda: nn.AdaptiveAvgPool2d((1, 1)), [r(2, 3, 5, 7)]),
    "adaptive_avg_3": (lambda: nn.AdaptiveAvgPool2d(3), [r(1, 3, 7, 8)]),
    "adaptive_max": (lambda: nn.AdaptiveMaxPool2d(2), [r(1, 3, 6, 6)]),
    "embedding": (lambda: nn.Embedding(10, 4), [torch.tensor([[1, 3, 9], [0, 0, 2]])]),
    "upsample_nearest": (lambda: nn.Upsample(scale_factor=2, mode="nearest"), [r(1, 2, 3, 5)]),
    "upsample_bilinear": (lambda: nn.Upsample(scale_factor=2, mode="bilinear"), [r(1, 2, 3, 5)]),
    "upsample_bilinear_ac": (lambda: nn.Upsample(size=(7, 4), mode="bilinear", align_corners=True), [r(1, 2, 3, 5)]),
    "pad_const": (lambda: Fn(lambda a: F.pad(a, (1, 2, 0, 3), value=0.5)), [r(1, 2, 3, 4)]),
    "pad_reflect": (lambda: nn.ReflectionPad2d((1, 1, 2, 0)), [r(1, 2, 4, 5)]),
    "interpolate": (lambda: Fn(lambda a: F.interpolate(a, size=(6, 9), mode="nearest")), [r(1, 2, 3, 3)]),
}


@pytest.mark.parametrize("make, xs", [pytest.param(m, x, id=n) for n, (m, x) in NN_MODULES.items()])
def test_nn_module(make, xs):
    torch.manual_seed(1)
    mod = make()
    if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d)):
        mod.running_mean.uniform_(-1, 1)
        mod.running_var.uniform_(0.5, 2)
        mod.weight.data.uniform_(0.5, 1.5)
        mod.bias.data.uniform_(-1, 1)
    verify_model(mod, xs)


@pytest.mark.parametrize("mask, causal", [(None, False), (None, True), ("bool", False), ("float", False)])
def test_scaled_dot_product_attention(mask, causal):
    q, k, v = r(2, 3, 5, 8), r(2, 3, 6, 8), r(2, 3, 6, 4)
    if causal:
        k, v = r(2, 3, 5, 8), r(2, 3, 5, 4)
    inputs = [q, k, v]
    if mask == "bool":
        inputs.append(torch.rand(5, 6) > 0.3)
        inputs[-1][:, 0] = True
    elif mask == "float":
        inputs.append(r(2, 1, 5, 6))

    def f(q, k, v, m=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal)
    verify_model(Fn(f), inputs)


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x, need_weights=False)[0]


def test_multihead_attention_module():
    verify_model(SelfAttention(), [r(2, 5, 8)])


def test_python_scalar_math_in_trace():
    # size arithmetic recorded by the tracer (NumToTensor / Int) folds at import time
    def f(a):
        n = a.shape[-1]
        return a.view(-1, n // 2) * math.sqrt(n)
    verify_model(Fn(f), [r(3, 4, 6)])


class Flagged(nn.Module):
    def __init__(self, flag):
        super().__init__()
        self.flag = flag
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        if self.flag:
            return self.fc(x) * 2
        return self.fc(x) - 1


@pytest.mark.parametrize("flag", [True, False])
def test_scripted_if_on_module_constant(flag):
    """prim::If whose condition is known at import time is inlined (scripted modules without loops)."""
    from torch_frontend_util import relay, run_relay
    model = Flagged(flag).eval()
    scripted = torch.jit.script(model)
    x = r(2, 4)
    mod, params = relay.frontend.from_pytorch(scripted, [("x", (2, 4))])
    (out,) = run_relay(mod, params, [x.numpy()])
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(out), model(x), rtol=1e-5, atol=1e-5)


def test_traced_function_and_tuple_outputs():
    from torch_frontend_util import relay, run_relay

    def f(a, b):
        return a + b, (a * b, torch.relu(a))

    a, b = r(3, 4), r(3, 4)
    traced = torch.jit.trace(f, (a, b))
    mod, params = relay.frontend.from_pytorch(traced, [("a", (3, 4)), ("b", (3, 4))])
    outs = run_relay(mod, params, [a.numpy(), b.numpy()])
    for got, want in zip(outs, [a + b, a * b, torch.relu(a)]):
        torch.testing.assert_close(torch.from_numpy(got), want)


class Mixed(nn.Module):
    """Many converted ops in one graph, so one relay.build covers them."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1, groups=1)
        self.gn = nn.GroupNorm(2, 4)
        self.ln = nn.LayerNorm(5)

    def forward(self, x, q):
        y = F.hardswish(self.gn(self.conv(x)))
        y = F.interpolate(y, scale_factor=2, mode="bilinear") + F.pad(y, (2, 3, 4, 1), mode="reflect")
        y = F.max_pool2d(y, 3, 2, 1) + F.avg_pool2d(y, 2, 2, ceil_mode=True)[..., :5, :5]
        z = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        z = self.ln(F.gelu(torch.einsum("bld,bmd->blm", z, q)))
        g = torch.gather(z, 2, torch.tensor([[[0, 4], [1, 1], [2, 3], [4, 0], [3, 3]]]).expand(2, 5, 2))
        return y.flatten(1).softmax(-1), z.sum(-1) + g.amax(-1), torch.cat([z, z], 1)[:, -3:]


def test_mixed_ops_built():
    torch.manual_seed(2)
    verify_model(Mixed(), [r(2, 3, 5, 5), r(2, 5, 5)], executor="graph")
