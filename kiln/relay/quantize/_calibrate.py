"""The calibrate pass (TVM's ``relay.quantize.calibrate``): picks every simulated_quantize's scale.

Weights get ``power2`` (max |w| rounded up to a power of two) or ``max`` scales from the constant
itself. Inputs and activations get ``global_scale`` from the config, or a threshold found on the
dataset: the annotated graph is rewritten so that it returns, as a tuple, the value each
non-weight simulated_quantize sees (``create_stats_collector``); it is built with relay.build and run
on every batch; the values of each node over all batches give its threshold (``kl_divergence``: the
KL search, ``percentile``: the 99.999th percentile of |x|). The scale and clip variables are then
bound to constants: ``dom_scale = scale / 2**(nbit - sign)``, clip ``±(2**(nbit - sign) - 1)``.
"""
from __future__ import annotations

import logging
import math

import numpy as np

from ...error import ArgumentError
from ...ir.module import IRModule
from ...transform import PassContext
from ..analysis.vars import free_vars
from ..expr_functor import ExprMutator, post_order_visit
from ..expr import Call, Constant, Function, Tuple, const, bind
from ._ops import SIMULATED_QUANTIZE, SimulatedQuantizeAttrs
from .kl_divergence import _find_scale_by_kl
from .qconfig import QAnnotateKind, current_qconfig
from ...target import Target
from ...runtime import device as _device
from ...contrib import graph_executor
from ..build_module import build

logger = logging.getLogger("kiln.relay.quantize")


def _is_sq(expr) -> bool:
    return isinstance(expr, Call) and getattr(expr.op, "name", None) == SIMULATED_QUANTIZE


def simulated_quantize_nodes(func) -> list:
    """The simulated_quantize calls of ``func`` in post order (the order scales are assigned in)."""
    nodes = []
    post_order_visit(func, lambda e: nodes.append(e) if _is_sq(e) else None)
    return nodes


class _StatsCollector(ExprMutator):
    def __init__(self):
        super().__init__()
        self.profile_data = []

    def visit_call(self, call):
        new = super().visit_call(call)
        if not _is_sq(new):
            return new
        zero = Constant(np.array(0.0, dtype="float32"))
        attrs = SimulatedQuantizeAttrs(kind=QAnnotateKind.IDENTITY, sign=new.attrs.sign, rounding=new.attrs.rounding)
        ident = Call(new.op, [new.args[0], zero, zero, zero], attrs)
        if int(new.attrs.kind) in (QAnnotateKind.INPUT, QAnnotateKind.ACTIVATION):
            self.profile_data.append(ident)
        return ident


def create_stats_collector(func: Function) -> Function:
    """``func`` returning the input of each non-weight simulated_quantize (which become identities),
    in post order (TVM's ``CreateStatsCollector``)."""
    collector = _StatsCollector()
    collector.visit(func.body)
    body = Tuple(collector.profile_data)
    return Function(free_vars(body), body)


CreateStatsCollector = create_stats_collector


def _profile_runtime(mod: IRModule):
    func = create_stats_collector(mod["main"])
    target = Target.current()
    target = target if target is not None else Target("llvm")
    with PassContext(opt_level=3):
        lib = build(IRModule.from_expr(func), target=target)
    dev = _device(target.kind.name if target.kind.name != "c" else "cpu", 0)
    return graph_executor.GraphModule(lib["default"](dev)), [p.name_hint for p in func.params]


def _batches(dataset):
    if dataset is None:
        raise ArgumentError(f"calibrate_mode={current_qconfig().calibrate_mode!r} needs a calibration dataset: "
                            "pass dataset=[{'data': array, ...}, ...] to relay.quantize.quantize")
    for i, batch in enumerate(dataset):
        if not isinstance(batch, dict):
            raise ArgumentError(f"calibration dataset item {i} is a {type(batch).__name__}; expected a dict "
                                "mapping input names to arrays")
        yield batch


def collect_stats(mod: IRModule, dataset, chunk_by: int = -1):
    """Yield, chunk by chunk (``chunk_by`` nodes, -1 for all), the flattened values every non-weight
    simulated_quantize sees over the whole dataset."""
    runtime, names = _profile_runtime(mod)
    num_outputs = runtime.get_num_outputs()
    chunk_by = num_outputs if chunk_by == -1 else chunk_by
    batches = list(_batches(dataset))
    if not batches:
        raise ArgumentError("the calibration dataset is empty")
    for start in range(0, num_outputs, chunk_by):
        stop = min(start + chunk_by, num_outputs)
        outputs = [[] for _ in range(start, stop)]
        for batch in batches:
            missing = [n for n in names if n not in batch]
            if missing:
                raise ArgumentError(f"calibration batch lacks input(s) {missing}; it has {sorted(batch)}")
            runtime.set_input(**{n: np.asarray(batch[n]) for n in names})
            runtime.run()
            for j in range(start, stop):
                outputs[j - start].append(runtime.get_output(j).numpy())
        yield [np.concatenate([o.reshape(-1) for o in out]) for out in outputs]


def _find_scale_by_percentile(arr: np.ndarray, percentile: float = 0.99999) -> float:
    x = np.abs(np.asarray(arr).reshape(-1))
    k = min(int(x.size * percentile), x.size - 1)
    return float(np.partition(x, k)[k])


def _dataset_scale(mod, dataset, find):
    scales = []
    for samples in collect_stats(mod, dataset, current_qconfig().calibrate_chunk_by):
        scales += [find(s) for s in samples]
    it = iter(scales)
    return lambda sq_call: next(it)


def _power2_scale(sq_call) -> float:
    val = float(np.amax(np.abs(sq_call.args[0].numpy())))
    return 2.0 ** math.ceil(math.log2(val)) if val > 0 else 1.0


def _max_scale(sq_call) -> float:
    val = float(np.amax(np.abs(sq_call.args[0].numpy())))
    return val if val > 0 else 1.0


def _global_scale(sq_call) -> float:
    return current_qconfig().global_scale


def _set_params(mod: IRModule, input_scale_func, weight_scale_func) -> IRModule:
    cfg = current_qconfig()
    binds = {}
    main = mod["main"]
    for sq in simulated_quantize_nodes(main):
        _, dom_scale, clip_min, clip_max = sq.args
        kind = int(sq.attrs.kind)
        if kind == QAnnotateKind.IDENTITY:
            continue
        valid_range = 2 ** (cfg.get_nbit_by_kind(kind) - int(bool(sq.attrs.sign)))
        if kind == QAnnotateKind.WEIGHT:
            if not isinstance(sq.args[0], Constant):
                raise ArgumentError("a weight simulated_quantize needs a constant weight: bind the parameters "
                                    "(quantize(mod, params)) so FoldConstant can compute it")
            scale = weight_scale_func(sq)
        else:
            scale = input_scale_func(sq)
        if not scale > 0 or not np.isfinite(scale):
            scale = 1.0
        for v, value in ((dom_scale, scale / valid_range), (clip_min, -(valid_range - 1)),
                         (clip_max, valid_range - 1)):
            if v in binds:
                continue
            binds[v] = const(np.float32(value), "float32")
    out = mod.copy() if hasattr(mod, "copy") else IRModule(dict(mod.functions))
    out["main"] = bind(main, binds)
    return out


def calibrate(dataset=None):
    """The calibration as a ``fn(mod, ctx) -> mod`` (wrap it in a module pass, as quantize does)."""
    def wrapped_func(mod, ctx=None):
        cfg = current_qconfig()
        if cfg.calibrate_mode == "kl_divergence":
            input_scale_func = _dataset_scale(mod, dataset, _find_scale_by_kl)
        elif cfg.calibrate_mode == "percentile":
            input_scale_func = _dataset_scale(mod, dataset, _find_scale_by_percentile)
        else:
            input_scale_func = _global_scale
        weight_scale_func = _max_scale if cfg.weight_scale == "max" else _power2_scale
        return _set_params(mod, input_scale_func, weight_scale_func)
    return wrapped_func
