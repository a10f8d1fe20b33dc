"""``TVMCModel`` (a Relay module and its params), ``TVMCPackage`` (a compiled model file) and ``TVMCResult``
(outputs and times of a run), as in TVM's ``tvm.driver.tvmc.model``."""
from __future__ import annotations

import os
import tarfile
import tempfile

import numpy as np

from ...error import KilnError
from ... import parser
from ...relay.param_dict import load_param_dict, save_param_dict
from ...relay.transform import InferType
from ...runtime.module import load_module
from ...cli.cmd_run import is_vm_module, format_times


class TVMCModel:
    """A model imported into Relay. ``TVMCModel(mod, params)``, or ``TVMCModel(model_path=...)`` for a file
    written by :meth:`save` (a .tar holding ``model.txt``, the Relay text, and ``model.params``)."""

    def __init__(self, mod=None, params=None, model_path: str | None = None):
        if (mod is None) == (model_path is None):
            raise KilnError("TVMCModel needs either mod (with params) or model_path, not both and not neither")
        if model_path is not None:
            mod, params = self._read(model_path)
        self.mod = mod
        self.params = dict(params or {})
        self._tmp = None

    @staticmethod
    def _read(path: str):
        if not os.path.isfile(path):
            raise KilnError(f"TVMCModel: {path!r} does not exist")
        try:
            with tarfile.open(path) as tar:
                text = tar.extractfile("model.txt").read().decode("utf-8")
                blob = tar.extractfile("model.params").read()
        except (tarfile.TarError, KeyError, AttributeError) as err:
            raise KilnError(f"TVMCModel: {path} is not a model saved by TVMCModel.save ({err})") from None
        return InferType()(parser.parse(text, source_name=path)), load_param_dict(blob)

    def save(self, model_path: str) -> str:
        """Write the Relay text and the params into one .tar that ``TVMCModel(model_path=...)`` reads back."""
        with tempfile.TemporaryDirectory() as tmp:
            for name, data in (("model.txt", self.mod.astext().encode("utf-8")),
                               ("model.params", bytes(save_param_dict(self.params)))):
                with open(os.path.join(tmp, name), "wb") as f:
                    f.write(data)
            with tarfile.open(model_path, "w") as tar:
                for name in ("model.txt", "model.params"):
                    tar.add(os.path.join(tmp, name), arcname=name)
        return model_path

    def default_package_path(self) -> str:
        """A temporary ``model_package.so`` (TVM's default when no package_path is given)."""
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kiln_tvmc_")
        return os.path.join(self._tmp.name, "model_package.so")

    def default_tuning_records_path(self) -> str:
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kiln_tvmc_")
        return os.path.join(self._tmp.name, "tuning_records")

    def summary(self, file=None) -> None:
        """Print the Relay program."""
        print(self.mod.astext(), file=file)

    def __repr__(self) -> str:
        return f"TVMCModel({len(self.params)} params)"


class TVMCPackage:
    """A compiled model file (``.so``/``.tar`` from ``tvmc.compile`` or ``kiln compile``)."""

    def __init__(self, package_path: str, project_dir=None):
        if project_dir is not None:
            raise NotImplementedError("TVMCPackage(project_dir=...): microTVM projects are not part of kiln")
        if not os.path.isfile(package_path):
            raise KilnError(f"TVMCPackage: {package_path!r} does not exist; compile the model first")
        self.package_path = package_path
        self.lib_path = package_path
        self.type = "classic"
        lib = load_module(package_path)
        if is_vm_module(lib):  # a VM executable (a model with dynamic dims, or use_vm=True): TVM's type "vm"
            self.type = "vm"
            self.graph, self.params = None, {}
            return
        self.graph = lib["get_graph_json"]()
        self.params = lib["get_params"]()

    def __repr__(self) -> str:
        return f"TVMCPackage({self.package_path!r})"


class TVMCResult:
    """Outputs (``{"output_0": array, ...}``) and, when timed, the ``BenchmarkResult`` of one ``tvmc.run``."""

    def __init__(self, outputs: dict, times=None):
        self.outputs = outputs
        self.times = times

    def format_times(self) -> str:
        """TVM's execution time summary (mean / median / max / min / std in ms)."""
        if self.times is None:
            return "no times: run with benchmark=True"
        return format_times(self.times)

    def get_output(self, name: str) -> np.ndarray:
        if name not in self.outputs:
            raise KilnError(f"no output named {name!r}; the outputs are {list(self.outputs)}")
        return self.outputs[name]

    def save(self, output_path: str) -> str:
        """The outputs as an .npz (``output_0``, ...), as ``kiln run -o`` writes them."""
        np.savez(output_path, **self.outputs)
        return output_path

    def __str__(self) -> str:
        lines = [f"{k}: shape {list(v.shape)} {v.dtype}" for k, v in self.outputs.items()]
        if self.times is not None:
            lines.append(self.format_times())
        return "\n".join(lines)
