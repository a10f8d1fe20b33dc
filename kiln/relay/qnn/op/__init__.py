"""The QNN dialect's operators (TVM's ``relay.qnn.op``)."""
from .qnn import *  # noqa: F401,F403
from .qnn import __all__  # noqa: F401
from . import arith  # noqa: F401
from ....error import OpNotImplemented
from ...op._define import DEFINED_OPS
from ...op.op import register_strategy
from ....ir.op import Op



def _register_strategies():
    """QNN ops are lowered before op strategies are consulted (CanonicalizeOps); a QNN call that reaches the
    kernel compiler gets a clear error instead of a missing-attribute one."""

    def make(name):
        def fstrategy(attrs, inputs, out_type, target):
            raise OpNotImplemented(f"operator {name} has no kernel of its own: relay.qnn.transform.CanonicalizeOps "
                                   "(which relay.build runs first) lowers it to integer Relay ops")
        fstrategy.__name__ = f"{name.replace('.', '_')}_strategy"
        return fstrategy
    for name in DEFINED_OPS:
        if name.startswith("qnn.") and not Op.get(name).has_attr("FTVMStrategy"):
            register_strategy(name, make(name))


_register_strategies()
