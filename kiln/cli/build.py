"""Compile a loaded model with ``relay.build`` (optionally under tuning records, in a desired layout) — shared
by ``kiln compile``, ``kiln bench``, ``kiln tune`` and ``kiln.driver.tvmc``; and the ``--dump-code`` texts."""
from __future__ import annotations

import contextlib
import time

from .common import CLIError, LoadedModel, check_file
from .. import transform

LAYOUTS = ("NCHW", "NHWC")
DUMP_FORMATS = ("c", "relay", "tir")
# the kernel layout that goes with each data layout when the model is converted (tvmc's choice)
_KERNEL_LAYOUT = {"NCHW": "OIHW", "NHWC": "HWIO"}


def tuning_context(records: str | None):
    """``autotvm.apply_history_best(records)`` (or a no-op) and the number of tuned workloads it holds."""
    if not records:
        return contextlib.nullcontext(), 0
    check_file(records, "tuning log")
    from .. import autotvm  # lazy: heavy compiler package (fast `kiln --help`)
    ctx = autotvm.apply_history_best(records)
    n = len(getattr(ctx, "best_by_targetkey", {})) or len(getattr(ctx, "best_by_model", {}))
    if n == 0:
        raise CLIError(f"tuning log {records!r} holds no usable (error-free) records")
    return ctx, n


def convert_layout(mod, desired_layout: str | None):
    """``relay.transform.ConvertLayout`` of every conv2d to ``desired_layout`` (NCHW or NHWC), as tvmc does."""
    if not desired_layout:
        return mod
    layout = desired_layout.upper()
    if layout not in LAYOUTS:
        raise CLIError(f"--desired-layout {desired_layout!r}: expected one of {', '.join(LAYOUTS)}")
    from ..relay import transform as T  # lazy: heavy compiler package (fast `kiln --help`)
    desired = {op: [layout, _KERNEL_LAYOUT[layout]] for op in ("nn.conv2d", "qnn.conv2d")}
    desired["nn.conv2d_transpose"] = [layout, "default"]
    with transform.PassContext(opt_level=3):
        return T.ConvertLayout(desired)(mod)


def build_model(model: LoadedModel, target, opt_level: int = 3, records: str | None = None,
                desired_layout: str | None = None):
    """``relay.build`` the model; returns (factory module, seconds, tuned workloads in the log)."""
    from .. import relay  # lazy: heavy compiler package (fast `kiln --help`)
    ctx, n_tuned = tuning_context(records)
    start = time.perf_counter()
    mod = convert_layout(model.mod, desired_layout)
    with ctx, transform.PassContext(opt_level=opt_level), target:
        lib = relay.build(mod, target=target, params=model.params)
    return lib, time.perf_counter() - start, n_tuned


def build_vm_model(model: LoadedModel, target, opt_level: int = 3, records: str | None = None,
                   desired_layout: str | None = None):
    """``relay.vm.compile`` the model (one executable for every size of its unknown dims); returns
    (Executable, seconds, tuned workloads in the log)."""
    from .. import relay  # lazy: heavy compiler package (fast `kiln --help`)
    ctx, n_tuned = tuning_context(records)
    start = time.perf_counter()
    mod = convert_layout(model.mod, desired_layout)
    with ctx, transform.PassContext(opt_level=opt_level), target:
        exe = relay.vm.compile(mod, target=target, params=model.params)
    return exe, time.perf_counter() - start, n_tuned


def parse_dump_formats(text: str | None) -> list:
    """``"c,relay"`` -> ["c", "relay"], with a clear error for unknown names."""
    if not text:
        return []
    fmts = [f.strip().lower() for f in text.split(",") if f.strip()]
    bad = [f for f in fmts if f not in DUMP_FORMATS]
    if bad or not fmts:
        raise CLIError(f"--dump-code {text!r}: the formats kiln can dump are {', '.join(DUMP_FORMATS)} "
                       "(comma separated); kiln generates C, so there is no ll/asm")
    return list(dict.fromkeys(fmts))


def dump_code(lib, fmt: str) -> str:
    """The text of one ``--dump-code`` format of a built model: generated C, optimized Relay, or the TIR of
    every kernel."""
    if fmt == "c":
        return lib.get_source()
    if fmt == "relay":
        return lib.ir_mod.astext() if getattr(lib, "ir_mod", None) is not None else ""
    if fmt == "tir":
        parts = []
        for cf in getattr(lib, "lowered", []):
            parts.append(f"// {cf.func_name} (anchor {cf.anchor_op}, implementation {cf.implementation})\n"
                         f"{cf.prim_func}")
        return "\n\n".join(parts) + "\n"
    raise CLIError(f"unknown dump format {fmt!r}")


def describe_inputs(inputs: list) -> str:
    return ", ".join(f"{n}[{', '.join('?' if x < 0 else str(x) for x in s)}] {d}" for n, s, d in inputs) or "(none)"
