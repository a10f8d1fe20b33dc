import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kiln
from kiln import relay
from kiln.relay import testing

WORKLOADS = {
    "mlp": lambda: testing.mlp.get_workload(batch_size=2),
    "resnet18": lambda: testing.resnet.get_workload(num_layers=18, image_shape=(3, 64, 64), num_classes=10),
    "resnet50": lambda: testing.resnet.get_workload(num_layers=50, image_shape=(3, 64, 64), num_classes=10),
    "resnet34_nhwc": lambda: testing.resnet.get_workload(num_layers=34, image_shape=(3, 32, 32), layout="NHWC"),
    "resnet8_cifar": lambda: testing.resnet.get_workload(num_layers=8, image_shape=(3, 16, 16), num_classes=10),
    "mobilenet": lambda: testing.mobilenet.get_workload(image_shape=(3, 32, 32), num_classes=10),
    "vgg11": lambda: testing.vgg.get_workload(image_shape=(3, 32, 32), num_classes=10),
    "vgg16_bn": lambda: testing.vgg.get_workload(image_shape=(3, 32, 32), num_classes=10, num_layers=16,
                                                 batch_norm=True),
    "squeezenet1.0": lambda: testing.squeezenet.get_workload(image_shape=(3, 64, 64), num_classes=10),
    "squeezenet1.1": lambda: testing.squeezenet.get_workload(version="1.1", image_shape=(3, 64, 64), num_classes=10),
    "dcgan": lambda: testing.dcgan.get_workload(batch_size=1, ngf=8),
}


SLOW = {"vgg11", "vgg16_bn"}  # two 4096-wide dense layers: most of the time is drawing random weights


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in sorted(WORKLOADS)])
def test_workload_text_round_trip(name):
    mod, params = WORKLOADS[name]()
    assert all(isinstance(v, kiln.nd.NDArray) for v in params.values())
    assert "data" not in params
    text = mod.astext(show_meta_data=False)
    parsed = kiln.parser.parse(text)
    kiln.ir.assert_structural_equal(mod["main"], parsed["main"])


def test_default_workload_shapes_and_determinism():
    mod, params = testing.resnet.get_workload(num_layers=18, batch_size=1)
    assert mod["main"].ret_type == kiln.ir.TensorType((1, 1000), "float32")
    assert params["conv0_weight"].shape == (64, 3, 7, 7)
    assert params["fc1_weight"].shape == (1000, 512)
    _, again = testing.resnet.get_workload(num_layers=18, batch_size=1)
    np.testing.assert_array_equal(params["stage2_unit1_conv1_weight"].numpy(),
                                  again["stage2_unit1_conv1_weight"].numpy())
    np.testing.assert_array_equal(params["bn1_moving_var"].numpy(), 1.0)
    w = params["conv0_weight"].numpy()
    bound = np.sqrt(3.0 / ((3 * 49 + 64 * 49) / 2))  # Xavier uniform, avg fan, magnitude 3
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound


def _randomize(params, seed=0):
    """Non-trivial values for every parameter (batch-norm variances positive)."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, v in params.items():
        a = v.numpy()
        if k.endswith("moving_var"):
            out[k] = rng.uniform(0.5, 1.5, a.shape).astype(a.dtype)
        elif k.endswith("weight"):
            out[k] = a
        else:
            out[k] = rng.uniform(-0.5, 0.5, a.shape).astype(a.dtype)
    return out


def _run(mod, params, data):
    ex = relay.create_executor("debug", mod=mod, device=kiln.cpu(0), target="llvm", params=params)
    return ex.evaluate()(data).numpy()


def test_mlp_vs_numpy():
    mod, params = testing.mlp.get_workload(batch_size=3)
    p = _randomize(params)
    x = np.random.default_rng(1).standard_normal((3, 1, 28, 28)).astype("float32")
    h = x.reshape(3, -1)
    for i in (1, 2, 3):
        h = h @ p[f"fc{i}_weight"].T + p[f"fc{i}_bias"]
        if i < 3:
            h = np.maximum(h, 0)
    e = np.exp(h - h.max(-1, keepdims=True))
    np.testing.assert_allclose(_run(mod, p, x), e / e.sum(-1, keepdims=True), rtol=1e-4, atol=1e-6)


def _torch_resnet(p, x, num_stages, units, cifar_stem):
    t = {k: torch.tensor(v) for k, v in p.items()}

    def bn(h, name, scale=True, eps=2e-5):
        return F.batch_norm(h, t[name + "_moving_mean"], t[name + "_moving_var"],
                            t[name + "_gamma"] if scale else None, t[name + "_beta"], False, 0.0, eps)

    h = bn(torch.tensor(x), "bn_data", scale=False)
    if cifar_stem:
        h = F.conv2d(h, t["conv0_weight"], padding=1)
    else:
        h = F.conv2d(h, t["conv0_weight"], stride=2, padding=3)
        h = F.max_pool2d(F.relu(bn(h, "bn0")), 3, 2, 1)
    for i in range(num_stages):
        for j in range(units[i]):
            name = f"stage{i + 1}_unit{j + 1}"
            stride = 2 if (i > 0 and j == 0) else 1
            act1 = F.relu(bn(h, name + "_bn1"))
            c1 = F.conv2d(act1, t[name + "_conv1_weight"], stride=stride, padding=1)
            c2 = F.conv2d(F.relu(bn(c1, name + "_bn2")), t[name + "_conv2_weight"], padding=1)
            short = h if j > 0 else F.conv2d(act1, t[name + "_sc_weight"], stride=stride)
            h = c2 + short
    h = F.relu(bn(h, "bn1")).mean((2, 3))
    return F.softmax(h @ t["fc1_weight"].T + t["fc1_bias"], -1).numpy()


def test_tiny_cifar_resnet_vs_torch():
    mod, params = testing.resnet.get_workload(num_layers=8, batch_size=2, image_shape=(3, 12, 12), num_classes=5)
    p = _randomize(params)
    x = np.random.default_rng(2).standard_normal((2, 3, 12, 12)).astype("float32")
    np.testing.assert_allclose(_run(mod, p, x), _torch_resnet(p, x, 3, [1, 1, 1], True), rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_resnet18_small_image_vs_torch():
    mod, params = testing.resnet.get_workload(num_layers=18, batch_size=1, image_shape=(3, 40, 40), num_classes=7)
    p = _randomize(params, seed=3)
    x = np.random.default_rng(4).standard_normal((1, 3, 40, 40)).astype("float32")
    np.testing.assert_allclose(_run(mod, p, x), _torch_resnet(p, x, 4, [2, 2, 2, 2], False), rtol=1e-4, atol=1e-6)


def test_helpers():
    x = relay.var("x", shape=(2, 3))
    f = testing.run_infer_type(relay.Function([x], relay.nn.relu(x)))
    assert f.ret_type == kiln.ir.TensorType((2, 3), "float32")
    body = testing.run_opt_pass(relay.add(relay.const(1.0), relay.const(2.0)), relay.transform.InferType())
    assert body.checked_type == kiln.ir.TensorType((), "float32")
    r = testing.rand("float32", 2, 3)
    assert r.shape == (2, 3) and r.dtype == "float32"
    assert testing.count(f, lambda e: isinstance(e, relay.Call)) == 1
    with testing.TempOpAttr("nn.relu", "FTVMLegalize", lambda *a: None):
        assert relay.op.get("nn.relu").has_attr("FTVMLegalize")
    assert not relay.op.get("nn.relu").has_attr("FTVMLegalize")
    out = testing.layers.conv2d(relay.var("data", shape=(1, 4, 5, 5)), channels=6, kernel_size=3, padding=1,
                                name="c")
    assert out.args[1].name_hint == "c_weight" and out.args[1].type_annotation.shape == (6, 4, 3, 3)
