"""``relay.vm``: the VM compiler entry points (TVM's ``tvm.relay.vm``, an alias of ``relay.backend.vm``)."""
from .backend.vm import VMCompiler, VMExecutor, compile  # noqa: F401,A004
from ..runtime.vm import Executable, VirtualMachine  # noqa: F401
