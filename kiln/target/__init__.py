"""kiln.target: Target parsing, host CPU facts, C code generation and the CPU build backends."""
from .target import Target, TargetKind, TargetError, create, current_target, arm_cpu, cuda, x86 as x86_target
from . import x86
from .flags import target_cflags
from .generic_func import GenericFunc, generic_func, override_native_generic_func, get_native_generic_func
from .c_module import create_c_module  # also registers the runtime's compiler-side export steps
from . import build_c as _build_c  # registers target.build.c / target.build.llvm  # noqa: F401
from . import vector_math as _vector_math  # float32 erf / tanh lowered to vector C helpers  # noqa: F401
from .codegen_c import CodeGenC, codegen_c
from .virtual_device import VirtualDevice

__all__ = ["Target", "TargetKind", "TargetError", "create", "current_target", "arm_cpu", "cuda", "x86",
           "target_cflags", "CodeGenC", "codegen_c", "VirtualDevice", "GenericFunc", "generic_func",
           "override_native_generic_func", "get_native_generic_func", "create_c_module"]
