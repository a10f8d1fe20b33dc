"""The GEMV schedule of TVM's tensorize tutorial ("Use Tensorize to Leverage Hardware Intrinsics"), written as the
tutorial writes it (``tvm.tir.ir_builder``, ``access_ptr``, ``call_extern``), for the compat5 tensorize tests."""
import kiln as tvm
from kiln import te

# the tutorial's kernels as C (the tutorial's text is C++: its `extern "C"` is dropped for import_c)
GEMV_C = """
int gemv_update(float *cc, float *aa, float *bb, int m, int l, int stride) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < l; ++j) {
      cc[i] += aa[j] * bb[i * stride + j];
    }
  }
  return 0;
}
int gemv_reset(float *cc, int m) {
  for (int i = 0; i < m; ++i) {
    cc[i] = 0.0;
  }
  return 0;
}
"""

# the tutorial's text exactly (C++), as it hands it to clang.create_llvm
GEMV_CXX = GEMV_C.replace("int gemv_update", 'extern "C" int gemv_update').replace(
    "int gemv_reset", 'extern "C" int gemv_reset')


def matmul(N, M, L):
    A = te.placeholder((N, L), name="A")
    B = te.placeholder((M, L), name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    return A, B, C


def intrin_gemv(m, l, split_reduce=False):
    """The tutorial's intrin_gemv: the body alone, or (body, reduce_reset, reduce_update)."""
    a = te.placeholder((l,), name="a")
    b = te.placeholder((m, l), name="b")
    k = te.reduce_axis((0, l), name="k")
    c = te.compute((m,), lambda i: te.sum(a[k] * b[i, k], axis=k), name="c")
    Ab = tvm.tir.decl_buffer(a.shape, a.dtype, name="A", offset_factor=1, strides=[1])
    Bb = tvm.tir.decl_buffer(b.shape, b.dtype, name="B", offset_factor=1, strides=[te.var("s1"), 1])
    Cb = tvm.tir.decl_buffer(c.shape, c.dtype, name="C", offset_factor=1, strides=[1])

    def intrin_func(ins, outs):
        aa, bb = ins
        cc = outs[0]

        def _body():
            ib = tvm.tir.ir_builder.create()
            ib.emit(tvm.tir.call_extern("int32", "gemv_update", cc.access_ptr("w"), aa.access_ptr("r"),
                                        bb.access_ptr("r"), m, l, bb.strides[0]))
            return ib.get()

        def _reduce_reset():
            ib = tvm.tir.ir_builder.create()
            ib.emit(tvm.tir.call_extern("int32", "gemv_reset", cc.access_ptr("w"), m))
            return ib.get()

        if not split_reduce:
            return _body()
        return _body(), _reduce_reset(), _body()

    return te.decl_tensor_intrin(c.op, intrin_func, binds={a: Ab, b: Bb, c: Cb})


def schedule_body(N, M, L, factor, pragma_key, code):
    """Part 1 of the tutorial: the (factor x L) GEMV tensorized, the kernel imported at the outer loop."""
    A, B, C = matmul(N, M, L)
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=factor)
    s[C].reorder(x, yo, yi, z)
    s[C].tensorize(yi, intrin_gemv(factor, L))
    s[C].pragma(x, pragma_key, code)
    return s, [A, B, C]


def schedule_split(N, M, L, factor, pragma_key, code):
    """Part 2 ("Reduce-update for Tensorize"): the reduction split too, reset before it, update per step."""
    A, B, C = matmul(N, M, L)
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=factor)
    s[C].reorder(x, yo, yi, z)
    zo, zi = s[C].split(z, factor=factor)
    s[C].reorder(x, yo, zo, yi, zi)
    s[C].tensorize(yi, intrin_gemv(factor, factor, split_reduce=True))
    s[C].pragma(yo, pragma_key, code)
    return s, [A, B, C]
