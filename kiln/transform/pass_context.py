"""PassContext: the settings passes run under (opt level, required/disabled passes, config, instruments)."""
from __future__ import annotations

import threading

from ..error import KilnError
from ..ir.instrument import PassInstrument
from .config import list_configs, validate_config

_STATE = threading.local()


def _stack() -> list:
    st = getattr(_STATE, "stack", None)
    if st is None:
        st = _STATE.stack = []
    return st


class PassInstrumentError(KilnError):
    """A pass instrument's hook raised; the original exception is chained as ``__cause__``."""


def _call_hook(inst, hook: str, *args):
    """Run ``inst.<hook>(*args)``; a non-kiln exception becomes a PassInstrumentError (TVM reports it as a
    TVMError, so scripts catch it with ``except tvm.TVMError``), naming the instrument and the hook."""
    try:
        return getattr(inst, hook)(*args)
    except KilnError:
        raise
    except Exception as err:
        name = getattr(inst, "name", type(inst).__name__)
        raise PassInstrumentError(f"pass instrument {name}.{hook} raised {type(err).__name__}: {err}") from err


class PassContext:
    """``with PassContext(opt_level=3, disabled_pass=["FoldConstant"], config={...}): ...``"""

    def __init__(self, opt_level: int = 2, required_pass=None, disabled_pass=None, instruments=None,
                 config=None, trace=None, trace_stack=None, make_traceable=None, num_evals=0,
                 tuning_api_database=None):
        if not isinstance(opt_level, int) or isinstance(opt_level, bool):
            raise KilnError(f"PassContext opt_level must be an int, got {opt_level!r}")
        self.opt_level = opt_level
        self.required_pass = _names(required_pass, "required_pass")
        self.disabled_pass = _names(disabled_pass, "disabled_pass")
        self.instruments = list(instruments or [])
        for inst in self.instruments:
            if not isinstance(inst, PassInstrument):
                raise KilnError(
                    f"PassContext instruments must be PassInstrument objects (use @pass_instrument), got {inst!r}"
                )
        self.config = validate_config(config)
        self.trace = trace
        self._entered: list = []

    # -- context manager ---------------------------------------------------------------------------
    def __enter__(self) -> "PassContext":
        self._enter_instruments()
        _stack().append(self)
        return self

    def __exit__(self, *exc) -> None:
        st = _stack()
        if st and st[-1] is self:
            st.pop()
        self._exit_instruments()

    def _enter_instruments(self) -> None:
        self._entered = []
        try:
            for inst in self.instruments:
                _call_hook(inst, "enter_pass_ctx")
                self._entered.append(inst)
        except Exception:
            # leave the ones already entered, then drop all instruments (as TVM does)
            for inst in reversed(self._entered):
                try:
                    _call_hook(inst, "exit_pass_ctx")
                except Exception:  # pragma: no cover - best effort clean-up
                    pass
            self._entered = []
            self.instruments = []
            raise

    def _exit_instruments(self) -> None:
        entered, self._entered = self._entered, []
        first_error = None
        for inst in entered:
            try:
                _call_hook(inst, "exit_pass_ctx")
            except Exception as err:  # keep exiting the others
                first_error = first_error or err
        if first_error is not None:
            self.instruments = []
            raise first_error

    def override_instruments(self, instruments) -> None:
        """Replace the instruments of this (entered) context: exit the old ones, enter the new."""
        self._exit_instruments()
        self.instruments = list(instruments or [])
        self._enter_instruments()

    @staticmethod
    def current() -> "PassContext":
        """The innermost entered context, or this thread's default one (opt_level=2).

        The default context is one object (as in TVM), so ``PassContext.current().override_instruments(...)``
        outside any ``with`` instruments the passes run afterwards.
        """
        st = _stack()
        if st:
            return st[-1]
        default = getattr(_STATE, "default", None)
        if default is None:
            default = _STATE.default = PassContext()
        return default

    @staticmethod
    def list_configs() -> dict:
        return list_configs()

    # -- queries -----------------------------------------------------------------------------------
    def pass_enabled(self, info) -> bool:
        """Whether a pass runs inside a Sequential: disabled never, required always, else by opt level."""
        if info.name in self.disabled_pass:
            return False
        if info.name in self.required_pass:
            return True
        return self.opt_level >= info.opt_level

    def instrument_before_pass(self, mod, info) -> bool:
        if not self.instruments:
            return True
        should_run = True
        if info.name not in self.required_pass:
            for inst in self.instruments:
                should_run = bool(_call_hook(inst, "should_run", mod, info)) and should_run
        if should_run:
            for inst in self.instruments:
                _call_hook(inst, "run_before_pass", mod, info)
        return should_run

    def instrument_after_pass(self, mod, info) -> None:
        for inst in self.instruments:
            _call_hook(inst, "run_after_pass", mod, info)

    def get_config(self, key: str, default=None):
        return self.config.get(key, default)

    def __repr__(self) -> str:
        return (f"PassContext(opt_level={self.opt_level}, required_pass={sorted(self.required_pass)}, "
                f"disabled_pass={sorted(self.disabled_pass)}, config={self.config})")


def _names(value, what: str) -> list:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    out = list(value)
    for v in out:
        if not isinstance(v, str):
            raise KilnError(f"PassContext {what} must list pass names (strings), got {v!r}")
    return out
