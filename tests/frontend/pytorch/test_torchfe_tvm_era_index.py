"""TVM-era PyTorch frontend cases (v0.13 test_forward.py, after test_forward_clamp): gathering, scattering,
sorting, searching, stacking. Static shapes run on the graph executor, data-dependent ones on the VM; all are
compared with PyTorch."""
import numpy as np
import pytest

from torchfe_tvm_era_util import check, check_script, check_vm, torch
from torch_frontend_util import Fn

from kiln.error import FrontendError, OpNotImplemented

pytestmark = [pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def _scatter_inputs(dim):
    if dim == 0:
        return [torch.zeros(3, 5), torch.tensor([[0, 1, 2, 0, 0], [2, 0, 0, 1, 2]]), torch.rand(2, 5)]
    return [torch.zeros(2, 4), torch.tensor([[2], [3]]), torch.rand(2, 1)]


STATIC = {
    "take": [(lambda x: torch.take(x, torch.tensor([[0, 0], [1, 0]])), [torch.tensor([[1, 2], [3, 4]])]),
             (torch.take, [torch.tensor([[1, 2], [3, 4]]), torch.tensor([[0, 0], [1, 0]])]),
             (torch.take, [torch.tensor([[1, 2], [3, 4]]), torch.tensor([0, -1])])],
    "topk": [(lambda x, kw=kw: torch.topk(x, k=3, **kw), [torch.rand(1, 3, 10, 10)])
             for kw in ({}, {"dim": -2}, {"dim": 3}, {"largest": True}, {"largest": False}, {"sorted": True})],
    "matmul": [(torch.matmul, [torch.randn(*a), torch.randn(*b)]) for a, b in [
        ((4,), (4,)), ((4,), (4, 3)), ((5,), (2, 3, 5, 4)), ((3, 4), (4,)), ((10, 4), (4, 10)),
        ((10, 4), (2, 3, 4, 5)), ((2, 3, 4, 5), (5,)), ((10, 3, 4), (4, 5)), ((2, 10, 3, 4), (2, 10, 4, 5)),
        ((2, 5, 3, 4), (2, 1, 4, 5)), ((2, 1, 5, 4), (2, 5, 4, 3)), ((3, 2, 3, 1, 5, 4), (2, 1, 5, 4, 3))]],
    "logsumexp": [(lambda x: torch.logsumexp(x, 0), [torch.rand(100, 100)]),
                  (lambda x: torch.logsumexp(x, 0, True), [torch.rand(100, 100)]),
                  (lambda x: torch.logsumexp(x, 1, True), [torch.rand(100, 100).double()])],
    "stack": [(lambda x, d=d: torch.stack((x, x), dim=d), [torch.randn(8, 8, 8)]) for d in (0, -1, 3, -4)],
    "unbind": [(lambda x, d=d: torch.unbind(x, d), [torch.randn(8, 8, 8)]) for d in (0, 1, 2)],
    "scatter": [(lambda d, i, s, dim=dim: torch.scatter(d, dim, i, s), _scatter_inputs(dim)) for dim in (0, 1)] +
               [(lambda d, i, s, dim=dim: torch.scatter_add(d, dim, i, s), _scatter_inputs(dim)) for dim in (0, 1)] +
               [(lambda d, i, s: torch.scatter(d, 0, i, s), [torch.zeros(2, 4), torch.empty((0,)).long(),
                                                               torch.rand(2, 1)]),
                (lambda d, i, s: torch.scatter_add(d, 0, i, s), [torch.zeros(2, 4), torch.empty((0,)).long(),
                                                                   torch.rand(2, 1)])],
    "scatter_reduce": [
        (lambda d, i, s, dim=dim, r=r: torch.scatter_reduce(d, dim, i, s, reduce=r),
         [x - 1 if x.is_floating_point() else x for x in _scatter_inputs(dim)])
        for dim in (0, 1) for r in ("sum", "prod", "amin", "amax", "mean")],
    "index_put": [
        (lambda d, x, y, v: torch.index_put(d, [x, y], v),
         [torch.zeros(3, 5), torch.tensor([0, 1, 2, 2]), torch.tensor([0, 1, 3, 4]), torch.rand(4)]),
        (lambda d, x, y, z, v: torch.index_put(d, [x, y, z], v, accumulate=True),
         [torch.zeros(3, 5, 3), torch.tensor([0, 1, 2, 2, 0]), torch.tensor([0, 1, 3, 4, 0]),
          torch.tensor([0, 1, 1, 2, 0]), torch.rand(5)])],
    "bincount": [(lambda x: torch.bincount(x), [torch.randint(0, 100, (10000,))]),
                 (lambda x, w: torch.bincount(x, weights=w), [torch.randint(0, 100, (10000,)),
                                                              torch.linspace(0, 100, steps=10000)])],
    "cumsum": [(lambda x: torch.cumsum(x, 0), [torch.randint(0, 100, (10000,), dtype=torch.int32)]),
               (lambda x: torch.cumsum(x, 0), [torch.randint(0, 100, (10000,))]),
               (lambda x: torch.cumsum(x, 0, dtype=torch.int64), [torch.randint(0, 100, (10000,))]),
               (lambda x: torch.cumsum(x, 0, dtype=torch.float64), [torch.randn(100, 100)]),
               (lambda x: torch.cumsum(x, 1), [torch.randn(100, 100)]),
               (lambda x: torch.cumsum(x, 0, dtype=torch.int32), [torch.randn(100, 100) > 0.5])],
    "argsort": [(lambda x, d=d, s=s: torch.argsort(x, dim=d, descending=s), [torch.randn(*shape)])
                for shape, dims in (((100,), (0,)), ((100, 100), (0, 1))) for d in dims for s in (True, False)],
    "sort": [(lambda x, d=d, s=s: torch.sort(x, dim=d, descending=s), [torch.randn(*shape)])
             for shape, dims in (((100,), (0, -1)), ((100, 100), (0, -2, 1, -1))) for d in dims for s in (True, False)],
    "flip": [(lambda x, a=a: x.flip(a), [torch.randn(2, 3, 4)]) for a in ([0], [1], [2], [-1], [0, 1])],
    "all_any": [(lambda x, f=f, kw=kw: f(x, **kw), [inp]) for f in (torch.all, torch.any) for kw, inp in (
        ({"dim": 0}, torch.rand(1, 2) > 0.5), ({"dim": 0}, torch.arange(0, 3).to(torch.uint8)),
        ({"dim": 1}, torch.rand(4, 2) > 0.5), ({"dim": 0, "keepdim": True}, torch.rand(4, 2) > 0.5),
        ({}, torch.rand(1, 2) > 0.5), ({}, torch.arange(0, 3).to(torch.uint8)))],
    "searchsorted": [
        (lambda s, v: torch.searchsorted(s, v), [torch.tensor([[1, 3, 5, 7, 9], [2, 4, 6, 8, 10]]),
                                                  torch.tensor([[3, 6, 9], [3, 6, 9]])]),
        (lambda s, v: torch.searchsorted(s, v, out_int32=True), [torch.tensor([1, 3, 5, 7, 9]),
                                                                  torch.tensor([3, 6, 9])]),
        (lambda s, v: torch.searchsorted(s, v, right=True), [torch.tensor([[1, 3, 5, 7, 9], [2, 4, 6, 8, 10]]),
                                                              torch.tensor([[3, 6, 9], [3, 6, 9]])]),
        (lambda s, v: torch.searchsorted(s, v), [torch.tensor([1, 3, 5, 7, 9]), torch.tensor([[3, 6, 9], [4, 2, 7]])]),
        (lambda s, v: torch.searchsorted(s, v), [torch.tensor([1, 3, 5, 7, 9]), torch.tensor(6)])],
    "bucketize": [(lambda v, b: torch.bucketize(v, b), [torch.tensor([3, 6, 9]), torch.tensor([1, 3, 5, 7, 9])]),
                  (lambda v, b: torch.bucketize(v, b, out_int32=True, right=True),
                   [torch.tensor([3, 6, 9]), torch.tensor([1, 3, 5, 7, 9])])],
    "roll": [(lambda x: torch.roll(x, 1, 0), [torch.arange(1, 9).view(4, 2)]),
             (lambda x: torch.roll(x, -1, 0), [torch.arange(1, 9).view(4, 2)]),
             (lambda x: torch.roll(x, (2, 1), (0, 1)), [torch.arange(1, 9).view(4, 2)])],
    "inplace_copy": [],
}


def _set_simple(x):
    x[:5, 0, 5:] = x[:5, 0, 5:] + 1
    return x


def _set_negative(x):
    x[5:-1, -1, :] = x[5:-1, -1, :] + 1
    return x


def _set_partial(x):
    x[:5] = x[:5] + 1
    x[0:5, ...] = x[0:5, ...] + 1
    x[0:5, ..., -1] = x[0:5, ..., -1] + 1
    return x


STATIC["inplace_copy"] = [(f, [torch.randn(10, 10, 10)]) for f in (_set_simple, _set_negative, _set_partial)]


@pytest.mark.parametrize("name,idx", [(k, i) for k, v in STATIC.items() for i in range(len(v))])
def test_tvm_era_indexing(name, idx):
    fn, inputs = STATIC[name][idx]
    check(Fn(fn), inputs)


def _nonzero_input():
    return torch.tensor([[0.0, 1, 0], [2, 0, 9], [-1, -1, 0]])


def _sparse():
    x = torch.rand(10)
    x[3:8] = 0
    return x


DYNAMIC = {
    "where_one_arg": [(lambda x: torch.where(x)[0], [_sparse()])],
    "nonzero": [(lambda x: torch.nonzero(x), [_nonzero_input()]),
                (lambda x: torch.nonzero(x, as_tuple=True), [_nonzero_input()])],
    "masked_select": [(lambda x, m: torch.masked_select(x, m), [x, x.ge(0.5)])
                      for x in (torch.randn(10), torch.randn(3, 4), torch.randn(16, 32, 64))],
    "unique": [(lambda x, r=r, c=c: torch.unique(x, True, r, c), [inp]) for inp in
               (torch.randint(0, 20, (10,), dtype=torch.int32), torch.randint(0, 20, (20,)))
               for r, c in ((True, True), (False, True), (True, False))],
}


@pytest.mark.parametrize("name,idx", [(k, i) for k, v in DYNAMIC.items() for i in range(len(v))])
def test_tvm_era_data_dependent_shapes(name, idx):
    fn, inputs = DYNAMIC[name][idx]
    check_vm(Fn(fn), inputs)


class StackRows(torch.nn.Module):
    def forward(self, x):
        rows = []
        for i in range(x.size(0)):
            rows += [x[i]]
        return torch.stack(rows, dim=0)


def test_tvm_era_stack_dynamic():
    """A scripted loop that collects rows into a list and stacks them (test_stack_dynamic)."""
    check_script(StackRows(), [(8, 8, 8)])


class Numel(torch.nn.Module):
    def forward(self, x):
        return torch.tensor(torch.numel(x))


@pytest.mark.parametrize("shape", [(1,), (3, 5), (3, 5, 8)])
def test_tvm_era_numel(shape):
    check_script(Numel(), [shape])


def _set_strided(x, y):
    x[1:7:2, 2] = y
    return x


def _narrow_add(x):
    x.narrow(1, 2, 3).add_(1.5)
    return x * 2


def _row_fill(x):
    x[2].fill_(0)
    x[-1, 1:].zero_()
    return x


def _view_write(x):
    v = x.view(4, 6)
    v[1] = 7.0
    return x + 0


def _broadcast_int_write(x):
    x[:, 0] = 3
    return x


@pytest.mark.parametrize("fn,shapes", [(_set_strided, [(8, 5, 3), (3, 3)]), (_narrow_add, [(4, 6)]),
                                       (_row_fill, [(4, 5)]), (_view_write, [(2, 3, 4)]),
                                       (_broadcast_int_write, [(3, 4)])])
def test_inplace_writes_through_views(fn, shapes):
    """Writes into slices, selects, narrows and reshaped views reach the base tensor (pytorch_inplace.py)."""
    check(Fn(fn), [torch.randn(*s) for s in shapes])


ADVANCED = [lambda x: x[[0, 1], [0, 2], :2, 4],
            lambda x: x[[0], [1, 2, 3, 0], [3, 1, 2, 2], [4, 2, 1, 0]],
            lambda x: x[None, [2, 2]],
            lambda x: x[None, [0, 1, 2], 1, [2, 3, 4]],
            lambda x: x[None, [0, 0], None, np.array([[0], [1], [2]]), None],
            lambda x: x[None, None, [0, 0], np.array([[0], [1], [2]]), None],
            lambda x: x[None, 1, None, [1, 2, 3]],
            # index tensors separated by a sliced axis (their broadcast dims go first)
            lambda x: x[[1, 0, 2], :, [3, 3, 0]],
            lambda x: x[:, [[1], [2]], :, [0, 5, -1]]]


@pytest.mark.parametrize("idx", range(len(ADVANCED)))
def test_tvm_era_advanced_indexing(idx):
    """test_forward_index (skipped in TVM v0.13 itself for aten::lift_fresh): lists, arrays, None and ints."""
    check(Fn(ADVANCED[idx]), [torch.rand(3, 4, 5, 6)])


def test_tvm_era_bool_mask_indexing():
    check_vm(Fn(lambda data, mask: data[0, mask]), [torch.tensor([[1, 2, 3], [4, 5, 6]]),
                                                     torch.tensor([True, True, False])])


class _Slice3(torch.nn.Module):
    def forward(self, x):
        x0 = torch.tensor(2) - torch.tensor(1)
        x1 = torch.tensor(3) + torch.tensor(1)
        return x[:, x0:, 1:x1, :]


SLICES = [(Fn(lambda x: x[:, :, :, :3]), (1, 3, 10, 10)), (Fn(lambda x: x[0, :, :-3, :]), (1, 3, 10, 10)),
          (_Slice3(), (1, 3, 10, 10)), (Fn(lambda x: x[..., 0::2] + x[..., 1::2]), (1, 4)),
          (Fn(lambda x: x[0::2, 0::2] + x[1::2, 1::2]), (4, 4)), (Fn(lambda x: x[1:-2:3, ::2]), (11, 7))]


@pytest.mark.parametrize("idx", range(len(SLICES)))
def test_tvm_era_slice(idx):
    """test_forward_slice: constant bounds (also ones computed from constant tensors) and strides."""
    model, shape = SLICES[idx]
    check(model, [torch.rand(*shape)])


class _DynamicLengthSlice(torch.nn.Module):
    def forward(self, values, length):
        return values[0:length], values[:, length - 1:], values[length:-1:2]


def test_tvm_era_dynamic_length_slice():
    """test_forward_slice's DynamicLengthSlice: a bound read from an input tensor becomes dyn.strided_slice,
    compiled once for the VM and run at several lengths (negative ones count from the end, past-the-end ones
    clamp, as in PyTorch)."""
    values = torch.randint(-9, 9, (5, 3))
    mod, params = check_vm(_DynamicLengthSlice(), [values, torch.tensor(2)])
    assert "dyn.strided_slice" in mod.astext()
    from kiln.runtime.vm import VirtualMachine
    import kiln
    from kiln import relay
    with kiln.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm", params=params)
    vm = VirtualMachine(exe, kiln.cpu())
    for length in (0, 1, 3, 5, 7, -2):
        got = vm.run(values.numpy(), np.array(length))
        for g, e in zip(got, _DynamicLengthSlice()(values, torch.tensor(length))):
            np.testing.assert_array_equal(g.numpy(), e.numpy(), err_msg=f"length {length}")
