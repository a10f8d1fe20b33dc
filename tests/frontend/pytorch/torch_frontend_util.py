"""Helpers for the PyTorch frontend tests: import a model both ways, run it, compare with PyTorch."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kiln  # noqa: E402
from kiln import relay  # noqa: E402


class Fn(torch.nn.Module):
    """Wraps a function of tensors as a module, so a one-line case can be traced (TVM's small test modules)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def import_torchvision():
    # torchvision's meta registrations clash with torch 2.13's own; they are not needed for inference
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    return pytest.importorskip("torchvision")


_DECLARED: dict = {}


def torchvision_op(name: str, schema: str, impl):
    """``torch.ops.torchvision.<name>``; where torchvision's C++ library did not load (it may not match this torch),
    the op declared with torchvision's ``schema`` and computed on CPU by ``impl`` (a PyTorch reference)."""
    try:
        return getattr(torch.ops.torchvision, name)
    except (AttributeError, RuntimeError):
        pass
    lib = torch.library.Library("torchvision", "FRAGMENT")
    lib.define(schema)
    lib.impl(name, impl, "CPU")
    _DECLARED[name] = lib  # keeps the registration alive
    return getattr(torch.ops.torchvision, name)


def _flatten(value) -> list:
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            out.extend(_flatten(v))
        return out
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.detach().numpy() if hasattr(value, "detach") else value.numpy()
    return [np.asarray(value)]


def run_relay(mod, params, inputs, executor="debug"):
    """Run ``mod`` on numpy ``inputs`` (positional, in the order of main's first params)."""
    if executor == "debug":
        ex = relay.create_executor("debug", mod=mod, device=kiln.cpu(0), target="llvm")
        out = ex.evaluate()(*inputs, **params)
        return _flatten(out)
    from kiln.contrib import graph_executor
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](kiln.cpu(0)))
    names = [p.name_hint for p in mod["main"].params][:len(inputs)]
    for n, v in zip(names, inputs):
        m.set_input(n, v)
    m.run()
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


def from_script(model, inputs):
    traced = torch.jit.trace(model, tuple(inputs), check_trace=False).eval()
    infos = [(f"input{i}", (tuple(x.shape), str(x.dtype).replace("torch.", ""))) for i, x in enumerate(inputs)]
    return relay.frontend.from_pytorch(traced, infos)


def from_export(model, inputs):
    ep = torch.export.export(model, tuple(inputs))
    return relay.frontend.from_exported_program(ep)


def verify_model(model, inputs, paths=("script", "export"), executor="debug", rtol=1e-4, atol=1e-4):
    """Import ``model`` through each path, run it, and compare every output with PyTorch's."""
    if isinstance(model, torch.nn.Module):
        model = model.eval()
    inputs = list(inputs)
    with torch.no_grad():
        expected = _flatten(model(*[x.clone() for x in inputs]))
    results = {}
    for path in paths:
        mod, params = (from_script if path == "script" else from_export)(model, inputs)
        got = run_relay(mod, params, [x.numpy() for x in inputs], executor)
        assert len(got) == len(expected), f"{path}: {len(got)} outputs, PyTorch gives {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            assert g.shape == e.shape, f"{path}: output {i} has shape {g.shape}, PyTorch gives {e.shape}"
            if e.dtype == np.bool_ or e.dtype.kind in "iu":
                np.testing.assert_array_equal(g, e, err_msg=f"{path}: output {i}")
            else:
                np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"{path}: output {i}")
        results[path] = (mod, params)
    return results
