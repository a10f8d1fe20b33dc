"""Data layout strings as TVM writes them ("NCHW", "NHWC", "NCHW8c", "OIHW4i8o"): the one parser.

Upper-case letters are primal axes; a lower-case letter with a factor (``8c``) is a sub-axis that
splits its primal axis. Type relations, layout passes and the numpy references all parse with this.
"""
from __future__ import annotations

import re

from ..error import KilnError

_TOKEN = re.compile(r"(\d*)([A-Za-z])")


def parse_layout(layout: str, error=KilnError) -> list:
    """``"NCHW8c"`` -> ``[("N", None), ("C", None), ("H", None), ("W", None), ("c", 8)]``.

    Raises ``error`` (a KilnError subclass chosen by the caller) on a malformed layout."""
    pos, axes = 0, []
    for m in _TOKEN.finditer(layout):
        if m.start() != pos:
            break
        pos = m.end()
        digits, letter = m.groups()
        if letter.isupper():
            if digits:
                raise error(f"layout {layout!r}: primal axis {letter} cannot carry a factor")
            axes.append((letter, None))
        else:
            if not digits or int(digits) <= 0:
                raise error(f"layout {layout!r}: sub-axis {letter} needs a positive factor (e.g. 8{letter})")
            axes.append((letter, int(digits)))
    if pos != len(layout) or not axes:
        raise error(f"cannot parse layout {layout!r}; expected e.g. 'NCHW', 'NHWC' or 'NCHW8c'")
    names = [a for a, _ in axes]
    if len(set(names)) != len(names):
        raise error(f"layout {layout!r} repeats an axis")
    for name, _ in axes:
        if name.islower() and name.upper() not in names:
            raise error(f"layout {layout!r}: sub-axis {name} has no primal axis {name.upper()}")
    return axes
