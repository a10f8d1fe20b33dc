"""The ``dyn`` operator namespace (TVM's ``relay.op.dyn``): ops whose shape operands are run-time tensors.

Their type relations give ``relay.Any()`` for every dimension a run-time value decides; their shape
functions are data-dependent (kiln/runtime/vm_shape_funcs.py, run by the VM on the host before the kernel's
output is allocated); their kernels are computed over symbolic output extents. ``relay.reshape(x, expr)``
and friends dispatch here when the shape is an expression; ``relay.transform.DynamicToStatic`` turns calls
whose shape operands became constants back into the static ops. See docs/vm.md.
"""
from . import _transform, _tensor, _algorithm, nn, image  # noqa: F401
from ._transform import *  # noqa: F401,F403
from ._tensor import *  # noqa: F401,F403
from ._algorithm import *  # noqa: F401,F403
