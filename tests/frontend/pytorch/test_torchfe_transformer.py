"""PyTorch's transformer fast path (eval mode under torch.no_grad, self-attention, an even number of heads): aten::_transformer_encoder_layer_fwd and
aten::_native_multi_head_attention, imported from TorchScript and compared with PyTorch."""
import pytest

from torch_frontend_util import relay, run_relay, torch

nn = torch.nn
pytestmark = pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")


def _check(model, inputs, expect_kind, executor="debug"):
    model = model.eval()
    with torch.no_grad():
        traced = torch.jit.trace(model, tuple(inputs), check_trace=False)
        expected = model(*inputs)
    kinds = {n.kind() for n in traced.inlined_graph.nodes()}
    assert expect_kind in kinds, f"the trace did not take PyTorch's fast path: {sorted(kinds)}"
    infos = [(f"input{i}", (tuple(x.shape), str(x.dtype).replace("torch.", ""))) for i, x in enumerate(inputs)]
    mod, params = relay.frontend.from_pytorch(traced, infos)
    got = run_relay(mod, params, [x.numpy() for x in inputs], executor)
    expected = expected if isinstance(expected, (list, tuple)) else [expected]
    for g, e in zip(got, expected):
        torch.testing.assert_close(torch.from_numpy(g), e, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("norm_first, activation", [(False, "relu"), (True, "gelu")])
def test_transformer_encoder_fast_path(norm_first, activation):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(12, 4, 20, dropout=0.0, activation=activation, batch_first=True,
                                       norm_first=norm_first)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    _check(model, [torch.randn(2, 5, 12)], "aten::_transformer_encoder_layer_fwd")


def test_transformer_encoder_with_padding_mask():
    torch.manual_seed(1)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)

        def forward(self, x, pad):
            return self.enc(x, src_key_padding_mask=pad)

    pad = torch.tensor([[False, False, False, True, True, False, True], [False] * 7])
    _check(Net(), [torch.randn(2, 7, 8), pad], "aten::_transformer_encoder_layer_fwd")


class MHA(nn.Module):
    def __init__(self, need_weights):
        super().__init__()
        self.mha = nn.MultiheadAttention(10, 2, batch_first=True)
        self.need_weights = need_weights

    def forward(self, x):
        out, w = self.mha(x, x, x, need_weights=self.need_weights)  # the fast path needs self-attention
        return (out, w) if self.need_weights else out


@pytest.mark.parametrize("need_weights", [False, True])
def test_native_multi_head_attention(need_weights):
    torch.manual_seed(2)
    _check(MHA(need_weights), [torch.randn(3, 7, 10)], "aten::_native_multi_head_attention")


def test_encoder_built_with_graph_executor():
    torch.manual_seed(3)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    _check(nn.TransformerEncoder(layer, 1, enable_nested_tensor=False), [torch.randn(1, 5, 8)],
           "aten::_transformer_encoder_layer_fwd", executor="graph")
