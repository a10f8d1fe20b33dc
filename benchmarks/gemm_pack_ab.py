"""Paired A/B of dense_pack's data-row packing (``kiln.topi.x86.dense.pack_data``): on (any shape) vs off, in one
process, interleaved round by round.

    python -m benchmarks.gemm_pack_ab [--shapes 128x768x3072,1024x1024x1024] [--models bert] [--threads 1]

Kernels: ``dense_pack.x86`` on a pre-packed weight, fallback config, built twice (packing forced on / off by
the module's thresholds). Models: the whole model built twice through ``relay.build`` with the fallback's own
rule on / off. One thread: thread CPU time; more: wall clock. Reports the speed ratio packed / unpacked per
round (median, range, rounds won) and writes ``benchmarks/results/<out>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

from .common import machine_info, machine_line, write_results

SHAPES = "128x768x3072,256x768x3072,128x768x2048,1024x1024x1024,128x768x1024,128x768x768,512x768x768,128x768x1536," \
         "128x768x512,64x512x784,64x512x512"


def _paired(fns: dict, rounds: int, number: int, clock) -> dict:
    res = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            fn()
            t0 = clock()
            for _ in range(number):
                fn()
            res[k].append((clock() - t0) / number)
    ratios = sorted(a / b for a, b in zip(res["unpacked"], res["packed"]))
    return {"unpacked_s": res["unpacked"], "packed_s": res["packed"], "speed_median": statistics.median(ratios),
            "speed_min": ratios[0], "speed_max": ratios[-1], "wins": sum(r > 1 for r in ratios), "rounds": rounds}


def _kernel(m: int, n: int, k: int, pack: bool, D):
    import kiln as tvm
    from kiln import te
    from kiln.topi import x86
    saved = D.DATA_PACK_MIN_BYTES, D.DATA_PACK_ALIAS_BYTES
    D.DATA_PACK_MIN_BYTES, D.DATA_PACK_ALIAS_BYTES = (1, 1) if pack else (1 << 62, 1 << 62)
    try:
        with tvm.target.Target("llvm"):
            A = te.placeholder((m, k), name="data")
            W = te.placeholder((n // 16, k, 16), name="weight")
            out = x86.dense_pack(A, W, None, "float32", n)
            f = tvm.build(x86.schedule_dense_pack([out]), [A, W, out], target="llvm", name="kernel")
    finally:
        D.DATA_PACK_MIN_BYTES, D.DATA_PACK_ALIAS_BYTES = saved
    if ("packed_data" in f.get_source()) != pack:
        raise AssertionError(f"{m}x{n}x{k}: packing {'missing' if pack else 'present'}")
    return f


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default=SHAPES, help="MxNxK list (N a multiple of 16)")
    p.add_argument("--models", default="", help="models from benchmarks.models, e.g. bert,gpt2")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=11)
    p.add_argument("--out", default="gemm_pack_ab")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    os.environ["KILN_NUM_THREADS"] = str(args.threads)
    import kiln as tvm
    import kiln.topi.x86.dense as D
    from kiln.runtime import set_num_threads
    set_num_threads(args.threads)
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    rng = np.random.default_rng(0)
    rows = []
    for shape in [s for s in args.shapes.split(",") if s]:
        m, n, k = (int(x) for x in shape.split("x"))
        a = rng.standard_normal((m, k)).astype("float32")
        w = rng.standard_normal((n, k)).astype("float32")
        wp = w.reshape(n // 16, 16, k).transpose(0, 2, 1).copy()
        nd = [tvm.nd.array(a), tvm.nd.array(wp), tvm.nd.empty((m, n), "float32")]
        fns = {}
        for variant, pack in (("unpacked", False), ("packed", True)):
            f = _kernel(m, n, k, pack, D)
            f(*nd)
            np.testing.assert_allclose(nd[2].numpy(), a @ w.T, rtol=1e-3, atol=1e-2)
            fns[variant] = (lambda f=f: f(*nd))
        flop = 2.0 * m * n * k
        r = _paired(fns, args.rounds, max(1, int(0.05 / (flop / 80e9))), clock)
        r.update(name=f"dense {shape}", rule=D.pack_data_pays(m, k, 6),
                 gflops_unpacked=flop / statistics.median(r["unpacked_s"]) / 1e9,
                 gflops_packed=flop / statistics.median(r["packed_s"]) / 1e9)
        rows.append(r)
        print(f"{r['name']:<24} {r['gflops_unpacked']:6.1f} -> {r['gflops_packed']:6.1f} GFLOP/s  speed "
              f"{r['speed_median']:.3f} ({r['speed_min']:.3f}-{r['speed_max']:.3f}, {r['wins']}/{r['rounds']})"
              f"  rule packs: {r['rule']}", flush=True)
    if args.models:
        from .models import MODELS
        from .run import _kiln_build
        for name in args.models.split(","):
            model, inputs = MODELS[name][1]()
            fns, outs = {}, {}
            alias = D.DATA_PACK_ALIAS_BYTES
            for variant in ("unpacked", "packed"):
                D.DATA_PACK_ALIAS_BYTES = alias if variant == "packed" else 1 << 62
                try:
                    run, output, _ = _kiln_build(model, inputs)
                finally:
                    D.DATA_PACK_ALIAS_BYTES = alias
                fns[variant], outs[variant] = run, output()
            if not np.allclose(outs["packed"], outs["unpacked"], rtol=1e-4, atol=1e-4):
                raise AssertionError(f"{name}: packed and unpacked builds differ")
            r = _paired(fns, args.rounds, 2, clock)
            r.update(name=f"model {name}", rule=None, ms_unpacked=statistics.median(r["unpacked_s"]) * 1e3,
                     ms_packed=statistics.median(r["packed_s"]) * 1e3)
            rows.append(r)
            print(f"{r['name']:<24} {r['ms_unpacked']:.2f} -> {r['ms_packed']:.2f} ms  speed {r['speed_median']:.3f} "
                  f"({r['speed_min']:.3f}-{r['speed_max']:.3f}, {r['wins']}/{r['rounds']})", flush=True)
    machine = machine_info()
    md = ["# dense_pack data-row packing: paired A/B", "", machine_line(machine), "",
          f"{args.threads} thread(s), {'thread CPU time' if args.threads == 1 else 'wall clock'}, {args.rounds} "
          "interleaved rounds. Speed = unpacked time / packed time per round: median (range, rounds won by packing).",
          "", "| case | unpacked | packed | speed | fallback packs |", "|---|---|---|---|---|"]
    for r in rows:
        if "gflops_packed" in r:
            cells = f"{r['gflops_unpacked']:.1f} GFLOP/s | {r['gflops_packed']:.1f} GFLOP/s"
        else:
            cells = f"{r['ms_unpacked']:.2f} ms | {r['ms_packed']:.2f} ms"
        rule = "" if r["rule"] is None else ("yes" if r["rule"] else "no")
        md.append(f"| {r['name']} | {cells} | {r['speed_median']:.3f} ({r['speed_min']:.3f}-{r['speed_max']:.3f}, "
                  f"{r['wins']}/{r['rounds']}) | {rule} |")
    text = "\n".join(md) + "\n"
    print(text)
    data = {"machine": machine, "threads": args.threads, "rounds": args.rounds, "rows": rows}
    if not args.no_write:
        write_results(args.out, data, text)
    return data


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
