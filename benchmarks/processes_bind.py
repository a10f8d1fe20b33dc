"""Several kiln processes at once on a many-core machine: the pool's default placement of its workers
(kiln/runtime/thread_pool.c) against KILN_POOL_BIND=0, each process timing resnet18 from one start instant.

usage: python benchmarks/processes_bind.py build DIR         (torchvision resnet18, random weights -> DIR/r18.so)
       python benchmarks/processes_bind.py main DIR [configs [out.json]]   configs e.g. 4x4,2x8,1x16 (processes x threads)
Prints per-process median / p90 ms and caller moves per run; session 14's results: results/spr_s14_processes.md.
"""
import json, os, subprocess, sys, time, types

import numpy as np


def build(d):
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    import torch, torchvision
    import kiln as tvm
    from kiln import relay
    os.makedirs(d, exist_ok=True)
    m = torchvision.models.resnet18().eval()
    x = torch.randn(1, 3, 224, 224)
    mod, params = relay.frontend.from_pytorch(torch.jit.trace(m, x), [("input0", ((1, 3, 224, 224), "float32"))])
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    lib.export_library(os.path.join(d, "r18.so"))
    np.save(os.path.join(d, "x.npy"), x.numpy())


def child(d, threads, start_at, calls):
    import kiln as tvm
    from kiln.contrib import graph_executor
    from kiln.runtime import thread_pool
    tvm.runtime.set_num_threads(threads)
    lib = tvm.runtime.load_module(os.path.join(d, "r18.so"))
    g = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    g.set_input("input0", np.load(os.path.join(d, "x.npy")))
    for _ in range(3):
        g.run()
    while time.time() < start_at:
        time.sleep(0.002)
    ts = []
    for _ in range(calls):
        t = time.perf_counter(); g.run(); ts.append((time.perf_counter() - t) * 1e3)
    print(json.dumps({"median": float(np.median(ts)), "p90": float(np.percentile(ts, 90)), "min": min(ts),
                      "stats": {k: v for k, v in thread_pool.pool_stats().items() if isinstance(v, (int, float))}}))


def main(d, configs):
    res = {}
    for cfg in configs:
        p, t = (int(v) for v in cfg.split("x"))
        for bind in ("1", "0", "1", "0"):
            env = dict(os.environ, KILN_POOL_BIND=bind)
            start = time.time() + 4.0
            procs = [subprocess.Popen([sys.executable, __file__, "child", d, str(t), str(start), "60"], env=env,
                                      stdout=subprocess.PIPE, text=True) for _ in range(p)]
            outs = [json.loads(pr.communicate()[0].strip().splitlines()[-1]) for pr in procs]
            meds = sorted(o["median"] for o in outs)
            p90s = sorted(o["p90"] for o in outs)
            key = f"{cfg} bind={bind}"
            res.setdefault(key, []).append({"medians": meds, "p90s": p90s})
            print(f"{key}: medians {' '.join(f'{v:.2f}' for v in meds)}  p90 {' '.join(f'{v:.2f}' for v in p90s)}"
                  f"  moves {[o['stats'].get('caller_moves') for o in outs]}", flush=True)
    return res


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(sys.argv[2])
    elif sys.argv[1] == "child":
        child(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))
    else:
        out = main(sys.argv[2], sys.argv[3].split(",") if len(sys.argv) > 3 else ["4x4", "2x8", "8x2", "1x16"])
        if len(sys.argv) > 4:
            json.dump(out, open(sys.argv[4], "w"), indent=1)
