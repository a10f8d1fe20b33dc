"""TopHub: TVM downloads pre-tuned logs from the network here. kiln never touches the network, so
:func:`context` only applies logs that are already on disk (``extra_files``, and ``*.log`` files in
``$KILN_TOPHUB_DIR`` if set); with none it changes nothing."""
from __future__ import annotations

import glob
import os

from .task.dispatcher import ApplyHistoryBest
from .utils import EmptyContext
from .record import load_from_file


def context(target, extra_files=None):
    """A dispatch context with locally available tuned logs for ``target`` (no download)."""
    files = list(extra_files or [])
    local_dir = os.environ.get("KILN_TOPHUB_DIR")
    if local_dir and os.path.isdir(local_dir):
        files += sorted(glob.glob(os.path.join(local_dir, "*.log")))
    if not files:
        return EmptyContext()
    return ApplyHistoryBest(files)


def check_backend(tophub_location, backend) -> bool:
    """Never downloads: reports whether a local log for ``backend`` exists."""
    local_dir = os.environ.get("KILN_TOPHUB_DIR")
    return bool(local_dir and glob.glob(os.path.join(local_dir, f"{backend}*.log")))


def load_reference_log(backend, model, workload_name, template_key=None) -> list:
    """Reference records for fallback configs: none without a local TopHub directory."""
    local_dir = os.environ.get("KILN_TOPHUB_DIR")
    if not local_dir:
        return []
    out = []
    for path in sorted(glob.glob(os.path.join(local_dir, f"{backend}*.log"))):
        for inp, res in load_from_file(path):
            if inp.task.name == workload_name and (model == "unknown" or inp.target.model == model):
                out.append((inp, res))
    return out
