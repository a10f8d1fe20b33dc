"""The ``torch.compile`` backend ``"kiln"``.

``torch.compile(model, backend="kiln", options={"opt_level": 3, "tuning_log": "tune.log"})``: dynamo hands
each captured FX graph (graph breaks are dynamo's business) with example inputs to :func:`kiln_backend`,
which traces it to TorchScript, imports it with ``relay.frontend.from_pytorch``, builds it with
``relay.build`` and returns a callable running the graph executor. A graph whose outputs have data-dependent
lengths (nonzero, masked_select, unique, x[mask]; dynamo captures them with
``torch._dynamo.config.capture_dynamic_output_shape_ops = True``, otherwise it graph-breaks before them and
runs them in PyTorch) is compiled with ``relay.vm.compile`` and runs on the Relay VM instead.

Parameters that dynamo lifts to graph inputs (``nn.Parameter`` objects) are bound into the build as
constants, so weights are folded and packed at compile time; if one of them is later modified in place
(its version counter moves) or replaced, the graph is rebuilt before running.

Inputs reach the executor through DLPack views of the torch tensors (one copy into the executor's input
buffer). Outputs are written straight into fresh torch tensors (one copy): handing out the executor's own
output buffers without a copy would let the next call overwrite tensors the caller still holds.

Registered for dynamo through the ``torch_dynamo_backends`` entry point in ``pyproject.toml``.
"""
from __future__ import annotations

from typing import Callable, Sequence

from ..error import FrontendError
from ..runtime import ndarray as nd
from . import graph_executor

__all__ = ["kiln_backend", "KilnCompiledGraph"]

_DEFAULTS = {"opt_level": 3, "tuning_log": None, "target": "llvm"}


def _options(options: dict | None) -> dict:
    opts = dict(_DEFAULTS)
    for k, v in (options or {}).items():
        if k not in _DEFAULTS:
            raise FrontendError(f"torch.compile(backend='kiln'): unknown option {k!r}; "
                                f"supported: {', '.join(sorted(_DEFAULTS))}")
        opts[k] = v
    return opts


class _Build:
    """One static build: the graph executor module and how to feed it."""

    __slots__ = ("module", "input_names", "num_outputs", "vm")

    def __init__(self, module, input_names: list, num_outputs: int, vm=None):
        self.module, self.input_names, self.num_outputs = module, input_names, num_outputs
        self.vm = vm  # a kiln.runtime.vm.VirtualMachine when the outputs have data-dependent shapes


def _has_any(ty) -> bool:
    from ..relay.ty import TensorType, TupleType
    from ..tir.expr import Any
    if isinstance(ty, TupleType):
        return any(_has_any(f) for f in ty.fields)
    return isinstance(ty, TensorType) and any(isinstance(d, Any) for d in ty.shape)


def _is_symbolic(x) -> bool:
    import torch
    return isinstance(x, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in x.shape)


class KilnCompiledGraph:
    """One dynamo graph compiled by kiln; calling it runs the graph executor on torch tensors.

    With dynamo's automatic dynamic shapes the graph takes size arguments (``SymInt`` inputs) and tensors
    whose sizes vary between calls. kiln then specializes: each distinct set of concrete input shapes and
    size values is traced and built statically once (a per-shape cache), so a new batch size costs one
    build and never an error. (Compiling once with unknown dims for the VM is docs/vm.md's next step.)
    """

    def __init__(self, gm, example_inputs: Sequence, options: dict):
        import torch
        self.gm = gm
        self.options = options
        self.frozen = [i for i, x in enumerate(example_inputs) if isinstance(x, torch.nn.Parameter)]
        self.scalar_idx = [i for i, x in enumerate(example_inputs)
                           if isinstance(x, (int, torch.SymInt)) and not isinstance(x, bool)]
        for i, x in enumerate(example_inputs):
            if not isinstance(x, torch.Tensor) and i not in self.scalar_idx:
                raise FrontendError(f"torch.compile(backend='kiln'): graph input {i} is a {type(x).__name__}; "
                                    "kiln takes tensors and integer sizes as graph inputs")
        self.runtime_idx = [i for i in range(len(example_inputs)) if i not in self.frozen
                            and i not in self.scalar_idx]
        self._builds: dict = {}
        self.frozen_state = [(id(example_inputs[i]), example_inputs[i]._version) for i in self.frozen]
        if not self.scalar_idx and not any(_is_symbolic(x) for x in example_inputs):
            self._get(example_inputs)  # static graph: build now, as before

    @property
    def module(self):
        """The graph executor module of the most recent build."""
        return self._last.module

    def _key(self, args) -> tuple:
        return (tuple(tuple(args[i].shape) for i in self.runtime_idx + self.frozen)
                + tuple(int(args[i]) for i in self.scalar_idx))

    def _get(self, args) -> _Build:
        key = self._key(args)
        b = self._builds.get(key)
        if b is None:
            b = self._builds[key] = self._build(args)
        self._last = b
        return b

    def _build(self, inputs: Sequence) -> _Build:
        import torch
        import numpy as np
        from .. import relay, transform
        from ..relay.frontend.pytorch_utils import tensor_dtype

        bf16 = [i for i, x in enumerate(inputs) if getattr(x, "dtype", None) == torch.bfloat16]
        if bf16:
            raise FrontendError(f"torch.compile(backend='kiln'): graph input(s) {bf16} are bfloat16, which kiln's "
                                "runtime cannot hold (numpy has no bfloat16); run the model in float32 "
                                "(model.float() and float32 inputs) or float16 (model.half())")
        tensor_idx = [i for i in range(len(inputs)) if i not in self.scalar_idx]
        tensors = tuple(inputs[i] for i in tensor_idx)
        fn = self.gm
        if self.scalar_idx:  # size arguments become constants of this specialization
            fn = _specialized_module(self.gm, {i: int(inputs[i]) for i in self.scalar_idx}, tensor_idx, len(inputs))
        with torch.no_grad():
            traced = torch.jit.trace(fn, tensors, check_trace=False, strict=False)
        names = [f"inp_{i}" for i in tensor_idx]
        infos = [(n, (tuple(int(d) for d in x.shape), tensor_dtype(x, f"graph input {i}")))
                 for i, n, x in zip(tensor_idx, names, tensors)]
        mod, params = relay.frontend.from_pytorch(traced, infos)
        for i in self.frozen:
            params[f"inp_{i}"] = nd.array(np.array(inputs[i].detach().cpu().numpy(), copy=True))
        target = self.options["target"]
        dynamic = _has_any(mod["main"].checked_type.ret_type)
        build = (lambda: relay.vm.compile(mod, target=target, params=params)) if dynamic else \
            (lambda: relay.build(mod, target=target, params=params))
        with transform.PassContext(opt_level=int(self.options["opt_level"])):
            log = self.options["tuning_log"]
            if log:
                from .. import autotvm
                with autotvm.apply_history_best(log):
                    lib = build()
            else:
                lib = build()
        if dynamic:
            from ..runtime.vm import VirtualMachine
            return _Build(None, [f"inp_{i}" for i in self.runtime_idx], None, VirtualMachine(lib, nd.cpu(0)))
        module = graph_executor.GraphModule(lib["default"](nd.cpu(0)))
        return _Build(module, [f"inp_{i}" for i in self.runtime_idx], module.get_num_outputs())

    def _stale(self, args) -> bool:
        return any(id(args[i]) != ident or args[i]._version != ver
                   for i, (ident, ver) in zip(self.frozen, self.frozen_state))

    def __call__(self, *args):
        import torch
        if self.frozen and self._stale(args):  # a weight changed: every specialization is out of date
            self._builds.clear()
            self.frozen_state = [(id(args[i]), args[i]._version) for i in self.frozen]
        b = self._get(args)
        if b.vm is not None:
            return self._run_vm(b, args)
        m = b.module
        for name, i in zip(b.input_names, self.runtime_idx):
            t = args[i].detach()
            if not t.is_contiguous():
                t = t.contiguous()
            m.set_input(name, nd.from_dlpack(t))
        m.run()
        outs = []
        for k in range(b.num_outputs):
            ref = m.get_output(k)
            out = torch.empty(ref.shape, dtype=_torch_dtype(ref.dtype))
            m.get_output(k, out=nd.from_dlpack(out))
            outs.append(out)
        return tuple(outs)


    def _run_vm(self, b: _Build, args) -> tuple:
        import torch
        ins = [nd.array(args[i].detach().contiguous().cpu().numpy()) for i in self.runtime_idx]
        out = b.vm.run(*ins)
        flat = []

        def collect(v):
            if isinstance(v, (list, tuple)):  # a tuple result is a VM ADT (a tuple)
                for f in v:
                    collect(f)
            else:
                flat.append(torch.from_numpy(v.numpy().copy()))
        collect(out)
        return tuple(flat)


def _specialized_module(gm, scalars: dict, tensor_idx: list, n: int):
    import torch

    class Specialized(torch.nn.Module):
        """``gm`` with its integer size inputs fixed, taking only its tensor inputs (for torch.jit.trace)."""

        def __init__(self):
            super().__init__()
            self.gm = gm

        def forward(self, *tensors):
            full = [None] * n
            for i, t in zip(tensor_idx, tensors):
                full[i] = t
            for i, v in scalars.items():
                full[i] = v
            return self.gm(*full)

    return Specialized()


def _torch_dtype(name: str):
    import torch
    return {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "int64": torch.int64,
            "int32": torch.int32, "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8,
            "bool": torch.bool}[name]


def kiln_backend(gm, example_inputs, options: dict | None = None, **kwargs) -> Callable:
    """dynamo backend: compile FX graph ``gm`` with kiln; ``options``: opt_level, tuning_log, target."""
    if "mode" in kwargs and kwargs["mode"] not in (None, "default"):
        raise FrontendError(f"torch.compile(backend='kiln'): mode={kwargs['mode']!r} is not supported; use options=")
    from .. import relay
    if not hasattr(relay, "build"):
        raise NotImplementedError("torch.compile(backend='kiln') needs relay.build, which is not available")
    return KilnCompiledGraph(gm, list(example_inputs), _options(options))
