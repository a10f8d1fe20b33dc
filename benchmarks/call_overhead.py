"""Where one call of a compiled model spends its time outside the kernels: per-step microseconds of the
graph executor's and the VM's Python paths for a tiny model (the MLP 784-512-512-10, built from Relay directly,
no PyTorch needed).

    python -m benchmarks.call_overhead [--batch 1] [--number 2000] [--repeat 7] [--clock wall|cpu] [--no-kernels]
                                       [--profile]

Each step is called ``number`` times in a loop, ``repeat`` times; the table gives the median and the min of the
per-call means in microseconds. ``native plan`` is the one ctypes call that runs all kernels (the floor). For the
steps that run the model, the last column is their cost above it: blocks of the step and of the native plan
alternate, and the median of the paired differences is shown, which cancels most of the drift of a shared
machine (kernel time varies more than the Python path costs). ``--no-kernels`` swaps the graph executor's and the
VM's plans for the plan runner over zero kernels after a first real run, so every row is the call path alone
(Python plus one ctypes call), free of the kernels' noise and of their cache effects. ``--profile`` adds a cProfile of the set_input / run /
get_output(0).numpy() sequence. ``--clock cpu`` measures the calling thread's CPU time instead of wall time: on a
machine shared with other processes it leaves out the time the thread waited for a core, so before/after
comparisons of the Python path stay meaningful (it also leaves out nothing else: every step here runs on the
calling thread). Numbers are of the machine it runs on; nothing is written.
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
import time

import numpy as np


def build_mlp(batch: int = 1, vm: bool = False):
    """The benchmark's MLP (784-512-512-10, ReLU) as a relay.build library (or a VM executable)."""
    import kiln as tvm
    from kiln import relay
    rng = np.random.default_rng(0)
    x = relay.var("input0", shape=(batch, 784), dtype="float32")
    params, h = {}, x
    for i, (k, n) in enumerate([(784, 512), (512, 512), (512, 10)]):
        w, b = relay.var(f"w{i}", shape=(n, k)), relay.var(f"b{i}", shape=(n,))
        params[f"w{i}"] = (rng.standard_normal((n, k)) * 0.05).astype("float32")
        params[f"b{i}"] = rng.standard_normal((n,)).astype("float32")
        h = relay.nn.bias_add(relay.nn.dense(h, w), b)
        if i < 2:
            h = relay.nn.relu(h)
    mod = tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(h), h))
    with tvm.transform.PassContext(opt_level=3):
        if vm:
            return relay.vm.compile(mod, target="llvm", params=params)
        return relay.build(mod, target="llvm", params=params)


CLOCKS = {"wall": time.perf_counter_ns, "cpu": time.thread_time_ns}


def _block_us(fn, number: int, clock) -> float:
    """Mean microseconds per call of ``fn`` over ``number`` calls in a row."""
    t0 = clock()
    for _ in range(number):
        fn()
    return (clock() - t0) / number / 1e3


def per_call_us(fn, number: int, repeat: int, clock=time.perf_counter_ns) -> tuple:
    """(median, min) over ``repeat`` blocks of the mean microseconds per call of ``fn`` in a block of ``number``."""
    for _ in range(max(10, number // 10)):
        fn()
    means = [_block_us(fn, number, clock) for _ in range(repeat)]
    return statistics.median(means), min(means)


def paired_extra_us(fn, base, number: int, repeat: int, clock=time.perf_counter_ns) -> float:
    """Median over ``repeat`` rounds of (mean us per call of ``fn``) - (that of ``base``), blocks back to back."""
    for _ in range(max(10, number // 10)):
        fn()
        base()
    return statistics.median(_block_us(fn, number, clock) - _block_us(base, number, clock) for _ in range(repeat))


EMPTY_PLAN = (ctypes.c_int64 * 2)(0, 0)  # (steps, count): the plan runner over zero kernels


def graph_steps(batch: int, no_kernels: bool = False) -> tuple:
    """(name, zero-argument callable) for every step of the graph executor's user path."""
    import kiln as tvm
    from kiln.contrib import graph_executor
    g = graph_executor.GraphModule(build_mlp(batch)["default"](tvm.cpu(0)))
    ex = g.module
    x = np.random.default_rng(1).standard_normal((batch, 784)).astype("float32")
    xn = tvm.nd.array(x)
    out = tvm.nd.empty((batch, 10), "float32")
    g.set_input("input0", xn)
    g.run()
    fn, args = ex._native
    if no_kernels:
        args = ctypes.addressof(EMPTY_PLAN)
        ex._native = (fn, args)
    steps = [
        ("native plan (one ctypes call, all kernels)", lambda: fn(args, 2)),
        ("GraphModule.run()", g.run),
        ("set_input('input0', numpy)", lambda: g.set_input("input0", x)),
        ("set_input(0, numpy)", lambda: g.set_input(0, x)),
        ("set_input('input0', NDArray)", lambda: g.set_input("input0", xn)),
        ("set_input(input0=numpy)", lambda: g.set_input(input0=x)),
        ("run(input0=numpy)", lambda: g.run(input0=x)),
        ("get_output(0)", lambda: g.get_output(0)),
        ("get_output(0).numpy()", lambda: g.get_output(0).numpy()),
        ("get_output(0, out)", lambda: g.get_output(0, out)),
        ("kiln.nd.array(numpy)", lambda: tvm.nd.array(x)),
    ]

    def sequence():
        g.set_input("input0", x)
        g.run()
        return g.get_output(0).numpy()
    steps.append(("set_input(numpy) + run() + get_output(0).numpy()", sequence))
    return steps, sequence


def vm_steps(batch: int, no_kernels: bool = False) -> list:
    import kiln as tvm
    from kiln.runtime import vm as rvm
    machine = rvm.VirtualMachine(build_mlp(batch, vm=True), tvm.cpu())
    x = np.random.default_rng(1).standard_normal((batch, 784)).astype("float32")
    xn = tvm.nd.array(x)
    machine.set_input("main", x)
    machine.invoke("main", x)
    if no_kernels:  # the replay plan of this signature: its kernel segments become the empty plan
        for runner in machine._replay:
            for plan in (runner.plans.values() if runner is not None else ()):
                plan.steps = [("native", st[1], ctypes.addressof(EMPTY_PLAN), []) if st[0] == "native" else st
                              for st in plan.steps]

    def stateful():
        machine.invoke_stateful("main")
        return machine.get_outputs()[0].numpy()
    return [
        ("vm.invoke('main', numpy)", lambda: machine.invoke("main", x)),
        ("vm.invoke('main', NDArray)", lambda: machine.invoke("main", xn)),
        ("vm.invoke('main', numpy).numpy()", lambda: machine.invoke("main", x).numpy()),
        ("vm.invoke('main') after set_input", lambda: machine.invoke("main")),
        ("vm.invoke_stateful + get_outputs()[0].numpy()", stateful),
    ]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--number", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                   help="wall time, or the calling thread's CPU time (steadier on a shared machine)")
    p.add_argument("--profile", action="store_true", help="cProfile the set_input/run/get_output sequence")
    p.add_argument("--no-kernels", action="store_true",
                   help="after a first real run, call the plan runner over zero kernels: the call path alone")
    p.add_argument("--no-vm", action="store_true", help="skip the Relay VM's invoke path")
    args = p.parse_args(argv)
    steps, sequence = graph_steps(args.batch, args.no_kernels)
    base = steps[0][1]
    if not args.no_vm:
        steps += vm_steps(args.batch, args.no_kernels)
    print(f"MLP 784-512-512-10 batch {args.batch}{' (kernels swapped for an empty plan)' if args.no_kernels else ''}; "
          f"{args.clock} microseconds per call, median (min) of {args.repeat} "
          f"blocks of {args.number} calls")
    print(f"  {'step':52s} {'median':>8s} {'(min)':>8s}  {'above native plan':>18s}")
    for name, fn in steps:
        med, low = per_call_us(fn, args.number, args.repeat, CLOCKS[args.clock])
        extra = ""
        if ("run" in name or "invoke" in name) and fn is not base:
            extra = f"{paired_extra_us(fn, base, args.number, 3 * args.repeat, CLOCKS[args.clock]):18.2f}"
        print(f"  {name:52s} {med:8.2f} {'(' + format(low, '.2f') + ')':>8s}  {extra}")
    if args.profile:
        import cProfile
        import pstats
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.number * 5):
            sequence()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
