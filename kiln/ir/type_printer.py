"""Text of types, in Relay's syntax: ``Tensor[(1, 3), float32]``, ``(T1, T2)``, ``fn (A) -> B``."""
from __future__ import annotations
from . import type as T


def dim_to_str(d) -> str:
    if isinstance(d, int):
        return str(d)
    if type(d).__name__ == "Any":
        return "?"
    name = getattr(d, "name", None)
    return name if isinstance(name, str) else str(d)


def shape_to_str(shape) -> str:
    dims = [dim_to_str(d) for d in shape]
    return "(" + ", ".join(dims) + ")"


def type_to_str(ty, var_names=None) -> str:
    """Print a type. ``var_names`` maps TypeVars to their printed names (shared by a printer)."""
    if ty is None:
        return "?"
    if isinstance(ty, T.TensorType):
        if not ty.shape:
            return ty.dtype
        return f"Tensor[{shape_to_str(ty.shape)}, {ty.dtype}]"
    if isinstance(ty, T.TupleType):
        inner = [type_to_str(f, var_names) for f in ty.fields]
        if len(inner) == 1:
            return f"({inner[0]},)"
        return "(" + ", ".join(inner) + ")"
    if isinstance(ty, T.FuncType):
        tp = ""
        if ty.type_params:
            tp = "[" + ", ".join(type_to_str(t, var_names) for t in ty.type_params) + "]"
        args = ", ".join(type_to_str(t, var_names) for t in ty.arg_types)
        return f"fn {tp}({args}) -> {type_to_str(ty.ret_type, var_names)}"
    if isinstance(ty, T.TypeVar):
        if var_names is not None and ty in var_names:
            return var_names[ty]
        return ty.name_hint
    if isinstance(ty, T.IncompleteType):
        return "_"
    if isinstance(ty, T.GlobalTypeVar):
        return ty.name_hint
    if isinstance(ty, T.TypeCall):
        return type_to_str(ty.func, var_names) + "[" + ", ".join(type_to_str(a, var_names) for a in ty.args) + "]"
    if isinstance(ty, T.RelayRefType):
        return f"ref({type_to_str(ty.value, var_names)})"
    if isinstance(ty, T.PrimType):
        return ty.dtype
    if isinstance(ty, T.PointerType):
        return f"Pointer[{type_to_str(ty.element_type, var_names)}]"
    return type(ty).__name__
