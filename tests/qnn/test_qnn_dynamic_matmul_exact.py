"""ONNX Runtime's dynamic quantization (DynamicQuantizeLinear -> MatMulInteger, as ``quantize_dynamic`` writes it)
through from_onnx and the x86 int8 dense, bit-exact against numpy references written from the ONNX definitions:
the range, scale and zero point in float32 with round-half-to-even, the uint8 data, and the exact integer
product (odd K, M = 1, 7, 33, 3-D data, int8 / uint8 weights with zero points, ties)."""
import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import kiln  # noqa: E402
from kiln import relay  # noqa: E402
from kiln.contrib import graph_executor  # noqa: E402
from kiln.target.x86 import host_can_run  # noqa: E402
from vector_code_util import target_asm  # noqa: E402

RNG = np.random.default_rng(19)
F32 = np.float32


def dql_ref(x):
    """ONNX DynamicQuantizeLinear in float32: (y uint8, scale, zero point uint8)."""
    lo = min(F32(0), x.min())
    hi = max(F32(0), x.max())
    scale = F32((hi - lo) / F32(255))
    zp = np.clip(np.round(F32(0) - F32(lo / scale)), 0, 255)  # np.round: half to even
    y = np.clip(np.round((x / scale).astype(F32)) + zp, 0, 255)
    return y.astype(np.uint8), scale, np.uint8(zp)


def _lib(xshape, w, w_zp, target="llvm"):
    k, n = w.shape
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("MatMulInteger", ["xq", "w", "xz", "wz"], ["y"])]
    out_shape = list(xshape[:-1]) + [n]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, xshape)],
        [helper.make_tensor_value_info("y", TensorProto.INT32, out_shape),
         helper.make_tensor_value_info("xq", TensorProto.UINT8, xshape),
         helper.make_tensor_value_info("xs", TensorProto.FLOAT, ()),
         helper.make_tensor_value_info("xz", TensorProto.UINT8, ())],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.asarray(w_zp, w.dtype), "wz")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    mod, params = relay.frontend.from_onnx(model, shape={"x": xshape}, freeze_params=True)
    with kiln.transform.PassContext(opt_level=3):
        return relay.build(mod, target, params=params)


def _model(xshape, w, w_zp, target="llvm"):
    lib = _lib(xshape, w, w_zp, target)
    return graph_executor.GraphModule(lib["default"](kiln.cpu()))


def _check(m, x, w, w_zp):
    m.set_input("x", x)
    m.run()
    y, xq, xs, xz = (m.get_output(i).numpy() for i in range(4))
    rq, rs, rz = dql_ref(x)
    assert xs == rs and xz == rz
    np.testing.assert_array_equal(xq, rq)
    want = (rq.astype(np.int64) - int(rz)) @ (w.astype(np.int64) - np.asarray(w_zp, np.int64))
    np.testing.assert_array_equal(y, want.astype(np.int32))


@pytest.mark.parametrize("xshape,n", [((1, 13), 33), ((7, 37), 16), ((33, 64), 40), ((2, 7, 19), 5),
                                      ((1, 5, 256), 48)])
@pytest.mark.parametrize("wtype", ["int8", "uint8"])
def test_dynamic_quantize_matmul_integer_exact(xshape, n, wtype):
    k = xshape[-1]
    info = np.iinfo(wtype)
    w = RNG.integers(info.min, info.max + 1, (k, n)).astype(wtype)  # full range: no reduce_range
    w_zp = 0 if wtype == "int8" else 131
    m = _model(xshape, w, w_zp)
    for shift in (0.0, 1.5, -2.0):  # zero points 0 < z < 255, z = 0 (all >= 0), z = 255 (all <= 0)
        x = (RNG.standard_normal(xshape) * 2 + shift).astype(F32)
        if shift > 0:
            x = np.abs(x)
        elif shift < 0:
            x = -np.abs(x)
        _check(m, x, w, w_zp)


def test_dynamic_quantize_ties_round_half_to_even():
    """Range [-63.75, 63.75]: scale 0.5 exactly, zero point 127.5 -> 128, data on quarter steps: x / scale at
    every tie k + 0.5 rounds to the even neighbour."""
    x = (np.arange(-255, 256, dtype=F32) * F32(0.25)).reshape(1, -1)
    x = x[:, np.abs(x[0]) <= 63.75]
    w = RNG.integers(-128, 128, (x.shape[1], 17)).astype("int8")
    m = _model(x.shape, w, 0)
    _check(m, x, w, 0)
    assert dql_ref(x)[2] == 128


def test_imported_dynamic_matmul_takes_the_int16_dense_on_avx2():
    """The imported pattern (DynamicQuantizeLinear's uint8 zero point cast to int32) qualifies for the exact int16
    dense on an AVX2 target without VNNI, its weight packed NC16n2c (graph only)."""
    w = RNG.integers(-128, 128, (24, 32)).astype("int8")
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("MatMulInteger", ["xq", "w", "xz"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (3, 24))],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, (3, 32))],
                              initializer=[numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    mod, params = relay.frontend.from_onnx(model, shape={"x": (3, 24)}, freeze_params=True)
    with kiln.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(mod, "llvm -mcpu=core-avx2", params=params)
    text = opt["main"].astext(show_meta_data=False)
    assert 'weight_layout="NC16n2c"' in text and "int16" in text


def _hot_block(asm: str) -> str:
    """The basic block of ``asm`` with the most vpdpbusd (the dense's reduction loop)."""
    return max(re.split(r"^\.L\w+:\s*$", asm, flags=re.M), key=lambda b: b.count("vpdpbusd"))


@pytest.mark.parametrize("target", ["llvm -mcpu=cascadelake", "llvm -mcpu=znver4"])
def test_imported_dynamic_matmul_takes_vpdpbusd_on_zmm(target):
    """With AVX-512 VNNI the imported pattern, at the shape of a small BERT's projections (128 rows, K = 256, with
    a 3-D input), runs the uint8 x int8 dense on vpdpbusd over zmm registers: its reduction loop keeps the
    accumulator tile in registers (no stack operand), one zmm weight load shared by the tile's rows. Exact against
    numpy where the host has the ISA (compiled only elsewhere)."""
    w = RNG.integers(-128, 128, (256, 48)).astype("int8")
    lib = _lib((1, 128, 256), w, 0, target)
    src = lib.get_lib().get_source()
    loop = _hot_block(target_asm(src, target))
    dots = re.findall(r"vpdpbusd\s+%(\w+)mm\d+, %\w+, %(\w+)mm\d+", loop)
    assert len(dots) >= 8 and all(a == "z" and b == "z" for a, b in dots), dots[:4]
    assert not re.search(r"\((%rsp|%rbp)\)", loop)
    if host_can_run(kiln.target.Target(target)):
        m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
        _check(m, RNG.standard_normal((1, 128, 256)).astype(F32), w, 0)
