"""Tutorial flow: "How to Use TVM Pass Instrument" (use_pass_instrument).

PassTimingInstrument inside a PassContext and on the current (default) context through
override_instruments; a custom instrument counting Relay call nodes before/after each pass of a
FoldConstant / ConvertLayout / FoldConstant sequence (results checked numerically against the
unconverted network); the calling order of the hooks; errors raised by hooks (caught as
tvm.TVMError); and should_run skipping a pass.
"""
from collections import defaultdict

import numpy as np
import pytest

import kiln as tvm
import kiln.testing
from kiln import relay
from kiln.ir.instrument import PassTimingInstrument, pass_instrument
from kiln.relay.build_module import bind_params_by_name
from kiln.relay.testing import resnet


@pytest.fixture(scope="module")
def workload():
    return resnet.get_workload(num_layers=18, batch_size=1, image_shape=(3, 32, 32), num_classes=10)


def test_timing_instrument_in_context_and_on_current(workload):
    relay_mod, _ = workload
    timing_inst = PassTimingInstrument()
    with tvm.transform.PassContext(instruments=[timing_inst]):
        relay_mod = relay.transform.InferType()(relay_mod)
        relay_mod = relay.transform.FoldScaleAxis()(relay_mod)
        profiles = timing_inst.render()
    assert "InferType" in profiles and "FoldScaleAxis" in profiles

    cur_pass_ctx = tvm.transform.PassContext.current()
    cur_pass_ctx.override_instruments([timing_inst])
    try:
        relay_mod = relay.transform.InferType()(relay_mod)
        relay_mod = relay.transform.FoldScaleAxis()(relay_mod)
        profiles = timing_inst.render()
    finally:
        cur_pass_ctx.override_instruments([])
    assert "InferType" in profiles and "FoldScaleAxis" in profiles
    assert tvm.transform.PassContext.current() is cur_pass_ctx
    assert cur_pass_ctx.instruments == []


@pass_instrument
class RelayCallNodeDiffer:
    """Records, per pass, how the number of calls of each op changed."""

    def __init__(self):
        self._op_diff = []
        self._op_cnt_before_stack = []

    def enter_pass_ctx(self):
        self._op_diff = []
        self._op_cnt_before_stack = []

    def exit_pass_ctx(self):
        assert len(self._op_cnt_before_stack) == 0, "unbalanced before/after calls"

    def run_before_pass(self, mod, info):
        self._op_cnt_before_stack.append((info.name, self._count_nodes(mod)))

    def run_after_pass(self, mod, info):
        name_before, before = self._op_cnt_before_stack.pop()
        assert name_before == info.name
        after = self._count_nodes(mod)
        diff = {k: after.get(k, 0) - before.get(k, 0) for k in set(after) | set(before)}
        diff = {k: v for k, v in diff.items() if v}
        if diff:
            self._op_diff.append((info.name, diff))

    def get_pass_to_op_diff(self):
        return self._op_diff

    @staticmethod
    def _count_nodes(mod):
        num_of_ops = defaultdict(int)

        def visit(node):
            if isinstance(node, relay.expr.Call):
                num_of_ops[node.op.name] += 1
        relay.analysis.post_order_visit(mod["main"], visit)
        return num_of_ops


def test_call_node_differ_with_convert_layout(workload):
    relay_mod, relay_params = workload
    relay_mod = relay.transform.InferType()(relay_mod)
    relay_mod["main"] = bind_params_by_name(relay_mod["main"], relay_params)
    call_node_inst = RelayCallNodeDiffer()
    pass_seq = tvm.transform.Sequential([
        relay.transform.FoldConstant(),
        relay.transform.ConvertLayout({"nn.conv2d": ["NHWC", "HWIO"]}),
        relay.transform.FoldConstant(),
    ])
    with tvm.transform.PassContext(opt_level=3, instruments=[call_node_inst]):
        new_mod = pass_seq(relay_mod)
    diff = dict((name, d) for name, d in call_node_inst.get_pass_to_op_diff())
    assert diff["ConvertLayout"]["layout_transform"] > 0  # transforms inserted around the NHWC convs
    assert diff["FoldConstant"]["layout_transform"] < 0  # the weight transforms fold away
    assert diff["sequential"]["layout_transform"] >= 2
    text = new_mod.astext(show_meta_data=False)
    assert 'data_layout="NHWC"' in text and 'kernel_layout="HWIO"' in text

    data = np.random.default_rng(0).uniform(-1, 1, (1, 3, 32, 32)).astype("float32")
    dev = tvm.cpu()
    ref = relay.create_executor("debug", mod=relay_mod, device=dev).evaluate()(data).numpy()
    got = relay.create_executor("debug", mod=new_mod, device=dev).evaluate()(data).numpy()
    tvm.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def _recording_instruments(events):
    @pass_instrument
    class PassFine:
        def __init__(self, id):
            self.id = id

        def enter_pass_ctx(self):
            events.append(("enter", self.id))

        def exit_pass_ctx(self):
            events.append(("exit", self.id))

        def should_run(self, mod, info):
            events.append(("should_run", self.id))
            return True

        def run_before_pass(self, mod, info):
            events.append(("before", self.id))

        def run_after_pass(self, mod, info):
            events.append(("after", self.id))

    @pass_instrument
    class PassEnterError(PassFine):
        def enter_pass_ctx(self):
            raise RuntimeError("enter error")

    @pass_instrument
    class PassBeforeError(PassFine):
        def run_before_pass(self, mod, info):
            raise RuntimeError("before error")

    return PassFine, PassEnterError, PassBeforeError


def _tiny_mod():
    x = relay.var("x", shape=(2, 3))
    return tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(x)))


def test_hook_order():
    events = []
    PassFine, _, _ = _recording_instruments(events)
    with tvm.transform.PassContext(instruments=[PassFine("a"), PassFine("b")]):
        relay.transform.InferType()(_tiny_mod())
    assert events == [("enter", "a"), ("enter", "b"), ("should_run", "a"), ("should_run", "b"),
                      ("before", "a"), ("before", "b"), ("after", "a"), ("after", "b"),
                      ("exit", "a"), ("exit", "b")]


def test_errors_in_hooks():
    events = []
    PassFine, PassEnterError, PassBeforeError = _recording_instruments(events)
    # enter_pass_ctx fails: the instruments entered so far are exited, the error propagates
    with pytest.raises(tvm.TVMError, match="enter error"):
        with tvm.transform.PassContext(instruments=[PassFine("0"), PassEnterError("1"), PassFine("2")]):
            relay.transform.InferType()(_tiny_mod())
    assert events == [("enter", "0"), ("exit", "0")]

    # run_before_pass fails: leaving the with block exits every instrument
    events.clear()
    with pytest.raises(tvm.TVMError, match="before error") as err:
        with tvm.transform.PassContext(instruments=[PassFine("0"), PassBeforeError("1"), PassFine("2")]):
            relay.transform.InferType()(_tiny_mod())
    assert isinstance(err.value.__cause__, RuntimeError)
    assert events[-3:] == [("exit", "0"), ("exit", "1"), ("exit", "2")]
    assert ("after", "0") not in events


def test_should_run_skips_a_pass():
    ran = []

    @pass_instrument
    class SkipInferType:
        def should_run(self, mod, info):
            return info.name != "InferType"

    @pass_instrument
    class Record:
        def run_before_pass(self, mod, info):
            ran.append(info.name)

    mod = _tiny_mod()
    with tvm.transform.PassContext(instruments=[SkipInferType(), Record()]):
        out = relay.transform.InferType()(mod)
        relay.transform.FoldConstant()(mod)
    assert out is mod and ran == ["FoldConstant"]
    # a required pass is never skipped
    with tvm.transform.PassContext(instruments=[SkipInferType(), Record()], required_pass=["InferType"]):
        relay.transform.InferType()(mod)
    assert ran[-1] == "InferType"
