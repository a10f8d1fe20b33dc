"""The README's main job, end to end on a built-in model: resnet-18 from ``relay.testing`` through
``relay.build`` to the graph executor, checked against the reference interpreter, exported to one
file and loaded back. No PyTorch needed.

    python -c "from kiln.relay.testing.demo_flow import run_resnet_demo; run_resnet_demo()"
"""
from __future__ import annotations

import os
import tempfile
import time

import numpy as np
import kiln as tvm
from kiln import relay
from kiln.contrib import graph_executor


def run_resnet_demo(num_layers: int = 18, image_size: int = 224, batch_size: int = 1, opt_level: int = 3,
                    number: int = 3, repeat: int = 3, verbose: bool = True) -> dict:
    """Build resnet-``num_layers`` for the host CPU, run it, and report compile time, latency, the
    memory plan and the max error against the reference interpreter. Returns the figures."""

    def say(*args):
        if verbose:
            print(*args, flush=True)

    shape = (batch_size, 3, image_size, image_size)
    mod, params = relay.testing.resnet.get_workload(num_layers=num_layers, batch_size=batch_size,
                                                    image_shape=shape[1:])
    say(f"== resnet-{num_layers} from relay.testing, input {shape}, {len(params)} parameter tensors")
    t0 = time.perf_counter()
    with tvm.transform.PassContext(opt_level=opt_level):
        lib = relay.build(mod, target="llvm", params=params)
    compile_s = time.perf_counter() - t0
    say(f"relay.build (opt_level={opt_level}): {compile_s:.2f} s, {len(lib.lowered)} distinct kernels")
    say(lib.memory_plan)

    dev = tvm.cpu(0)
    m = graph_executor.GraphModule(lib["default"](dev))
    x = np.random.default_rng(0).uniform(-1, 1, size=shape).astype("float32")
    m.set_input("data", x)
    m.run()
    out = m.get_output(0).numpy()
    bench = m.benchmark(dev, number=number, repeat=repeat)
    say(f"latency: median {bench.median * 1e3:.2f} ms, min {bench.min * 1e3:.2f} ms "
        f"({repeat} x {number} runs)")

    t0 = time.perf_counter()
    ref = relay.create_executor("debug", mod=mod, params=params).evaluate()(x).numpy()
    interp_s = time.perf_counter() - t0
    max_err = float(np.max(np.abs(out - ref)))
    say(f"reference interpreter: {interp_s:.2f} s; max |kiln - reference| = {max_err:.3g} "
        f"(top-1 class {int(out.argmax())} vs {int(ref.argmax())})")

    with tempfile.TemporaryDirectory(prefix="kiln-demo-") as tmp:
        path = os.path.join(tmp, f"resnet{num_layers}.so")
        lib.export_library(path)
        size_mb = os.path.getsize(path) / 1e6
        m2 = graph_executor.GraphModule(tvm.runtime.load_module(path)["default"](dev))
        m2.run(data=x)
        same = bool(np.array_equal(m2.get_output(0).numpy(), out))
    say(f"export_library -> {size_mb:.1f} MB single file; loaded back, same outputs: {same}")
    return {"compile_s": compile_s, "latency_ms": bench.median * 1e3, "max_err": max_err,
            "kernels": len(lib.lowered), "planned_bytes": lib.memory_plan.planned_bytes,
            "intermediate_bytes": lib.memory_plan.intermediate_bytes, "export_roundtrip_equal": same}


if __name__ == "__main__":
    run_resnet_demo()
