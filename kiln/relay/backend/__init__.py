"""Relay backends (TVM's ``relay.backend``): the reference interpreter and the executor factory."""
from .executor import Executor, create_executor, register_executor, list_executor_kinds  # noqa: F401
from .interpreter import Interpreter, Closure, ADT  # noqa: F401
from . import executor, interpreter, te_compiler  # noqa: F401
