"""kiln.tir.transform: TIR passes (TVM's ``tvm.tir.transform``).

Each constructor returns a pass object: call it on an IRModule (every PrimFunc is
transformed) or directly on a PrimFunc.
"""
from .pass_base import PrimFuncPass, prim_func_pass
from .simplify import Simplify, simplify_stmt, StmtSimplifier
from .remove_no_op import RemoveNoOp, remove_no_op_stmt
from .storage_flatten import StorageFlatten, FlattenBuffer
from .inject_prefetch import InjectPrefetch
from .vectorize import VectorizeLoop
from .unroll import UnrollLoop
from .loop_partition import LoopPartition
from .lower_intrin import LowerIntrin
from . import intrin_rule as _intrin_rule  # registers the default (C library) rules  # noqa: F401
from .promote_registers import PromoteRegisters

__all__ = [
    "PrimFuncPass", "prim_func_pass", "Simplify", "RemoveNoOp", "StorageFlatten", "FlattenBuffer", "InjectPrefetch",
    "VectorizeLoop", "UnrollLoop", "LoopPartition", "LowerIntrin", "PromoteRegisters", "simplify_stmt", "remove_no_op_stmt", "StmtSimplifier",
]
