"""The Relay virtual machine's runtime (TVM's ``tvm.runtime.vm``): ``Executable`` and ``VirtualMachine``.

An Executable is bytecode (one instruction list per VM function, register-based, as TVM's VM), constants
and a kernel library. The VirtualMachine runs the bytecode with a dispatch loop: kernels are called through
their ABI wrappers, tensor storage comes from a per-VM pool keyed by byte size (a tensor's buffer goes back
to the pool when the last reference to the tensor dies), and the output shapes of kernels with unknown
dims are computed from the kernel's output-shape expressions (the compiled shape function; docs/vm.md).

This module imports nothing of the compiler: a saved executable loads and runs without kiln.relay.
Serialized executables are JSON plus raw constant bytes: loading one never executes code.
"""
from __future__ import annotations

import json
import math
import struct
import time
import weakref

import numpy as np

from ..error import ArgumentError, KilnError, ModuleLoadError
from . import ndarray as nd
from .kernel import _EXPR_GLOBALS, _compile_extent
from .module import Module
from .ndarray import NDArray
from .registry import register_func
from .thread_policy import tick as _thread_tick
from .vm_replay import ReplayRunner, is_straight_line
from .vm_shape_funcs import DYN_SHAPE_FUNCS, run_shape_func

_MAGIC = b"KILNVMX1"
_UINT8 = np.dtype(np.uint8)
_CPU = nd.cpu(0)
_VERSION = 1

# opcode -> number of operand fields (for validation of loaded bytecode)
OPCODES = {
    "move": 2,              # src, dst
    "ret": 1,               # result
    "load_const": 2,        # const_index, dst
    "load_consti": 2,       # int value, dst
    "alloc_tensor": 3,      # static shape (list), dtype, dst
    "kernel_shapes": 3,     # packed_index, [arg regs], [dst regs]: output shapes of a kernel from its inputs
    "alloc_tensor_reg": 3,  # shape reg, dtype, dst
    "invoke_packed": 2,     # packed_index, [arg regs] (inputs, then outputs)
    "alloc_adt": 3,         # tag, [field regs], dst
    "get_field": 3,         # object reg, index, dst
    "get_tag": 2,           # object reg, dst
    "tag_eq": 3,            # object reg, tag, dst: whether the ADT value was built by constructor ``tag``
    "if": 3,                # condition reg, true offset, false offset (relative jumps)
    "goto": 1,              # relative offset
    "invoke": 3,            # function index, [arg regs], dst
    "alloc_closure": 3,     # function index, [captured regs], dst
    "invoke_closure": 3,    # closure reg, [arg regs], dst
    "shape_of": 2,          # tensor reg, dst (an int64 tensor)
    "shape_of_t": 3,        # tensor reg, dtype, dst: the shape as a 1-D tensor of that integer dtype
    "shape_func": 4,        # op name, attrs (JSON), [input regs], [dst regs]: a data-dependent shape function
                            # run on the host over the input values (the dyn.* ops; vm_shape_funcs.py)
    "reshape_tensor": 3,    # tensor reg, shape reg (int tensor or shape tuple), dst
    "fatal": 1,             # message
}


class ADT(tuple):
    """An algebraic data type value (TVM's ``runtime.container.ADT``): a tuple of fields with a ``tag``
    (tuples have tag 0; a constructor's values carry its tag)."""

    def __new__(cls, tag: int, fields=()):
        obj = super().__new__(cls, fields)
        obj.tag = int(tag)
        return obj

    def __repr__(self) -> str:
        return f"ADT(tag={self.tag}, " + ", ".join(repr(v) for v in self) + ")"


class VMClosure:
    """A function value: a VM function index and its captured values."""

    __slots__ = ("func_index", "captured")

    def __init__(self, func_index: int, captured: list):
        self.func_index = func_index
        self.captured = captured


class VMFunction:
    """One function of the executable: name, parameter names, register count, instructions."""

    def __init__(self, name: str, params: list, num_regs: int, instructions: list, param_types=None):
        self.name = name
        self.params = list(params)
        self.num_regs = int(num_regs)
        self.instructions = [list(i) for i in instructions]
        self.param_types = param_types  # per param: [shape with -1 for unknown dims, dtype] or None

    def to_json(self) -> dict:
        return {"name": self.name, "params": self.params, "num_regs": self.num_regs,
                "instructions": self.instructions, "param_types": self.param_types}


def _fmt_instr(i: list) -> str:
    return i[0] + " " + " ".join(json.dumps(x) if not isinstance(x, str) else x for x in i[1:])


class Executable:
    """Compiled VM program: ``bytecode`` (text), ``stats``, ``save()`` / ``Executable.load_exec``."""

    def __init__(self, functions: list, constants: list, packed_names: list, lib):
        self.functions = functions
        self.constants = [np.array(c, copy=True, order="C") for c in constants]
        self.packed_names = list(packed_names)
        self.lib = lib
        self.func_index = {f.name: k for k, f in enumerate(functions)}
        self._validate()

    def _validate(self) -> None:
        nfunc, nconst, npacked = len(self.functions), len(self.constants), len(self.packed_names)
        for f in self.functions:
            for pc, ins in enumerate(f.instructions):
                where = f"VM function {f.name!r}, instruction {pc}"
                if not ins or ins[0] not in OPCODES or len(ins) - 1 != OPCODES[ins[0]]:
                    raise ModuleLoadError(f"{where}: bad instruction {ins!r}")
                op = ins[0]
                if op in ("invoke", "alloc_closure") and not 0 <= ins[1] < nfunc:
                    raise ModuleLoadError(f"{where}: function index {ins[1]} out of range")
                if op == "load_const" and not 0 <= ins[1] < nconst:
                    raise ModuleLoadError(f"{where}: constant index {ins[1]} out of range")
                if op == "shape_func" and (ins[1] not in DYN_SHAPE_FUNCS or not isinstance(ins[2], dict)):
                    raise ModuleLoadError(f"{where}: unknown run-time shape function {ins[1]!r}")
                if op in ("invoke_packed", "kernel_shapes") and not 0 <= ins[1] < npacked:
                    raise ModuleLoadError(f"{where}: kernel index {ins[1]} out of range")
                regs = _regs_of(ins)
                if any(not isinstance(r, int) or not 0 <= r < f.num_regs for r in regs):
                    raise ModuleLoadError(f"{where}: register out of range in {ins!r}")
                if op in ("if", "goto"):
                    for off in ins[2:] if op == "if" else ins[1:]:
                        if not 0 <= pc + off <= len(f.instructions):
                            raise ModuleLoadError(f"{where}: jump outside the function")

    # -- inspection ---------------------------------------------------------------------------------
    @property
    def bytecode(self) -> str:
        lines = []
        for k, f in enumerate(self.functions):
            lines.append(f"VM Function[{k}]: {f.name}({', '.join(f.params)})")
            lines.append(f"# reg file size = {f.num_regs}")
            lines.append(f"# instruction count = {len(f.instructions)}")
            lines.append("opcode, fields # inst(text):")
            for pc, ins in enumerate(f.instructions):
                lines.append(f" {pc}: {_fmt_instr(ins)}")
            lines.append("")
        return "\n".join(lines)

    @property
    def stats(self) -> str:
        lines = ["Relay VM executable statistics:", f"  Constant shapes (# {len(self.constants)}): "
                 + "[" + ", ".join(str(tuple(c.shape)) for c in self.constants) + "]",
                 f"  Globals (#{len(self.functions)}): [" + ", ".join(f'("{f.name}", {k})' for k, f in
                                                                  enumerate(self.functions)) + "]",
                 f"  Primitive ops (#{len(self.packed_names)}): [" + ", ".join(self.packed_names) + "]"]
        return "\n".join(lines)

    @property
    def globals(self) -> list:
        return [f.name for f in self.functions]

    @property
    def primitive_ops(self) -> list:
        return list(self.packed_names)

    def get_function_arity(self, func_name: str) -> int:
        """Number of parameters of ``func_name`` (TVM's ``Executable.get_function_arity``; -1 if absent)."""
        k = self.func_index.get(func_name)
        return -1 if k is None else len(self.functions[k].params)

    def get_function_param_name(self, func_name: str, index: int) -> str:
        """Name of parameter ``index`` of ``func_name`` (TVM's ``Executable.get_function_param_name``)."""
        k = self.func_index.get(func_name)
        if k is None:
            raise ArgumentError(f"the VM executable has no function {func_name!r} (it has {self.globals})")
        params = self.functions[k].params
        if not 0 <= index < len(params):
            raise ArgumentError(f"{func_name} has {len(params)} parameters; index {index} is out of range")
        return params[index]

    def get_lib(self):
        return self.lib

    @property
    def mod(self) -> "VMExecutableModule":
        """The executable as a runtime Module (TVM's ``exe.mod``): ``exe.mod.export_library("m.so")`` writes
        bytecode, constants and kernels to one file; ``VirtualMachine(load_module("m.so"), dev)`` runs it."""
        code, lib = self.save()
        return VMExecutableModule(bytes(code), lib)

    @staticmethod
    def from_module(mod: Module) -> "Executable":
        """The Executable held by a loaded ``VMExecutable`` module (its ``vm_load_executable``)."""
        if not isinstance(mod, VMExecutableModule):
            raise ArgumentError(f"expected a VMExecutable module (from exe.mod.export_library), got "
                                f"{getattr(mod, 'type_key', type(mod).__name__)}")
        return mod["vm_load_executable"]()

    # -- serialization --------------------------------------------------------------------------------
    def save(self):
        """(bytecode bytes, lib): JSON program + raw constants; the kernels stay in ``lib`` (export it with
        ``lib.export_library(path)``)."""
        const_meta, blobs, offset = [], [], 0
        for c in self.constants:
            raw = c.tobytes()
            dtype = "bool" if c.dtype == np.bool_ else str(c.dtype)
            const_meta.append({"shape": list(c.shape), "dtype": dtype, "offset": offset, "nbytes": len(raw)})
            blobs.append(raw)
            offset += len(raw)
        header = json.dumps({"version": _VERSION, "functions": [f.to_json() for f in self.functions],
                             "constants": const_meta, "packed": self.packed_names}).encode("utf-8")
        code = _MAGIC + struct.pack("<Q", len(header)) + header + b"".join(blobs)
        return bytearray(code), self.lib

    @staticmethod
    def load_exec(bytecode, lib) -> "Executable":
        """Rebuild an Executable from ``save()``'s bytes and its kernel library (no code is executed)."""
        code = bytes(bytecode)
        if len(code) < 16 or code[:8] != _MAGIC:
            raise ModuleLoadError("not a kiln VM executable (bad magic); expected the bytes of Executable.save()")
        (hlen,) = struct.unpack("<Q", code[8:16])
        if 16 + hlen > len(code):
            raise ModuleLoadError("truncated VM executable (header runs past the end)")
        try:
            header = json.loads(code[16:16 + hlen].decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ModuleLoadError(f"corrupt VM executable header: {err}") from None
        if header.get("version") != _VERSION:
            raise ModuleLoadError(f"VM executable version {header.get('version')} is not supported "
                                  f"(expected {_VERSION})")
        data = code[16 + hlen:]
        consts = []
        try:
            for m in header["constants"]:
                lo, n = int(m["offset"]), int(m["nbytes"])
                if lo < 0 or lo + n > len(data):
                    raise ModuleLoadError("truncated VM executable (constant data missing)")
                dtype = np.dtype(np.bool_ if m["dtype"] == "bool" else m["dtype"])
                arr = np.frombuffer(data[lo:lo + n], dtype=dtype).reshape([int(s) for s in m["shape"]])
                consts.append(arr.copy())
            funcs = [VMFunction(f["name"], f["params"], f["num_regs"], f["instructions"], f.get("param_types"))
                     for f in header["functions"]]
            packed = [str(p) for p in header["packed"]]
        except (KeyError, TypeError, ValueError) as err:
            raise ModuleLoadError(f"corrupt VM executable: {type(err).__name__}: {err}") from None
        return Executable(funcs, consts, packed, lib)


def _regs_of(ins: list) -> list:
    op = ins[0]
    if op in ("move", "get_tag", "shape_of"):
        return [ins[1], ins[2]]
    if op in ("ret", "goto", "fatal"):
        return [ins[1]] if op == "ret" else []
    if op in ("load_const", "load_consti", "alloc_tensor"):
        return [ins[-1]]
    if op in ("kernel_shapes", "shape_func"):
        return list(ins[-2]) + list(ins[-1])
    if op == "shape_of_t":
        return [ins[1], ins[3]]
    if op == "alloc_tensor_reg":
        return [ins[1], ins[3]]
    if op == "invoke_packed":
        return list(ins[2])
    if op in ("alloc_adt", "invoke", "alloc_closure"):
        return list(ins[2]) + [ins[3]]
    if op in ("get_field", "tag_eq"):
        return [ins[1], ins[3]]
    if op == "if":
        return [ins[1]]
    if op == "invoke_closure":
        return [ins[1]] + list(ins[2]) + [ins[3]]
    if op == "reshape_tensor":
        return [ins[1], ins[2], ins[3]]
    return []


class _ShapeFunc:
    """A kernel's output shapes from its input shapes: the output-shape expressions of its ABI metadata."""

    def __init__(self, meta: dict):
        name = meta.get("name", "?")
        self.name = name
        self.binders = []   # (arg position among inputs, axis, var)
        self.outputs = []   # per output: list of ("int", v) | ("var", name) | ("expr", code)
        pos = 0
        for a in meta.get("args", []):
            if a.get("kind", "buffer") != "buffer":
                raise KilnError(f"{name}: the VM calls kernels with tensor arguments only")
            dims = []
            for axis, d in enumerate(a.get("shape", [])):
                if isinstance(d, int):
                    dims.append(("int", d))
                elif isinstance(d, str):
                    dims.append(("var", d))
                else:
                    dims.append(("expr", _compile_extent(d["expr"], name, a.get("name", "?"))[0]))
            if a.get("output"):
                self.outputs.append(dims)
            else:
                for axis, (kind, v) in enumerate(dims):
                    if kind == "var":
                        self.binders.append((pos, axis, v))
                pos += 1

    def __call__(self, inputs: list) -> list:
        env = {}
        for pos, axis, var in self.binders:
            env.setdefault(var, inputs[pos]._shape[axis])
        out = []
        for dims in self.outputs:
            shape = []
            for kind, v in dims:
                if kind == "int":
                    shape.append(v)
                elif kind == "var":
                    shape.append(env[v])
                else:
                    shape.append(int(eval(v, _EXPR_GLOBALS, env)))  # noqa: S307 - AST whitelisted
            out.append(tuple(shape))
        return out


def _static_tensor_spec(ty):
    """(shape, numpy dtype, dtype, nbytes) of a tensor parameter whose shape is static and whose dtype numpy
    names the same way; None for anything else (tuples, dynamic dims: the general conversion handles them)."""
    if ty is None or ty[0] != "tensor" or any(int(d) < 0 for d in ty[1]):
        return None
    try:
        np_dtype = nd._np_dtype_of(ty[2])
    except KilnError:
        return None
    if nd._dtype_name(np_dtype) != ty[2]:
        return None
    shape = tuple(int(d) for d in ty[1])
    return shape, np_dtype, ty[2], math.prod(shape) * np_dtype.itemsize


class _StoragePool:
    """Tensor buffers reused across calls, keyed by byte size (TVM's pooled allocator). A buffer returns to
    the pool when the last reference to its tensor dies (a weak reference's callback); each keeps its address
    and its typed views by shape, so taking one again costs no numpy view or address query."""

    def __init__(self):
        self.free: dict = {}     # nbytes -> [entry]; entry = [raw uint8 buffer, address, {(shape, dtype): view}]
        self._live: dict = {}    # weak reference to a tensor handed out -> (nbytes, entry)
        self.allocated = 0   # fresh buffers made
        self.reused = 0      # buffers taken from the pool

    def tensor(self, shape: tuple, dtype: str) -> NDArray:
        np_dtype = np.dtype(np.bool_ if dtype == "bool" else dtype)
        shape = tuple(int(d) for d in shape)
        nbytes = math.prod(shape) * np_dtype.itemsize
        return self.tensor_of(shape, np_dtype, nd._dtype_name(np_dtype), nbytes)

    def tensor_of(self, shape: tuple, np_dtype: np.dtype, dtype: str, nbytes: int) -> NDArray:
        """``tensor`` with the byte size and dtype names known (the replay plans' per-call allocations)."""
        bucket = self.free.get(nbytes)
        if bucket:
            entry = bucket.pop()
            self.reused += 1
        else:
            raw = nd._aligned_empty((max(nbytes, 1),), _UINT8, huge=True)
            entry = [raw, raw.__array_interface__["data"][0], {}]
            self.allocated += 1
        key = (shape, dtype)
        view = entry[2].get(key)
        if view is None:
            view = entry[2][key] = entry[0][:nbytes].view(np_dtype).reshape(shape)
        arr = NDArray._compact(view, shape, dtype, entry[1], nbytes, _CPU)
        self._live[weakref.ref(arr, self._release)] = (nbytes, entry)
        return arr

    def _release(self, ref) -> None:
        nbytes, entry = self._live.pop(ref)
        self.free.setdefault(nbytes, []).append(entry)


class VMExecutableModule(Module):
    """A VM executable inside a runtime Module tree: bytecode blob + the imported kernel library."""

    type_key = "VMExecutable"

    def __init__(self, code: bytes, lib=None):
        super().__init__()
        self.code = bytes(code)
        if lib is not None:
            self.import_module(lib)

    def _load(self) -> Executable:
        if not self._imports:
            raise ModuleLoadError("the VM executable module has no kernel library")
        return Executable.load_exec(self.code, self._imports[0])

    def _get_local_function(self, name: str):
        return {"vm_load_executable": self._load, "save": lambda: bytearray(self.code)}.get(name)

    def _local_function_names(self) -> list:
        return ["vm_load_executable", "save"]

    def blob_header(self) -> dict:
        return {"format": 1}

    def blob_payloads(self) -> dict:
        return {"code": self.code}


@register_func("runtime.module.loadbinary_VMExecutable", override=True)
def _load_vm_executable(header: dict, payloads: dict, library) -> VMExecutableModule:
    code = payloads.get("code")
    if not isinstance(code, (bytes, bytearray)) or header.get("format") != 1:
        raise ModuleLoadError("VM executable blob is incomplete or of an unknown format")
    return VMExecutableModule(code)


class VirtualMachine:
    """Runs an Executable: ``invoke``/``run``, ``set_input`` + ``invoke_stateful`` + ``get_outputs``,
    ``benchmark``."""

    def __init__(self, exe: Executable, device=None, memory_cfg=None):
        if isinstance(exe, VMExecutableModule):  # TVM's flow: VirtualMachine(load_module("m.so"), dev)
            exe = Executable.from_module(exe)
        if not isinstance(exe, Executable):
            raise ArgumentError(f"VirtualMachine expects a kiln.runtime.vm.Executable, got {type(exe).__name__}")
        self.exe = exe
        self.device = device
        self.pool = _StoragePool()
        self._kernels = []
        self._shape_funcs = []
        for name in exe.packed_names:
            if exe.lib is None:
                raise KilnError(f"the executable calls kernel {name} but has no kernel library")
            k = exe.lib[name]
            self._kernels.append(k)
            self._shape_funcs.append(None)
        self._consts = [nd._resident_array(c) for c in exe.constants]
        # straight-line functions replay with per-instruction memory (vm_replay.py); None: general loop
        self._replay = [ReplayRunner(self, f) if is_straight_line(f) else None for f in exe.functions]
        self._inputs: dict = {}
        self._partial: set = set()   # functions with inputs still missing after set_one_input
        self._arg_specs: dict = {}   # function index -> per parameter (shape, numpy dtype, dtype, nbytes) or None
        self._outputs = None

    # -- public API ---------------------------------------------------------------------------------
    def invoke(self, func_name: str = "main", *args, **kwargs):
        """Runs ``func_name`` on ``args``/``kwargs``; with none, on the inputs of an earlier ``set_input``
        (TVM's ``invoke``)."""
        index = self._func(func_name)
        if not args and not kwargs and func_name in self._inputs:
            return self._run_function(index, self._set_inputs(func_name))
        values = self._convert_args(index, args, kwargs)
        return self._run_function(index, values)

    def run(self, *args, **kwargs):
        return self.invoke("main", *args, **kwargs)

    def set_input(self, func_name: str, *args, **kwargs) -> None:
        index = self._func(func_name)
        self._inputs[func_name] = self._convert_args(index, args, kwargs)
        self._partial.discard(func_name)

    def _set_inputs(self, func_name: str) -> list:
        if func_name in self._partial:
            f = self.exe.functions[self._func(func_name)]
            missing = [p for p, v in zip(f.params, self._inputs[func_name]) if v is None]
            raise ArgumentError(f"{func_name}: inputs {missing} were never set (set_input / set_one_input)")
        return self._inputs[func_name]

    def invoke_stateful(self, func_name: str = "main") -> None:
        if func_name not in self._inputs:
            raise ArgumentError(f"invoke_stateful({func_name!r}): call set_input({func_name!r}, ...) first")
        self._outputs = self._run_function(self._func(func_name), self._set_inputs(func_name))

    def set_one_input(self, func_name: str, key, value) -> None:
        """Sets one input of ``func_name`` by position or name (TVM's ``set_one_input``); the others keep
        the values of an earlier ``set_input``/``set_one_input``."""
        index = self._func(func_name)
        f = self.exe.functions[index]
        pos = key if isinstance(key, int) else (f.params.index(key) if key in f.params else -1)
        if not 0 <= pos < len(f.params):
            raise ArgumentError(f"{f.name}: no input {key!r} (inputs: {', '.join(f.params)})")
        types = f.param_types or [None] * len(f.params)
        values = self._inputs.get(func_name) or [None] * len(f.params)
        values = list(values)
        values[pos] = self._to_value(value, types[pos], f.name, f.params[pos], self.pool)
        self._inputs[func_name] = values
        if any(v is None for v in values):
            self._partial.add(func_name)
        else:
            self._partial.discard(func_name)

    def get_num_outputs(self) -> int:
        """Number of outputs of the last ``invoke_stateful`` (TVM's ``get_num_outputs``)."""
        return len(self.get_outputs())

    def get_outputs(self) -> list:
        if self._outputs is None:
            raise KilnError("get_outputs: no results yet; call invoke_stateful first")
        out = self._outputs
        return list(out) if isinstance(out, ADT) else [out]

    def get_input_index(self, input_name: str, func_name: str = "main") -> int:
        params = self.exe.functions[self._func(func_name)].params
        return params.index(input_name) if input_name in params else -1

    def benchmark(self, device=None, *args, func_name: str = "main", repeat: int = 5, number: int = 5,
                  min_repeat_ms=None, limit_zero_time_iterations: int = 100, end_to_end: bool = False,
                  cooldown_interval_ms: int = 0, repeats_to_cooldown: int = 1, **kwargs):
        """Times ``invoke(func_name, *args)`` (TVM's ``vm.benchmark``); returns a BenchmarkResult.

        ``min_repeat_ms``: each repeat runs at least that long (``number`` grows as in TVM's time evaluator);
        ``cooldown_interval_ms`` sleeps after every ``repeats_to_cooldown`` repeats. Inputs live on the CPU, so
        ``end_to_end`` (copying inputs in each run) times the same thing."""
        from .benchmark import BenchmarkResult
        if args or kwargs:
            self.set_input(func_name, *args, **kwargs)
        if func_name not in self._inputs:
            raise ArgumentError("benchmark: give the inputs, or call set_input first")
        if repeat < 1 or number < 1:
            raise ArgumentError(f"benchmark: repeat ({repeat}) and number ({number}) must be at least 1")
        values = self._set_inputs(func_name)
        index = self._func(func_name)
        self._run_function(index, values)  # warm up
        results = []
        zero_runs = 0
        for k in range(repeat):
            while True:
                start = time.perf_counter()
                for _ in range(number):
                    self._run_function(index, values)
                elapsed = time.perf_counter() - start
                if elapsed == 0.0 and zero_runs < limit_zero_time_iterations:
                    zero_runs += 1
                    continue
                if not min_repeat_ms or elapsed * 1e3 >= min_repeat_ms:
                    break
                number = max(number + 1, int(number * min(10.0, 1.618 * min_repeat_ms / max(elapsed * 1e3, 1e-3))))
            results.append(elapsed / number)
            if cooldown_interval_ms and (k + 1) % max(repeats_to_cooldown, 1) == 0:
                time.sleep(cooldown_interval_ms / 1e3)
        return BenchmarkResult(results)

    @property
    def memory_stats(self) -> dict:
        """Fresh buffers made and buffers reused from the pool since this VM was created."""
        return {"allocated": self.pool.allocated, "reused": self.pool.reused}

    # -- helpers --------------------------------------------------------------------------------------
    def _func(self, name: str) -> int:
        index = self.exe.func_index.get(name)
        if index is None:
            raise ArgumentError(f"the VM executable has no function {name!r} (it has {self.exe.globals})")
        return index

    def _convert_args(self, index: int, args, kwargs) -> list:
        f = self.exe.functions[index]
        if not kwargs and f.param_types is not None and len(args) == len(f.params):
            values = self._exact_tensor_args(index, f, args)
            if values is not None:
                return values
        values = list(args)
        if len(values) > len(f.params):
            raise ArgumentError(f"{f.name} takes {len(f.params)} arguments ({', '.join(f.params)}), "
                                f"got {len(values)}")
        unknown = sorted(k for k in kwargs if k not in f.params[len(values):])
        if unknown:
            raise ArgumentError(f"{f.name}: unknown inputs {unknown} (inputs: {', '.join(f.params)})")
        for name in f.params[len(values):]:
            if name not in kwargs:
                raise ArgumentError(f"{f.name}: missing input {name!r} (inputs: {', '.join(f.params)})")
            values.append(kwargs.pop(name))
        if kwargs:
            raise ArgumentError(f"{f.name}: unknown inputs {sorted(kwargs)} (inputs: {', '.join(f.params)})")
        types = f.param_types or [None] * len(values)
        return [self._to_value(v, t, f.name, p, self.pool) for v, t, p in zip(values, types, f.params)]

    def _exact_tensor_args(self, index: int, f: VMFunction, args) -> list | None:
        """The per-call fast path: every argument a numpy array (copied into a pooled buffer) or a compact
        NDArray (used as is) of its parameter's static shape and exact dtype, which is what ``_to_value``
        would make of it. None when any argument is something else: the general path converts or refuses."""
        specs = self._arg_specs.get(index)
        if specs is None:
            specs = self._arg_specs[index] = [_static_tensor_spec(t) for t in f.param_types]
        pool = self.pool
        values = []
        for v, spec in zip(args, specs):
            if spec is None:
                return None
            shape, np_dtype, dtype, nbytes = spec
            kind = type(v)
            if kind is np.ndarray:
                if v.dtype != np_dtype or v.shape != shape:
                    return None
                arr = pool.tensor_of(shape, np_dtype, dtype, nbytes)
                np.copyto(arr._arr, v)
            elif kind is NDArray:
                if v._dtype != dtype or v._shape != shape or not v._kernel_ok:
                    return None
                arr = v
            else:
                return None
            values.append(arr)
        return values

    @staticmethod
    def _to_value(v, ty, fname: str, pname: str, pool: "_StoragePool | None" = None):
        """An argument as the VM's value: tensors as compact NDArrays (a numpy array of the parameter's dtype
        is copied into a buffer of the VM's storage pool, back in the pool when the call drops it: no
        allocation per call), tuples as ADTs; a wrong dtype or shape is refused."""
        if isinstance(v, (ADT, VMClosure)):
            return v
        if isinstance(v, (tuple, list)) and (ty is None or ty[0] == "tuple"):
            fields = ty[1] if ty is not None else [None] * len(v)
            if len(fields) != len(v):
                raise ArgumentError(f"{fname}: input {pname!r} expects a tuple of {len(fields)} values")
            return ADT(0, [VirtualMachine._to_value(x, t, fname, pname, pool) for x, t in zip(v, fields)])
        if ty is not None and ty[0] == "tensor":
            shape, dtype = ty[1], ty[2]
            if pool is not None and type(v) is np.ndarray and v.dtype == nd._np_dtype_of(dtype) and \
                    v.ndim == len(shape) and all(s < 0 or s == g for s, g in zip(shape, v.shape)):
                arr = pool.tensor_of(v.shape, v.dtype, dtype, v.nbytes)
                np.copyto(arr._arr, v)
                return arr
            if isinstance(v, (NDArray, np.ndarray, np.generic)) and str(v.dtype) != dtype:
                # as kiln.cli and GraphModule.set_input: never convert an array silently
                raise ArgumentError(f"{fname}: input {pname!r} expects dtype {dtype}, got an array of dtype "
                                    f"{v.dtype}; convert it first (e.g. x.astype({dtype!r}))")
            arr = v if isinstance(v, NDArray) else nd.array(np.asarray(v, dtype=dtype))
            if arr.dtype != dtype or len(arr.shape) != len(shape) or any(
                    s >= 0 and s != g for s, g in zip(shape, arr.shape)):
                want = "(" + ", ".join("?" if s < 0 else str(s) for s in shape) + ")"
                raise ArgumentError(f"{fname}: input {pname!r} expects a tensor of shape {want} and dtype {dtype}, "
                                    f"got shape {arr.shape} and dtype {arr.dtype}")
            if not arr._kernel_ok:
                arr = nd.array(arr.numpy())
            return arr
        return v if isinstance(v, NDArray) else nd.array(np.asarray(v))

    def _shape_func(self, k: int) -> _ShapeFunc:
        sf = self._shape_funcs[k]
        if sf is None:
            sf = self._shape_funcs[k] = _ShapeFunc(self._kernels[k].meta)
        return sf

    def _run_function(self, index: int, args: list):
        """The dispatch loop; VM-level calls push frames on an explicit stack (no Python recursion)."""
        _thread_tick()  # the adaptive thread policy measures here (kiln.runtime.thread_policy)
        runner = self._replay[index]
        if runner is not None:
            return runner.run(args)
        funcs = self.exe.functions
        kernels, consts, pool = self._kernels, self._consts, self.pool
        f = funcs[index]
        regs = [None] * f.num_regs
        regs[:len(args)] = args
        code, pc = f.instructions, 0
        stack = []  # (code, pc to resume, regs, dst register)
        while True:
            ins = code[pc]
            op = ins[0]
            if op == "invoke_packed":
                kernels[ins[1]](*[regs[r] for r in ins[2]])
                pc += 1
            elif op == "alloc_tensor":
                regs[ins[3]] = pool.tensor(tuple(ins[1]), ins[2])
                pc += 1
            elif op == "kernel_shapes":
                shapes = self._shape_func(ins[1])([regs[r] for r in ins[2]])
                for r, s in zip(ins[3], shapes):
                    regs[r] = s
                pc += 1
            elif op == "alloc_tensor_reg":
                shape = regs[ins[1]]
                if isinstance(shape, NDArray):
                    shape = tuple(int(x) for x in shape.numpy().reshape(-1))
                regs[ins[3]] = pool.tensor(tuple(shape), ins[2])
                pc += 1
            elif op == "move":
                regs[ins[2]] = regs[ins[1]]
                pc += 1
            elif op == "load_const":
                regs[ins[2]] = consts[ins[1]]
                pc += 1
            elif op == "load_consti":
                regs[ins[2]] = nd.array(np.array(ins[1], dtype="int64"))
                pc += 1
            elif op == "alloc_adt":
                regs[ins[3]] = ADT(ins[1], [regs[r] for r in ins[2]])
                pc += 1
            elif op == "get_field":
                regs[ins[3]] = regs[ins[1]][ins[2]]
                pc += 1
            elif op == "get_tag":
                regs[ins[2]] = regs[ins[1]].tag
                pc += 1
            elif op == "tag_eq":
                regs[ins[3]] = regs[ins[1]].tag == ins[2]
                pc += 1
            elif op == "if":
                cond = regs[ins[1]]
                truth = bool(cond._arr.reshape(-1)[0]) if isinstance(cond, NDArray) else bool(cond)
                pc += ins[2] if truth else ins[3]
            elif op == "goto":
                pc += ins[1]
            elif op in ("invoke", "invoke_closure"):
                if op == "invoke":
                    callee, call_args = ins[1], [regs[r] for r in ins[2]]
                else:
                    clo = regs[ins[1]]
                    if not isinstance(clo, VMClosure):
                        raise KilnError(f"VM: calling a value that is not a function ({type(clo).__name__})")
                    callee, call_args = clo.func_index, clo.captured + [regs[r] for r in ins[2]]
                stack.append((code, pc + 1, regs, ins[3]))
                g = funcs[callee]
                if len(call_args) > g.num_regs:
                    raise KilnError(f"VM: {g.name} called with {len(call_args)} arguments")
                regs = [None] * g.num_regs
                regs[:len(call_args)] = call_args
                code, pc = g.instructions, 0
                if len(stack) > 100000:
                    raise KilnError("VM: call depth exceeds 100000 frames (unbounded recursion?)")
            elif op == "alloc_closure":
                regs[ins[3]] = VMClosure(ins[1], [regs[r] for r in ins[2]])
                pc += 1
            elif op == "ret":
                result = regs[ins[1]]
                if not stack:
                    return result
                code, pc, regs, dst = stack.pop()
                regs[dst] = result
            elif op == "shape_of":
                regs[ins[2]] = nd.array(np.array(regs[ins[1]].shape, dtype="int64"))
                pc += 1
            elif op == "reshape_tensor":
                t, shape = regs[ins[1]], regs[ins[2]]
                if isinstance(shape, NDArray):
                    shape = tuple(int(x) for x in shape.numpy().reshape(-1))
                out = pool.tensor(tuple(shape), t.dtype)  # a copy: pooled buffers never alias
                np.copyto(out._arr, t._arr.reshape(shape))
                regs[ins[3]] = out
                pc += 1
            elif op == "shape_func":
                shapes = run_shape_func(ins[1], ins[2], [regs[r]._arr for r in ins[3]])
                for r, sh in zip(ins[4], shapes):
                    regs[r] = sh
                pc += 1
            elif op == "shape_of_t":
                regs[ins[3]] = nd.array(np.array(regs[ins[1]].shape, dtype=ins[2]))
                pc += 1
            elif op == "fatal":
                raise KilnError(f"VM: {ins[1]}")
            else:  # pragma: no cover - rejected when the executable is built or loaded
                raise KilnError(f"VM: unknown opcode {op!r}")
