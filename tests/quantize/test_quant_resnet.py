"""resnet-18 (relay.testing, random weights) quantized with global_scale, built and run against fp32."""
import numpy as np
import pytest

from kiln.relay import quantize as q
from kiln.relay import testing
from kiln.relay.quantize import qconfig

from quant_models import calls, rel_err, run_model


@pytest.mark.slow
def test_quant_resnet18_global_scale():
    mod, params = testing.resnet.get_workload(num_layers=18, batch_size=1, image_shape=(3, 224, 224))
    with qconfig(calibrate_mode="global_scale", global_scale=8.0):
        qmod = q.quantize(mod, params)
    convs = calls(qmod, "nn.conv2d")
    int_convs = [c for c in convs if c.checked_type.dtype == "int32"]
    assert len(convs) == 21 and len(int_convs) == 20  # the first conv is skipped (skip_conv_layers=[0])
    assert all(a.checked_type.dtype == "int8" for c in int_convs for a in c.args)
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=(1, 3, 224, 224)).astype("float32") for _ in range(4)]
    want = run_model(mod, params, xs)
    got = run_model(qmod, None, xs)
    assert np.mean(want.argmax(-1) == got.argmax(-1)) >= 0.75
    assert rel_err(want, got) < 0.1
