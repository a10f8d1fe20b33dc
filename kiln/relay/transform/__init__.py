"""Relay passes (TVM's ``relay.transform``)."""
from ...transform import (Pass, PassInfo, PassContext, ModulePass, Sequential, module_pass, PrintIR,
                          PassInstrument, pass_instrument)
from .function_pass import FunctionPass, function_pass
from .infer_type import InferType, InferTypeLocal
from .normal_form import ToANormalForm, ToANormalFormExpr, ToGraphNormalForm
from .dead_code import DeadCodeElimination
from .global_functions import RemoveUnusedFunctions, Inline
from .fuse_ops import FuseOps
from .fold_constant import FoldConstant, FoldConstantExpr
from .eliminate_common_subexpr import EliminateCommonSubexpr
from .simplify_inference import SimplifyInference
from .simplify_expr import SimplifyExpr
from .canonicalize_ops import CanonicalizeOps
from .fold_scale_axis import FoldScaleAxis, ForwardFoldScaleAxis, BackwardFoldScaleAxis
from .combine_parallel import CombineParallelConv2D, CombineParallelDense
from .alter_op_layout import AlterOpLayout, ConvertLayout
from .fast_math import FastMath
from .defuse_ops import DefuseOps
from .annotate_spans import AnnotateSpans
from .dynamic_to_static import DynamicToStatic
from .legalize import Legalize
from .sink_reshape import SinkReshape
from ..qnn.fake_quantization import FakeQuantizationToInteger as _fq2i


def FakeQuantizationToInteger(hard_fail=False, use_qat=False, optional_qnn_ops=None):  # noqa: N802 (TVM's name)
    """Rewrite QDQ regions (dequantize -> ops -> quantize) into integer QNN ops (kiln/relay/qnn/fake_quantization.py)."""
    return _fq2i(hard_fail, use_qat, optional_qnn_ops)
from .gradient import gradient, FirstOrderGradient  # noqa: E402,F401
