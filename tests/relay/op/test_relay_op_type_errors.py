"""One failing type relation per op family: the error names the op and says what clashed."""
import numpy as np
import pytest

from kiln import relay
from kiln.error import TypeInferenceError

from op_helpers import out_type

f32 = "float32"


def z(*shape, dtype=f32):
    return np.zeros(shape, dtype)


CASES = [
    ("exp", lambda a: relay.exp(relay.Tuple([a, a])), [z(2)], r"operator exp: argument 0 \(data\) must be a tensor"),
    ("cast_like", relay.cast_like, [z(2), z(3, dtype="int8")], None),  # valid: shapes may differ
    ("zeros", lambda: relay.zeros((2, -1)), [], r"zeros.*negative dimension"),
    ("full", lambda a: relay.full(a, (2,)), [z(2)], r"full: fill_value must be a scalar, got shape \(2,\)"),
    ("full_like", relay.full_like, [z(2), z(2)], r"full_like: fill_value must be a scalar"),
    ("reshape_like", relay.reshape_like, [z(2, 3), z(5)], r"\(2, 3\) and \(5,\) differ in size"),
    ("stack", lambda a, b: relay.stack([a, b]), [z(2), z(3)], r"stack: input 1 has type Tensor\[\(3\), float32\]"),
    ("gather", lambda a, i: relay.gather(a, 0, i), [z(2, 3), z(2, dtype="int32")], r"must have the rank of data"),
    ("arange", lambda: relay.arange(relay.const(0.0), relay.const(1.0), relay.const(0.0)), [], "step must not be 0"),
    ("tile", lambda a: relay.tile(a, (2, -1)), [z(2, 3)], r"reps \(2, -1\) must be non-negative"),
    ("repeat", lambda a: relay.repeat(a, 0, 0), [z(2)], "repeats must be >= 1"),
    ("reverse", lambda a: relay.reverse(a, 2), [z(2, 3)], "reverse axis 2 is out of range"),
    ("expand_dims", lambda a: relay.expand_dims(a, 4), [z(2, 3)], r"axis 4 is out of range \[-3, 2\]"),
    ("strided_slice", lambda a: relay.strided_slice(a, [0], [2], [0]), [z(3)], "stride of 0"),
    ("take", lambda a, i: relay.take(a, i, mode="nope"), [z(3), z(1, dtype="int32")], "mode must be"),
    ("argmax", lambda a: relay.argmax(a, axis=-3), [z(2, 3)], "reduction axis -3 is out of range"),
    ("variance", lambda a: relay.variance(a, axis=[0, 0]), [z(2, 3)], "repeat an axis"),
    ("conv2d_transpose", lambda a, w: relay.nn.conv2d_transpose(a, w, channels=5), [z(1, 4, 3, 3), z(4, 2, 3, 3)],
     "channels=5 but the weight gives 2"),
    ("matmul", relay.nn.matmul, [z(2, 3), z(4, 5)], r"reduction dimensions differ"),
    ("batch_matmul", relay.nn.batch_matmul, [z(2, 3, 4), z(3, 5, 4)], r"batch sizes 2 and 3 differ"),
    ("bias_add", relay.nn.bias_add, [z(2, 3, 4), z(4)], r"bias must have shape \(3,\) to match axis 1"),
    ("layer_norm", relay.nn.layer_norm, [z(2, 3), z(3), z(2)], r"beta must have shape \(3,\)"),
    ("prelu", relay.nn.prelu, [z(1, 3, 2), z(2)], r"alpha must have shape \(3,\)"),
    ("softmax", lambda a: relay.nn.softmax(a, axis=2), [z(2, 3)], "softmax axis 2 is out of range"),
    ("dropout", lambda a: relay.nn.dropout_raw(a, 1.5), [z(2)], r"rate must be in \[0, 1\)"),
    ("batch_flatten", relay.nn.batch_flatten, [z()], "at least one dimension"),
    ("adaptive_avg_pool2d", lambda a: relay.nn.adaptive_avg_pool2d(a, (0, 2)), [z(1, 2, 4, 4)], "must be positive"),
    ("global_avg_pool2d", lambda a: relay.nn.global_avg_pool2d(a, layout="NCW"), [z(1, 2, 4)],
     "unsupported layout NCW"),
    ("upsampling", lambda a: relay.nn.upsampling(a, 2, 2, method="area"), [z(1, 1, 2, 2)], "method must be"),
    ("resize2d", lambda a: relay.image.resize2d(a, (4, 4), method="area"), [z(1, 1, 2, 2)], "method must be one of"),
    ("conv2d_layout", lambda a, w: relay.nn.conv2d(a, w, data_layout="NHWC"), [z(1, 4, 4, 3), z(2, 3, 3, 3, 1)],
     r"rank 5 .* does not fit layout OIHW"),
    ("dense_units", lambda a, w: relay.nn.dense(a, w, units=3), [z(2, 4), z(5, 4)], "units=3 but weight"),
    ("pad_negative", lambda a: relay.nn.pad(a, ((0, -1),)), [z(3)], r"negative padding \(0, -1\)"),
]


@pytest.mark.parametrize("name,build,arrays,pattern", CASES, ids=[c[0] for c in CASES])
def test_type_error(name, build, arrays, pattern):
    if pattern is None:
        out_type(build, *arrays)
        return
    with pytest.raises(TypeInferenceError, match=pattern) as info:
        out_type(build, *arrays)
    assert "operator " in str(info.value)  # the message names the op, and inference shows the call
    assert "offending expression" in str(info.value)
