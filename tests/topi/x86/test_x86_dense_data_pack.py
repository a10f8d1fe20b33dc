"""dense_pack's per-call packing of the data rows (``pack_data``: ``[M, K]`` -> ``[ceil(M / mr), K, mr]``): the
fallback's rule, numerics against numpy on odd shapes (rows that no block divides, padded weight panels, a
weight packed per call, a fused epilogue), and the generated code of both ISAs (the micro-kernel broadcasts
from the packed rows and keeps its accumulators in registers)."""
import re

import numpy as np
import pytest

import kiln as tvm
from kiln import autotvm, te, topi
from kiln.topi import x86
from kiln.topi.x86 import dense as dense_mod
from kiln.topi.x86.dense import pack_data_pays
from kiln.topi.testing import dense_pack_weight_python

ISA = {"avx2": "llvm -mcpu=core-avx2", "avx512": "llvm -mcpu=skylake-avx512"}


def _build(target, m, n, k, bn, bias=True):
    with tvm.target.Target(target):
        A, B = te.placeholder((m, k), name="A"), te.placeholder((n,), name="B")
        W = te.placeholder((-(-n // bn), k, bn) if bn else (n, k), name="W")
        out = x86.dense_pack(A, W, B if bias else None, "float32", n if bn else None)
        out = topi.nn.relu(out) if bias else out
        args = [A, W, B, out] if bias else [A, W, out]
        return tvm.build(x86.schedule_dense_pack([out]), args, target=target)


@pytest.fixture
def pack_always(monkeypatch):
    """Make the fallback pack any operand of two row blocks or more (the real rule needs megabytes)."""
    monkeypatch.setattr(dense_mod, "DATA_PACK_MIN_BYTES", 1)
    monkeypatch.setattr(dense_mod, "DATA_PACK_ALIAS_BYTES", 4)


def test_fallback_rule():
    assert pack_data_pays(128, 3072, 6)            # BERT FFN2: rows 12 KiB apart, 1.5 MB
    assert pack_data_pays(1024, 1024, 6)
    assert not pack_data_pays(128, 768, 6)         # rows 3 KiB apart: no aliasing to undo
    assert pack_data_pays(128, 1024, 6)            # 512 KiB
    assert not pack_data_pays(64, 1024, 6)         # 256 KiB: no gain measured
    assert not pack_data_pays(8, 1 << 16, 6)       # a single row block
    assert not pack_data_pays(128, 3072, 6, 1)     # int8 rows 3 KiB apart
    assert pack_data_pays(256, 4096, 6, 1)


@pytest.mark.parametrize("m,n,k,bn,bias", [(13, 40, 37, 16, True), (14, 10, 21, 8, True), (25, 33, 19, 16, False),
                                           (12, 100, 64, 16, True), (19, 5, 30, 0, True), (12, 24, 9, 8, False)])
def test_packed_data_numerics(pack_always, m, n, k, bn, bias):
    f = _build("llvm", m, n, k, bn, bias)
    assert "packed_data" in f.get_source()
    rng = np.random.default_rng(m * 7 + n)
    a = rng.standard_normal((m, k)).astype("float32")
    w = rng.standard_normal((n, k)).astype("float32")
    b = rng.standard_normal(n).astype("float32")
    out = tvm.nd.empty((m, n), "float32")
    args = [tvm.nd.array(a), tvm.nd.array(dense_pack_weight_python(w, bn) if bn else w)] + ([tvm.nd.array(b)] if bias else [])
    f(*args, out)
    ref = np.maximum(a @ w.T + b, 0) if bias else a @ w.T
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)


def test_fallback_packs_aliased_rows_numerics():
    """The real rule at a shape it picks (rows 4 KiB apart, 1 MiB), M not a multiple of the row block."""
    m, n, k = 259, 40, 1024
    f = _build("llvm", m, n, k, 16)
    assert "packed_data" in f.get_source()
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype("float32")
    w = rng.standard_normal((n, k)).astype("float32")
    b = rng.standard_normal(n).astype("float32")
    out = tvm.nd.empty((m, n), "float32")
    f(tvm.nd.array(a), tvm.nd.array(dense_pack_weight_python(w, 16)), tvm.nd.array(b), out)
    np.testing.assert_allclose(out.numpy(), np.maximum(a @ w.T + b, 0), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_packed_data_codegen(pack_always, isa):
    """Compiled for the named ISA (not run): the accumulators are vector registers and broadcast from the
    packed rows, never from the unpacked operand."""
    bn = 32 if isa == "avx512" else 16
    src = _build(ISA[isa], 30, 2 * bn, 64, bn).get_source()
    assert not re.search(r"float T_dense_pack\w*\[", src)          # no accumulator array in memory
    updates = re.findall(r"(T_dense_pack\w*_r\d+) = \1 \+ \(kiln_broadcast_f32x(\d+)\((\w+)\[", src)
    assert updates and {u[1] for u in updates} == {str(bn // 2)}
    assert {u[2] for u in updates} == {"packed_data"}


def test_knob_in_space_and_symbolic_rows():
    """The tuning space carries the knob for static rows; a VM kernel (symbolic rows) has none and reads the
    data in place."""
    with tvm.target.Target("llvm"):
        task = autotvm.task.create("dense_pack.x86", args=(("TENSOR", (64, 32), "float32"),
                                                           ("TENSOR", (32, 32), "float32"), None, "float32"),
                                   target="llvm")
    assert "pack_data" in task.config_space.space_map
    with tvm.target.Target("llvm"):
        bmm = autotvm.task.create("batch_matmul.x86", args=(("TENSOR", (2, 64, 32), "float32"),
                                                            ("TENSOR", (2, 32, 32), "float32")), target="llvm")
    assert "pack_data" not in bmm.config_space.space_map   # batch_matmul reads its rows in place: no dead knob
    m = te.var("m")
    with tvm.target.Target("llvm"):
        A = te.placeholder((m, 64), name="A")
        W = te.placeholder((4, 64, 16), name="W")
        out = x86.dense_pack(A, W, None, "float32", 64)
        src = tvm.lower(x86.schedule_dense_pack([out]), [A, W, out], simple_mode=True)
    assert "packed_data" not in str(src)
