import importlib.util

import pytest



def _build_skip_reason():
    from kiln.testing.targets import _have_c_compiler
    if not _have_c_compiler():
        return "compiling with kiln.build needs a C compiler, and none is installed"
    if importlib.util.find_spec("kiln.driver.build_module") is None:
        return "kiln.build (kiln/driver/build_module.py) does not exist yet"
    return None


@pytest.fixture(params=["interp", pytest.param("llvm", marks=pytest.mark.slow)])
def backend(request):
    """Where TE kernels run: the TIR reference interpreter, or compiled with kiln.build."""
    if request.param == "llvm":
        reason = _build_skip_reason()
        if reason:
            pytest.skip(reason)
        return "llvm"
    return None
