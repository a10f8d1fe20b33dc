"""The graph executor runtime: runs a graph JSON (TVM's format) over the kernels of a library.

Nothing here imports the compiler. When the executor is created, the JSON is parsed and checked once,
one buffer per storage id is allocated, and every kernel call is prepared: its arguments are checked
against the kernel's metadata and packed into a ctypes argument array. ``run()`` then only walks the
list of (C function, argument array) pairs.

``GraphExecutorFactory`` is the module ``relay.build`` returns (under its Python wrapper): it holds the
graph JSON and the parameters, imports the kernel library, and ``factory["default"](dev)`` creates an
executor. It serializes into the library blob, so ``export_library`` writes one loadable file.
"""
from __future__ import annotations

import ctypes
import json
import threading
import warnings

import numpy as np

from ..error import ArgumentError, KilnError, ModuleLoadError
from .benchmark import measure
from .device import Device, cpu, device as _as_device
from .dtype import nbytes, parse_dtype
from .kernel import KernelFunction
from .module import Module
from .ndarray import NDArray, _aligned_empty, _dtype_name
from .params import load_params, save_params
from .registry import register_func
from .thread_policy import tick as _thread_tick


#: Symbol of the native plan runner relay.build links into the kernel library (see graph_executor_codegen).
PLAN_RUNNER_SYMBOL = "__kiln_graph_run"


class _PlanStep(ctypes.Structure):
    _fields_ = [("fn", ctypes.c_void_p), ("args", ctypes.c_void_p), ("num_args", ctypes.c_int64)]


class GraphFormatError(ModuleLoadError):
    """The graph JSON is malformed (says which field and node)."""


# -- graph JSON ---------------------------------------------------------------------------------
class GraphSpec:
    """A parsed and validated graph JSON."""

    def __init__(self, graph_json):
        if isinstance(graph_json, (bytes, bytearray)):
            graph_json = bytes(graph_json).decode("utf-8", "replace")
        if not isinstance(graph_json, str):
            raise GraphFormatError(f"the graph must be a JSON string, got {type(graph_json).__name__}")
        try:
            g = json.loads(graph_json)
        except ValueError as err:
            raise GraphFormatError(f"the graph JSON does not parse: {err}") from None
        self.json = graph_json
        try:
            self._parse(g)
        except GraphFormatError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as err:
            raise GraphFormatError(f"malformed graph JSON: {type(err).__name__}: {err}") from None

    def _parse(self, g: dict) -> None:
        for key in ("nodes", "arg_nodes", "heads", "attrs", "node_row_ptr"):
            if key not in g:
                raise GraphFormatError(f"the graph JSON has no {key!r} field")
        self.nodes = list(g["nodes"])
        n = len(self.nodes)
        self.arg_nodes = [int(i) for i in g["arg_nodes"]]
        self.node_row_ptr = [int(i) for i in g["node_row_ptr"]]
        if len(self.node_row_ptr) != n + 1 or self.node_row_ptr[0] != 0:
            raise GraphFormatError(f"node_row_ptr must have {n + 1} entries starting at 0")
        for node_id, node in enumerate(self.nodes):
            if node.get("op") not in ("null", "tvm_op"):
                raise GraphFormatError(f"node {node_id} ({node.get('name')!r}): unknown op {node.get('op')!r}; "
                                       "expected 'null' or 'tvm_op'")
            count = self.node_row_ptr[node_id + 1] - self.node_row_ptr[node_id]
            want = 1 if node["op"] == "null" else int(node.get("attrs", {}).get("num_outputs", 1))
            if count != want:
                raise GraphFormatError(f"node {node_id} ({node['name']!r}): node_row_ptr gives {count} outputs, "
                                       f"attrs say {want}")
            for inp in node.get("inputs", []):
                if not (0 <= int(inp[0]) < node_id) or not (0 <= int(inp[1]) < self.num_outputs(int(inp[0]))):
                    raise GraphFormatError(f"node {node_id} ({node['name']!r}): input {inp} does not name an "
                                           "earlier node's output")
        for i in self.arg_nodes:
            if not 0 <= i < n or self.nodes[i]["op"] != "null":
                raise GraphFormatError(f"arg_nodes entry {i} is not an input ('null') node")
        self.heads = [(int(h[0]), int(h[1])) for h in g["heads"]]
        for nid, idx in self.heads:
            if not 0 <= nid < n or not 0 <= idx < self.num_outputs(nid):
                raise GraphFormatError(f"heads entry {[nid, idx]} is out of range")
        attrs = g["attrs"]
        num_entries = self.node_row_ptr[-1]
        self.shapes = [tuple(int(d) for d in s) for s in _attr_list(attrs, "shape", "list_shape")]
        self.dtypes = [str(parse_dtype(d)) for d in _attr_list(attrs, "dltype", "list_str")]
        self.storage_ids = [int(s) for s in _attr_list(attrs, "storage_id", "list_int")]
        for what, values in (("shape", self.shapes), ("dltype", self.dtypes), ("storage_id", self.storage_ids)):
            if len(values) != num_entries:
                raise GraphFormatError(f"attrs.{what} has {len(values)} entries; the graph has {num_entries} "
                                       "node outputs")
        if any(any(d < 0 for d in s) for s in self.shapes):
            raise GraphFormatError("attrs.shape has a negative extent: the graph executor needs static shapes")
        if any(s < 0 for s in self.storage_ids):
            raise GraphFormatError("attrs.storage_id has a negative id")
        self.input_nodes = list(self.arg_nodes)
        self.input_names = [self.nodes[i]["name"] for i in self.input_nodes]

    def num_outputs(self, node_id: int) -> int:
        return self.node_row_ptr[node_id + 1] - self.node_row_ptr[node_id]

    def entry_id(self, node_id: int, index: int = 0) -> int:
        return self.node_row_ptr[node_id] + index


def _attr_list(attrs: dict, key: str, kind: str) -> list:
    value = attrs.get(key)
    if value is None:
        raise GraphFormatError(f"the graph JSON has no attrs.{key}")
    if not (isinstance(value, list) and len(value) == 2 and value[0] == kind):
        raise GraphFormatError(f"attrs.{key} must be [{kind!r}, [...]]")
    return list(value[1])


# -- the executor -------------------------------------------------------------------------------
class GraphExecutor(Module):
    """A graph JSON bound to a kernel library and a device, with its memory allocated."""

    type_key = "GraphExecutor"

    def __init__(self, graph_json, lib: Module, devices):
        super().__init__()
        self.spec = spec = graph_json if isinstance(graph_json, GraphSpec) else GraphSpec(graph_json)
        devs = list(devices) if isinstance(devices, (list, tuple)) else [devices]
        if not devs:
            raise KilnError("graph executor: no device given")
        dev = devs[0] if isinstance(devs[0], Device) else _as_device(devs[0])
        if not dev.exist or dev.device_type != 1:
            raise KilnError(f"graph executor: kiln runs graphs on cpu(0) only, got {dev}")
        self.device = dev
        self.lib = lib
        # runs share this executor's buffers: every public call holds the lock, so calls from several
        # threads are serialized; a set_input/run/get_output sequence holds it as a whole (docs/graph_executor.md)
        self._lock = threading.RLock()
        self._param_names: set = set()
        self._input_index = {name: i for i, name in enumerate(spec.input_names)}
        self._allocate()
        # inputs never given a value (run() refuses to read their uninitialized memory)
        self._unset = {i for i in range(len(spec.input_names))
                       if nbytes(spec.shapes[self._entry_of_input(i)], spec.dtypes[self._entry_of_input(i)])}
        self._funcs = self._resolve_functions()
        self._build_plan()
        self._methods = {
            "set_input": self.set_input, "run": self.run, "get_output": self.get_output,
            "get_input": self.get_input, "get_num_outputs": self.get_num_outputs,
            "get_num_inputs": self.get_num_inputs, "get_input_index": self.get_input_index,
            "get_input_info": self.get_input_info, "load_params": self.load_params,
            "share_params": self.share_params,
        }

    # -- setup --------------------------------------------------------------------------------
    def _allocate(self) -> None:
        spec = self.spec
        sizes: dict = {}
        for eid, sid in enumerate(spec.storage_ids):
            sizes[sid] = max(sizes.get(sid, 0), nbytes(spec.shapes[eid], spec.dtypes[eid]))
        # parameters and big activations: on huge pages where the host allows (nd._huge_empty)
        self.storage = {sid: _aligned_empty((max(size, 1),), np.dtype(np.uint8), huge=True)
                        for sid, size in sizes.items()}
        self.entries: list = []
        for eid, sid in enumerate(spec.storage_ids):
            np_dtype = parse_dtype(spec.dtypes[eid]).numpy_dtype()
            size = nbytes(spec.shapes[eid], spec.dtypes[eid])
            view = self.storage[sid][:size].view(np_dtype).reshape(spec.shapes[eid])
            self.entries.append(NDArray(view, self.device))

    def _resolve_functions(self) -> dict:
        funcs = {}
        for node_id, node in enumerate(self.spec.nodes):
            if node["op"] != "tvm_op":
                continue
            name = node.get("attrs", {}).get("func_name")
            if not isinstance(name, str):
                raise GraphFormatError(f"node {node_id} ({node['name']!r}) has no attrs.func_name")
            if name == "__nop" or name in funcs:
                continue
            func = self.lib._find_function(name, True) if self.lib is not None else None
            if func is None:
                raise ModuleLoadError(f"graph node {node['name']!r} calls kernel {name!r}, which the library does "
                                      "not contain (graph and library do not match)")
            funcs[name] = func
        return funcs

    def node_args(self, node_id: int) -> list:
        """The arrays a node's kernel is called with: its inputs, then its outputs."""
        spec = self.spec
        node = spec.nodes[node_id]
        args = [self.entries[spec.entry_id(int(i[0]), int(i[1]))] for i in node["inputs"]]
        args += [self.entries[spec.entry_id(node_id, k)] for k in range(spec.num_outputs(node_id))]
        return args

    def _build_plan(self) -> None:
        """Check every kernel call once and keep (C function, packed arguments) per op node."""
        self.op_calls = []  # (node_id, callable with no arguments) for node-by-node execution
        plan = []
        for node_id, node in enumerate(self.spec.nodes):
            if node["op"] != "tvm_op" or node["attrs"]["func_name"] == "__nop":
                continue
            func = self._funcs[node["attrs"]["func_name"]]
            args = self.node_args(node_id)
            try:
                if isinstance(func, KernelFunction):
                    buf = func.prepare(*args)
                    plan.append((func._fn, buf, func._total, func))
                    call = func.bind(*args)
                else:
                    call = _python_call(func, args)
                    plan.append((None, call, 0, func))
            except ArgumentError as err:
                raise ModuleLoadError(f"graph node {node['name']!r}: its tensors do not match kernel "
                                      f"{node['attrs']['func_name']!r}: {err}") from None
            self.op_calls.append((node_id, call))
        self._plan = plan
        self._keepalive = list(self.entries)
        self._native = self._native_plan(plan)
        self._cache_io()

    def _cache_io(self) -> None:
        """What set_input and get_output need per call, derived once from ``entries`` (rebuilt with the plan
        whenever an entry changes, e.g. share_params): per input (destination NDArray, its numpy array, shape,
        numpy dtype or None), and the output NDArrays. The numpy dtype is kept only where its kiln name is the
        input's dtype, so comparing numpy dtypes accepts exactly what comparing the names accepts."""
        slots = []
        for idx in range(len(self.spec.input_names)):
            dst = self.entries[self._entry_of_input(idx)]
            np_dtype = dst._arr.dtype
            slots.append((dst, dst._arr, dst._shape, np_dtype if _dtype_name(np_dtype) == dst._dtype else None))
        self._in_slots = slots
        self._heads = [self.entries[self.spec.entry_id(nid, idx)] for nid, idx in self.spec.heads]

    def _native_plan(self, plan: list):
        """When the library has the plan runner (relay.build adds it) and every step is a compiled
        kernel: one ctypes call runs the whole graph. Returns (C function, packed args) or None."""
        runner = self.lib._find_function(PLAN_RUNNER_SYMBOL, True) if self.lib is not None else None
        if not isinstance(runner, KernelFunction) or not plan or any(fn is None for fn, _, _, _ in plan):
            return None
        steps = (_PlanStep * len(plan))()
        for i, (_fn, buf, total, func) in enumerate(plan):
            steps[i].fn = func.address
            steps[i].args = ctypes.addressof(buf)
            steps[i].num_args = total
        args = (ctypes.c_int64 * 2)(ctypes.addressof(steps), len(plan))
        self._native_keepalive = (steps, args, [b for _, b, _, _ in plan])
        return runner._fn, ctypes.addressof(args)  # an int argument: ctypes converts it fastest

    # -- Module interface -----------------------------------------------------------------------
    def _get_local_function(self, name: str):
        return self._methods.get(name)

    def _local_function_names(self) -> list:
        return list(self._methods)

    # -- inputs ---------------------------------------------------------------------------------
    def get_input_index(self, name: str) -> int:
        """Index of the input ``name`` (-1 when the graph has no such input, as in TVM)."""
        return self._input_index.get(name, -1)

    def _index_of(self, key) -> int:
        if type(key) is str:
            idx = self._input_index.get(key)
            if idx is not None:
                return idx
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            if not 0 <= int(key) < len(self.spec.input_nodes):
                raise ArgumentError(f"input index {int(key)} is out of range: the graph has "
                                    f"{len(self.spec.input_nodes)} inputs")
            return int(key)
        idx = self._input_index.get(key)
        if idx is None:
            names = [n for n in self.spec.input_names if n not in self._param_names] or self.spec.input_names
            raise ArgumentError(f"the graph has no input named {key!r}; its inputs are: {', '.join(names)}"
                                + (f" (plus {len(self._param_names)} parameters)" if self._param_names else ""))
        return idx

    def _entry_of_input(self, idx: int) -> int:
        return self.spec.entry_id(self.spec.input_nodes[idx], 0)

    def _copy_in(self, idx: int, value) -> None:
        dst, dst_arr, shape, np_dtype = self._in_slots[idx]
        # fast paths: an array of the input's exact shape and dtype is copied with no further question
        # (the checks below would accept it and copy it the same way)
        if type(value) is np.ndarray:
            if np_dtype is not None and value.dtype == np_dtype and value.shape == shape:
                np.copyto(dst_arr, value)
                self._unset.discard(idx)
                return
        elif type(value) is NDArray and value._shape == shape and value._dtype == dst._dtype:
            np.copyto(dst_arr, value._arr)
            self._unset.discard(idx)
            return
        name = self.spec.input_names[idx]
        if isinstance(value, NDArray):
            src = value._arr
            given_dtype = value._dtype
        elif not isinstance(value, np.ndarray) and isinstance(value, (int, float, bool, np.generic, list, tuple)):
            try:  # Python scalars and nested lists take the input's dtype
                src = np.asarray(value, dtype=dst._arr.dtype)
            except (TypeError, ValueError) as err:
                raise ArgumentError(f"input {name!r}: cannot convert {value!r} to {dst._dtype}: {err}") from None
            given_dtype = dst._dtype
        else:
            try:
                src = np.asarray(value)
            except (TypeError, ValueError) as err:
                raise ArgumentError(f"input {name!r}: cannot convert {type(value).__name__} to an array: {err}") \
                    from None
            given_dtype = _dtype_name(src.dtype)
        if tuple(src.shape) != dst._shape or given_dtype != dst._dtype:
            raise ArgumentError(f"input {name!r}: expected shape {dst._shape} and dtype {dst._dtype}, got shape "
                                f"{tuple(src.shape)} and dtype {given_dtype}")
        np.copyto(dst._arr, src)
        self._unset.discard(idx)

    def _warn_skipped(self, what: str, skipped: list) -> None:
        shown = ", ".join(repr(n) for n in skipped[:8]) + (f" and {len(skipped) - 8} more" if len(skipped) > 8 else "")
        warnings.warn(f"{what}: the graph has no input named {shown}; skipped (its inputs: "
                      f"{', '.join(self.spec.input_names[:16])}{', ...' if len(self.spec.input_names) > 16 else ''})",
                      UserWarning, stacklevel=3)

    def set_input(self, key=None, value=None, **params) -> None:
        """Copy ``value`` into input ``key`` (name or index); keyword arguments set more inputs. A keyword
        naming no input of the graph is skipped, as TVM does for ``set_input(**params)``, with a warning."""
        with self._lock:
            if key is not None:
                if value is None:
                    raise ArgumentError(f"set_input({key!r}): no value given")
                self._copy_in(self._index_of(key), value)
            skipped = []
            for name, val in params.items():
                idx = self._input_index.get(name)
                if idx is not None:
                    self._copy_in(idx, val)
                else:
                    skipped.append(name)
            if skipped:
                self._warn_skipped("set_input", skipped)

    def _set_params(self, params: dict) -> list:
        """Load parameters (the factory's) and remember their names (get_input_info leaves them out);
        returns the names the graph has no input for."""
        skipped = []
        with self._lock:
            for name, val in params.items():
                idx = self._input_index.get(name)
                if idx is not None:
                    self._copy_in(idx, val)
                    self._param_names.add(name)
                else:
                    skipped.append(name)
        return skipped

    def load_params(self, param_bytes) -> None:
        """Load TVM parameter-dict bytes (``relay.save_param_dict``). Names the graph lacks are skipped
        with a warning (TVM skips them); bytes whose names match no input at all raise."""
        params = load_params(param_bytes)
        skipped = self._set_params(params)
        if params and len(skipped) == len(params):
            shown = ", ".join(repr(n) for n in skipped[:8]) + (", ..." if len(skipped) > 8 else "")
            raise ArgumentError(f"load_params: none of the {len(params)} parameters ({shown}) is an input of this "
                                f"graph (its inputs: {', '.join(self.spec.input_names[:16])}"
                                f"{', ...' if len(self.spec.input_names) > 16 else ''}); wrong parameter file?")
        if skipped:
            self._warn_skipped("load_params", skipped)

    def share_params(self, other: "GraphExecutor", param_bytes) -> None:
        """Use ``other``'s parameter arrays (named in ``param_bytes``) instead of copies of our own."""
        other = getattr(other, "module", other)
        other = getattr(other, "_exec", other)
        if not isinstance(other, GraphExecutor):
            raise KilnError(f"share_params expects another graph executor, got {type(other).__name__}")
        names = load_params(param_bytes).keys() if not isinstance(param_bytes, dict) else param_bytes.keys()
        with self._lock, other._lock:
            self._share_params(other, names)

    def _share_params(self, other: "GraphExecutor", names) -> None:
        for name in names:
            idx, oidx = self._input_index.get(name), other._input_index.get(name)
            if idx is None or oidx is None:
                continue
            mine, theirs = self._entry_of_input(idx), other._entry_of_input(oidx)
            if self.entries[mine]._shape != other.entries[theirs]._shape or \
                    self.entries[mine]._dtype != other.entries[theirs]._dtype:
                raise ArgumentError(f"share_params: parameter {name!r} differs in shape or dtype between the graphs")
            self.entries[mine] = other.entries[theirs]
            self._param_names.add(name)
            self._unset.discard(idx)
        self._build_plan()

    def get_input(self, key) -> NDArray:
        return self.entries[self._entry_of_input(self._index_of(key))]

    def get_num_inputs(self) -> int:
        return len(self.spec.input_nodes)

    def get_input_info(self) -> tuple:
        """(shape dict, dtype dict) of the inputs that are not parameters."""
        shapes, dtypes = {}, {}
        for idx, name in enumerate(self.spec.input_names):
            if name in self._param_names:
                continue
            eid = self._entry_of_input(idx)
            shapes[name] = self.spec.shapes[eid]
            dtypes[name] = self.spec.dtypes[eid]
        return shapes, dtypes

    # -- outputs --------------------------------------------------------------------------------
    def get_num_outputs(self) -> int:
        return len(self.spec.heads)

    def _head_entry(self, index) -> int:
        n = len(self.spec.heads)
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise ArgumentError(f"get_output: the index must be an integer, got {type(index).__name__}")
        if not -n <= int(index) < n:
            raise ArgumentError(f"get_output: output index {int(index)} is out of range: the graph has {n} "
                                f"output{'s' if n != 1 else ''} (valid: 0..{n - 1})")
        nid, idx = self.spec.heads[int(index)]
        return self.spec.entry_id(nid, idx)

    def get_output(self, index: int, out: NDArray | None = None) -> NDArray:
        """Output ``index`` (the executor's own array; copied into ``out`` when given)."""
        if out is None and type(index) is int:
            heads = self._heads
            if -len(heads) <= index < len(heads):
                return heads[index]
        arr = self.entries[self._head_entry(index)]
        if out is not None:
            with self._lock:
                return self._copy_out(index, arr, out)
        return arr

    @staticmethod
    def _copy_out(index, arr: NDArray, out) -> NDArray:
        if type(out) is NDArray and out._writable and out._shape == arr._shape and out._dtype == arr._dtype:
            np.copyto(out._arr, arr._arr)  # what copyfrom does once its checks pass
            return out
        if not isinstance(out, NDArray):
            raise ArgumentError(f"get_output({index}, out=...): out must be a kiln NDArray, got "
                                f"{type(out).__name__}")
        if not out._writable:
            raise ArgumentError(f"get_output({index}, out=...): out views read-only memory; pass a "
                                "writable array (kiln.nd.empty(...))")
        out.copyfrom(arr)
        return out

    # -- running --------------------------------------------------------------------------------
    @property
    def lock(self) -> threading.RLock:
        """The executor's (reentrant) lock: hold it around set_input/run/get_output to make the sequence
        atomic when several threads share the executor."""
        return self._lock

    def _check_inputs_set(self) -> None:
        if self._unset:
            names = [self.spec.input_names[i] for i in sorted(self._unset)]
            raise ArgumentError(f"run(): input{'s' if len(names) > 1 else ''} {', '.join(map(repr, names))} "
                                "never received a value (its memory is uninitialized); call set_input(name, value) "
                                "(or run(name=value)) first")

    def run(self, **inputs) -> None:
        """Run the whole graph (setting ``inputs`` by name first). Calls from several threads are
        serialized (they share the executor's buffers)."""
        _thread_tick()  # the adaptive thread policy measures here (kiln.runtime.thread_policy)
        with self._lock:
            if inputs:
                for name, value in inputs.items():
                    self._copy_in(self._index_of(name), value)
            if self._unset:
                self._check_inputs_set()
            self._run_locked()

    def _run_locked(self) -> None:
        native = self._native
        if native is not None:
            rc = native[0](native[1], 2)
            if rc:
                if 0 < rc <= len(self._plan):
                    self._plan[rc - 1][3]._raise_failure(rc)
                raise KilnError(f"graph executor: the plan runner failed (code {rc})")
            return
        for fn, buf, total, func in self._plan:
            if fn is None:
                buf()
            elif fn(buf, total):
                func._raise_failure(-1)

    def run_poisoned(self) -> None:
        """Test mode: run node by node and fill every intermediate buffer with NaN/garbage once its
        last reader has run, so a memory plan that reuses live storage shows up as wrong results."""
        spec = self.spec
        last_use = {}
        for node_id, node in enumerate(spec.nodes):
            for inp in node.get("inputs", []):
                last_use[spec.entry_id(int(inp[0]), int(inp[1]))] = node_id
        keep = {spec.entry_id(n, 0) for n in spec.input_nodes} | {spec.entry_id(n, i) for n, i in spec.heads}
        with self._lock:
            self._check_inputs_set()
            self._run_poisoned_locked(last_use, keep)

    def _run_poisoned_locked(self, last_use: dict, keep: set) -> None:
        for node_id, call in self.op_calls:
            call()
            for eid, last in last_use.items():
                if last == node_id and eid not in keep:
                    arr = self.entries[eid]._arr
                    if arr.dtype.kind == "f":
                        arr.fill(np.nan)
                    else:
                        arr.fill(np.array(-123456789).astype(arr.dtype))

    def benchmark(self, device=None, func_name: str = "run", repeat: int = 5, number: int = 5,
                  min_repeat_ms=None, limit_zero_time_iterations: int = 100, end_to_end: bool = False,
                  cooldown_interval_ms: int = 0, repeats_to_cooldown: int = 1, **kwargs):
        """Time ``run`` (TVM's GraphModule.benchmark); ``end_to_end`` also times copying inputs in
        and outputs out. Keyword arguments are inputs."""
        if func_name != "run":
            raise KilnError(f"benchmark: only func_name='run' is supported, got {func_name!r}")
        device = self.device if device is None else device
        min_repeat_ms = 0 if min_repeat_ms is None else min_repeat_ms
        if end_to_end:
            host_inputs = {k: (v.numpy() if isinstance(v, NDArray) else np.asarray(v)) for k, v in kwargs.items()}
            nout = self.get_num_outputs()

            def func():
                self.run(**host_inputs)
                for i in range(nout):
                    self.get_output(i).numpy()
        else:
            if kwargs:
                self.set_input(**kwargs)
            func = self.run
        with self._lock:  # the timed runs are not interleaved with another thread's
            return measure(func, (), device, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                           limit_zero_time_iterations=limit_zero_time_iterations,
                           cooldown_interval_ms=cooldown_interval_ms, repeats_to_cooldown=repeats_to_cooldown)

    def __repr__(self) -> str:
        return (f"GraphExecutor({len(self.spec.nodes)} nodes, {len(self._plan)} kernel calls, "
                f"{len(self.storage)} buffers)")


def _python_call(func, args):
    def call():
        func(*args)
    return call


# -- the user-facing wrapper ---------------------------------------------------------------------
class GraphModule:
    """TVM's ``graph_executor.GraphModule``: wraps the module ``factory["default"](dev)`` returns."""

    def __init__(self, module):
        if isinstance(module, GraphModule):
            module = module.module
        if not isinstance(module, GraphExecutor):
            raise KilnError(f"GraphModule wraps the module lib['default'](dev) returns (a graph executor), got "
                            f"{type(module).__name__}; did you pass the factory itself instead of lib['default'](dev)?")
        self.module = module
        self._exec = module

    @property
    def lock(self):
        """Hold it (``with m.lock:``) around set_input/run/get_output when threads share this module."""
        return self._exec._lock

    def set_input(self, key=None, value=None, **params) -> None:
        self._exec.set_input(key, value, **params)

    def run(self, **input_dict) -> None:
        self._exec.run(**input_dict)

    def get_output(self, index: int, out=None):
        return self._exec.get_output(index, out)

    def get_input(self, index):
        return self._exec.get_input(index)

    def get_input_index(self, name: str) -> int:
        return self._exec.get_input_index(name)

    def get_input_info(self) -> tuple:
        return self._exec.get_input_info()

    def get_num_outputs(self) -> int:
        return self._exec.get_num_outputs()

    def get_num_inputs(self) -> int:
        return self._exec.get_num_inputs()

    def load_params(self, params_bytes) -> None:
        self._exec.load_params(params_bytes)

    def share_params(self, other, params_bytes) -> None:
        self._exec.share_params(other, params_bytes)

    def benchmark(self, device=None, func_name: str = "run", repeat: int = 5, number: int = 5,
                  min_repeat_ms=None, limit_zero_time_iterations: int = 100, end_to_end: bool = False,
                  cooldown_interval_ms: int = 0, repeats_to_cooldown: int = 1, **kwargs):
        return self._exec.benchmark(device, func_name, repeat, number, min_repeat_ms, limit_zero_time_iterations,
                                    end_to_end, cooldown_interval_ms, repeats_to_cooldown, **kwargs)

    def __getitem__(self, key):
        return self.module[key]

    def __repr__(self) -> str:
        return f"GraphModule({self._exec!r})"


def create(graph_json_str, libmod: Module, device) -> GraphModule:
    """A GraphModule running ``graph_json_str`` with the kernels of ``libmod`` on ``device``."""
    if not isinstance(libmod, Module):
        raise KilnError(f"graph_executor.create: libmod must be a runtime.Module, got {type(libmod).__name__}")
    devices = device if isinstance(device, (list, tuple)) else [device]
    return GraphModule(GraphExecutor(graph_json_str, libmod, devices))


# -- the factory module -------------------------------------------------------------------------
class GraphExecutorFactory(Module):
    """Graph JSON + parameters + (imported) kernel library; ``factory[module_name](dev)`` -> executor."""

    type_key = "GraphExecutorFactory"

    def __init__(self, graph_json: str, lib: Module | None, module_name: str = "default", params=None):
        super().__init__()
        self.graph_json = graph_json
        self.spec = GraphSpec(graph_json)
        self.module_name = module_name
        self.params = {k: (v if isinstance(v, NDArray) else NDArray(_aligned_copy(v)))
                       for k, v in (params or {}).items()}
        if lib is not None:
            self.import_module(lib)

    @property
    def lib(self) -> Module:
        if not self._imports:
            raise ModuleLoadError("the graph executor factory has no kernel library")
        return self._imports[0]

    def create(self, *devices) -> GraphExecutor:
        devs = []
        for d in devices:
            devs.extend(d if isinstance(d, (list, tuple)) else [d])
        if not devs:
            devs = [cpu(0)]
        ex = GraphExecutor(self.spec, self.lib, devs)
        ex._set_params(self.params)
        return ex

    def _debug_create(self, module_name: str, *devices):
        if module_name != self.module_name:
            raise KilnError(f"debug_create: this factory holds module {self.module_name!r}, not {module_name!r}")
        from ..contrib.debugger import debug_executor  # runtime-only code; imports nothing of the compiler
        devs = [d for d in devices] or [cpu(0)]
        mod = debug_executor.create(self.graph_json, self.lib, devs[0])
        mod._exec._set_params(self.params)
        return mod

    def _get_local_function(self, name: str):
        table = {
            self.module_name: self.create,
            "get_graph_json": lambda: self.graph_json,
            "get_params": lambda: dict(self.params),
            "list_params_name": lambda: list(self.params),
            "get_lib": lambda: self.lib,
            "debug_create": self._debug_create,
        }
        return table.get(name)

    def _local_function_names(self) -> list:
        return [self.module_name, "get_graph_json", "get_params", "list_params_name", "get_lib", "debug_create"]

    def blob_header(self) -> dict:
        return {"module_name": self.module_name, "format": 1}

    def blob_payloads(self) -> dict:
        return {"graph_json": self.graph_json.encode("utf-8"), "params": save_params(self.params)}


@register_func("runtime.module.loadbinary_GraphExecutorFactory", override=True)
def _load_factory(header: dict, payloads: dict, library) -> GraphExecutorFactory:
    try:
        graph_json = payloads["graph_json"].decode("utf-8")
        params_blob = payloads["params"]
        module_name = str(header["module_name"])
    except (KeyError, UnicodeDecodeError, AttributeError) as err:
        raise ModuleLoadError(f"graph executor factory blob is incomplete or corrupt: {err}") from None
    params = load_params(params_blob)
    return GraphExecutorFactory(graph_json, None, module_name, params)


@register_func("tvm.graph_executor.create", override=True)
def _create_global(graph_json_str, libmod, *devices):
    return GraphExecutor(graph_json_str, libmod, list(devices) or [cpu(0)])


def _aligned_copy(value) -> np.ndarray:
    src = value.numpy() if hasattr(value, "numpy") and not isinstance(value, np.ndarray) else np.asarray(value)
    out = _aligned_empty(src.shape, src.dtype)
    np.copyto(out, src)
    return out
