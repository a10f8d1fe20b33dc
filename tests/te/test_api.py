"""TE objects: tensors, operations, axes and their TVM-compatible attributes."""
from kiln import te, tir


def test_tensor_basics():
    n = te.var("n")
    A = te.placeholder((n, 4), name="A")
    assert A.ndim == 2 and A.dtype == "float32" and A.shape[0] is n and int(A.shape[1]) == 4
    assert isinstance(A.op, te.PlaceholderOp) and A.value_index == 0 and A.name == "A"
    load = A[1, 2]
    assert isinstance(load, tir.ProducerLoad) and load.producer == A
    assert isinstance(A[1], te.TensorSlice)
    assert isinstance(A[1][2], tir.ProducerLoad)
    assert A == A.op.output(0) and hash(A) == hash(A.op.output(0))
    assert A != te.placeholder((n, 4), name="A")


def test_compute_op_fields():
    A = te.placeholder((3, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")
    B = te.compute((3,), lambda i: te.sum(A[i, k], axis=k), name="B", tag="reduce", attrs={"x": 1})
    op = B.op
    assert isinstance(op, te.ComputeOp)
    assert [iv.var.name for iv in op.axis] == ["i"] and op.reduce_axis == [k]
    assert op.tag == "reduce" and op.attrs["x"] == 1 and op.num_outputs == 1
    assert op.input_tensors == [A]
    assert isinstance(op.body[0], tir.Reduce)
    assert int(k.dom.extent) == 5 and k.iter_type == tir.IterVar.CommReduce


def test_multi_output_and_tag_scope():
    A = te.placeholder((3,), name="A")
    with te.tag_scope("elemwise"):
        X, Y = te.compute((3,), lambda i: (A[i] + 1.0, A[i] * 2.0), name="XY")
    assert X.op is Y.op and X.value_index == 0 and Y.value_index == 1
    assert X.op.num_outputs == 2 and X.name == "XY.v0" and X.op.tag == "elemwise"


def test_thread_axis_and_reexports():
    tx = te.thread_axis("threadIdx.x")
    assert tx.thread_tag == "threadIdx.x" and tx.iter_type == tir.IterVar.ThreadIndex
    bx = te.thread_axis((0, 8), "blockIdx.x")
    assert int(bx.dom.extent) == 8
    for name in ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "floor", "ceil", "round", "isnan",
                 "floordiv", "floormod", "indexdiv", "truncmod", "all", "any", "comm_reducer", "if_then_else"):
        assert callable(getattr(te, name)), name
