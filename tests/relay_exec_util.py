"""Build a Relay function for llvm and run it on the graph executor or the VM: the small helpers that tests in
several folders (tests/relay, tests/relay/op, tests/vm) share. tests/ is on sys.path (tests/conftest.py)."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

import kiln
from kiln import relay
from kiln.contrib import graph_executor
from kiln.runtime.vm import VirtualMachine


def as_module(expr) -> kiln.IRModule:
    """An IRModule from a module, a relay.Function, or a bare expression (a function over its free vars)."""
    if isinstance(expr, kiln.IRModule):
        return expr
    if not isinstance(expr, relay.Function):
        expr = relay.Function(relay.analysis.free_vars(expr), expr)
    return kiln.IRModule.from_expr(expr)


def graph_run(expr, inputs: Sequence | Mapping = (), params: dict | None = None, target="llvm",
              opt_level: int | None = None) -> list[np.ndarray]:
    """relay.build ``expr`` (see as_module) and run it once on the graph executor: every output, as numpy.
    ``inputs``: a name -> array mapping, or arrays in the order of main's parameters. ``opt_level``: build
    inside a PassContext of that level (None: the default context)."""
    mod = as_module(expr)
    if opt_level is None:
        lib = relay.build(mod, target=target, params=params)
    else:
        with kiln.transform.PassContext(opt_level=opt_level):
            lib = relay.build(mod, target=target, params=params)
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    if not isinstance(inputs, Mapping):
        names = [p.name_hint for p in mod["main"].params if p.name_hint not in (params or {})]
        inputs = dict(zip(names, inputs))
    for name, a in inputs.items():
        m.set_input(name, a)
    m.run()
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


def vm_of(expr, params: dict | None = None, target="llvm", opt_level: int | None = None) -> VirtualMachine:
    """A VirtualMachine on the CPU running ``expr`` (see as_module) compiled by relay.vm.compile; ``opt_level``
    as in graph_run."""
    mod = as_module(expr)
    if opt_level is None:
        exe = relay.vm.compile(mod, target=target, params=params)
    else:
        with kiln.transform.PassContext(opt_level=opt_level):
            exe = relay.vm.compile(mod, target=target, params=params)
    return VirtualMachine(exe, kiln.cpu())


def vm_outputs(res) -> list[np.ndarray]:
    """A VM result (one tensor, or a tuple / ADT of them) as a list of numpy arrays."""
    if hasattr(res, "numpy"):
        return [res.numpy()]
    return [r.numpy() for r in res]
