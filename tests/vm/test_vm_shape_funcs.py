"""Shape functions (register_shape_func) against numpy's shapes, and traced over a symbolic dim."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay, te
from kiln.relay.op.shape_func import get_shape_func

rng = np.random.default_rng(1)


def _shapes(call, shapes):
    fn, data_dependent = get_shape_func(call.op.name)
    assert not data_dependent
    return [tuple(int(d) for d in s) for s in fn(call.attrs, [tuple(s) for s in shapes], None)]


def _call(fn, *shapes):
    return fn(*[relay.var(f"v{i}", shape=s) for i, s in enumerate(shapes)])


CASES = [
    ("add", relay.add, [(5, 1, 3), (4, 1)], lambda a, b: (a + b).shape),
    ("dense", relay.nn.dense, [(7, 16), (9, 16)], lambda x, w: (x @ w.T).shape),
    ("batch_matmul", relay.nn.batch_matmul, [(3, 5, 16), (1, 7, 16)], lambda x, y: (x @ y.transpose(0, 2, 1)).shape),
    ("sum", lambda x: relay.sum(x, axis=[1]), [(3, 5, 4)], lambda x: x.sum(axis=1).shape),
    ("mean_keep", lambda x: relay.mean(x, axis=[0, 2], keepdims=True), [(3, 5, 4)],
     lambda x: x.mean(axis=(0, 2), keepdims=True).shape),
    ("reshape", lambda x: relay.reshape(x, (0, -1, 2)), [(3, 4, 6)], lambda x: x.reshape(3, -1, 2).shape),
    ("batch_flatten", relay.nn.batch_flatten, [(3, 4, 5)], lambda x: x.reshape(3, -1).shape),
    ("transpose", lambda x: relay.transpose(x, (2, 0, 1)), [(3, 4, 5)], lambda x: x.transpose(2, 0, 1).shape),
    ("concat", lambda a, b: relay.concatenate([a, b], 1), [(3, 4), (3, 7)], lambda a, b: np.concatenate([a, b], 1).shape),
    ("strided_slice", lambda x: relay.strided_slice(x, [1, -3], [-1, 100], [2, 1]), [(9, 5)],
     lambda x: x[1:-1:2, -3:100].shape),
    ("squeeze", lambda x: relay.squeeze(x, axis=[1]), [(3, 1, 5)], lambda x: x.squeeze(1).shape),
    ("expand_dims", lambda x: relay.expand_dims(x, 1, 2), [(3, 5)], lambda x: x[:, None, None].shape),
    ("softmax", relay.nn.softmax, [(3, 5)], lambda x: x.shape),
]


@pytest.mark.parametrize("name,fn,shapes,ref", CASES, ids=[c[0] for c in CASES])
def test_shape_func_matches_numpy(name, fn, shapes, ref):
    call = _call(fn, *shapes)
    arrays = [rng.standard_normal(s).astype("float32") for s in shapes]
    assert _shapes(call, shapes)[0] == tuple(ref(*arrays))


@pytest.mark.parametrize("n", [1, 5, 17])
def test_conv_and_pool_shape_funcs(n):
    import torch
    x = torch.randn(n, 3, 11, 9)
    w = torch.randn(4, 3, 3, 3)
    call = _call(lambda a, b: relay.nn.conv2d(a, b, strides=(2, 1), padding=(1, 0), dilation=(1, 2)),
                 (n, 3, 11, 9), (4, 3, 3, 3))
    ref = torch.nn.functional.conv2d(x, w, stride=(2, 1), padding=(1, 0), dilation=(1, 2)).shape
    assert _shapes(call, [(n, 3, 11, 9), (4, 3, 3, 3)])[0] == tuple(ref)
    call = _call(lambda a: relay.nn.max_pool2d(a, (3, 3), (2, 2), padding=(1, 1), ceil_mode=True), (n, 3, 11, 9))
    ref = torch.nn.functional.max_pool2d(x, 3, 2, padding=1, ceil_mode=True).shape
    assert _shapes(call, [(n, 3, 11, 9)])[0] == tuple(ref)


def test_split_and_batch_norm_give_every_output():
    call = _call(lambda x: relay.split(x, [2, 5], axis=1).astuple(), (3, 7))
    assert _shapes(call, [(3, 7)]) == [(3, 2), (3, 3), (3, 2)]
    call = _call(lambda x, g, b, m, v: relay.nn.batch_norm(x, g, b, m, v).astuple(), (2, 3, 4, 4), (3,), (3,), (3,), (3,))
    assert _shapes(call, [(2, 3, 4, 4)] + [(3,)] * 4) == [(2, 3, 4, 4), (3,), (3,)]


def test_traced_over_symbolic_dim_evaluates_like_concrete():
    n = te.var("n", "int64")
    call = _call(lambda x: relay.strided_slice(x, [1, 0], [-1, 3]), (9, 5))
    fn, _ = get_shape_func("strided_slice")
    (sym,) = fn(call.attrs, [(n, 5)], None)
    for v in (0, 1, 2, 9, 30):
        got = tvm.tir.stmt_functor.substitute(sym[0], {n: tvm.tir.const(v, "int64")})
        got = tvm.arith.Analyzer().simplify(got)
        assert int(got.value) == len(list(range(v))[1:-1])


def test_arange_is_data_dependent():
    fn, data_dependent = get_shape_func("arange")
    assert data_dependent
    assert fn(None, [np.array(1.0), np.array(7.5), np.array(2.0)], None) == [(len(np.arange(1.0, 7.5, 2.0)),)]
