"""``tvmc.load`` / ``compile`` / ``tune`` / ``run``: thin wrappers over the ``kiln`` command's own functions
(``kiln.cli``), with TVM's ``tvm.driver.tvmc`` signatures. Options of TVM's that have no meaning in kiln
(micro, cross compilation, AOT) raise NotImplementedError naming the option."""
from __future__ import annotations

import os

from ...error import KilnError
from .model import TVMCModel, TVMCPackage, TVMCResult
from ...cli.common import InputSpec, load_model
from ...cli.common import LoadedModel, free_inputs
from ...cli.build import parse_dump_formats
from ...cli.cmd_compile import compile_loaded
from ...cli.common import parse_target
from ... import cli
from ...cli.cmd_tune import tune_loaded
from ...cli.cmd_run import VMRunner, load_graph_module
from ...cli.common import check_input_array, random_input
from ...runtime import cpu


def _refuse(func: str, **given) -> None:
    """NotImplementedError for TVM options kiln does not have, when they are set to something non-default."""
    used = [k for k, v in given.items() if v not in (None, False, {}, [], (), "graph", "cpp")]
    if used:
        raise NotImplementedError(f"tvmc.{func}: option(s) {', '.join(used)} are not supported by kiln "
                                  "(graph executor on the host CPU only)")


def load(path: str, shape_dict: dict | None = None, model_format: str | None = None, **kwargs) -> TVMCModel:
    """Import a model file (.onnx, TorchScript .pt, Relay text, or a TVMCModel .tar) into a TVMCModel.
    ``shape_dict``: ``{input name: shape}`` (needed for TorchScript and dynamic ONNX inputs)."""
    if kwargs:
        raise NotImplementedError(f"tvmc.load: frontend options {sorted(kwargs)} are not supported by kiln")
    if path.endswith(".tar") and model_format is None:
        return TVMCModel(model_path=path)
    specs = [InputSpec(n, tuple(int(d) for d in s)) for n, s in (shape_dict or {}).items()]
    model = load_model(path, model_format, specs)
    return TVMCModel(model.mod, model.params)


def _loaded(tvmc_model: TVMCModel):
    if not isinstance(tvmc_model, TVMCModel):
        raise KilnError(f"expected a TVMCModel (from tvmc.load), got {type(tvmc_model).__name__}")
    return LoadedModel(tvmc_model.mod, tvmc_model.params, "relay", "<TVMCModel>",
                       free_inputs(tvmc_model.mod, tvmc_model.params))


def compile(tvmc_model: TVMCModel, target: str = "llvm", opt_level: int = 3, executor=None, runtime=None,  # noqa: A001
            tuning_records: str | None = None, package_path: str | None = None, cross=None, cross_options=None,
            output_format: str = "so", dump_code=None, target_host=None, desired_layout: str | None = None,
            disabled_pass=None, pass_context_configs=None, additional_target_options=None, use_vm: bool = False,
            mod_name: str = "default", workspace_pools=None, instruments=None) -> TVMCPackage:
    """Compile the model for ``target`` and write it to ``package_path`` (default: a temporary
    ``model_package.so``): for the graph executor, or for the Relay VM with ``use_vm=True`` or when an input has
    a dynamic dimension (the package then runs at every size of it; its ``type`` is ``"vm"``); ``dump_code`` (``"c"``, ``"relay"``, ``"tir"`` or a list) also writes
    ``package_path.<format>``. Returns the TVMCPackage."""
    _refuse("compile", executor=executor, runtime=runtime, cross=cross, cross_options=cross_options,
            target_host=target_host, disabled_pass=disabled_pass, pass_context_configs=pass_context_configs,
            additional_target_options=additional_target_options, workspace_pools=workspace_pools,
            instruments=instruments)
    if mod_name != "default":
        raise NotImplementedError("tvmc.compile: mod_name other than 'default' is not supported by kiln")
    if output_format not in ("so", "tar"):
        raise KilnError(f"tvmc.compile: output_format must be 'so' or 'tar', got {output_format!r}")
    path = package_path or tvmc_model.default_package_path()
    if not path.endswith("." + output_format):
        path = os.path.splitext(path)[0] + "." + output_format
    dumps = parse_dump_formats(",".join(dump_code) if isinstance(dump_code, (list, tuple)) else dump_code)
    compile_loaded(_loaded(tvmc_model), parse_target(str(target)), path, opt_level, tuning_records,
                   desired_layout, dumps, use_vm=bool(use_vm))
    return TVMCPackage(path)


def tune(tvmc_model: TVMCModel, target: str = "llvm", tuning_records: str | None = None,
         prior_records: str | None = None, enable_autoscheduler: bool = False, rpc_key: str | None = None,
         hostname: str | None = None, port: int = 9090, trials: int = 10000, target_host=None, tuner: str = "xgb",
         min_repeat_ms: int | None = None, early_stopping: int | None = None, desired_layout: str | None = None,
         timeout: float = 10, repeat: int = 1, number: int = 10, parallel: int = 4, hardware_params=None,
         include_simple_tasks: bool = False, log_estimated_latency: bool = False,
         additional_target_options=None, tasks_filter: str = "all", desired_layout_ops=None,
         mixed_precision: bool = False) -> str:
    """Tune the model's tasks with AutoTVM (duplicates tuned once) and append the records to
    ``tuning_records`` (default: a temporary file); returns that path. ``prior_records`` seeds the tuners."""
    _refuse("tune", enable_autoscheduler=enable_autoscheduler, target_host=target_host,
            hardware_params=hardware_params, include_simple_tasks=include_simple_tasks,
            log_estimated_latency=log_estimated_latency, additional_target_options=additional_target_options,
            desired_layout_ops=desired_layout_ops, mixed_precision=mixed_precision)
    if tasks_filter != "all":
        raise NotImplementedError("tvmc.tune: tasks_filter other than 'all' is not supported by kiln")
    output = tuning_records or tvmc_model.default_tuning_records_path()
    if prior_records and os.path.abspath(prior_records) != os.path.abspath(output):
        with open(prior_records, encoding="utf-8") as src, open(output, "a", encoding="utf-8") as dst:
            dst.write(src.read())
    argv = ["tune", "<model>", "-o", output, "--target", str(target), "--trials", str(trials), "--tuner", tuner,
            "--timeout", str(timeout), "--repeat", str(repeat), "--number", str(number),
            "--parallel", str(parallel), "--min-repeat-ms", str(min_repeat_ms or 0)]
    if early_stopping is not None:
        argv += ["--early-stopping", str(early_stopping)]
    if desired_layout:
        argv += ["--desired-layout", desired_layout]
    if rpc_key:
        argv += ["--rpc-key", rpc_key, "--rpc-tracker", f"{hostname or '127.0.0.1'}:{port}"]
    if prior_records:
        argv += ["--transfer-learning"]
    args = cli.build_parser().parse_args(argv)
    args.model = None
    code = tune_loaded(_loaded(tvmc_model), parse_target(str(target)), args)
    if code != 0:
        raise KilnError(f"tvmc.tune: no valid config was measured for any task; see the log {output}")
    return output


def run(tvmc_package: TVMCPackage, device: str = "cpu", hostname: str | None = None, port: int = 9090,
        rpc_key: str | None = None, inputs: dict | None = None, fill_mode: str = "random", benchmark: bool = False,
        repeat: int = 10, number: int = 10, profile: bool = False, end_to_end: bool = False,
        options=None) -> TVMCResult:
    """Run a compiled package on the local CPU: ``inputs`` ({name: array}) must have the model's shapes and
    dtypes, missing ones are filled (``fill_mode``); ``benchmark`` times ``repeat`` x ``number`` runs;
    ``profile`` prints the per-op table."""
    _refuse("run", hostname=hostname, rpc_key=rpc_key, options=options)
    if device != "cpu":
        raise NotImplementedError(f"tvmc.run: device {device!r}; kiln runs models on the CPU")
    if fill_mode not in ("random", "zeros", "ones"):
        raise KilnError(f"tvmc.run: fill_mode must be random, zeros or ones, got {fill_mode!r}")
    import numpy as np
    path = tvmc_package.package_path if isinstance(tvmc_package, TVMCPackage) else str(tvmc_package)
    lib, gmod = load_graph_module(path)
    if profile and isinstance(gmod, VMRunner):
        raise NotImplementedError("tvmc.run(profile=True) of a VM package: kiln profiles graph-executor "
                                  "packages only")
    shapes, dtypes = gmod.get_input_info()
    unknown = sorted(set(inputs or {}) - set(shapes))
    if unknown:
        raise KilnError(f"tvmc.run: inputs {unknown} are not inputs of the model; its inputs are {list(shapes)}")
    rng = np.random.default_rng(0)
    values = {}
    for name, shape in shapes.items():
        shape, dtype = tuple(int(d) for d in shape), str(dtypes[name])
        if inputs and name in inputs:
            values[name] = check_input_array(name, np.asarray(inputs[name]), shape, dtype, "inputs")
        elif any(d < 0 for d in shape):
            shown = "[" + ", ".join("?" if d < 0 else str(d) for d in shape) + "]"
            raise KilnError(f"tvmc.run: input {name!r} has dynamic dimensions {shown} (a VM package); give its "
                            "value in inputs={...}")
        else:
            values[name] = random_input(shape, dtype, rng, fill_mode)
        gmod.set_input(name, values[name])
    gmod.run()
    outputs = {f"output_{i}": gmod.get_output(i).numpy() for i in range(gmod.get_num_outputs())}
    if profile:
        dbg = lib["debug_create"]("default", cpu(0))
        for name, value in values.items():
            dbg.set_input(name, value)
        print(dbg.profile().table(sort=True, aggregate=True, col_sums=True))
    times = gmod.benchmark(cpu(0), repeat=repeat, number=number, end_to_end=end_to_end) if benchmark else None
    return TVMCResult(outputs, times)
