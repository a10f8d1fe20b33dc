"""Tutorial flow: "Schedule Primitives in TVM".

split (factor / nparts), tile, fuse, reorder, bind, compute_at, compute_inline and compute_root,
each printed with tvm.lower and (except bind, which needs a GPU target) built and run against
numpy on shapes that do not divide the split factors.
"""
import numpy as np
import pytest

import kiln as tvm
import kiln.testing
from kiln import te

SHAPES = [(8, 12), (13, 7)]


def _run(s, args, inputs, out_shapes):
    f = tvm.build(s, args, "llvm")
    arrs = [tvm.nd.array(x) for x in inputs] + [tvm.nd.empty(sh, "float32") for sh in out_shapes]
    f(*arrs)
    return [a.numpy() for a in arrs[len(inputs):]]


def _scale2d():
    m = te.var("m")
    n = te.var("n")
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n), lambda i, j: A[i, j] * 2, name="B")
    return A, B


@pytest.mark.parametrize("prim", ["split_factor", "split_nparts", "tile", "fuse", "reorder"])
@pytest.mark.parametrize("shape", SHAPES)
def test_loop_primitives(prim, shape):
    A, B = _scale2d()
    s = te.create_schedule(B.op)
    i, j = B.op.axis
    if prim == "split_factor":
        xo, xi = s[B].split(i, factor=32)
        expect = ["i_outer", "i_inner"]
    elif prim == "split_nparts":
        xo, xi = s[B].split(i, nparts=3)
        expect = ["i_outer", "i_inner"]
    elif prim == "tile":
        xo, yo, xi, yi = s[B].tile(i, j, x_factor=5, y_factor=4)
        expect = ["i_outer", "j_outer", "i_inner", "j_inner"]
    elif prim == "fuse":
        xo, yo, xi, yi = s[B].tile(i, j, x_factor=5, y_factor=4)
        s[B].fuse(xi, yi)
        expect = ["i_inner_j_inner_fused"]
    else:
        xo, xi = s[B].split(i, factor=4)
        yo, yi = s[B].split(j, factor=3)
        s[B].reorder(xi, yo, xo, yi)
        expect = ["i_inner", "j_outer", "i_outer", "j_inner"]
    text = str(tvm.lower(s, [A, B], simple_mode=True))
    positions = [text.find(name) for name in expect]
    assert all(p >= 0 for p in positions), text
    if prim in ("tile", "reorder"):
        assert positions == sorted(positions), text  # loop order as scheduled
    a = np.random.default_rng(0).uniform(size=shape).astype("float32")
    (b,) = _run(s, [A, B], [a], [shape])
    tvm.testing.assert_allclose(b, a * 2)


def test_bind_lowers_to_thread_axes():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda i: A[i] * 2, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    text = str(tvm.lower(s, [A, B], simple_mode=True))
    assert "blockIdx.x" in text and "threadIdx.x" in text


def _two_stage():
    m = te.var("m")
    A = te.placeholder((m,), name="A")
    B = te.compute((m,), lambda i: A[i] + 1, name="B")
    C = te.compute((m,), lambda i: B[i] * 2, name="C")
    return A, B, C


@pytest.mark.parametrize("how", ["compute_at", "compute_inline", "compute_root"])
def test_stage_placement(how):
    A, B, C = _two_stage()
    s = te.create_schedule(C.op)
    if how == "compute_at":
        s[B].compute_at(s[C], C.op.axis[0])
    elif how == "compute_inline":
        s[B].compute_inline()
    else:
        s[B].compute_at(s[C], C.op.axis[0])
        s[B].compute_root()
    text = str(tvm.lower(s, [A, B, C], simple_mode=True))
    loops = text.count("for ")
    if how == "compute_root":
        assert loops == 2, text
    else:
        assert loops == 1, text
    if how == "compute_inline":
        assert "B[" not in text.replace("var_B", ""), text
    a = np.random.default_rng(1).uniform(size=(19,)).astype("float32")
    f = tvm.build(s, [A, C], "llvm")
    c = tvm.nd.empty((19,), "float32")
    f(tvm.nd.array(a), c)
    tvm.testing.assert_allclose(c.numpy(), (a + 1) * 2)
