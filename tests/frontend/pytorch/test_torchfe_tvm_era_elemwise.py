"""TVM-era PyTorch frontend cases (v0.13 test_forward.py, after test_forward_clamp): unary math, logical and bitwise
ops on bool/int inputs, ternary arithmetic, dtypes. Traced, built, run on the graph executor, compared with PyTorch."""
import pytest

from torchfe_tvm_era_util import check, torch
from torch_frontend_util import Fn

pytestmark = [pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]


UNARY = ["square", "sqrt", "rsqrt", "ceil", "floor", "round", "cos", "cosh", "sin", "sinh", "tan", "tanh", "acos",
         "asin", "atan", "log", "log2", "log10", "log1p", "exp", "erf", "trunc", "sign", "neg"]


@pytest.mark.parametrize("op", UNARY)
def test_tvm_era_unary(op):
    # odd sizes; values in (0, 1) as TVM uses, so that log/acos/asin are defined
    f = getattr(torch, op)
    check(Fn(lambda x: f(x)), [torch.rand(1, 3, 7, 9)], rtol=1e-5, atol=1e-5)


def _i8(*v):
    return torch.tensor(v, dtype=torch.int8)


def _b(*v):
    return torch.tensor(v, dtype=torch.bool)


BINARY = {
    "logical_not": [(torch.logical_not, [_b(True, False)]), (torch.logical_not, [_i8(0, 1, -10)]),
                    (torch.logical_not, [torch.tensor([0.0, 1.5, -10.0], dtype=torch.double)]),
                    (torch.logical_not, [torch.tensor([0, 1, -10], dtype=torch.int32)])],
    "bitwise_not": [(torch.bitwise_not, [_i8(0, 1, -10)]),
                    (torch.bitwise_not, [torch.tensor([0, 1, -10], dtype=torch.int32)]),
                    (torch.bitwise_not, [_b(True, False)])],
    "bitwise_xor": [(torch.bitwise_xor, [_i8(-1, -2, 3), _i8(1, 0, 3)]),
                    (torch.bitwise_xor, [_b(True, True, False), _b(False, True, False)]),
                    (lambda a: torch.bitwise_xor(a, torch.tensor([1, 0, 3], dtype=torch.int8)), [_i8(-1, -2, 3)])],
    "bitwise_and": [(torch.bitwise_and, [_i8(-1, -2, 3), _i8(1, 0, 3)]),
                    (torch.bitwise_and, [_b(True, True, False), _b(False, True, False)]),
                    (lambda a: torch.bitwise_and(a, torch.tensor([1, 0, 3], dtype=torch.int8)), [_i8(-1, -2, 3)])],
    "logical_xor": [(torch.logical_xor, [_i8(-1, -2, 3), _i8(1, 0, 3)]),
                    (torch.logical_xor, [_b(True, True, False), _b(False, True, False)]),
                    (lambda a: torch.logical_xor(a, torch.tensor([1, 0, 3], dtype=torch.int8)), [_i8(-1, -2, 3)])],
    "logical_and": [(torch.logical_and, [_i8(0, 1, 10, 0), _i8(4, 0, 1, 0)]),
                    (torch.logical_and, [_b(True, False, True), _b(True, False, False)])],
    "logical_or": [(torch.logical_or, [_i8(0, 1, 10, 0), _i8(4, 0, 1, 0)]),
                   (torch.logical_or, [_b(True, False, True), _b(True, False, False)])],
    "binary_bitwise": [(lambda x, y: x.__ior__(y), [torch.randint(0, 256, (6,), dtype=torch.uint8),
                                                     torch.randint(0, 256, (6,), dtype=torch.uint8)]),
                       (lambda x, y: x.__iand__(y), [torch.randint(0, 256, (6,), dtype=torch.uint8),
                                                      torch.randint(0, 256, (6,), dtype=torch.uint8)]),
                       (lambda x, y: x.__ixor__(y), [torch.randint(0, 256, (6,), dtype=torch.uint8),
                                                      torch.randint(0, 256, (6,), dtype=torch.uint8)])],
    "shift": [(lambda x, y: x << y, [torch.randint(0, 256, (6,), dtype=torch.int32),
                                     torch.randint(0, 10, (6,), dtype=torch.int32)]),
              (lambda x, y: x >> y, [torch.randint(0, 256, (6,), dtype=torch.int32),
                                     torch.randint(0, 10, (6,), dtype=torch.int32)])],
    "mod": [(torch.fmod, [torch.tensor([-3.0, -2, -1, 1, 2, 3]), torch.tensor(2)]),
            (torch.fmod, [torch.tensor([1, 2, 3, 4, 5]), torch.tensor(-1.5)]),
            (torch.remainder, [torch.tensor([-3.0, -2, -1, 1, 2, 3]), torch.tensor(2)]),
            (torch.remainder, [torch.tensor([1, 2, 3, 4, 5]), torch.tensor(-1.5)])],
    "where": [(lambda x: torch.where(x > 0.5, x, torch.ones([3, 2])), [torch.rand(3, 2)]),
              (lambda x, y: torch.where(x > 0.5, x, y), [torch.rand(3, 2), torch.rand(3, 2)])],
    "addcdiv": [(lambda x: torch.addcdiv(x, torch.ones([3, 1]), torch.ones([1, 3]), value=0.1), [torch.rand(1, 3)]),
                (lambda x, a, b: torch.addcdiv(x, a, b, value=0.5),
                 [torch.rand(1, 3), torch.rand(3, 1), torch.rand(1, 3) + 0.1])],
    "addcmul": [(lambda x: torch.addcmul(x, torch.ones([3, 1]), torch.ones([1, 3]), value=0.1), [torch.rand(1, 3)]),
                (lambda x, a, b: torch.addcmul(x, a, b, value=0.5),
                 [torch.rand(1, 3), torch.rand(3, 1), torch.rand(1, 3)])],
    "true_divide": [(torch.true_divide, [torch.rand(5, 3), torch.rand(5, 3) + 0.5]),
                    (torch.true_divide, [torch.rand(5, 3), torch.tensor(1.0)])],
    "lerp": [(torch.lerp, [torch.rand(16), torch.rand(16), torch.rand(16)]),
             (torch.lerp, [torch.rand(16), torch.rand(16), torch.rand(())])],
    "traced_function": [(lambda a, b: a + b, [torch.randn(3, 4), torch.randn(3, 4)])],
    "dtypes": [(lambda a, b: 2.5 * a + b, [torch.randn(3, 4).to(dt), torch.randn(3, 4).to(dt)])
               for dt in (torch.int32, torch.int64, torch.double)],
    "convert_torch_script_with_input_types": [
        (lambda x, y: x.to(dtype=torch.int32) + y,
         [torch.rand(4, 5) * 10, torch.randint(0, 100, (4, 5), dtype=torch.int32)])],
    "hard_swish": [(torch.nn.Hardswish(), [x]) for x in (torch.randn(8), torch.randn(8, 10), torch.randn(1, 1, 10))] +
                  [(torch.nn.Hardswish(inplace=True), [torch.randn(8, 10)])],
    "hard_sigmoid": [(torch.nn.Hardsigmoid(), [x]) for x in (torch.randn(8), torch.randn(8, 10),
                                                             torch.randn(1, 1, 10))] +
                    [(torch.nn.Hardsigmoid(inplace=True), [torch.randn(8, 10)])],
    "swapaxes": [(lambda x: x.swapaxes(2, 3), [torch.rand(2, 3, 10, 5)]),
                 (lambda x: x.swapaxes(-2, -1), [torch.rand(2, 3, 10, 5)]),
                 (lambda x: x.swapaxes(1, 1), [torch.rand(2, 3, 10, 5)])],
    "masked_fill": [(lambda x, m: torch.masked_fill(x, m, 0.0), [x, x > 0.5])
                    for x in (torch.randn(37, 41), torch.randn(37, 41).double())],
}


@pytest.mark.parametrize("name,idx", [(k, i) for k, v in BINARY.items() for i in range(len(v))])
def test_tvm_era_elementwise(name, idx):
    fn, inputs = BINARY[name][idx]
    check(fn if isinstance(fn, torch.nn.Module) else Fn(fn), inputs)


def _diag_cases():
    for op in (torch.tril, torch.triu):
        for k in (0, 1, -1, -2):
            for shape in ((3, 3), (1, 3, 10, 10), (6, 6), (4, 7)):
                yield op, k, shape


@pytest.mark.parametrize("op,k,shape", list(_diag_cases()))
def test_tvm_era_tril_triu(op, k, shape):
    check(Fn(lambda x: op(x, k)), [torch.rand(*shape)])


def test_tvm_era_int_parameter():
    """A model whose parameter is an int64 tensor, added to an int32 input cast to int64 (test_forward_dtypes)."""
    class WithIntParam(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.param = torch.nn.Parameter(torch.randint(-9, 9, (10, 10)), requires_grad=False)

        def forward(self, x):
            return x.long() + self.param

    check(WithIntParam(), [torch.randint(-9, 9, (10, 10), dtype=torch.int32)])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.int64, torch.int32,
                                   torch.int16, torch.int8, torch.uint8])
def test_tvm_era_is_floating_point(dtype):
    """torch.is_floating_point of a scripted model's input: a bool known from the input's dtype."""
    from torchfe_tvm_era_util import check_script

    class IsFloat(torch.nn.Module):
        def forward(self, x):
            return torch.is_floating_point(x)

    check_script(IsFloat(), [(1, 1)], dtype=dtype)
