"""Golden TVMScript-style text for TIR (as TVM 0.13 prints lowered functions)."""
from kiln import tir
from kiln.tir import ForKind as K

from tir_helpers import make_func, loop


def test_split_parallel_vectorized_function():
    A, B, C = (tir.decl_buffer((1024,), "float32", x) for x in "ABC")
    io, ii = tir.Var("i_outer"), tir.Var("i_inner")
    idx = io * 64 + ii
    body = loop(io, 16, loop(ii, 64, tir.BufferStore(C, A[idx] + B[idx], [idx]), K.VECTORIZED), K.PARALLEL)
    f = make_func([A, B, C], body)
    assert str(f) == '''@T.prim_func
def main(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32"), C: T.Buffer((1024,), "float32")):
    T.func_attr({"global_symbol": "main", "tir.noalias": T.bool(True)})
    for i_outer in T.parallel(16):
        for i_inner in T.vectorized(64):
            C[i_outer * 64 + i_inner] = A[i_outer * 64 + i_inner] + B[i_outer * 64 + i_inner]'''


def test_symbolic_shapes_allocate_and_unique_names():
    n = tir.Var("n")
    A = tir.decl_buffer((n,), "float32", "A")
    B = tir.decl_buffer((n,), "float32", "B")
    data = tir.Var("compute", "handle")
    tmp = tir.decl_buffer((n,), "float32", "compute", data=data)
    i1, i2 = tir.Var("i"), tir.Var("i")
    s1 = loop(i1, n, tir.IfThenElse(tir.likely(i1 < n), tir.BufferStore(tmp, tir.exp(A[i1]), [i1])))
    s2 = loop(i2, n, tir.BufferStore(B, tmp[i2] * 2.0, [i2]))
    body = tir.Allocate(data, "float32", [n], tir.const(True), tir.DeclBuffer(tmp, tir.SeqStmt([s1, s2])))
    f = make_func([A, B], body)
    assert str(f) == '''@T.prim_func
def main(var_A: T.handle, var_B: T.handle):
    T.func_attr({"global_symbol": "main", "tir.noalias": T.bool(True)})
    n = T.int32()
    A = T.match_buffer(var_A, (n,))
    B = T.match_buffer(var_B, (n,))
    compute = T.allocate([n], "float32", "global")
    compute_1 = T.Buffer((n,), data=compute)
    for i in range(n):
        if T.likely(i < n):
            compute_1[i] = T.exp(A[i])
    for i_1 in range(n):
        B[i_1] = compute_1[i_1] * T.float32(2.0)'''


def test_flattened_view_of_2d_param_and_grid():
    A = tir.decl_buffer((4, 8), "float32", "A")
    B = tir.decl_buffer((4, 8), "float32", "B")
    A1 = tir.decl_buffer((32,), "float32", "A", data=A.data)
    B1 = tir.decl_buffer((32,), "float32", "B", data=B.data)
    i, j = tir.Var("i"), tir.Var("j")
    body = loop(i, 4, loop(j, 8, tir.BufferStore(B1, A1[i * 8 + j], [i * 8 + j])))
    f = make_func([A, B], body)
    assert str(f) == '''@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    T.func_attr({"global_symbol": "main", "tir.noalias": T.bool(True)})
    B_1 = T.Buffer((32,), data=B.data)
    A_1 = T.Buffer((32,), data=A.data)
    for i, j in T.grid(4, 8):
        B_1[i * 8 + j] = A_1[i * 8 + j]'''


def test_expression_precedence_and_calls():
    x, y, z = tir.Var("x"), tir.Var("y"), tir.Var("z")
    n = tir.Var("n")
    assert str(n + 1) == "n + 1"
    assert str((x + 1) * (y - 2)) == "(x + 1) * (y - 2)"
    assert str(x - (y - z)) == "x - (y - z)"
    assert str(x - y - z) == "x - y - z"
    assert str(x * y // 4 % 3) == "x * y // 4 % 3"
    assert str(x * (y // 4)) == "x * (y // 4)"
    assert str(tir.all(x < 3, tir.any(y > 2, x == y))) == "x < 3 and (y > 2 or x == y)"
    assert str(tir.min(x, y) + tir.max(x, 1)) == "T.min(x, y) + T.max(x, 1)"
    assert str(tir.truncdiv(x, y)) == "T.Div(x, y)"
    assert str(tir.truncmod(x, y)) == "T.truncmod(x, y)"
    assert str(tir.Cast("float32", x) / 2.0) == 'T.Cast("float32", x) / T.float32(2.0)'
    assert str(tir.Select(x < y, x, y)) == "T.Select(x < y, x, y)"
    assert str(tir.if_then_else(x < y, x, 0)) == "T.if_then_else(x < y, x, 0)"
    assert str(tir.Ramp(x, 1, 4) + tir.Broadcast(y, 4)) == "T.Ramp(x, 1, 4) + T.Broadcast(y, 4)"
    assert str((x & 3) | (y << 2)) == "x & 3 | y << 2"
    assert str(tir.const(5, "int64")) == "T.int64(5)"
    v = tir.Var("v")
    assert str(tir.Let(v, x + 1, v * 2)) == "T.Let(v, x + 1, v * 2)"
    x2 = tir.Var("x")
    assert str(x + x2) == "x + x_1"
    assert str(x * -1) == "x * -1"


def test_statement_forms():
    A = tir.decl_buffer((16,), "float32", "A")
    i = tir.Var("i")
    v = tir.Var("v", "float32")
    s = tir.LetStmt(v, A[i], tir.AssertStmt(v > 0.0, "positive", tir.BufferStore(A, v * 2.0, [i])))
    text = str(loop(i, 16, s, K.UNROLLED, mn=2))
    assert text == '''for i in T.unroll(2, 18):
    v: T.float32 = A[i]
    assert v > T.float32(0.0), "positive"
    A[i] = v * T.float32(2.0)'''
    r = tir.Ramp(i * 4, 1, 4)
    assert str(tir.BufferStore(A, A[r], [r])) == "A[i * 4:i * 4 + 4] = A[i * 4:i * 4 + 4]"
