"""Pre-0.8 spelling of :mod:`kiln.contrib.utils` (``tvm.contrib.util.tempdir()``)."""
from .utils import *  # noqa: F401,F403
from .utils import tempdir, TempDirectory  # noqa: F401
