"""Shared by the test_torchfe_tvm_era_*.py files: run a model the ways TVM v0.13's PyTorch frontend tests do.

``check`` traces the model, imports it with ``relay.frontend.from_pytorch``, builds it at opt level 3 for llvm and
runs it on the graph executor (TVM's ``verify_model``); ``check_vm`` does the same on the Relay VM (TVM's
``verify_trace_model``, for outputs whose shape depends on the data); ``check_script`` scripts the model instead of
tracing it (TVM's ``verify_script_model``). Every output is compared with PyTorch's.
"""
from __future__ import annotations

import numpy as np

from torch_frontend_util import _flatten, run_relay, torch

import kiln as tvm
from kiln import relay


def _infos(inputs):
    return [(f"input{i}", (tuple(x.shape), str(x.dtype).replace("torch.", ""))) for i, x in enumerate(inputs)]


def _expected(model, inputs):
    with torch.no_grad():
        return _flatten(model(*[x.clone() for x in inputs]))


def compare(got, expected, rtol, atol, shape_only=False):
    assert len(got) == len(expected), f"{len(got)} outputs, PyTorch gives {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        g = np.asarray(g)
        assert g.shape == e.shape, f"output {i} has shape {g.shape}, PyTorch gives {e.shape}"
        if shape_only:
            continue
        if e.dtype == np.bool_ or e.dtype.kind in "iu":
            np.testing.assert_array_equal(g, e, err_msg=f"output {i}")
        else:
            assert g.dtype == e.dtype, f"output {i} has dtype {g.dtype}, PyTorch gives {e.dtype}"
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"output {i}")


def trace(model, inputs):
    if isinstance(model, torch.nn.Module):
        model = model.eval()
    with torch.no_grad():
        return torch.jit.trace(model, tuple(x.clone() for x in inputs), check_trace=False)


def check(model, inputs, rtol=1e-5, atol=1e-5, shape_only=False, executor="graph"):
    """Trace, import, build with relay.build (opt level 3), run on the graph executor, compare with PyTorch."""
    inputs = list(inputs)
    if isinstance(model, torch.nn.Module):
        model = model.eval()
    expected = _expected(model, inputs)
    mod, params = relay.frontend.from_pytorch(trace(model, inputs), _infos(inputs))
    got = run_relay(mod, params, [x.numpy() for x in inputs], executor)
    compare(got, expected, rtol, atol, shape_only)
    return mod, params


def _run_vm(mod, params, inputs):
    from kiln.runtime.vm import VirtualMachine
    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm", params=params)
    out = VirtualMachine(exe, tvm.cpu()).run(*inputs)
    return _flatten(out if isinstance(out, (list, tuple)) else [out])


def check_vm(model, inputs, rtol=1e-5, atol=1e-5):
    """Trace, import, compile for the VM, run, compare with PyTorch (data-dependent output shapes)."""
    inputs = list(inputs)
    expected = _expected(model, inputs)
    mod, params = relay.frontend.from_pytorch(trace(model, inputs), _infos(inputs))
    compare(_run_vm(mod, params, [x.numpy() for x in inputs]), expected, rtol, atol)
    return mod, params


def check_script(model, shapes, dtype=torch.float32, rtol=1e-5, atol=1e-5):
    """Script the model (``torch.jit.script``), import it with the given input shapes, run it on the VM."""
    inputs = [torch.randn(s).to(dtype) if dtype.is_floating_point else torch.randint(-5, 5, s).to(dtype)
              for s in shapes]
    expected = _expected(model, inputs)
    scripted = torch.jit.script(model.eval())
    infos = [(f"input{i}", (tuple(s), str(dtype).replace("torch.", ""))) for i, s in enumerate(shapes)]
    mod, params = relay.frontend.from_pytorch(scripted, infos)
    compare(_run_vm(mod, params, [x.numpy() for x in inputs]), expected, rtol, atol)
    return mod, params
