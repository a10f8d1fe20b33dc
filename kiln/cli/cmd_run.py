"""``kiln run OUT.so``: load a compiled model (no compiler needed), run it, summarize the outputs and latency."""
from __future__ import annotations

import os
import time

import numpy as np

from .common import (CLIError, add_threads_argument, apply_threads, check_file, check_input_array, info,
                     random_input, read_inputs_file)
from ..runtime import cpu, ndarray as nd
from ..runtime.vm import VirtualMachine, ADT
from ..runtime.graph_executor import GraphModule
from ..runtime.module import load_module


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="run a compiled model (.so/.tar) on inputs or random data",
                       description="Load a model written by `kiln compile` with kiln.runtime.load_module (no "
                       "compiler needed), feed it inputs from an .npz (one array per input name) or .npy (a "
                       "one-input model) file, generated data for the rest, run it and print a summary of every "
                       "output. Inputs must have the model's dtype: nothing is converted silently.")
    p.add_argument("module", metavar="MODULE", help="compiled model (.so or .tar from kiln compile)")
    p.add_argument("-i", "--inputs", default=None, metavar="FILE",
                   help=".npz file with one array per input name, or .npy for a model with one input")
    p.add_argument("-o", "--outputs", default=None, metavar="NPZ", help="save the outputs as output_0, output_1, ...")
    p.add_argument("--fill-mode", choices=("random", "zeros", "ones"), default="random",
                   help="how to make inputs the file does not give (default: random)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--print-top", type=int, default=0, metavar="N",
                   help="print the N largest values (and their indices) of each output")
    p.add_argument("--print-time", action="store_true",
                   help="time --repeat x --number runs and print mean/median/max/min/std in ms")
    p.add_argument("--profile", action="store_true",
                   help="run node by node and print the per-op time table (grouped by op type)")
    p.add_argument("--repeat", type=int, default=None, metavar="N",
                   help="timed repeats (default 10 with --print-time); giving it also prints the times")
    p.add_argument("--number", type=int, default=1, metavar="N", help="runs per timed repeat (default 1)")
    add_threads_argument(p)
    p.set_defaults(handler=run)


class VMRunner:
    """A VM executable (``kiln compile`` of a dynamic model, or ``exe.mod.export_library``) behind the few
    GraphModule methods ``kiln run`` uses: input info (-1 for a dynamic dim), set_input, run, outputs,
    benchmark."""

    def __init__(self, lib):
        self.vm = VirtualMachine(lib, cpu(0))
        exe = self.vm.exe
        main = exe.functions[exe.func_index["main"]]
        self.names = list(main.params)
        types = main.param_types or [None] * len(self.names)
        self.types = dict(zip(self.names, types))
        self.values: dict = {}
        self.outputs: list = []

    def get_input_info(self):
        shapes, dtypes = {}, {}
        for name in self.names:
            ty = self.types[name]
            if ty is None or ty[0] != "tensor":
                raise CLIError(f"the VM model's input {name!r} is not a tensor; kiln run feeds tensors only "
                               "(call it from Python with kiln.runtime.vm.VirtualMachine)")
            shapes[name], dtypes[name] = tuple(int(d) for d in ty[1]), str(ty[2])
        return shapes, dtypes

    def set_input(self, name: str, value) -> None:
        self.values[name] = value

    def run(self) -> None:
        self.vm.set_input("main", **self.values)
        self.vm.invoke_stateful("main")
        self.outputs = [o.numpy() for o in _flatten(self.vm.get_outputs())]

    def get_num_outputs(self) -> int:
        return len(self.outputs)

    def get_output(self, i: int):
        return nd.array(self.outputs[i])

    def benchmark(self, device, repeat: int = 10, number: int = 1, end_to_end: bool = False):
        return self.vm.benchmark(device, func_name="main", repeat=repeat, number=number)


def _flatten(values) -> list:
    out = []
    for v in values:
        out.extend(_flatten(v) if isinstance(v, ADT) else [v])
    return out


def is_vm_module(lib) -> bool:
    """Whether a loaded module is a VM executable (it has ``vm_load_executable``)."""
    try:
        lib["vm_load_executable"]
        return True
    except Exception:  # noqa: BLE001 - FunctionNotFound and friends
        return False


def load_graph_module(path: str):
    """(factory module, GraphModule on cpu(0)) of a compiled model file; for a VM executable the module and
    a :class:`VMRunner`."""
    check_file(path, "compiled module")
    lib = load_module(path)
    if is_vm_module(lib):
        return lib, VMRunner(lib)
    try:
        create = lib["default"]
    except Exception:  # noqa: BLE001 - FunctionNotFound and friends
        raise CLIError(f"{path} holds no graph executor model (no 'default' function); write it with "
                       "`kiln compile` or relay.build(...).export_library") from None
    return lib, GraphModule(create(cpu(0)))


def prepare_inputs(gmod, inputs_path: str | None, fill: str, seed: int) -> dict:
    """{name: numpy array} for every graph input: from the .npz/.npy where given, else generated."""
    shapes, dtypes = gmod.get_input_info()
    given = read_inputs_file(inputs_path, list(shapes)) if inputs_path else {}
    rng = np.random.default_rng(seed)
    values = {}
    for name, shape in shapes.items():
        shape, dtype = tuple(int(d) for d in shape), str(dtypes[name])
        if name in given:
            values[name] = check_input_array(name, given[name], shape, dtype, inputs_path)
        elif any(d < 0 for d in shape):
            shown = "[" + ", ".join("?" if d < 0 else str(d) for d in shape) + "]"
            raise CLIError(f"input {name!r} has dynamic dimensions {shown} (a VM model): give its value, of the "
                           f"size you want, in --inputs (an .npz with an array named {name!r})")
        else:
            if dtype == "bfloat16":
                raise CLIError(f"input {name!r} is bfloat16, which kiln's runtime cannot fill from numpy; "
                               "compile the model in float32 (model.float() in PyTorch) or float16")
            values[name] = random_input(shape, dtype, rng, fill)
    return values


def format_times(res) -> str:
    """tvmc's execution time summary (ms) of a BenchmarkResult."""
    cols = ("mean (ms)", "median (ms)", "max (ms)", "min (ms)", "std (ms)")
    vals = (res.mean, res.median, res.max, res.min, res.std)
    return ("Execution time summary:\n" + " ".join(f"{c:>12}" for c in cols) + "\n"
            + " ".join(f"{v * 1e3:>12.4f}" for v in vals))


def summarize(index: int, out: np.ndarray, top: int) -> str:
    lines = [f"output {index}: shape {list(out.shape)} {out.dtype}"]
    if out.size:
        vals = out.astype(np.float64) if out.dtype.kind in "fiub" else out
        lines[0] += (f"  min {np.min(vals):.6g}  max {np.max(vals):.6g}  mean {np.mean(vals):.6g}"
                     f"  std {np.std(vals):.6g}")
        if out.dtype.kind == "f" and not np.all(np.isfinite(out)):
            lines.append(f"  warning: {int(np.sum(~np.isfinite(out)))} non-finite values")
    if top > 0 and out.size:
        flat = out.reshape(-1)
        k = min(top, flat.size)
        idx = np.argsort(-flat.astype(np.float64), kind="stable")[:k]
        coords = [np.unravel_index(i, out.shape) for i in idx]
        lines.append(f"  top {k}:")
        for i, c in zip(idx, coords):
            lines.append(f"    [{', '.join(str(int(x)) for x in c)}] = {flat[i]:.6g}")
    return "\n".join(lines)


def run(args) -> int:
    if args.print_top < 0 or (args.repeat is not None and args.repeat < 1) or args.number < 1:
        raise CLIError("--print-top must be >= 0, --repeat and --number >= 1")
    apply_threads(args.threads)   # before the kernels load: they read the thread count then
    lib, gmod = load_graph_module(args.module)
    values = prepare_inputs(gmod, args.inputs, args.fill_mode, args.seed)
    for name, value in values.items():
        gmod.set_input(name, value)
    start = time.perf_counter()
    gmod.run()
    first_ms = (time.perf_counter() - start) * 1e3
    outputs = [gmod.get_output(i).numpy() for i in range(gmod.get_num_outputs())]
    info(f"ran {args.module}: {len(values)} input(s), {len(outputs)} output(s), first run {first_ms:.3f} ms")
    for i, out in enumerate(outputs):
        print(summarize(i, out, args.print_top))
    if args.outputs:
        out_dir = os.path.dirname(os.path.abspath(args.outputs))
        if not os.path.isdir(out_dir):
            raise CLIError(f"--outputs {args.outputs!r}: the folder {out_dir!r} does not exist")
        path = args.outputs if args.outputs.endswith(".npz") else args.outputs + ".npz"  # as np.savez names it
        np.savez(path, **{f"output_{i}": o for i, o in enumerate(outputs)})
        info(f"saved outputs to {path}")
    if args.profile and isinstance(gmod, VMRunner):
        raise CLIError("--profile needs the graph executor's debug runtime; this file is a VM executable "
                       "(compiled from a model with dynamic dimensions, or with --use-vm)")
    if args.profile:
        dbg = lib["debug_create"]("default", cpu(0))
        for name, value in values.items():
            dbg.set_input(name, value)
        print(dbg.profile().table(sort=True, aggregate=True, col_sums=True))
    if args.print_time or args.repeat is not None:
        repeat = args.repeat or 10
        res = gmod.benchmark(cpu(0), repeat=repeat, number=args.number)
        info(f"latency over {repeat} x {args.number} run(s): median {res.median * 1e3:.4f} ms, "
             f"min {res.min * 1e3:.4f} ms")
        print(format_times(res))
    return 0
