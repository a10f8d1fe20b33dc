"""contrib.utils: temporary directories (TVM's tempdir) and small file helpers."""
from __future__ import annotations

import os
import shutil
import tempfile


class TempDirectory:
    """A directory removed when the object is released (unless kept for debugging)."""

    _KEEP_FOR_DEBUG = False

    def __init__(self, custom_path: str | None = None, keep_for_debug: bool | None = None):
        self._keep = self._KEEP_FOR_DEBUG if keep_for_debug is None else bool(keep_for_debug)
        if custom_path is not None:
            self._owned = not os.path.exists(custom_path)
            os.makedirs(custom_path, exist_ok=True)
            self.temp_dir = os.path.abspath(custom_path)
        else:
            self._owned = True
            self.temp_dir = tempfile.mkdtemp(prefix="kiln-")

    @classmethod
    def set_keep_for_debug(cls, keep: bool = True) -> None:
        cls._KEEP_FOR_DEBUG = keep

    @property
    def path(self) -> str:
        return self.temp_dir

    def relpath(self, name: str) -> str:
        return os.path.join(self.temp_dir, name)

    def listdir(self) -> list:
        return os.listdir(self.temp_dir)

    def remove(self) -> None:
        if self.temp_dir and self._owned and not self._keep:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
        self.temp_dir = None if not self._keep else self.temp_dir

    def __enter__(self) -> "TempDirectory":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def __del__(self):
        try:
            self.remove()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self) -> str:
        return f"TempDirectory({self.temp_dir!r})"


def tempdir(custom_path: str | None = None, keep_for_debug: bool | None = None) -> TempDirectory:
    return TempDirectory(custom_path, keep_for_debug)


def which(exec_name: str) -> str | None:
    return shutil.which(exec_name)


def is_source_path(path) -> bool:
    path = str(path)
    return os.path.exists(path) and os.path.isfile(path) or path.endswith((".c", ".cc", ".cpp", ".h"))
