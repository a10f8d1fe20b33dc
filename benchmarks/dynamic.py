"""Dynamic vs static shapes: one Relay VM build with dynamic axes against graph-executor builds static at each
size, timed in one interleaved run (ratios within the run are what counts on a shared machine).

    python -m benchmarks.dynamic [--rounds 7] [--number 5] [--quick]

Models: a small BERT encoder (transformers BertModel, 4 layers, hidden 256, random weights) with dynamic
(batch, seq), resnet18 (torchvision, random weights) with a dynamic batch, and a small GPT-2 (transformers
GPT2Model, 4 layers, n_embd 256, input ids and attention mask) with dynamic (batch, seq); all exported by
torch.onnx.export with dynamic_axes and imported with from_onnx (the dynamic one without pinning the axes).
Writes benchmarks/results/dynamic.{md,json}. Outputs are checked against ONNX Runtime; speed is reported,
never asserted.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings

import numpy as np

from .models import _stub_torchvision_meta
from .common import interleaved, machine_info, machine_line, paired_speedup, thread_counts, write_results


def export_bert_encoder(model, path: str, torch):
    """Writes ``model`` (a transformers BertModel) as an encoder ``x`` (int64 ids [batch, seq]) -> ``y`` (last
    hidden state) with both axes dynamic; returns the wrapped encoder module (eval mode) for reference runs.
    (The VM's BERT tests export through this too.)"""
    class Enc(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, ids):
            return self.m(input_ids=ids).last_hidden_state
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Enc().eval(), (torch.randint(0, min(100, model.config.vocab_size), (2, 8)),), path,
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}},
                          opset_version=14, dynamo=False)
    return Enc().eval()


def _export_bert(path: str, layers: int, hidden: int):
    import torch
    _stub_torchvision_meta()
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=1000, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                     intermediate_size=4 * hidden, max_position_embeddings=256)
    export_bert_encoder(BertModel(cfg).eval(), path, torch)


def _export_gpt2(path: str, layers: int, hidden: int):
    import torch
    _stub_torchvision_meta()
    from transformers import GPT2Config, GPT2Model
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=1000, n_embd=hidden, n_layer=layers, n_head=4, n_positions=256, use_cache=False)
    model = GPT2Model(cfg).eval()

    class Dec(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, ids, mask):  # with a mask: without one transformers 5 traces aten::diff (no ONNX op)
            return self.m(input_ids=ids, attention_mask=mask, use_cache=False, return_dict=False)[0]
    axes = {0: "batch", 1: "seq"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Dec().eval(), (torch.randint(0, 1000, (2, 16)), torch.ones(2, 16, dtype=torch.int64)),
                          path, input_names=["x", "mask"], output_names=["y"],
                          dynamic_axes={"x": axes, "mask": axes, "y": axes}, opset_version=14, dynamo=False)


def _export_resnet(path: str):
    import torch
    _stub_torchvision_meta()
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(2, 3, 112, 112),), path, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=13, dynamo=False)


def _static(path: str, feeds: dict):
    """A graph-executor build pinned to the shapes of ``feeds`` (input name -> array); returns (run, output,
    build seconds)."""
    import onnx
    import kiln
    from kiln import relay
    from kiln.contrib import graph_executor
    t0 = time.perf_counter()
    mod, params = relay.frontend.from_onnx(onnx.load(path), shape={k: v.shape for k, v in feeds.items()})
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    for k, v in feeds.items():
        m.set_input(k, v)
    m.run()
    return m.run, m.get_output(0).numpy(), time.perf_counter() - t0


def _dynamic(path: str):
    """One VM build with the model's dynamic axes left unknown; returns (VirtualMachine, build seconds)."""
    import onnx
    import kiln
    from kiln import relay
    from kiln.runtime.vm import VirtualMachine
    t0 = time.perf_counter()
    mod, params = relay.frontend.from_onnx(onnx.load(path))
    with kiln.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm", params=params)
    return VirtualMachine(exe, kiln.cpu()), time.perf_counter() - t0


def _vm_runner(vm, feeds: dict):
    """A run of ``x`` on its own VirtualMachine over the shared executable (a VM's stateful input is one per
    function: two sizes on one VM would both run the size set last, which the first version of this
    benchmark did, timing every dynamic size at the largest one)."""
    import kiln
    from kiln.runtime.vm import VirtualMachine
    vm = VirtualMachine(vm.exe, kiln.cpu())
    vm.set_input("main", *[kiln.nd.array(v) for v in feeds.values()])  # the model's input order

    def run():
        vm.invoke_stateful("main")
    run()
    return run, vm.get_outputs()[0].numpy()


def _ort(path: str, feeds: dict) -> np.ndarray:
    import onnxruntime as ort
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--number", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="fewer sizes (a smoke run)")
    ap.add_argument("--models", default="bert,resnet18,gpt2")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp()
    rng = np.random.default_rng(0)
    cases = []  # (model, size label, onnx path, {input name: array})
    builds = {}
    models = args.models.split(",")
    if "bert" in models:
        p = os.path.join(tmp, "bert.onnx")
        _export_bert(p, layers=4, hidden=256)
        sizes = [(1, 16), (4, 64)] if args.quick else [(1, 16), (1, 64), (4, 64), (8, 32)]
        cases += [("bert", f"batch {b} seq {s}", p, {"x": rng.integers(0, 1000, (b, s)).astype("int64")})
                  for b, s in sizes]
    if "resnet18" in models:
        p = os.path.join(tmp, "resnet18.onnx")
        _export_resnet(p)
        sizes = [1, 4] if args.quick else [1, 3, 8]
        cases += [("resnet18", f"batch {b}", p, {"x": rng.standard_normal((b, 3, 112, 112)).astype("float32")})
                  for b in sizes]
    if "gpt2" in models:
        p = os.path.join(tmp, "gpt2.onnx")
        _export_gpt2(p, layers=4, hidden=256)
        sizes = [(1, 16), (4, 64)] if args.quick else [(1, 16), (1, 64), (4, 64), (8, 32)]
        for b, s in sizes:
            mask = np.ones((b, s), "int64")
            mask[-1, s - s // 4:] = 0  # right padding in the last sequence
            cases.append(("gpt2", f"batch {b} seq {s}", p, {"x": rng.integers(0, 1000, (b, s)).astype("int64"),
                                                             "mask": mask}))
    vms = {}
    contenders, rows_meta = {}, []
    for model, label, path, feeds in cases:
        if model not in vms:
            vms[model] = _dynamic(path)
            builds[f"{model} dynamic (VM)"] = vms[model][1]
        vm = vms[model][0]
        run_s, out_s, t_s = _static(path, feeds)
        builds[f"{model} static {label}"] = t_s
        run_d, out_d = _vm_runner(vm, feeds)
        ref = _ort(path, feeds)
        err_s = float(np.max(np.abs(out_s - ref)))
        err_d = float(np.max(np.abs(out_d - ref)))
        key = f"{model} {label}"
        contenders[key + " static"] = run_s
        contenders[key + " dynamic"] = run_d
        rows_meta.append((key, err_s, err_d))
        print(f"built {key}: static {t_s:.1f} s; max |diff| vs ORT static {err_s:.2e} dynamic {err_d:.2e}",
              flush=True)
    load_before = list(os.getloadavg())
    times = interleaved(contenders, rounds=args.rounds, number=args.number)
    rows = ["| model, size | static ms (graph) | dynamic ms (VM) | dynamic / static (paired median, 95% CI) | "
            "min paired ratio | best dynamic / best static | max abs diff vs ORT (static / dynamic) |",
            "|---|---|---|---|---|---|---|"]
    ratios = {}
    for key, err_s, err_d in rows_meta:
        ts, td = times[key + " static"], times[key + " dynamic"]
        sp = paired_speedup(td["runs_s"], ts["runs_s"])  # static/dynamic speed-up = dynamic/static time ratio
        per_round = [d / st for d, st in zip(td["runs_s"], ts["runs_s"]) if st > 0]
        sp["min"] = min(per_round) if per_round else float("nan")
        sp["best_ratio"] = min(td["runs_s"]) / min(ts["runs_s"])
        ratios[key] = sp
        rows.append(f"| {key} | {ts['median_s'] * 1e3:.3f} | {td['median_s'] * 1e3:.3f} | {sp['median']:.2f}x "
                    f"[{sp['ci95'][0]:.2f}, {sp['ci95'][1]:.2f}] | {sp['min']:.2f}x | {sp['best_ratio']:.2f}x | "
                    f"{err_s:.1e} / {err_d:.1e} |")
    info = machine_info()
    info["load_average_before_timing"] = load_before
    counts = thread_counts(pytorch=False)
    md = ("# Dynamic vs static shapes (one VM build vs a graph-executor build per size)\n\n"
          f"{machine_line(info, counts)}\n\n"
          "Dynamic: `from_onnx` with the dynamic axes left unknown (`relay.Any`), `relay.vm.compile` once, run on "
          "`kiln.runtime.vm.VirtualMachine` at every size. Static: `from_onnx(shape=...)` + `relay.build` for that "
          f"size. {args.rounds} interleaved rounds of {args.number} runs; the ratio is the median of per-round "
          "ratios dynamic/static (target: at most 1.3x).\n\n" + "\n".join(rows) + "\n\nBuild seconds: "
          + ", ".join(f"{k} {v:.1f}" for k, v in builds.items()) + "\n")
    if not args.no_write:
        write_results("dynamic", {"machine": info, "thread_counts": counts, "times": times, "ratios": ratios,
                                  "builds_s": builds, "rounds": args.rounds, "number": args.number}, md)
    print(md)


if __name__ == "__main__":
    main()
