"""Where one call of a compiled model spends its time outside the kernels: per-step microseconds of the
graph executor's and the VM's Python paths for a tiny model (the MLP 784-512-512-10, built from Relay directly,
no PyTorch needed).

    python -m benchmarks.call_overhead [--batch 1] [--number 2000] [--repeat 7] [--clock wall|cpu] [--profile]

Each step is called ``number`` times in a loop, ``repeat`` times; the table gives the median and the min of the
per-call means in microseconds. ``native plan`` is the one ctypes call that runs all kernels (the floor);
``run()`` minus it is the Python cost of a run. ``--profile`` adds a cProfile of the set_input / run /
get_output(0).numpy() sequence. ``--clock cpu`` measures the calling thread's CPU time instead of wall time: on a
machine shared with other processes it leaves out the time the thread waited for a core, so before/after
comparisons of the Python path stay meaningful (it also leaves out nothing else: every step here runs on the
calling thread). Numbers are of the machine it runs on; nothing is written.
"""
from __future__ import annotations

import argparse
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


def per_call_us(fn, number: int, repeat: int, clock=time.perf_counter_ns) -> tuple:
    """(median, min) over ``repeat`` blocks of the mean microseconds per call of ``fn`` in a block of ``number``."""
    for _ in range(max(10, number // 10)):
        fn()
    means = []
    for _ in range(repeat):
        t0 = clock()
        for _ in range(number):
            fn()
        means.append((clock() - t0) / number / 1e3)
    return statistics.median(means), min(means)


def graph_steps(batch: int) -> tuple:
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


def vm_steps(batch: int) -> list:
    import kiln as tvm
    from kiln.runtime import vm as rvm
    machine = rvm.VirtualMachine(build_mlp(batch, vm=True), tvm.cpu())
    x = np.random.default_rng(1).standard_normal((batch, 784)).astype("float32")
    xn = tvm.nd.array(x)
    machine.set_input("main", x)

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
    p.add_argument("--no-vm", action="store_true", help="skip the Relay VM's invoke path")
    args = p.parse_args(argv)
    steps, sequence = graph_steps(args.batch)
    if not args.no_vm:
        steps += vm_steps(args.batch)
    print(f"MLP 784-512-512-10 batch {args.batch}; {args.clock} microseconds per call, median (min) of {args.repeat} "
          f"blocks of {args.number} calls")
    for name, fn in steps:
        med, low = per_call_us(fn, args.number, args.repeat, CLOCKS[args.clock])
        print(f"  {name:52s} {med:8.2f} ({low:.2f})")
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
