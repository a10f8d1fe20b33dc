"""How long kiln's idle pool workers should spin before they sleep: the MLP (784-512-512-10, fp32) timed in one
process at several spin times (kiln.runtime.thread_pool.set_spin_us), interleaved with each other and with
ONNX Runtime, so the machine's load drifts hit them alike.

    python -m benchmarks.pool_spin [--batch 64] [--spins 0,50,200,1000] [--rounds 40] [--number 10]
                                   [--threads 2] [--out pool_spin]

kiln runs at ``--threads`` fixed (no adaptive policy). Reports per spin time: median and min ms per call, kiln /
ONNX Runtime (median of the per-round ratios) and the worker wake-ups from sleep per pool job (a job that
finds its worker asleep pays a futex wake-up before the worker helps). Writes
benchmarks/results/<NAME>.{md,json} unless ``--out ''``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time


from .common import settle


def measure(args) -> dict:
    """Build, then time; the process's thread policy, thread count and spin time are left as found."""
    from kiln.runtime import library, set_num_threads, set_thread_policy, thread_policy
    saved = (list(thread_policy._policy_override), list(library._threads_override))
    set_thread_policy("fixed")
    try:
        return _measure(args)
    finally:
        set_thread_policy(saved[0][0] if saved[0] else None)
        set_num_threads(saved[1][0] if saved[1] else None)


def _measure(args) -> dict:
    from kiln.runtime import thread_pool
    from .mlp_processes import build_mlp
    g, sess, feed = build_mlp(args.batch, args.threads, kiln_threads=args.threads)
    spins = [int(s) for s in args.spins.split(",")]
    ms = {s: [] for s in spins}
    ort_ms, wake = [], {s: [0, 0] for s in spins}
    old = thread_pool.set_spin_us(spins[0])
    try:
        for _ in range(args.rounds):
            for s in spins + [None]:
                fn = g.run if s is not None else (lambda: sess.run(None, feed))
                if s is not None:
                    thread_pool.set_spin_us(s)
                settle()  # until ONNX Runtime's spinning worker is idle (it outlasted the 10 ms pause used before)
                fn()
                before = thread_pool.pool_stats()
                t0 = time.perf_counter()
                for _ in range(args.number):
                    fn()
                took = (time.perf_counter() - t0) / args.number * 1e3
                if s is None:
                    ort_ms.append(took)
                    continue
                ms[s].append(took)
                after = thread_pool.pool_stats()
                wake[s][0] += after["wakeups"] - before["wakeups"]
                wake[s][1] += after["jobs"] - before["jobs"]
    finally:
        thread_pool.set_spin_us(old)
    rows = {str(s): {"median_ms": statistics.median(ms[s]), "min_ms": min(ms[s]),
                     "ratio": statistics.median(k / o for k, o in zip(ms[s], ort_ms)),
                     "wakeups_per_job": wake[s][0] / max(1, wake[s][1])} for s in spins}
    return {"batch": args.batch, "threads": args.threads, "rounds": args.rounds, "number": args.number,
            "spins_us": rows, "onnxruntime": {"median_ms": statistics.median(ort_ms), "min_ms": min(ort_ms)},
            "load_average": list(os.getloadavg())}


def to_markdown(data: dict) -> str:
    from .common import machine_line
    lines = [f"# kiln's pool spin time: MLP 784-512-512-10 batch {data['batch']}", "", machine_line(data["machine"]),
             "", f"{data['threads']} threads fixed (ONNX Runtime intra_op_num_threads the same); {data['rounds']} "
             f"interleaved rounds of {data['number']} calls; load average at the end "
             f"{', '.join(f'{x:.1f}' for x in data['load_average'])}.", "",
             "| spin us | median ms | min ms | kiln / ONNX Runtime | worker wake-ups per job |", "|---|---|---|---|---|"]
    for s, r in data["spins_us"].items():
        lines.append(f"| {s} | {r['median_ms']:.3f} | {r['min_ms']:.3f} | {r['ratio']:.2f} | "
                     f"{r['wakeups_per_job']:.2f} |")
    o = data["onnxruntime"]
    lines += ["", f"ONNX Runtime: median {o['median_ms']:.3f} ms, min {o['min_ms']:.3f}.", ""]
    return "\n".join(lines)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--spins", default="0,50,200,1000")
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--number", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="pool_spin")
    args = p.parse_args(argv)
    from .common import machine_info, write_results
    data = measure(args)
    data["machine"] = machine_info()
    md = to_markdown(data)
    print(md)
    if args.out:
        write_results(args.out, data, md)
    return data


if __name__ == "__main__":
    main()
