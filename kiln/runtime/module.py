"""runtime.Module: a tree of modules (compiled kernels, graph executor factories, ...) and how it is
exported to one file and loaded back.

Extension point (TVM's convention): a Module subclass that is not compiled code sets ``type_key`` and
implements ``blob_header()`` (JSON-able dict) and ``blob_payloads()`` (name -> bytes); a loader
registered as the global function ``runtime.module.loadbinary_<type_key>`` rebuilds it from
``(header, payloads, library)``. Import links are restored by the runtime, not by the loader.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import tarfile
import tempfile
from typing import Callable, Sequence

from ..error import ArgumentError, KilnError, ModuleLoadError
from . import blob as _blob
from .benchmark import BenchmarkResult, measure
from .device import Device, device as _as_device
from .kernel import KernelFunction
from .cpu_features import check_runnable, missing_features
from .disk_cache import file_sha256
from .library import Library, UnrunnableLibrary, append_trailer, read_blob_from_file, verify_file
from .registry import get_global_func, register_func

MANIFEST_NAME = "kiln_manifest.json"
LIBRARY_TYPE_KEY = "library"


class FunctionNotFound(KilnError, AttributeError):
    """A module has no function of the requested name."""


class Module:
    """Base runtime module: named functions, imported modules, export and timing."""

    type_key = "module"

    def __init__(self):
        self._imports: list = []
        self._func_cache: dict = {}

    # -- functions -------------------------------------------------------------------------------
    @property
    def entry_name(self) -> str | None:
        return None

    def _get_local_function(self, name: str):
        """Subclass hook: the callable named ``name`` in this module, or None."""
        return None

    def _local_function_names(self) -> list:
        return []

    def _find_function(self, name: str, query_imports: bool):
        func = self._func_cache.get(name)
        if func is None:
            func = self._get_local_function(name)
            if func is not None:
                self._func_cache[name] = func
        if func is None and query_imports:
            for mod in self._imports:
                func = mod._find_function(name, True)
                if func is not None:
                    break
        return func

    def get_function(self, name: str, query_imports: bool = False):
        """The function ``name`` (searching imported modules too with ``query_imports``)."""
        if not isinstance(name, str):
            raise KilnError(f"function names are strings, got {type(name).__name__}")
        func = self._find_function(name, query_imports)
        if func is None:
            known = self._local_function_names()
            hint = f"; it has: {', '.join(known)}" if known else ""
            raise FunctionNotFound(f"module {self.type_key} has no function {name!r}{hint}")
        return func

    def __getitem__(self, name: str):
        return self.get_function(name)

    def __call__(self, *args, **kwargs):
        if kwargs:
            raise ArgumentError(f"module {self.type_key}: keyword arguments ({', '.join(kwargs)}) are not supported; "
                                "pass every argument by position, in the order of the function's parameters")
        entry = self.entry_name
        if entry is None:
            raise KilnError(f"module {self.type_key} has no entry function; use mod[name](...)")
        return self.get_function(entry)(*args)

    def __contains__(self, name: str) -> bool:
        return self._find_function(name, False) is not None

    # -- tree ------------------------------------------------------------------------------------
    @property
    def imported_modules(self) -> list:
        return list(self._imports)

    def import_module(self, module: "Module") -> None:
        if not isinstance(module, Module):
            raise KilnError(f"import_module expects a Module, got {type(module).__name__}")
        if module is self or self in module._walk():
            raise KilnError("import_module would create a cycle in the module tree")
        self._imports.append(module)

    def _walk(self) -> list:
        seen, order, stack = set(), [], [self]
        while stack:
            mod = stack.pop()
            if id(mod) in seen:
                continue
            seen.add(id(mod))
            order.append(mod)
            stack.extend(reversed(mod._imports))
        return order

    # -- source / save ---------------------------------------------------------------------------
    def get_source(self, fmt: str = "") -> str:
        return ""

    def save(self, file_name: str, fmt: str = "") -> None:
        raise KilnError(f"module {self.type_key} cannot be saved on its own; use export_library")

    # -- serialization hooks (non-code modules) -------------------------------------------------
    def blob_header(self) -> dict:
        raise NotImplementedError

    def blob_payloads(self) -> dict:
        return {}

    @property
    def is_binary_serializable(self) -> bool:
        return type(self).blob_header is not Module.blob_header

    def _object_files(self) -> list | None:
        """Object files of compiled code (code modules only), else None."""
        return None

    # -- export ----------------------------------------------------------------------------------
    def export_library(self, file_name, fcompile=None, addons=None, workspace_dir=None, **kwargs) -> None:
        """Write this module tree to one ``.so`` (loadable without a compiler) or ``.tar`` file."""
        file_name = os.fspath(file_name)
        is_tar = file_name.endswith(".tar")
        if not is_tar and not file_name.endswith((".so", ".dylib")) and fcompile is None:
            raise KilnError(f"export_library: unsupported file type {file_name!r}; use .so or .tar")
        mods = self._walk()
        objects = []
        for mod in mods:
            objs = mod._object_files()
            if objs is None and not mod.is_binary_serializable:
                raise KilnError(f"export_library: module {mod.type_key} can be neither linked nor serialized")
            if objs is not None:
                if not objs:
                    raise KilnError(f"export_library: code module {mod.type_key} has no object files "
                                    "(a module loaded from a library cannot be exported again)")
                objects.extend(objs)
        own_dir = None
        if workspace_dir is None:
            own_dir = workspace_dir = tempfile.mkdtemp(prefix="kiln-export-")
        try:
            files = []
            for i, obj in enumerate(dict.fromkeys(objects)):
                if compiler_step("is_damaged_cache_entry")(obj):
                    raise KilnError(f"export_library: the cached object file {obj} was altered or truncated "
                                    "after this module was built (it no longer matches its sha256 record); "
                                    "build the module again and export that")
                dst = os.path.join(workspace_dir, f"lib{i}.o")
                shutil.copyfile(obj, dst)
                files.append(dst)
            files.append(compiler_step("blob_object")(serialize(self), os.path.join(workspace_dir, "devc.o")))
            if is_tar:
                files.append(_write_manifest(workspace_dir, files))
                (fcompile or write_tar)(file_name, files, **kwargs)
                return
            if fcompile is None:
                create_shared = compiler_step("create_shared")

                def fcompile(output, objects, options=None, cc=None, **_):
                    return create_shared(output, objects, options, cc)
            # link into a fresh name in a private folder beside the target: the linker creates the file with
            # its usual mode under the umask (0755), as for any shared library; then move it into place
            out_dir = os.path.dirname(os.path.abspath(file_name))
            stage = tempfile.mkdtemp(prefix=".kiln-export-", dir=out_dir)
            tmp = os.path.join(stage, os.path.basename(file_name))
            try:
                fcompile(tmp, files, **kwargs)
                append_trailer(tmp)
                os.replace(tmp, file_name)
            finally:
                shutil.rmtree(stage, ignore_errors=True)
        finally:
            if own_dir is not None:
                shutil.rmtree(own_dir, ignore_errors=True)

    # -- timing ----------------------------------------------------------------------------------
    def time_evaluator(self, func_name: str, dev, number: int = 10, repeat: int = 1, min_repeat_ms: float = 0,
                       limit_zero_time_iterations: int = 100, cooldown_interval_ms: float = 0,
                       repeats_to_cooldown: int = 1, f_preproc: str = "") -> Callable[..., BenchmarkResult]:
        """A function that runs ``func_name`` with the given arguments and returns a BenchmarkResult."""
        func = self.get_function(func_name, query_imports=True)
        dev = _as_device(dev) if not isinstance(dev, Device) else dev
        preproc = get_global_func(f_preproc) if f_preproc else None

        def evaluator(*args) -> BenchmarkResult:
            return measure(func, args, dev, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                           limit_zero_time_iterations=limit_zero_time_iterations,
                           cooldown_interval_ms=cooldown_interval_ms, repeats_to_cooldown=repeats_to_cooldown,
                           preproc=preproc)

        return evaluator

    def __repr__(self) -> str:
        return f"Module({self.type_key}, {len(self._imports)} imports)"


class CModule(Module):
    """Compiled kernels in a loaded shared library, described by ABI function metadata."""

    def __init__(self, library: Library, functions: Sequence[dict], entry_name: str | None = None,
                 type_key: str = "llvm", source: str | None = None, objects: Sequence[str] | None = None,
                 target_info: dict | None = None):
        super().__init__()
        self.library = library
        #: {"target": target string, "required_features": [ISA features the code may use], and where the CPU has
        #: some the code is compiled without, "unused_features": [those] (information only)} (empty if unknown)
        self.target_info = dict(target_info or {})
        self.type_key = type_key
        self.functions = [dict(f) for f in functions]
        self._by_name = {}
        for meta in self.functions:
            kf = KernelFunction(library, meta)  # validates the metadata now, not at the first call
            if kf.name in self._by_name:
                raise KilnError(f"function {kf.name!r} is described twice in the module metadata")
            self._by_name[kf.name] = kf
        if entry_name is not None and entry_name not in self._by_name:
            raise KilnError(f"entry function {entry_name!r} is not among {sorted(self._by_name)}")
        self._entry = entry_name
        self._source = source
        self._objects = list(objects) if objects is not None else []

    @property
    def entry_name(self) -> str | None:
        if self._entry is not None:
            return self._entry
        return next(iter(self._by_name)) if len(self._by_name) == 1 else None

    def _get_local_function(self, name: str):
        return self._by_name.get(name)

    def _local_function_names(self) -> list:
        return list(self._by_name)

    def get_source(self, fmt: str = "") -> str:
        return self._source or ""

    def save(self, file_name: str, fmt: str = "") -> None:
        """Save the C source (``.c``), the object (``.o``) or the function metadata (``.json``)."""
        file_name = os.fspath(file_name)
        fmt = fmt or os.path.splitext(file_name)[1].lstrip(".")
        if fmt in ("c", "cc") and self._source is not None:
            with open(file_name, "w", encoding="utf-8") as f:
                f.write(self._source)
        elif fmt == "o" and self._objects:
            self._save_object(file_name)
        elif fmt == "json":
            with open(file_name, "w", encoding="utf-8") as f:
                json.dump({"functions": self.functions, "entry_name": self._entry}, f, indent=1)
        else:
            raise KilnError(f"module {self.type_key} cannot be saved as {fmt!r}; use .c, .o or .json "
                            "(or export_library for a loadable file)")

    def _save_object(self, file_name: str) -> None:
        """One relocatable object holding the kernels and this module's function metadata (the
        ``__kiln_dev_mblob`` blob), so that TVM's classic flow works: ``save("m.o")``, then
        ``contrib.cc.create_shared("m.so", ["m.o"])``, then ``load_module("m.so")``."""
        blob = _blob.pack([(LIBRARY_TYPE_KEY, self.blob_header(), self.blob_payloads(), [])], root=0)
        with tempfile.TemporaryDirectory(prefix="kiln-save-") as work:
            meta = compiler_step("blob_object")(blob, os.path.join(work, "devc.o"))
            compiler_step("link_relocatable")(list(self._objects) + [meta], file_name)

    def _object_files(self) -> list | None:
        return list(self._objects)

    def blob_header(self) -> dict:
        header = {"functions": self.functions, "entry_name": self._entry, "source_type_key": self.type_key}
        header.update(self.target_info)  # "target", "required_features": checked before a load maps the code
        return header

    def blob_payloads(self) -> dict:
        return {"source": self._source.encode("utf-8")} if self._source else {}


# -- the compiler-side steps of export -----------------------------------------------------------
COMPILER_PACKAGE = "kiln.target"  # registers the runtime.module.<step> functions (kiln/target/c_module.py)


def compiler_step(step: str) -> Callable:
    """The compiler-side function ``runtime.module.<step>`` from the global registry (``blob_object``,
    ``create_shared``, ``link_relocatable``, ``link_for_load``, ``has_compiler``). Running a model never needs one;
    exporting, saving an object and loading a ``.tar`` of objects do. When nothing registered it yet, kiln's
    compiler package is loaded once to register it; without that package the step is an error."""
    name = f"runtime.module.{step}"
    func = get_global_func(name, allow_missing=True)
    if func is None:
        try:
            importlib.import_module(COMPILER_PACKAGE)
        except ImportError as err:
            raise KilnError(f"{step.replace('_', ' ')} needs kiln's compiler ({COMPILER_PACKAGE}), which cannot be "
                            f"imported here ({err}); loading and running an exported .so does not") from None
        func = get_global_func(name)
    return func


def write_tar(output: str, files: Sequence[str]) -> None:
    """Write ``files`` (flat, by base name) into the tar archive ``output``, atomically (TVM's ``contrib.tar.tar``,
    which is this function)."""
    names = [os.path.basename(f) for f in files]
    if len(set(names)) != len(names):
        raise KilnError(f"tar: duplicate file names in {names}")
    tmp = f"{output}.{os.getpid()}.tmp"
    try:
        with tarfile.open(tmp, "w") as tf:
            for path, name in zip(files, names):
                tf.add(path, arcname=name)
        os.replace(tmp, output)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


write_tar.output_format = "tar"


# -- blob (de)serialization of a module tree ---------------------------------------------------
def serialize(root: Module) -> bytes:
    mods = root._walk()
    index = {id(m): i for i, m in enumerate(mods)}
    entries = []
    for mod in mods:
        if isinstance(mod, CModule) or mod._object_files() is not None:
            type_key = LIBRARY_TYPE_KEY
        else:
            type_key = mod.type_key
        header = mod.blob_header()
        try:
            json.dumps(header)
        except (TypeError, ValueError) as err:
            raise KilnError(f"module {mod.type_key}: blob_header() is not JSON-serializable: {err}") from None
        payloads = mod.blob_payloads()
        entries.append((type_key, header, payloads, [index[id(m)] for m in mod._imports]))
    return _blob.pack(entries, root=0)


def deserialize(data: bytes, library: Library | None) -> Module:
    root, entries = _blob.unpack(data)
    mods = []
    for type_key, header, payloads, _ in entries:
        loader = get_global_func(f"runtime.module.loadbinary_{type_key}", allow_missing=True)
        if loader is None:
            raise ModuleLoadError(f"no loader for module type {type_key!r}: register the global function "
                                  f"'runtime.module.loadbinary_{type_key}' (import the package that defines it)")
        try:
            mod = loader(header, payloads, library)
        except ModuleLoadError:
            raise
        except Exception as err:  # noqa: BLE001 - a bad blob must surface as a load error
            raise ModuleLoadError(f"loading module {type_key!r} failed: {type(err).__name__}: {err}") from err
        if not isinstance(mod, Module):
            raise ModuleLoadError(f"loader for {type_key!r} returned {type(mod).__name__}, not a Module")
        mods.append(mod)
    for mod, (_, _, _, imports) in zip(mods, entries):
        for i in imports:
            mod._imports.append(mods[i])
    return mods[root]


@register_func("runtime.module.loadbinary_library", override=True)
def _load_library_module(header: dict, payloads: dict, library: Library | None) -> Module:
    if library is None:
        raise ModuleLoadError("a compiled-code module needs its shared library")
    source = payloads.get("source")
    info = {k: header[k] for k in ("target", "required_features", "unused_features") if k in header}
    mod = CModule(library, header["functions"], header.get("entry_name"), type_key=LIBRARY_TYPE_KEY,
                  source=source.decode("utf-8") if source is not None else None, objects=None, target_info=info)
    return mod


def check_blob_runnable(data: bytes, path: str) -> None:
    """Raise ModuleLoadError when a code module of the blob needs ISA features this CPU lacks."""
    _, entries = _blob.unpack(data)
    for type_key, header, _, _ in entries:
        if type_key == LIBRARY_TYPE_KEY and isinstance(header, dict) and header.get("required_features"):
            check_runnable(header["required_features"], str(header.get("target", "")), path)


# -- loading -----------------------------------------------------------------------------------
def _write_manifest(folder: str, files: list) -> str:
    manifest = {"format": "kiln-tar", "version": 1,
                "objects": [os.path.basename(f) for f in files],
                "sha256": {os.path.basename(f): file_sha256(f) for f in files}}
    path = os.path.join(folder, MANIFEST_NAME)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    return path


def _load_shared(path: str) -> Module:
    verify_file(path)
    data = read_blob_from_file(path)
    if data is not None:
        check_blob_runnable(data, path)  # before dlopen: a missing ISA feature is an error, never a SIGILL
    lib = Library(path, verify=False)
    if data is None:
        data = lib.read_blob()
    if data is None:
        raise ModuleLoadError(f"{path} is not a kiln library: it has no __kiln_dev_mblob module blob")
    return deserialize(data, lib)


def _load_tar(path: str) -> Module:
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        f.seek(max(size - 1024, 0))
        tail = f.read()
    # tar writers (tarfile, GNU tar) pad archives to whole 10240-byte records ending in zero blocks
    if size < 1024 or size % 10240 or tail.count(0) != len(tail):
        raise ModuleLoadError(f"{path} is not a complete tar archive (truncated or corrupt: {size} bytes, "
                              "no end-of-archive marker)")
    work = tempfile.mkdtemp(prefix="kiln-untar-")
    try:
        try:
            with tarfile.open(path, "r") as tf:
                for member in tf.getmembers():
                    if not member.isfile() or os.path.basename(member.name) != member.name:
                        raise ModuleLoadError(f"{path}: unexpected tar member {member.name!r}")
                    src = tf.extractfile(member)
                    with open(os.path.join(work, member.name), "wb") as out:
                        shutil.copyfileobj(src, out)
        except (tarfile.TarError, EOFError, OSError, ValueError) as err:
            raise ModuleLoadError(f"{path} is not a readable tar archive (truncated or corrupt?): {err}") from None
        try:
            with open(os.path.join(work, MANIFEST_NAME), encoding="utf-8") as f:
                manifest = json.load(f)
            objects = list(manifest["objects"])
            digests = dict(manifest["sha256"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ModuleLoadError(f"{path}: missing or malformed {MANIFEST_NAME}: {err}") from None
        paths = []
        for name in objects:
            full = os.path.join(work, os.path.basename(str(name)))
            try:
                with open(full, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            except OSError:
                raise ModuleLoadError(f"{path}: member {name!r} listed in the manifest is missing") from None
            if digest != digests.get(name):
                raise ModuleLoadError(f"{path}: member {name!r} is corrupt (checksum mismatch)")
            paths.append(full)
        try:
            so_path = compiler_step("link_for_load")(paths)
        except ModuleLoadError as err:
            raise ModuleLoadError(f"loading {path} {err}") from None
        except KilnError as err:
            raise ModuleLoadError(f"{path}: linking its objects failed: {err}") from None
        return _load_shared(so_path)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def load_module(path, fmt: str = "") -> Module:
    """Load a module written by ``export_library`` (``.so`` needs no compiler, ``.tar`` does)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ModuleLoadError(f"cannot load module {path!r}: no such file")
    if path.endswith(".tar") or fmt == "tar":
        return _load_tar(path)
    if path.endswith((".so", ".dylib")) or fmt in ("so", "dll"):
        return _load_shared(path)
    raise ModuleLoadError(f"cannot load {path!r}: unsupported file type (expected .so or .tar)")


def enabled(target) -> bool:
    """Whether code for ``target`` can be built and run here."""
    name = str(getattr(getattr(target, "kind", None), "name", None) or target).split()[0] if target else ""
    if name in ("cpu", "stackvm"):
        return True
    if name in ("llvm", "c"):
        return bool(compiler_step("has_compiler")())
    return False
