"""NaN and ±inf through every CPU elementwise/broadcast float op in the registry (issue 15, defect 3's
class): each op with a numpy reference (FReference) and a compute is compiled for llvm and compared with
its reference on NaN, ±inf, ±0 and ordinary values (NaN positions must match). Ops are enumerated from
the registry, so a new activation is covered without editing this file."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.contrib import graph_executor
from kiln.error import KilnError
from kiln.ir.op import Op, OpPattern

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -2.5, 1e30, -1e-30], "float32")
# ops whose attrs must be given: build them through the public relay API
WITH_ATTRS = {
    "clip": lambda x: relay.clip(x, 0.0, 6.0),
    "nn.leaky_relu": lambda x: relay.nn.leaky_relu(x, 0.1),
    "nn.prelu": lambda x, y: relay.nn.prelu(x, y),
    "nn.bias_add": lambda x, y: relay.nn.bias_add(x, y, axis=0),
}
# shape and constructor ops, not functions of their input values
NOT_VALUE_OPS = {"broadcast_to", "broadcast_to_like", "expand_dims", "full", "full_like", "ones", "ones_like",
                 "zeros", "zeros_like", "repeat", "tile", "cast", "cast_like", "where", "copy"}
# integer and boolean ops (their type relations accept float32 today, but they are not float ops)
INT_OR_BOOL_PREFIXES = ("bitwise_", "logical_", "left_shift", "right_shift")
# approximations by design: checked for NaN/inf positions, values within a loose tolerance
APPROX = {"fast_exp": 2e-3, "fast_tanh": 2e-3, "fast_erf": 2e-3}


# known defects found by this sweep, not yet fixed (strict: they must fail until fixed)
KNOWN_BAD = {
}


def _float_ops():
    out = []
    for name in Op.list_op_names():
        op = Op.get(name)
        pat = op.get_attr("TOpPattern")
        if pat is None or int(pat) not in (int(OpPattern.ELEMWISE), int(OpPattern.BROADCAST)):
            continue
        if name in NOT_VALUE_OPS or name.startswith(INT_OR_BOOL_PREFIXES) or op.get_attr("FReference") is None or op.get_attr("FTVMCompute") is None:
            continue
        if op.num_inputs in (1, 2):
            out.append(name)
    return out


OPS = [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_BAD[n])) if n in KNOWN_BAD else n
       for n in _float_ops()]


def test_the_sweep_covers_the_activations():
    for name in ("nn.relu", "sigmoid", "tanh", "clip", "nn.leaky_relu", "erf", "exp", "maximum", "minimum"):
        assert name in _float_ops()


def _expr(name, args):
    if name in WITH_ATTRS:
        return WITH_ATTRS[name](*args)
    return relay.Call(Op.get(name), list(args))


@pytest.mark.parametrize("name", OPS)
def test_nan_and_inf_match_the_numpy_reference(name):
    op = Op.get(name)
    n = SPECIAL.size
    if op.num_inputs == 1:
        data = [SPECIAL]
    elif name in ("nn.prelu", "nn.bias_add"):
        data = [SPECIAL.reshape(n, 1), np.full(n if name == "nn.bias_add" else 1, 0.25, "float32")]
    else:   # every pair of special values
        data = [np.repeat(SPECIAL, n), np.tile(SPECIAL, n)]
    xs = [relay.var(f"x{k}", shape=d.shape, dtype="float32") for k, d in enumerate(data)]
    mod = tvm.IRModule.from_expr(relay.Function(xs, _expr(name, xs)))
    try:
        mod = relay.transform.InferType()(mod)
    except KilnError as err:
        raise AssertionError(f"{name}: a float op that does not type-check on float32 ({err}); add its attrs "
                             "to WITH_ATTRS or, if it is not a float op, to NOT_VALUE_OPS") from err
    call = mod["main"].body
    ref = np.asarray(op.get_attr("FReference")(call.attrs, data, call.checked_type))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    for k, d in enumerate(data):
        m.set_input(f"x{k}", d)
    with np.errstate(all="ignore"):
        m.run()
    got = m.get_output(0).numpy()
    assert got.shape == ref.shape and got.dtype == ref.dtype, (got.dtype, ref.dtype)
    if got.dtype == np.bool_ or not np.issubdtype(got.dtype, np.floating):
        np.testing.assert_array_equal(got, ref, err_msg=name)
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref), err_msg=f"{name}: NaN positions differ")
    finite = np.isfinite(ref) & (np.abs(ref) < 1e30)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(ref)], ref[~finite & ~np.isnan(ref)],
                                  err_msg=f"{name}: infinities differ")
    np.testing.assert_allclose(got[finite], ref[finite], rtol=APPROX.get(name, 1e-5), atol=1e-6, err_msg=name)
