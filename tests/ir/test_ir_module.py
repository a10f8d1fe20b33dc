import pytest

import kiln
from kiln import relay
from kiln.error import KilnError
from kiln.ir import GlobalVar, IRModule, structural_equal


def _fn(n=3):
    x = relay.var("x", shape=(n,))
    return relay.Function([x], x)


def test_getitem_setitem_contains():
    mod = IRModule()
    f = _fn()
    mod["main"] = f
    assert "main" in mod and "other" not in mod
    gv = mod.get_global_var("main")
    assert isinstance(gv, GlobalVar) and gv.name_hint == "main"
    assert mod["main"] is f and mod[gv] is f
    assert list(mod.functions) == [gv]
    assert mod.get_global_vars() == [gv]


def test_unknown_name_lists_names():
    mod = IRModule({"main": _fn(), "helper": _fn()})
    with pytest.raises(KilnError) as err:
        mod.get_global_var("mian")
    msg = str(err.value)
    assert "mian" in msg and "'main'" in msg and "helper" in msg
    with pytest.raises(KilnError):
        mod["nope"]


def test_constructor_with_str_and_gv_keys():
    gv = GlobalVar("f")
    mod = IRModule({gv: _fn(), "main": _fn()})
    assert mod.get_global_var("f") is gv
    assert len(mod) == 2


def test_update_func_and_update():
    mod = IRModule({"main": _fn(3)})
    gv = mod.get_global_var("main")
    g = _fn(4)
    mod.update_func(gv, g)
    assert mod["main"] is g
    other = IRModule({"aux": _fn(5)})
    mod.update(other)
    assert "aux" in mod and mod.get_global_var("aux") is other.get_global_var("aux")


def test_functions_is_a_copy():
    mod = IRModule({"main": _fn()})
    funcs = mod.functions
    funcs.clear()
    assert "main" in mod


def test_from_expr_wraps_free_vars():
    x = relay.var("x", shape=(2,))
    y = relay.var("y", shape=(2,))
    mod = IRModule.from_expr(relay.Tuple([x, y]))
    main = mod["main"]
    assert isinstance(main, relay.Function)
    assert list(main.params) == [x, y]
    f = _fn()
    assert IRModule.from_expr(f)["main"] is f


def test_from_expr_with_functions():
    helper = _fn()
    mod = IRModule.from_expr(_fn(), functions={"helper": helper})
    assert mod["helper"] is helper and "main" in mod


def test_attrs():
    mod = IRModule({"main": _fn()})
    m2 = mod.with_attr("executor", "graph")
    assert m2.attrs["executor"] == "graph" and m2.get_attr("executor") == "graph"
    assert mod.get_attr("executor") is None
    assert "main" in m2


def test_structural_equality_by_name_and_alpha():
    a = IRModule({"main": _fn(3), "f": _fn(2)})
    b = IRModule({"f": _fn(2), "main": _fn(3)})
    c = IRModule({"main": _fn(4), "f": _fn(2)})
    assert structural_equal(a, b)
    assert not structural_equal(a, c)
    kiln.ir.assert_structural_equal(a, b)
    with pytest.raises(ValueError):
        kiln.ir.assert_structural_equal(a, c)


def test_duplicate_name_replaces_function():
    mod = IRModule({"main": _fn(3)})
    new_gv = GlobalVar("main")
    mod[new_gv] = _fn(5)
    assert len(mod) == 1 and mod.get_global_var("main") is new_gv


def test_astext_prints_each_function():
    mod = IRModule({"main": _fn(3), "aux": _fn(2)})
    text = mod.astext()
    assert text.startswith('#[version = "0.0.5"]')
    assert "def @main(%x: Tensor[(3), float32]) {" in text
    assert "def @aux(%x: Tensor[(2), float32]) {" in text
    assert str(mod) == text and mod.script() == mod.astext(show_meta_data=False)


def test_remove():
    mod = IRModule({"main": _fn(), "aux": _fn()})
    mod.remove("aux")
    assert "aux" not in mod and len(mod) == 1


def test_toplevel_alias():
    assert kiln.IRModule is IRModule
