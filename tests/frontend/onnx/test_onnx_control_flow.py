"""ONNX If / Loop / Scan and import-time sequences (kiln/relay/frontend/onnx_control.py, onnx_sequence.py):
hand-built models run on the Relay VM and compared with ONNX Runtime on random inputs: run-time and
data-dependent trip counts, zero iterations, loop-carried values that grow, nested Loop inside If, bodies reading
outer-scope values, Scan directions and axes."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import kiln  # noqa: E402
from kiln import relay  # noqa: E402
from kiln.error import LoweringError, OpNotImplemented  # noqa: E402
from kiln.relay.expr import If  # noqa: E402
from kiln.runtime.vm import VirtualMachine  # noqa: E402

from onnx_helpers import run_ort  # noqa: E402

RNG = np.random.default_rng(1802)
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _vi(name, ty, shape):
    return helper.make_tensor_value_info(name, ty, shape)


def _model(nodes, inputs, outputs, opset=17, inits=()):
    g = helper.make_graph(nodes, "cf", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = min(m.ir_version, 10)
    onnx.checker.check_model(m)
    return m


def _const(name, value):
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.asarray(value)))


def _run_vm(model, feeds):
    mod, params = relay.frontend.from_onnx(model, shape={k: v.shape for k, v in feeds.items()})
    exe = relay.vm.compile(mod, "llvm", params=params)
    vm = VirtualMachine(exe, kiln.cpu(0))
    res = vm.run(**feeds)
    n_out = len(model.graph.output)
    vals = list(res) if n_out > 1 else [res]
    return [v.numpy() for v in vals], mod


def _check(model, feeds_list, rtol=1e-5, atol=1e-5):
    mod = None
    for feeds in feeds_list:
        feeds = {k: np.asarray(v) for k, v in feeds.items()}
        ref = run_ort(model, feeds)
        outs, mod = _run_vm(model, feeds)
        assert len(outs) == len(ref)
        for o, r in zip(outs, ref):
            assert o.shape == r.shape, (o.shape, r.shape)
            assert o.dtype == r.dtype, (o.dtype, r.dtype)
            np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)
    return mod


def _has_if(expr) -> bool:
    found = []
    from kiln.relay.analysis import post_order_visit
    post_order_visit(expr, lambda e: found.append(isinstance(e, If)))
    return any(found)


# -- If ---------------------------------------------------------------------------------------------------------
def _if_model():
    """y = If(sum(x) > t) then (x * w, a) else (x - h, a + 1), where h = outer Neg(x) and w, a are outer values."""
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["t_y"]), helper.make_node("Identity", ["a"], ["t_a"])],
        "then", [], [_vi("t_y", F, [3, 5]), _vi("t_a", F, [5])])
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["x", "h"], ["e_y"]), _const("one", np.float32(1)),
         helper.make_node("Add", ["a", "one"], ["e_a"])],
        "else", [], [_vi("e_y", F, [3, 5]), _vi("e_a", F, [5])])
    nodes = [helper.make_node("Neg", ["x"], ["h"]),
             helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "t"], ["c"]),
             helper.make_node("If", ["c"], ["y", "z"], then_branch=then_g, else_branch=else_g)]
    w = onnx.numpy_helper.from_array(RNG.standard_normal((3, 5)).astype("float32"), "w")
    return _model(nodes, [_vi("x", F, [3, 5]), _vi("t", F, []), _vi("a", F, [5])],
                  [_vi("y", F, [3, 5]), _vi("z", F, [5])], inits=[w])


def test_if_runtime_condition_with_outer_scope():
    m = _if_model()
    x = RNG.standard_normal((3, 5)).astype("float32")
    a = RNG.standard_normal(5).astype("float32")
    s = float(x.sum())
    mod = _check(m, [{"x": x, "t": np.float32(s - 1), "a": a}, {"x": x, "t": np.float32(s + 1), "a": a}])
    assert _has_if(mod["main"].body)


def test_if_on_graph_executor_points_to_vm():
    mod, params = relay.frontend.from_onnx(_if_model())
    with pytest.raises(LoweringError, match="vm"):
        with kiln.transform.PassContext(opt_level=3):
            relay.build(mod, target="llvm", params=params)


def test_if_constant_condition_folds():
    """A condition computed from constants is decided at import: no If remains, the graph executor runs it."""
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["o"])], "then", [], [_vi("o", F, [4])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["o2"])], "else", [], [_vi("o2", F, [4])])
    nodes = [_const("p", np.float32(2)), _const("q", np.float32(3)), helper.make_node("Less", ["p", "q"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    m = _model(nodes, [_vi("x", F, [4])], [_vi("y", F, [4])])
    mod, _ = relay.frontend.from_onnx(m)
    assert not _has_if(mod["main"].body)
    x = RNG.standard_normal(4).astype("float32")
    from onnx_helpers import run_kiln
    np.testing.assert_allclose(run_kiln(m, {"x": x})[0], run_ort(m, {"x": x})[0])


def test_fold_constant_folds_relay_if():
    x = relay.var("x", shape=(3,))
    body = relay.If(relay.less(relay.const(1.0), relay.const(2.0)), relay.negative(x), x)
    mod = kiln.IRModule.from_expr(relay.Function([x], body))
    mod = relay.transform.FoldConstant()(relay.transform.InferType()(mod))
    assert not _has_if(mod["main"].body)


def test_if_branches_with_different_shapes_refused():
    then_g = helper.make_graph([_const("o", np.zeros(2, "float32"))], "then", [], [_vi("o", F, [2])])
    else_g = helper.make_graph([_const("o2", np.zeros(3, "float32"))], "else", [], [_vi("o2", F, [3])])
    m = _model([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
               [_vi("c", B, [])], [_vi("y", F, [None])])
    with pytest.raises(OpNotImplemented, match="different types"):
        relay.frontend.from_onnx(m)


# -- Loop -------------------------------------------------------------------------------------------------------
def _loop_body_accumulate():
    """state = state * 0.5 + x[i % 4]; cond = sum(state) < limit (outer); scan = state."""
    nodes = [_const("four", np.int64(4)), helper.make_node("Mod", ["i", "four"], ["k"]),
             helper.make_node("Gather", ["x", "k"], ["row"], axis=0),
             _const("half", np.float32(0.5)), helper.make_node("Mul", ["s_in", "half"], ["sh"]),
             helper.make_node("Add", ["sh", "row"], ["s_out"]),
             helper.make_node("ReduceSum", ["s_out"], ["tot"], keepdims=0),
             helper.make_node("Less", ["tot", "limit"], ["c_out"]),
             helper.make_node("Identity", ["s_out"], ["scan"])]
    return helper.make_graph(nodes, "body", [_vi("i", I64, []), _vi("c_in", B, []), _vi("s_in", F, [3])],
                             [_vi("c_out", B, []), _vi("s_out", F, [3]), _vi("scan", F, [3])])


def test_loop_data_dependent_trip_count_and_condition():
    body = _loop_body_accumulate()
    m = _model([helper.make_node("Loop", ["M", "c0", "s0"], ["s", "scan"], body=body)],
               [_vi("M", I64, []), _vi("c0", B, []), _vi("s0", F, [3]), _vi("x", F, [4, 3]), _vi("limit", F, [])],
               [_vi("s", F, [3]), _vi("scan", F, [None, 3])])
    x = RNG.uniform(0, 1, (4, 3)).astype("float32")
    s0 = RNG.standard_normal(3).astype("float32")
    feeds = [{"M": np.int64(m_), "c0": np.array(c0), "s0": s0, "x": x, "limit": np.float32(lim)}
             for m_, c0, lim in [(7, True, 100.0), (0, True, 100.0), (20, True, 3.0), (5, False, 100.0), (1, True, -9)]]
    _check(m, feeds)


def test_loop_without_trip_count_is_a_while():
    body = _loop_body_accumulate()
    m = _model([helper.make_node("Loop", ["", "c0", "s0"], ["s", "scan"], body=body)],
               [_vi("c0", B, []), _vi("s0", F, [3]), _vi("x", F, [4, 3]), _vi("limit", F, [])],
               [_vi("s", F, [3]), _vi("scan", F, [None, 3])])
    x = RNG.uniform(0.5, 1, (4, 3)).astype("float32")  # the sum reaches at least 3: the loop ends
    _check(m, [{"c0": np.array(True), "s0": np.zeros(3, "float32"), "x": x, "limit": np.float32(lim)}
               for lim in (1.0, 2.5)])


def test_loop_without_condition_input_still_reads_body_condition():
    """With the cond input omitted, ONNX Runtime still stops when the body's condition output turns false."""
    body = _loop_body_accumulate()
    m = _model([helper.make_node("Loop", ["M", "", "s0"], ["s", "scan"], body=body)],
               [_vi("M", I64, []), _vi("s0", F, [3]), _vi("x", F, [4, 3]), _vi("limit", F, [])],
               [_vi("s", F, [3]), _vi("scan", F, [None, 3])])
    x = RNG.uniform(0, 1, (4, 3)).astype("float32")
    _check(m, [{"M": np.int64(6), "s0": np.ones(3, "float32"), "x": x, "limit": np.float32(-1)}])


def test_loop_carried_value_grows():
    """y = Concat(y, y[-1:] + x) per iteration: the loop variable's first dim changes (Any)."""
    nodes = [_const("st", np.array([-1], "int64")), _const("en", np.array([2 ** 62], "int64")),
             _const("ax", np.array([0], "int64")),
             helper.make_node("Slice", ["y_in", "st", "en", "ax"], ["last"]),
             helper.make_node("Add", ["last", "x"], ["nxt"]),
             helper.make_node("Concat", ["y_in", "nxt"], ["y_out"], axis=0),
             helper.make_node("Identity", ["c_in"], ["c_out"]),
             helper.make_node("ReduceMax", ["nxt"], ["scan"], keepdims=0)]
    body = helper.make_graph(nodes, "body", [_vi("i", I64, []), _vi("c_in", B, []), _vi("y_in", F, [None, 2])],
                             [_vi("c_out", B, []), _vi("y_out", F, [None, 2]), _vi("scan", F, [])])
    m = _model([helper.make_node("Loop", ["M", "", "y0"], ["y", "mx"], body=body)],
               [_vi("M", I64, []), _vi("y0", F, [1, 2]), _vi("x", F, [1, 2])],
               [_vi("y", F, [None, 2]), _vi("mx", F, [None])])
    y0 = RNG.standard_normal((1, 2)).astype("float32")
    x = RNG.standard_normal((1, 2)).astype("float32")
    _check(m, [{"M": np.int64(n), "y0": y0, "x": x} for n in (5, 0, 1)])


def test_loop_scan_output_with_run_time_shape():
    """The per-iteration output is a dyn.strided_slice of the counter (shape only known at run time)."""
    nodes = [_const("one", np.int64(1)), helper.make_node("Add", ["i", "one"], ["e"]),
             _const("z", np.array([0], "int64")), _const("ax", np.array([0], "int64")),
             helper.make_node("Unsqueeze", ["e", "ax"], ["e1"]),
             helper.make_node("Slice", ["x", "z", "e1"], ["part"]),
             helper.make_node("ReduceSum", ["part"], ["ps"], keepdims=1),
             helper.make_node("Add", ["acc_in", "ps"], ["acc_out"]),
             helper.make_node("Identity", ["c_in"], ["c_out"]),
             helper.make_node("Identity", ["ps"], ["scan"])]
    body = helper.make_graph(nodes, "body", [_vi("i", I64, []), _vi("c_in", B, []), _vi("acc_in", F, [1])],
                             [_vi("c_out", B, []), _vi("acc_out", F, [1]), _vi("scan", F, [1])])
    m = _model([helper.make_node("Loop", ["M", "c", "a0"], ["acc", "sc"], body=body)],
               [_vi("M", I64, []), _vi("c", B, []), _vi("a0", F, [1]), _vi("x", F, [7])],
               [_vi("acc", F, [1]), _vi("sc", F, [None, 1])])
    x = RNG.standard_normal(7).astype("float32")
    _check(m, [{"M": np.int64(n), "c": np.array(True), "a0": np.zeros(1, "float32"), "x": x} for n in (5, 7)])


def test_nested_loop_inside_if_reads_outer_scope():
    """If(c) then Loop(M) { s += w * i } (w from the main graph, computed by a node) else -w."""
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F), helper.make_node("Mul", ["w", "fi"], ["wi"]),
         helper.make_node("Add", ["s_in", "wi"], ["s_out"]), helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [_vi("i", I64, []), _vi("c_in", B, []), _vi("s_in", F, [4])],
        [_vi("c_out", B, []), _vi("s_out", F, [4])])
    then_g = helper.make_graph([_const("t", np.array(True)),
                                helper.make_node("Loop", ["M", "t", "s0"], ["ls"], body=body)],
                               "then", [], [_vi("ls", F, [4])])
    else_g = helper.make_graph([helper.make_node("Neg", ["w"], ["nw"])], "else", [], [_vi("nw", F, [4])])
    nodes = [helper.make_node("Exp", ["v"], ["w"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    m = _model(nodes, [_vi("c", B, []), _vi("M", I64, []), _vi("s0", F, [4]), _vi("v", F, [4])],
               [_vi("y", F, [4])])
    v = RNG.standard_normal(4).astype("float32")
    s0 = RNG.standard_normal(4).astype("float32")
    _check(m, [{"c": np.array(c), "M": np.int64(n), "s0": s0, "v": v} for c, n in ((True, 6), (True, 0), (False, 3))])


def test_nested_loops_inner_trip_count_from_outer_counter():
    inner = helper.make_graph(
        [helper.make_node("Add", ["t_in", "one_f"], ["t_out"]), helper.make_node("Identity", ["c_in"], ["c_out"])],
        "inner", [_vi("j", I64, []), _vi("c_in", B, []), _vi("t_in", F, [])], [_vi("c_out", B, []), _vi("t_out", F, [])])
    outer = helper.make_graph(
        [helper.make_node("Loop", ["i", "", "s_in"], ["s_out"], body=inner),
         helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Identity", ["s_out"], ["scan"])],
        "outer", [_vi("i", I64, []), _vi("c_in", B, []), _vi("s_in", F, [])],
        [_vi("c_out", B, []), _vi("s_out", F, []), _vi("scan", F, [])])
    m = _model([_const("one_f", np.float32(1)), helper.make_node("Loop", ["M", "c", "s0"], ["s", "sc"], body=outer)],
               [_vi("M", I64, []), _vi("c", B, []), _vi("s0", F, [])], [_vi("s", F, []), _vi("sc", F, [None])])
    _check(m, [{"M": np.int64(n), "c": np.array(True), "s0": np.float32(0.5)} for n in (5, 1)])


# -- Scan -------------------------------------------------------------------------------------------------------
def test_scan_axes_and_directions():
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "a"], ["s_out"]), helper.make_node("Mul", ["s_out", "b"], ["o1"]),
         helper.make_node("Sub", ["a", "b"], ["o2"])],
        "body", [_vi("s_in", F, [3]), _vi("a", F, [3]), _vi("b", F, [3])],
        [_vi("s_out", F, [3]), _vi("o1", F, [3]), _vi("o2", F, [3])])
    node = helper.make_node("Scan", ["s0", "xa", "xb"], ["s", "y1", "y2"], body=body, num_scan_inputs=2,
                            scan_input_axes=[0, 1], scan_input_directions=[1, 0],
                            scan_output_axes=[1, -2], scan_output_directions=[0, 1])
    m = _model([node], [_vi("s0", F, [3]), _vi("xa", F, [5, 3]), _vi("xb", F, [3, 5])],
               [_vi("s", F, [3]), _vi("y1", F, [3, 5]), _vi("y2", F, [5, 3])], opset=16)
    _check(m, [{"s0": RNG.standard_normal(3).astype("float32"), "xa": RNG.standard_normal((5, 3)).astype("float32"),
                "xb": RNG.standard_normal((3, 5)).astype("float32")}])


# -- sequences --------------------------------------------------------------------------------------------------
def test_sequence_ops_pipeline():
    nodes = [helper.make_node("SplitToSequence", ["x"], ["seq"], axis=1),
             _const("p0", np.int64(0)), _const("pm", np.int64(-1)),
             helper.make_node("SequenceAt", ["seq", "pm"], ["last"]),
             helper.make_node("Relu", ["last"], ["r"]),
             helper.make_node("SequenceInsert", ["seq", "r", "p0"], ["seq2"]),
             helper.make_node("SequenceErase", ["seq2"], ["seq3"]),
             helper.make_node("SequenceLength", ["seq3"], ["n"]),
             helper.make_node("ConcatFromSequence", ["seq3"], ["cat"], axis=1),
             helper.make_node("ConcatFromSequence", ["seq3"], ["stk"], axis=-1, new_axis=1)]
    m = _model(nodes, [_vi("x", F, [2, 5])], [_vi("n", I64, []), _vi("cat", F, [2, 5]), _vi("stk", F, [2, 1, 5])])
    _check(m, [{"x": RNG.standard_normal((2, 5)).astype("float32")}])


def test_sequence_output_from_backend():
    from kiln.contrib.onnx_backend import KilnBackendRep
    m = _model([helper.make_node("SplitToSequence", ["x", "sp"], ["seq"], axis=0)],
               [_vi("x", F, [7, 2])], [helper.make_tensor_sequence_value_info("seq", F, None)],
               inits=[onnx.numpy_helper.from_array(np.array([3, 4], "int64"), "sp")])
    x = RNG.standard_normal((7, 2)).astype("float32")
    out = KilnBackendRep(m).run([x])
    assert len(out) == 1 and len(out[0]) == 2
    np.testing.assert_array_equal(out[0][0], x[:3])
    np.testing.assert_array_equal(out[0][1], x[3:])


def test_loop_reads_initializer_kept_as_parameter():
    """freeze_params=False: the body reads an initializer that stays a parameter of @main."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["s_in", "w"], ["s_out"]), helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [_vi("i", I64, []), _vi("c_in", B, []), _vi("s_in", F, [4])],
        [_vi("c_out", B, []), _vi("s_out", F, [4])])
    w = RNG.uniform(0.5, 1.5, 4).astype("float32")
    m = _model([helper.make_node("Loop", ["M", "", "s0"], ["s"], body=body)],
               [_vi("M", I64, []), _vi("s0", F, [4])], [_vi("s", F, [4])],
               inits=[onnx.numpy_helper.from_array(w, "w")])
    mod, params = relay.frontend.from_onnx(m, freeze_params=False)
    assert "w" in params
    exe = relay.vm.compile(mod, "llvm", params=params)
    s0 = RNG.standard_normal(4).astype("float32")
    out = VirtualMachine(exe, kiln.cpu(0)).run(M=np.array(3, "int64"), s0=s0).numpy()
    np.testing.assert_allclose(out, run_ort(m, {"M": np.array(3, "int64"), "s0": s0})[0], rtol=1e-5)


def test_loop_dtype_change_refused():
    body = helper.make_graph(
        [helper.make_node("Cast", ["s_in"], ["s_out"], to=TensorProto.DOUBLE),
         helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [_vi("i", I64, []), _vi("c_in", B, []), _vi("s_in", F, [2])],
        [_vi("c_out", B, []), _vi("s_out", TensorProto.DOUBLE, [2])])
    m = helper.make_model(helper.make_graph([helper.make_node("Loop", ["M", "", "s0"], ["s"], body=body)], "g",
                                            [_vi("M", I64, []), _vi("s0", F, [2])], [_vi("s", F, [2])]),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    from kiln.error import FrontendError
    with pytest.raises(FrontendError, match="loop-carried value 's_in'"):
        relay.frontend.from_onnx(m)


def test_unsupported_op_inside_subgraph_listed_up_front():
    then_g = helper.make_graph([helper.make_node("GridSample", ["x", "x"], ["o"])], "then", [], [_vi("o", F, [1])])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["o2"])], "else", [], [_vi("o2", F, [1])])
    m = _model([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
               [_vi("c", B, []), _vi("x", F, [1])], [_vi("y", F, [1])])
    with pytest.raises(OpNotImplemented, match="GridSample"):
        relay.frontend.from_onnx(m)


def test_scan_opset8_batch_and_reverse():
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "a"], ["s_out"]), helper.make_node("Mul", ["s_out", "a"], ["o"])],
        "body", [_vi("s_in", F, [3]), _vi("a", F, [3])], [_vi("s_out", F, [3]), _vi("o", F, [3])])
    node = helper.make_node("Scan", ["", "s0", "x"], ["s", "y"], body=body, num_scan_inputs=1, directions=[1])
    m = _model([node], [_vi("s0", F, [2, 3]), _vi("x", F, [2, 4, 3])], [_vi("s", F, [2, 3]), _vi("y", F, [2, 4, 3])],
               opset=8)
    _check(m, [{"s0": RNG.standard_normal((2, 3)).astype("float32"),
                "x": RNG.standard_normal((2, 4, 3)).astype("float32")}])
