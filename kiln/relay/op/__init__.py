"""The Relay operator library (TVM's ``relay.op``): constructors, attrs schemas and per-op registrations.

Importing this package registers every op: type relation, ``TOpPattern``, numpy reference (``FReference``),
TOPI compute (``FTVMCompute``) and strategy (``FTVMStrategy``).
"""
from . import type_relations, op_attrs  # noqa: F401
from .op import *  # noqa: F401,F403
from .op import __all__ as _op_all
from . import tensor, reduce, transform, shape, algorithm, indexing  # noqa: F401
from .tensor import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .transform import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403
from .algorithm import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .scatter import scatter_elements  # noqa: F401
from .scatter_nd import scatter_nd  # noqa: F401
from .collapse import collapse_sum_to  # noqa: F401
from . import nn, image, vision, strategy  # noqa: F401
from . import arg_types  # noqa: F401  (FInferArgTypes hooks; needs the nn ops registered)
from . import annotation, compat_ops  # noqa: F401  (relay.annotation; strided_set, mean_variance)
from .compat_ops import *  # noqa: F401,F403
from . import dyn  # noqa: F401  (the dyn.* ops: shape operands known at run time)
from . import _schedules

_schedules.register_all()
from . import shape_func  # noqa: F401,E402  (shape functions of the op families, for relay.Any on the VM)
from . import _tensor_grad  # noqa: F401,E402  (FPrimalGradient of the ops, for relay.transform.gradient)

__all__ = (list(_op_all) + list(tensor.__all__) + list(reduce.__all__) + list(transform.__all__) + list(shape.__all__)
           + list(algorithm.__all__) + list(indexing.__all__)
           + list(compat_ops.__all__) + ["scatter_elements", "scatter_nd", "collapse_sum_to", "nn", "image", "vision", "strategy", "op_attrs", "annotation", "dyn"])
