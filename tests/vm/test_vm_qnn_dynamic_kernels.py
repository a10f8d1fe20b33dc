"""The x86 int8/int16 kernels serve an unknown batch on the VM: qnn.dense over unknown rows runs on
``dense_int16.x86`` (exact mode without VNNI) / ``dense_int8.x86`` (saturating mode, VNNI), qnn.conv2d and the
int8 depthwise conv over an unknown batch on ``conv2d_NCHWc_int8.x86`` / ``depthwise_conv2d_NCHWc_int8.x86``,
with the weights packed at compile time; the integers equal the static build's on batch sizes that do not divide
the row tile. Unknown channels or K still take the generic integer kernels (a qnn.dense whose K is unknown on both
operands fails in ``dense_pack.x86`` before and after this change: the generic path's own limitation)."""
import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.relay import qnn
from kiln.runtime.vm import VirtualMachine
from kiln.topi.x86.conv2d_int8 import SATURATING_OPTION

ANY = relay.Any
AVX2 = "llvm -mcpu=core-avx2"
RNG = np.random.default_rng(23)
K, UNITS = 36, 40  # units not a multiple of 16: a zero-padded last panel (AlterOpLayout packs K multiples of 4)
W_DENSE = RNG.integers(-60, 60, (UNITS, K)).astype("int8")  # 7-bit: exact in the saturating mode too
K_ODD = 37  # not packed by AlterOpLayout: the kernel packs the weight and pads K per call
W_ODD = RNG.integers(-60, 60, (UNITS, K_ODD)).astype("int8")
W_CONV = RNG.integers(-60, 60, (16, 8, 3, 3)).astype("int8")
W_DW = RNG.integers(-60, 60, (16, 1, 3, 3)).astype("int8")
BATCHES = (1, 3, 7, 17)


def _f(v):
    return relay.const(np.float32(v))


def _i(v):
    return relay.const(np.int32(v))


def _dense(x, w=W_DENSE):
    return qnn.op.dense(x, relay.const(w), _i(3), _i(0), _f(0.05), _f(0.02), units=UNITS)


def _dense_odd(x):
    return _dense(x, W_ODD)


def _conv(x):
    return qnn.op.conv2d(x, relay.const(W_CONV), _i(3), _i(0), _f(0.05), _f(0.02), kernel_size=(3, 3),
                         channels=16, padding=(1, 1))


def _dwconv(x):
    return qnn.op.conv2d(x, relay.const(W_DW), _i(3), _i(0), _f(0.05), _f(0.02), kernel_size=(3, 3),
                         channels=16, groups=16, padding=(1, 1))


def _requant(body):
    return lambda x: qnn.op.requantize(body(x), _f(0.001), _i(0), _f(0.05), _i(5), out_dtype="uint8")


def _source(exe) -> str:
    lib = exe.lib
    return lib.get_source() + "".join(m.get_source() for m in lib.imported_modules)


def _vm(body, shape, target, config=None):
    x = relay.var("x", shape=shape, dtype="uint8")
    mod = kiln.IRModule.from_expr(relay.Function([x], body(x)))
    with kiln.transform.PassContext(opt_level=3, config=config or {}):
        exe = relay.vm.compile(mod, target)
    return exe


def _static(body, xv, target, config=None):
    x = relay.var("x", shape=xv.shape, dtype="uint8")
    mod = kiln.IRModule.from_expr(relay.Function([x], body(x)))
    with kiln.transform.PassContext(opt_level=3, config=config or {}):
        lib = relay.build(mod, target)
    from kiln.contrib import graph_executor
    g = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    g.set_input("x", xv)
    g.run()
    return g.get_output(0).numpy()


def _dense_ref(xv, w):
    acc = (xv.astype(np.int64) - 3) @ w.astype(np.int64).T
    return acc.astype(np.int32)


CASES = {
    # name: (body, data shape with Any, run shape of batch b, kernel name in the source, pass config)
    "dense_int16": (_dense, (ANY(), K), lambda b: (b, K), "dense_int16", None),
    "dense_int8_saturating": (_dense, (ANY(), K), lambda b: (b, K), "dense_int8", {SATURATING_OPTION: True}),
    "dense_int16_odd_k": (_dense_odd, (ANY(), K_ODD), lambda b: (b, K_ODD), "dense_int16", None),
    "dense_int8_saturating_odd_k": (_dense_odd, (ANY(), K_ODD), lambda b: (b, K_ODD), "dense_int8",
                                    {SATURATING_OPTION: True}),
    "dense_int16_requantize": (_requant(_dense), (ANY(), K), lambda b: (b, K), "dense_int16", None),
    "conv2d_int8": (_requant(_conv), (ANY(), 8, 7, 5), lambda b: (b, 8, 7, 5), "conv2d_NCHWc_int8", None),
    "depthwise_int8": (_requant(_dwconv), (ANY(), 16, 6, 5), lambda b: (b, 16, 6, 5), "depthwise_conv2d_NCHWc_int8",
                       None),
}


def _host_runs_avx2() -> bool:
    from kiln.testing.cpu_features import host_cpu_flags  # noqa: PLC0415
    return "avx2" in host_cpu_flags()


@pytest.mark.parametrize("name", sorted(CASES))
def test_int8_kernel_serves_an_unknown_batch_with_the_static_builds_integers(name):
    body, shape, run_shape, kernel, config = CASES[name]
    exe = _vm(body, shape, AVX2, config)
    src = _source(exe)
    assert kernel in src, f"{name}: the VM kernel is not {kernel} (a generic fallback?)"
    if not _host_runs_avx2():
        pytest.skip("host without AVX2: code compiled, not run")
    vm = VirtualMachine(exe, kiln.cpu())
    for b in BATCHES:
        xv = RNG.integers(0, 256, run_shape(b)).astype("uint8")
        got = vm.invoke("main", xv).numpy()
        want = _static(body, xv, AVX2, config)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want, err_msg=f"{name} batch {b}")
        if body in (_dense, _dense_odd):
            w = W_DENSE if body is _dense else W_ODD
            np.testing.assert_array_equal(got, _dense_ref(xv, w), err_msg=f"{name} batch {b} vs numpy")


def test_weights_are_packed_at_compile_time():
    """The dense weights reach the kernels packed (NC16n2c int16, NC16n4c int8: 4-D constants), not per call."""
    shapes = [tuple(c.shape) for c in _vm(_dense, (ANY(), K), AVX2).constants]
    assert (-(-UNITS // 16), K // 2, 16, 2) in shapes, shapes
    shapes = [tuple(c.shape) for c in _vm(_dense, (ANY(), K), AVX2, {SATURATING_OPTION: True}).constants]
    assert (-(-UNITS // 16), K // 4, 16, 4) in shapes, shapes


@pytest.mark.parametrize("name", ["dense_int8_saturating", "conv2d_int8", "depthwise_int8"])
def test_vnni_code_for_an_unknown_batch_compiles(name):
    body, shape, _, kernel, _ = CASES[name]
    src = _source(_vm(body, shape, "llvm -mcpu=cascadelake"))
    assert kernel in src
    if name != "depthwise_int8":  # the depthwise conv has no 4-channel reduction (no dot-product step)
        assert "dpbusd" in src.lower(), "the VNNI dot product is not in the kernel"


@pytest.mark.parametrize("dtypes", [("uint8", "int8"), ("int16", "int16")])
def test_unknown_k_is_not_given_to_the_int_dense_kernels(dtypes):
    """Only the rows may be symbolic: an unknown K (or weight) leaves the int8/int16 dense out of the strategy."""
    from kiln import te
    from kiln.ir import Op
    from kiln.relay.backend.te_compiler import get_valid_implementations
    m, k = te.var("m"), te.var("k")
    out_type = relay.TensorType((relay.Any(), UNITS), "int32")
    call = relay.nn.dense(relay.var("x", shape=(1, K), dtype=dtypes[0]),
                          relay.var("w", shape=(UNITS, K), dtype=dtypes[1]), units=UNITS, out_dtype="int32")
    attrs = call.attrs
    names = {}
    for label, (xs, ws) in {"rows": ((m, K), (UNITS, K)), "k": ((m, k), (UNITS, k))}.items():
        ins = [te.placeholder(xs, dtypes[0], name="x"), te.placeholder(ws, dtypes[1], name="w")]
        names[label] = {impl.name for impl in get_valid_implementations(Op.get("nn.dense"), attrs, ins, out_type,
                                                                        AVX2)}
    kernel = "dense_int8.x86" if dtypes[0] == "uint8" else "dense_int16.x86"
    assert kernel in names["rows"], names
    assert kernel not in names["k"], names


def test_unknown_channels_take_the_generic_conv():
    x = relay.var("x", shape=(ANY(), 8, ANY(), ANY()), dtype="uint8")
    mod = kiln.IRModule.from_expr(relay.Function([x], _conv(x)))
    with kiln.transform.PassContext(opt_level=3):
        src = _source(relay.vm.compile(mod, AVX2))
    assert "NCHWc_int8" not in src
