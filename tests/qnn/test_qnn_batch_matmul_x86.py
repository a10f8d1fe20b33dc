"""qnn.batch_matmul on x86: the legalization to nn.batch_matmul on int16 ``x - zx`` / ``y - zy`` (int32 output) and
``batch_matmul_int16.x86`` (vpmaddwd, y packed per batch), bit-exact against numpy's integer product (odd sizes,
batch broadcast, int8 / uint8, zero points at the ends of their ranges, run-time zero points, transpose variants);
forms that do not provably fit int16 keep the generic lowering."""
import subprocess

import numpy as np
import pytest

import kiln
from kiln import relay, te
from kiln.contrib import graph_executor
from kiln.relay import qnn
from kiln.relay.transform._util import op_call
from kiln.target.x86 import cpu_cflags, host_can_run
from kiln.topi.x86 import batch_matmul_int16, schedule_batch_matmul_int16

AVX2 = "llvm -mcpu=core-avx2"
AVX512 = "llvm -mcpu=skylake-avx512"
RNG = np.random.default_rng(1919)
needs_avx2 = pytest.mark.skipif(not host_can_run(kiln.target.Target(AVX2)), reason="host lacks AVX2")


def qbmm(x, y, zx, zy, ta=False, tb=True):
    if not ta and tb:
        return qnn.op.batch_matmul(x, y, zx, zy, 0.5, 0.25)
    zx = zx if isinstance(zx, relay.Expr) else relay.const(np.int32(zx))
    zy = zy if isinstance(zy, relay.Expr) else relay.const(np.int32(zy))
    return op_call("qnn.batch_matmul", [x, y, zx, zy, relay.const(np.float32(0.5)), relay.const(np.float32(0.25))],
                   out_dtype="int32", transpose_a=ta, transpose_b=tb)


def ref(xd, yd, zx, zy, ta=False, tb=True):
    a = xd.astype(np.int64) - zx
    b = yd.astype(np.int64) - zy
    if ta:
        a = a.transpose(0, 2, 1)
    if tb:
        b = b.transpose(0, 2, 1)
    return np.matmul(a, b).astype(np.int32)


def bmm_inputs(opt, op_name="nn.batch_matmul"):
    """The input dtypes of every ``op_name`` call in the optimized module."""
    found = []
    relay.analysis.post_order_visit(opt["main"], lambda e: found.append(
        tuple(a.checked_type.dtype for a in e.args)) if isinstance(e, relay.Call)
        and getattr(e.op, "name", "") == op_name else None)
    return found


def build(body, params, target=AVX2):
    mod = kiln.IRModule.from_expr(relay.Function(params, body))
    with kiln.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(mod, target)
        lib = relay.build(mod, target)
    return mod, opt, lib


def run(lib, **inputs):
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input(**inputs)
    m.run()
    return m.get_output(0).numpy()


def data(dtype, shape, zp=None):
    info = np.iinfo(dtype)
    d = RNG.integers(info.min, info.max + 1, shape).astype(dtype)
    d.flat[0], d.flat[-1] = info.min, info.max  # both ends of the range
    return d


CASES = [  # (batch x, batch y, M, N, K, transpose_a, transpose_b)
    (1, 1, 1, 5, 13, False, True), (3, 3, 7, 17, 37, False, True), (3, 3, 33, 17, 64, False, True),
    (3, 1, 7, 5, 13, False, True), (1, 3, 33, 17, 37, False, True), (3, 3, 7, 17, 13, True, True),
    (3, 3, 33, 5, 64, False, False), (1, 3, 7, 17, 37, True, False)]


@needs_avx2
@pytest.mark.parametrize("bx,by,m,n,k,ta,tb", CASES)
@pytest.mark.parametrize("xt,yt,zx,zy", [("int8", "int8", -128, 127), ("uint8", "uint8", 255, 0),
                                         ("uint8", "int8", 0, -128), ("int8", "uint8", 127, 255)])
def test_qnn_batch_matmul_int16_exact(bx, by, m, n, k, ta, tb, xt, yt, zx, zy):
    xs = (bx, k, m) if ta else (bx, m, k)
    ys = (by, n, k) if tb else (by, k, n)
    x, y = relay.var("x", shape=xs, dtype=xt), relay.var("y", shape=ys, dtype=yt)
    _, opt, lib = build(qbmm(x, y, zx, zy, ta, tb), [x, y])
    assert bmm_inputs(opt) == [("int16", "int16")]
    xd, yd = data(xt, xs), data(yt, ys)
    np.testing.assert_array_equal(run(lib, x=xd, y=yd), ref(xd, yd, zx, zy, ta, tb))


@needs_avx2
def test_qnn_batch_matmul_constant_y_and_runtime_zero_points():
    """A constant y (packed once at compile time: nn.contrib_batch_matmul_pack) and uint8 zero points known only at
    run time (cast to int32, as DynamicQuantizeLinear gives them): still the int16 form, still exact."""
    xs, ys = (3, 7, 37), (3, 17, 37)
    yd = data("int8", ys)
    x, zx = relay.var("x", shape=xs, dtype="uint8"), relay.var("zx", shape=(), dtype="uint8")
    _, opt, lib = build(qbmm(x, relay.const(yd), relay.cast(zx, "int32"), -3), [x, zx])
    assert bmm_inputs(opt, "nn.contrib_batch_matmul_pack") == [("int16", "int16")]
    assert "batch_matmul_int16" in lib.get_lib().get_source()  # the int16 implementation, not batch_matmul.x86
    xd = data("uint8", xs)
    for z in (0, 131, 255):
        np.testing.assert_array_equal(run(lib, x=xd, zx=np.uint8(z)), ref(xd, yd, z, -3))


@needs_avx2
def test_qnn_batch_matmul_outside_int16_keeps_the_generic_path():
    """A run-time int32 zero point (``x - z`` may leave int16) or int16 data keep the generic int32 lowering."""
    xs, ys = (2, 7, 13), (2, 5, 13)
    x, y = relay.var("x", shape=xs, dtype="int8"), relay.var("y", shape=ys, dtype="int8")
    zx = relay.var("zx", shape=(), dtype="int32")
    _, opt, lib = build(qbmm(x, y, zx, 3), [x, y, zx])
    assert bmm_inputs(opt) == [("int32", "int32")]
    xd, yd = data("int8", xs), data("int8", ys)
    np.testing.assert_array_equal(run(lib, x=xd, y=yd, zx=np.int32(40000)), ref(xd, yd, 40000, 3))
    x16 = relay.var("x", shape=xs, dtype="int16")
    _, opt, lib = build(qbmm(x16, y, 5, 3), [x16, y])
    assert bmm_inputs(opt) == [("int32", "int32")]
    xd = RNG.integers(-30000, 30000, xs).astype("int16")
    np.testing.assert_array_equal(run(lib, x=xd, y=yd), ref(xd, yd, 5, 3))


def test_qnn_batch_matmul_legalization_follows_the_target():
    """Graph only (no ISA needed): AVX2 and AVX-512 targets take the int16 form; a target without the int8 kernels
    (plain ``llvm``, no -mcpu) keeps the generic int32 one."""
    x, y = relay.var("x", shape=(2, 7, 13), dtype="int8"), relay.var("y", shape=(2, 5, 13), dtype="uint8")
    mod = kiln.IRModule.from_expr(relay.Function([x, y], qbmm(x, y, 1, 128)))
    for target, want in ((AVX2, "int16"), (AVX512, "int16"), ("llvm -mcpu=x86-64", "int32")):
        with kiln.transform.PassContext(opt_level=3):
            opt, _ = relay.optimize(mod, target)
        assert bmm_inputs(opt) == [(want, want)], target


def _kernel(target, shape=(3, 7, 17, 37)):
    b, m, n, k = shape
    with kiln.target.Target(target):
        x = te.placeholder((b, m, k), "int16", name="x")
        y = te.placeholder((b, n, k), "int16", name="y")
        out = batch_matmul_int16(x, y, None, "int32", False, True)
        return kiln.build(schedule_batch_matmul_int16([out]), [x, y, out], target)


@pytest.mark.parametrize("target", [AVX2, AVX512])
def test_batch_matmul_int16_codegen(target):
    """The inner step is vpmaddwd (compiled only: the AVX-512 code need not run here)."""
    src = _kernel(target).get_source()
    asm = subprocess.run(["gcc", "-O3", *cpu_cflags(kiln.target.Target(target)), "-fopenmp", "-S", "-x", "c", "-",
                          "-o", "-"], input=src, capture_output=True, text=True, check=True).stdout
    assert "vpmaddwd" in asm


@needs_avx2
def test_batch_matmul_int16_wraps_like_int32():
    """Operands at the int16 extremes: the pair sums and the accumulation wrap modulo 2**32 like int32."""
    b, m, n, k = 1, 3, 16, 8
    f = _kernel(AVX2, (b, m, n, k))
    xd = RNG.choice(np.array([-32768, 32767, -1, 0, 255], "int16"), (b, m, k))
    yd = RNG.choice(np.array([-32768, 32767, -1, 0, 7], "int16"), (b, n, k))
    out = kiln.nd.array(np.zeros((b, m, n), "int32"))
    f(kiln.nd.array(xd), kiln.nd.array(yd), out)
    want = np.matmul(xd.astype(np.int64), yd.astype(np.int64).transpose(0, 2, 1))
    np.testing.assert_array_equal(out.numpy(), ((want + 2**31) % 2**32 - 2**31).astype(np.int32))


def test_batch_matmul_int16_refuses_other_dtypes_and_shapes():
    x = te.placeholder((2, 7, 13), "int8", name="x")
    y = te.placeholder((2, 5, 13), "int16", name="y")
    with kiln.target.Target(AVX2):
        with pytest.raises(kiln.error.KilnError, match="int16 x int16"):
            batch_matmul_int16(x, y)
        x16 = te.placeholder((2, 7, 12), "int16", name="x")
        with pytest.raises(kiln.error.KilnError, match="do not multiply"):
            batch_matmul_int16(x16, y)


@needs_avx2
def test_batch_matmul_int16_every_tile_m_is_exact():
    """The AutoTVM template (``tile_m`` knob, extracted from a qnn.batch_matmul graph): every configuration of
    an odd shape computes the exact product (padded row tiles, a broadcast y batch)."""
    x, y = relay.var("x", shape=(3, 7, 37), dtype="int8"), relay.var("y", shape=(1, 17, 37), dtype="uint8")
    mod = kiln.IRModule.from_expr(relay.Function([x, y], qbmm(x, y, -128, 255)))
    tasks = kiln.autotvm.task.extract_from_program(mod, {}, AVX2)
    (task,) = [t for t in tasks if t.name == "batch_matmul_int16.x86"]
    assert len(task.config_space) > 1
    xd = RNG.integers(-255, 256, (3, 7, 37)).astype("int16")
    yd = RNG.integers(-255, 256, (1, 17, 37)).astype("int16")
    want = np.matmul(xd.astype(np.int64), yd.astype(np.int64).transpose(0, 2, 1))
    for i in range(len(task.config_space)):
        with kiln.target.Target(AVX2):
            s, (out, a, b) = task.instantiate(task.config_space.get(i))
            f = kiln.build(s, [a, b, out], AVX2)
        res = kiln.nd.array(np.zeros((3, 7, 17), "int32"))
        f(kiln.nd.array(xd), kiln.nd.array(yd), res)
        np.testing.assert_array_equal(res.numpy(), want)
