"""Prelude tensor arrays (TVM's TensorArrayOps / StaticTensorArrayOps) on the VM, against numpy."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.relay.prelude import Prelude, StaticTensorArrayOps, get_tensor_array_shape
from kiln.runtime.vm import VirtualMachine
from relay_exec_util import vm_of

rng = np.random.default_rng(1813)


def data(value):
    """The tensor inside a tensor_t value (tensor0..6 / tensor_constructor)."""
    assert len(value) == 1, f"expected a tensor constructor, got tag {value.tag} with {len(value)} fields"
    return value[0].numpy()


def as_list(p, value):
    out = []
    while value.tag == p.cons.tag:
        out.append(value[0])
        value = value[1]
    assert value.tag == p.nil.tag
    return out


def test_dynamic_tensor_array_ops_vs_numpy():
    p = Prelude()
    dt = "float32"
    g = lambda name: p.get_global_var(name, dt)  # noqa: E731
    ctor = lambda name: p.get_tensor_ctor(name, dt)  # noqa: E731
    v = relay.var("v", shape=(relay.Any(), relay.Any()), dtype=dt)
    w = relay.var("w", shape=(relay.Any(),), dtype=dt)
    cube = relay.var("cube", shape=(relay.Any(), relay.Any(), relay.Any()), dtype=dt)
    lengths = relay.var("lengths", shape=(relay.Any(),), dtype="int32")
    indices = relay.var("indices", shape=(relay.Any(),), dtype="int32")
    rows = g("tensor_array_unstack_tensor2")(v)
    split = g("tensor_array_split")(g("tensor_array")(relay.const(3)), ctor("tensor2")(v), lengths)
    scattered = g("tensor_array_scatter")(g("tensor_array")(relay.const(4)), indices, rows)
    written = g("tensor_array_write")(g("tensor_array")(relay.const(2)), relay.const(1), ctor("tensor1")(w))
    out = relay.Tuple([
        g("tensor_array_read")(rows, relay.const(2)),                       # v[2]
        g("tensor_array_stack")(rows),                                      # v
        g("tensor_array_concat")(split),                                    # v
        g("tensor_array_read")(split, relay.const(1)),                      # v[2:3]
        g("tensor_array_gather")(scattered, indices),                       # v[[0, 1]] again
        g("tensor_take")(ctor("tensor2")(v), relay.const(1), relay.const(4)),  # v[1:4]
        g("tensor_array_stack")(g("tensor_array_unstack_tensor1")(w)),       # w
        g("tensor_array_stack")(g("tensor_array_unstack_tensor3")(cube)),    # cube
        g("tensor_array_read")(written, relay.const(0)),                    # tensor_nil (never written)
        g("tensor_array_read")(written, relay.const(1)),                    # w
        g("tensor_expand_dims")(ctor("tensor0")(relay.const(2.5, dt))),      # [2.5]
        relay.Tuple([g("tensor_array_read")(scattered, relay.const(3)), g("tensor_array_read")(scattered, relay.const(0))]),
    ])
    p.mod["main"] = relay.Function([v, w, cube, lengths, indices], out)
    a = rng.standard_normal((5, 3)).astype(dt)
    b = rng.standard_normal(7).astype(dt)
    c = rng.standard_normal((2, 3, 4)).astype(dt)
    res = vm_of(p.mod).run(a, b, c, np.array([2, 1, 2], "int32"), np.array([3, 0], "int32"))
    np.testing.assert_array_equal(data(res[0]), a[2])
    np.testing.assert_array_equal(data(res[1]), a)
    np.testing.assert_array_equal(data(res[2]), a)
    np.testing.assert_array_equal(data(res[3]), a[2:3])
    np.testing.assert_array_equal(data(res[4]), np.stack([a[0], a[1]]))
    np.testing.assert_array_equal(data(res[5]), a[1:4])
    np.testing.assert_array_equal(data(res[6]), b)
    np.testing.assert_array_equal(data(res[7]), c)
    assert res[8].tag == p.get_tensor_ctor("tensor_nil", dt).tag and len(res[8]) == 0
    np.testing.assert_array_equal(data(res[9]), b)
    np.testing.assert_array_equal(data(res[10]), np.array([2.5], dt))
    # scatter wrote values[0] to slot 3 and values[1] to slot 0
    np.testing.assert_array_equal(data(res[11][0]), a[0])
    np.testing.assert_array_equal(data(res[11][1]), a[1])
    # the constructors carry the rank: a row of a matrix is tensor1, a stacked matrix is tensor2
    assert res[0].tag == p.get_tensor_ctor("tensor1", dt).tag and res[1].tag == p.get_tensor_ctor("tensor2", dt).tag


def test_tensor_array_names_and_types():
    p = Prelude()
    assert "tensor_array_int32" not in {gv.name_hint for gv in p.mod.get_global_vars()}  # defined on first use
    gv = p.get_global_var("tensor_array", "int32")
    assert gv.name_hint == "tensor_array_int32"
    assert p.get_type("tensor_t", "int32").name_hint == "tensor_int32_t"
    names = [c.name_hint for c in p.mod.get_type("tensor_int32_t")[1:]]
    assert names == ["tensor_nil_int32"] + [f"tensor{r}_int32" for r in range(7)]
    mod = relay.transform.InferType()(p.mod)
    ty = mod.get_global_var("tensor_array_stack_int32").checked_type
    assert ty.ret_type.func.name_hint == "tensor_int32_t"
    assert p.get_name_static("tensor_t", "float32", (relay.Any(), 3)) == "static_tensor_float32_any_3_t"
    assert p.get_name_static("tensor_array_stack", "float32", ()) == "tensor_array_stack_float32_scalar"
    with pytest.raises(tvm.KilnError):
        p.get_global_var("tensor_array", "floaty")


def test_static_tensor_array_ops_vs_numpy():
    p = Prelude()
    dt, shape = "float32", (3,)
    ops = StaticTensorArrayOps(p, dt, shape)
    ops.register()
    g = lambda name, s=shape: p.get_global_var_static(name, dt, s)  # noqa: E731
    make = p.get_tensor_ctor_static("tensor_constructor", dt, shape)
    x = relay.var("x", shape=(4, 3), dtype=dt)
    y = relay.var("y", shape=shape, dtype=dt)
    lengths = relay.var("lengths", shape=(relay.Any(),), dtype="int32")
    indices = relay.var("indices", shape=(relay.Any(),), dtype="int32")
    rows = g("tensor_array_unstack", (4, 3))(x)  # a list of static_tensor_float32_3_t
    arr = g("tensor_array_write")(g("tensor_array")(relay.const(3)), relay.const(2), make(y))
    arr = g("tensor_array_write")(arr, relay.const(0), g("tensor_array_read")(rows, relay.const(3)))
    arr = g("tensor_array_write")(arr, relay.const(1), make(y + y))
    stacked_shape = (relay.Any(), 3)
    get_stacked = g("tensor_get_data", stacked_shape)
    rows_shape = (relay.Any(), 3)
    split = g("tensor_array_split", (4, 3))(
        p.get_global_var_static("tensor_array", dt, rows_shape)(relay.const(2)),
        p.get_tensor_ctor_static("tensor_constructor", dt, (4, 3))(x), lengths)
    out = relay.Tuple([
        get_stacked(g("tensor_array_stack")(arr)),                                  # [x[3], 2y, y]
        get_stacked(g("tensor_array_gather")(arr, indices)),                        # arr[indices]
        g("tensor_get_data")(g("tensor_array_read")(rows, relay.const(1))),          # x[1]
        get_stacked(g("tensor_array_concat", (4, 3))(split)),                        # x
        get_stacked(g("tensor_array_read", rows_shape)(split, relay.const(0))),      # x[:lengths[0]]
        get_stacked(g("tensor_take", (4, 3))(p.get_tensor_ctor_static("tensor_constructor", dt, (4, 3))(x),
                                             relay.const(1), relay.const(3))),      # x[1:3]
    ])
    p.mod["main"] = relay.Function([x, y, lengths, indices], out)
    mod = relay.transform.InferType()(p.mod)
    assert tuple(int(d) if not isinstance(d, tvm.tir.Any) else -1
                 for d in mod["main"].ret_type.fields[0].shape) == (-1, 3)
    a = rng.standard_normal((4, 3)).astype(dt)
    b = rng.standard_normal(3).astype(dt)
    res = vm_of(p.mod).run(a, b, np.array([1, 3], "int32"), np.array([2, 2, 0], "int32"))
    expect = np.stack([a[3], 2 * b, b])
    np.testing.assert_allclose(res[0].numpy(), expect, rtol=1e-6)
    np.testing.assert_allclose(res[1].numpy(), expect[[2, 2, 0]], rtol=1e-6)
    np.testing.assert_array_equal(res[2].numpy(), a[1])
    np.testing.assert_array_equal(res[3].numpy(), a)
    np.testing.assert_array_equal(res[4].numpy(), a[:1])
    np.testing.assert_array_equal(res[5].numpy(), a[1:3])


def test_static_read_of_unwritten_slot_and_shape_query():
    p = Prelude()
    dt, shape = "int32", (2,)
    ta = p.get_global_var_static("tensor_array", dt, shape)(relay.const(2))
    get = p.get_global_var_static("tensor_get_data", dt, shape)
    read = p.get_global_var_static("tensor_array_read", dt, shape)
    assert get_tensor_array_shape(ta, dt, p) == (2,)
    dyn = p.get_global_var("tensor_array", dt)(relay.const(1))
    assert get_tensor_array_shape(dyn, dt, p) is None
    n = relay.var("n", shape=(), dtype="int32")
    p.mod["main"] = relay.Function([n], get(read(ta, n)))
    exe = relay.vm.compile(p.mod, "llvm")
    vm = VirtualMachine(exe, tvm.cpu())
    with pytest.raises(tvm.KilnError, match="no clause matches"):
        vm.run(np.array(1, "int32"))  # slot 1 holds tensor_nil: tensor_get_data has no tensor to give
