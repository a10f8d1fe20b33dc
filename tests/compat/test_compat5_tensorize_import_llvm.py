"""``pragma import_llvm`` and ``contrib.clang``: LLVM IR compiled by clang or llc and linked into the module (kiln
has no LLVM of its own); without those tools, errors that name what is missing and the import_c alternative."""
import os

import numpy as np
import pytest

import kiln as tvm
from kiln.contrib import clang
from kiln.error import CompileError
from kiln.target import imports
from kiln.topi.utils import get_const_tuple

from tensorize_tutorial_util import GEMV_CXX, schedule_body, schedule_split

HAS_CLANG = imports.find_clang() is not None
HAS_LLVM_TOOL = HAS_CLANG or imports.find_llc() is not None

# gemv_reset / gemv_update of the tutorial written by hand in LLVM IR (typed pointers: LLVM 14; the parser of later
# LLVMs reads them as opaque pointers; the `ptr` spelling is the fallback)
_GEMV_IR = """
define i32 @gemv_reset(float* %cc, i32 %m) {
entry:
  %pos = icmp sgt i32 %m, 0
  br i1 %pos, label %loop, label %done
loop:
  %i = phi i32 [ 0, %entry ], [ %inext, %loop ]
  %iw = sext i32 %i to i64
  %p = getelementptr inbounds float, float* %cc, i64 %iw
  store float 0.0, float* %p, align 4
  %inext = add nsw i32 %i, 1
  %more = icmp slt i32 %inext, %m
  br i1 %more, label %loop, label %done
done:
  ret i32 0
}

define i32 @gemv_update(float* %cc, float* %aa, float* %bb, i32 %m, i32 %l, i32 %stride) {
entry:
  %mpos = icmp sgt i32 %m, 0
  br i1 %mpos, label %rows, label %done
rows:
  %i = phi i32 [ 0, %entry ], [ %inext, %rowend ]
  %iw = sext i32 %i to i64
  %cp = getelementptr inbounds float, float* %cc, i64 %iw
  %rowoff = mul nsw i32 %i, %stride
  %lpos = icmp sgt i32 %l, 0
  br i1 %lpos, label %cols, label %rowend
cols:
  %j = phi i32 [ 0, %rows ], [ %jnext, %cols ]
  %jw = sext i32 %j to i64
  %ap = getelementptr inbounds float, float* %aa, i64 %jw
  %bidx = add nsw i32 %rowoff, %j
  %bw = sext i32 %bidx to i64
  %bp = getelementptr inbounds float, float* %bb, i64 %bw
  %av = load float, float* %ap, align 4
  %bv = load float, float* %bp, align 4
  %prod = fmul float %av, %bv
  %cv = load float, float* %cp, align 4
  %sum = fadd float %cv, %prod
  store float %sum, float* %cp, align 4
  %jnext = add nsw i32 %j, 1
  %jmore = icmp slt i32 %jnext, %l
  br i1 %jmore, label %cols, label %rowend
rowend:
  %inext = add nsw i32 %i, 1
  %imore = icmp slt i32 %inext, %m
  br i1 %imore, label %rows, label %done
done:
  ret i32 0
}
"""


def _gemv_ir() -> str:
    """The IR in the spelling the installed tool reads."""
    try:
        imports.llvm_object(_GEMV_IR)
        return _GEMV_IR
    except CompileError:
        ir = _GEMV_IR.replace("float*", "ptr")
        imports.llvm_object(ir)
        return ir


def _check(func, A, B, C, seed, fill):
    rs = np.random.RandomState(seed)
    a = rs.uniform(size=get_const_tuple(A.shape)).astype("float32")
    b = rs.uniform(size=get_const_tuple(B.shape)).astype("float32")
    c = tvm.nd.array(np.full(get_const_tuple(C.shape), fill, "float32"))
    func(tvm.nd.array(a), tvm.nd.array(b), c)
    tvm.testing.assert_allclose(c.numpy(), a @ b.T, rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(not HAS_LLVM_TOOL, reason="needs clang or llc on PATH to compile LLVM IR (kiln has no LLVM)")
def test_import_llvm_handwritten_ir_reset_update_and_export(tmp_path):
    N, M, L = 23, 48, 32
    s, (A, B, C) = schedule_split(N, M, L, 16, "import_llvm", _gemv_ir())
    func = tvm.build(s, [A, B, C], target="llvm", name="gemv")
    src = func.get_source()
    # functions defined only in the IR are declared from the call's argument types
    assert "int32_t gemv_update(void*, void*, void*, int32_t, int32_t, int32_t);" in src
    _check(func, A, B, C, 0, 5.0)
    for k, name in enumerate(("gemv_ll.so", "gemv_ll.tar")):
        path = os.path.join(tmp_path, name)
        func.export_library(path)  # the IR's object goes into the export
        _check(tvm.runtime.load_module(path)["gemv"], A, B, C, 1 + k, -1.0)


@pytest.mark.skipif(not HAS_LLVM_TOOL, reason="needs clang or llc on PATH to compile LLVM IR (kiln has no LLVM)")
def test_import_llvm_twice_with_a_shared_function():
    # the tutorial's flow: part 1 imports IR with gemv_update at the outer loop, part 2 IR with gemv_update and
    # gemv_reset at the next loop; both link (the imported definitions are weak)
    ir = _gemv_ir()
    update_only = ir[ir.index("define i32 @gemv_update"):]
    s, (A, B, C) = schedule_split(11, 32, 32, 16, "import_llvm", ir)
    s[C].pragma(C.op.axis[0], "import_llvm", update_only)
    func = tvm.build(s, [A, B, C], target="llvm", name="gemv")
    _check(func, A, B, C, 4, 3.0)


@pytest.mark.skipif(not HAS_LLVM_TOOL, reason="needs clang or llc on PATH to compile LLVM IR (kiln has no LLVM)")
def test_import_llvm_from_ll_file(tmp_path):
    path = os.path.join(tmp_path, "gemv.ll")
    with open(path, "w") as f:
        f.write(_gemv_ir())
    s, (A, B, C) = schedule_body(9, 32, 19, 16, "import_llvm", path)
    func = tvm.build(s, [A, B, C], target="llvm", name="gemv")
    _check(func, A, B, C, 2, 0.0)


@pytest.mark.skipif(not HAS_CLANG, reason="needs clang on PATH (contrib.clang.create_llvm runs it)")
def test_tutorial_create_llvm_and_import_llvm(tmp_path):
    # the tutorial's own flow: C++ source -> clang.create_llvm -> pragma import_llvm
    ll_code = clang.create_llvm(GEMV_CXX, output=os.path.join(tmp_path, "temp.ll"))
    assert "gemv_update" in ll_code
    s, (A, B, C) = schedule_split(31, 32, 48, 16, "import_llvm", ll_code)
    func = tvm.build(s, [A, B, C], target="llvm", name="gemv")
    _check(func, A, B, C, 3, 2.0)


def test_import_llvm_without_tools_names_them(monkeypatch):
    monkeypatch.setattr(imports, "find_clang", lambda: None)
    monkeypatch.setattr(imports, "find_llc", lambda: None)
    s, args = schedule_body(4, 16, 8, 16, "import_llvm", "define i32 @gemv_update() {\n  ret i32 0\n}\n")
    with pytest.raises(imports.MissingToolError, match=r"clang.*llc.*import_c"):
        tvm.build(s, args, target="llvm")


def test_create_llvm_without_clang_names_the_alternative(monkeypatch):
    monkeypatch.setattr(clang, "find_tool", lambda names: None)
    assert clang.find_clang(required=False) == []
    with pytest.raises(imports.MissingToolError, match="import_c"):
        clang.create_llvm(GEMV_CXX)


@pytest.mark.skipif(not HAS_LLVM_TOOL, reason="needs clang or llc on PATH to compile LLVM IR (kiln has no LLVM)")
def test_bad_ir_is_a_compile_error():
    with pytest.raises(CompileError, match="import_llvm"):
        imports.llvm_object("this is not LLVM IR\n")


def test_import_llvm_missing_file_and_bad_value():
    from kiln.error import KilnError
    with pytest.raises(KilnError, match="no such file"):
        imports.llvm_object("/nonexistent/dir/gemv.ll")
    s, args = schedule_body(4, 16, 8, 16, "import_c", 3)
    with pytest.raises(KilnError, match="must be C source text"):
        tvm.build(s, args, target="llvm")
