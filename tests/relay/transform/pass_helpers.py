"""Shared helpers for the graph-pass tests."""
from __future__ import annotations

import contextlib
import importlib

import numpy as np

import kiln
from kiln import relay
from kiln.ir import assert_structural_equal
from kiln.ir.op import Op


def parse(text, consts=None):
    meta = {"relay.Constant": list(consts)} if consts else None
    return kiln.parser.parse(text, init_meta_table=meta)


def real_ops():
    """Import the real operator set (kiln.relay.op); skip the test while it has not landed."""
    import pytest
    from kiln.ir.op import _OPS
    for name in ("kiln.relay.op", "kiln.relay.op.tensor", "kiln.relay.op.transform", "kiln.relay.op.reduce",
                 "kiln.relay.op.nn"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    if "add" not in _OPS:
        pytest.skip("the real operator set (kiln.relay.op) is not available")


def need_ops(*names):
    import pytest
    from kiln.ir.op import _OPS
    real_ops()
    missing = [n for n in names if n not in _OPS]
    if missing:
        pytest.skip(f"operators not registered yet: {missing}")


def run(pass_, mod, opt_level=3, **ctx):
    with kiln.transform.PassContext(opt_level=opt_level, **ctx):
        return pass_(mod)


def check(pass_, before, expected, consts=None, opt_level=3, **ctx):
    """Apply ``pass_`` to the text ``before`` and compare with the text ``expected`` (both typed)."""
    mod = before if isinstance(before, kiln.IRModule) else parse(before, consts)
    out = run(pass_, mod, opt_level, **ctx)
    exp = expected if isinstance(expected, kiln.IRModule) else parse(expected, consts)
    exp = relay.transform.InferType()(exp)
    assert_structural_equal(relay.transform.InferType()(out), exp)
    return out


def random_inputs(func, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for p in func.params:
        t = p.type_annotation
        out[p.name_hint] = rng.standard_normal([int(d) for d in t.shape]).astype(t.dtype)
    return out


def evaluate(mod, inputs):
    """Run ``main`` with the reference interpreter (skips the test while it has not landed)."""
    import pytest
    try:
        ex = relay.create_executor("debug", mod=mod, device=kiln.cpu(0), target="llvm")
    except (NotImplementedError, ImportError, AttributeError) as err:
        pytest.skip(f"debug interpreter not available: {err}")
    return _flatten(ex.evaluate()(**inputs))


def _flatten(res):
    if hasattr(res, "numpy"):
        return [res.numpy()]
    if isinstance(res, np.ndarray):
        return [res]
    out = []
    for r in res:
        out += _flatten(r)
    return out


def assert_same_numerics(before, after, rtol=1e-5, atol=1e-5, seed=0):
    inputs = random_inputs(before["main"], seed)
    a = evaluate(before, inputs)
    b = evaluate(after, inputs)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_allclose(y, x, rtol=rtol, atol=atol)


@contextlib.contextmanager
def alter_hook(op_name, hook):
    """Install ``hook`` as the op's FTVMAlterOpLayout for the duration of a test, then restore."""
    op = Op.get(op_name)
    saved = op._attrs.get("FTVMAlterOpLayout")
    op.set_attr("FTVMAlterOpLayout", hook, 10000, _replace=True)
    try:
        yield
    finally:
        if saved is None:
            op.reset_attr("FTVMAlterOpLayout")
        else:
            op._attrs["FTVMAlterOpLayout"] = saved


def nchw4c_hook(attrs, inputs, tinfos, out_type):
    """A test hook: compute every conv2d in NCHW4c with OIHW4i4o weights."""
    if attrs.data_layout != "NCHW":
        return None
    new = attrs.with_values(data_layout="NCHW4c", kernel_layout="OIHW4i4o", out_layout="NCHW4c")
    return relay.Call(Op.get("nn.contrib_conv2d_NCHWc"), list(inputs), new)
