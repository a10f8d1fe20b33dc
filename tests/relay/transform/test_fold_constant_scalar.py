"""FoldConstant keeps 0-d results 0-d (a folded scalar feeding nn.pad's pad_value must stay a scalar)."""
import numpy as np

import kiln
from kiln import relay


def test_folded_scalar_stays_scalar():
    x = relay.var("x", shape=(2, 3))
    c = relay.sum(relay.const(np.ones((2, 2), "float32")))
    f = relay.Function([x], relay.nn.pad(x, ((0, 0), (1, 1)), pad_value=c))
    mod = relay.transform.InferType()(kiln.IRModule.from_expr(f))
    mod = relay.transform.InferType()(relay.transform.FoldConstant()(mod))
    pad_value = mod["main"].body.args[1]
    assert isinstance(pad_value, relay.Constant)
    assert pad_value.data.numpy().shape == ()
    assert float(pad_value.data.numpy()) == 4.0
