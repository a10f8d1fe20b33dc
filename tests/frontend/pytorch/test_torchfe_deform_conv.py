"""torchvision::deform_conv2d -> relay.nn.deformable_conv2d. torchvision's C++ ops may not load here, so the op
is declared with torchvision's schema (when missing) and computed in PyTorch from grid_sample, one bilinear
sample per kernel tap: an independent reference for both the converter and the Relay op's kernel."""
import numpy as np
import pytest

from torch_frontend_util import torch, torchvision_op

import kiln
from kiln import relay
from kiln.contrib import graph_executor
from kiln.error import OpNotImplemented
from kiln.topi.testing import deformable_conv2d_nchw_python

F = torch.nn.functional
_SCHEMA = ("deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, SymInt stride_h, "
           "SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, SymInt groups, "
           "SymInt offset_groups, bool use_mask) -> Tensor")


def torch_deform_conv2d(x, weight, offset, mask, bias, sh, sw, ph, pw, dh, dw, groups, offset_groups, use_mask):
    """torchvision's deform_conv2d from grid_sample (align_corners=True, zeros outside: torchvision's taps)."""
    n, c, h, w = x.shape
    f, cg, kh, kw = weight.shape
    oh, ow = offset.shape[2:]
    oy = torch.arange(oh, dtype=x.dtype).view(oh, 1) * sh - ph
    ox = torch.arange(ow, dtype=x.dtype).view(1, ow) * sw - pw
    per = c // offset_groups
    out = torch.zeros(n, f, oh, ow, dtype=x.dtype)
    fg = f // groups
    for i in range(kh):
        for j in range(kw):
            cols = []
            for g in range(offset_groups):
                k = (g * kh * kw + i * kw + j) * 2
                y = oy + i * dh + offset[:, k]
                xx = ox + j * dw + offset[:, k + 1]
                grid = torch.stack([2 * xx / (w - 1) - 1, 2 * y / (h - 1) - 1], dim=-1)
                s = F.grid_sample(x[:, g * per:(g + 1) * per], grid, mode="bilinear", padding_mode="zeros",
                                  align_corners=True)
                if use_mask:
                    s = s * mask[:, g * kh * kw + i * kw + j].unsqueeze(1)
                cols.append(s)
            col = torch.cat(cols, 1)  # [n, c, oh, ow]
            for gg in range(groups):
                out[:, gg * fg:(gg + 1) * fg] += torch.einsum(
                    "bcyx,fc->bfyx", col[:, gg * cg:(gg + 1) * cg], weight[gg * fg:(gg + 1) * fg, :, i, j])
    return out + bias.view(1, -1, 1, 1)


def _declare():
    return torchvision_op("deform_conv2d", _SCHEMA, torch_deform_conv2d)


class DeformConv(torch.nn.Module):
    def __init__(self, c, f, k, stride, pad, dil, groups, offset_groups, bias=True):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.weight = torch.nn.Parameter(torch.randn(f, c // groups, k, k, generator=g))
        self.bias = torch.nn.Parameter(torch.randn(f, generator=g) if bias else torch.zeros(f))
        self.args = (stride, stride, pad, pad, dil, dil, groups, offset_groups)

    def forward(self, x, offset):
        return _declare()(x, self.weight, offset, torch.zeros(0), self.bias, *self.args, False)


CASES = [  # (n, c, h, w, f, k, stride, pad, dilation, groups, offset_groups)
    (1, 3, 7, 9, 5, 3, 1, 1, 1, 1, 1), (2, 4, 8, 6, 6, 3, 2, 0, 1, 2, 2), (1, 4, 9, 9, 4, 2, 1, 2, 2, 1, 4),
    (1, 2, 5, 5, 3, 1, 1, 0, 1, 1, 1)]


@pytest.mark.parametrize("case", CASES)
def test_deform_conv2d_matches_pytorch(case):
    n, c, h, w, f, k, s, p, d, g, og = case
    model = DeformConv(c, f, k, s, p, d, g, og).eval()
    oh, ow = (h + 2 * p - (d * (k - 1) + 1)) // s + 1, (w + 2 * p - (d * (k - 1) + 1)) // s + 1
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(n, c, h, w, generator=gen)
    offset = torch.randn(n, 2 * og * k * k, oh, ow, generator=gen) * 1.5  # some taps land outside the input
    with torch.no_grad():
        expected = model(x, offset).numpy()
        traced = torch.jit.trace(model, (x, offset))
    assert "torchvision::deform_conv2d" in str(traced.graph)
    mod, params = relay.frontend.from_pytorch(traced, [("x", tuple(x.shape)), ("offset", tuple(offset.shape))])
    assert "nn.deformable_conv2d" in mod.astext()
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](kiln.cpu(0)))
    m.set_input("x", x.numpy())
    m.set_input("offset", offset.numpy())
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), expected, rtol=1e-4, atol=1e-4)
    ref = deformable_conv2d_nchw_python(x.numpy(), offset.numpy(), model.weight.detach().numpy(), s, p, d, og, g)
    np.testing.assert_allclose(ref + model.bias.detach().numpy().reshape(1, -1, 1, 1), expected, rtol=1e-4,
                               atol=1e-4)


def test_zero_offsets_are_a_convolution():
    x, wt = np.random.default_rng(2).standard_normal((2, 3, 6, 7)).astype("float32"), \
        np.random.default_rng(3).standard_normal((4, 3, 3, 3)).astype("float32")
    off = np.zeros((2, 18, 6, 7), "float32")
    got = deformable_conv2d_nchw_python(x, off, wt, 1, 1, 1)
    want = F.conv2d(torch.from_numpy(x), torch.from_numpy(wt), padding=1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_modulation_mask_is_refused():
    op = _declare()

    class Masked(torch.nn.Module):
        def forward(self, x, offset, mask):
            return op(x, torch.ones(2, 2, 3, 3), offset, mask, torch.zeros(2), 1, 1, 1, 1, 1, 1, 1, 1, True)
    args = (torch.randn(1, 2, 5, 5), torch.randn(1, 18, 5, 5), torch.rand(1, 9, 5, 5))
    traced = torch.jit.trace(Masked(), args)
    with pytest.raises(OpNotImplemented, match="use_mask"):
        relay.frontend.from_pytorch(traced, [("x", (1, 2, 5, 5)), ("o", (1, 18, 5, 5)), ("m", (1, 9, 5, 5))])


def test_relation_checks_the_offset_shape():
    x, o, w = relay.var("x", shape=(1, 2, 5, 5)), relay.var("o", shape=(1, 16, 5, 5)), relay.var("w", shape=(3, 2, 3, 3))
    with pytest.raises(kiln.error.KilnError, match="offset has shape"):
        relay.transform.InferType()(kiln.IRModule.from_expr(relay.nn.deformable_conv2d(x, o, w, padding=1)))
