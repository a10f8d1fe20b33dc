"""int8 vs fp32 on a small CNN: kiln int8 (ONNX Runtime's QDQ and QOperator models through from_onnx, and the QDQ
model after FakeQuantizationToInteger), ONNX Runtime int8, kiln fp32, ONNX Runtime fp32, in one interleaved run.

    python -m benchmarks.qnn_int8 [--rounds 7] [--number 10] [--size 56]

Writes benchmarks/results/qnn_int8.{md,json}. Speed is reported, never asserted.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import warnings

import numpy as np

from .common import interleaved, machine_info, machine_line, thread_counts, write_results


def _model(size: int, path: str):
    import torch

    class CNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            chans = [3, 32, 64, 64, 128]
            self.convs = torch.nn.ModuleList(torch.nn.Conv2d(a, b, 3, stride=2 if k else 1, padding=1)
                                             for k, (a, b) in enumerate(zip(chans, chans[1:])))
            self.fc = torch.nn.Linear(128, 100)

        def forward(self, x):
            for c in self.convs:
                x = torch.relu(c(x))
            return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(CNN().eval(), torch.randn(1, 3, size, size), path, input_names=["x"], output_names=["y"],
                          opset_version=13, dynamo=False)


def _quantize(src: str, dst: str, fmt: str, size: int):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    rng = np.random.default_rng(0)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": rng.standard_normal((1, 3, size, size)).astype("float32")} for _ in range(4)])

        def get_next(self):
            return next(self.it, None)
    quantize_static(src, dst, Reader(), quant_format=getattr(QuantFormat, fmt), activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)


def _kiln(path: str, x: np.ndarray, fq2i: bool = False):
    import onnx
    import kiln
    from kiln import relay
    from kiln.contrib import graph_executor
    mod, params = relay.frontend.from_onnx(onnx.load(path), shape={"x": x.shape}, freeze_params=True)
    if fq2i:
        mod = relay.transform.FakeQuantizationToInteger()(relay.transform.InferType()(mod))
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input("x", x)
    m.run()
    return m.run, lambda: m.get_output(0).numpy()


def _ort(path: str, x: np.ndarray, threads: int):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return (lambda: sess.run(None, {"x": x})), (lambda: sess.run(None, {"x": x})[0])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--number", type=int, default=10)
    ap.add_argument("--size", type=int, default=56)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    threads = int(os.environ.get("KILN_NUM_THREADS", os.cpu_count() or 1))
    tmp = tempfile.mkdtemp()
    f32 = os.path.join(tmp, "cnn.onnx")
    _model(args.size, f32)
    paths = {fmt: os.path.join(tmp, f"cnn_{fmt}.onnx") for fmt in ("QDQ", "QOperator")}
    for fmt, p in paths.items():
        _quantize(f32, p, fmt, args.size)
    x = np.random.default_rng(1).standard_normal((1, 3, args.size, args.size)).astype("float32")
    contenders, outputs = {}, {}
    for name, (run, out) in {
            "kiln_fp32": _kiln(f32, x), "ort_fp32": _ort(f32, x, threads),
            "kiln_int8_qoperator": _kiln(paths["QOperator"], x), "kiln_int8_qdq": _kiln(paths["QDQ"], x),
            "kiln_int8_qdq_fq2i": _kiln(paths["QDQ"], x, fq2i=True),
            "ort_int8_qoperator": _ort(paths["QOperator"], x, threads),
            "ort_int8_qdq": _ort(paths["QDQ"], x, threads)}.items():
        contenders[name] = run
        outputs[name] = out()
    times = interleaved(contenders, rounds=args.rounds, number=args.number)
    ref = outputs["ort_fp32"]
    rows = ["| contender | median ms | best ms | max abs diff vs ORT fp32 | top-1 = ORT fp32 |", "|---|---|---|---|---|"]
    for name, t in times.items():
        err = float(np.max(np.abs(outputs[name] - ref)))
        rows.append(f"| {name} | {t['median_s'] * 1e3:.3f} | {t['best_s'] * 1e3:.3f} | {err:.4f} | "
                    f"{int(outputs[name].argmax() == ref.argmax())} |")
    info = machine_info()
    counts = thread_counts(ort_intra_op=threads, pytorch=False)
    md = (f"# int8 small CNN ({args.size}x{args.size}, 4 convs + fc), {threads} threads\n\n"
          f"{machine_line(info, counts)}\n\n" + "\n".join(rows) + "\n")
    if not args.no_write:
        write_results("qnn_int8", {"machine": info, "thread_counts": counts, "times": times, "size": args.size,
                                   "threads": threads}, md)
    print(md)


if __name__ == "__main__":
    main()
