"""relay.adt: TypeData, constructors and Match through type inference, the printer, the VM and the interpreter."""
import subprocess
import sys

import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.error import ModuleLoadError, RelayError, TypeInferenceError
from kiln.ir.type import GlobalTypeVar, TensorType, TypeCall, TypeVar
from kiln.relay.adt import (Clause, Constructor, ConstructorValue, Match, PatternConstructor, PatternTuple,
                            PatternVar, PatternWildcard, TypeData)
from kiln.runtime.vm import ADT, Executable, VirtualMachine

rng = np.random.default_rng(11)
F = TensorType((3, 4), "float32")


def shape_module():
    """type Shape { Circle(r), Rect(w, h), Empty }; @area(s) by match."""
    mod = tvm.IRModule()
    shape = GlobalTypeVar("Shape")
    circle = Constructor("Circle", [F], shape)
    rect = Constructor("Rect", [F, F], shape)
    empty = Constructor("Empty", [], shape)
    mod[shape] = TypeData(shape, [], [circle, rect, empty])
    s, r, w, h = relay.var("s", shape()), relay.var("r"), relay.var("w"), relay.var("h")
    area = relay.GlobalVar("area")
    mod[area] = relay.Function([s], Match(s, [
        Clause(PatternConstructor(circle, [PatternVar(r)]), r * r * relay.const(3.0)),
        Clause(PatternConstructor(rect, [PatternVar(w), PatternVar(h)]), w * h),
        Clause(PatternConstructor(empty), relay.zeros((3, 4), "float32"))]))
    return mod, (shape, circle, rect, empty), area


def test_constructors_and_match_types():
    mod, (shape, circle, rect, empty), area = shape_module()
    assert [c.tag for c in (circle, rect, empty)] == [0, 1, 2]
    assert mod.get_type("Shape") == (shape, circle, rect, empty)
    a, b = relay.var("a", F), relay.var("b", F)
    mod["main"] = relay.Function([a, b], relay.Tuple([area(circle(a)), area(rect(a, b)), area(empty())]))
    mod = relay.transform.InferType()(mod)
    assert mod["area"].checked_type.ret_type == F
    assert isinstance(mod["main"].body.fields[0].args[0].checked_type, TypeCall)
    text = mod.astext()
    assert "type Shape {\n  Circle(Tensor[(3, 4), float32]),\n  Rect(" in text and "  Empty,\n}" in text
    assert "match (%s) {" in text and "Rect(%w, %h) =>" in text and "Empty =>" in text


def test_match_on_vm_and_interpreter_vs_numpy():
    mod, (shape, circle, rect, empty), area = shape_module()
    a, b = relay.var("a", F), relay.var("b", F)
    mod["main"] = relay.Function([a, b], relay.Tuple([area(circle(a)), area(rect(a, b)), area(empty()),
                                                      rect(b, a)]))
    x, y = rng.standard_normal((3, 4)).astype("float32"), rng.standard_normal((3, 4)).astype("float32")
    exe = relay.vm.compile(mod, "llvm")
    vm = VirtualMachine(exe, tvm.cpu())
    res = vm.run(x, y)
    np.testing.assert_allclose(res[0].numpy(), x * x * 3, rtol=1e-6)
    np.testing.assert_allclose(res[1].numpy(), x * y, rtol=1e-6)
    np.testing.assert_array_equal(res[2].numpy(), np.zeros((3, 4), "float32"))
    assert isinstance(res[3], ADT) and res[3].tag == rect.tag
    np.testing.assert_array_equal(res[3][0].numpy(), y)
    # a value built in Python goes in as an ADT with the constructor's tag
    s = relay.var("s", shape())
    mod["main"] = relay.Function([s], area(s))
    vm = VirtualMachine(relay.vm.compile(mod, "llvm"), tvm.cpu())
    np.testing.assert_allclose(vm.run(ADT(rect.tag, [tvm.nd.array(x), tvm.nd.array(y)])).numpy(), x * y, rtol=1e-6)
    np.testing.assert_array_equal(vm.run(ADT(empty.tag)).numpy(), np.zeros((3, 4)))
    # the debug interpreter gives ConstructorValues
    mod["main"] = relay.Function([a, b], relay.Tuple([area(rect(a, b)), rect(b, a)]))
    got = relay.create_executor("debug", mod=mod).evaluate()(x, y)
    np.testing.assert_allclose(got[0].numpy(), x * y, rtol=1e-6)
    assert isinstance(got[1], ConstructorValue) and got[1].constructor is rect
    np.testing.assert_array_equal(got[1].fields[1].numpy(), x)


def test_nested_tuple_and_wildcard_patterns():
    """First matching clause wins; nested constructor patterns, tuple patterns and wildcards."""
    mod = tvm.IRModule()
    opt = GlobalTypeVar("Opt")
    tv = TypeVar("T")
    some, none = Constructor("Some", [tv], opt), Constructor("None", [], opt)
    mod[opt] = TypeData(opt, [tv], [some, none])
    I = TensorType((), "int32")
    p, q = relay.var("p", opt(opt(I))), relay.var("q", opt(I))
    x, y = relay.var("x"), relay.var("y")
    body = Match(relay.Tuple([p, q]), [
        Clause(PatternTuple([PatternConstructor(some, [PatternConstructor(some, [PatternVar(x)])]),
                             PatternConstructor(some, [PatternVar(y)])]), x + y),
        Clause(PatternTuple([PatternConstructor(some, [PatternWildcard()]), PatternWildcard()]), relay.const(-1)),
        Clause(PatternTuple([PatternWildcard(), PatternConstructor(some, [PatternVar(y)])]), y),
        Clause(PatternWildcard(), relay.const(-2))])
    mod["main"] = relay.Function([p, q], body)
    vm = VirtualMachine(relay.vm.compile(mod, "llvm"), tvm.cpu())
    S = lambda v: ADT(some.tag, [v])  # noqa: E731
    N = ADT(none.tag)
    i = lambda v: tvm.nd.array(np.array(v, "int32"))  # noqa: E731
    cases = [((S(S(i(3))), S(i(4))), 7), ((S(S(i(3))), N), -1), ((S(N), S(i(5))), -1), ((N, S(i(5))), 5),
             ((N, N), -2)]
    for (pv, qv), want in cases:
        assert int(vm.run(pv, qv).numpy()) == want


def test_type_errors_are_clear():
    mod, (shape, circle, rect, empty), area = shape_module()
    a = relay.var("a", TensorType((2,), "float32"))
    mod["main"] = relay.Function([a], area(circle(a)))
    with pytest.raises(TypeInferenceError, match="argument 0 of the call"):
        relay.transform.InferType()(mod)
    # a complete match must cover every constructor
    s, r = relay.var("s", shape()), relay.var("r")
    mod2, (shape, circle, rect, empty), _ = shape_module()
    mod2["main"] = relay.Function([s], Match(s, [Clause(PatternConstructor(circle, [PatternVar(r)]), r)]))
    with pytest.raises(TypeInferenceError, match="not exhaustive"):
        relay.transform.InferType()(mod2)
    # match? (complete=False) type-checks, and a miss is a run-time error on the VM
    mod2["main"] = relay.Function([s], Match(s, [Clause(PatternConstructor(circle, [PatternVar(r)]), r)], False))
    vm = VirtualMachine(relay.vm.compile(mod2, "llvm"), tvm.cpu())
    x = rng.standard_normal((3, 4)).astype("float32")
    np.testing.assert_array_equal(vm.run(ADT(circle.tag, [tvm.nd.array(x)])).numpy(), x)
    with pytest.raises(tvm.KilnError, match="no clause matches"):
        vm.run(ADT(empty.tag))
    with pytest.raises(RelayError, match="takes 2 fields"):
        PatternConstructor(rect, [PatternVar(r)])
    other = GlobalTypeVar("Other")
    with pytest.raises(RelayError, match="belongs to Other"):
        TypeData(shape, [], [Constructor("X", [], other)])


def test_structural_equality_up_to_pattern_var_renaming():
    mod, (shape, circle, rect, empty), _ = shape_module()

    def f(name):
        s, r = relay.var("s", shape()), relay.var(name)
        return relay.Function([s], Match(s, [Clause(PatternConstructor(circle, [PatternVar(r)]), r),
                                             Clause(PatternWildcard(), relay.zeros((3, 4), "float32"))]))
    assert tvm.ir.structural_equal(f("r"), f("q"))
    s, r, q = relay.var("s", shape()), relay.var("r"), relay.var("q")
    g = relay.Function([s], Match(s, [Clause(PatternConstructor(circle, [PatternVar(r)]), q),
                                       Clause(PatternWildcard(), relay.zeros((3, 4), "float32"))]))
    assert not tvm.ir.structural_equal(f("r"), g)


def test_adt_executable_save_load(tmp_path):
    mod, (shape, circle, rect, empty), area = shape_module()
    s = relay.var("s", shape())
    a, b = relay.var("a", F), relay.var("b", F)
    mod["main"] = relay.Function([a, b], relay.Tuple([area(rect(a, b)), area(circle(b))]))
    exe = relay.vm.compile(mod, "llvm")
    assert "tag_eq" in exe.bytecode
    code, lib = exe.save()
    lib.export_library(str(tmp_path / "lib.so"))
    (tmp_path / "code.bin").write_bytes(bytes(code))
    x, y = rng.standard_normal((3, 4)).astype("float32"), rng.standard_normal((3, 4)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    script = f"""
import sys, numpy as np
import kiln
from kiln.runtime.vm import Executable, VirtualMachine
exe = Executable.load_exec(open({str(tmp_path / 'code.bin')!r}, 'rb').read(),
                           kiln.runtime.load_module({str(tmp_path / 'lib.so')!r}))
x, y = np.load({str(tmp_path / 'x.npy')!r}), np.load({str(tmp_path / 'y.npy')!r})
out = VirtualMachine(exe, kiln.cpu()).run(x, y)
np.save({str(tmp_path / 'o0.npy')!r}, out[0].numpy()); np.save({str(tmp_path / 'o1.npy')!r}, out[1].numpy())
assert 'kiln.relay' not in sys.modules, 'the VM runtime imported the compiler'
"""
    import os
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=300)
    np.testing.assert_allclose(np.load(tmp_path / "o0.npy"), x * y, rtol=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "o1.npy"), y * y * 3, rtol=1e-6)
    # a tag test on a bad register is rejected at load
    from kiln.runtime.vm import VMFunction
    funcs = []
    for f in exe.functions:
        code_f = [["tag_eq", 9999, i[2], i[3]] if i[0] == "tag_eq" else i for i in f.instructions]
        funcs.append(VMFunction(f.name, f.params, f.num_regs, code_f, f.param_types))
    with pytest.raises(ModuleLoadError, match="register out of range"):
        Executable(funcs, exe.constants, exe.packed_names, lib)


def test_executable_as_one_file(tmp_path):
    """exe.mod.export_library(one .so) -> load_module -> VirtualMachine, in a process without kiln.relay."""
    mod, (shape, circle, rect, empty), area = shape_module()
    a = relay.var("a", TensorType((relay.Any(), 4), "float32"))
    mod["main"] = relay.Function([a], relay.nn.relu(a) * relay.const(2.0))
    exe = relay.vm.compile(mod, "llvm")
    path = tmp_path / "exe.so"
    exe.mod.export_library(str(path))
    x = rng.standard_normal((5, 4)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    script = f"""
import sys, numpy as np
import kiln
from kiln.runtime.vm import VirtualMachine
lib = kiln.runtime.load_module({str(path)!r})
assert lib.type_key == "VMExecutable"
vm = VirtualMachine(lib, kiln.cpu())
x = np.load({str(tmp_path / 'x.npy')!r})
np.save({str(tmp_path / 'o.npy')!r}, vm.run(x).numpy())
np.save({str(tmp_path / 'o2.npy')!r}, vm.run(x[:2]).numpy())
assert 'kiln.relay' not in sys.modules, 'the VM runtime imported the compiler'
"""
    import os
    subprocess.run([sys.executable, "-c", script], check=True, env=dict(os.environ, PYTHONPATH=os.getcwd()),
                   timeout=300)
    np.testing.assert_allclose(np.load(tmp_path / "o.npy"), np.maximum(x, 0) * 2, rtol=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "o2.npy"), np.maximum(x[:2], 0) * 2, rtol=1e-6)
    from kiln.runtime.vm import Executable
    with pytest.raises(tvm.KilnError, match="expected a VMExecutable module"):
        Executable.from_module(exe.lib)
