"""``kiln compile MODEL -o OUT.so``: import a model, optimize and compile it into one deployable file."""
from __future__ import annotations

import os
import time

from .build import build_model, describe_inputs
from .common import MODEL_FORMATS, CLIError, human_bytes, load_model, parse_input_shapes, parse_target


def add_parser(sub) -> None:
    p = sub.add_parser("compile", help="compile a model file into a deployable .so/.tar",
                       description="Import a model (ONNX, TorchScript, Relay text), run the optimization passes, "
                       "compile it for the target and write one file that `kiln run` (or "
                       "kiln.runtime.load_module) loads without a compiler.")
    add_model_arguments(p)
    p.add_argument("-o", "--output", default=None,
                   help="output file, .so (default: the model's name with .so) or .tar")
    p.add_argument("--opt-level", type=int, default=3, choices=range(0, 5), metavar="{0..4}",
                   help="PassContext opt_level (default 3)")
    p.add_argument("--tuning-records", default=None, metavar="LOG", help="AutoTVM log to apply (kiln tune -o)")
    p.set_defaults(handler=run)


def add_model_arguments(p) -> None:
    """MODEL, --model-format, --input-shapes, --params, --target: shared by compile, tune and bench."""
    p.add_argument("model", metavar="MODEL", help="model file: .onnx, TorchScript .pt, or Relay text .txt/.relay")
    p.add_argument("--model-format", choices=MODEL_FORMATS, default=None,
                   help="model format (default: from the file extension)")
    p.add_argument("--input-shapes", default=None, metavar="SHAPES",
                   help="input shapes, e.g. data:1x3x224x224,mask:[1,128]:int64 (needed for TorchScript and "
                   "for ONNX inputs with dynamic dimensions)")
    p.add_argument("--params", default=None, metavar="FILE",
                   help="Relay params file for a Relay text model (default: MODEL's name with .params, if it exists)")
    p.add_argument("--target", default="llvm", help="compilation target (default: llvm)")


def run(args) -> int:
    target = parse_target(args.target)
    specs = parse_input_shapes(args.input_shapes)
    output = args.output or os.path.splitext(os.path.basename(args.model))[0] + ".so"
    if not output.endswith((".so", ".tar")):
        raise CLIError(f"-o {output!r}: the output must end in .so (shared library) or .tar (objects)")
    out_dir = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(out_dir):
        raise CLIError(f"-o {output!r}: the folder {out_dir!r} does not exist")

    start = time.perf_counter()
    model = load_model(args.model, args.model_format, specs, args.params)
    import_s = time.perf_counter() - start
    print(f"imported {args.model} ({model.fmt}) in {import_s:.2f} s; inputs: {describe_inputs(model.inputs)}")
    lib, build_s, n_tuned = build_model(model, target, args.opt_level, args.tuning_records)
    if args.tuning_records:
        print(f"applied tuning records from {args.tuning_records} ({n_tuned} tuned workload(s))")
    lib.export_library(output)
    plan = getattr(lib, "memory_plan", None)
    from ..target.x86 import target_cpu_summary
    print(f"target CPU: {target_cpu_summary(target)}")
    print(f"compiled for {target} at opt_level {args.opt_level} in {build_s:.2f} s "
          f"({len(getattr(lib, 'lowered', []))} kernels, {len(lib.get_params())} params)")
    if plan is not None:
        print(plan)
    print(f"wrote {output} ({human_bytes(os.path.getsize(output))})")
    return 0
