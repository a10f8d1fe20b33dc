"""Per-kernel profile of one model: kiln (debug executor, each fused kernel timed on its own) beside ONNX
Runtime's profiler (per node), same thread count, grouped by kernel / op type.

    python -m benchmarks.profile_ops --model bert --threads 1 [--reps 20] [--target "llvm -mcpu=core-avx2"]
    python -m benchmarks.profile_ops --model bert --isa avx2    # kiln core-avx2 beside ORT's AVX2 kernels

Wall-clock times: on a loaded machine compare the *shares* of each side, not the two sides' milliseconds.
Prints only; nothing is written.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import tempfile

from . import isa_hold


def _kiln(model, inputs, target: str, reps: int) -> list:
    import numpy as np
    import torch
    import kiln as tvm
    from kiln import relay
    from kiln.contrib.debugger import debug_executor
    scripted = torch.jit.trace(model, inputs).eval()
    shapes = [(f"input{i}", (tuple(x.shape), str(x.dtype).replace("torch.", ""))) for i, x in enumerate(inputs)]
    mod, params = relay.frontend.from_pytorch(scripted, shapes)
    tgt = tvm.target.Target(target)
    with tvm.transform.PassContext(opt_level=3), tgt:
        lib = relay.build(mod, target=tgt, params=params)
    m = debug_executor.create(lib.get_graph_json(), lib.get_lib(), tvm.cpu(0))
    for (name, _), x in zip(shapes, inputs):
        m.set_input(name, tvm.nd.array(x.numpy()))
    m.set_input(**lib.get_params())
    times = np.minimum(*[np.array(m.run_individual(number=reps, repeat=3)) for _ in range(2)])
    names = [n["attrs"]["func_name"] for n in m._exec.spec.nodes if n["op"] == "tvm_op"]
    agg = collections.defaultdict(lambda: [0.0, 0])
    for name, t in zip(names, times):
        key = re.sub(r"_\d+$", "", name.replace("tvmgen_default_", ""))
        agg[key][0] += float(t)
        agg[key][1] += 1
    return sorted(((k, t * 1e3, c) for k, (t, c) in agg.items()), key=lambda r: -r[1])


def _ort(model, inputs, threads: int, reps: int) -> list:
    import onnxruntime as ort
    import torch
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        torch.onnx.export(model, inputs, path, input_names=[f"input{i}" for i in range(len(inputs))], dynamo=False)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.enable_profiling = True
        opts.profile_file_prefix = os.path.join(tmp, "ort")
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        feed = {f"input{i}": x.numpy() for i, x in enumerate(inputs)}
        for _ in range(reps):
            sess.run(None, feed)
        with open(sess.end_profiling()) as f:
            events = json.load(f)
    runs = max(1, sum(1 for e in events if e.get("name") == "model_run"))
    agg = collections.defaultdict(lambda: [0.0, 0])
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            agg[e["args"]["op_name"]][0] += e["dur"] / 1e3 / runs
            agg[e["args"]["op_name"]][1] += 1
    return sorted(((k, t, c // runs) for k, (t, c) in agg.items()), key=lambda r: -r[1])


def _print(title: str, rows: list, top: int) -> None:
    total = sum(r[1] for r in rows) or 1e-12
    print(f"== {title}: {total:.3f} ms in kernels")
    for name, ms, count in rows[:top]:
        print(f"  {ms:9.3f} ms {100 * ms / total:5.1f}%  x{count:<4d} {name}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="bert")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--target", default=None, help="kiln's target (default llvm; llvm -mcpu=core-avx2 with --isa avx2)")
    isa_hold.add_argument(p, "ONNX Runtime")
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args(argv)
    os.environ["KILN_NUM_THREADS"] = str(args.threads)
    isa_target = isa_hold.apply(p, args.isa, pytorch=False)
    args.target = args.target or isa_target or "llvm"
    import torch
    torch.set_num_threads(args.threads)
    from .models import MODELS
    model, inputs = MODELS[args.model][1]()
    _print(f"kiln {args.model} ({args.target}, {args.threads} thread(s))", _kiln(model, inputs, args.target, args.reps),
           args.top)
    held = f", held to {args.isa.upper()}" if args.isa else ""
    _print(f"ONNX Runtime {args.model} ({args.threads} thread(s){held})", _ort(model, inputs, args.threads, args.reps * 3),
           args.top)


if __name__ == "__main__":
    main()
