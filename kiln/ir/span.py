"""Source locations: where a node came from (a text file, a frontend graph node)."""
from __future__ import annotations

from .node import Node


class SourceName(Node):
    """The name of a source (a file name, ``"from_string"``, a frontend's model name)."""

    _fields = ("name",)

    def __init__(self, name: str):
        self.name = str(name)

    def __repr__(self) -> str:
        return f"SourceName({self.name!r})"


class Span(Node):
    """A region of a source. Spans are never compared structurally (they ride along on nodes)."""

    _fields = ()

    def __init__(self, source_name, line: int, column: int, end_line: int | None = None,
                 end_column: int | None = None):
        if isinstance(source_name, str):
            source_name = SourceName(source_name)
        self.source_name = source_name
        self.line = int(line)
        self.column = int(column)
        self.end_line = int(end_line if end_line is not None else line)
        self.end_column = int(end_column if end_column is not None else column)

    def __repr__(self) -> str:
        name = self.source_name.name if self.source_name is not None else "?"
        return f"{name}:{self.line}:{self.column}"

    __str__ = __repr__
