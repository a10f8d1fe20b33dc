"""VectorizeLoop's masked last vector: a vectorized loop split by a factor that does not divide its extent (a VM
kernel's run-time row length) runs its last partial vector as one masked vector (AVX-512 masked moves, AVX
vmaskmov) instead of a scalar loop; accesses that are not contiguous vectors, and integer divisions by a lane,
keep the scalar loop. Results against numpy at every tail length, NaN and infinities included; memory past the
end is never touched (arrays that end at an unreadable page)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln as tvm
from kiln import relay, te, topi
from kiln.runtime import vm as rvm
from kiln.target.x86 import host_can_run
from kiln import tir
from kiln.tir.stmt_functor import post_order_visit
from kiln.tir import expr as E
from kiln.tir.transform.vectorize import ANY_LANE, LANE_MASKED

TARGETS = ["llvm -mcpu=core-avx2", "llvm -mcpu=skylake-avx512"]
INTRINSIC = {TARGETS[0]: ("_mm256_maskload_ps", "_mm256_maskstore_ps"),
             TARGETS[1]: ("_mm512_maskz_loadu_ps", "_mm512_mask_storeu_ps")}


def _kernel(target, fcompute, dtype="float32", ninputs=1):
    n = te.var("n")
    ins = [te.placeholder((n,), name=f"A{k}", dtype=dtype) for k in range(ninputs)]
    out = te.compute((n,), lambda i: fcompute(n, i, *ins), name="B")
    with tvm.target.Target(target):
        s = topi.x86.schedule_injective([out])
    return s, ins + [out]


def _masked_regions(s, args):
    """The masked last vectors of the lowered kernel: their ``kiln_any_lane`` tests (each guarding masked
    loads and stores)."""
    calls = []
    post_order_visit(tvm.lower(s, args)["main"].body,
                     lambda x: calls.append(x.op) if isinstance(x, E.Call) else None)
    if ANY_LANE in calls:
        assert LANE_MASKED in calls
    return [c for c in calls if c == ANY_LANE]


@pytest.mark.parametrize("target", TARGETS)
def test_tail_is_one_masked_vector(target):
    s, args = _kernel(target, lambda n, i, a: a[i] * 2.0 + 1.0)
    assert len(_masked_regions(s, args)) == 1
    f = tvm.build(s, args, target)
    src = f.get_source()
    assert all(name in src for name in INTRINSIC[target])
    # the tail's mask is a prefix of the lanes: a count, no vector compare (kiln_mloadn / kiln_mstoren)
    assert "kiln_mloadn_f32x" in src and "kiln_mstoren_f32x" in src and "kiln_any_lane_" not in src
    if not host_can_run(target):
        return  # compiled, not run
    rng = np.random.default_rng(0)
    for m in list(range(1, 41)) + [1000, 1023]:
        a = rng.standard_normal(m).astype("float32")
        a[::7] = np.nan
        a[3::11] = np.inf
        a[5::13] = -np.inf
        b = tvm.nd.array(np.full(m, 7.0, "float32"))
        f(tvm.nd.array(a), b)
        np.testing.assert_array_equal(b.numpy(), a * np.float32(2) + np.float32(1), err_msg=f"n={m}")


@pytest.mark.parametrize("target", TARGETS)
def test_a_mask_that_is_no_prefix(target):
    """A guard on the lane that is not `lane < bound` (here also every third element skipped) is a vector compare:
    the masked loads and stores take the int32 mask, the region runs when some lane is on
    (``kiln_any_lane``), and the mask's ramp is a broadcast plus a constant iota."""
    n = tir.Var("n", "int32")
    A, B = tir.decl_buffer((n,), "float32", "A"), tir.decl_buffer((n,), "float32", "B")
    io, ii = tir.Var("io", "int32"), tir.Var("ii", "int32")
    i = io * 16 + ii
    guard = tir.And(tir.likely(i < n), E.NE(tir.floormod(i, 3), tir.const(1, "int32")))
    body = tir.For(io, 0, tir.floordiv(n + 15, 16), tir.ForKind.SERIAL,
                   tir.For(ii, 0, 16, tir.ForKind.VECTORIZED,
                           tir.IfThenElse(guard, tir.BufferStore(B, A[i] * 2.0 - 1.0, [i]))))
    params = [tir.Var("A", "handle"), tir.Var("B", "handle")]
    func = tir.PrimFunc(params, body, buffer_map=dict(zip(params, [A, B])),
                        attrs={"global_symbol": "main", "tir.noalias": True})
    f = tvm.build(func, target=target)
    src = f.get_source()
    w = 16 if "avx512" in target else 8  # AVX2: the 16-lane body is printed as two 8-lane halves, masks sliced
    assert f"kiln_mload_f32x{w}(" in src and f"kiln_mstore_f32x{w}(" in src and "kiln_any_lane_16(" in src
    assert "iota * stride + base" in src  # kiln_ramp_T: not one lane insert per lane
    if not host_can_run(target):
        return
    rng = np.random.default_rng(4)
    for m in (1, 2, 16, 17, 40):
        a = rng.standard_normal(m).astype("float32")
        a[0] = np.nan
        b = np.full(m, 5.0, "float32")
        bk = tvm.nd.array(b)
        f(tvm.nd.array(a), bk)
        ref = b.copy()
        keep = np.arange(m) % 3 != 1
        ref[keep] = a[keep] * np.float32(2) - np.float32(1)
        np.testing.assert_array_equal(bk.numpy(), ref)


@pytest.mark.parametrize("target", TARGETS)
def test_int32_tail(target):
    """int32 lanes, a division by a constant included (the same divisor on every lane: no lane divides by 0)."""
    s, args = _kernel(target, lambda n, i, a, b: a[i] * 3 + b[i] // 7, dtype="int32", ninputs=2)
    assert _masked_regions(s, args)
    f = tvm.build(s, args, target)
    if host_can_run(target):
        rng = np.random.default_rng(1)
        for m in (1, 7, 9, 15, 17, 31, 100):
            a, b = (rng.integers(-1000, 1000, m).astype("int32") for _ in range(2))
            c = tvm.nd.array(np.zeros(m, "int32"))
            f(tvm.nd.array(a), tvm.nd.array(b), c)
            np.testing.assert_array_equal(c.numpy(), a * 3 + b // 7)


@pytest.mark.parametrize("target", TARGETS)
def test_what_stays_scalar(target):
    """An integer division by a lane (zeros on the lanes that are off would trap) and a reversed read (a gather
    whose lanes off the mask index outside the array) keep the scalar tail, and stay right."""
    div = _kernel(target, lambda n, i, a, b: a[i] // b[i], dtype="int32", ninputs=2)
    rev = _kernel(target, lambda n, i, a: a[n - 1 - i] + 1.0)
    assert not _masked_regions(*div) and not _masked_regions(*rev)
    if not host_can_run(target):
        return
    fdiv, frev = tvm.build(*div, target), tvm.build(*rev, target)
    rng = np.random.default_rng(2)
    for m in (1, 9, 17, 30):
        a = rng.integers(-100, 100, m).astype("int32")
        b = rng.integers(1, 9, m).astype("int32")
        c = tvm.nd.array(np.zeros(m, "int32"))
        fdiv(tvm.nd.array(a), tvm.nd.array(b), c)
        np.testing.assert_array_equal(c.numpy(), a // b)
        x = rng.standard_normal(m).astype("float32")
        y = tvm.nd.array(np.zeros(m, "float32"))
        frev(tvm.nd.array(x), y)
        np.testing.assert_array_equal(y.numpy(), x[::-1] + np.float32(1))


_GUARD_PAGE = textwrap.dedent("""
    import ctypes, mmap, sys
    import numpy as np
    import kiln as tvm
    from kiln import te, topi
    target = sys.argv[1]
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    with tvm.target.Target(target):
        s = topi.x86.schedule_injective([B])
    f = tvm.build(s, [A, B], target)
    page = mmap.PAGESIZE
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

    def at_page_end(m):
        # m floats ending exactly where an unreadable page starts
        mm = mmap.mmap(-1, 2 * page)
        base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
        assert libc.mprotect(base + page, page, 0) == 0  # PROT_NONE
        return mm, np.frombuffer(mm, dtype=np.float32, count=m, offset=page - 4 * m)

    for m in (1, 5, 17, 1021):
        ma, a = at_page_end(m)
        mb, b = at_page_end(m)
        a[:] = np.arange(m, dtype=np.float32)
        na, nb = tvm.nd.from_dlpack(a), tvm.nd.from_dlpack(b)
        for x, nx in ((a, na), (b, nb)):  # the kernel gets the arrays themselves, not copies
            assert nx._arr.__array_interface__["data"][0] == x.__array_interface__["data"][0]
        f(na, nb)
        assert np.array_equal(b, a * 2 + 1), m
    print("ok")
""")


@pytest.mark.parametrize("target", TARGETS)
def test_masked_tail_never_reads_or_writes_past_the_end(target, tmp_path):
    if not host_can_run(target):
        pytest.skip(f"this CPU cannot run {target} (its code is compiled by the tests above)")
    script = tmp_path / "guard.py"
    script.write_text(_GUARD_PAGE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, str(script), target], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.returncode, r.stdout[-2000:], r.stderr[-2000:])


def test_vm_kernel_with_a_run_time_length():
    x = relay.var("x", shape=(relay.Any(),))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.sigmoid(x) * relay.const(3.0) - x))
    vm = rvm.VirtualMachine(relay.vm.compile(mod, "llvm"), tvm.cpu())
    rng = np.random.default_rng(3)
    for m in (1, 13, 16, 37, 255):
        a = rng.standard_normal(m).astype("float32")
        a[0] = np.nan
        out = vm.run(a).numpy()
        ref = 3.0 / (1.0 + np.exp(-a.astype(np.float64))) - a
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
        assert np.isnan(out[0])
