"""Tutorial flow: deploying a compiled model ("export_library", the graph JSON + params files, and
loading them back) as in TVM's deployment how-tos.

relay.build's factory module exported as one .so / .tar and loaded with load_module; the
"three artifacts" route (graph JSON, the kernels library from get_lib(), params saved with
save_param_dict) re-assembled with graph_executor.create + load_params; inputs given by name, by
index and as keyword arguments of run(); outputs checked against PyTorch.
"""
import numpy as np
import pytest
import torch

import kiln as tvm
import kiln.testing
from kiln import relay
from kiln.contrib import graph_executor, utils

DATA_SHAPE = (2, 3, 12, 10)


def _model():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype("float32") * 0.5
    b = rng.standard_normal((4,)).astype("float32")
    wd = rng.standard_normal((5, 4 * 6 * 5)).astype("float32") * 0.1
    data = relay.var("data", shape=DATA_SHAPE)
    weight = relay.var("weight", shape=w.shape)
    bias = relay.var("bias", shape=b.shape)
    dense_w = relay.var("dense_w", shape=wd.shape)
    y = relay.nn.bias_add(relay.nn.conv2d(data, weight, padding=(1, 1)), bias)
    y = relay.nn.max_pool2d(relay.nn.relu(y), pool_size=(2, 2), strides=(2, 2))
    y = relay.nn.softmax(relay.nn.dense(relay.nn.batch_flatten(y), dense_w))
    mod = tvm.IRModule.from_expr(relay.Function([data, weight, bias, dense_w], y))
    params = {"weight": w, "bias": b, "dense_w": wd}

    def reference(x):
        t = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), padding=1)
        t = torch.nn.functional.max_pool2d(torch.relu(t), 2)
        return torch.softmax(t.flatten(1) @ torch.from_numpy(wd).T, dim=1).numpy()

    return mod, params, reference


@pytest.fixture(scope="module")
def built():
    mod, params, reference = _model()
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    return lib, reference


@pytest.mark.parametrize("name", ["deploy_lib.so", "deploy_lib.tar"])
def test_export_library_and_load(built, name):
    lib, reference = built
    temp = utils.tempdir()
    path = temp.relpath(name)
    lib.export_library(path)
    loaded = tvm.runtime.load_module(path)
    dev = tvm.cpu(0)
    module = graph_executor.GraphModule(loaded["default"](dev))
    x = np.random.default_rng(1).uniform(-1, 1, DATA_SHAPE).astype("float32")
    module.set_input("data", x)
    module.run()
    tvm.testing.assert_allclose(module.get_output(0).numpy(), reference(x), rtol=1e-4, atol=1e-6)
    assert module.get_num_outputs() == 1 and module.get_num_inputs() >= 1
    # input by index and as a keyword of run()
    x2 = np.random.default_rng(2).uniform(-1, 1, DATA_SHAPE).astype("float32")
    module.set_input(0, tvm.nd.array(x2))
    module.run()
    tvm.testing.assert_allclose(module.get_output(0).numpy(), reference(x2), rtol=1e-4, atol=1e-6)
    module.run(data=x)
    out = tvm.nd.empty((2, 5), "float32")
    module.get_output(0, out)
    tvm.testing.assert_allclose(out.numpy(), reference(x), rtol=1e-4, atol=1e-6)


def test_graph_json_lib_and_params_files(built):
    lib, reference = built
    temp = utils.tempdir()
    path_lib = temp.relpath("deploy_lib.so")
    lib.get_lib().export_library(path_lib)
    with open(temp.relpath("deploy_graph.json"), "w") as fo:
        fo.write(lib.get_graph_json())
    with open(temp.relpath("deploy_param.params"), "wb") as fo:
        fo.write(relay.save_param_dict(lib.get_params()))

    loaded_json = open(temp.relpath("deploy_graph.json")).read()
    loaded_lib = tvm.runtime.load_module(path_lib)
    loaded_params = bytearray(open(temp.relpath("deploy_param.params"), "rb").read())
    dev = tvm.cpu()
    module = graph_executor.create(loaded_json, loaded_lib, dev)
    module.load_params(loaded_params)
    x = np.random.default_rng(3).uniform(-1, 1, DATA_SHAPE).astype("float32")
    module.run(data=tvm.nd.array(x))
    tvm.testing.assert_allclose(module.get_output(0).numpy(), reference(x), rtol=1e-4, atol=1e-6)

    # the params round-trip through relay.load_param_dict too
    params = lib.get_params()
    back = relay.load_param_dict(loaded_params)
    assert sorted(back) == sorted(params)
    for k in params:
        np.testing.assert_array_equal(back[k].numpy(), params[k].numpy())


def test_debug_executor(built):
    from kiln.contrib.debugger import debug_executor

    lib, reference = built
    temp = utils.tempdir()
    dev = tvm.cpu()
    m = debug_executor.create(lib.get_graph_json(), lib.get_lib(), dev, dump_root=temp.temp_dir)
    m.set_input(**lib.get_params())
    x = np.random.default_rng(4).uniform(-1, 1, DATA_SHAPE).astype("float32")
    m.set_input("data", x)
    m.run()
    tvm.testing.assert_allclose(m.get_output(0).numpy(), reference(x), rtol=1e-4, atol=1e-6)
