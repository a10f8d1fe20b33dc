"""Ops whose output shape depends on the data (nonzero, masked_select, one-argument where, unique and its
variants, boolean-mask reads and writes), imported by from_pytorch and from_exported_program and run on the
Relay VM; torch.compile(backend="kiln") with and without dynamo capturing them. Every result is compared with
PyTorch on random inputs with odd sizes, empty results (all-false masks) and NaNs."""
import numpy as np
import pytest

from torchfe_tvm_era_util import _run_vm, check, check_vm, compare, torch
from torch_frontend_util import Fn

import kiln
from kiln import relay
from kiln.error import FrontendError, LoweringError

pytestmark = [pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def _sparse(shape, frac=0.5, nan=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    x[torch.rand(*shape, generator=g) < frac] = 0
    if nan and x.numel() > 2:
        x.view(-1)[1] = float("nan")
        x.view(-1)[-1] = float("nan")
    return x


def _nonzero_all(x):
    return torch.nonzero(x), torch.nonzero(x, as_tuple=True), torch.where(x > 0.25), torch.argwhere(x)


@pytest.mark.parametrize("shape,frac,nan", [((7,), 0.5, False), ((3, 5), 0.4, True), ((2, 3, 5), 0.7, False),
                                            ((4, 5), 1.0, False), ((0, 3), 0.5, False)])
def test_nonzero_family(shape, frac, nan):
    """nonzero, nonzero(as_tuple=True), where(cond), argwhere; an all-zero input gives empty results; a NaN
    is nonzero."""
    check_vm(Fn(_nonzero_all), [_sparse(shape, frac, nan)])


@pytest.mark.parametrize("dtype", [torch.int32, torch.bool])
def test_nonzero_int_and_bool(dtype):
    x = torch.randint(-2, 3, (5, 9)).to(dtype)
    check_vm(Fn(lambda x: (torch.nonzero(x), torch.where(x))), [x])


def test_nonzero_static_runs_on_the_graph_executor():
    """nonzero_static has a static shape (padded with fill_value, or cut)."""
    x = _sparse((4, 5), 0.6)
    check(Fn(lambda x: (torch.nonzero_static(x, size=30), torch.nonzero_static(x, size=3, fill_value=7))), [x])


@pytest.mark.parametrize("xs,ms,frac", [((11,), (11,), 0.5), ((3, 7), (3, 7), 0.3), ((4, 6, 5), (6, 1), 0.5),
                                        ((3, 7), (3, 7), 1.0)])
def test_masked_select(xs, ms, frac):
    """masked_select with a broadcast mask; an all-false mask gives an empty tensor; NaN values pass through."""
    x = _sparse(xs, 0.0, nan=True, seed=1)
    mask = torch.rand(*ms, generator=torch.Generator().manual_seed(2)) >= frac
    check_vm(Fn(torch.masked_select), [x, mask])


UNIQUE = [(lambda x: torch.unique(x), "values"),
          (lambda x: torch.unique(x, return_inverse=True, return_counts=True), "all"),
          (lambda x: torch.unique(x, sorted=False, return_inverse=True), "unsorted"),
          (lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True), "consecutive")]


@pytest.mark.parametrize("x", [torch.randint(0, 9, (13,), dtype=torch.int32), torch.randint(-3, 4, (3, 7)),
                               torch.tensor([2.0, float("nan"), 1.0, 2.0, float("nan"), -0.5, 1.0]),
                               torch.round(torch.randn(2, 3, 5) * 2), torch.tensor([4]),
                               torch.tensor([1, 1, 2, 2, 2, 1])], ids=["int32", "int64_2d", "nan", "3d", "one", "runs"])
def test_unique(x):
    """torch.unique (sorted; inverse in the input's shape; counts; each NaN its own value) and
    unique_consecutive, in one model per input."""
    check_vm(Fn(lambda x: tuple(f(x) for f, _ in UNIQUE)), [x])


def test_unique_empty_input():
    check_vm(Fn(lambda x: torch.unique(x, return_inverse=True, return_counts=True)), [torch.zeros(0)])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unique_dim(dim):
    """unique_dim (lexicographic order of the slices), unique_consecutive(dim=...)."""
    x = torch.randint(0, 2, (6, 4, 3))
    x[3] = x[1]
    x[:, 2] = x[:, 0]
    check_vm(Fn(lambda x: (torch.unique(x, dim=dim, return_inverse=True, return_counts=True),
                           torch.unique_consecutive(x, dim=dim, return_counts=True))), [x])


def _mask_reads(x, m):
    return x[m], x[:, m[0]], x[1, m[0]], (x * 2)[m > 0]


@pytest.mark.parametrize("frac", [0.0, 0.5, 1.0])
def test_bool_mask_reads(frac):
    x = _sparse((5, 7), 0.0, nan=True, seed=3)
    m = torch.rand(5, 7, generator=torch.Generator().manual_seed(4)) >= frac
    check_vm(Fn(_mask_reads), [x, m])


def _mask_write_values(x, m):
    y = x.clone()
    y[m] = x[m] * 3.0         # one value per selected entry
    return y


def _mask_write_rows(x, m):
    y = x.clone()
    y[m[:, 0]] = torch.arange(7.0)   # a row broadcast to every selected row
    y[:, m[0]] = -1.0
    return y


def _mask_accumulate(x, m, v):
    return torch.index_put(x, (m,), v, accumulate=True)


@pytest.mark.parametrize("frac", [0.0, 0.6, 1.0])
def test_bool_mask_writes(frac):
    """x[mask] = values, x[rows] = row, x[:, cols] = scalar, index_put(accumulate=True) with a mask."""
    x = _sparse((5, 7), 0.0, seed=5)
    m = torch.rand(5, 7, generator=torch.Generator().manual_seed(6)) >= frac
    check_vm(Fn(_mask_write_values), [x, m])
    check_vm(Fn(_mask_write_rows), [x, m])
    check_vm(Fn(_mask_accumulate), [x, m[:, 0], torch.randn(7)])


def test_full_mask_write_of_a_scalar_stays_static():
    """x[mask] = scalar over the whole tensor is a where: static, so the graph executor runs it."""
    def fn(x):
        x = x.clone()
        x[x > 0] = 0.5
        return x
    check(Fn(fn), [torch.randn(5, 7)])


def _ret_type(mod):
    return mod["main"].checked_type.ret_type


def test_graph_executor_points_to_the_vm_and_create_executor_runs_it():
    x = _sparse((4, 5), 0.5)
    traced = torch.jit.trace(Fn(lambda x: x[x != 0]), (x,))
    mod, params = relay.frontend.from_pytorch(traced, [("x", ((4, 5), "float32"))])
    assert "?" in _ret_type(mod).astext()
    with pytest.raises(LoweringError, match="relay.vm.compile"):
        with kiln.transform.PassContext(opt_level=3):
            relay.build(mod, target="llvm", params=params)
    ex = relay.create_executor("vm", mod=mod, device=kiln.cpu(0), target="llvm")
    np.testing.assert_array_equal(ex.evaluate()(x.numpy()).numpy(), x[x != 0].numpy())


class _Exported(torch.nn.Module):
    def forward(self, x, m):
        u = torch.unique(x.round(), return_inverse=True, return_counts=True)
        return torch.nonzero(x > 0), x[m], torch.masked_select(x, m), u[0], u[1], u[2], x.nonzero().shape[0] + x


def test_exported_program_on_the_vm():
    """torch.export: the data-dependent sizes (unbacked SymInts), their range assertions and the size used in
    arithmetic import into one VM module."""
    x = _sparse((3, 5), 0.4, seed=7) * 3
    m = torch.rand(3, 5) > 0.5
    ep = torch.export.export(_Exported(), (x, m))
    mod, params = relay.frontend.from_exported_program(ep)
    with torch.no_grad():
        expected = [t.numpy() for t in _Exported()(x, m)]
    compare(_run_vm(mod, params, [x.numpy(), m.numpy()]), expected, 1e-5, 1e-5)


class _Compiled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 5)

    def forward(self, x):
        y = self.lin(x)
        return torch.nonzero(y > 0), y[y > 0.1] * 2, torch.unique(torch.round(y), return_counts=True)


@pytest.mark.parametrize("capture", [False, True])
def test_torch_compile(capture):
    """Without capture_dynamic_output_shape_ops dynamo graph-breaks at the data-dependent ops (PyTorch runs
    them, kiln the rest); with it kiln gets one graph and runs it on the VM."""
    import torch._dynamo
    from kiln.contrib.torch_backend import kiln_backend
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return kiln_backend(gm, example_inputs)

    torch.manual_seed(0)
    model = _Compiled().eval()
    torch._dynamo.reset()
    old = torch._dynamo.config.capture_dynamic_output_shape_ops
    torch._dynamo.config.capture_dynamic_output_shape_ops = capture
    try:
        compiled = torch.compile(model, backend=backend)
        for rows in (7, 7, 4):
            x = torch.randn(rows, 5)
            with torch.no_grad():
                got, expected = compiled(x), model(x)
            flat = lambda v: [t for a in v for t in (a if isinstance(a, tuple) else (a,))]  # noqa: E731
            compare([g.numpy() for g in flat(got)], [e.numpy() for e in flat(expected)], 1e-5, 1e-5)
    finally:
        torch._dynamo.config.capture_dynamic_output_shape_ops = old
        torch._dynamo.reset()
    if capture:
        assert any("nonzero" in str(g.graph) for g in graphs)
    else:
        assert not any("nonzero" in str(g.graph) for g in graphs)


def test_mask_with_other_index_tensor_is_refused_clearly():
    x = torch.randn(4, 5)
    traced = torch.jit.trace(Fn(lambda x, m: x[m, torch.tensor([0, 1])]), (x, torch.tensor([1, 1, 0, 0]).bool()))
    with pytest.raises(kiln.error.OpNotImplemented, match="boolean mask together with other index tensors"):
        relay.frontend.from_pytorch(traced, [("x", ((4, 5), "float32")), ("m", ((4,), "bool"))])


def test_mask_shape_mismatch():
    traced = torch.jit.trace(Fn(lambda x, m: x[m]), (torch.randn(4, 5), torch.ones(4, 5).bool()))
    with pytest.raises(FrontendError, match="does not match"):
        relay.frontend.from_pytorch(traced, [("x", ((4, 5), "float32")), ("m", ((4, 6), "bool"))])
