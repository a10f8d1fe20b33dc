"""TVM's ``tvm.driver.tvmc`` Python API on kiln: the ``kiln`` command's compile / run / tune as functions.

    from kiln.driver import tvmc
    model = tvmc.load("resnet18.onnx")                       # TVMCModel
    log = tvmc.tune(model, target="llvm", trials=100)       # path of the tuning log
    package = tvmc.compile(model, target="llvm", tuning_records=log, package_path="resnet18.so")
    result = tvmc.run(package, device="cpu", benchmark=True) # TVMCResult
    print(result.format_times()); top = result.outputs["output_0"]

The work is done by the same functions as the command line (``kiln.cli``), so both behave alike: same
input rule (inputs must have the model's dtype), same task de-duplication, same code dumps.
"""
from .model import TVMCModel, TVMCPackage, TVMCResult
from .api import compile, load, run, tune  # noqa: A004 - TVM's names

__all__ = ["load", "compile", "run", "tune", "TVMCModel", "TVMCPackage", "TVMCResult"]
