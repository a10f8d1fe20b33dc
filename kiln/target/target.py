"""Target: what kind of machine code is generated for (TVM's ``tvm.target.Target``).

A target is a kind (``llvm`` = the host CPU, ``c``, ``cuda``) plus options written
``-name=value``. Its canonical string lists the kind, then ``-keys=``, then the other options in
alphabetical order, so two targets are equal exactly when their strings are.
"""
from __future__ import annotations

import shlex
import threading
from typing import Any

from ..error import KilnError
from .x86 import host_cpu_info


class TargetError(KilnError, ValueError):
    """A target string or dict that does not parse, or an option a target kind does not have."""


class TargetKind:
    """A target kind: its name, default keys, device type and the options it accepts."""

    def __init__(self, name: str, default_keys, device_type: int, options: dict):
        self.name = name
        self.default_keys = list(default_keys)
        self.device_type = device_type
        self.options = dict(options)  # option name -> python type (str, int, bool, list)

    def __repr__(self) -> str:
        return f"TargetKind({self.name!r})"

    def __str__(self) -> str:
        return self.name

    def __eq__(self, other):
        return isinstance(other, TargetKind) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


_COMMON = {"keys": list, "libs": list, "device": str, "model": str, "tag": str, "host": str}
_CPU_OPTIONS = dict(_COMMON, **{"mcpu": str, "mattr": list, "mtriple": str, "mabi": str, "mfloat-abi": str,
                                "num-cores": int, "opt-level": int, "fast-math": bool, "link-params": bool,
                                "system-lib": bool, "runtime": str, "unpacked-api": bool})
_CUDA_OPTIONS = dict(_COMMON, **{"arch": str, "max_num_threads": int, "max_threads_per_block": int,
                                 "thread_warp_size": int, "max_shared_memory_per_block": int,
                                 "registers_per_block": int, "mcpu": str, "mattr": list})

TARGET_KINDS = {
    "llvm": TargetKind("llvm", ["cpu"], 1, _CPU_OPTIONS),
    "c": TargetKind("c", ["cpu"], 1, _CPU_OPTIONS),
    "cuda": TargetKind("cuda", ["cuda", "gpu"], 2, _CUDA_OPTIONS),
}

# Keys added by a -device= value (as TVM does for arm_cpu / mali ...).
_DEVICE_KEYS = {"arm_cpu": ["arm_cpu", "cpu"], "mali": ["mali", "opencl", "gpu"]}


def _convert(kind: TargetKind, key: str, value: Any):
    typ = kind.options.get(key)
    if typ is None:
        known = ", ".join("-" + k for k in sorted(kind.options))
        raise TargetError(f"target kind {kind.name!r} has no option -{key}; known options: {known}")
    try:
        if typ is list:
            if isinstance(value, str):
                return [v for v in value.split(",") if v]
            return [str(v) for v in value]
        if typ is bool:
            if isinstance(value, str):
                if value.lower() in ("1", "true"):
                    return True
                if value.lower() in ("0", "false"):
                    return False
                raise ValueError(value)
            return bool(value)
        if typ is int:
            return int(value)
        return str(value)
    except (TypeError, ValueError):
        what = {int: "an integer", bool: "a boolean (0, 1, true, false)", list: "a comma-separated list",
                str: "a string"}[typ]
        raise TargetError(f"target option -{key}={value!r} of kind {kind.name!r} should be {what}") from None


def _format_value(value) -> str:
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


class Target:
    """A compilation target: ``Target("llvm -mcpu=core-avx2")``, ``Target({"kind": "c"})``.

    ``host`` is the target of the host-side code (only meaningful for device targets such as
    cuda; CPU targets are their own host).
    """

    _scope = threading.local()

    def __init__(self, target, host=None):
        if isinstance(target, Target):
            self.kind, self.attrs = target.kind, dict(target.attrs)
            host = host if host is not None else target.host
        elif isinstance(target, dict):
            self._from_dict(target)
            host = host if host is not None else target.get("host")
        elif isinstance(target, str):
            self._from_str(target)
        else:
            raise TargetError(f"cannot make a Target from {target!r}; pass a string such as 'llvm' or a dict")
        if "keys" not in self.attrs:
            keys = list(_DEVICE_KEYS.get(self.attrs.get("device", ""), []))
            for k in self.kind.default_keys:
                if k not in keys:
                    keys.append(k)
            self.attrs["keys"] = keys
        self.attrs.pop("host", None)
        self.host = None if host is None else Target(host)

    # -- parsing ---------------------------------------------------------------------------
    def _set_kind(self, name: str):
        kind = TARGET_KINDS.get(name)
        if kind is None:
            raise TargetError(
                f"unknown target kind {name!r}; kiln knows {sorted(TARGET_KINDS)} "
                "(e.g. 'llvm -mcpu=core-avx2', 'c', 'cuda')"
            )
        self.kind = kind
        self.attrs: dict = {}

    def _from_str(self, text: str):
        try:
            tokens = shlex.split(text)
        except ValueError as err:
            raise TargetError(f"cannot parse target string {text!r}: {err}") from None
        if not tokens:
            raise TargetError("empty target string; expected e.g. 'llvm' or 'c'")
        self._set_kind(tokens[0])
        for tok in tokens[1:]:
            if not tok.startswith("-"):
                raise TargetError(f"target {text!r}: option {tok!r} should look like -name=value")
            body = tok.lstrip("-")
            key, eq, value = body.partition("=")
            if not eq:
                value = "true"  # a bare flag such as -system-lib
                if self.kind.options.get(key) is not bool:
                    raise TargetError(f"target {text!r}: option -{key} needs a value (-{key}=...)")
            self.attrs[key] = _convert(self.kind, key, value)

    def _from_dict(self, config: dict):
        if "kind" not in config:
            raise TargetError(f"target dict {config!r} has no 'kind' entry")
        self._set_kind(config["kind"])
        for key, value in config.items():
            if key in ("kind", "host"):
                continue
            self.attrs[key] = _convert(self.kind, key, value)

    # -- accessors -------------------------------------------------------------------------
    @property
    def keys(self) -> list:
        return list(self.attrs.get("keys", []))

    @property
    def mcpu(self) -> str:
        return self.attrs.get("mcpu", "")

    @property
    def mattr(self) -> list:
        return list(self.attrs.get("mattr", []))

    @property
    def libs(self) -> list:
        return list(self.attrs.get("libs", []))

    @property
    def model(self) -> str:
        return self.attrs.get("model", "unknown")

    @property
    def device_name(self) -> str:
        return self.attrs.get("device", "")

    @property
    def num_cores(self) -> int:
        if "num-cores" in self.attrs:
            return self.attrs["num-cores"]
        return host_cpu_info().num_cores

    @property
    def opt_level(self) -> int:
        return self.attrs.get("opt-level", 3)

    @property
    def device_type(self) -> int:
        return self.kind.device_type

    def get_kind_attr(self, name: str):
        return getattr(self.kind, name)

    def export(self) -> dict:
        """The target as a dict (``Target.from_config`` reads it back)."""
        out = {"kind": self.kind.name}
        out.update({k: (list(v) if isinstance(v, list) else v) for k, v in self.attrs.items()})
        if self.host is not None:
            out["host"] = self.host.export()
        return out

    @staticmethod
    def from_config(config) -> "Target":
        return Target(config)

    # -- text and equality -----------------------------------------------------------------
    def __str__(self) -> str:
        parts = [self.kind.name, "-keys=" + ",".join(self.keys)]
        for key in sorted(k for k in self.attrs if k != "keys"):
            parts.append(f"-{key}={_format_value(self.attrs[key])}")
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"Target({str(self)!r})" if self.host is None else f"Target({str(self)!r}, host={str(self.host)!r})"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = Target(other)
            except KilnError:
                return False
        return isinstance(other, Target) and str(self) == str(other) and str(self.host) == str(other.host)

    def __hash__(self) -> int:
        return hash(str(self))

    # -- scoping ---------------------------------------------------------------------------
    def __enter__(self) -> "Target":
        stack = getattr(Target._scope, "stack", None)
        if stack is None:
            stack = Target._scope.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc):
        Target._scope.stack.pop()

    @staticmethod
    def current(allow_none: bool = True) -> "Target | None":
        """The innermost target of an enclosing ``with Target(...)`` block."""
        stack = getattr(Target._scope, "stack", None)
        if stack:
            return stack[-1]
        if not allow_none:
            raise TargetError("no target is set: use `with kiln.target.Target('llvm'):` or pass target=")
        return None

    @staticmethod
    def canon_target(target, host=None) -> "Target | None":
        if target is None:
            return None
        return target if isinstance(target, Target) and host is None else Target(target, host)

    @staticmethod
    def list_kinds() -> list:
        return sorted(TARGET_KINDS)


def create(target) -> Target:
    """The pre-0.8 spelling of ``Target(target)``."""
    return Target(target)


def current_target(allow_none: bool = True):
    return Target.current(allow_none)


# -- helpers for common devices (TVM's tvm.target.arm_cpu / x86 ...) ------------------------
_ARM_MODELS = {
    "pixel2": "-model=snapdragon835 -mtriple=arm64-linux-android -mattr=+neon",
    "rasp3b": "-model=bcm2837 -mtriple=armv7l-linux-gnueabihf -mattr=+neon",
    "rasp4b": "-model=bcm2711 -mtriple=armv8l-linux-gnueabihf -mattr=+neon -mcpu=cortex-a72",
    "rasp4b64": "-model=bcm2711 -mtriple=aarch64-linux-gnu -mattr=+neon -mcpu=cortex-a72",
    "rk3399": "-model=rk3399 -mtriple=aarch64-linux-gnu -mattr=+neon",
}


def arm_cpu(model: str = "unknown", options=None) -> Target:
    """An ARM CPU target (parses; kiln builds only for the host CPU today)."""
    extra = _ARM_MODELS.get(model, f"-model={model}")
    text = f"llvm -device=arm_cpu {extra}"
    if options:
        text += " " + (options if isinstance(options, str) else " ".join(options))
    return Target(text)


def x86(mcpu: str | None = None, options=None) -> Target:
    text = "llvm" + (f" -mcpu={mcpu}" if mcpu else "")
    if options:
        text += " " + (options if isinstance(options, str) else " ".join(options))
    return Target(text)


def cuda(model: str = "unknown", arch: str | None = None, options=None) -> Target:
    text = f"cuda -model={model}" + (f" -arch={arch}" if arch else "")
    if options:
        text += " " + (options if isinstance(options, str) else " ".join(options))
    return Target(text)
