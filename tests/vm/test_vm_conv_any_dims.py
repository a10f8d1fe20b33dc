"""Convolutions and pools with ``relay.Any()`` in each data dimension, through ``relay.vm.compile``, against
PyTorch at several run-time shapes. An unknown channel dimension takes the weight's channel count (as TVM's
relations); the kernel checks it at run time and fails with the size it had."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kiln
from kiln import relay
from kiln.error import ArgumentError
from kiln.runtime.vm import VirtualMachine

ANY = relay.Any
RNG = np.random.default_rng(7)


def _w(*shape):
    return RNG.standard_normal(shape).astype("float32")


W1, W2, W2G, WDW, W3 = _w(6, 4, 3), _w(6, 4, 3, 3), _w(6, 2, 3, 3), _w(4, 1, 3, 3), _w(5, 4, 3, 3, 3)
WT2, WT1, WT3 = _w(4, 6, 3, 3), _w(4, 6, 3), _w(4, 3, 2, 3, 2)
T = torch.tensor

# name: (data rank, relay builder, torch reference, shapes to run: each a full data shape)
CASES = {
    "conv1d": (lambda x: relay.nn.conv1d(x, relay.const(W1), padding=(1,), strides=(2,)),
               lambda x: F.conv1d(x, T(W1), padding=1, stride=2), [(1, 4, 9), (3, 4, 5), (2, 4, 12)]),
    "conv2d": (lambda x: relay.nn.conv2d(x, relay.const(W2), padding=(1, 1)),
               lambda x: F.conv2d(x, T(W2), padding=1), [(1, 4, 7, 5), (3, 4, 4, 9), (2, 4, 6, 6)]),
    "conv2d_groups": (lambda x: relay.nn.conv2d(x, relay.const(W2G), padding=(0, 1), strides=(2, 1), groups=2),
                      lambda x: F.conv2d(x, T(W2G), padding=(0, 1), stride=(2, 1), groups=2),
                      [(1, 4, 7, 5), (2, 4, 5, 8)]),
    "depthwise": (lambda x: relay.nn.conv2d(x, relay.const(WDW), padding=(1, 1), groups=4),
                  lambda x: F.conv2d(x, T(WDW), padding=1, groups=4), [(1, 4, 7, 5), (3, 4, 4, 9)]),
    "conv2d_nhwc": (lambda x: relay.nn.conv2d(x, relay.const(W2.transpose(2, 3, 1, 0)), padding=(1, 1),
                                              data_layout="NHWC", kernel_layout="HWIO"),
                    lambda x: F.conv2d(x.permute(0, 3, 1, 2), T(W2), padding=1).permute(0, 2, 3, 1),
                    [(1, 7, 5, 4), (2, 4, 9, 4)]),
    "conv3d": (lambda x: relay.nn.conv3d(x, relay.const(W3), padding=(1, 0, 1)),
               lambda x: F.conv3d(x, T(W3), padding=(1, 0, 1)), [(1, 4, 5, 4, 6), (2, 4, 3, 5, 4)]),
    "conv2d_transpose": (lambda x: relay.nn.conv2d_transpose(x, relay.const(WT2), strides=(2, 2), padding=(1, 1),
                                                             output_padding=(1, 0)),
                         lambda x: F.conv_transpose2d(x, T(WT2), stride=2, padding=1, output_padding=(1, 0)),
                         [(1, 4, 5, 4), (2, 4, 3, 6)]),
    "conv1d_transpose": (lambda x: relay.nn.conv1d_transpose(x, relay.const(WT1), strides=(2,), padding=(1,)),
                         lambda x: F.conv_transpose1d(x, T(WT1), stride=2, padding=1), [(1, 4, 5), (3, 4, 8)]),
    "conv3d_transpose": (lambda x: relay.nn.conv3d_transpose(x, relay.const(WT3), strides=(2, 1, 2)),
                         lambda x: F.conv_transpose3d(x, T(WT3), stride=(2, 1, 2)), [(1, 4, 3, 4, 2), (2, 4, 2, 3, 3)]),
    "adaptive_avg_pool2d": (lambda x: relay.nn.adaptive_avg_pool2d(x, (2, 3)),
                            lambda x: F.adaptive_avg_pool2d(x, (2, 3)), [(1, 4, 7, 5), (2, 3, 4, 9)]),
    "max_pool2d": (lambda x: relay.nn.max_pool2d(x, (3, 3), (2, 2), padding=(1, 1)),
                   lambda x: F.max_pool2d(x, 3, 2, padding=1), [(1, 4, 7, 5), (2, 3, 9, 8)]),
    "avg_pool2d": (lambda x: relay.nn.avg_pool2d(x, (2, 2), (2, 2), count_include_pad=True),
                   lambda x: F.avg_pool2d(x, 2, 2), [(1, 4, 6, 4), (3, 2, 8, 10)]),
    "global_avg_pool2d": (lambda x: relay.nn.global_avg_pool2d(x), lambda x: F.adaptive_avg_pool2d(x, 1),
                          [(1, 4, 7, 5), (2, 3, 3, 3)]),
    "max_pool1d": (lambda x: relay.nn.max_pool1d(x, (3,), (2,), padding=(1,)),
                   lambda x: F.max_pool1d(x, 3, 2, padding=1), [(1, 4, 9), (2, 3, 6)]),
}


def _compile(build, shape):
    x = relay.var("x", shape=shape)
    exe = relay.vm.compile(kiln.IRModule.from_expr(relay.Function([x], build(x))), target="llvm")
    return VirtualMachine(exe, kiln.cpu())


def _positions(rank):
    return list(range(rank)) + ["all"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_any_in_each_position_matches_torch(name):
    build, ref, runs = CASES[name]
    rank = len(runs[0])
    for pos in _positions(rank):
        shape = [ANY()] * rank if pos == "all" else list(runs[0])
        if pos != "all":
            shape[pos] = ANY()
        vm = _compile(build, shape)
        for run in runs:
            if pos != "all" and any(run[k] != runs[0][k] for k in range(rank) if k != pos):
                run = tuple(run[k] if k == pos else runs[0][k] for k in range(rank))
            x = RNG.standard_normal(run).astype("float32")
            want = ref(T(x)).numpy()
            got = vm.invoke("main", x).numpy()
            assert got.shape == want.shape, (name, pos, run)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{name} Any at {pos} run {run}")


@pytest.mark.parametrize("name, weight, groups", [("conv2d", W2, 1), ("conv2d_groups", W2G, 2),
                                                  ("depthwise", WDW, 4)])
def test_unknown_channels_are_checked_against_the_weight_at_run_time(name, weight, groups):
    build = CASES[name][0]
    vm = _compile(lambda x: relay.nn.relu(build(relay.nn.relu(x))), (ANY(), ANY(), 6, 6))
    x = RNG.standard_normal((2, 4, 6, 6)).astype("float32")
    padding = (0, 1) if name == "conv2d_groups" else 1
    stride = (2, 1) if name == "conv2d_groups" else 1
    want = F.relu(F.conv2d(F.relu(T(x)), T(weight), padding=padding, stride=stride, groups=groups)).numpy()
    np.testing.assert_allclose(vm.invoke("main", x).numpy(), want, rtol=1e-4, atol=1e-4)
    with pytest.raises(ArgumentError, match=r"nn.conv2d \(the data's channels are the weight's in_channels"
                                            r".*axis 1 of the input must have size 4 at run time \(it has 3\)"):
        vm.invoke("main", np.ones((2, 3, 6, 6), "float32"))


def test_type_relations_take_the_channels_from_the_weight():
    def ret(data_shape, build):
        x = relay.var("x", shape=data_shape)
        mod = relay.transform.InferType()(kiln.IRModule.from_expr(relay.Function([x], build(x))))
        return [int(d) if isinstance(getattr(d, "value", d), int) else "?" for d in mod["main"].ret_type.shape]
    assert ret((1, ANY(), 7, 5), CASES["conv2d"][0]) == [1, 6, 7, 5]
    assert ret((ANY(), ANY(), ANY(), ANY()), CASES["conv2d"][0]) == ["?", 6, "?", "?"]
    assert ret((1, ANY(), 7, 5), CASES["depthwise"][0]) == [1, 4, 7, 5]
    assert ret((1, 7, 5, ANY()), CASES["conv2d_nhwc"][0]) == [1, 7, 5, 6]
    assert ret((1, ANY(), 5, 4, 6), CASES["conv3d"][0]) == [1, 5, 5, 2, 6]
    assert ret((1, ANY(), 5, 4), CASES["conv2d_transpose"][0]) == [1, 6, 10, 7]
    assert ret((ANY(), ANY(), ANY()), CASES["conv1d_transpose"][0]) == ["?", 6, "?"]
    # a static channel count that disagrees with the weight is still refused at compile time
    with pytest.raises(Exception, match="input channels"):
        ret((1, 3, 7, 5), CASES["conv2d"][0])


def test_run_time_weight_with_unknown_dims():
    """A weight that is an input: unknown out channels give unknown output channels; unknown in channels take
    the data's (divided by groups) and are checked when the kernel runs."""
    x = relay.var("x", shape=(ANY(), 4, 6, 6))
    w = relay.var("w", shape=(ANY(), 4, 3, 3))
    mod = kiln.IRModule.from_expr(relay.Function([x, w], relay.nn.conv2d(x, w, padding=(1, 1))))
    assert str(relay.transform.InferType()(mod)["main"].ret_type) == "Tensor[(?, ?, 6, 6), float32]"
    vm = VirtualMachine(relay.vm.compile(mod, "llvm"), kiln.cpu())
    for o in (2, 5):
        xv, wv = _w(2, 4, 6, 6), _w(o, 4, 3, 3)
        np.testing.assert_allclose(vm.invoke("main", xv, wv).numpy(), F.conv2d(T(xv), T(wv), padding=1).numpy(),
                                   rtol=1e-4, atol=1e-4)
    w = relay.var("w", shape=(6, ANY(), 3, 3))
    mod = kiln.IRModule.from_expr(relay.Function([x, w], relay.nn.conv2d(x, w, padding=(1, 1), groups=2)))
    assert str(relay.transform.InferType()(mod)["main"].ret_type) == "Tensor[(?, 6, 6, 6), float32]"
    vm = VirtualMachine(relay.vm.compile(mod, "llvm"), kiln.cpu())
    xv, wv = _w(3, 4, 6, 6), _w(6, 2, 3, 3)
    np.testing.assert_allclose(vm.invoke("main", xv, wv).numpy(),
                               F.conv2d(T(xv), T(wv), padding=1, groups=2).numpy(), rtol=1e-4, atol=1e-4)
    with pytest.raises(ArgumentError, match=r"weight's in_channels are the data's channels / groups\): axis 1 .* "
                                            r"must have size 2 at run time \(it has 3\)"):
        vm.invoke("main", xv, _w(6, 3, 3, 3))
