"""fp32 GEMM kernels at the graph's thread count: kiln's dense_pack beside ONNX Runtime's Gemm and numpy, in one run.

    python -m benchmarks.gemm [--threads 2] [--rounds 15] [--filter BERT] [--out gemm_s10]

Each case is ``data [M, K] x weight [N, K]^T``, the shapes of the MLP (batch 1 and 64), BERT-base (128 tokens)
and a 1024^3 GEMM. kiln runs the kernel a graph runs after AlterOpLayout (``dense_pack.x86`` on a weight packed
at compile time, fallback config, kiln's thread pool); ONNX Runtime a one-node model ``Gemm(transB=1)`` whose
weight is an initializer (so it may pre-pack it, as it does in a model), ``intra_op_num_threads`` = threads;
numpy ``matmul(data, weight.T, out=)`` (OpenBLAS, its own threads). All three are called through Python and
timed by wall clock, interleaved round by round with :func:`benchmarks.common.interleaved` (the pause before each
block waits until the previous contender's spinning threads are idle). Each result is checked against numpy in
float64 first. Writes ``benchmarks/results/<out>.json`` / ``.md``: median and best GFLOP/s, kiln / ONNX Runtime
time ratios (below 1: kiln faster) and the paired per-round ratio with its 95% interval.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

import numpy as np

from .common import interleaved, machine_info, machine_line, paired_speedup, thread_counts, write_results

CASES = [  # name, M, N, K
    ("MLP b1 784->512", 1, 512, 784),
    ("MLP b1 512->512", 1, 512, 512),
    ("MLP b64 784->512", 64, 512, 784),
    ("MLP b64 512->512", 64, 512, 512),
    ("MLP b64 512->10", 64, 10, 512),
    ("BERT qkv/out 128x768x768", 128, 768, 768),
    ("BERT ffn1 128x3072x768", 128, 3072, 768),
    ("BERT ffn2 128x768x3072", 128, 768, 3072),
    ("GEMM 1024^3", 1024, 1024, 1024),
]


def kiln_case(m: int, n: int, k: int, a: np.ndarray, w: np.ndarray):
    """The kernel a Relay graph runs for ``dense(a, w)`` with a constant ``w``: dense_pack.x86 on the weight
    AlterOpLayout packs (zero-padded last panel where the width does not divide N)."""
    import kiln as tvm
    from kiln import te
    from kiln.topi import x86
    from kiln.topi.x86.conv2d_alter_op import dense_pack_block
    from kiln.topi.testing import dense_pack_weight_python
    from kiln.topi.x86.utils import simd_width

    with tvm.target.Target("llvm"):
        bn = dense_pack_block(n, simd_width())
        A = te.placeholder((m, k), name="data")
        wp = dense_pack_weight_python(w, bn) if bn else w
        W = te.placeholder(wp.shape, name="weight")
        out = x86.dense_pack(A, W, None, "float32", n if bn else None)
        mod = tvm.build(x86.schedule_dense_pack([out]), [A, W, out], target="llvm", name="kernel")
    args = [tvm.nd.array(a), tvm.nd.array(wp), tvm.nd.empty((m, n), "float32")]
    return (lambda: mod(*args)), (lambda: args[-1].numpy())


def ort_case(a: np.ndarray, w: np.ndarray, threads: int, tmpdir: str):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    m, k = a.shape
    n = w.shape[0]
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["a", "w"], ["y"], transB=1)], "gemm",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = os.path.join(tmpdir, f"gemm_{m}_{n}_{k}.onnx")
    onnx.save(model, path)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    feed = {"a": a}
    return (lambda: sess.run(None, feed)), (lambda: sess.run(None, feed)[0])


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--filter", default="", help="only cases whose name contains this text")
    p.add_argument("--out", default="gemm", help="results file stem under benchmarks/results/")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    os.environ["KILN_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    from kiln.runtime import set_num_threads
    set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmpdir:
        for name, m, n, k in CASES:
            if args.filter and args.filter not in name:
                continue
            a = rng.standard_normal((m, k)).astype("float32")
            w = rng.standard_normal((n, k)).astype("float32")
            ref = a.astype(np.float64) @ w.astype(np.float64).T
            out = np.empty((m, n), "float32")
            wt = w.T
            contenders = {"kiln": kiln_case(m, n, k, a, w), "onnxruntime": ort_case(a, w, args.threads, tmpdir),
                          "numpy": ((lambda: np.matmul(a, wt, out=out)), (lambda: out))}
            errs = {}
            for cname, (run, result) in contenders.items():
                run()
                errs[cname] = float(np.max(np.abs(result() - ref)))
                if errs[cname] > 1e-3 * float(np.max(np.abs(ref))):
                    raise AssertionError(f"{name}: {cname} differs from float64 numpy by {errs[cname]}")
            flop = 2.0 * m * n * k
            number = max(1, min(200, int(2e-3 / max(flop / 50e9, 1e-7))))
            t = interleaved({c: run for c, (run, _) in contenders.items()}, rounds=args.rounds, number=number)
            row = {"name": name, "m": m, "n": n, "k": k, "number": number, "max_abs_err": errs}
            for c, r in t.items():
                row[c] = {"median_ms": r["median_s"] * 1e3, "best_ms": r["best_s"] * 1e3,
                          "median_gflops": flop / r["median_s"] / 1e9, "best_gflops": flop / r["best_s"] / 1e9,
                          "runs_ms": [x * 1e3 for x in r["runs_s"]]}
            row["kiln_over_ort"] = paired_speedup(t["kiln"]["runs_s"], t["onnxruntime"]["runs_s"])
            rows.append(row)
            pr = row["kiln_over_ort"]
            print(f"{name:<26} kiln {row['kiln']['median_gflops']:6.1f} ({row['kiln']['best_gflops']:6.1f}) "
                  f"ort {row['onnxruntime']['median_gflops']:6.1f} ({row['onnxruntime']['best_gflops']:6.1f}) "
                  f"numpy {row['numpy']['median_gflops']:6.1f} ({row['numpy']['best_gflops']:6.1f}) GFLOP/s; "
                  f"kiln/ort time {pr['median']:.2f} [{pr['ci95'][0]:.2f}, {pr['ci95'][1]:.2f}]", flush=True)
    machine = machine_info()
    threads = thread_counts(ort_intra_op=args.threads, pytorch=False)
    threads["numpy"] = os.environ.get("OPENBLAS_NUM_THREADS")
    md = ["# fp32 GEMM kernels: kiln dense_pack vs ONNX Runtime Gemm vs numpy", "",
          machine_line(machine, threads), "",
          f"Wall clock through Python, {args.rounds} interleaved rounds; GFLOP/s median (best). "
          "kiln/ORT: median of the per-round time ratios [95% interval] (below 1: kiln faster).", "",
          "| case | kiln | onnxruntime | numpy | kiln/ORT time |", "|---|---|---|---|---|"]
    for r in rows:
        pr = r["kiln_over_ort"]
        cells = [f"{r[c]['median_gflops']:.1f} ({r[c]['best_gflops']:.1f})" for c in ("kiln", "onnxruntime", "numpy")]
        # paired_speedup(base=kiln, new=ort) is kiln_time / ort_time
        md.append(f"| {r['name']} | " + " | ".join(cells) + f" | {pr['median']:.2f} [{pr['ci95'][0]:.2f}, "
                  f"{pr['ci95'][1]:.2f}] |")
    ratios = [r["kiln_over_ort"]["median"] for r in rows]
    if ratios:
        md += ["", f"Geometric mean kiln/ORT time: **{statistics.geometric_mean(ratios):.2f}** over {len(ratios)} cases."]
    text = "\n".join(md) + "\n"
    print(text)
    data = {"machine": machine, "threads": threads, "rounds": args.rounds, "cases": rows}
    if not args.no_write:
        write_results(args.out, data, text)
    return data


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
