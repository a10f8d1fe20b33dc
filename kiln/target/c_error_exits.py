"""The error exits of a generated C function: what a failing statement must undo before it leaves.

A failed assert, packed call or heap allocation sets the last error, frees the heap buffers live at
that point (innermost first) and returns -1. Inside a parallel loop it cannot return: it records the
failure in the loop's flag (keeping the first message), jumps to the end of the iteration, and the
code after the loop frees the outer buffers and returns -1 (docs/targets.md).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class HeapBuffer:
    """A heap temporary (``kiln_alloc``) that an error exit frees."""
    name: str


@dataclass
class ParallelLoop:
    """The innermost enclosing parallel loop: an error jumps to ``label`` after setting ``flag``
    and copying the message into ``msg``. ``used`` tells the loop to declare the flag and check it."""
    label: str
    flag: str
    msg: str
    used: bool = False

    @classmethod
    def numbered(cls, k: int) -> "ParallelLoop":
        return cls(f"kiln_par_end_{k}", f"kiln_par_failed_{k}", f"kiln_par_msg_{k}")


class ErrorExits:
    """The stack of live heap buffers and enclosing parallel loops, innermost last."""

    def __init__(self):
        self._stack: list = []

    def push(self, entry) -> None:
        self._stack.append(entry)

    def pop(self):
        return self._stack.pop()

    def lines(self, record_failure) -> list[str]:
        """C statements that leave from the current point. ``record_failure()`` gives the name of
        the helper that records a failure inside a parallel loop (asked for only when one is needed)."""
        out = []
        for entry in reversed(self._stack):
            if isinstance(entry, HeapBuffer):
                out.append(f"kiln_free({entry.name});")
                continue
            entry.used = True
            out.append(f"{record_failure()}(&{entry.flag}, {entry.msg});")
            out.append(f"goto {entry.label};")
            return out
        out.append("return -1;")
        return out
