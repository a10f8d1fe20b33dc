"""Global functions for testing RPC servers (TVM's ``rpc.test.*``).

Start a server with ``--server-init=kiln.rpc.testing:register`` to have them in its registry.
"""
from __future__ import annotations

import ctypes
import os
import time
from ..runtime.registry import register_func


def _addone(x):
    return x + 1


def _strcat(name, x):
    return f"{name}:{x}"


def _except(message):
    raise ValueError(message)


def _crash():
    """Die the way a broken kernel does: a segmentation fault."""
    ctypes.string_at(0)
    os.abort()


def _sleep(seconds):
    time.sleep(float(seconds))
    return seconds


def _axpy(x, y, out, alpha):
    """out = alpha * x + y, on NDArrays of the server."""
    out.copyfrom(alpha * x.numpy() + y.numpy())


def _pid():
    return os.getpid()


def _echo(*args):
    return list(args)


def register() -> None:
    """Register the ``rpc.test.*`` functions in this process's global registry."""

    for name, func in {
        "rpc.test.addone": _addone,
        "rpc.test.strcat": _strcat,
        "rpc.test.except": _except,
        "rpc.test.crash": _crash,
        "rpc.test.sleep": _sleep,
        "rpc.test.axpy": _axpy,
        "rpc.test.pid": _pid,
        "rpc.test.echo": _echo,
    }.items():
        register_func(name, func, override=True)
