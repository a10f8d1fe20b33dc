"""kiln and ONNX Runtime on the MLP (784-512-512-10, fp32) in several fresh processes: is kiln's speed a
property of the process (bimodal across processes) or of the moment (the machine's load)?

    python -m benchmarks.mlp_processes [--batch 64] [--processes 10] [--rounds 40] [--number 10]
                                       [--policy adaptive|fixed] [--threads 2] [--env K=V ...]
                                       [--variant NAME:K=V,K=V ...] [--out NAME]

Each process builds the same ONNX graph (random weights, seed 0; ``Gemm`` + ``Relu``, no PyTorch import, so a
process starts in about a second) for kiln (``relay.frontend.from_onnx``, opt_level 3, target ``llvm``) and for
ONNX Runtime (``intra_op_num_threads=--threads``), checks kiln's output against ONNX Runtime's, then times
both interleaved: ``--rounds`` blocks of ``--number`` calls each, kiln and ONNX Runtime in turn (before each block
``benchmarks.common.settle``'s pause, until the threads the other contender left spinning are idle, and one
untimed call, as in benchmarks.common.interleaved). Reports per process: kiln's and
ONNX Runtime's median and min ms per call, kiln / ONNX Runtime (median of the per-round ratios), the thread
count kiln's policy had in each block (blocks run at 1 and at 2 threads are summarised apart), the others'
busy cores the adaptive policy measured, and kiln's thread-pool counters. ``--env K=V`` is set in every child
(e.g. ``KILN_POOL_SPIN_US=0``; ``KILN_ROOT=<checkout>``: import kiln from another checkout, e.g. a baseline);
each ``--variant`` runs ``--processes`` processes with its own extra environment, alternating with the other
variants' processes. Writes benchmarks/results/<NAME>.{md,json} unless ``--out ''``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

DIMS = (784, 512, 512, 10)


def onnx_mlp(batch: int):
    """The MLP as an ONNX model (Gemm with transB=1, as torch.onnx exports nn.Linear)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    prev = "input0"
    for i in range(len(DIMS) - 1):
        w = (rng.standard_normal((DIMS[i + 1], DIMS[i])) / np.sqrt(DIMS[i])).astype("float32")
        b = (rng.standard_normal(DIMS[i + 1]) * 0.1).astype("float32")
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        out = f"gemm{i}" if i < len(DIMS) - 2 else "output0"
        nodes.append(helper.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [out], transB=1))
        if i < len(DIMS) - 2:
            nodes.append(helper.make_node("Relu", [out], [f"relu{i}"]))
            prev = f"relu{i}"
    graph = helper.make_graph(nodes, "mlp",
                              [helper.make_tensor_value_info("input0", TensorProto.FLOAT, [batch, DIMS[0]])],
                              [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [batch, DIMS[-1]])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _settle():
    """benchmarks.common.settle, loaded from the file beside this one (the child runs this file as a plain module,
    with another kiln checkout possibly first on sys.path)."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "common.py")
    spec = importlib.util.spec_from_file_location("mlp_processes_common", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.settle


def build_mlp(batch: int, threads: int, kiln_threads: int | None = None) -> tuple:
    """The MLP (random weights, input seed 1) built by kiln (``relay.frontend.from_onnx``, opt_level 3, target
    ``llvm``) and by ONNX Runtime (``intra_op_num_threads=threads``): ``(GraphModule with its input set, session,
    feed)``. ``kiln_threads``: kiln's thread count, set after the build and before the executor is made. Here,
    not in benchmarks.common: the fresh processes load this file alone (their kiln may be another checkout)."""
    import numpy as np
    import onnxruntime as ort
    import kiln as tvm
    from kiln import relay
    from kiln.runtime.graph_executor import GraphModule
    model = onnx_mlp(batch)
    x = np.random.default_rng(1).standard_normal((batch, DIMS[0])).astype("float32")
    mod, params = relay.frontend.from_onnx(model, {"input0": x.shape})
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    if kiln_threads is not None:
        from kiln.runtime import set_num_threads
        set_num_threads(kiln_threads)
    g = GraphModule(lib["default"](tvm.cpu(0)))
    g.set_input("input0", tvm.nd.array(x))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return g, sess, {"input0": x}


def child(args) -> dict:
    """One process: build both, check, time interleaved; returns the summary (printed as JSON)."""
    import numpy as np
    from kiln.runtime import thread_pool, thread_status
    g, sess, feed = build_mlp(args.batch, args.threads)
    g.run()
    want = sess.run(None, feed)[0]
    err = float(np.abs(g.get_output(0).numpy() - want).max())
    if not err < 1e-3:
        raise AssertionError(f"kiln differs from ONNX Runtime by {err}")

    settle = _settle()

    def block(fn):
        settle()  # until ONNX Runtime's spinning worker is idle (it outlasted the 20 ms pause used before)
        fn()
        t0 = time.perf_counter()
        for _ in range(args.number):
            fn()
        return (time.perf_counter() - t0) / args.number * 1e3

    for _ in range(3):
        g.run()
        sess.run(None, feed)
    kiln_ms, ort_ms, kiln_threads = [], [], []
    for _ in range(args.rounds):
        kiln_threads.append(thread_status()["threads"])
        kiln_ms.append(block(g.run))
        ort_ms.append(block(lambda: sess.run(None, feed)))
    by_threads = {}
    for t in sorted(set(kiln_threads)):
        sel = [i for i, k in enumerate(kiln_threads) if k == t]
        by_threads[t] = {"blocks": len(sel), "kiln_median_ms": statistics.median(kiln_ms[i] for i in sel),
                         "ort_median_ms": statistics.median(ort_ms[i] for i in sel)}
    st = thread_status()
    return {"kiln_median_ms": statistics.median(kiln_ms), "kiln_min_ms": min(kiln_ms),
            "ort_median_ms": statistics.median(ort_ms), "ort_min_ms": min(ort_ms),
            "ratio": statistics.median(k / o for k, o in zip(kiln_ms, ort_ms)), "by_threads": by_threads,
            "others_busy_cores": st["others_busy_cores"], "policy": st["policy"], "pool": thread_pool.pool_stats(),
            "max_abs_err": err, "load_average": list(os.getloadavg())}


def parse_variant(text: str) -> tuple:
    """``NAME:K=V,K=V`` (or ``NAME:``) -> (NAME, {K: V})."""
    name, _, rest = text.partition(":")
    env = {}
    for kv in filter(None, rest.split(",")):
        k, _, v = kv.partition("=")
        env[k] = v
    return name or "default", env


CHILD = ("import sys; sys.path.insert(0, sys.argv.pop(1)); import importlib.util as u; "
         "spec = u.spec_from_file_location('mlp_processes_child', sys.argv.pop(1)); m = u.module_from_spec(spec); "
         "spec.loader.exec_module(m); m.main(sys.argv[1:])")


def parent(args) -> dict:
    from .common import machine_info
    variants = [parse_variant(v) for v in (args.variant or ["default:"])]
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    child_args = ["--child", "--batch", str(args.batch), "--rounds", str(args.rounds), "--number", str(args.number),
                  "--threads", str(args.threads)]
    runs: dict = {name: [] for name, _ in variants}
    for i in range(args.processes):
        for name, extra in variants:  # variants alternate, so the machine's load drifts hit them alike
            env = dict(os.environ)
            env["KILN_THREAD_POLICY"] = args.policy
            env["KILN_NUM_THREADS"] = str(args.threads)
            for kv in args.env:
                k, _, v = kv.partition("=")
                env[k] = v
            env.update(extra)
            root = env.pop("KILN_ROOT", here)  # the kiln checkout the child imports (another one: a baseline)
            env["PYTHONPATH"] = root
            cmd = [sys.executable, "-c", CHILD, root, os.path.abspath(__file__)] + child_args
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=root)
            if out.returncode != 0:
                raise RuntimeError(f"process {i} ({name}) failed:\n{out.stderr[-3000:]}")
            r = json.loads(out.stdout.strip().splitlines()[-1])
            runs[name].append(r)
            print(f"{name} process {i}: kiln {r['kiln_median_ms']:.3f} ms (min {r['kiln_min_ms']:.3f}), onnxruntime "
                  f"{r['ort_median_ms']:.3f} (min {r['ort_min_ms']:.3f}), ratio {r['ratio']:.2f}, threads "
                  f"{ {k: v['blocks'] for k, v in r['by_threads'].items()} }, others {r['others_busy_cores']}, "
                  f"pool {r['pool']}, load {r['load_average'][0]:.1f}", flush=True)
    return {"machine": machine_info(), "batch": args.batch, "policy": args.policy, "threads": args.threads,
            "env": args.env, "rounds": args.rounds, "number": args.number,
            "variants": {name: env for name, env in variants}, "processes": runs}


def to_markdown(data: dict) -> str:
    from .common import machine_line
    lines = [f"# MLP 784-512-512-10 batch {data['batch']}: kiln and ONNX Runtime in fresh processes", "",
             machine_line(data["machine"]), "",
             f"kiln policy `{data['policy']}`, {data['threads']} threads requested; ONNX Runtime "
             f"intra_op_num_threads={data['threads']}; env {' '.join(data['env']) or '(none)'}; {data['rounds']} "
             f"interleaved rounds of {data['number']} calls per process; the variants' processes alternate. Median "
             "ms per call of each process (min); ratio = median of the per-round kiln / ONNX Runtime; kiln at "
             "1 / 2 threads: the rounds kiln's thread policy ran at that count and their median.", ""]
    for name, runs in data["processes"].items():
        env = data["variants"].get(name) or {}
        lines += [f"## {name} ({', '.join(f'{k}={v}' for k, v in env.items()) or 'defaults'})", "",
                  "| process | kiln | onnxruntime | ratio | kiln at 1 thread (rounds, median) | kiln at 2 threads | "
                  "others' cores | caller sleeps / jobs | load |", "|---|---|---|---|---|---|---|---|---|"]
        for i, r in enumerate(runs):
            def at(t):
                v = r["by_threads"].get(str(t)) or r["by_threads"].get(t)
                return f"{v['blocks']}, {v['kiln_median_ms']:.3f}" if v else "-"
            others = r["others_busy_cores"]
            pool = r.get("pool") or {}
            lines.append(f"| {i} | {r['kiln_median_ms']:.3f} ({r['kiln_min_ms']:.3f}) | {r['ort_median_ms']:.3f} "
                         f"({r['ort_min_ms']:.3f}) | {r['ratio']:.2f} | {at(1)} | {at(2)} | "
                         f"{'-' if others is None else f'{others:.2f}'} | {pool.get('caller_waits', '-')} / "
                         f"{pool.get('jobs', '-')} | {r['load_average'][0]:.1f} |")
        ks = [r["kiln_median_ms"] for r in runs]
        os_ = [r["ort_median_ms"] for r in runs]
        rs = [r["ratio"] for r in runs]
        lines += ["", f"Across processes: kiln median of medians {statistics.median(ks):.3f} ms (range "
                  f"{min(ks):.3f}-{max(ks):.3f}), ONNX Runtime {statistics.median(os_):.3f} ({min(os_):.3f}-"
                  f"{max(os_):.3f}), ratio {statistics.median(rs):.2f} ({min(rs):.2f}-{max(rs):.2f}).", ""]
    return "\n".join(lines)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--processes", type=int, default=10)
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--number", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--policy", default="adaptive", choices=("adaptive", "fixed"))
    p.add_argument("--env", action="append", default=[], help="K=V set in every child process")
    p.add_argument("--variant", action="append", default=[],
                   help="NAME:K=V,K=V - a variant (environment) of the child processes; repeat to compare")
    p.add_argument("--out", default="mlp_processes")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return {}
    data = parent(args)
    md = to_markdown(data)
    print(md)
    if args.out:
        from .common import write_results
        write_results(args.out, data, md)
    return data


if __name__ == "__main__":
    main()
