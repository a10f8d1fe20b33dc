"""Memory a kernel must not write: read-only buffers (np.frombuffer of bytes, read-only memmaps, DLPack
tensors flagged read-only) are refused as outputs everywhere kiln writes, and an output that aliases another
buffer argument is refused (kernels are C restrict: the result would be silently wrong)."""
import numpy as np
import pytest

import kiln
from kiln import relay, te
from kiln.contrib import graph_executor
from kiln.error import ArgumentError, KilnError

N = 23


@pytest.fixture(scope="module")
def add_one():
    A = te.placeholder((N,), name="A")
    B = te.compute((N,), lambda i: A[i] + 1.0, name="B")
    return kiln.build(te.create_schedule(B.op), [A, B], "llvm")


@pytest.fixture(scope="module")
def reverse_sym():
    """A kernel with a symbolic extent whose output element i reads input element n-1-i (aliasing shows)."""
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[n - 1 - i] * 2.0, name="B")
    return kiln.build(te.create_schedule(B.op), [A, B], "llvm")


def _readonly_views():
    raw = bytes(N * 4)
    yield "frombuffer", np.frombuffer(raw, dtype="float32"), raw
    arr = np.zeros(N, "float32")
    arr.flags.writeable = False
    yield "flag", arr, None


def test_readonly_output_is_refused(add_one):
    for how, view, raw in _readonly_views():
        out = kiln.nd.from_dlpack(view)
        assert not out.is_writable
        with pytest.raises(ArgumentError, match="read-only"):
            add_one(kiln.nd.array(np.ones(N, "float32")), out)
        if raw is not None:
            assert raw == bytes(N * 4), how  # the immutable bytes object is untouched


def test_readonly_memmap_output_is_refused(add_one, tmp_path):
    path = tmp_path / "x.bin"
    np.zeros(N, "float32").tofile(path)
    mm = np.memmap(path, dtype="float32", mode="r", shape=(N,))
    with pytest.raises(ArgumentError, match="read-only"):
        add_one(kiln.nd.array(np.ones(N, "float32")), kiln.nd.from_dlpack(mm))
    assert np.fromfile(path, dtype="float32").sum() == 0


def test_readonly_input_is_fine(add_one):
    raw = np.arange(N, dtype="float32").tobytes()
    a = kiln.nd.from_dlpack(np.frombuffer(raw, dtype="float32"))
    b = kiln.nd.empty((N,), "float32")
    add_one(a, b)
    np.testing.assert_array_equal(b.numpy(), np.arange(N, dtype="float32") + 1)


def test_copies_into_readonly_arrays_are_refused():
    raw = bytes(16)
    ro = kiln.nd.from_dlpack(np.frombuffer(raw, dtype="float32"))
    with pytest.raises(KilnError, match="read-only"):
        ro.copyfrom(np.ones(4, "float32"))
    with pytest.raises(KilnError, match="read-only"):
        ro[:] = 3.0
    with pytest.raises(KilnError, match="read-only"):
        kiln.nd.array(np.ones(4, "float32")).copyto(ro)
    assert raw == bytes(16)


def test_graph_get_output_into_readonly_is_refused():
    x = relay.var("x", shape=(4,), dtype="float32")
    lib = relay.build(kiln.IRModule.from_expr(relay.Function([x], relay.nn.relu(x))), target="llvm")
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input("x", np.ones(4, "float32"))
    m.run()
    raw = bytes(16)
    with pytest.raises(ArgumentError, match="read-only"):
        m.get_output(0, kiln.nd.from_dlpack(np.frombuffer(raw, dtype="float32")))
    with pytest.raises(ArgumentError, match="must be a kiln NDArray"):
        m.get_output(0, np.empty(4, "float32"))
    assert raw == bytes(16)
    out = kiln.nd.empty((4,), "float32")
    assert m.get_output(0, out) is out and out.numpy().tolist() == [1, 1, 1, 1]


def test_same_array_as_input_and_output_is_refused(add_one, reverse_sym):
    a = kiln.nd.array(np.arange(N, dtype="float32"))
    with pytest.raises(ArgumentError, match="same array as argument 0"):
        add_one(a, a)
    with pytest.raises(ArgumentError, match="same array as argument 0"):
        reverse_sym(a, a)
    np.testing.assert_array_equal(a.numpy(), np.arange(N, dtype="float32"))  # untouched


def test_overlapping_views_are_refused(reverse_sym):
    base = np.arange(2 * N, dtype="float32")
    a = kiln.nd.from_dlpack(base[:N])
    b = kiln.nd.from_dlpack(base[N // 2:N // 2 + N])
    with pytest.raises(ArgumentError, match="overlaps the memory of argument 0"):
        reverse_sym(a, b)
    c = kiln.nd.from_dlpack(base[N:])  # adjacent, not overlapping
    reverse_sym(a, c)
    np.testing.assert_array_equal(base[N:], np.arange(N, dtype="float32")[::-1] * 2)


def test_two_inputs_may_share_memory():
    A = te.placeholder((N,), name="A")
    B = te.placeholder((N,), name="B")
    C = te.compute((N,), lambda i: A[i] * B[i], name="C")
    f = kiln.build(te.create_schedule(C.op), [A, B, C], "llvm")
    a = kiln.nd.array(np.arange(N, dtype="float32"))
    c = kiln.nd.empty((N,), "float32")
    f(a, a, c)
    np.testing.assert_array_equal(c.numpy(), np.arange(N, dtype="float32") ** 2)
