"""kiln.tir.analysis: queries over TIR (TVM's ``tvm.tir.analysis``)."""
from .analysis import expr_deep_equal, undefined_vars, verify_well_formed, estimate_tir_flops

__all__ = ["expr_deep_equal", "undefined_vars", "verify_well_formed", "estimate_tir_flops"]
