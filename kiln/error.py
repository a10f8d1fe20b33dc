"""kiln's error hierarchy: every error kiln raises on purpose is a KilnError.

Messages say what was wrong, where (op, argument, node), and what would be right.
"""


class KilnError(RuntimeError):
    """Base class of all errors kiln raises deliberately."""


# TVM spells the base error TVMError; scripts catch it by that name.
TVMError = KilnError


class InternalError(KilnError):
    """A bug in kiln itself: an invariant that should always hold did not."""


class DataTypeError(KilnError, TypeError):
    """An unknown dtype string, or dtypes that do not fit together."""


class ScheduleError(KilnError):
    """An invalid schedule primitive (e.g. splitting an axis of another stage)."""


class LoweringError(KilnError):
    """A TE schedule or TIR program could not be lowered."""


class CompileError(KilnError):
    """The system compiler rejected generated code.

    Carries the compiler's message and the path of the source that was kept for inspection.
    """

    def __init__(self, message: str, source_path: str | None = None, compiler_output: str = ""):
        self.source_path = source_path
        self.compiler_output = compiler_output
        super().__init__(message)


class ArgumentError(KilnError, ValueError):
    """A compiled function or executor was called with arguments that do not match what it expects."""


class DeviceError(KilnError):
    """An unknown or unavailable device."""


class ModuleLoadError(KilnError):
    """A compiled artifact could not be loaded (missing, truncated or corrupt)."""


class RelayError(KilnError):
    """Base class for errors in the Relay graph IR."""


class TypeInferenceError(RelayError, TypeError):
    """Type inference failed: names the op, shows the call, and says what clashed."""


class ParseError(KilnError, SyntaxError):
    """Text that does not parse; the message points at the line and column."""

    def __init__(self, message: str = "", *args):
        super().__init__(message, *args)
        self.msg = message

    def __str__(self) -> str:
        return str(self.msg)


class OpNotImplemented(KilnError, NotImplementedError):
    """An operator (or a feature of one) that kiln does not implement yet."""


class FrontendError(KilnError):
    """A model from a frontend could not be imported."""


class RPCError(KilnError):
    """A failure in the RPC layer (tracker, server or session)."""
