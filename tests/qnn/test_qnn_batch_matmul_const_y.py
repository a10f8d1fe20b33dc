"""A constant ``y`` of the int16 batch_matmul (``batch_matmul_int16.x86``, the legalized 8-bit qnn.batch_matmul)
is packed once at compile time: AlterOpLayout rewrites the call into ``nn.contrib_batch_matmul_pack`` over Relay
packing ops that FoldConstant folds into one 5-D parameter, so the kernel has no per-call packing stage. Results are
bit-exact against numpy's integer product (odd sizes, batch broadcast, transpose variants); an activation ``y``
keeps the in-kernel packing."""
import json

import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.contrib import graph_executor
from kiln.error import TypeInferenceError
from kiln.relay import qnn
from kiln.target.x86 import host_can_run

AVX2 = "llvm -mcpu=core-avx2"
AVX512 = "llvm -mcpu=skylake-avx512"
RNG = np.random.default_rng(4242)
CAN_RUN_AVX2 = host_can_run(kiln.target.Target(AVX2))


def _build(func, target):
    with kiln.transform.PassContext(opt_level=3):
        return relay.build(kiln.IRModule.from_expr(func), target)


def _kernels(lib) -> list:
    return [n["name"] for n in json.loads(lib.get_graph_json())["nodes"] if n["op"] != "null"]


def _run(lib, x):
    g = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    g.set_input("x", x)
    g.run()
    return g.get_output(0).numpy()


def _ref(x, y, ta, tb):
    a = x.astype(np.int64).transpose(0, 2, 1) if ta else x.astype(np.int64)
    b = y.astype(np.int64).transpose(0, 2, 1) if tb else y.astype(np.int64)
    return np.matmul(a, b).astype(np.int32)


CASES = [  # (bx, by, m, k, n, transpose_a, transpose_b)
    (3, 3, 7, 33, 20, False, True), (2, 1, 5, 8, 16, False, False), (1, 1, 1, 19, 5, False, True),
    (1, 4, 6, 7, 33, True, True), (2, 2, 9, 2, 17, True, False)]


@pytest.mark.parametrize("bx,by,m,k,n,ta,tb", CASES)
def test_constant_y_is_packed_at_compile_time(bx, by, m, k, n, ta, tb):
    xs = (bx, k, m) if ta else (bx, m, k)
    ys = (by, n, k) if tb else (by, k, n)
    xd = RNG.integers(-255, 256, xs).astype("int16")
    yd = RNG.integers(-255, 256, ys).astype("int16")
    x = relay.var("x", shape=xs, dtype="int16")
    func = relay.Function([x], relay.nn.batch_matmul(x, relay.const(yd), out_dtype="int32", transpose_a=ta,
                                                     transpose_b=tb))
    for target in (AVX2, AVX512):
        lib = _build(func, target)
        assert _kernels(lib) == ["tvmgen_default_fused_nn_contrib_batch_matmul_pack"]
        (packed,) = lib.get_params().values()
        assert packed.shape == (by, -(-n // 16), -(-k // 2), 16, 2)
        src = lib.get_lib().get_source()
        assert "y_pack" not in src and "batch_matmul_int16" in src  # the kernel reads the folded panels
        if target == AVX2 and CAN_RUN_AVX2:
            np.testing.assert_array_equal(_run(lib, xd), _ref(xd, yd, ta, tb))


def test_activation_y_keeps_in_kernel_packing():
    x = relay.var("x", shape=(2, 5, 9), dtype="int16")
    y = relay.var("y", shape=(2, 11, 9), dtype="int16")
    lib = _build(relay.Function([x, y], relay.nn.batch_matmul(x, y, out_dtype="int32")), AVX2)
    assert _kernels(lib) == ["tvmgen_default_fused_nn_batch_matmul"]
    assert "y_pack" in lib.get_lib().get_source()


def test_qnn_batch_matmul_with_constant_weights():
    """The legalized qnn.batch_matmul (``y - zy`` folded) packs its constant weights once; exact vs numpy."""
    xd = RNG.integers(0, 256, (2, 7, 13)).astype("uint8")
    yd = RNG.integers(-128, 128, (2, 21, 13)).astype("int8")
    x = relay.var("x", shape=xd.shape, dtype="uint8")
    func = relay.Function([x], qnn.op.batch_matmul(x, relay.const(yd), relay.const(np.int32(128)),
                                                   relay.const(np.int32(-3)), 0.5, 0.25))
    lib = _build(func, AVX2)
    assert any("contrib_batch_matmul_pack" in k for k in _kernels(lib)) and "y_pack" not in lib.get_lib().get_source()
    if CAN_RUN_AVX2:
        want = np.matmul(xd.astype(np.int64) - 128, (yd.astype(np.int64) + 3).transpose(0, 2, 1)).astype(np.int32)
        np.testing.assert_array_equal(_run(lib, xd), want)


def test_packed_op_type_errors():
    x = relay.var("x", shape=(2, 5, 9), dtype="int16")
    y = relay.var("y", shape=(2, 1, 5, 16, 2), dtype="int16")
    ok = relay.nn.contrib_batch_matmul_pack(x, y, units=11, out_dtype="int32")
    mod = relay.transform.InferType()(kiln.IRModule.from_expr(relay.Function([x, y], ok)))
    assert mod["main"].ret_type.astext() == "Tensor[(2, 5, 11), int32]"
    for bad in (relay.nn.contrib_batch_matmul_pack(x, y, units=17), relay.nn.contrib_batch_matmul_pack(
            relay.var("x", shape=(2, 5, 12), dtype="int16"), y)):
        with pytest.raises(TypeInferenceError, match="nn.contrib_batch_matmul_pack"):
            relay.transform.InferType()(kiln.IRModule.from_expr(relay.Function(relay.analysis.free_vars(bad), bad)))
