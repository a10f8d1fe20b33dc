import pytest

import kiln
from kiln import relay, transform
from kiln.error import KilnError
from kiln.ir import IRModule
from kiln.transform import PassContext, Sequential, module_pass, pass_instrument, PassInstrument


def _mod():
    x = relay.var("x", shape=(2,))
    return IRModule.from_expr(relay.Function([x], x))


def _tagging_pass(tag, opt_level=0, required=None, log=None):
    @module_pass(opt_level=opt_level, name=tag, required=required)
    def run(mod, ctx):
        if log is not None:
            log.append(tag)
        return mod.with_attr(tag, 1)
    return run


def test_module_pass_function_and_info():
    p = _tagging_pass("TagA", opt_level=1)
    assert isinstance(p, transform.ModulePass)
    assert p.info.name == "TagA" and p.info.opt_level == 1
    out = p(_mod())
    assert out.attrs["TagA"] == 1


def test_module_pass_requires_opt_level():
    with pytest.raises(KilnError):
        module_pass(lambda m, c: m)


def test_module_pass_class():
    @module_pass(opt_level=2)
    class AddAttr:
        def __init__(self, value):
            self.value = value

        def transform_module(self, mod, ctx):
            return mod.with_attr("v", self.value)

    p = AddAttr(7)
    assert p.info.name == "AddAttr" and p.value == 7
    assert p(_mod()).attrs["v"] == 7


def test_pass_must_get_and_return_module():
    p = _tagging_pass("T")
    with pytest.raises(KilnError):
        p(relay.var("x"))
    bad = module_pass(lambda m, c: None, opt_level=0, name="Bad")
    with pytest.raises(KilnError):
        bad(_mod())


def test_sequential_opt_levels_required_disabled():
    log = []
    seq = Sequential([_tagging_pass("L0", 0, log=log), _tagging_pass("L2", 2, log=log),
                      _tagging_pass("L3", 3, log=log)])
    with PassContext(opt_level=2):
        mod = seq(_mod())
    assert log == ["L0", "L2"] and "L3" not in mod.attrs
    log.clear()
    with PassContext(opt_level=2, required_pass=["L3"], disabled_pass=["L0"]):
        seq(_mod())
    assert log == ["L2", "L3"]
    log.clear()
    with PassContext(opt_level=3):
        seq(_mod())
    assert log == ["L0", "L2", "L3"]


def test_sequential_runs_required_passes_by_name():
    log = []
    transform.register_pass("TestPrereq", lambda: _tagging_pass("TestPrereq", 0, log=log))
    seq = Sequential([_tagging_pass("Main", 0, required=["TestPrereq"], log=log)])
    mod = seq(_mod())
    assert log == ["TestPrereq", "Main"] and mod.attrs["TestPrereq"] == 1
    bad = Sequential([_tagging_pass("X", 0, required=["NoSuchPass"])])
    with pytest.raises(KilnError) as err:
        bad(_mod())
    assert "NoSuchPass" in str(err.value)


def test_direct_call_ignores_opt_level():
    # as in TVM, calling a pass directly runs it; Sequential applies the opt level
    with PassContext(opt_level=0):
        assert "Hi" in _tagging_pass("Hi", 3)(_mod()).attrs


def test_sequential_rejects_non_passes():
    with pytest.raises(KilnError):
        Sequential([lambda m: m])


def test_context_current_and_nesting():
    assert PassContext.current().opt_level == 2
    with PassContext(opt_level=3) as outer:
        assert PassContext.current() is outer
        with PassContext(opt_level=1) as inner:
            assert PassContext.current() is inner
        assert PassContext.current() is outer
    assert PassContext.current().opt_level == 2


def test_config_validation():
    with PassContext(config={"relay.FuseOps.max_depth": 10, "tir.disable_vectorize": True}) as ctx:
        assert ctx.config["relay.FuseOps.max_depth"] == 10
    with pytest.raises(transform.PassConfigError) as err:
        PassContext(config={"relay.FuseOps.max_dept": 10})
    msg = str(err.value)
    assert "relay.FuseOps.max_dept" in msg and "relay.FuseOps.max_depth" in msg
    with pytest.raises(transform.PassConfigError):
        PassContext(config={"relay.FuseOps.max_depth": "deep"})
    transform.register_pass_config("test.my_option", int, 3)
    assert PassContext(config={"test.my_option": 4}).config["test.my_option"] == 4
    assert "test.my_option" in PassContext.list_configs()


def test_instruments_call_order():
    events = []

    @pass_instrument
    class Recorder:
        def __init__(self, name, skip=()):
            self.name_, self.skip = name, skip

        def enter_pass_ctx(self):
            events.append((self.name_, "enter"))

        def exit_pass_ctx(self):
            events.append((self.name_, "exit"))

        def should_run(self, mod, info):
            events.append((self.name_, "should_run", info.name))
            return info.name not in self.skip

        def run_before_pass(self, mod, info):
            events.append((self.name_, "before", info.name))

        def run_after_pass(self, mod, info):
            events.append((self.name_, "after", info.name))

    assert issubclass(Recorder, PassInstrument)
    a, b = Recorder("a"), Recorder("b", skip=("P2",))
    with PassContext(instruments=[a, b]):
        mod = _tagging_pass("P1")(_mod())
        mod = _tagging_pass("P2")(mod)
    assert "P1" in mod.attrs and "P2" not in mod.attrs
    assert events == [
        ("a", "enter"), ("b", "enter"),
        ("a", "should_run", "P1"), ("b", "should_run", "P1"), ("a", "before", "P1"), ("b", "before", "P1"),
        ("a", "after", "P1"), ("b", "after", "P1"),
        ("a", "should_run", "P2"), ("b", "should_run", "P2"),
        ("a", "exit"), ("b", "exit"),
    ]
    events.clear()
    with PassContext(instruments=[b], required_pass=["P2"]):
        mod = _tagging_pass("P2")(_mod())
    assert "P2" in mod.attrs  # required passes skip should_run


def test_instrument_enter_failure_exits_entered():
    events = []

    @pass_instrument
    class Ok:
        def enter_pass_ctx(self):
            events.append("ok enter")

        def exit_pass_ctx(self):
            events.append("ok exit")

    @pass_instrument
    class Broken:
        def enter_pass_ctx(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        with PassContext(instruments=[Ok(), Broken()]):
            pass
    assert events == ["ok enter", "ok exit"]
    assert PassContext.current().opt_level == 2


def test_instruments_must_be_instruments():
    with pytest.raises(KilnError):
        PassContext(instruments=[object()])


def test_timing_instrument_and_print_ir(capsys):
    timing = transform.PassTimingInstrument()
    with PassContext(instruments=[timing]):
        Sequential([_tagging_pass("A"), transform.PrintIR("hdr")])(_mod())
        report = transform.PassTimingInstrument.render()
    assert "A:" in report and "PrintIR" in report
    out = capsys.readouterr().out
    assert "PrintIR(hdr)" in out and "def @main" in out


def test_function_pass_on_relay_only():
    from kiln.tir import PrimFunc, Evaluate, IntImm

    seen = []

    @relay.transform.function_pass(opt_level=0)
    def rename(func, mod, ctx):
        seen.append(func)
        return func.with_attr("visited", 1)

    prim = PrimFunc([], Evaluate(IntImm("int32", 0)))
    mod = _mod()
    mod["prim"] = prim
    out = rename(mod)
    assert len(seen) == 1 and out["main"].attrs["visited"] == 1
    assert out["prim"] is prim

    @relay.transform.function_pass(opt_level=1, name="ClassFP")
    class Ident:
        def transform_function(self, func, mod, ctx):
            return func

    assert Ident()(mod)["main"] is mod["main"]
