"""TVM's tensorize tutorial end to end with `import kiln as tvm`: the GEMV micro-kernel is C source attached with
``pragma import_c`` and called through ``call_extern``; the whole-reduction body and the reset/update split;
export_library carries the imported C."""
import os

import numpy as np
import pytest

import kiln as tvm
from kiln.error import KilnError
from kiln.target.imports import c_top_level_items
from kiln.topi.utils import get_const_tuple

from tensorize_tutorial_util import GEMV_C, GEMV_CXX, schedule_body, schedule_split


def _run(func, A, B, C, seed, fill=0.0):
    rs = np.random.RandomState(seed)
    dev = tvm.device("cpu", 0)
    a = rs.uniform(size=get_const_tuple(A.shape)).astype(A.dtype)
    b = rs.uniform(size=get_const_tuple(B.shape)).astype(B.dtype)
    c = tvm.nd.array(np.full(get_const_tuple(C.shape), fill, dtype=C.dtype), dev)
    func(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    return c.numpy(), a @ b.T


def test_tutorial_gemv_body_import_c():
    # part 1: a (16 x L) GEMV over the inner loops, L odd; gemv_update accumulates into C (zeros, as the tutorial)
    N, M, L = 37, 48, 37
    s, (A, B, C) = schedule_body(N, M, L, 16, "import_c", GEMV_C)
    text = str(tvm.lower(s, [A, B, C], simple_mode=True))
    assert "gemv_update" in text and "pragma_import_c" in text
    assert 'T.tvm_access_ptr(T.type_annotation("float32")' in text
    func = tvm.build(s, [A, B, C], target="llvm", name="gemv")
    src = func.get_source()
    assert "int gemv_update(float *cc" in src          # the imported C is in the module's translation unit
    assert src.index("int gemv_update(float *cc") < src.index("int32_t gemv(")
    got, want = _run(func, A, B, C, 0)
    tvm.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_tutorial_gemv_reset_update_import_c():
    # part 2: the reduction split by 16 too: gemv_reset once per output tile, gemv_update per reduction step;
    # C starts non-zero, so the reset must run
    N, M, L = 29, 32, 48
    s, (A, B, C) = schedule_split(N, M, L, 16, "import_c", GEMV_C)
    func = tvm.build(s, [A, B, C], target="llvm", name="gemv")
    src = func.get_source()
    assert "gemv_reset(" in src and src.count("gemv_update(") >= 2
    got, want = _run(func, A, B, C, 1, fill=7.0)
    tvm.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_export_library_carries_imported_c(tmp_path):
    N, M, L = 13, 32, 48
    s, (A, B, C) = schedule_split(N, M, L, 16, "import_c", GEMV_C)
    func = tvm.build(s, [A, B, C], target="llvm", name="gemv")
    for name in ("gemv.so", "gemv.tar"):
        path = os.path.join(tmp_path, name)
        func.export_library(path)
        loaded = tvm.runtime.load_module(path)
        got, want = _run(loaded["gemv"], A, B, C, 2, fill=-3.0)
        tvm.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_import_c_source_deduplicated_and_on_several_loops():
    # the same source imported twice (two pragmas) appears once in the translation unit
    N, M, L = 5, 32, 16
    s, (A, B, C) = schedule_split(N, M, L, 16, "import_c", GEMV_C)
    s[C].pragma(C.op.axis[0], "import_c", GEMV_C)
    func = tvm.build(s, [A, B, C], target="llvm")
    assert func.get_source().count("int gemv_reset(float *cc") == 1
    got, want = _run(func, A, B, C, 3)
    tvm.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_import_c_takes_the_tutorials_cxx_text():
    # the tutorial's source as written (C++ `extern "C" int gemv_update(...)`): the linkage specifier is dropped
    s, (A, B, C) = schedule_split(5, 16, 32, 16, "import_c", GEMV_CXX)
    func = tvm.build(s, [A, B, C], target="llvm")
    assert 'extern "C"' not in func.get_source()
    got, want = _run(func, A, B, C, 6, fill=2.0)
    tvm.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # the block form is C++ only
    s, args = schedule_body(4, 16, 8, 16, "import_c", 'extern "C" {\nint gemv_update(void);\n}\n')
    with pytest.raises(KilnError, match='extern "C" \\{'):
        tvm.build(s, args, target="llvm")


def test_access_ptr_forms():
    buf = tvm.tir.decl_buffer((4, 8), "float32", name="Q")
    p = buf.access_ptr("rw", offset=3)
    assert p.op == "tir.tvm_access_ptr" and p.dtype == "handle"
    ann, data, off, ext, mask = p.args
    assert ann.dtype == "float32" and data is buf.data
    assert off.value == 3 and ext.value == 29 and mask.value == 3
    assert buf.access_ptr("r").args[4].value == 1 and buf.access_ptr(2).args[4].value == 2
    with pytest.raises(KilnError, match="access mask"):
        buf.access_ptr("x")


def test_import_c_items_split_at_top_level():
    src = """
    /* a { in a comment */
    typedef struct { int a; } pair_t;
    static const char* s = "}{;";
    int f(int x) { if (x) { return 1; } return 0; }
    struct S { int b; };
    int g(void);  // ; {
    char c = '}';
    """
    items = c_top_level_items(src)
    assert [i.split()[-1] if not i.startswith(("int f", "/*", "//")) else i[:5] for i in items] == [
        "/* a ", '"}{;";', "int f", "};", "g(void);", "// ; "]
    # with preprocessor lines the source stays whole (their order matters)
    assert len(c_top_level_items("#include <math.h>\nint a;\nint b;\n")) == 1


def test_tensorized_kernel_in_parallel_loop():
    # the outer loop on kiln's thread pool: the extern calls run inside the outlined parallel body
    for make in (schedule_body, schedule_split):
        s, (A, B, C) = make(64, 32, 48, 16, "import_c", GEMV_C)
        s[C].parallel(C.op.axis[0])
        func = tvm.build(s, [A, B, C], target="llvm")
        got, want = _run(func, A, B, C, 5, fill=1.0 if make is schedule_split else 0.0)
        tvm.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_partial_tile_is_refused():
    # M = 50 split by 16: the last tile would be 2 columns but the intrinsic writes 16
    s, args = schedule_body(3, 50, 16, 16, "import_c", GEMV_C)
    with pytest.raises(tvm.error.LoweringError, match="partial"):
        tvm.build(s, args, target="llvm")
