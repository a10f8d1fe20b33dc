"""TVM's ``relay.backend._backend`` entry points that tests call directly: ``GraphPlanMemory``.

``GraphPlanMemory(func)`` plans the storage of a fused, type-checked function exactly as graph codegen does
(liveness-based reuse, reshapes sharing their input's block) without compiling any kernel, and answers per
expression: ``memory_plan.expr_to_storage_info[expr]`` with ``storage_ids``, ``device_types``,
``storage_sizes_in_bytes`` (one entry per tensor the expression produces).
"""
from __future__ import annotations

import json

from ...error import LoweringError
from ..expr import Function
from .graph_executor_codegen import GraphExecutorCodegen
from ...runtime.dtype import nbytes


class StorageInfo:
    """Where one expression's tensors live (TVM's ``relay.StorageInfo``)."""

    def __init__(self, storage_ids, device_types, storage_sizes_in_bytes):
        self.storage_ids = list(storage_ids)
        self.device_types = list(device_types)
        self.storage_sizes_in_bytes = list(storage_sizes_in_bytes)

    # TVM's older spelling
    @property
    def storage_sizes(self) -> list:
        return self.storage_sizes_in_bytes

    def __repr__(self) -> str:
        return (f"StorageInfo(storage_ids={self.storage_ids}, device_types={self.device_types}, "
                f"storage_sizes_in_bytes={self.storage_sizes_in_bytes})")


class StaticMemoryPlan:
    """The plan of a whole function: ``expr_to_storage_info`` maps each expression to its StorageInfo."""

    def __init__(self, expr_to_storage_info: dict):
        self.expr_to_storage_info = expr_to_storage_info

    def __repr__(self) -> str:
        return f"StaticMemoryPlan({len(self.expr_to_storage_info)} expressions)"


class _NameOnly:
    """Stands in for the kernel a fused function would compile to: only its name is needed to plan."""

    const_inputs: tuple = ()

    def __init__(self, func_name: str):
        self.func_name = func_name


class _PlanningCompiler:
    def __init__(self):
        self.lowered: list = []
        self._names: dict = {}

    def lower(self, func):
        name = self._names.get(func)
        if name is None:
            name = self._names[func] = f"fused_{len(self._names)}"
        return _NameOnly(name)


class _PlanOnlyCodegen(GraphExecutorCodegen):
    def __init__(self):
        super().__init__(_PlanningCompiler())
        self.expr_entries: dict = {}

    def visit(self, expr) -> list:
        out = super().visit(expr)
        self.expr_entries.setdefault(expr, out)
        return out


def GraphPlanMemory(func: Function) -> StaticMemoryPlan:  # noqa: N802 (TVM's name)
    """The graph executor's storage plan for ``func`` (fused by FuseOps, with types inferred)."""
    if not isinstance(func, Function):
        raise LoweringError(f"GraphPlanMemory expects a relay.Function (run FuseOps and InferType first), got "
                            f"{type(func).__name__}")
    cg = _PlanOnlyCodegen()
    result = cg.codegen(func)
    graph = json.loads(result["graph_json"])
    row_ptr = graph["node_row_ptr"]
    sids = graph["attrs"]["storage_id"][1]
    shapes = graph["attrs"]["shape"][1]
    dtypes = graph["attrs"]["dltype"][1]
    info = {}
    for expr, entries in cg.expr_entries.items():
        eids = [row_ptr[nid] + idx for nid, idx in entries]
        info[expr] = StorageInfo([sids[e] for e in eids], [1] * len(eids),
                                 [nbytes(shapes[e], dtypes[e]) for e in eids])
    return StaticMemoryPlan(info)


__all__ = ["GraphPlanMemory", "StaticMemoryPlan", "StorageInfo"]
