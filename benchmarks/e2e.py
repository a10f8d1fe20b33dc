"""End to end: resnet-18 from ``relay.testing`` in kiln (relay.build -> graph executor) beside PyTorch eager
and ONNX Runtime running the *same* network with the *same* weights, in one run.

    python -m benchmarks.e2e [--image 224] [--rounds 5] [--number 2] [--threads 2] [--no-write]

The PyTorch model is written here in plain torch.nn.functional from the relay.testing parameter dict
(pre-activation ResNet v2, as relay.testing builds it); ONNX Runtime runs that torch model exported to
ONNX. Every contender's output is compared with kiln's. Also reports kiln's compile time, memory plan,
and the graph executor's per-run overhead on a graph of 100 trivial kernels. Writes
benchmarks/results/e2e.json and e2e.md.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from .common import interleaved, machine_info, machine_line, thread_counts, write_results


def torch_resnet(params: dict, num_layers: int = 18):
    """A torch.nn.Module computing relay.testing's resnet-``num_layers`` (v2, basic blocks) with ``params``."""
    import torch
    import torch.nn.functional as F

    units = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3]}[num_layers]
    P = {k: torch.from_numpy(v.numpy() if hasattr(v, "numpy") else np.asarray(v)) for k, v in params.items()}

    def bn(x, name, scale=True):
        return F.batch_norm(x, P[name + "_moving_mean"], P[name + "_moving_var"],
                            P[name + "_gamma"] if scale else None, P[name + "_beta"], False, 0.0, 2e-5)

    def conv(x, name, stride=1, pad=0):
        return F.conv2d(x, P[name + "_weight"], None, stride, pad)

    class ResNet(torch.nn.Module):
        def forward(self, x):
            x = bn(x, "bn_data", scale=False)
            x = conv(x, "conv0", 2, 3)
            x = F.relu(bn(x, "bn0"))
            x = F.max_pool2d(x, 3, 2, 1)
            for i, n in enumerate(units):
                for j in range(n):
                    name = f"stage{i + 1}_unit{j + 1}"
                    stride = 2 if (i > 0 and j == 0) else 1
                    act1 = F.relu(bn(x, name + "_bn1"))
                    y = conv(act1, name + "_conv1", stride, 1)
                    y = conv(F.relu(bn(y, name + "_bn2")), name + "_conv2", 1, 1)
                    sc = conv(act1, name + "_sc", stride, 0) if j == 0 else x
                    x = y + sc
            x = F.relu(bn(x, "bn1"))
            x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
            return F.softmax(F.linear(x, P["fc1_weight"], P["fc1_bias"]), dim=-1)

    return ResNet().eval()


def overhead_100_kernels(rounds: int = 5) -> dict:
    """Per-run cost of the graph executor on 100 trivial (4-element add) kernel nodes."""
    import kiln as tvm
    from kiln import relay
    from kiln.contrib import graph_executor
    x = relay.var("x", shape=(4,), dtype="float32")
    y = x
    for _ in range(100):
        y = relay.add(y, x)
    with tvm.transform.PassContext(opt_level=0):
        lib = relay.build(tvm.IRModule.from_expr(relay.Function([x], y)), target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("x", np.ones(4, "float32"))
    native = m.benchmark(tvm.cpu(0), number=2000, repeat=rounds).median
    saved = m.module._native
    m.module._native = None  # the Python loop over the prepared ctypes calls (libraries without the runner)
    python_loop = m.benchmark(tvm.cpu(0), number=200, repeat=rounds).median
    m.module._native = saved
    return {"native_plan_us_per_run": native * 1e6, "python_loop_us_per_run": python_loop * 1e6}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--number", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    os.environ.setdefault("KILN_NUM_THREADS", str(args.threads))

    import kiln as tvm
    from kiln import relay
    from kiln.contrib import graph_executor

    shape = (1, 3, args.image, args.image)
    mod, params = relay.testing.resnet.get_workload(num_layers=18, batch_size=1, image_shape=shape[1:])
    x = np.random.default_rng(0).uniform(-1, 1, size=shape).astype("float32")
    report = {"machine": machine_info(), "model": f"relay.testing resnet-18, input {shape}, fp32, batch 1",
              "threads": args.threads, "contenders": {}}

    t0 = time.perf_counter()
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    report["kiln_compile_s"] = time.perf_counter() - t0
    plan = lib.memory_plan
    report["memory_plan"] = {"planned_bytes": plan.planned_bytes, "intermediate_bytes": plan.intermediate_bytes,
                             "io_bytes": plan.io_bytes}
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("data", x)
    m.run()
    kiln_out = m.get_output(0).numpy()
    contenders = {"kiln": m.run}
    errors = {"kiln": 0.0}

    try:
        import torch
        torch.set_num_threads(args.threads)
        tmodel = torch_resnet(params)
        tx = torch.from_numpy(x)
        with torch.no_grad():
            errors["pytorch"] = float(np.abs(tmodel(tx).numpy() - kiln_out).max())

        def torch_run():
            with torch.no_grad():
                tmodel(tx)
        contenders["pytorch"] = torch_run
    except Exception as err:  # noqa: BLE001 - a missing peer is reported, not fatal
        report["contenders"]["pytorch"] = {"error": f"{type(err).__name__}: {err}"[:200]}
        tmodel = None

    if tmodel is not None:
        try:
            import onnxruntime as ort
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "resnet18.onnx")
                t0 = time.perf_counter()
                torch.onnx.export(tmodel, (tx,), path, input_names=["data"], output_names=["out"], dynamo=False)
                opts = ort.SessionOptions()
                opts.intra_op_num_threads = args.threads
                opts.inter_op_num_threads = 1
                sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
                report["onnxruntime_session_s"] = time.perf_counter() - t0
            errors["onnxruntime"] = float(np.abs(sess.run(None, {"data": x})[0] - kiln_out).max())
            contenders["onnxruntime"] = lambda: sess.run(None, {"data": x})
        except Exception as err:  # noqa: BLE001
            report["contenders"]["onnxruntime"] = {"error": f"{type(err).__name__}: {err}"[:200]}

    timings = interleaved(contenders, rounds=args.rounds, number=args.number)
    for name, t in timings.items():
        report["contenders"][name] = {"median_ms": t["median_s"] * 1e3, "best_ms": t["best_s"] * 1e3,
                                      "max_abs_diff_vs_kiln": errors.get(name)}
    report["graph_executor_overhead_100_kernels"] = overhead_100_kernels()

    report["machine"] = machine_info()
    report["thread_counts"] = thread_counts(ort_intra_op=args.threads if "onnxruntime" in contenders else None)
    lines = [f"# End to end: {report['model']}", "",
             machine_line(report["machine"], report["thread_counts"]), "",
             "| contender | median (ms) | best (ms) | max abs diff vs kiln |", "|---|---|---|---|"]
    for name, r in report["contenders"].items():
        if "error" in r:
            lines.append(f"| {name} | n/a | n/a | {r['error']} |")
        else:
            lines.append(f"| {name} | {r['median_ms']:.2f} | {r['best_ms']:.2f} | {r['max_abs_diff_vs_kiln']:.2e} |")
    ov = report["graph_executor_overhead_100_kernels"]
    lines += ["", f"kiln compile time (relay.build, opt_level 3): {report['kiln_compile_s']:.1f} s",
              f"{plan}",
              f"graph executor overhead, 100 trivial kernels: {ov['native_plan_us_per_run']:.1f} us per run "
              f"(native plan runner), {ov['python_loop_us_per_run']:.1f} us (Python loop fallback)", ""]
    md = "\n".join(lines)
    print(md)
    if not args.no_write:
        write_results("e2e", report, md)
    return report


if __name__ == "__main__":
    main()
