"""The register-tiled x86 fallbacks: tile rules, numerics on shapes that do not divide the tiles, and the
generated C (accumulators promoted to vector variables, no parallel region for tiny kernels)."""
import numpy as np
import pytest

import kiln as tvm
from kiln import te, topi
from kiln.topi import x86
from kiln.target import x86 as x86_target
from kiln.topi.testing import conv2d_nchw_python, depthwise_conv2d_python_nchw
from kiln.topi.testing import layout_transform_python as lt
from kiln.topi.x86.conv2d import channel_block, row_tile
from kiln.topi.x86.dense import gemm_block
from kiln.target.codegen_c import parallel_loop_marker

TARGET = "llvm"  # numerical checks run on the host
# checks of generated code name their ISA; code for an ISA the host lacks is compiled, not run
ISA = {"avx2": "llvm -mcpu=core-avx2", "avx512": "llvm -mcpu=skylake-avx512"}


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype("float32")


def _build(sched_fn, make, target=TARGET):
    with tvm.target.Target(target):
        tensors, out = make()
        s = sched_fn([out])
        f = tvm.build(s, tensors + [out], target=target)
    return f, [int(d) for d in out.shape]


def _call(f, out_shape, *arrays):
    out = tvm.nd.array(np.zeros(out_shape, "float32"))
    f(*[tvm.nd.array(a) for a in arrays], out)
    return out.numpy()


def test_fallback_tile_rules():
    assert [channel_block(c, 8) for c in (3, 16, 24, 64, 96, 20)] == [3, 16, 8, 16, 16, 4]
    assert channel_block(64, 16) == 16                      # AVX-512: one vector
    # a block that is no machine vector (12 of AVX-512's 16 lanes for 24 channels) made mobilenet_v2's
    # 24-channel 1x1 convs 28x slower: a zmm and a ymm (24) where they divide, else the largest power-of-two
    # divisor (a ymm / xmm vector)
    assert [channel_block(c, 16) for c in (24, 72, 120, 48, 12, 40, 1000, 3)] == [24, 24, 24, 16, 4, 8, 8, 3]
    assert row_tile(56, 2, 14) == 7 and row_tile(7, 2, 14) == 7 and row_tile(28, 1, 14) == 14
    assert row_tile(11, 2, 14) == 7                         # only small divisors: a non-dividing row
    assert row_tile(3, 2, 14) == 3
    with tvm.target.Target(ISA["avx2"]):                    # the budget of the target: 14 of 16 ymm
        assert row_tile(56, 2) == 7 and row_tile(28, 1) == 14
    with tvm.target.Target(ISA["avx512"]):                  # 28 of 32 zmm
        assert row_tile(56, 1) == 28 and row_tile(56, 2) == 14 and row_tile(11, 2) == 11
    assert gemm_block(1024, 1024, 16, 8) == (6, 1)          # 6 rows x 2 vectors = 12 accumulators
    assert gemm_block(1, 512, 16, 8) == (1, 4)              # GEMV: 4 panels, 8 independent chains
    assert gemm_block(2, 32, 16, 8) == (2, 2)


@pytest.mark.parametrize("ic,oc,h,w,k,st,pad", [
    (16, 16, 11, 11, 3, 1, 1),    # OW 11: 7-pixel row with a tail
    (16, 24, 9, 13, 3, 2, 1),     # 16-blocks in, 8-blocks out, stride 2, odd sizes
    (32, 16, 7, 10, 1, 1, 0),     # 1x1, OW 10 (row of 5)
    (3, 16, 15, 15, 7, 2, 3),     # a 7x7 stem with 3 input channels
    (20, 12, 6, 6, 3, 1, 1),      # channels that are no multiple of 8 (blocks of 5 and 6)
])
def test_conv2d_nchwc_register_tiled(ic, oc, h, w, k, st, pad):
    rng = np.random.default_rng(ic * 31 + oc)
    a, wt, bias = _rand(rng, 1, ic, h, w), _rand(rng, oc, ic, k, k), _rand(rng, oc)
    icb, ocb = channel_block(ic), channel_block(oc)
    ref = np.maximum(conv2d_nchw_python(a, wt, (st, st), (pad,) * 4) + bias[None, :, None, None], 0)
    a5, w6 = lt(a, "NCHW", f"NCHW{icb}c"), lt(wt, "OIHW", f"OIHW{icb}i{ocb}o")
    b5 = bias.reshape(1, oc // ocb, 1, 1, ocb)

    def make():
        A, W, B = te.placeholder(a5.shape, name="A"), te.placeholder(w6.shape, name="W"), te.placeholder(b5.shape)
        conv = x86.conv2d_NCHWc(A, W, (st, st), (pad,) * 4, (1, 1), f"NCHW{icb}c", f"NCHW{ocb}c", "float32")
        return [A, W, B], topi.nn.relu(topi.add(conv, B))
    f, oshape = _build(x86.schedule_conv2d_NCHWc, make)
    out = _call(f, oshape, a5, w6, b5)
    np.testing.assert_allclose(lt(out, f"NCHW{ocb}c", "NCHW"), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_conv2d_nchwc_accumulators_are_registers(isa):
    """The accumulator block becomes vector variables, the reduction keeps its ic-block loop, the weights are
    vector loads and the inputs broadcasts: 6 pixels x 2 ymm on AVX2 (room left for the two weight vectors and
    the broadcast), 28 pixels x 1 zmm on AVX-512."""
    def make():
        A = te.placeholder((1, 4, 58, 58, 16), name="A")
        W = te.placeholder((4, 4, 3, 3, 16, 16), name="W")
        return [A, W], x86.conv2d_NCHWc(A, W, (1, 1), (0, 0, 0, 0), (1, 1), "NCHW16c", "NCHW16c", "float32")
    f, _ = _build(x86.schedule_conv2d_NCHWc, make, ISA[isa])
    src = f.get_source()
    vec, n_acc = {"avx2": ("kiln_f32x8", 12), "avx512": ("kiln_f32x16", 28)}[isa]
    assert f"{vec} conv2d_NCHWc_global_r0," in src and f"conv2d_NCHWc_global_r{n_acc - 1}" in src
    assert f"conv2d_NCHWc_global_r{n_acc}" not in src
    assert "float conv2d_NCHWc_global[" not in src
    assert "for (int32_t ic_block = 0; ic_block < 16; ++ic_block)" in src
    lanes = vec[len("kiln_f32x"):]
    assert f"kiln_broadcast_f32x{lanes}(A[" in src and f"kiln_vload_f32x{lanes}(W +" in src
    assert parallel_loop_marker() in src


@pytest.mark.parametrize("c,h,w,st", [(32, 13, 11, 2), (24, 9, 14, 1), (16, 8, 8, 2)])
def test_depthwise_nchwc(c, h, w, st):
    rng = np.random.default_rng(c + h)
    a, wt = _rand(rng, 1, c, h, w), _rand(rng, c, 1, 3, 3)
    cb = channel_block(c)
    ref = np.maximum(depthwise_conv2d_python_nchw(a, wt, (st, st), [1, 1, 1, 1]), 0)
    a5, w6 = lt(a, "NCHW", f"NCHW{cb}c"), lt(wt, "OIHW", f"OIHW1i{cb}o")

    def make():
        A, W = te.placeholder(a5.shape, name="A"), te.placeholder(w6.shape, name="W")
        conv = x86.depthwise_conv2d_NCHWc(A, W, (st, st), (1, 1, 1, 1), (1, 1), f"NCHW{cb}c", f"NCHW{cb}c",
                                          "float32")
        return [A, W], topi.nn.relu(conv)
    f, oshape = _build(x86.schedule_depthwise_conv2d_NCHWc, make)
    out = _call(f, oshape, a5, w6)
    np.testing.assert_allclose(lt(out, f"NCHW{cb}c", "NCHW"), ref, rtol=1e-4, atol=1e-4)
    src = f.get_source()
    assert "kiln_gather" not in src                                    # channel-block vectors, no gathers


@pytest.mark.parametrize("m,n,k,prepacked", [(13, 48, 37, True), (1, 64, 19, True), (2, 32, 5, True),
                                             (7, 20, 9, False), (128, 16, 8, True)])
def test_dense_register_block_tails(m, n, k, prepacked):
    rng = np.random.default_rng(m * 7 + n)
    a, w, b = _rand(rng, m, k), _rand(rng, n, k), _rand(rng, n)
    bn = 16
    wp = w.reshape(n // bn, bn, k).transpose(0, 2, 1).copy() if prepacked else w

    def make():
        A, W, B = te.placeholder((m, k), name="A"), te.placeholder(wp.shape, name="W"), te.placeholder((n,), name="B")
        return [A, W, B], topi.nn.relu(x86.dense_pack(A, W, B, "float32"))
    f, oshape = _build(x86.schedule_dense_pack, make)
    out = _call(f, oshape, a, wp, b)
    np.testing.assert_allclose(out, np.maximum(a @ w.T + b, 0), rtol=1e-4, atol=1e-4)


def test_dense_sources_tiny_serial_large_parallel():
    def make(m, n, k):
        def inner():
            A, W = te.placeholder((m, k), name="A"), te.placeholder((n // 16, k, 16), name="W")
            return [A, W], x86.dense_pack(A, W, None, "float32")
        return inner
    tiny, _ = _build(x86.schedule_dense_pack, make(1, 16, 64))
    big, _ = _build(x86.schedule_dense_pack, make(12, 64, 512))
    assert parallel_loop_marker() not in tiny.get_source()
    src = big.get_source()
    assert parallel_loop_marker() in src
    assert "T_dense_pack_global_r11" in src and "float T_dense_pack_global[" not in src


@pytest.mark.parametrize("b,m,n,k", [(3, 7, 20, 9), (2, 13, 32, 16)])
def test_batch_matmul_register_block_tails(b, m, n, k):
    rng = np.random.default_rng(b * m)
    x, y = _rand(rng, b, m, k), _rand(rng, b, n, k)

    def make():
        X, Y = te.placeholder(x.shape, name="X"), te.placeholder(y.shape, name="Y")
        return [X, Y], x86.batch_matmul(X, Y, None, "float32", False, True)
    f, oshape = _build(x86.schedule_batch_matmul, make)
    np.testing.assert_allclose(_call(f, oshape, x, y), x @ y.transpose(0, 2, 1), rtol=1e-4, atol=1e-4)


def test_codegen_keeps_array_for_variable_indices():
    """An accumulator read at a loop-variable index stays a stack array (promotion needs constant indices);
    with the loop unrolled it becomes variables; both give the same numbers."""
    rng = np.random.default_rng(3)
    x = _rand(rng, 6, 40)
    sources = []
    for unroll in (False, True):
        X = te.placeholder((6, 40), name="X")
        r = te.reduce_axis((0, 40), name="r")
        S = te.compute((6,), lambda i: te.sum(X[i, r] * X[i, r], axis=r), name="S")
        s = te.create_schedule(S.op)
        SS = s.cache_write(S, "global")
        o, i = s[S].split(S.op.axis[0], factor=3)
        s[SS].compute_at(s[S], o)
        (ri,) = s[SS].op.reduce_axis
        s[SS].reorder(ri, SS.op.axis[0])
        if unroll:
            s[SS].unroll(SS.op.axis[0])
            s[S].unroll(i)
        f = tvm.build(s, [X, S], target=TARGET)
        out = tvm.nd.array(np.zeros(6, "float32"))
        f(tvm.nd.array(x), out)
        np.testing.assert_allclose(out.numpy(), (x * x).sum(1), rtol=1e-5)
        sources.append(f.get_source())
    assert "float S_global[" in sources[0] and "S_global_r0" not in sources[0]
    assert "float S_global_r0, S_global_r1, S_global_r2;" in sources[1]


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_24_channel_blocks_are_machine_vectors(isa):
    """mobilenet_v2's 24-channel layers (a 1x1 conv 144 -> 24 and back): every channel block is made of machine
    vectors on both ISAs (AVX2: 3 blocks of 8; AVX-512: one block of 24, a zmm and a ymm per pixel, both pieces
    register slots); compiled for the named target, run on the host only where it can."""
    import json
    import re
    from kiln import relay
    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(1, 144, 9, 11))
    w1 = rng.standard_normal((24, 144, 1, 1)).astype("float32")
    w2 = rng.standard_normal((144, 24, 1, 1)).astype("float32")
    y = relay.nn.relu(relay.nn.conv2d(relay.nn.conv2d(x, relay.const(w1), kernel_size=(1, 1)), relay.const(w2),
                                      kernel_size=(1, 1)))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(tvm.IRModule.from_expr(relay.Function([x], y)), target=ISA[isa])
    shapes = json.loads(lib.get_graph_json())["attrs"]["shape"][1]
    block = {"avx2": [1, 3, 9, 11, 8], "avx512": [1, 1, 9, 11, 24]}[isa]
    assert block in shapes, shapes
    src = lib.get_lib().get_source()
    lanes = {int(n) for n in re.findall(r"kiln_f32x(\d+)", src)}
    assert lanes <= {4, 8, 16}, lanes
    if isa == "avx512":   # the 144 -> 24 conv's accumulators: 16-lane and 8-lane register slots, no array
        assert re.search(r"kiln_f32x16 conv2d_NCHWc\w*_r0\b", src) and re.search(r"kiln_f32x8 conv2d_NCHWc\w*_w8_r0\b", src)
        assert not re.search(r"float conv2d_NCHWc\w*\[", src)
    if x86_target.host_can_run(ISA[isa]):
        from kiln.contrib import graph_executor
        xv = rng.standard_normal((1, 144, 9, 11)).astype("float32")
        m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
        m.set_input("x", xv)
        m.run()
        ref = np.maximum(np.einsum("oc,nchw->nohw", w2[:, :, 0, 0], np.einsum("oc,nchw->nohw", w1[:, :, 0, 0], xv)), 0)
        np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_image_to_nchw3c_is_a_copy_loop_not_a_gather(isa):
    """The first kernel of every CNN, NCHW -> NCHW3c of the image: the 3-channel axis read with a plane stride is
    unrolled (three contiguous input rows, gcc vectorizes along the width) instead of fused into the vector with a
    gather and a division by 3 per lane (0.21 -> 0.025 ms for 224x224 on one Zen 3 core). A stage that computes
    on the value (quantize + pad + NCHW4c of an int8 model) keeps its vector form."""
    import json
    from kiln import relay
    x = relay.var("x", shape=(1, 3, 13, 16))    # rows of 48 values: whole vectors on both ISAs
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.layout_transform(x, "NCHW", "NCHW3c")))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target=ISA[isa])
    src = lib.get_lib().get_source()
    kernel = src[src.index("/* kernel tvmgen_default_fused_layout_transform"):]
    assert "kiln_gather" not in kernel and "kiln_div" not in kernel
    xq = relay.var("x", shape=(1, 3, 13, 14))   # padded rows of 16 pixels x 4 channels: whole vectors
    q = relay.nn.pad(relay.qnn.op.quantize(xq, relay.const(0.02), relay.const(128), out_dtype="uint8"),
                     ((0, 0), (0, 1), (1, 1), (1, 1)), pad_value=128)
    mod_q = tvm.IRModule.from_expr(relay.Function([xq], relay.layout_transform(q, "NCHW", "NCHW4c")))
    with tvm.transform.PassContext(opt_level=3):
        lib_q = relay.build(mod_q, target=ISA[isa])
    assert "kiln_vstore_u8x" in lib_q.get_lib().get_source()     # still vectorized
    if x86_target.host_can_run(ISA[isa]):
        from kiln.contrib import graph_executor
        xv = np.random.default_rng(3).standard_normal((1, 3, 13, 16)).astype("float32")
        m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
        m.set_input("x", xv)
        m.run()
        np.testing.assert_array_equal(m.get_output(0).numpy(), xv.reshape(1, 1, 3, 13, 16).transpose(0, 1, 3, 4, 2))
        xqv = np.random.default_rng(4).standard_normal((1, 3, 13, 14)).astype("float32")
        mq = graph_executor.GraphModule(lib_q["default"](tvm.cpu(0)))
        mq.set_input("x", xqv)
        mq.run()
        ref = np.clip(np.round(xqv / np.float32(0.02)) + 128, 0, 255).astype("uint8")
        ref = np.pad(ref, ((0, 0), (0, 1), (1, 1), (1, 1)), constant_values=128)
        np.testing.assert_array_equal(mq.get_output(0).numpy(), ref.reshape(1, 1, 4, 15, 16).transpose(0, 1, 3, 4, 2))
    assert json.loads(lib.get_graph_json())["nodes"]
