"""Test helpers with TVM's ``tvm.testing`` API: numeric checks, target selection, parameters, markers."""
from .utils import assert_allclose, check_numerical_grads, main
from .targets import (DEFAULT_TEST_TARGETS, Feature, device_enabled, enabled_targets, exclude_targets,
                      known_failing_targets, parametrize_targets, requires_cublas, requires_cuda,
                      requires_cudagraph, requires_cudnn, requires_gpu, requires_hexagon, requires_llvm,
                      requires_metal, requires_micro, requires_nvptx, requires_opencl, requires_package,
                      requires_rocm, requires_rpc, requires_tensorcore, requires_vulkan, requires_x86,
                      skip_if_32bit, slow, target_marks, uses_gpu)
from .cpu_features import *  # noqa: F401,F403  (requires_cascadelake, requires_x86_vnni, ...)
from .spans import enable_span_filling, disable_span_filling


def __getattr__(name):
    # pytest is needed only by the fixture helpers; importing kiln.testing must not require it.
    if name in ("parameter", "parameters", "fixture"):
        from . import params
        return getattr(params, name)
    raise AttributeError(f"module 'kiln.testing' has no attribute {name!r}")
