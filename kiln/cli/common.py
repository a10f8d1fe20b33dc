"""Shared pieces of the ``kiln`` subcommands: the CLI error type, ``--input-shapes`` parsing, model loading
(ONNX, TorchScript, Relay text) and target parsing."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np

from ..error import KilnError, OpNotImplemented
from ..target import Target
from .. import runtime

MODEL_FORMATS = ("onnx", "pytorch", "relay")
CPU_TARGET_KINDS = ("llvm", "c")
_EXTENSIONS = {".onnx": "onnx", ".pt": "pytorch", ".pth": "pytorch", ".torchscript": "pytorch", ".ts": "pytorch",
               ".txt": "relay", ".relay": "relay", ".rly": "relay"}


class CLIError(KilnError):
    """A mistake in what the user asked the ``kiln`` command to do (bad flag value, missing file, ...)."""


@dataclass
class InputSpec:
    """One ``--input-shapes`` entry: name, static shape, optional dtype."""

    name: str
    shape: tuple
    dtype: str | None = None


@dataclass
class LoadedModel:
    """A model file turned into Relay: the module, its params and where it came from."""

    mod: object
    params: dict
    fmt: str
    path: str
    inputs: list = field(default_factory=list)   # [(name, shape, dtype)] of @main's free inputs


_DTYPES = {"float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "uint16",
           "uint32", "uint64", "bool"}


def _split_entries(text: str) -> list:
    """Split ``a:1x3,b:[1,2]`` on commas/spaces that are not inside brackets."""
    entries, depth, cur = [], 0, []
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if (ch in ", \t" and depth == 0):
            if cur:
                entries.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    if depth != 0:
        raise CLIError(f"--input-shapes {text!r}: unbalanced brackets")
    if cur:
        entries.append("".join(cur))
    return entries


def _parse_dims(dims: str, entry: str) -> tuple:
    dims = dims.strip()
    if dims.startswith(("[", "(")) and dims.endswith(("]", ")")):
        parts = [p.strip() for p in dims[1:-1].split(",") if p.strip()]
    elif dims == "":
        parts = []
    else:
        parts = dims.lower().split("x")
    shape = []
    for p in parts:
        p = p.strip()
        if p == "?" or re.fullmatch(r"-\d+", p):  # tvmc: a negative dimension is unknown (relay.Any)
            shape.append(UNKNOWN_DIM)
            continue
        if not re.fullmatch(r"\d+", p):
            raise CLIError(f"--input-shapes entry {entry!r}: dimension {p!r} is not an integer; write shapes as "
                           "NAME:1x3x224x224 or NAME:[1,3,224,224] (-1 or ? for a dimension left dynamic)")
        shape.append(int(p))
    return tuple(shape)


UNKNOWN_DIM = -1  # an --input-shapes dimension given as -1 or ?: compiled for the VM


def has_unknown_dims(specs: list) -> list:
    """Names of the specs with a dimension left dynamic (-1 / ?)."""
    return [s.name for s in specs if any(d == UNKNOWN_DIM for d in s.shape)]


def require_static_shapes(specs: list, command: str) -> None:
    """``kiln tune``/``bench`` measure one shape: refuse -1 / ? dimensions with the fix."""
    names = has_unknown_dims(specs)
    if names:
        raise CLIError(f"--input-shapes leaves input(s) {names} dynamic (-1 or ?); `kiln {command}` measures one "
                       "shape, so give every dimension a size")


def _any_dims(shape, names=None) -> tuple:
    """An --input-shapes shape for a frontend: -1 becomes the model's own name for that dim (ONNX dim_param,
    so inputs sharing it stay equal) or relay.Any()."""
    from ..tir.expr import Any  # lazy: kiln.tir is part of the compiler
    out = []
    for k, d in enumerate(shape):
        if d != UNKNOWN_DIM:
            out.append(d)
        elif names is not None and k < len(names) and isinstance(names[k], str) and names[k] != "?":
            out.append(names[k])
        else:
            out.append(Any())
    return tuple(out)


def parse_input_shapes(text: str | None) -> list:
    """``"data:1x3x224x224,mask:[1,128]:int64"`` -> [InputSpec]. The dtype suffix is optional;
    a scalar is ``NAME:[]``."""
    if text is None:
        return []
    specs, seen = [], set()
    for entry in _split_entries(text):
        name, sep, rest = entry.partition(":")
        if not sep or not name:
            raise CLIError(f"--input-shapes entry {entry!r} is not NAME:SHAPE; write e.g. "
                           "data:1x3x224x224 (several entries separated by commas)")
        dims, dtype = rest, None
        head, sep2, tail = rest.rpartition(":")
        if sep2 and tail in _DTYPES:
            dims, dtype = head, tail
        elif sep2:
            raise CLIError(f"--input-shapes entry {entry!r}: unknown dtype {tail!r}; expected one of "
                           f"{sorted(_DTYPES)}")
        if name in seen:
            raise CLIError(f"--input-shapes names input {name!r} twice")
        seen.add(name)
        specs.append(InputSpec(name, _parse_dims(dims, entry), dtype))
    if not specs:
        raise CLIError("--input-shapes is empty; write e.g. data:1x3x224x224")
    return specs


def detect_format(path: str, fmt: str | None) -> str:
    if fmt:
        if fmt not in MODEL_FORMATS:
            raise CLIError(f"--model-format {fmt!r} is not one of {', '.join(MODEL_FORMATS)}")
        return fmt
    ext = os.path.splitext(path)[1].lower()
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    if ext == ".so" or ext == ".tar":
        raise CLIError(f"{path} is a compiled module, not a model; use `kiln run {path}`")
    raise CLIError(f"cannot tell the format of {path!r} from its extension {ext or '(none)'}; use .onnx, "
                   ".pt (TorchScript), .txt/.relay (Relay text), or pass --model-format "
                   f"{{{','.join(MODEL_FORMATS)}}}")


def check_file(path: str, what: str = "model file") -> str:
    if not os.path.exists(path):
        raise CLIError(f"{what} {path!r} does not exist")
    if not os.path.isfile(path):
        raise CLIError(f"{what} {path!r} is not a file")
    return path


def parse_target(text: str):
    """A kiln Target for the host CPU from a string, with a CLI-friendly error."""
    try:
        target = Target(text)
    except KilnError as err:
        raise CLIError(f"--target {text!r}: {err}") from None
    if target.kind.name not in CPU_TARGET_KINDS:
        raise CLIError(f"--target {text!r}: kiln compiles models for the host CPU only (target kinds "
                       f"{', '.join(CPU_TARGET_KINDS)}, e.g. 'llvm -mcpu=core-avx2'); {target.kind.name!r} "
                       "is not supported for whole models yet")
    return target


def load_model(path: str, fmt: str | None = None, input_shapes: list | None = None,
               params_path: str | None = None) -> LoadedModel:
    """Read a model file into (Relay module, params)."""
    check_file(path)
    fmt = detect_format(path, fmt)
    specs = input_shapes or []
    if fmt == "onnx":
        mod, params = _load_onnx(path, specs)
    elif fmt == "pytorch":
        mod, params = _load_pytorch(path, specs)
    else:
        mod, params = _load_relay(path, specs, params_path)
    return LoadedModel(mod, params, fmt, path, free_inputs(mod, params))


def free_inputs(mod, params) -> list:
    """[(name, shape, dtype)] of @main's parameters that are not bound by ``params``."""
    from ..relay import transform as T  # lazy: heavy compiler package (fast `kiln --help`)
    mod = T.InferType()(mod)
    out = []
    for p in mod["main"].params:
        if p.name_hint in (params or {}):
            continue
        ty = p.checked_type
        shape = tuple(int(getattr(d, "value", d)) if _is_static(d) else -1 for d in getattr(ty, "shape", ()))
        out.append((p.name_hint, shape, getattr(ty, "dtype", "?")))
    return out


def has_dynamic_inputs(model: LoadedModel) -> bool:
    """Whether an input of the loaded model has an unknown (``relay.Any``) dimension."""
    return any(d < 0 for _, shape, _ in model.inputs for d in shape)


def _is_static(dim) -> bool:
    try:
        int(getattr(dim, "value", dim))
        return True
    except (TypeError, ValueError):
        return False


# -- ONNX ------------------------------------------------------------------------------------------------
def _onnx_dims(value_info) -> list:
    dims = []
    for d in value_info.type.tensor_type.shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(d.dim_value)
        else:
            dims.append(d.dim_param or "?")
    return dims


def _load_onnx(path: str, specs: list):
    try:
        import onnx
    except ImportError:
        raise CLIError("reading .onnx models needs the onnx package: pip install onnx") from None
    try:
        model = onnx.load(path)
    except Exception as err:  # noqa: BLE001 - protobuf raises several unrelated types
        raise CLIError(f"{path} is not a valid ONNX model: {type(err).__name__}: {err}") from None
    if not model.graph.node and not model.graph.output:
        raise CLIError(f"{path} is not a valid ONNX model: its graph is empty")
    initializers = {t.name for t in model.graph.initializer}
    graph_inputs = [vi for vi in model.graph.input if vi.name not in initializers]
    by_name = {vi.name: vi for vi in graph_inputs}
    given = {s.name: s for s in specs}
    unknown = [n for n in given if n not in by_name]
    if unknown:
        raise CLIError(f"--input-shapes names {unknown} but the ONNX model's inputs are {list(by_name)}")
    shape = {}
    for name, vi in by_name.items():
        if name in given:
            dims = _onnx_dims(vi)
            if len(dims) != len(given[name].shape) and has_unknown_dims([given[name]]):
                raise CLIError(f"--input-shapes gives input {name!r} {len(given[name].shape)} dimensions, but the "
                               f"ONNX model declares {len(dims)}")
            shape[name] = _any_dims(given[name].shape, dims)
            want = given[name].dtype
            elem = vi.type.tensor_type.elem_type
            have = str(onnx.helper.tensor_dtype_to_np_dtype(elem)) if elem else None
            if want and have and want != have:
                raise CLIError(f"--input-shapes gives input {name!r} dtype {want}, but the ONNX model declares "
                               f"{have}; drop the dtype suffix")
            continue
        dims = _onnx_dims(vi)
        if any(not isinstance(d, int) for d in dims):
            continue  # a dynamic axis stays unknown (relay.Any): the model is compiled for the VM
        shape[name] = tuple(dims)
    from ..relay.frontend import from_onnx  # lazy: heavy compiler package (fast `kiln --help`)
    return from_onnx(model, shape=shape)


# -- TorchScript -----------------------------------------------------------------------------------------
def _load_pytorch(path: str, specs: list):
    try:
        import torch
    except ImportError:
        raise CLIError("reading TorchScript models needs PyTorch: pip install torch") from None
    try:
        module = torch.jit.load(path, map_location="cpu")
    except Exception as err:  # noqa: BLE001 - torch raises RuntimeError/ValueError/pickle errors
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CLIError(f"{path} is not a TorchScript archive ({first}); save the model with "
                       "torch.jit.save(torch.jit.trace(model, example_inputs), path)") from None
    module = module.eval()
    arg_names = [i.debugName().split(".")[0] for i in list(module.graph.inputs())[1:]]
    if not specs:
        example = ",".join(f"{n}:1x3x224x224" for n in arg_names) or "input0:1x3x224x224"
        raise CLIError(f"TorchScript files do not record input shapes; pass --input-shapes with one entry per "
                       f"forward() argument ({len(arg_names)}: {', '.join(arg_names)}), e.g. --input-shapes {example}")
    if len(specs) != len(arg_names):
        raise CLIError(f"the TorchScript module's forward() takes {len(arg_names)} input(s) "
                       f"({', '.join(arg_names)}) but --input-shapes gives {len(specs)}")
    infos = [(s.name, (_any_dims(s.shape), _torch_input_dtype(module, s))) for s in specs]
    from ..relay.frontend import from_pytorch  # lazy: heavy compiler package (fast `kiln --help`)
    try:
        return from_pytorch(module, infos)
    except OpNotImplemented as err:
        # the frontend's hint names custom_convert_map, a Python argument the command cannot take
        lines = [ln for ln in str(err).splitlines() if "custom_convert_map" not in ln]
        lines.append("hint: to supply converters for them, import the model in Python with "
                     "relay.frontend.from_pytorch(module, input_infos, custom_convert_map={'ns::op': fn}) and build "
                     "it with relay.build (or save mod.astext() and relay.save_param_dict(params) as model.txt + "
                     "model.params and run `kiln compile model.txt`)")
        raise CLIError("\n".join(lines)) from None


def _torch_input_dtype(module, spec: InputSpec) -> str:
    """The dtype of one TorchScript input: the ``--input-shapes`` suffix, else the model's float type.

    Weights in float16 run in float16 (inputs default to float16); bfloat16 weights are imported as float32
    (numpy has no bfloat16), so such a model takes float32 inputs and bfloat16 inputs are refused."""
    kinds = {str(t.dtype) for t in list(module.parameters()) + list(module.buffers()) if t.is_floating_point()}
    model_float = "float16" if kinds == {"torch.float16"} else "float32"
    dims = "x".join(map(str, spec.shape)) or "[]"
    if spec.dtype == "bfloat16":
        raise CLIError(f"--input-shapes {spec.name}:{dims}:bfloat16: kiln cannot take bfloat16 inputs (numpy, and so "
                       "kiln's runtime, has no bfloat16); kiln imports a bfloat16 model's weights as float32, so give "
                       f"the input as float32: --input-shapes {spec.name}:{dims}:float32 (or convert the model with "
                       "model.float() before torch.jit.trace)")
    if spec.dtype in ("float16", "float32", "float64") and spec.dtype != model_float:
        raise CLIError(f"--input-shapes {spec.name}:{dims}:{spec.dtype}: the model's weights are {model_float}, "
                       f"so its float inputs must be {model_float} too: --input-shapes {spec.name}:{dims}:{model_float}"
                       " (or convert the model with model.float() / model.half() before tracing)")
    return spec.dtype or model_float


# -- Relay text ------------------------------------------------------------------------------------------
def _load_relay(path: str, specs: list, params_path: str | None):
    from .. import parser  # lazy: heavy compiler package (fast `kiln --help`)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    mod = parser.parse(text, source_name=path)
    if "main" not in mod:
        raise CLIError(f"{path}: the Relay program has no @main function")
    params = {}
    if params_path is None:
        guess = os.path.splitext(path)[0] + ".params"
        params_path = guess if os.path.isfile(guess) else None
    if params_path is not None:
        check_file(params_path, "params file")
        from ..relay.param_dict import load_param_dict  # lazy: heavy compiler package (fast `kiln --help`)
        with open(params_path, "rb") as f:
            blob = f.read()
        try:
            params = load_param_dict(blob)
        except KilnError as err:
            raise CLIError(f"{params_path} is not a Relay params file: {err}") from None
        names = {p.name_hint for p in mod["main"].params}
        unknown = sorted(set(params) - names)
        if unknown:
            raise CLIError(f"{params_path} holds params {unknown} that are not parameters of @main "
                           f"(which has {sorted(names)})")
    if specs:
        _check_relay_shapes(mod, params, specs, path)
    return mod, params


def _check_relay_shapes(mod, params, specs, path) -> None:
    declared = {n: (s, d) for n, s, d in free_inputs(mod, params)}
    for s in specs:
        if s.name not in declared:
            raise CLIError(f"--input-shapes names {s.name!r} but {path}'s @main inputs are {list(declared)}")
        shape, dtype = declared[s.name]
        if tuple(shape) != tuple(s.shape) or (s.dtype and s.dtype != dtype):
            raise CLIError(f"--input-shapes {s.name}:{'x'.join(map(str, s.shape))} disagrees with {path}, which "
                           f"declares {s.name}: {shape} {dtype}; Relay text carries its own shapes, so edit the "
                           "program instead")


def random_input(shape, dtype: str, rng: np.random.Generator, fill: str = "random") -> np.ndarray:
    """A test input of ``shape``/``dtype``: random (floats in [0, 1), ints in [0, 8)), zeros or ones."""
    np_dtype = np.dtype("float32" if dtype == "bfloat16" else dtype)
    if fill == "zeros":
        return np.zeros(shape, np_dtype)
    if fill == "ones":
        return np.ones(shape, np_dtype)
    if np_dtype.kind == "f":
        return rng.random(shape).astype(np_dtype)
    if np_dtype.kind == "b":
        return rng.random(shape) < 0.5
    return rng.integers(0, 8, size=shape).astype(np_dtype)


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GB"


# -- output verbosity ------------------------------------------------------------------------------------
_VERBOSITY = {"level": 0}


def set_verbosity(level: int) -> None:
    """-1: quiet (results and errors only), 0: default, 1: -v, 2: -vv."""
    _VERBOSITY["level"] = int(level)


def verbosity() -> int:
    return _VERBOSITY["level"]


def info(text: str) -> None:
    """A progress line (what was done, how long it took): printed unless -q."""
    if _VERBOSITY["level"] >= 0:
        print(text, flush=True)


def detail(text: str) -> None:
    """A line only -v asks for."""
    if _VERBOSITY["level"] >= 1:
        print(text, flush=True)


# -- threads ---------------------------------------------------------------------------------------------
def add_threads_argument(p) -> None:
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="threads for the kernels' parallel loops (default: $KILN_NUM_THREADS, else every CPU "
                   "this process may use)")


def apply_threads(n: int | None) -> None:
    """Make kernels loaded from now on use ``n`` threads (``--threads``).

    Uses ``kiln.runtime.set_num_threads`` where the runtime has it; otherwise sets ``$KILN_NUM_THREADS``, which
    the runtime reads when it loads a kernel library (so it must happen before the model is loaded) and which
    AutoTVM's measuring subprocesses inherit."""
    if n is None:
        return
    if n < 1:
        raise CLIError(f"--threads {n}: give a thread count of at least 1")
    os.environ["KILN_NUM_THREADS"] = str(n)
    setter = getattr(runtime, "set_num_threads", None)
    if setter is not None:
        setter(n)


# -- input files -----------------------------------------------------------------------------------------
def read_inputs_file(path: str, input_names: list) -> dict:
    """``{name: array}`` from an .npz (one array per input name) or an .npy (one array: the model must have
    exactly one input, or the array is given to the first)."""
    check_file(path, "inputs file")
    try:
        loaded = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise CLIError(f"{path} is not a readable .npz or .npy file: {err}") from None
    if isinstance(loaded, np.ndarray):  # .npy: one array
        if len(input_names) != 1:
            raise CLIError(f"{path} is an .npy file (one array) but the model has {len(input_names)} inputs "
                           f"({', '.join(input_names)}); save them in one .npz: np.savez(path, "
                           + ", ".join(f"{n}=..." for n in input_names) + ")")
        return {input_names[0]: loaded}
    with loaded as data:
        given = {k: data[k] for k in data.files}
    unknown = sorted(set(given) - set(input_names))
    if unknown:
        raise CLIError(f"{path} has arrays {unknown} that are not inputs of the model; its inputs are "
                       f"{list(input_names)}")
    return given


def check_input_array(name: str, arr: np.ndarray, shape: tuple, dtype: str, where: str) -> np.ndarray:
    """The one rule for user-given inputs (CLI and ``kiln.driver.tvmc`` alike, as ``set_input`` does): the
    shape and dtype must be the model's; nothing is converted silently, and the message says how to convert."""
    if len(arr.shape) != len(shape) or any(want >= 0 and have != want for have, want in zip(arr.shape, shape)):
        shown = "[" + ", ".join("?" if d < 0 else str(d) for d in shape) + "]"  # -1: a dynamic dim (VM model)
        raise CLIError(f"input {name!r} in {where} has shape {list(arr.shape)}, the model expects {shown}")
    have = "bool" if arr.dtype == np.bool_ else str(arr.dtype)
    if dtype == "bfloat16":
        raise CLIError(f"input {name!r}: the model takes bfloat16, which numpy files cannot hold; convert the "
                       "model to float32 before compiling (model.float() in PyTorch) or feed it from Python")
    if have != dtype:
        raise CLIError(f"input {name!r} in {where} is {have}, the model expects {dtype}; kiln does not convert "
                       f"inputs silently (values could change): save it as {dtype}, e.g. "
                       f"np.savez(path, {name}=x.astype({dtype!r}))")
    return arr
