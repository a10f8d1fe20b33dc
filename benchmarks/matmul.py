"""fp32 GEMM 1024x1024x1024: kiln (TE schedule -> C) beside numpy and PyTorch, timed in one run.

    python -m benchmarks.matmul [--size 1024] [--bm 4] [--bn 16] [--ku 4] [--rounds 9]

The schedule follows the classic "how to optimize GEMM on CPU" recipe: B packed into
[N/bn, K, bn] panels, C computed in bm x bn blocks through a cache_write accumulator attached
to the (parallel) block loop, the block's reduction loop split and unrolled, the row loop of the
block unrolled (a bm x bn register tile), the column loop vectorized (bn = 2 SIMD registers).
Writes benchmarks/results/matmul.json and matmul.md.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from .common import interleaved, machine_info, machine_line, thread_counts, write_results


def gemm_schedule(M: int, N: int, K: int, bm: int, bn: int, ku: int):
    """TE compute + schedule of C = A @ B; returns (schedule, [A, B, C])."""
    import kiln as tvm
    from kiln import te

    if N % bn or M % bm or K % ku:
        raise ValueError(f"gemm_schedule: block sizes bm={bm}, bn={bn}, ku={ku} must divide M={M}, N={N}, K={K}")
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), "k")
    packedB = te.compute((N // bn, K, bn), lambda bigN, kk, littleN: B[kk, bigN * bn + littleN], name="packedB")
    C = te.compute((M, N), lambda m, n: te.sum(A[m, k] * packedB[n // bn, k, tvm.tir.indexmod(n, bn)], axis=k),
                   name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bm, bn)
    s[C].reorder(no, mo, mi, ni)            # a B panel stays in cache across the row blocks
    block = s[C].fuse(no, mo)
    s[C].parallel(block)
    s[C].vectorize(ni)
    s[CC].compute_at(s[C], block)          # the accumulator is one bm x bn block
    mc, nc = s[CC].op.axis
    (kaxis,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kaxis, factor=ku)
    s[CC].reorder(ko, ki, mc, nc)
    s[CC].unroll(ki)
    s[CC].unroll(mc)                        # bm x (bn / simd) accumulators in registers
    s[CC].vectorize(nc)
    bigN, _, littleN = s[packedB].op.axis
    s[packedB].vectorize(littleN)
    s[packedB].parallel(bigN)
    return s, [A, B, C]


def main(argv=None) -> dict:
    import kiln as tvm
    from kiln.target.x86 import get_simd_width, host_cpu_info

    simd = get_simd_width()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--bm", type=int, default=4)
    p.add_argument("--bn", type=int, default=2 * simd)
    p.add_argument("--ku", type=int, default=4)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--number", type=int, default=3)
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    M = N = K = args.size
    cores = host_cpu_info().num_cores

    s, tensors = gemm_schedule(M, N, K, args.bm, args.bn, args.ku)
    func = tvm.build(s, tensors, target="llvm", name="gemm")
    rng = np.random.default_rng(0)
    a_np = rng.random((M, K), dtype=np.float32)
    b_np = rng.random((K, N), dtype=np.float32)
    a, b = tvm.nd.array(a_np), tvm.nd.array(b_np)
    c = tvm.nd.array(np.zeros((M, N), np.float32))
    func(a, b, c)
    ref = a_np.astype(np.float64) @ b_np.astype(np.float64)
    np.testing.assert_allclose(c.numpy(), ref, rtol=1e-4, atol=1e-3)

    contenders = {"kiln": ("timer", lambda n: func.time_evaluator("gemm", tvm.cpu(0), number=n)(a, b, c).mean)}
    contenders["numpy"] = lambda: np.matmul(a_np, b_np)
    versions = {"numpy": np.__version__}
    try:
        import torch
        torch.set_num_threads(cores)
        ta, tb = torch.from_numpy(a_np), torch.from_numpy(b_np)
        contenders["pytorch"] = lambda: torch.matmul(ta, tb)
        versions["pytorch"] = torch.__version__
    except ImportError:
        print("PyTorch is not installed; timing kiln and numpy only", file=sys.stderr)
    timings = interleaved(contenders, rounds=args.rounds, number=args.number)

    flop = 2.0 * M * N * K
    rows = {}
    for name, t in timings.items():
        rows[name] = {"median_ms": t["median_s"] * 1e3, "best_ms": t["best_s"] * 1e3,
                      "gflops_median": flop / t["median_s"] / 1e9, "gflops_best": flop / t["best_s"] / 1e9}
    pct = None
    if "pytorch" in rows:
        pct = 100.0 * rows["kiln"]["gflops_median"] / rows["pytorch"]["gflops_median"]
    data = {"benchmark": f"fp32 matmul {M}x{N}x{K}", "machine": machine_info(), "threads": cores,
            "thread_counts": thread_counts(),
            "schedule": {"bm": args.bm, "bn": args.bn, "ku": args.ku, "simd_width": simd},
            "rounds": args.rounds, "number": args.number, "versions": versions, "results": rows,
            "kiln_pct_of_pytorch": pct}

    lines = [f"# fp32 matmul {M}x{N}x{K}", "",
             machine_line(data["machine"], data["thread_counts"]),
             f"numpy uses its BLAS's own threads; {args.rounds} interleaved rounds of {args.number} calls.",
             f"kiln schedule: bm={args.bm}, bn={args.bn}, ku={args.ku} (SIMD width {simd}).", "",
             "| contender | median ms | best ms | GFLOP/s (median) | GFLOP/s (best) |",
             "|---|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['median_ms']:.2f} | {r['best_ms']:.2f} | {r['gflops_median']:.1f} | "
                     f"{r['gflops_best']:.1f} |")
    if pct is not None:
        lines += ["", f"kiln reaches **{pct:.0f}%** of PyTorch's GFLOP/s (medians)."]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        jpath, mpath = write_results("matmul", data, text)
        print(f"wrote {jpath} and {mpath}")
    return data


if __name__ == "__main__":
    main()
