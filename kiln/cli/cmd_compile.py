"""``kiln compile MODEL -o OUT.so``: import a model, optimize and compile it into one deployable file."""
from __future__ import annotations

import os
import time

from ..target.x86 import target_cpu_summary

from .build import (DUMP_FORMATS, LAYOUTS, build_model, build_vm_model, describe_inputs, dump_code,
                    parse_dump_formats)
from .common import (MODEL_FORMATS, CLIError, detail, has_dynamic_inputs, human_bytes, info, load_model,
                     parse_input_shapes, parse_target)


def add_parser(sub) -> None:
    p = sub.add_parser("compile", help="compile a model file into a deployable .so/.tar",
                       description="Import a model (ONNX, TorchScript, Relay text), run the optimization passes, "
                       "compile it for the target and write one file that `kiln run` (or "
                       "kiln.runtime.load_module) loads without a compiler.")
    add_model_arguments(p)
    p.add_argument("-o", "--output", default=None,
                   help="output file, .so (default: the model's name with .so) or .tar")
    add_opt_level_argument(p)
    p.add_argument("--tuning-records", default=None, metavar="LOG", help="AutoTVM log to apply (kiln tune -o)")
    add_layout_argument(p)
    p.add_argument("--dump-code", default=None, metavar="FORMATS",
                   help=f"also write the code as text, comma separated from {{{','.join(DUMP_FORMATS)}}}: "
                   "generated C, optimized Relay, TIR of every kernel; written next to the output as OUTPUT.<format>")
    p.add_argument("--use-vm", action="store_true",
                   help="compile for the Relay VM (kiln.runtime.vm) instead of the graph executor; automatic when "
                   "an input has a dynamic dimension (ONNX dynamic axes left out of --input-shapes): the file then "
                   "runs at every size of those dimensions")
    p.set_defaults(handler=run)


def add_model_arguments(p) -> None:
    """MODEL, --model-format, --input-shapes, --params, --target: shared by compile, tune and bench."""
    p.add_argument("model", metavar="MODEL", help="model file: .onnx, TorchScript .pt, or Relay text .txt/.relay")
    p.add_argument("--model-format", choices=MODEL_FORMATS, default=None,
                   help="model format (default: from the file extension)")
    p.add_argument("--input-shapes", default=None, metavar="SHAPES",
                   help="input shapes, e.g. data:1x3x224x224,mask:[1,128]:int64 or tvmc's "
                   "'data:[1,3,224,224] mask:[1,128]' (needed for TorchScript and for ONNX inputs with dynamic "
                   "dimensions)")
    p.add_argument("--params", default=None, metavar="FILE",
                   help="Relay params file for a Relay text model (default: MODEL's name with .params, if it exists)")
    p.add_argument("--target", default="llvm", help="compilation target (default: llvm = the host CPU; "
                   "e.g. 'llvm -mcpu=core-avx2')")


def add_opt_level_argument(p) -> None:
    p.add_argument("-O", "--opt-level", type=int, default=3, choices=range(0, 5), metavar="{0..4}",
                   help="PassContext opt_level (default 3), e.g. -O3")


def add_layout_argument(p) -> None:
    p.add_argument("--desired-layout", default=None, type=str.upper, choices=LAYOUTS,
                   help="convert the convolutions to this data layout before compiling (ConvertLayout)")


def run(args) -> int:
    target = parse_target(args.target)
    specs = parse_input_shapes(args.input_shapes)
    dumps = parse_dump_formats(args.dump_code)
    output = args.output or os.path.splitext(os.path.basename(args.model))[0] + ".so"
    if not output.endswith((".so", ".tar")):
        raise CLIError(f"-o {output!r}: the output must end in .so (shared library) or .tar (objects)")
    out_dir = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(out_dir):
        raise CLIError(f"-o {output!r}: the folder {out_dir!r} does not exist")

    start = time.perf_counter()
    model = load_model(args.model, args.model_format, specs, args.params)
    import_s = time.perf_counter() - start
    info(f"imported {args.model} ({model.fmt}) in {import_s:.2f} s; inputs: {describe_inputs(model.inputs)}")
    compile_loaded(model, target, output, args.opt_level, args.tuning_records, args.desired_layout, dumps,
                   use_vm=args.use_vm)
    return 0


def compile_loaded(model, target, output: str, opt_level: int = 3, tuning_records: str | None = None,
                   desired_layout: str | None = None, dumps: list = (), use_vm: bool = False):
    """Build a loaded model, export it to ``output`` and write the ``--dump-code`` files; returns the factory
    module, or the VM Executable when ``use_vm`` or an input has a dynamic dimension (``kiln compile`` and
    ``kiln.driver.tvmc.compile``)."""
    if use_vm or has_dynamic_inputs(model):
        return _compile_vm(model, target, output, opt_level, tuning_records, desired_layout, dumps)
    lib, build_s, n_tuned = build_model(model, target, opt_level, tuning_records, desired_layout)
    if tuning_records:
        info(f"applied tuning records from {tuning_records} ({n_tuned} tuned workload(s))")
    lib.export_library(output)
    plan = getattr(lib, "memory_plan", None)
    lowered = getattr(lib, "lowered", [])
    info(f"target CPU: {target_cpu_summary(target)}")
    info(f"compiled for {target} at opt_level {opt_level}"
         + (f" in layout {desired_layout}" if desired_layout else "")
         + f" in {build_s:.2f} s ({len(lowered)} kernels, {len(lib.get_params())} params)")
    for cf in lowered:
        detail(f"  kernel {cf.func_name}: {cf.anchor_op} via {cf.implementation}")
    if plan is not None:
        info(str(plan))
    for fmt in dumps:
        path = f"{output}.{fmt}"
        with open(path, "w", encoding="utf-8") as f:
            f.write(dump_code(lib, fmt))
        info(f"wrote the {fmt} code to {path}")
    info(f"wrote {output} ({human_bytes(os.path.getsize(output))})")
    return lib


def _compile_vm(model, target, output: str, opt_level: int, tuning_records: str | None,
                desired_layout: str | None, dumps: list):
    """The VM flavour of :func:`compile_loaded`: ``relay.vm.compile`` and ``exe.mod.export_library`` (one file
    holding the bytecode, the constants and the kernels; ``kiln run`` and ``VirtualMachine(load_module(f))``
    load it)."""
    unsupported = [f for f in dumps if f != "c"]
    if unsupported:
        raise CLIError(f"--dump-code {','.join(unsupported)}: a VM build can dump only its generated C (c); "
                       "the optimized Relay and TIR dumps exist for graph-executor builds")
    dynamic = [n for n, s, _ in model.inputs if any(d < 0 for d in s)]
    exe, build_s, n_tuned = build_vm_model(model, target, opt_level, tuning_records, desired_layout)
    if tuning_records:
        info(f"applied tuning records from {tuning_records} ({n_tuned} tuned workload(s))")
    exe.mod.export_library(output)
    info(f"target CPU: {target_cpu_summary(target)}")
    why = f"dynamic input(s) {', '.join(dynamic)}" if dynamic else "--use-vm"
    info(f"compiled for the Relay VM ({why}) for {target} at opt_level {opt_level}"
         + (f" in layout {desired_layout}" if desired_layout else "")
         + f" in {build_s:.2f} s ({len(exe.primitive_ops)} kernels, {len(exe.constants)} constants)")
    detail(exe.stats)
    for fmt in dumps:
        path = f"{output}.{fmt}"
        lib = exe.get_lib()
        with open(path, "w", encoding="utf-8") as f:
            f.write(lib.get_source())
        info(f"wrote the {fmt} code to {path}")
    info(f"wrote {output} ({human_bytes(os.path.getsize(output))}; a VM executable: run it with `kiln run`, "
         "giving inputs of any size for the dynamic dimensions)")
    return exe
