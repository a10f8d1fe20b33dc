"""Tutorial flow: "Quick Start Tutorial for Compiling Deep Learning Models" (relay_quick_start).

A relay.testing workload (random weights) is built with relay.build at opt_level=3, run with the
graph executor (set_input / run / get_output into a preallocated array), checked against the debug
interpreter's numpy evaluation of the unoptimized module, exported as a tar, loaded back and run
with module.run(data=...).
"""
import numpy as np
import pytest

import kiln as tvm
import kiln.testing
from kiln import relay
from kiln.contrib import graph_executor, utils
from kiln.relay import testing


def _quick_start(mod, params, data_shape, out_shape, export_name):
    target = tvm.target.Target("llvm")
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target, params=params)
    dev = tvm.cpu()
    data = np.random.default_rng(0).uniform(-1, 1, size=data_shape).astype("float32")
    module = graph_executor.GraphModule(lib["default"](dev))
    module.set_input("data", data)
    module.run()
    out = module.get_output(0, tvm.nd.empty(out_shape)).numpy()
    assert out.shape == out_shape

    ref = relay.create_executor("debug", mod=mod, device=dev, target="llvm").evaluate()(data, **params)
    tvm.testing.assert_allclose(out, ref.numpy(), rtol=1e-4, atol=1e-5)

    temp = utils.tempdir()
    path_lib = temp.relpath(export_name)
    lib.export_library(path_lib)
    assert export_name in temp.listdir()
    loaded_lib = tvm.runtime.load_module(path_lib)
    module = graph_executor.GraphModule(loaded_lib["default"](dev))
    module.run(data=tvm.nd.array(data))
    tvm.testing.assert_allclose(module.get_output(0).numpy(), out, rtol=1e-6, atol=1e-7)
    return out


def test_quick_start_mlp():
    batch_size, num_class = 3, 10
    image_shape = (1, 12, 12)
    mod, params = relay.testing.mlp.get_workload(batch_size=batch_size, num_classes=num_class,
                                                 image_shape=image_shape)
    out = _quick_start(mod, params, (batch_size,) + image_shape, (batch_size, num_class), "deploy_lib.so")
    tvm.testing.assert_allclose(out.sum(axis=1), np.ones(batch_size), rtol=1e-5)  # softmax rows


@pytest.mark.slow
def test_quick_start_resnet18():
    batch_size, num_class = 1, 10
    image_shape = (3, 32, 32)
    mod, params = relay.testing.resnet.get_workload(num_layers=18, batch_size=batch_size,
                                                    image_shape=image_shape, num_classes=num_class)
    text = mod.astext(show_meta_data=False)
    assert "nn.conv2d" in text and "nn.batch_norm" in text
    _quick_start(mod, params, (batch_size,) + image_shape, (batch_size, num_class), "deploy_lib.tar")
