"""from_pytorch of torch.jit.script models with loops, ifs and lists, run on the VM against PyTorch."""
from typing import List, Optional

import numpy as np
import pytest
import torch
from torch import nn

import kiln as tvm
from kiln import relay
from kiln.error import KilnError
from kiln.runtime.vm import VirtualMachine

rng = np.random.default_rng(1805)


def _f32(*shape):
    return rng.standard_normal(shape).astype("float32")


def compile_vm(model, infos, params_out=None):
    scripted = torch.jit.script(model.eval())
    mod, params = relay.frontend.from_pytorch(scripted, infos)
    exe = relay.vm.compile(mod, "llvm", params=params)
    if params_out is not None:
        params_out.update(mod=mod, params=params)
    return VirtualMachine(exe, tvm.cpu())


def _torch_args(args):
    return [torch.from_numpy(a) if isinstance(a, np.ndarray) and a.ndim else
            (a.item() if isinstance(a, np.ndarray) else a) for a in args]


def check(vm, model, *args, rtol=1e-5, atol=1e-5):
    got = vm.run(*[np.asarray(a) for a in args])
    with torch.no_grad():
        want = model(*_torch_args(args))
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=rtol, atol=atol)
    else:
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=rtol, atol=atol)


class Accumulate(nn.Module):
    def forward(self, x, n: int):
        for i in range(n):
            x = x * 2 + i
        return x


class AccumulateConst(nn.Module):
    def forward(self, x):
        for i in range(5):
            x = x * 2 + i
        return x


def test_for_loop_with_input_trip_count():
    model = Accumulate()
    vm = compile_vm(model, [("x", (2, 3)), ("n", ())])
    x = _f32(2, 3)
    for n in (0, 1, 4, 7):  # one executable, any trip count
        check(vm, model, x, np.array(n, "int64"))


def test_for_loop_with_constant_trip_count():
    model = AccumulateConst()
    vm = compile_vm(model, [("x", (3, 5))])
    check(vm, model, _f32(3, 5))


class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(4, 6)
        self.hidden = nn.Linear(6, 6)

    def forward(self, x):
        h = torch.zeros(x.size(1), 6)
        outs: List[torch.Tensor] = []
        for t in range(x.size(0)):
            h = torch.tanh(self.cell(x[t]) + self.hidden(h))
            outs.append(h)
        return torch.stack(outs), h


def test_rnn_loop_stacks_a_list():
    model = RNN()
    vm = compile_vm(model, [("x", (5, 3, 4))])
    check(vm, model, _f32(5, 3, 4))


class IfBranch(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            y = x * 2
        else:
            y = x - 1
        return y


def test_if_on_data():
    model = IfBranch()
    vm = compile_vm(model, [("x", (2, 4))])
    x = np.abs(_f32(2, 4))
    check(vm, model, x)   # true branch
    check(vm, model, -x)  # false branch


class NestedLoopIf(nn.Module):
    def forward(self, x, n: int):
        acc = torch.zeros_like(x)
        for i in range(n):
            if bool((x * i).mean() > 0.1):
                acc = acc + x * i
            else:
                acc = acc - 1.0
            for j in range(2):
                acc = acc * 0.5 + j
        return acc


def test_nested_loop_and_if():
    model = NestedLoopIf()
    vm = compile_vm(model, [("x", (3, 2)), ("n", ())])
    x = np.abs(_f32(3, 2))
    for n in (0, 3, 5):
        check(vm, model, x, np.array(n, "int64"))
        check(vm, model, -x, np.array(n, "int64"))


class WhileLoop(nn.Module):
    def forward(self, x):
        i = 0
        while bool(x.abs().sum() < 100.0):
            x = x * 2
            i += 1
        return x, i


def test_while_loop():
    model = WhileLoop()
    vm = compile_vm(model, [("x", (2, 3))])
    for scale in (0.01, 1.0, 500.0):
        x = (_f32(2, 3) * scale).astype("float32")
        got_x, got_i = vm.run(x)
        want_x, want_i = model(torch.from_numpy(x))
        np.testing.assert_allclose(got_x.numpy(), want_x.numpy(), rtol=1e-6)
        assert int(got_i.numpy()) == want_i


class ListOps(nn.Module):
    def forward(self, x, n: int):
        xs: List[torch.Tensor] = []
        for i in range(n):
            xs.append(x + i)
        return xs[1] + len(xs), torch.cat(xs, 0), xs[-1], torch.stack(xs, 1)


def test_list_append_getitem_len_cat_stack():
    model = ListOps()
    vm = compile_vm(model, [("x", (2, 3)), ("n", ())])
    x = _f32(2, 3)
    for n in (2, 4):
        check(vm, model, x, np.array(n, "int64"))


class GrowingConcat(nn.Module):
    def forward(self, x, n: int):
        y = x
        for _ in range(n):
            y = torch.cat([y, x * 2], 0)
        return y


def test_loop_carried_tensor_that_grows():
    """y's first dim changes every iteration: its loop variable gets an Any dim."""
    model = GrowingConcat()
    vm = compile_vm(model, [("x", (2, 3)), ("n", ())])
    x = _f32(2, 3)
    for n in (0, 1, 3):
        check(vm, model, x, np.array(n, "int64"))


class IfAppends(nn.Module):
    def forward(self, x):
        out: List[torch.Tensor] = [x]
        for i in range(4):
            if bool(x.sum() * i > 0):
                out.append(x * i)
        return torch.stack(out, 0).sum(0), len(out)


def test_if_inside_loop_appends_to_list():
    model = IfAppends()
    vm = compile_vm(model, [("x", (3,))])
    x = np.abs(_f32(3))
    check(vm, model, x)
    check(vm, model, -x)


def test_graph_executor_refuses_control_flow():
    scripted = torch.jit.script(Accumulate())
    mod, params = relay.frontend.from_pytorch(scripted, [("x", (2, 3)), ("n", ())])
    with pytest.raises(KilnError, match="recursive functions loops become.*relay.vm.compile"):
        relay.build(mod, "llvm", params=params)


def test_create_executor_vm():
    scripted = torch.jit.script(IfBranch())
    mod, params = relay.frontend.from_pytorch(scripted, [("x", (2, 4))])
    x = _f32(2, 4)
    f = relay.create_executor("vm", mod, tvm.cpu(), "llvm").evaluate()
    out = f(x, **{k: v for k, v in params.items()}) if params else f(x)
    np.testing.assert_allclose(out.numpy(), IfBranch()(torch.from_numpy(x)).numpy(), rtol=1e-6)


class Break(nn.Module):
    def forward(self, x):
        for _ in range(10):
            x = x * 2
            if bool(x.sum() > 100):
                break
        return x


def test_loop_with_break():
    model = Break()
    vm = compile_vm(model, [("x", (2, 2))])
    for scale in (0.5, 3.0, 1000.0):
        check(vm, model, np.abs(_f32(2, 2)) * np.float32(scale))


class InPlace(nn.Module):
    def forward(self, x, n: int):
        y = torch.zeros_like(x)
        z = torch.ones_like(x)
        for _ in range(n):
            y += x
            y.mul_(0.5)
            z.add_(y)  # z is not reassigned: changed in place, so the loop carries it too
        return y, z


def test_in_place_ops_in_a_loop():
    model = InPlace()
    vm = compile_vm(model, [("x", (3, 2)), ("n", ())])
    x = _f32(3, 2)
    for n in (0, 3):
        check(vm, model, x, np.array(n, "int64"))


class ListPlus(nn.Module):
    def forward(self, x):
        h: Optional[torch.Tensor] = None
        if h is None:  # decided at import time (aten::__is__ of None)
            h = x[0]
        outs: List[torch.Tensor] = [h]
        for t in range(1, x.size(0)):
            h = h * 0.5 + x[t]
            outs = outs + [h]
        return torch.cat(outs), torch.stack(outs, -1)


def test_loop_carried_list_by_concatenation():
    model = ListPlus()
    vm = compile_vm(model, [("x", (4, 3))])
    check(vm, model, _f32(4, 3))


class OptionalCarried(nn.Module):
    def forward(self, x):
        h: Optional[torch.Tensor] = None
        for t in range(x.size(0)):
            if h is None:
                h = x[t]
            else:
                h = h + x[t]
        assert h is not None
        return h


def test_optional_loop_variable_is_refused_clearly():
    with pytest.raises(KilnError, match="loop variable .* is a NoneType, which kiln cannot keep as a run-time value"):
        relay.frontend.from_pytorch(torch.jit.script(OptionalCarried()), [("x", (4, 3))])


class StridedRanges(nn.Module):
    def forward(self, x, n: int):
        acc = torch.zeros_like(x)
        for t in range(n - 1, -1, -2):  # run-time bounds, negative step
            acc = acc * 2.0 + t
        for t in range(1, x.size(0), 2):  # import-time bounds
            acc = acc + x[t]
        return acc


def test_ranges_with_start_and_step():
    model = StridedRanges()
    vm = compile_vm(model, [("x", (5, 2)), ("n", ())])
    x = _f32(5, 2)
    for n in (0, 1, 4, 7):
        check(vm, model, x, np.array(n, "int64"))
