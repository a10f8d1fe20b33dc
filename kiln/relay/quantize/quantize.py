"""``relay.quantize.quantize``: prerequisite optimizations, then partition → annotate → calibrate →
realize, as TVM's automatic quantization does."""
from __future__ import annotations

from ...ir.module import IRModule
from ...transform import PassContext, Sequential, module_pass
from .. import transform as _transform
from ..build_module import bind_params_by_name
from ._annotate import annotate
from ._calibrate import calibrate
from ._context import quantize_context
from ._partition import partition
from ._realize import realize
from .qconfig import current_qconfig
from ...error import ArgumentError
from ._partition_conversions import partition_conversions


def _bind_params(func, params):
    return bind_params_by_name(func, params)


def prerequisite_optimize(mod: IRModule, params=None) -> IRModule:
    """SimplifyInference, FoldConstant, FoldScaleAxis, CanonicalizeOps, FoldConstant (params bound
    first): batch_norm folds into the conv weights and bias_add becomes an add, the shapes the
    annotation rules expect."""
    if not isinstance(mod, IRModule):
        raise ArgumentError(f"relay.quantize expects an IRModule, got {type(mod).__name__}")
    if params:
        mod = mod.copy() if hasattr(mod, "copy") else IRModule(dict(mod.functions))
        mod["main"] = _bind_params(mod["main"], params)
    optimize = Sequential([_transform.SimplifyInference(), _transform.FoldConstant(), _transform.FoldScaleAxis(),
                           _transform.CanonicalizeOps(), _transform.FoldConstant()])
    with PassContext(opt_level=3):
        return optimize(_transform.InferType()(mod))


def quantize(mod: IRModule, params=None, dataset=None) -> IRModule:
    """Quantize ``mod`` under the current ``qconfig``; ``dataset`` (an iterable of
    ``{input_name: array}``) is needed by the ``kl_divergence`` and ``percentile`` calibrations."""
    cfg = current_qconfig()
    if cfg.partition_conversions != "disabled":  # fail before the (long) calibration
        partition_conversions(None, None, None)
    mod = prerequisite_optimize(mod, params)
    calibrate_pass = module_pass(calibrate(dataset), opt_level=1, name="QuantizeCalibrate")
    passes = [partition(), _transform.InferType(), annotate(), calibrate_pass, _transform.InferType()]
    if not cfg.do_simulation:
        passes.append(realize())
    passes.append(_transform.FoldConstant())
    seq = Sequential(passes)
    with PassContext(opt_level=3, required_pass=["QuantizeAnnotate", "QuantizeCalibrate", "QuantizeRealize"]):
        with quantize_context():
            mod = seq(mod)
    mod = _transform.InferType()(mod)
    return mod
