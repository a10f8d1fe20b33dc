"""Pass instruments: hooks called around every pass run inside a PassContext (TVM's ``tvm.instrument``).

Order of calls: ``enter_pass_ctx`` when the context is entered; per pass, ``should_run`` on every
instrument (skipped for required passes), then ``run_before_pass`` on each, the pass, and
``run_after_pass`` on each; ``exit_pass_ctx`` when the context is left.
"""
from __future__ import annotations

import time


class PassInstrument:
    """Base class: override any of the hooks."""

    @property
    def name(self) -> str:
        return type(self).__name__

    def enter_pass_ctx(self) -> None:
        pass

    def exit_pass_ctx(self) -> None:
        pass

    def should_run(self, mod, info) -> bool:
        return True

    def run_before_pass(self, mod, info) -> None:
        pass

    def run_after_pass(self, mod, info) -> None:
        pass


def pass_instrument(pi_cls=None):
    """Class decorator: make a plain class with (some of) the hook methods a PassInstrument."""
    def create(cls):
        if issubclass(cls, PassInstrument):
            return cls
        return type(cls.__name__, (cls, PassInstrument), {"__doc__": cls.__doc__, "__module__": cls.__module__})

    if pi_cls is not None:
        return create(pi_cls)
    return create


class PassTimingInstrument(PassInstrument):
    """Times every pass; ``PassTimingInstrument.render()`` gives the report of the current context."""

    _last = None

    def __init__(self):
        self.timings: list = []
        self._starts: list = []

    def enter_pass_ctx(self) -> None:
        self.timings = []
        PassTimingInstrument._last = self

    def run_before_pass(self, mod, info) -> None:
        self._starts.append(time.perf_counter())

    def run_after_pass(self, mod, info) -> None:
        start = self._starts.pop()
        self.timings.append((info.name, (time.perf_counter() - start) * 1e6, len(self._starts)))

    @staticmethod
    def render() -> str:
        inst = PassTimingInstrument._last
        if inst is None:
            return ""
        lines = ["Pass timings (us):"]
        for name, us, depth in inst.timings:
            lines.append("  " * (depth + 1) + f"{name}: {us:.0f}us")
        return "\n".join(lines)


class PassPrintingInstrument(PassInstrument):
    """Prints the module before/after the named passes."""

    def __init__(self, print_before_pass_names=(), print_after_pass_names=()):
        self.before = set(print_before_pass_names)
        self.after = set(print_after_pass_names)

    def run_before_pass(self, mod, info) -> None:
        if info.name in self.before:
            print(f"Print IR before: {info.name}\n{mod}\n")

    def run_after_pass(self, mod, info) -> None:
        if info.name in self.after:
            print(f"Print IR after: {info.name}\n{mod}\n")


class PrintBeforeAll(PassInstrument):
    def run_before_pass(self, mod, info) -> None:
        print(f"Before Running Pass: {info}\n{mod}\n")


class PrintAfterAll(PassInstrument):
    def run_after_pass(self, mod, info) -> None:
        print(f"After Running Pass: {info}\n{mod}\n")
