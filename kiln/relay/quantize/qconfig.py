"""The quantization configuration (TVM's ``relay.quantize.qconfig`` / ``current_qconfig``).

A QConfig is immutable; ``with qconfig(...):`` pushes one on a thread-local stack and the quantize
passes read ``current_qconfig()``. Unlike TVM, an unknown field name or a value outside a field's
choices is an error at ``qconfig(...)`` time, naming the field and what is accepted.
"""
from __future__ import annotations

import threading

from ...error import ArgumentError
from ...runtime.dtype import dtype_str


class QuantizeConfigError(ArgumentError):
    """A ``qconfig`` field name or value that relay.quantize does not accept."""


class QAnnotateKind:
    """What a ``simulated_quantize`` quantizes: it picks the bit width and dtype from the config."""

    IDENTITY = 0
    INPUT = 1
    WEIGHT = 2
    ACTIVATION = 3


_KIND_NAMES = {QAnnotateKind.IDENTITY: "identity", QAnnotateKind.INPUT: "input",
               QAnnotateKind.WEIGHT: "weight", QAnnotateKind.ACTIVATION: "activation"}


def kind2str(kind: int) -> str:
    """The config suffix of an annotation kind (``input``, ``weight``, ``activation``, ``identity``)."""
    try:
        return _KIND_NAMES[int(kind)]
    except (KeyError, TypeError, ValueError):
        raise QuantizeConfigError(f"unknown QAnnotateKind {kind!r}; expected one of "
                                  f"{sorted(_KIND_NAMES)} ({', '.join(_KIND_NAMES.values())})") from None


_CHOICES = {
    "calibrate_mode": ("global_scale", "kl_divergence", "percentile"),
    "weight_scale": ("power2", "max"),
    "rounding": ("UPWARD", "TONEAREST"),
    "partition_conversions": ("disabled", "enabled", "fully_integral"),
}

# TVM v0.13's defaults (python/tvm/relay/quantize/quantize.py)
_DEFAULTS = {
    "nbit_input": 8,
    "nbit_weight": 8,
    "nbit_activation": 32,
    "dtype_input": "int8",
    "dtype_weight": "int8",
    "dtype_activation": "int32",
    "calibrate_mode": "global_scale",
    "global_scale": 8.0,
    "weight_scale": "power2",
    "skip_dense_layer": True,
    "skip_conv_layers": (0,),
    "do_simulation": False,
    "round_for_shift": True,
    "debug_enabled_ops": None,
    "rounding": "UPWARD",
    "calibrate_chunk_by": -1,
    "partition_conversions": "disabled",
}


def _check_int(name, value, lo, hi):
    if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
        raise QuantizeConfigError(f"qconfig {name}={value!r}: expected an integer in [{lo}, {hi}]")
    value = int(value)
    if not lo <= value <= hi:
        raise QuantizeConfigError(f"qconfig {name}={value}: expected an integer in [{lo}, {hi}]")
    return value


def _check_dtype(name, value):
    try:
        d = dtype_str(value)
    except Exception:  # the dtype parser's own error names the string; re-raise with the field
        raise QuantizeConfigError(f"qconfig {name}={value!r}: not a data type") from None
    if not (d.startswith("int") or d.startswith("uint")):
        raise QuantizeConfigError(f"qconfig {name}={value!r}: expected an integer dtype such as 'int8' or 'int32'")
    return d


def _normalize(name: str, value):
    if name.startswith("nbit_"):
        return _check_int(name, value, 2, 32)
    if name.startswith("dtype_"):
        return _check_dtype(name, value)
    if name in _CHOICES:
        if value not in _CHOICES[name]:
            raise QuantizeConfigError(f"qconfig {name}={value!r}: expected one of {list(_CHOICES[name])}")
        return str(value)
    if name == "global_scale":
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise QuantizeConfigError(f"qconfig global_scale={value!r}: expected a positive number") from None
        if not v > 0 or v == float("inf"):
            raise QuantizeConfigError(f"qconfig global_scale={value!r}: expected a positive finite number")
        return v
    if name in ("skip_dense_layer", "do_simulation", "round_for_shift"):
        if not isinstance(value, (bool, int)) or value not in (0, 1):
            raise QuantizeConfigError(f"qconfig {name}={value!r}: expected True or False")
        return bool(value)
    if name == "skip_conv_layers":
        if value is None:
            return None
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise QuantizeConfigError(f"qconfig skip_conv_layers={value!r}: expected a list of conv2d indices "
                                      "(0 is the first conv2d) or None")
        return tuple(_check_int("skip_conv_layers", v, 0, 1 << 30) for v in value)
    if name == "debug_enabled_ops":
        if value is None:
            return None
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise QuantizeConfigError(f"qconfig debug_enabled_ops={value!r}: expected a list of op names or None")
        return tuple(value)
    if name == "calibrate_chunk_by":
        v = _check_int(name, value, -1, 1 << 30)
        if v == 0:
            raise QuantizeConfigError("qconfig calibrate_chunk_by=0: expected -1 (all layers at once) or a "
                                      "positive number of layers per chunk")
        return v
    return value


class QConfig:
    """An immutable set of quantization options; a context manager that makes it current."""

    _node_defaults = dict(_DEFAULTS)

    def __init__(self, **values):
        unknown = sorted(set(values) - set(_DEFAULTS))
        if unknown:
            import difflib
            hints = [difflib.get_close_matches(u, list(_DEFAULTS), n=1) for u in unknown]
            hint = "; ".join(f"{u!r} (did you mean {h[0]!r}?)" if h else repr(u) for u, h in zip(unknown, hints))
            raise QuantizeConfigError(f"qconfig got unknown field(s) {hint}; known fields: {sorted(_DEFAULTS)}")
        merged = dict(_DEFAULTS)
        merged.update(values)
        for k, v in merged.items():
            object.__setattr__(self, k, _normalize(k, v))

    def __setattr__(self, name, value):
        raise AttributeError(f"QConfig is immutable ('{name}'); build a new one with relay.quantize.qconfig(...)")

    def guard(self, ref_call) -> bool:
        """Whether the annotation rule of ``ref_call``'s op may run (``debug_enabled_ops`` filters)."""
        if self.debug_enabled_ops is None:
            return True
        return ref_call.op.name in self.debug_enabled_ops

    def get_nbit_by_kind(self, kind: int) -> int:
        return getattr(self, "nbit_" + kind2str(kind))

    def get_dtype_by_kind(self, kind: int) -> str:
        return getattr(self, "dtype_" + kind2str(kind))

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in _DEFAULTS}

    def __enter__(self):
        _stack().append(self)
        return self

    def __exit__(self, *exc):
        _stack().pop()

    def __repr__(self):
        return "qconfig(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in _DEFAULTS) + ")"


_LOCAL = threading.local()


def _stack() -> list:
    s = getattr(_LOCAL, "stack", None)
    if s is None:
        s = _LOCAL.stack = []
    return s


_DEFAULT_CONFIG = None


def current_qconfig() -> QConfig:
    """The innermost ``with qconfig(...)`` config, else TVM's defaults."""
    global _DEFAULT_CONFIG
    s = _stack()
    if s:
        return s[-1]
    if _DEFAULT_CONFIG is None:
        _DEFAULT_CONFIG = QConfig()
    return _DEFAULT_CONFIG


def qconfig(**kwargs) -> QConfig:
    """A QConfig with ``kwargs`` over TVM's defaults (fields not given keep the default, not the
    enclosing config's value, as in TVM)."""
    return QConfig(**kwargs)
