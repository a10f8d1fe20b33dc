"""TVM-era PyTorch frontend cases (v0.13 test_forward.py, after test_forward_clamp): tensor creation and in-place
fills. Each model is traced, imported, built and run on the graph executor, and compared with PyTorch."""
import numpy as np
import pytest

from torchfe_tvm_era_util import check, torch
from torch_frontend_util import Fn

pytestmark = pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")


def _img():
    return torch.rand(1, 3, 10, 10)


CASES = {
    # test_forward_clamp_: in-place clamp
    "clamp_": [(lambda x: torch.clamp_(x, 0.1, 0.9), [torch.rand(4, 8)]),
               (lambda x: torch.clamp_(x, 0.2, 0.5), [torch.rand(7, 6)])],
    # test_forward_ones / zeros / full (no inputs)
    "ones": [(lambda: torch.ones(2, 3), [])],
    "zeros": [(lambda: torch.zeros(2, 3), [])],
    "full": [(lambda: torch.full((2, 3), 3.14), []), (lambda: torch.full((1, 2, 3), 1.0, dtype=torch.int32), [])],
    # *_like with and without a dtype
    "ones_like": [(lambda x: torch.ones_like(x), [_img()]), (lambda x: torch.ones_like(x, dtype=torch.int8), [_img()]),
                  (lambda x: torch.ones_like(x, dtype=torch.float), [_img()])],
    "zeros_like": [(lambda x: torch.zeros_like(x), [_img()]),
                   (lambda x: torch.zeros_like(x, dtype=torch.int32), [_img()]),
                   (lambda x: torch.zeros_like(x, dtype=torch.float), [_img()])],
    "full_like": [(lambda x: torch.full_like(x, 3.14), [_img()]),
                  (lambda x: torch.full_like(x, 22.22, dtype=torch.int32), [_img()]),
                  (lambda x: torch.full_like(x, 1.4, dtype=torch.float), [_img()])],
    # Tensor.new_* methods
    "new_ones": [(lambda x: x.new_ones([3, 10, 10]), [_img()])],
    "new_zeros": [(lambda x: x.new_zeros((2, 3)), [_img()])],
    "new_full": [(lambda x: x.new_full([2, 3], 1), [_img()])],
    # in-place fills
    "zero_": [(lambda x: x.zero_(), [_img()])],
    "fill_": [(lambda x: x.fill_(3), [_img()])],
    "fill_with_div": [(lambda x: x.fill_(torch.div(torch.tensor(6.0), torch.tensor(2.0))), [_img()])],
    # test_forward_linspace
    "linspace": [(lambda: torch.linspace(5, 10, steps=100), []), (lambda: torch.linspace(-10, 10, steps=5), []),
                 (lambda: torch.linspace(start=-10, end=10, steps=1), []),
                 (lambda: torch.linspace(1, 2, 1, dtype=torch.int32), []),
                 (lambda: torch.linspace(start=1, end=6, steps=2), []),
                 (lambda: torch.linspace(1, 4, steps=100, dtype=torch.float32), []),
                 (lambda: torch.linspace(1, 2, 1, dtype=torch.int16), []), (lambda: torch.linspace(0, 8, 10), [])],
}


@pytest.mark.parametrize("name,idx", [(k, i) for k, v in CASES.items() for i in range(len(v))])
def test_tvm_era_creation(name, idx):
    fn, inputs = CASES[name][idx]
    check(Fn(fn), inputs)


SHAPE_ONLY = {
    "empty": (lambda: torch.empty([1, 3, 10, 10]), []),
    "empty_like": (lambda x: torch.empty_like(x), [_img()]),
    "new_empty": (lambda x: x.new_empty([3, 10, 10]), [_img()]),
    "new_empty_int32": (lambda x: x.new_empty([3, 10, 10], dtype=torch.int32), [_img()]),
    "randn_list": (lambda: torch.randn([1, 3, 10, 10]), []),
    "randn_args": (lambda: torch.randn(1, 3, 10, 10), []),
}


@pytest.mark.parametrize("name", list(SHAPE_ONLY))
def test_tvm_era_uninitialized_and_random_shapes(name):
    fn, inputs = SHAPE_ONLY[name]
    check(Fn(fn), inputs, shape_only=True)


def test_tvm_era_randn_is_standard_normal():
    """aten::randn draws from N(0, 1): a large sample's mean and deviation are close to 0 and 1."""
    mod, params = check(Fn(lambda: torch.randn(64, 64)), [], shape_only=True)
    from torch_frontend_util import run_relay
    (out,) = run_relay(mod, params, [], "graph")
    assert out.dtype == np.float32 and abs(out.mean()) < 0.1 and abs(out.std() - 1) < 0.1


@pytest.mark.parametrize("shape,num", [((3,), 2), ((4, 5), 1)])
def test_tvm_era_multinomial(shape, num):
    """torch.multinomial with replacement: the shape matches and every sample has a nonzero probability."""
    probs = torch.rand(*shape)
    probs[..., 0] = 0.0
    mod, params = check(Fn(lambda p: torch.multinomial(p, num_samples=num, replacement=True)), [probs],
                        shape_only=True)
    from torch_frontend_util import run_relay
    (out,) = run_relay(mod, params, [probs.numpy()], "graph")
    assert out.dtype == np.int64 and ((out >= 1) & (out < shape[-1])).all()
