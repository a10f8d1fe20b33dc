"""relay.Any() dimensions through type inference, per op family (TVM's rules: Any vs 1 -> Any, Any vs n -> n)."""
import pytest

import kiln as tvm
from kiln import relay
from kiln.error import TypeInferenceError

A = relay.Any()


def _infer(fn, *shapes, dtypes=None):
    dtypes = dtypes or ["float32"] * len(shapes)
    vs = [relay.var(f"v{i}", shape=s, dtype=d) for i, (s, d) in enumerate(zip(shapes, dtypes))]
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function(vs, fn(*vs))))
    return mod["main"].ret_type


def _dims(ty):
    return tuple("?" if not isinstance(d, int) else d for d in ty.shape)


CASES = [
    ("add_any_1", relay.add, [(A, 3), (1, 3)], (None, 3)),
    ("add_any_n", relay.add, [(A, 3), (4, 3)], (4, 3)),
    ("add_any_any", relay.add, [(A, 1), (1, A)], (None, None)),
    ("greater", relay.greater, [(A, 3), (A, 3)], (None, 3)),
    ("relu", relay.nn.relu, [(A, 5)], (None, 5)),
    ("dense", relay.nn.dense, [(A, 16), (32, 16)], (None, 32)),
    ("matmul", relay.nn.matmul, [(A, 16), (16, 8)], (None, 8)),
    ("batch_matmul", relay.nn.batch_matmul, [(A, 5, 16), (A, 7, 16)], (None, 5, 7)),
    ("conv2d_batch", lambda x, w: relay.nn.conv2d(x, w, padding=(1, 1)), [(A, 3, 8, 8), (4, 3, 3, 3)],
     (None, 4, 8, 8)),
    ("conv2d_hw", lambda x, w: relay.nn.conv2d(x, w), [(1, 3, A, 9), (4, 3, 3, 3)], (1, 4, None, 7)),
    ("max_pool", lambda x: relay.nn.max_pool2d(x, (2, 2), (2, 2)), [(A, 3, 8, 8)], (None, 3, 4, 4)),
    ("avg_pool_h", lambda x: relay.nn.avg_pool2d(x, (2, 2), (2, 2)), [(2, 3, A, 8)], (2, 3, None, 4)),
    ("global_pool", relay.nn.global_avg_pool2d, [(A, 3, 8, 8)], (None, 3, 1, 1)),
    ("batch_norm", lambda x, g, b, m, v: relay.nn.batch_norm(x, g, b, m, v)[0],
     [(A, 3, 4, 4), (3,), (3,), (3,), (3,)], (None, 3, 4, 4)),
    ("layer_norm", lambda x, g, b: relay.nn.layer_norm(x, g, b), [(A, 7, 16), (16,), (16,)], (None, 7, 16)),
    ("softmax", relay.nn.softmax, [(A, 10)], (None, 10)),
    ("reshape_minus1", lambda x: relay.reshape(x, (-1, 4, 8)), [(A, 32)], (None, 4, 8)),
    ("reshape_zero", lambda x: relay.reshape(x, (0, -1)), [(A, 4, 8)], (None, 32)),
    ("reshape_static_rest", lambda x: relay.reshape(x, (-1, 32)), [(A, 4, 8)], (None, 32)),
    ("batch_flatten", relay.nn.batch_flatten, [(A, 4, 8)], (None, 32)),
    ("transpose", lambda x: relay.transpose(x, (1, 0, 2)), [(A, 4, 8)], (4, None, 8)),
    ("concat_axis_any", lambda a, b: relay.concatenate([a, b], 0), [(A, 4), (3, 4)], (None, 4)),
    ("concat_other_any", lambda a, b: relay.concatenate([a, b], 1), [(A, 4), (5, 3)], (5, 7)),
    ("sum", lambda x: relay.sum(x, axis=1), [(A, 4)], (None,)),
    ("mean_keep", lambda x: relay.mean(x, axis=0, keepdims=True), [(A, 4)], (1, 4)),
    ("take", lambda a, i: relay.take(a, i, axis=0), [(10, 4), (A,)], (None, 4)),
    ("strided_slice_static", lambda x: relay.strided_slice(x, [0, 1], [2, 3]), [(A, 4)], (None, 2)),
    ("split", lambda x: relay.split(x, 2, axis=1).astuple(), [(A, 4)], None),
    ("tile", lambda x: relay.tile(x, (2, 1)), [(A, 4)], (None, 4)),
    ("layout_transform", lambda x: relay.layout_transform(x, "NCHW", "NCHW4c"), [(A, 8, 4, 4)],
     (None, 2, 4, 4, 4)),
    ("broadcast_to", lambda x: relay.broadcast_to(x, (3, 4)), [(A, 4)], (3, 4)),
]


@pytest.mark.parametrize("name,fn,shapes,want", CASES, ids=[c[0] for c in CASES])
def test_any_propagates(name, fn, shapes, want):
    dtypes = ["float32", "int32"] if name == "take" else None
    ty = _infer(fn, *shapes, dtypes=dtypes)
    if want is None:  # split: two fields, each (?, 2)
        assert [_dims(f) for f in ty.fields] == [("?", 2), ("?", 2)]
        return
    assert _dims(ty) == tuple("?" if w is None else w for w in want)


def test_any_still_reports_real_errors():
    with pytest.raises(TypeInferenceError, match="dense"):
        _infer(relay.nn.dense, (A, 16), (32, 15))
    with pytest.raises(TypeInferenceError, match="broadcast"):
        _infer(relay.add, (A, 3), (A, 4))
    with pytest.raises(TypeInferenceError, match="reshape"):
        _infer(lambda x: relay.reshape(x, (0, 5)), (A, 4, 8))
