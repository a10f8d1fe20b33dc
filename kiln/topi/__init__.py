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
from . import nn, image, generic, testing  # noqa: F401
from .nn.dilate import dilate  # noqa: F401
