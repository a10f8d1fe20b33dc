"""contrib.tar: bundle files into a tar archive and back (TVM's tar / untar)."""
from __future__ import annotations

import os
import tarfile
from typing import Sequence

from ..error import KilnError


def tar(output: str, files: Sequence[str]) -> None:
    """Write ``files`` (flat, by base name) into the tar archive ``output``, atomically."""
    names = [os.path.basename(f) for f in files]
    if len(set(names)) != len(names):
        raise KilnError(f"tar: duplicate file names in {names}")
    tmp = f"{output}.{os.getpid()}.tmp"
    try:
        with tarfile.open(tmp, "w") as tf:
            for path, name in zip(files, names):
                tf.add(path, arcname=name)
        os.replace(tmp, output)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


tar.output_format = "tar"


def untar(tar_file: str, directory: str) -> None:
    """Extract ``tar_file`` into ``directory`` (refusing members that would land outside it)."""
    os.makedirs(directory, exist_ok=True)
    try:
        with tarfile.open(tar_file, "r") as tf:
            tf.extractall(directory, filter="data")
    except tarfile.TarError as err:
        raise KilnError(f"untar: cannot extract {tar_file}: {err}") from None
