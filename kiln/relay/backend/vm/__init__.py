"""The Relay VM on the compiler side (TVM's ``relay.backend.vm``): ``compile``, ``VMCompiler``, ``VMExecutor``.

The runtime half (``Executable``, ``VirtualMachine``) lives in :mod:`kiln.runtime.vm`. See docs/vm.md.
"""
from __future__ import annotations

from ....runtime.vm import ADT, Executable, VirtualMachine  # noqa: F401
from ..executor import Executor, _convert_args
from .compiler import VMCompiler, compile  # noqa: F401,A004
from ....error import KilnError
from ....ir.expr import GlobalVar
from ....ir.module import IRModule
from ... import transform as T


class VMExecutor(Executor):
    """``relay.create_executor("vm", mod, device, target)``: compile to bytecode, run on a VirtualMachine."""

    def __init__(self, mod, device=None, target="llvm", params=None):
        super().__init__(mod, device, target)
        self.params = params or {}
        self.executable = None
        self.vm = None

    def _make_executor(self, expr=None):
        mod = IRModule(dict(self.mod.functions), getattr(self.mod, "type_definitions", None))
        if expr is not None and not isinstance(expr, GlobalVar):
            mod["main"] = expr
        elif isinstance(expr, GlobalVar) and expr.name_hint != "main":
            mod["main"] = mod[expr.name_hint]
        if "main" not in mod:
            raise KilnError("vm: the module has no @main function")
        if self.params:
            from ...build_module import bind_params_by_name
            mod["main"] = bind_params_by_name(mod["main"], self.params)
        main = T.InferType()(mod)["main"]
        self.executable = compile(mod, self.target)
        self.vm = VirtualMachine(self.executable, self.device)
        vm = self.vm

        def _vm_wrapper(*args, **kwargs):
            return vm.run(*_convert_args(main, args, kwargs))

        _vm_wrapper.executable = self.executable
        _vm_wrapper.vm = vm
        return _vm_wrapper
