"""kiln.topi: operator compute definitions in TE and their schedules (TVM's ``tvm.topi``).

``topi.add(a, b)``, ``topi.nn.conv2d_nchw(...)``, ``topi.generic.schedule_injective(outs)``.
Numpy references of every op live in :mod:`kiln.topi.testing`.
"""
from . import tag, utils
from .math import *  # noqa: F401,F403
from .math import abs, round  # noqa: F401,A004 - shadows builtins on purpose, as TVM's topi does
from .broadcast import *  # noqa: F401,F403
from .broadcast import broadcast_to  # noqa: F401
from .reduction import sum, max, min, prod, all, any, argmax, argmin, mean, variance, std  # noqa: F401,A004
from .transform import *  # noqa: F401,F403
from .scan import cumsum, cumprod, scanop  # noqa: F401
from .sort import argsort, sort, topk  # noqa: F401
from .scatter_elements import scatter_elements  # noqa: F401
from .scatter_nd import scatter_nd  # noqa: F401
from .shape_ops import collapse_sum, ndarray_size, slice_like  # noqa: F401
from . import nn, image, vision, generic, testing  # noqa: F401
from .nn.dilate import dilate  # noqa: F401
from . import x86  # noqa: F401,E402  (registers the "cpu" implementations of topi.generic's schedules)

_LAZY_SUBPACKAGES = ("cuda", "gpu")  # imported on first use (x86 is imported above: it registers "cpu" schedules)
_NOT_BUILT = {"rocm": "ROCm", "arm_cpu": "ARM CPU", "mali": "Mali", "bifrost": "Bifrost",
              "intel_graphics": "Intel graphics", "adreno": "Adreno", "hls": "HLS", "vulkan": "Vulkan"}


def __getattr__(name):
    """``topi.cuda``/``topi.gpu`` load on first use; a target folder kiln does not have gets a message naming
    what exists."""
    if name in _LAZY_SUBPACKAGES:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    if name in _NOT_BUILT:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}: {_NOT_BUILT[name]} schedules are not "
                             f"built in kiln (CPU targets only); use topi.x86 or topi.generic schedules with "
                             f"target 'llvm'")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
