"""int8 vs fp32 on torchvision resnet18 and mobilenet_v2 (random weights): kiln int8 (ONNX Runtime's QDQ model from
``quantize_static`` with random calibration data and ``reduce_range=True``, imported by from_onnx and rewritten by
FakeQuantizationToInteger into QNN ops, run on the x86 int8 kernels), ONNX Runtime int8 on the same QDQ model, and
kiln fp32 / ONNX Runtime fp32 on the float model, in one interleaved run per model.

    python -m benchmarks.qnn_int8 [--models resnet18,mobilenet_v2,bert] [--rounds 5] [--number 3] [--size 224]
    python -m benchmarks.qnn_int8 --profile --models mobilenet_v2     # per-kernel times, int8 and fp32
    python -m benchmarks.qnn_int8 --models resnet18_fx,mobilenet_v2_fx  # torch.ao quantize_fx models vs PyTorch

``<model>_fx``: the torchvision model quantized by ``torch.ao.quantization.quantize_fx`` (``x86`` qconfig mapping,
4 random calibration batches), traced and imported by from_pytorch; compared with PyTorch's own int8 run
(fbgemm / x86 engine) and, in fp32, kiln vs PyTorch on the float model.

The QDQ weights are 7-bit (reduce_range), so kiln's int8 build sets ``relay.x86.int8_saturating_madd`` (one
vpmaddubsw per 4 channels where the target has no VNNI; the legalization still checks every layer's weights).

``bert``: a small BERT encoder (transformers BertModel, 4 layers, hidden 256, sequence 128, random weights, on
``inputs_embeds``) quantized by ONNX Runtime's ``quantize_dynamic`` (full-range int8 weights, MatMulInteger with
DynamicQuantizeLinear activations: zero points and scales computed at run time); kiln builds it in the exact
int8 mode (without VNNI: the int16 ``vpmaddwd`` dense, ``dense_int16.x86``). Its "top-1" column compares the
argmax of the whole output.
``--cpu-time``: every contender on one thread (kiln, ONNX Runtime intra- and inter-op, PyTorch), timed by the
calling thread's CPU time (``time.thread_time``) instead of wall time: on a shared, loaded host the time a
contender spends preempted is not counted, so the ratios stay meaningful where 2-thread wall-clock ones do not
(thread pools spinning or waiting on preempted workers); it measures the kernels, not the parallel scaling.
Writes benchmarks/results/qnn_int8.{md,json} (``--cpu-time``: qnn_int8_cpu.{md,json}). Speed is reported,
never asserted.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import tempfile
import warnings

import numpy as np

from .common import interleaved, machine_info, machine_line, thread_counts, write_results


def _export(name: str, size: int, path: str):
    import torch
    from .models import _stub_torchvision_meta
    _stub_torchvision_meta()
    import torchvision
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.randn(1, 3, size, size), path, input_names=["x"], output_names=["y"],
                          opset_version=13, dynamo=False)


def _quantize(src: str, dst: str, size: int):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    rng = np.random.default_rng(0)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": rng.standard_normal((1, 3, size, size)).astype("float32")} for _ in range(4)])

        def get_next(self):
            return next(self.it, None)
    quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)


BERT = dict(hidden=256, layers=4, heads=4, seq=128)


def _export_bert(path: str):
    """A small BERT encoder (transformers BertModel, random weights) on ``inputs_embeds`` [1, seq, hidden]."""
    import torch
    from .models import _stub_torchvision_meta
    _stub_torchvision_meta()
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    h = BERT["hidden"]
    cfg = BertConfig(vocab_size=1000, hidden_size=h, num_hidden_layers=BERT["layers"],
                     num_attention_heads=BERT["heads"], intermediate_size=4 * h, max_position_embeddings=512)
    model = BertModel(cfg).eval()

    class Enc(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, x):
            return self.m(inputs_embeds=x).last_hidden_state
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Enc().eval(), torch.randn(1, BERT["seq"], h), path, input_names=["x"], output_names=["y"],
                          opset_version=14, dynamo=False)


def _quantize_dynamic(src: str, dst: str):
    """ONNX Runtime's dynamic quantization: int8 weights, MatMulInteger + DynamicQuantizeLinear activations."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(src, dst, weight_type=QuantType.QInt8)


def _kiln_lib(path: str, x: np.ndarray, int8: bool = False, saturating: bool = True):
    import onnx
    import kiln
    from kiln import relay
    mod, params = relay.frontend.from_onnx(onnx.load(path), shape={"x": x.shape}, freeze_params=True)
    config = {}
    if int8:
        mod = relay.transform.FakeQuantizationToInteger()(relay.transform.InferType()(mod))
        config["relay.x86.int8_saturating_madd"] = saturating
    with kiln.transform.PassContext(opt_level=3, config=config):
        return relay.build(mod, "llvm", params=params)


def _kiln(path: str, x: np.ndarray, int8: bool = False, saturating: bool = True):
    import kiln
    from kiln.contrib import graph_executor
    lib = _kiln_lib(path, x, int8, saturating)
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input("x", x)
    m.run()
    return m.run, lambda: m.get_output(0).numpy()


def _torch_fx(name: str, size: int):
    """(float model, torch.ao quantize_fx int8 model, input): torchvision ``name`` (random weights), prepared with
    the ``x86`` qconfig mapping, calibrated on 4 random batches, converted."""
    import torch
    from torch.ao.quantization import get_default_qconfig_mapping, quantize_fx
    from .models import _stub_torchvision_meta
    _stub_torchvision_meta()
    import torchvision
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    x = torch.randn(1, 3, size, size)
    torch.backends.quantized.engine = "x86"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = quantize_fx.prepare_fx(model, get_default_qconfig_mapping("x86"), (x,))
        with torch.no_grad():
            for _ in range(4):
                prepared(torch.randn(1, 3, size, size))
        q = quantize_fx.convert_fx(prepared).eval()
    return model, q, x


def _kiln_torch(model, x):
    """kiln on a traced PyTorch model (float or quantized): (run, output)."""
    import torch
    import kiln
    from kiln import relay
    from kiln.contrib import graph_executor
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(model, x).eval()
    mod, params = relay.frontend.from_pytorch(traced, [("x", tuple(x.shape))])
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input("x", x.numpy())
    m.run()
    return m.run, lambda: m.get_output(0).numpy()


def _torch_run(model, x, threads: int):
    import torch
    torch.set_num_threads(threads)

    def run():
        with torch.no_grad():
            return model(x)
    return run, lambda: run().numpy()


def bench_torch_fx(name: str, size: int, rounds: int, number: int, threads: int, cpu_time: bool = False) -> dict:
    """kiln int8 (from_pytorch on the quantize_fx model) vs PyTorch's own int8 run (fbgemm / x86), kiln fp32 vs
    PyTorch fp32 on the float model."""
    model, q, x = _torch_fx(name, size)
    contenders, outputs = {}, {}
    for cname, (run, out) in {"kiln_int8": _kiln_torch(q, x), "torch_int8": _torch_run(q, x, threads),
                              "kiln_fp32": _kiln_torch(model, x), "torch_fp32": _torch_run(model, x, threads)}.items():
        contenders[cname] = _cpu_timer(run) if cpu_time else run
        outputs[cname] = out()
    times = interleaved(contenders, rounds=rounds, number=number)
    return {"times": times, "outputs": outputs}


def _cpu_timer(fn):
    """An ``interleaved`` contender timing ``fn`` by the calling thread's CPU time (mean seconds per call)."""
    import time

    def timer(n: int) -> float:
        t = time.thread_time()
        for _ in range(n):
            fn()
        return (time.thread_time() - t) / max(n, 1)
    return ("timer", timer)


def _ort(path: str, x: np.ndarray, threads: int):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    if threads == 1:
        opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return (lambda: sess.run(None, {"x": x})), (lambda: sess.run(None, {"x": x})[0])


def _models(name: str, size: int, tmp: str):
    """(fp32 ONNX path, int8 ONNX path, input) of one benchmark model."""
    f32 = os.path.join(tmp, f"{name}.onnx")
    q = os.path.join(tmp, f"{name}_qdq.onnx")
    if name == "bert":
        _export_bert(f32)
        _quantize_dynamic(f32, q)
        x = np.random.default_rng(1).standard_normal((1, BERT["seq"], BERT["hidden"])).astype("float32")
    else:
        _export(name, size, f32)
        _quantize(f32, q, size)
        x = np.random.default_rng(1).standard_normal((1, 3, size, size)).astype("float32")
    return f32, q, x


def _parallel_kernels(lib) -> tuple:
    """(kernels with a parallel loop, kernels) in the build's generated C: a kernel left serial by the parallel
    policy (``relay.backend.parallel_min_work``) runs on one core whatever the thread count."""
    import re
    mod = lib.get_lib()
    src = "\n".join(m.get_source() or "" for m in [mod] + list(getattr(mod, "imported_modules", [])))
    starts = [(m.start(), m.group(1)) for m in re.finditer(r"^int32_t (tvmgen_\w+)\(", src, re.M)]
    kernels, par = set(), set()
    for i, (pos, name) in enumerate(starts):
        body = src[pos:starts[i + 1][0] if i + 1 < len(starts) else len(src)]
        kernels.add(name)
        if re.search(rf"kiln_par_{name}_\d+[,(]", src) or "#pragma omp parallel" in body:  # pool closure / OpenMP
            par.add(name)
    return len(par), len(kernels)


def profile_model(name: str, size: int, tmp: str, top: int = 25) -> str:
    """Per-kernel times of kiln int8 and kiln fp32 (debug executor, each kernel timed on its own, minimum of 5
    repeats): totals by op type and the slowest kernels, as markdown."""
    import kiln
    from kiln.contrib.debugger import debug_executor
    f32, q, x = _models(name, size, tmp)
    out = [f"## {name}: per-kernel profile (min of 5 repeats, each kernel on its own)"]
    for cname, path, int8 in (("kiln_int8", q, True), ("kiln_fp32", f32, False)):
        lib = _kiln_lib(path, x, int8, saturating=name != "bert")
        m = lib["debug_create"]("default", kiln.cpu())
        m.set_input("x", x)
        with contextlib.redirect_stdout(io.StringIO()):  # the debug run prints its own per-node table
            m.run()
        reps = [m.run_individual(number=3, repeat=1) for _ in range(5)]
        times = np.min(np.array(reps), axis=0)
        nodes = [nd_ for nd_ in m._exec.spec.nodes if nd_["op"] == "tvm_op"]
        by_type, rows = {}, []
        for node, t in zip(nodes, times):
            kind = debug_executor.op_type(node["attrs"]["func_name"])
            by_type[kind] = by_type.get(kind, 0.0) + t
            rows.append((t, node["attrs"]["func_name"]))
        total = float(np.sum(times))
        par, kernels = _parallel_kernels(lib)
        out.append(f"\n### {cname}: {total * 1e3:.2f} ms in {len(nodes)} kernels ({par} of {kernels} distinct "
                   f"kernels have a parallel loop)\n\n| op type | ms | % |\n|---|---|---|")
        for kind, t in sorted(by_type.items(), key=lambda kv: -kv[1])[:top]:
            out.append(f"| {kind} | {t * 1e3:.3f} | {100 * t / total:.1f} |")
        out.append("\nslowest kernels:\n\n| kernel | ms |\n|---|---|")
        for t, fname in sorted(rows, reverse=True)[:top]:
            out.append(f"| {fname} | {t * 1e3:.3f} |")
    return "\n".join(out)


def bench_model(name: str, size: int, rounds: int, number: int, threads: int, tmp: str,
                cpu_time: bool = False) -> dict:
    f32, q, x = _models(name, size, tmp)
    contenders, outputs = {}, {}
    for cname, (run, out) in {"kiln_int8": _kiln(q, x, int8=True, saturating=name != "bert"), "ort_int8": _ort(q, x, threads),
                              "kiln_fp32": _kiln(f32, x), "ort_fp32": _ort(f32, x, threads)}.items():
        contenders[cname] = _cpu_timer(run) if cpu_time else run
        outputs[cname] = out()
    times = interleaved(contenders, rounds=rounds, number=number)
    return {"times": times, "outputs": outputs}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default="resnet18,mobilenet_v2,bert")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--number", type=int, default=3)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--profile", action="store_true",
                    help="print per-kernel times of kiln int8 and fp32 (debug executor) instead of the comparison")
    ap.add_argument("--cpu-time", action="store_true",
                    help="one thread per contender, timed by thread CPU time (meaningful on a loaded host)")
    args = ap.parse_args(argv)
    threads = int(os.environ.get("KILN_NUM_THREADS", os.cpu_count() or 1))
    if args.cpu_time:
        import kiln
        threads = 1
        kiln.runtime.set_num_threads(1)
    tmp = tempfile.mkdtemp()
    if args.profile:
        for name in args.models.split(","):
            print(profile_model(name, args.size, tmp))
        return
    load_before = os.getloadavg()
    results, sections = {}, []
    for name in args.models.split(","):
        fx = name.endswith("_fx")
        other = "torch" if fx else "ort"
        if fx:
            r = bench_torch_fx(name[:-3], args.size, args.rounds, args.number, threads, args.cpu_time)
        else:
            r = bench_model(name, args.size, args.rounds, args.number, threads, tmp, args.cpu_time)
        t, outs = r["times"], r["outputs"]
        med = {k: v["median_s"] for k, v in t.items()}
        rows = ["| contender | median ms | best ms | max abs diff vs its reference | top-1 agrees |", "|---|---|---|---|---|"]
        for cname in t:
            ref = outs[f"{other}_int8"] if "int8" in cname else outs[f"{other}_fp32"]
            err = float(np.max(np.abs(outs[cname] - ref)))
            rows.append(f"| {cname} | {t[cname]['median_s'] * 1e3:.2f} | {t[cname]['best_s'] * 1e3:.2f} | {err:.4f} | "
                        f"{int(outs[cname].argmax() == ref.argmax())} |")
        ratios = {"kiln_fp32 / kiln_int8": med["kiln_fp32"] / med["kiln_int8"],
                  f"{other}_int8 / kiln_int8": med[f"{other}_int8"] / med["kiln_int8"],
                  f"{other}_fp32 / kiln_fp32": med[f"{other}_fp32"] / med["kiln_fp32"]}
        rows.append("")
        rows.append("speed ratios (median times; > 1 means the second named is faster): " +
                    ", ".join(f"{k} = {v:.2f}" for k, v in ratios.items()))
        title = (f"bert encoder ({BERT['layers']} layers, hidden {BERT['hidden']}, seq {BERT['seq']}; "
                 "quantize_dynamic: MatMulInteger)" if name == "bert" else
                 f"{name[:-3]} ({args.size}x{args.size}; torch.ao quantize_fx, x86 qconfig, vs PyTorch)" if fx else
                 f"{name} ({args.size}x{args.size})")
        sections.append(f"## {title}\n\n" + "\n".join(rows))
        results[name] = {"times": t, "ratios": ratios,
                         f"max_abs_diff_int8_vs_{other}_int8":
                             float(np.max(np.abs(outs["kiln_int8"] - outs[f"{other}_int8"])))}
    load_after = os.getloadavg()
    info = machine_info()
    counts = thread_counts(ort_intra_op=threads, pytorch=False)
    clock = ("one thread each, thread CPU time (ms below are CPU ms per call)" if args.cpu_time else
             f"{threads} threads, wall clock")
    md = (f"# int8 vs fp32: {', '.join(args.models.split(','))} (CNNs: QDQ, reduce_range; BERT: dynamic), "
          f"{clock}\n\n"
          f"{machine_line(info, counts)}\n\nload average before {tuple(round(v, 2) for v in load_before)}, after "
          f"{tuple(round(v, 2) for v in load_after)} (the machine is shared: compare the ratios of one interleaved "
          "run, not absolute times)\n\n" + "\n\n".join(sections) + "\n")
    if not args.no_write:
        write_results("qnn_int8_cpu" if args.cpu_time else "qnn_int8",
                      {"machine": info, "clock": clock, "thread_counts": counts, "models": results, "size": args.size,
                       "threads": threads, "load_before": load_before, "load_after": load_after}, md)
    print(md)


if __name__ == "__main__":
    main()
