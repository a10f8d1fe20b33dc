"""relay.prelude.Prelude on the VM (and the debug interpreter) against Python lists and numpy."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.ir.type import FuncType, TensorType
from kiln.relay.adt import ConstructorValue
from kiln.relay.prelude import GLOBAL_DEFS, Prelude
from kiln.runtime import ndarray as nd
from kiln.runtime.vm import ADT, VirtualMachine
from relay_exec_util import vm_of

rng = np.random.default_rng(18)
F5 = TensorType((5,), "float32")
I32 = TensorType((), "int32")


def to_list(p, values):
    """A Python list of arrays as a VM List value."""
    out = ADT(p.nil.tag)
    for v in reversed(values):
        out = ADT(p.cons.tag, [nd.array(np.asarray(v)), out])
    return out


def from_value(p, v, raw=False):
    """A VM or interpreter List value back to a Python list (elements: numpy arrays or tuples of them)."""
    out = []
    while True:
        tag = v.tag
        fields = list(v.fields) if isinstance(v, ConstructorValue) else list(v)
        if tag == p.nil.tag:
            return out
        out.append(fields[0] if raw else _leaf(fields[0]))
        v = fields[1]


def _leaf(x):
    if isinstance(x, (tuple, ADT)):
        return tuple(_leaf(y) for y in x)
    return x.numpy()


def test_prelude_defines_tvm_names():
    p = Prelude()
    for name in GLOBAL_DEFS:
        assert getattr(p, name) is p.mod.get_global_var(name)
    lst, cons, nil = p.mod.get_type("List")
    assert (lst, cons, nil) == (p.list, p.cons, p.nil) and (cons.tag, nil.tag) == (0, 1)
    assert [c.name_hint for c in p.mod.get_type("Option")[1:]] == ["Some", "None"]
    assert [c.name_hint for c in p.mod.get_type("nat")[1:]] == ["z", "s"]
    assert p.get_name("tensor_t", "float32") == "tensor_float32_t" and p.get_name("map", "int32") == "map_int32"
    # a second Prelude on the same module reuses the definitions
    q = Prelude(p.mod)
    assert q.cons is p.cons and q.map is p.map
    mod = relay.transform.InferType()(p.mod)
    mty = mod.get_global_var("map").checked_type
    assert isinstance(mty, FuncType) and len(mty.type_params) == 2 and len(mty.arg_types) == 2
    text = mod.astext()
    assert "type List[A] {" in text and "Cons(A, List[A])," in text and "match (%xs)" in text
    assert "match? (%xs)" in text  # hd/tl are partial


def test_list_functions_vs_python():
    p = Prelude()
    xs = relay.var("xs", p.list(F5))
    ys = relay.var("ys", p.list(F5))
    n = relay.var("n", I32)
    v = relay.var("v", F5)
    a, b = relay.var("a", F5), relay.var("b", F5)
    double = relay.Function([a], a * relay.const(2.0))
    sub = relay.Function([a, b], a - b)
    maxf = relay.Function([a, b], relay.maximum(a, b))
    pos = relay.Function([a], relay.greater(relay.sum(a), relay.const(0.0)))
    out = relay.Tuple([p.map(double, xs), p.foldl(sub, v, xs), p.foldr(sub, v, xs), p.hd(xs), p.tl(xs),
                       p.nth(xs, n), p.length(xs), p.update(xs, n, v), p.concat(xs, ys), p.rev(xs),
                       p.filter(pos, xs), p.zip(xs, ys), p.foldr1(maxf, xs)])
    p.mod["main"] = relay.Function([xs, ys, n, v], out)
    vals = [rng.standard_normal(5).astype("float32") for _ in range(4)]
    others = [rng.standard_normal(5).astype("float32") for _ in range(3)]
    vv = rng.standard_normal(5).astype("float32")
    res = vm_of(p.mod).run(to_list(p, vals), to_list(p, others), np.array(2, "int32"), vv)
    L = lambda r: from_value(p, r)  # noqa: E731
    np.testing.assert_allclose(L(res[0]), [x * 2 for x in vals], rtol=1e-6)
    acc = vv
    for x in vals:
        acc = acc - x
    np.testing.assert_allclose(res[1].numpy(), acc, rtol=1e-5)
    acc = vv
    for x in reversed(vals):
        acc = x - acc
    np.testing.assert_allclose(res[2].numpy(), acc, rtol=1e-5)
    np.testing.assert_array_equal(res[3].numpy(), vals[0])
    np.testing.assert_array_equal(L(res[4]), vals[1:])
    np.testing.assert_array_equal(res[5].numpy(), vals[2])
    assert int(res[6].numpy()) == 4
    np.testing.assert_array_equal(L(res[7]), vals[:2] + [vv] + vals[3:])
    np.testing.assert_array_equal(L(res[8]), vals + others)
    np.testing.assert_array_equal(L(res[9]), vals[::-1])
    kept = [x for x in vals if x.sum() > 0]
    got = L(res[10])
    assert len(got) == len(kept) and all(np.array_equal(g, k) for g, k in zip(got, kept))
    zipped = L(res[11])
    assert len(zipped) == 3 and all(np.array_equal(g[0], x) and np.array_equal(g[1], y)
                                    for g, x, y in zip(zipped, vals, others))
    np.testing.assert_array_equal(res[12].numpy(), np.max(vals, axis=0))


def test_empty_list_and_partial_functions():
    p = Prelude()
    xs = relay.var("xs", p.list(F5))
    p.mod["main"] = relay.Function([xs], relay.Tuple([p.length(xs), p.rev(xs), p.hd(xs)]))
    exe = relay.vm.compile(p.mod, "llvm")
    vm = VirtualMachine(exe, tvm.cpu())
    with pytest.raises(tvm.KilnError, match="no clause matches"):
        vm.run(to_list(p, []))  # hd of the empty list
    p.mod["main"] = relay.Function([xs], relay.Tuple([p.length(xs), p.rev(xs)]))
    res = vm_of(p.mod).run(to_list(p, []))
    assert int(res[0].numpy()) == 0 and from_value(p, res[1]) == []


def test_sum_map_accum_unfold_iterate():
    p = Prelude()
    some, none = p.mod.get_type("Option")[1:]
    ints = relay.var("ints", p.list(I32))
    # map_accuml/r with f(acc, x) = (acc + x, acc * x)
    acc, x = relay.var("acc", I32), relay.var("x", I32)
    f = relay.Function([acc, x], relay.Tuple([acc + x, acc * x]))
    # unfoldr from seed s: Some((s - 1, s * s)) while s > 0
    s = relay.var("s", I32)
    step = relay.Function([s], relay.If(relay.greater(s, relay.const(0)),
                                        some(relay.Tuple([s - relay.const(1), s * s])), none()))
    inc = relay.Function([x], x + relay.const(3))
    k = relay.var("k", I32)
    out = relay.Tuple([p.sum(ints), p.map_accuml(f, relay.const(1), ints), p.map_accumr(f, relay.const(1), ints),
                       p.unfoldr(step, k), p.unfoldl(step, k), p.iterate(inc, k)(relay.const(10))])
    p.mod["main"] = relay.Function([ints, k], out)
    vals = [int(v) for v in rng.integers(-9, 9, size=5)]
    res = vm_of(p.mod).run(to_list(p, [np.array(v, "int32") for v in vals]), np.array(4, "int32"))
    assert int(res[0].numpy()) == sum(vals)

    def accum(seq):
        a, outs = 1, []
        for v in seq:
            a, o = a + v, a * v
            outs.append(o)
        return a, outs
    a, outs = accum(vals)
    # as in TVM's prelude.rly, map_accuml conses each output onto the front (the list comes out reversed)
    assert int(res[1][0].numpy()) == a and [int(o) for o in from_value(p, res[1][1])] == outs[::-1]
    a, outs = accum(vals[::-1])
    assert int(res[2][0].numpy()) == a and [int(o) for o in from_value(p, res[2][1])] == outs[::-1]
    assert [int(o) for o in from_value(p, res[3])] == [16, 9, 4, 1]
    assert [int(o) for o in from_value(p, res[4])] == [1, 4, 9, 16]
    assert int(res[5].numpy()) == 10 + 3 * 4


def test_tree_and_nat_and_dynamic_elements():
    p = Prelude()
    tree, rose = p.mod.get_type("Tree")
    nat, z, s = p.nat, p.z, p.s
    # a tree of 4 nodes: size and tmap (double every value)
    t = rose(relay.const(1), p.cons(rose(relay.const(2), p.nil()),
                                    p.cons(rose(relay.const(3), p.cons(rose(relay.const(4), p.nil()), p.nil())),
                                           p.nil())))
    x = relay.var("x", I32)
    doubled = p.tmap(relay.Function([x], x * relay.const(2)), t)
    # a nat counted back to an int with a recursive function
    count = relay.GlobalVar("count")
    n, m = relay.var("n", nat()), relay.var("m")
    from kiln.relay.adt import Clause, Match, PatternConstructor, PatternVar
    p.mod[count] = relay.Function([n], Match(n, [Clause(PatternConstructor(z), relay.const(0)),
                                                 Clause(PatternConstructor(s, [PatternVar(m)]),
                                                        relay.const(1) + count(m))]), I32)
    # list elements of unknown length (relay.Any): map runs a symbolic-shape kernel
    xs = relay.var("xs", p.list(TensorType((relay.Any(),), "float32")))
    e = relay.var("e", TensorType((relay.Any(),), "float32"))
    p.mod["main"] = relay.Function([xs], relay.Tuple([p.size(t), doubled, count(s(s(s(z())))),
                                                      p.map(relay.Function([e], relay.exp(e)), xs)]))
    vals = [rng.standard_normal(k).astype("float32") for k in (3, 7, 1)]
    res = vm_of(p.mod).run(to_list(p, vals))
    assert int(res[0].numpy()) == 4

    def flatten(v):
        value, subs = v
        return [int(value.numpy())] + [y for sub in from_value(p, subs, raw=True) for y in flatten(sub)]
    assert flatten(res[1]) == [2, 4, 6, 8]
    assert int(res[2].numpy()) == 3
    for got, want in zip(from_value(p, res[3]), vals):
        np.testing.assert_allclose(got, np.exp(want), rtol=1e-5)


def test_debug_interpreter_agrees_with_vm():
    p = Prelude()
    xs = relay.var("xs", p.list(F5))
    a = relay.var("a", F5)
    p.mod["main"] = relay.Function([xs], relay.Tuple([p.rev(p.map(relay.Function([a], relay.tanh(a)), xs)),
                                                      p.length(xs)]))
    vals = [rng.standard_normal(5).astype("float32") for _ in range(3)]
    want = from_value(p, vm_of(p.mod).run(to_list(p, vals))[0])
    # the interpreter takes its list as a Relay expression
    lst = p.nil()
    for v in reversed(vals):
        lst = p.cons(relay.const(v), lst)
    p.mod["main"] = relay.Function([], relay.Tuple([p.rev(p.map(relay.Function([a], relay.tanh(a)), lst)),
                                                    p.length(lst)]))
    got = relay.create_executor("debug", mod=p.mod).evaluate()()
    assert int(got[1].numpy()) == 3
    for g, w, v in zip(from_value(p, got[0]), want, vals[::-1]):
        np.testing.assert_allclose(g, np.tanh(v), rtol=1e-5)
        np.testing.assert_allclose(w, np.tanh(v), rtol=1e-5)
