"""An ONNX backend (``onnx.backend.base.Backend``) that runs models with kiln.

``KilnBackend.prepare(model, "CPU")`` gives a :class:`KilnBackendRep`; its ``run(inputs)`` imports the model
with ``relay.frontend.from_onnx`` (input shapes taken from the inputs, so models with symbolic dims work),
compiles it with ``relay.build`` for the CPU like a user would, and runs it on the graph executor. Builds are
cached per input signature in memory, and the exported library on disk (``$KILN_CACHE_DIR/onnx_backend``, keyed by
model, input signature and kiln's source), so a second run of the same model loads instead of compiling.

Two ways to treat inputs that decide shapes (a Reshape target fed by a graph input, ...):

- ``specialize=True`` (the default; ``KILN_ONNX_SPECIALIZE=0`` turns it off): such inputs are bound to their
  current values and the build is specialized on them (cached per value), all on the graph executor;
- ``specialize=False``: as ONNX Runtime runs the model, every input stays a run-time value; shape operands
  become ``dyn.*`` ops and a model that stays dynamic after DynamicToStatic runs on the Relay VM.

This is what lets the ONNX backend test suite (``onnx.backend.test.BackendTest(KilnBackend, __name__)``)
run against kiln. Setting ``KILN_ONNX_EXECUTOR=debug`` runs the reference interpreter instead of compiling
(useful to tell a frontend bug from a codegen bug).
"""
from __future__ import annotations

import hashlib
import os

import numpy as np

try:
    from onnx.backend.base import Backend, BackendRep
except ImportError:  # pragma: no cover - onnx is an optional dependency of kiln
    raise ImportError("kiln.contrib.onnx_backend needs the 'onnx' package") from None

from ..error import ArgumentError, OpNotImplemented
from ..relay.frontend.onnx import from_onnx
from ..relay.backend.vm import compile as vm_compile
from ..relay.backend.lowered_cache import kiln_source_hash
from ..runtime.vm import VirtualMachine
from . import graph_executor
from .. import cpu, transform
from ..relay.build_module import create_executor, build
from ..runtime import disk_cache, load_module
from ..relay.transform.dynamic_to_static import dynamic_to_static, has_dyn_ops
from ..ir.type import TensorType, TupleType
from ..relay.transform import InferType

__all__ = ["KilnBackend", "KilnBackendRep", "prepare", "run_model", "supports_device"]


def _graph_inputs(model) -> list:
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


class KilnBackendRep(BackendRep):
    """A prepared model: converts and compiles on first run for each input signature."""

    def __init__(self, model, device: str = "CPU", target: str = "llvm", opt_level: int = 3,
                 executor: str | None = None, specialize: bool | None = None):
        super().__init__()
        self.model = model
        self.device = device
        self.target = target
        self.opt_level = opt_level
        self.executor = executor or os.environ.get("KILN_ONNX_EXECUTOR", "graph")
        if self.executor not in ("graph", "debug"):
            raise ArgumentError(f"executor must be 'graph' or 'debug', got {self.executor!r}")
        self.input_names = [i.name for i in _graph_inputs(model)]
        self.output_names = [o.name for o in model.graph.output]
        if specialize is None:
            specialize = os.environ.get("KILN_ONNX_SPECIALIZE", "1") != "0"
        self.specialize = bool(specialize)
        self._compiled: dict = {}
        self._specialized: dict = {}  # input signature -> names of inputs the build is specialized on

    # -- inputs ------------------------------------------------------------------------------------------------
    def _named_inputs(self, inputs) -> dict:
        if isinstance(inputs, dict):
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise ArgumentError(f"missing model inputs {missing} (the model takes {self.input_names})")
            return {n: np.asarray(inputs[n]) for n in self.input_names}
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        inputs = list(inputs)
        if len(inputs) != len(self.input_names):
            raise ArgumentError(f"the model takes {len(self.input_names)} inputs {self.input_names}, "
                                f"got {len(inputs)}")
        for n, v in zip(self.input_names, inputs):
            if isinstance(v, (list, tuple, dict)) or v is None:
                raise ArgumentError(f"input {n!r} is a {type(v).__name__}; kiln runs models on tensor inputs only")
        return {n: np.asarray(v) for n, v in zip(self.input_names, inputs)}

    # -- compile and run ---------------------------------------------------------------------------------------------
    def _import(self, named: dict):
        """from_onnx on the model; inputs that decide shapes (a Reshape target fed by a graph input, ...) are
        bound to their current values, so the compiled model is specialized on them."""
        bound: dict = {}
        if not self.specialize:  # every input is a run-time value (dyn.* ops where shapes depend on them)
            mod, params = from_onnx(self.model, shape={n: v.shape for n, v in named.items()})
            return mod, params, bound
        while True:
            model = self.model if not bound else _bind_inputs(self.model, bound)
            try:
                mod, params = from_onnx(model, shape={n: v.shape for n, v in named.items() if n not in bound},
                                        convert_config={"use_dyn_ops": False})
                return mod, params, bound
            except OpNotImplemented as err:
                wanted = [n for n in getattr(err, "runtime_inputs", []) if n in named and n not in bound]
                if not wanted:
                    raise
                for n in wanted:
                    bound[n] = named[n]

    def _compile(self, named: dict):
        key = tuple((n, v.shape, str(v.dtype)) for n, v in named.items())
        spec_key = self._specialized.get(key)
        if spec_key is not None:
            key = key + tuple((n, named[n].tobytes()) for n in spec_key)
        hit = self._compiled.get(key)
        if hit is not None:
            return hit
        mod, params, bound = self._import(named)
        if bound:
            self._specialized[key] = sorted(bound)
            key = key + tuple((n, named[n].tobytes()) for n in sorted(bound))
        if self.executor == "debug":
            fn = create_executor("debug", mod=mod, device=cpu(0), target=self.target).evaluate()
            names = [p.name_hint for p in mod["main"].params]
            runner = ("debug", fn, names, params)
        elif _has_control_flow(mod) or (not self.specialize and _is_dynamic(mod)):
            with transform.PassContext(opt_level=self.opt_level):
                exe = vm_compile(mod, target=self.target, params=params)
            ret = InferType()(mod)["main"].checked_type.ret_type
            runner = ("vm", VirtualMachine(exe, cpu(0)), isinstance(ret, TupleType), None)
        else:
            lib = self._build(mod, params, named, bound)
            gmod = graph_executor.GraphModule(lib["default"](cpu(0)))
            runner = ("graph", gmod, None, None)
        runner = runner + (set(bound),)
        self._compiled[key] = runner
        return runner

    def _build(self, mod, params, named: dict, bound: dict):
        """relay.build, or the library a previous identical build exported to the artifact cache."""
        path = _artifact_path(self.model, named, bound, self.target, self.opt_level, self.specialize)
        if path is not None and os.path.exists(path):
            try:
                lib = load_module(path)
                disk_cache.touch(path)  # recently used: the cache's size cap keeps it
                return lib
            except Exception:  # noqa: BLE001 (a damaged cache entry is rebuilt)
                pass
        with transform.PassContext(opt_level=self.opt_level):
            lib = build(mod, target=self.target, params=params)
        if path is not None:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp.so"
            try:
                lib.export_library(tmp)
                os.replace(tmp, path)  # atomic: parallel runners never see half a file
                disk_cache.after_write()
            except Exception:  # noqa: BLE001 (caching is an optimization; the build itself succeeded)
                if os.path.exists(tmp):
                    os.remove(tmp)
        return lib

    def run(self, inputs, **kwargs) -> list:
        """Run the model; ``inputs`` is a list in graph-input order, a dict by name, or one array."""
        named = self._named_inputs(inputs)
        kind, fn, names, params, bound = self._compile(named)
        named = {n: v for n, v in named.items() if n not in bound}
        if kind == "debug":
            args = [named[n] if n in named else params[n] for n in names]
            result = fn(*args)
            values = list(result) if isinstance(result, (tuple, list)) else [result]
            outs = [np.asarray(v.numpy() if hasattr(v, "numpy") else v) for v in values]
        elif kind == "vm":
            result = fn.run(**{n: np.array(v, order="C") for n, v in named.items()})
            values = list(result) if names else [result]  # names: whether @main returns a tuple of the outputs
            outs = [_to_numpy(v) for v in values]
        else:
            for n, v in named.items():
                fn.set_input(n, np.array(v, order="C"))
            fn.run()
            outs = [fn.get_output(k).numpy() for k in range(fn.get_num_outputs())]
        if len(outs) != len(self.output_names):
            raise ArgumentError(f"kiln produced {len(outs)} outputs, the model declares {len(self.output_names)}")
        return outs


def _to_numpy(value):
    """A VM result as numpy: a tensor, or a list for a tuple (an ONNX sequence output)."""
    if hasattr(value, "numpy"):
        return value.numpy()
    return [_to_numpy(v) for v in value]


def _has_control_flow(mod) -> bool:
    """Whether @main has an If, a local function (the loops ONNX Loop/Scan become) or returns a nested tuple
    (an ONNX sequence output): all need the VM (the graph executor runs flat dataflow graphs)."""
    from ..relay.expr import Call, Function, If, Let, Tuple, TupleGetItem
    main = mod["main"]
    ret = InferType()(mod)["main"].checked_type.ret_type
    if isinstance(ret, TupleType) and any(isinstance(f, TupleType) for f in ret.fields):
        return True
    stack, seen = [main.body], set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, (If, Function)):
            return True
        if isinstance(e, Call):
            stack.append(e.op)
            stack.extend(e.args)
        elif isinstance(e, Tuple):
            stack.extend(e.fields)
        elif isinstance(e, TupleGetItem):
            stack.append(e.tuple_value)
        elif isinstance(e, Let):
            stack.extend([e.value, e.body])
    return False


def _is_dynamic(mod) -> bool:
    """Whether ``mod`` still needs the VM after DynamicToStatic (dyn.* calls or unknown dims in @main)."""
    if has_dyn_ops(mod):
        mod = dynamic_to_static(mod)
        if has_dyn_ops(mod):
            return True
    ft = InferType()(mod)["main"].checked_type

    def dynamic(t):
        if isinstance(t, TupleType):
            return any(dynamic(f) for f in t.fields)
        return isinstance(t, TensorType) and t.is_dynamic()
    return any(dynamic(t) for t in list(ft.arg_types) + [ft.ret_type])


def _artifact_path(model, named: dict, bound: dict, target: str, opt_level: int,
                   specialize: bool = True) -> str | None:
    """Where the compiled library for this model and input signature is cached (None: caching is off).

    Keyed by the model bytes, the input shapes/dtypes, the import mode (specialized imports convert without
    dyn.* ops, and may drop an input whose value decides nothing, e.g. empty Reduce axes), the values of inputs
    the build is specialized on, the target, the opt level and kiln's source, under ``$KILN_CACHE_DIR/onnx_backend`` (``KILN_ONNX_CACHE=0``
    turns it off)."""
    if os.environ.get("KILN_ONNX_CACHE", "1") == "0":
        return None
    h = hashlib.sha256(model.SerializeToString())
    for n, v in named.items():
        h.update(f"{n}:{v.shape}:{v.dtype};".encode())
        if n in bound:
            h.update(np.ascontiguousarray(v).tobytes())
    h.update(f"{target}|{opt_level}|specialize={bool(specialize)}|{kiln_source_hash()}".encode())
    return os.path.join(disk_cache.cache_root(), "onnx_backend", h.hexdigest()[:40] + ".so")


def _bind_inputs(model, values: dict):
    """A copy of ``model`` whose graph inputs in ``values`` are initializers holding those values."""
    from onnx import numpy_helper
    m = type(model)()
    m.CopyFrom(model)
    keep = [i for i in m.graph.input if i.name not in values]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    for name, v in values.items():
        m.graph.initializer.append(numpy_helper.from_array(np.asarray(v), name))
    return m


class KilnBackend(Backend):
    """``onnx.backend.base.Backend`` for kiln (CPU only)."""

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> KilnBackendRep:
        super().prepare(model, device, **kwargs)  # runs onnx.checker
        if not cls.supports_device(device):
            raise ArgumentError(f"kiln's ONNX backend runs on CPU, not {device!r}")
        return KilnBackendRep(model, device, target=kwargs.get("target", "llvm"),
                              opt_level=kwargs.get("opt_level", 3), executor=kwargs.get("executor"),
                              specialize=kwargs.get("specialize"))

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs) -> list:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper().split(":")[0] == "CPU"


prepare = KilnBackend.prepare
run_model = KilnBackend.run_model
supports_device = KilnBackend.supports_device
