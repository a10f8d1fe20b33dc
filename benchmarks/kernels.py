"""Single-thread kernel quality: kiln's x86 schedules beside PyTorch's same op, shape by shape.

    python -m benchmarks.kernels                      # every set
    python -m benchmarks.kernels --sets resnet18,gemm --rounds 5 --target-s 0.2
    python -m benchmarks.kernels --filter 3x3        # only cases whose name contains the text

Both sides run on ONE thread (``KILN_NUM_THREADS=1``, ``torch.set_num_threads(1)``) and are timed by the CPU
time of the calling thread (``time.thread_time``) around many calls, interleaved round by round: on a shared,
loaded machine wall-clock time measures the neighbours, thread CPU time much less so. kiln's kernel runs
through its C timing loop (no Python per call); PyTorch's through its Python API (eager, as a user calls it).
Each case is checked against PyTorch before it is timed.

kiln side of each case: what the graph runs after AlterOpLayout, i.e. conv2d_NCHWc on NCHW[x]c data with the
kernel pre-packed (block sizes from the fallback config), dense_pack on a pre-packed weight, batch_matmul on
activations. Sets: resnet18, resnet50, mobilenet_v2 (every distinct conv shape at 224x224, batch 1), gemm
(1024^3, BERT-base and MLP shapes, BERT attention batch_matmuls).

Writes benchmarks/results/kernels.json and kernels.md (GFLOP/s per thread-CPU-second, best of the rounds and
median, and kiln as a percentage of PyTorch).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ["KILN_NUM_THREADS"] = "1"  # before kiln loads any library

import numpy as np  # noqa: E402

from .common import machine_info, machine_line, thread_counts, write_results  # noqa: E402


# --------------------------------------------------------------------------------------------- cases
def _conv(name, ic, hw, oc, k, s, p, depthwise=False):
    return {"kind": "dwconv" if depthwise else "conv", "name": name, "ic": ic, "hw": hw, "oc": oc, "k": k, "s": s,
            "p": p}


def _unique(cases):
    seen, out = set(), []
    for c in cases:
        key = tuple(sorted((k, v) for k, v in c.items() if k != "name"))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def resnet18_cases():
    return _unique([
        _conv("r18 stem 7x7/2 3->64 @224", 3, 224, 64, 7, 2, 3),
        _conv("r18 3x3 64->64 @56", 64, 56, 64, 3, 1, 1),
        _conv("r18 3x3/2 64->128 @56", 64, 56, 128, 3, 2, 1),
        _conv("r18 1x1/2 64->128 @56", 64, 56, 128, 1, 2, 0),
        _conv("r18 3x3 128->128 @28", 128, 28, 128, 3, 1, 1),
        _conv("r18 3x3/2 128->256 @28", 128, 28, 256, 3, 2, 1),
        _conv("r18 1x1/2 128->256 @28", 128, 28, 256, 1, 2, 0),
        _conv("r18 3x3 256->256 @14", 256, 14, 256, 3, 1, 1),
        _conv("r18 3x3/2 256->512 @14", 256, 14, 512, 3, 2, 1),
        _conv("r18 1x1/2 256->512 @14", 256, 14, 512, 1, 2, 0),
        _conv("r18 3x3 512->512 @7", 512, 7, 512, 3, 1, 1),
    ])


def resnet50_cases():
    return _unique([
        _conv("r50 1x1 64->64 @56", 64, 56, 64, 1, 1, 0),
        _conv("r50 1x1 64->256 @56", 64, 56, 256, 1, 1, 0),
        _conv("r50 1x1 256->64 @56", 256, 56, 64, 1, 1, 0),
        _conv("r50 1x1 256->128 @56", 256, 56, 128, 1, 1, 0),
        _conv("r50 3x3/2 128->128 @56", 128, 56, 128, 3, 2, 1),
        _conv("r50 1x1 128->512 @28", 128, 28, 512, 1, 1, 0),
        _conv("r50 1x1/2 256->512 @56", 256, 56, 512, 1, 2, 0),
        _conv("r50 1x1 512->128 @28", 512, 28, 128, 1, 1, 0),
        _conv("r50 1x1 512->256 @28", 512, 28, 256, 1, 1, 0),
        _conv("r50 3x3/2 256->256 @28", 256, 28, 256, 3, 2, 1),
        _conv("r50 1x1 256->1024 @14", 256, 14, 1024, 1, 1, 0),
        _conv("r50 1x1/2 512->1024 @28", 512, 28, 1024, 1, 2, 0),
        _conv("r50 1x1 1024->256 @14", 1024, 14, 256, 1, 1, 0),
        _conv("r50 1x1 1024->512 @14", 1024, 14, 512, 1, 1, 0),
        _conv("r50 3x3/2 512->512 @14", 512, 14, 512, 3, 2, 1),
        _conv("r50 1x1 512->2048 @7", 512, 7, 2048, 1, 1, 0),
        _conv("r50 1x1/2 1024->2048 @14", 1024, 14, 2048, 1, 2, 0),
        _conv("r50 1x1 2048->512 @7", 2048, 7, 512, 1, 1, 0),
    ])


def mobilenet_v2_cases():
    cases = [_conv("mv2 stem 3x3/2 3->32 @224", 3, 224, 32, 3, 2, 1)]
    # (expansion input channels, spatial size, expanded, output channels, stride) of the distinct blocks
    blocks = [(32, 112, 32, 16, 1), (16, 112, 96, 24, 2), (24, 56, 144, 24, 1), (24, 56, 144, 32, 2),
              (32, 28, 192, 32, 1), (32, 28, 192, 64, 2), (64, 14, 384, 64, 1), (64, 14, 384, 96, 1),
              (96, 14, 576, 96, 1), (96, 14, 576, 160, 2), (160, 7, 960, 160, 1), (160, 7, 960, 320, 1)]
    for cin, hw, mid, cout, s in blocks:
        if cin != mid:
            cases.append(_conv(f"mv2 1x1 {cin}->{mid} @{hw}", cin, hw, mid, 1, 1, 0))
        cases.append(_conv(f"mv2 dw3x3{'/2' if s == 2 else ''} {mid} @{hw}", mid, hw, mid, 3, s, 1, depthwise=True))
        ohw = hw // s
        cases.append(_conv(f"mv2 1x1 {mid}->{cout} @{ohw}", mid, ohw, cout, 1, 1, 0))
    cases.append(_conv("mv2 1x1 320->1280 @7", 320, 7, 1280, 1, 1, 0))
    return _unique(cases)


def gemm_cases():
    def dense(name, m, n, k):
        return {"kind": "dense", "name": name, "m": m, "n": n, "k": k}

    def bmm(name, b, m, n, k):
        return {"kind": "bmm", "name": name, "b": b, "m": m, "n": n, "k": k}
    return [
        dense("dense 1024x1024x1024", 1024, 1024, 1024),
        dense("BERT qkv/out 128x768x768", 128, 768, 768),
        dense("BERT ffn1 128x3072x768", 128, 3072, 768),
        dense("BERT ffn2 128x768x3072", 128, 768, 3072),
        dense("MLP b1 1x512x784", 1, 512, 784),
        dense("MLP b1 1x512x512", 1, 512, 512),
        dense("MLP b1 1x10x512", 1, 10, 512),
        dense("MLP b64 64x512x784", 64, 512, 784),
        dense("MLP b64 64x512x512", 64, 512, 512),
        dense("MLP b64 64x10x512", 64, 10, 512),
        bmm("BERT q.kT 12x128x128x64", 12, 128, 128, 64),
        bmm("BERT att.v 12x128x64x128", 12, 128, 64, 128),
    ]


SETS = {"resnet18": resnet18_cases, "resnet50": resnet50_cases, "mobilenet_v2": mobilenet_v2_cases,
        "gemm": gemm_cases}


# --------------------------------------------------------------------------------------------- builders
def _flop(case) -> float:
    if case["kind"] in ("conv", "dwconv"):
        o = (case["hw"] + 2 * case["p"] - case["k"]) // case["s"] + 1
        per = case["k"] * case["k"] * (1 if case["kind"] == "dwconv" else case["ic"])
        return 2.0 * case["oc"] * o * o * per
    if case["kind"] == "dense":
        return 2.0 * case["m"] * case["n"] * case["k"]
    return 2.0 * case["b"] * case["m"] * case["n"] * case["k"]


def build_case(case, rng):
    """(kiln timer(number) -> seconds, torch callable, max abs error, kiln's config text) for one case."""
    import torch
    import kiln as tvm
    from kiln import te
    from kiln.topi import x86
    from kiln.topi.testing import dense_pack_weight_python, layout_transform_python as lt
    from kiln.topi.x86.conv2d import channel_block
    from kiln.topi.x86.conv2d_alter_op import dense_pack_block
    from kiln.topi.x86.utils import simd_width

    target = "llvm"
    kind = case["kind"]
    if kind in ("conv", "dwconv"):
        ic, hw, oc, k, s, p = (case[x] for x in ("ic", "hw", "oc", "k", "s", "p"))
        a = rng.standard_normal((1, ic, hw, hw)).astype("float32")
        dw = kind == "dwconv"
        w = rng.standard_normal((oc, 1 if dw else ic, k, k)).astype("float32")
        ta, tw = torch.from_numpy(a), torch.from_numpy(w)
        groups = ic if dw else 1

        def torch_fn():
            return torch.nn.functional.conv2d(ta, tw, stride=s, padding=p, groups=groups)
        ref = torch_fn().numpy()
        icb, ocb = channel_block(ic), channel_block(oc)
        a5 = lt(a, "NCHW", f"NCHW{icb}c")
        w6 = lt(w, "OIHW", f"OIHW1i{ocb}o" if dw else f"OIHW{icb}i{ocb}o")
        with tvm.target.Target(target):
            A = te.placeholder(a5.shape, name="data")
            W = te.placeholder(w6.shape, name="kernel")
            if dw:
                out = x86.depthwise_conv2d_NCHWc(A, W, (s, s), (p,) * 4, (1, 1), f"NCHW{icb}c", f"NCHW{ocb}c",
                                                 "float32")
                sch = x86.schedule_depthwise_conv2d_NCHWc([out])
            else:
                out = x86.conv2d_NCHWc(A, W, (s, s), (p,) * 4, (1, 1), f"NCHW{icb}c", f"NCHW{ocb}c", "float32")
                sch = x86.schedule_conv2d_NCHWc([out])
            mod = tvm.build(sch, [A, W, out], target=target, name="kernel")
        args = [tvm.nd.array(a5), tvm.nd.array(w6), tvm.nd.empty([int(d) for d in out.shape], "float32")]
        unpack = lambda r: lt(r, f"NCHW{ocb}c", "NCHW")  # noqa: E731
        config = f"NCHW{icb}c->NCHW{ocb}c"
    elif kind == "dense":
        m, n, kk = case["m"], case["n"], case["k"]
        a = rng.standard_normal((m, kk)).astype("float32")
        w = rng.standard_normal((n, kk)).astype("float32")
        ta, tw = torch.from_numpy(a), torch.from_numpy(w)

        def torch_fn():
            return torch.nn.functional.linear(ta, tw)
        ref = torch_fn().numpy()
        bn = dense_pack_block(n, simd_width())  # as AlterOpLayout packs it (zero-padded last panel)
        with tvm.target.Target(target):
            A = te.placeholder((m, kk), name="data")
            if bn:
                wp = dense_pack_weight_python(w, bn)
                W = te.placeholder(wp.shape, name="weight")
            else:
                wp = w
                W = te.placeholder(w.shape, name="weight")
            out = x86.dense_pack(A, W, None, "float32", n if bn else None)
            sch = x86.schedule_dense_pack([out])
            mod = tvm.build(sch, [A, W, out], target=target, name="kernel")
        args = [tvm.nd.array(a), tvm.nd.array(wp), tvm.nd.empty((m, n), "float32")]
        unpack = lambda r: r  # noqa: E731
        config = (f"weight NC{bn}n" + (" (padded)" if n % bn else "")) if bn else "weight packed per call"
    else:
        b, m, n, kk = case["b"], case["m"], case["n"], case["k"]
        a = rng.standard_normal((b, m, kk)).astype("float32")
        bt = rng.standard_normal((b, n, kk)).astype("float32")
        ta, tb = torch.from_numpy(a), torch.from_numpy(bt)

        def torch_fn():
            return torch.matmul(ta, tb.transpose(1, 2))
        ref = torch_fn().numpy()
        with tvm.target.Target(target):
            A = te.placeholder(a.shape, name="a")
            B = te.placeholder(bt.shape, name="b")
            out = x86.batch_matmul(A, B, None, "float32", False, True)
            sch = x86.schedule_batch_matmul([out])
            mod = tvm.build(sch, [A, B, out], target=target, name="kernel")
        args = [tvm.nd.array(a), tvm.nd.array(bt), tvm.nd.empty((b, m, n), "float32")]
        unpack = lambda r: r  # noqa: E731
        config = "B^T operand"
    func = mod["kernel"] if hasattr(mod, "__getitem__") else mod.get_function("kernel")
    func(*args)
    err = float(np.max(np.abs(unpack(args[-1].numpy()) - ref)))
    scale = float(np.max(np.abs(ref))) or 1.0
    if err > 1e-3 * scale:
        raise AssertionError(f"{case['name']}: kiln differs from PyTorch by {err} (scale {scale})")
    timer = func.make_timer(args) if hasattr(func, "make_timer") else None
    if timer is None:
        def timer(number):
            for _ in range(number):
                func(*args)
    return timer, torch_fn, err, config


def thread_seconds(fn, number: int) -> float:
    t0 = time.thread_time()
    fn(number)
    return (time.thread_time() - t0) / number


def measure(kiln_timer, torch_fn, rounds: int, target_s: float) -> dict:
    def torch_loop(number):
        for _ in range(number):
            torch_fn()
    contenders = {"kiln": kiln_timer, "pytorch": torch_loop}
    numbers = {}
    for name, fn in contenders.items():  # warm up and size the batches to about target_s of CPU time
        fn(1)
        once = max(thread_seconds(fn, 1), 1e-6)
        numbers[name] = max(1, int(target_s / once))
    runs = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            runs[name].append(thread_seconds(fn, numbers[name]))
    return {name: {"best_s": min(r), "median_s": statistics.median(r)} for name, r in runs.items()}


def run_models(names, rounds: int, target_s: float) -> list:
    """Whole models, one thread each: kiln (PyTorch frontend -> relay.build, untuned) vs PyTorch eager, by
    thread CPU time per inference."""
    import torch
    from .models import MODELS
    from .run import _kiln_build
    rows = []
    for name in names:
        if name not in MODELS:
            raise SystemExit(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
        model, inputs = MODELS[name][1]()
        run, output, compile_s = _kiln_build(model, inputs)
        with torch.no_grad():
            ref = model(*inputs).numpy()
        err = float(np.max(np.abs(output() - ref)))

        def kiln_loop(number):
            for _ in range(number):
                run()

        def torch_eager():
            with torch.no_grad():
                model(*inputs)
        t = measure(kiln_loop, torch_eager, rounds, target_s)
        row = {"name": name, "compile_s": compile_s, "max_abs_err": err,
               "kiln_ms_best": t["kiln"]["best_s"] * 1e3, "kiln_ms_median": t["kiln"]["median_s"] * 1e3,
               "pytorch_ms_best": t["pytorch"]["best_s"] * 1e3, "pytorch_ms_median": t["pytorch"]["median_s"] * 1e3}
        row["speedup_best"] = row["pytorch_ms_best"] / row["kiln_ms_best"]
        rows.append(row)
        print(f"{name:<14} kiln {row['kiln_ms_best']:8.2f} ms  pytorch {row['pytorch_ms_best']:8.2f} ms  "
              f"(kiln {row['speedup_best']:.2f}x PyTorch's speed; compile {compile_s:.1f} s, max err {err:.2g})",
              flush=True)
    return rows


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", default=",".join(SETS), help=f"comma-separated subset of {', '.join(SETS)}")
    p.add_argument("--filter", default="", help="only cases whose name contains this text")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--target-s", type=float, default=0.15, help="thread CPU seconds per timed batch")
    p.add_argument("--models", default="", help="also whole models from benchmarks.models, e.g. resnet18,mlp_b1 "
                   "(single thread, thread CPU time per inference)")
    p.add_argument("--out", default="kernels", help="results file stem under benchmarks/results/")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    cases = []
    for name in [x for x in args.sets.split(",") if x]:
        if name not in SETS:
            raise SystemExit(f"unknown set {name!r}; choose from {', '.join(SETS)}")
        cases += [c for c in SETS[name]() if args.filter in c["name"]]
    rows = []
    for case in cases:
        timer, torch_fn, err, config = build_case(case, rng)
        t = measure(timer, torch_fn, args.rounds, args.target_s)
        flop = _flop(case)
        row = {"name": case["name"], "config": config, "gflop": flop / 1e9, "max_abs_err": err}
        for who in ("kiln", "pytorch"):
            row[f"{who}_gflops_best"] = flop / t[who]["best_s"] / 1e9
            row[f"{who}_gflops_median"] = flop / t[who]["median_s"] / 1e9
            row[f"{who}_ms_best"] = t[who]["best_s"] * 1e3
        row["pct_best"] = 100.0 * row["kiln_gflops_best"] / row["pytorch_gflops_best"]
        rows.append(row)
        print(f"{row['name']:<34} kiln {row['kiln_gflops_best']:6.1f} GF/s  pytorch {row['pytorch_gflops_best']:6.1f} "
              f"GF/s  {row['pct_best']:5.0f}%   ({config})", flush=True)
    info = machine_info()
    threads = thread_counts()
    lines = ["# Single-thread kernel quality: kiln vs PyTorch", "", machine_line(info, threads), "",
             f"ONE thread each; thread CPU time, {args.rounds} interleaved rounds of about {args.target_s} s. "
             f"PyTorch {torch.__version__}.", "",
             "| case | kiln layout | GFLOP | kiln GFLOP/s best (median) | PyTorch GFLOP/s best (median) "
             "| kiln/PyTorch |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['config']} | {r['gflop']:.3f} | {r['kiln_gflops_best']:.1f} "
                     f"({r['kiln_gflops_median']:.1f}) | {r['pytorch_gflops_best']:.1f} "
                     f"({r['pytorch_gflops_median']:.1f}) | {r['pct_best']:.0f}% |")
    if rows:
        geo = float(np.exp(np.mean([np.log(r["pct_best"] / 100.0) for r in rows])))
        lines += ["", f"Geometric mean of kiln/PyTorch: **{100 * geo:.0f}%** over {len(rows)} cases."]
    model_rows = run_models([x for x in args.models.split(",") if x], args.rounds, args.target_s) \
        if args.models else []
    if model_rows:
        lines += ["", "| model (one thread) | kiln ms best (median) | PyTorch eager ms best (median) | kiln speed / "
                  "PyTorch | kiln compile s | max abs err |", "|---|---|---|---|---|---|"]
        for r in model_rows:
            lines.append(f"| {r['name']} | {r['kiln_ms_best']:.2f} ({r['kiln_ms_median']:.2f}) | "
                         f"{r['pytorch_ms_best']:.2f} ({r['pytorch_ms_median']:.2f}) | {r['speedup_best']:.2f}x | "
                         f"{r['compile_s']:.1f} | {r['max_abs_err']:.2g} |")
    text = "\n".join(lines) + "\n"
    print(text)
    data = {"benchmark": "single-thread kernels", "machine": info, "thread_counts": threads, "rounds": args.rounds,
            "target_s": args.target_s,
            "sets": args.sets, "rows": rows, "models": model_rows}
    if not args.no_write:
        jpath, mpath = write_results(args.out, data, text)
        print(f"wrote {jpath} and {mpath}", file=sys.stderr)
    return data


if __name__ == "__main__":
    main()
