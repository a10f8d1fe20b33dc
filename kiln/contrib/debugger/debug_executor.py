"""The debug graph executor (TVM's ``debug_executor``): runs the graph node by node, keeps a copy of every
node's output (the memory plan would overwrite them) and times every kernel call.

    m = debug_executor.create(lib.get_graph_json(), lib.get_lib(), dev)   # or lib["debug_create"]("default", dev)
    m.set_input("data", x); m.run()                          # prints the per-node time table, as TVM's does
    m.debug_get_output("tvmgen_default_fused_nn_conv2d")   # a node's output
    report = m.profile()                                     # a kiln.runtime.profiling.Report
    print(report.table(sort=True, aggregate=True, col_sums=True))   # grouped by op type, slowest first
"""
from __future__ import annotations

import os
import re
import time

import numpy as np

from ...error import ArgumentError, KilnError
from ...runtime import ndarray as nd
from ...runtime.graph_executor import GraphExecutor, GraphModule
from ...runtime.params import save_params
from ...runtime.profiling import Count, Duration, Percent, Report
from ...runtime.library import num_threads

_NUMBERED = re.compile(r"_\d+$")


def op_type(func_name: str) -> str:
    """The kind of kernel a node runs: its function name without the module prefix (``tvmgen_default_``) and
    without the number that tells same-kind kernels apart (``fused_nn_conv2d_add_nn_relu_3`` ->
    ``fused_nn_conv2d_add_nn_relu``)."""
    name = re.sub(r"^tvmgen_[A-Za-z0-9]*_", "", func_name)
    return _NUMBERED.sub("", name) or func_name


class DebugResult:
    """Per-node outputs and times of the last ``run()``."""

    def __init__(self, executor: GraphExecutor):
        self._exec = executor
        # keyed by node index: a graph may (from another producer) give two nodes one name
        self.node_outputs: dict = {}   # node index -> [numpy array per output]
        self.node_times: dict = {}     # node index -> seconds (op nodes only)

    def clear(self) -> None:
        self.node_outputs.clear()
        self.node_times.clear()

    @property
    def outputs(self) -> dict:
        """node name -> [numpy array per output] of the last run."""
        nodes = self._exec.spec.nodes
        return {nodes[nid]["name"]: v for nid, v in self.node_outputs.items()}

    @property
    def times(self) -> dict:
        """node name -> seconds of the last run (op nodes only)."""
        nodes = self._exec.spec.nodes
        return {nodes[nid]["name"]: v for nid, v in self.node_times.items()}

    def get_output_tensors(self) -> dict:
        """``{"<node name>____topo-index:<i>____output-num:<k>": NDArray}`` as TVM names them."""
        out = {}
        for i, node in enumerate(self._exec.spec.nodes):
            for k, arr in enumerate(self.node_outputs.get(i, [])):
                out[f"{node['name']}____topo-index:{i}____output-num:{k}"] = nd.array(arr)
        return out

    def get_debug_result(self, sort_by_time: bool = True) -> str:
        """The per-op time table: node, kernel, time, share of the total, output shape."""
        spec = self._exec.spec
        rows = []
        total = sum(self.node_times.values()) or 1e-12
        for nid, node in enumerate(spec.nodes):
            if node["op"] != "tvm_op" or nid not in self.node_times:
                continue
            t = self.node_times[nid]
            shape = spec.shapes[spec.entry_id(nid, 0)]
            rows.append((node["name"], node["attrs"]["func_name"], t * 1e6, 100.0 * t / total, str(list(shape)),
                         len(node["inputs"]), spec.num_outputs(nid)))
        if sort_by_time:
            rows.sort(key=lambda r: -r[2])
        head = ("Node Name", "Ops", "Time(us)", "Time(%)", "Shape", "Inputs", "Outputs")
        width = [max(len(head[0]), *(len(r[0]) for r in rows)) if rows else len(head[0]),
                 max(len(head[1]), *(len(r[1]) for r in rows)) if rows else len(head[1]), 10, 8,
                 max(len(head[4]), *(len(r[4]) for r in rows)) if rows else len(head[4]), 6, 7]
        lines = ["  ".join(h.ljust(w) for h, w in zip(head, width)),
                 "  ".join("-" * w for w in width)]
        for r in rows:
            lines.append("  ".join([r[0].ljust(width[0]), r[1].ljust(width[1]), f"{r[2]:.3f}".ljust(width[2]),
                                    f"{r[3]:.2f}".ljust(width[3]), r[4].ljust(width[4]), str(r[5]).ljust(width[5]),
                                    str(r[6]).ljust(width[6])]))
        lines.append(f"Total time: {total * 1e6:.3f} us over {len(rows)} kernel calls")
        return "\n".join(lines)

    def display_debug_result(self, sort_by_time: bool = True) -> None:
        print(self.get_debug_result(sort_by_time))

    def get_op_times(self) -> list:
        """[(kernel name, seconds, share)] summed per kernel, slowest first."""
        spec = self._exec.spec
        per: dict = {}
        for nid, node in enumerate(spec.nodes):
            if node["op"] == "tvm_op" and nid in self.node_times:
                fn = node["attrs"]["func_name"]
                per[fn] = per.get(fn, 0.0) + self.node_times[nid]
        total = sum(per.values()) or 1e-12
        return sorted(((k, v, v / total) for k, v in per.items()), key=lambda r: -r[1])


class GraphModuleDebug(GraphModule):
    """A GraphModule whose ``run()`` goes node by node, recording outputs and times."""

    def __init__(self, module, device=None, graph_json_str=None, dump_root=None):
        super().__init__(module)
        self.device = device
        self._dump_root = dump_root
        self.debug_datum = DebugResult(self._exec)

    def run(self, **input_dict) -> None:
        """Run node by node, keep every node's output and time, and print the per-node table (as TVM's
        debug executor does); ``dump_root`` also gets the outputs and the table."""
        self._run_debug(**input_dict)
        self.debug_datum.display_debug_result()

    def _run_debug(self, **input_dict) -> float:
        """One node-by-node run, serialized with other threads' calls (as GraphExecutor.run); returns its
        wall time in seconds."""
        with self._exec._lock:
            return self._run_locked(input_dict)

    def _run_locked(self, input_dict: dict) -> float:
        start = time.perf_counter()
        ex = self._exec
        for name, value in input_dict.items():
            ex._copy_in(ex._index_of(name), value)
        ex._check_inputs_set()
        spec = ex.spec
        datum = self.debug_datum
        datum.clear()
        for nid in spec.input_nodes:
            datum.node_outputs[nid] = [ex.entries[spec.entry_id(nid, 0)].numpy()]
        perf = time.perf_counter
        calls = dict(ex.op_calls)
        for nid, node in enumerate(spec.nodes):
            if node["op"] != "tvm_op":
                continue
            call = calls.get(nid)
            if call is None:  # a "__nop" (reshape): no kernel; its output is its input's storage, read now
                t0 = t1 = 0.0
            else:
                t0 = perf()
                call()
                t1 = perf()
            datum.node_times[nid] = t1 - t0
            datum.node_outputs[nid] = [ex.entries[spec.entry_id(nid, k)].numpy()
                                       for k in range(spec.num_outputs(nid))]
        wall = time.perf_counter() - start
        if self._dump_root:
            self._dump()
        return wall

    def _dump(self) -> None:
        folder = os.path.join(self._dump_root, "_tvmdbg_device_CPU_0")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "_tvmdbg_graph_dump.json"), "w", encoding="utf-8") as f:
            f.write(self._exec.spec.json)
        with open(os.path.join(folder, "output_tensors.params"), "wb") as f:
            f.write(save_params(self.debug_datum.get_output_tensors()))
        with open(os.path.join(folder, "profile.txt"), "w", encoding="utf-8") as f:
            f.write(self.debug_datum.get_debug_result())

    def _node_index(self, node) -> int:
        spec = self._exec.spec
        if isinstance(node, str):
            found = [i for i, n in enumerate(spec.nodes) if n["name"] == node]
            if not found:
                names = [n["name"] for n in spec.nodes]
                raise ArgumentError(f"the graph has no node named {node!r}; its nodes: {', '.join(names)}")
            if len(found) > 1:
                raise ArgumentError(f"{len(found)} nodes are named {node!r} (indices {found}); name the node by "
                                    "its index instead")
            return found[0]
        if isinstance(node, (int, np.integer)) and not isinstance(node, bool):
            if not 0 <= int(node) < len(spec.nodes):
                raise ArgumentError(f"node index {int(node)} is out of range: the graph has {len(spec.nodes)} nodes")
            return int(node)
        raise ArgumentError(f"a node is named by a string or an index, got {type(node).__name__}")

    def debug_get_output(self, node, out=None, index: int = 0):
        """Output ``index`` of ``node`` (name or index) from the last ``run()``."""
        nid = self._node_index(node)
        name = self._exec.spec.nodes[nid]["name"]
        outs = self.debug_datum.node_outputs.get(nid)
        if outs is None:
            raise KilnError(f"no output recorded for node {name!r}: call run() first")
        if not 0 <= index < len(outs):
            raise ArgumentError(f"node {name!r} has {len(outs)} outputs, index {index} is out of range")
        arr = nd.array(outs[index])
        if out is not None:
            out.copyfrom(arr)
            return out
        return arr

    def get_node_outputs(self) -> dict:
        """``{node name: [numpy arrays]}`` from the last ``run()``."""
        return dict(self.debug_datum.outputs)

    def run_individual(self, number: int = 10, repeat: int = 1, min_repeat_ms: int = 0) -> list:
        """Mean seconds per call of every op node, each timed on its own."""
        results = []
        calls = dict(self._exec.op_calls)
        for nid, node in enumerate(self._exec.spec.nodes):
            if node["op"] != "tvm_op":
                continue
            call = calls.get(nid)
            if call is None:  # a "__nop" (reshape) node runs nothing, as in TVM
                results.append(0.0)
                continue
            best = []
            for _ in range(repeat):
                n = number
                while True:
                    t0 = time.perf_counter()
                    for _ in range(n):
                        call()
                    dt = time.perf_counter() - t0
                    if dt * 1e3 >= min_repeat_ms or n > 1 << 20:
                        break
                    n *= 2
                best.append(dt / n)
            results.append(float(np.mean(best)))
        return results

    def profile(self, collectors=None, **input_dict) -> Report:
        """Run once node by node and return a :class:`kiln.runtime.profiling.Report`: one call per kernel
        (``Name`` = its op type, duration, share of the kernels' total, argument shapes), that total on
        ``cpu0``, and the thread count. ``report.table()`` prints it grouped by op type."""
        if collectors:
            raise NotImplementedError("debug_executor.profile(collectors=...): kiln has no metric collectors "
                                      "(PAPI and friends); call profile() without them")
        self._run_debug(**input_dict)
        spec = self._exec.spec
        times = self.debug_datum.node_times
        # the device's total is the time spent in kernels: the debug run's own copies of every node's output
        # are not the model's cost
        total_us = max(sum(times.values()), 1e-12) * 1e6
        d = self.device
        dev = f"{d.MASK2STR.get(d.device_type, 'cpu')}{d.device_id}" if hasattr(d, "MASK2STR") else "cpu0"
        calls = []
        for nid, node in enumerate(spec.nodes):
            if node["op"] != "tvm_op" or nid not in times:
                continue
            us = times[nid] * 1e6
            entries = [spec.entry_id(i[0], i[1]) for i in node["inputs"]] + \
                [spec.entry_id(nid, k) for k in range(spec.num_outputs(nid))]
            shapes = ", ".join(f"{spec.dtypes[e]}{list(spec.shapes[e])}" for e in entries)
            calls.append({"Name": op_type(node["attrs"]["func_name"]), "Duration (us)": Duration(us),
                          "Percent": Percent(100.0 * us / total_us), "Count": Count(1), "Device": dev,
                          "Argument Shapes": shapes})
        return Report(calls, {dev: {"Name": "Total", "Duration (us)": Duration(total_us), "Percent": Percent(100.0),
                                    "Count": Count(1)}},
                      {"Number of threads": Count(num_threads()), "Executor": "Graph"})


def create(graph_json_str, libmod, device, dump_root=None) -> GraphModuleDebug:
    """A debug GraphModule for ``graph_json_str`` over the kernels of ``libmod``."""
    devices = device if isinstance(device, (list, tuple)) else [device]
    ex = GraphExecutor(graph_json_str, libmod, devices)
    return GraphModuleDebug(ex, devices[0], graph_json_str, dump_root)
