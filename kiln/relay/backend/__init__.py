"""Relay backends (TVM's ``relay.backend``): the reference interpreter, the executor factory, and the
build options ``Executor("graph")`` / ``Runtime("cpp")``.

As in TVM, ``relay.backend.Executor`` is the *build option*; the base class of the
``create_executor`` kinds is ``relay.backend.executor.Executor``.
"""
from .executor import create_executor, register_executor, list_executor_kinds  # noqa: F401
from .interpreter import Interpreter, Closure, ADT  # noqa: F401
from . import executor, interpreter, te_compiler  # noqa: F401
from ..executor import Executor  # noqa: F401,E402
from ..runtime import Runtime  # noqa: F401,E402
from . import _backend  # noqa: F401,E402  (TVM-era code reaches relay.backend._backend after importing relay)
