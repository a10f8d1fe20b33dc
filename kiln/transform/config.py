"""Registered PassContext config keys: ``PassContext(config={...})`` accepts only these.

A layer that reads a config option registers it where it is defined::

    register_pass_config("relay.FuseOps.max_depth", int, default=256)

TVM's well-known keys are registered here so scripts can pass them before the layer that reads
them has been imported.
"""
from __future__ import annotations

import difflib

from ..error import KilnError

_CONFIGS: dict[str, dict] = {}


class PassConfigError(KilnError, ValueError):
    """An unknown PassContext config key, or a value of the wrong type."""


def register_pass_config(key: str, value_type, default=None, doc: str = "") -> None:
    """Declare a config key and its value type (bool, int, float, str, dict, list or a class)."""
    _CONFIGS[key] = {"type": value_type, "default": default, "doc": doc}


def list_configs() -> dict:
    """key -> {"type": type name, "default": value} for every registered key."""
    return {k: {"type": getattr(v["type"], "__name__", str(v["type"])), "default": v["default"]}
            for k, v in sorted(_CONFIGS.items())}


def validate_config(config: dict | None) -> dict:
    """Check keys and convert values to their registered types."""
    out = {}
    for key, value in (config or {}).items():
        spec = _CONFIGS.get(key)
        if spec is None:
            close = difflib.get_close_matches(key, list(_CONFIGS), n=3)
            hint = f"; did you mean {close}?" if close else ""
            raise PassConfigError(
                f"invalid PassContext config key {key!r}{hint}. Registered keys: {sorted(_CONFIGS)}"
            )
        out[key] = _convert(key, value, spec["type"])
    return out


def _convert(key: str, value, ty):
    if ty is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
    elif ty is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, bool):
            return int(value)
    elif ty is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif ty is str:
        if isinstance(value, str):
            return value
    elif ty is dict:
        if isinstance(value, dict):
            return dict(value)
    elif ty is list:
        if isinstance(value, (list, tuple)):
            return list(value)
    elif ty is object or isinstance(value, ty):
        return value
    tname = getattr(ty, "__name__", str(ty))
    raise PassConfigError(f"PassContext config {key!r} expects a value of type {tname}, got {value!r}")


for _key, _ty, _default in [
    ("relay.FuseOps.max_depth", int, 256),
    ("relay.FuseOps.link_params", bool, False),
    ("relay.FuseOps.depthwise_pointwise", bool, True),
    ("relay.FuseOps.input_transform", bool, True),
    ("relay.backend.use_auto_scheduler", bool, False),
    ("relay.backend.use_meta_schedule", bool, False),
    ("relay.backend.disable_compile_engine_cache", bool, False),
    ("relay.backend.tir_converter", str, "default"),
    ("relay.ToMixedPrecision.keep_orig_output_dtype", bool, False),
    ("relay.FoldScaleAxis.fold_constant", bool, True),
    ("relay.fallback_device_type", int, 1),
    ("tir.disable_vectorize", bool, False),
    ("tir.disable_assert", bool, False),
    ("tir.disable_storage_rewrite", bool, False),
    ("tir.disable_cse_tir", bool, False),
    ("tir.noalias", bool, True),
    ("tir.detect_global_barrier", bool, False),
    ("tir.instrument_bound_checkers", bool, False),
    ("tir.add_lower_pass", list, None),
    ("tir.debug_keep_trivial_loop", bool, False),
    ("tir.UnrollLoop", dict, None),
    ("tir.LoopPartition", dict, None),
    ("tir.HoistIfThenElse", dict, None),
    ("tir.Simplify", dict, None),
    ("tir.enable_debug", bool, False),
    ("testing.immutable_module", bool, False),
    ("relay.frontend.fill_span", bool, True),
    ("te.keep_schedule_record", bool, False),
]:
    register_pass_config(_key, _ty, _default)
