"""ONNX models whose shape operands are run-time values: dyn.* ops on the VM, against ONNX Runtime."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP, helper  # noqa: E402

import kiln as tvm  # noqa: E402
from kiln import relay  # noqa: E402
from kiln.error import OpNotImplemented  # noqa: E402
from kiln.runtime import vm as rvm  # noqa: E402

rng = np.random.default_rng(3)


def _model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, ["d%d" % k for k in range(r)])
                           for n, t, r in outputs], initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _check(m, feeds, rtol=1e-6):
    mod, params = relay.frontend.from_onnx(m)
    vm = rvm.VirtualMachine(relay.vm.compile(mod, "llvm", params=params), tvm.cpu())
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for feed in feeds:
        ref = sess.run(None, feed)
        out = vm.run(**feed)
        out = list(out) if isinstance(out, (tuple, list)) else [out]
        assert len(out) == len(ref)
        for o, r in zip(out, ref):
            np.testing.assert_allclose(o.numpy(), r, rtol=rtol, atol=1e-6)
    return mod


def test_reshape_slice_topk_constantofshape():
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]),
             helper.make_node("Shape", ["x"], ["xs"]),
             helper.make_node("ConstantOfShape", ["xs"], ["c"], value=helper.make_tensor("v", TP.FLOAT, [1], [2.0])),
             helper.make_node("Add", ["x", "c"], ["xc"]),
             helper.make_node("Slice", ["xc", "st", "en", "ax", "sp"], ["sl"]),
             helper.make_node("TopK", ["x", "k"], ["tv", "ti"], axis=1)]
    m = _model(nodes, [("x", TP.FLOAT, ["n", 6]), ("s", TP.INT64, [2]), ("st", TP.INT64, [1]),
                       ("en", TP.INT64, [1]), ("sp", TP.INT64, [1]), ("k", TP.INT64, [1])],
               [("r", TP.FLOAT, 2), ("sl", TP.FLOAT, 2), ("tv", TP.FLOAT, 2), ("ti", TP.INT64, 2)],
               [helper.make_tensor("ax", TP.INT64, [1], [1])])
    feeds = [dict(x=rng.standard_normal((n, 6)).astype("float32"), s=np.array(s), st=np.array(st),
                  en=np.array(en), sp=np.array(sp), k=np.array(k))
             for n, s, st, en, sp, k in ((4, [3, -1], [1], [5], [1], [2]), (3, [-1, 2], [-4], [100], [2], [6]),
                                         (5, [0, 6], [5], [-100], [-2], [1]))]
    mod = _check(m, feeds)
    assert "dyn.reshape" in mod["main"].astext() and "dyn.strided_slice" in mod["main"].astext()


def test_expand_tile_resize():
    nodes = [helper.make_node("Expand", ["x", "shape"], ["e"]),
             helper.make_node("Tile", ["x", "reps"], ["t"]),
             helper.make_node("Resize", ["img", "", "", "sizes"], ["rs"], mode="linear")]
    m = _model(nodes, [("x", TP.FLOAT, [3, 1]), ("shape", TP.INT64, [3]), ("reps", TP.INT64, [2]),
                       ("img", TP.FLOAT, [1, 2, 4, 5]), ("sizes", TP.INT64, [4])],
               [("e", TP.FLOAT, 3), ("t", TP.FLOAT, 2), ("rs", TP.FLOAT, 4)])
    x = rng.standard_normal((3, 1)).astype("float32")
    img = rng.standard_normal((1, 2, 4, 5)).astype("float32")
    feeds = [dict(x=x, shape=np.array(s), reps=np.array(r), img=img, sizes=np.array(z))
             for s, r, z in (([2, 3, 4], [1, 2], [1, 2, 8, 10]), ([1, 1, 1], [3, 1], [1, 2, 3, 7]))]
    _check(m, feeds, rtol=1e-5)


def test_shape_of_dynamic_batch_flatten():
    """The exporter's Shape -> Gather -> Unsqueeze -> Concat -> Reshape on a dynamic batch."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    inits = [helper.make_tensor("zero", TP.INT64, [], [0]), helper.make_tensor("axes", TP.INT64, [1], [0]),
             helper.make_tensor("minus1", TP.INT64, [1], [-1])]
    m = _model(nodes, [("x", TP.FLOAT, ["batch", 3, 4])], [("y", TP.FLOAT, 2)], inits)
    _check(m, [dict(x=rng.standard_normal((b, 3, 4)).astype("float32")) for b in (1, 5, 2)])


def test_use_dyn_ops_off_keeps_the_static_error():
    m = _model([helper.make_node("Reshape", ["x", "s"], ["r"])], [("x", TP.FLOAT, [2, 6]), ("s", TP.INT64, [2])],
               [("r", TP.FLOAT, 2)])
    with pytest.raises(OpNotImplemented, match="run time"):
        relay.frontend.from_onnx(m, convert_config={"use_dyn_ops": False})


def test_backend_unspecialized_runs_on_vm():
    from kiln.contrib.onnx_backend import KilnBackend
    m = _model([helper.make_node("Reshape", ["x", "s"], ["r"])], [("x", TP.FLOAT, [2, 6]), ("s", TP.INT64, [2])],
               [("r", TP.FLOAT, 2)])
    x = rng.standard_normal((2, 6)).astype("float32")
    rep = KilnBackend.prepare(m, "CPU", specialize=False)
    for s in ([3, 4], [-1, 2], [12, 1]):
        (out,) = rep.run([x, np.array(s, "int64")])
        np.testing.assert_array_equal(out, x.reshape(s))
    assert [r[0] for r in rep._compiled.values()] == ["vm"]  # one VM build serves every target shape
    spec = KilnBackend.prepare(m, "CPU")  # the default binds the target and builds per value
    (out,) = spec.run([x, np.array([4, 3], "int64")])
    np.testing.assert_array_equal(out, x.reshape(4, 3))
