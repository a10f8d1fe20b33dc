"""contrib.tar: bundle files into a tar archive and back (TVM's tar / untar)."""
from __future__ import annotations

import os
import tarfile

from ..error import KilnError
from ..runtime.module import write_tar


tar = write_tar  # one home: the runtime writes tar exports itself


def untar(tar_file: str, directory: str) -> None:
    """Extract ``tar_file`` into ``directory`` (refusing members that would land outside it)."""
    os.makedirs(directory, exist_ok=True)
    try:
        with tarfile.open(tar_file, "r") as tf:
            tf.extractall(directory, filter="data")
    except tarfile.TarError as err:
        raise KilnError(f"untar: cannot extract {tar_file}: {err}") from None
