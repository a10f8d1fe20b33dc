"""Gaps found re-running TVM-era test_forward.py cases: torch.tensor_split with a tensor of sections or indices,
ConvTranspose1d (Relay's nn.conv1d_transpose); compared with PyTorch, compiled and on the interpreter."""
import numpy as np
import pytest

from torch_frontend_util import torch, verify_model

import kiln as tvm
from kiln import relay
from kiln.error import KilnError

nn = torch.nn
pytestmark = pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")


class TensorSplit(nn.Module):
    def __init__(self, spec, dim):
        super().__init__()
        self.spec, self.dim = spec, dim

    def forward(self, x):
        return torch.tensor_split(x, self.spec, self.dim)


@pytest.mark.parametrize("spec,dim", [(torch.tensor(3), 1), (torch.tensor(4), 0), (torch.tensor([2, 3, 5]), 1),
                                      (torch.tensor([1]), 0), (2, 0), ([2, 3, 5], 1)])
def test_tensor_split_tensor_sections_and_indices(spec, dim):
    verify_model(TensorSplit(spec, dim).eval(), [torch.randn(5, 11)], paths=("script",), executor="graph")


@pytest.mark.parametrize("stride,output_padding,padding,dilation,groups,bias", [
    (1, 0, 0, 1, 1, True), (2, 1, 0, 1, 1, False), (3, 2, 1, 1, 1, True), (2, 0, 2, 2, 1, True),
    (2, 1, 1, 1, 3, False)])
def test_conv_transpose1d_matches_pytorch(stride, output_padding, padding, dilation, groups, bias):
    m = nn.ConvTranspose1d(6, 9, 3, stride=stride, output_padding=output_padding, padding=padding,
                           dilation=dilation, groups=groups, bias=bias).eval()
    verify_model(m, [torch.randn(2, 6, 11)], paths=("script",), executor="graph", rtol=1e-5, atol=1e-5)


def test_relay_conv1d_transpose_reference_and_errors():
    x = relay.var("x", shape=(1, 4, 7))
    w = relay.var("w", shape=(4, 2, 3))
    f = relay.Function([x, w], relay.nn.conv1d_transpose(x, w, strides=(2,), padding=(1,), output_padding=(1,),
                                                          channels=2, kernel_size=(3,)))
    mod = tvm.IRModule.from_expr(f)
    assert [int(d) for d in relay.transform.InferType()(mod)["main"].ret_type.shape] == [1, 2, 14]
    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal((1, 4, 7)).astype("float32"), rng.standard_normal((4, 2, 3)).astype("float32")
    ref = torch.nn.functional.conv_transpose1d(torch.tensor(xv), torch.tensor(wv), stride=2, padding=1,
                                               output_padding=1).numpy()
    dbg = relay.create_executor("debug", mod=mod).evaluate()(xv, wv).numpy()
    np.testing.assert_allclose(dbg, ref, rtol=1e-5, atol=1e-5)
    bad = relay.Function([x, w], relay.nn.conv1d_transpose(x, w, kernel_layout="OIW"))
    with pytest.raises(KilnError, match="kernel_layout IOW"):
        relay.transform.InferType()(tvm.IRModule.from_expr(bad))
    bad = relay.Function([x, w], relay.nn.conv1d_transpose(x, w, strides=(1,), output_padding=(1,)))
    with pytest.raises(KilnError, match="output_padding 1 must be smaller"):
        relay.transform.InferType()(tvm.IRModule.from_expr(bad))


class Linear(nn.Module):
    def forward(self, x, w, *b):
        return torch.nn.functional.linear(x, w, *b)


@pytest.mark.parametrize("shapes", [[(2, 3), (3,)], [(4, 3, 5), (5,)], [(5,), (5,)], [(5,), (5,), ()],
                                    [(3,), (4, 3), (4,)], [(4, 3, 5), (5,), ()]])
def test_linear_with_one_dimensional_weight(shapes):
    verify_model(Linear().eval(), [torch.randn(s) for s in shapes], paths=("script",), executor="graph")


@pytest.mark.parametrize("module,shape", [
    (lambda: nn.ConvTranspose3d(4, 5, (3, 5, 2), stride=(2, 1, 1), padding=(0, 4, 2)), (1, 4, 5, 7, 6)),
    (lambda: nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 1), padding=(0, 2)), (1, 4, 5, 6)),
    (lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=3, output_padding=1, groups=2), (2, 4, 7, 5)),
    (lambda: nn.ConvTranspose1d(4, 6, 2, stride=1, padding=2), (1, 4, 9))])
def test_conv_transpose_padding_beyond_the_kernel_crops(module, shape):
    """PyTorch lets a transposed convolution's padding exceed the kernel extent (the output is cropped)."""
    verify_model(module().eval(), [torch.randn(*shape)], paths=("script",), executor="graph", rtol=1e-5, atol=1e-5)
