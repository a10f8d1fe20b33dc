"""The Python side of a compiled kernel call: check arguments against the function metadata of
docs/abi.md, then call the C symbol with a ``KilnValue`` array.

Everything that can be decided from the metadata (dtypes, constant shapes, where each shape variable
is bound, the compiled composite extents) is decided once, when the wrapper is built, so a call costs
a handful of attribute compares per argument.
"""
from __future__ import annotations

import ast
import ctypes
import struct

import numpy as np

from ..error import ArgumentError, KilnError
from .dtype import parse_dtype
from .ndarray import NDArray
from .registry import PackedFunc, take_pending_error


_ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, ast.Constant, ast.Call,
                  ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.USub, ast.UAdd)
_EXPR_GLOBALS = {"__builtins__": {}, "min": min, "max": max}


def _compile_extent(text: str, func: str, arg: str):
    """Compile a composite extent (python syntax over + - * // % min max) after whitelisting its AST."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as err:
        raise KilnError(f"{func}: argument {arg}: bad shape expression {text!r}: {err}") from None
    names = set()
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise KilnError(f"{func}: argument {arg}: shape expression {text!r} uses {type(node).__name__}; "
                            "only + - * // % min max over variables and integers are allowed")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in ("min", "max")):
            raise KilnError(f"{func}: argument {arg}: shape expression {text!r} calls something other than min/max")
        if isinstance(node, ast.Constant) and not isinstance(node.value, int):
            raise KilnError(f"{func}: argument {arg}: shape expression {text!r} has a non-integer constant")
        if isinstance(node, ast.Name) and node.id not in ("min", "max"):
            names.add(node.id)
    return compile(tree, f"<shape of {arg}>", "eval"), names


class _Renamer(ast.NodeTransformer):
    def __init__(self, mapping: dict):
        self.mapping = mapping

    def visit_Name(self, node):
        if node.id in ("min", "max"):
            return node
        return ast.copy_location(ast.Name(id=self.mapping[node.id], ctx=ast.Load()), node)


def _rename(text: str, mapping: dict) -> str:
    """A whitelisted extent expression with its variables renamed to generated locals."""
    return ast.unparse(_Renamer(mapping).visit(ast.parse(text, mode="eval")))


def _fmt_shape(spec) -> str:
    parts = []
    for d in spec:
        parts.append(d["expr"] if isinstance(d, dict) else str(d))
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


class _BufferArg:
    """Check plan for one buffer parameter."""

    __slots__ = ("index", "name", "dtype", "static_shape", "dims", "spec", "func", "output")

    def __init__(self, index: int, meta: dict, func: str):
        self.index = index
        self.name = meta["name"]
        self.func = func
        self.output = bool(meta.get("output", False))
        try:
            self.dtype = str(parse_dtype(meta["dtype"]))
        except KilnError as err:
            raise KilnError(f"{func}: argument {self.name}: {err}") from None
        self.spec = list(meta.get("shape", []))
        self.dims = []  # (kind, payload) per dimension: ("int", v) | ("var", name) | ("expr", (code, text))
        for d in self.spec:
            if isinstance(d, bool):
                raise KilnError(f"{func}: argument {self.name}: bad shape entry {d!r}")
            if isinstance(d, int):
                self.dims.append(("int", d))
            elif isinstance(d, str):
                self.dims.append(("var", d))
            elif isinstance(d, dict) and isinstance(d.get("expr"), str):
                code, _ = _compile_extent(d["expr"], func, self.name)
                self.dims.append(("expr", (code, d["expr"])))
            else:
                raise KilnError(f"{func}: argument {self.name}: bad shape entry {d!r}; expected an int, "
                                "a variable name or {\"expr\": ...}")
        self.static_shape = tuple(v for _, v in self.dims) if all(k == "int" for k, _ in self.dims) else None

    def fail(self, what: str, value=None):
        raise ArgumentError(f"{self.func}: argument {self.index} ({self.name}): {what}")

    def check_array(self, value) -> NDArray:
        if not isinstance(value, NDArray):
            if isinstance(value, np.ndarray):
                self.fail(f"expected a kiln NDArray of dtype {self.dtype} and shape {_fmt_shape(self.spec)}, "
                          "got a numpy array; wrap it with kiln.nd.array(...)")
            self.fail(f"expected a kiln NDArray of dtype {self.dtype}, got {type(value).__name__}")
        if value._dtype != self.dtype:
            self.fail(f"expected dtype {self.dtype}, got {value._dtype}")
        if len(value._shape) != len(self.dims):
            self.fail(f"expected a {len(self.dims)}-d array of shape {_fmt_shape(self.spec)}, "
                      f"got shape {value._shape}")
        if not value._kernel_ok:
            self.fail(f"expected a compact (C-contiguous, aligned) array; got a strided view of shape "
                      f"{value._shape}; pass a copy (kiln.nd.array(x.numpy()))")
        if self.output and not value._writable:
            self.fail("is an output, but the array given views read-only memory (np.frombuffer of bytes, a "
                      "read-only memmap or DLPack tensor); pass a writable array (kiln.nd.empty(...))")
        return value


class _ScalarArg:
    __slots__ = ("index", "name", "dtype", "is_float", "is_bool", "lo", "hi", "func")

    def __init__(self, index: int, meta: dict, func: str):
        self.index = index
        self.name = meta["name"]
        self.func = func
        dt = parse_dtype(meta["dtype"])
        self.dtype = str(dt)
        self.is_float = dt.is_float
        self.is_bool = dt.is_bool
        if dt.is_integral and not dt.is_bool:
            self.lo, self.hi = dt.min_value(), dt.max_value()
        else:
            self.lo = self.hi = None

    def convert(self, value) -> int:
        """The KilnValue slot (as int64 bits) for ``value``."""
        if self.is_float:
            if isinstance(value, (float, int, np.floating, np.integer)) and not isinstance(value, (bool, np.bool_)):
                return float(value)
            raise ArgumentError(f"{self.func}: argument {self.index} ({self.name}): expected a {self.dtype} "
                                f"scalar, got {type(value).__name__}")
        if self.is_bool:
            if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer)) and value in (0, 1)):
                return int(bool(value))
            raise ArgumentError(f"{self.func}: argument {self.index} ({self.name}): expected a bool, "
                                f"got {value!r}")
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            value = int(value)
            if not self.lo <= value <= self.hi:
                raise ArgumentError(f"{self.func}: argument {self.index} ({self.name}): {value} does not fit "
                                    f"in {self.dtype}")
            return value
        raise ArgumentError(f"{self.func}: argument {self.index} ({self.name}): expected an integer "
                            f"({self.dtype}), got {type(value).__name__}")


class _HandleArg:
    __slots__ = ("index", "name", "func")

    def __init__(self, index: int, meta: dict, func: str):
        self.index, self.name, self.func = index, meta["name"], func

    def convert(self, value) -> int:
        if isinstance(value, NDArray):
            return value._ptr
        if value is None:
            return 0
        if isinstance(value, int):
            return value
        raise ArgumentError(f"{self.func}: argument {self.index} ({self.name}): expected an opaque handle "
                            f"(int address, NDArray or None), got {type(value).__name__}")


class KernelFunction(PackedFunc):
    """A compiled kernel: ``f(*args)`` checks the arguments, then calls into C."""

    __slots__ = ("meta", "symbol", "_library", "_fn", "_nargs", "_total", "_argtype", "_plan",
                 "_static", "_var_scalars", "_shape_vars", "_signature", "_fast", "_pack_into", "_pool",
                 "_overlap_pairs", "_var_max", "_buffer_max")

    def __init__(self, library, meta: dict):
        name = meta.get("name")
        if not isinstance(name, str):
            raise KilnError(f"kernel metadata without a name: {meta!r}")
        super().__init__(self._call, name)
        self.meta = meta
        self.symbol = meta.get("symbol", name)
        self._library = library
        self._fn = library.kernel(self.symbol) if library is not None else None
        args = meta.get("args", [])
        self._shape_vars = list(meta.get("shape_vars", []))
        self._plan = []
        for i, a in enumerate(args):
            kind = a.get("kind", "buffer")
            if kind == "buffer":
                self._plan.append(_BufferArg(i, a, name))
            elif kind == "scalar":
                self._plan.append(_ScalarArg(i, a, name))
            elif kind == "handle":
                self._plan.append(_HandleArg(i, a, name))
            else:
                raise KilnError(f"{name}: argument {a.get('name')}: unknown kind {kind!r}")
        self._nargs = len(self._plan)
        self._total = self._nargs + len(self._shape_vars)
        self._argtype = ctypes.c_int64 * max(self._total, 1)
        # scalar parameters that are also shape variables bind first
        used = set()
        for p in self._plan:
            if isinstance(p, _BufferArg):
                for kind, payload in p.dims:
                    if kind == "var":
                        used.add(payload)
        needed = set(self._shape_vars)
        for p in self._plan:
            if isinstance(p, _BufferArg):
                for kind, payload in p.dims:
                    if kind == "expr":
                        needed |= _compile_extent(payload[1], name, p.name)[1]
        self._var_scalars = [(p.index, p.name) for p in self._plan
                             if isinstance(p, _ScalarArg) and p.name in (used | needed)]
        bindable = {n for _, n in self._var_scalars} | used
        missing = needed - bindable
        if missing:
            raise KilnError(f"{name}: shape variables {sorted(missing)} never appear alone in a buffer shape "
                            "or as a scalar parameter, so a call cannot bind them")
        self._static = not self._var_scalars and not self._shape_vars and all(
            not isinstance(p, _BufferArg) or p.static_shape is not None for p in self._plan)
        self._signature = ", ".join(self._describe(p) for p in self._plan)
        fmt = "<" + "".join(self._format_char(p) for p in self._plan) + "q" * len(self._shape_vars)
        self._pack_into = struct.Struct(fmt).pack_into
        self._pool = []
        self._plan_index_limits(meta)
        # kernels declare their buffers restrict: an output may share no byte with another buffer argument
        buffers = [p.index for p in self._plan if isinstance(p, _BufferArg)]
        self._overlap_pairs = [(o.index, b) for o in self._plan if isinstance(o, _BufferArg) and o.output
                               for b in buffers if b != o.index and not (self._plan[b].output and b < o.index)]
        self._fast = self._build_fast_checker()

    def _plan_index_limits(self, meta: dict) -> None:
        """What a call must satisfy so that no extent or index overflows in the kernel: every implicit shape
        variable fits the C type it is read into (``var_dtypes``; int32 when the metadata predates it), and a
        buffer whose shape involves an int32 variable holds fewer than 2**31 elements (its flattened index is
        computed in int32). Without this an extent of 2**31 + 64 became negative and the kernel silently did
        nothing."""
        var_dtypes = meta.get("var_dtypes") or {}
        dtype_of = {v: parse_dtype(var_dtypes.get(v, "int32")) for v in self._shape_vars}
        for p in self._plan:
            if isinstance(p, _ScalarArg):
                dtype_of.setdefault(p.name, parse_dtype(p.dtype))
        self._var_max = {v: dt.max_value() for v, dt in dtype_of.items()
                         if v in self._shape_vars and dt.is_integral and not dt.is_bool}
        self._buffer_max = {}  # buffer index -> (most elements, the int32 variable that imposes it)
        for p in self._plan:
            if not isinstance(p, _BufferArg) or p.static_shape is not None:
                continue
            names = set()
            for kind, payload in p.dims:
                if kind == "var":
                    names.add(payload)
                elif kind == "expr":
                    names |= _compile_extent(payload[1], self.name, p.name)[1]
            narrow = sorted(n for n in names if n in dtype_of and dtype_of[n].bits <= 32)
            if narrow:
                self._buffer_max[p.index] = (2 ** 31 - 1, narrow[0])

    def _check_index_limits(self, args, env: dict) -> None:
        for var, hi in self._var_max.items():
            value = env.get(var)
            if value is not None and value > hi:
                raise ArgumentError(f"{self.name}: shape variable {var} = {value} does not fit the kernel's "
                                    f"index type (at most {hi}); the kernel was compiled with 32-bit extents, "
                                    "split the input or declare the variable int64 (te.var(name, 'int64'))")
        for index, (most, var) in self._buffer_max.items():
            arr = args[index]
            count = int(np.prod(arr._shape, dtype=object))
            if count > most:
                self._plan[index].fail(f"shape {arr._shape} has {count} elements, more than the kernel's 32-bit "
                                       f"indexing (through shape variable {var}) can address ({most}); split the "
                                       "input or declare the shape variables int64")

    @staticmethod
    def _format_char(p) -> str:
        if isinstance(p, _ScalarArg):
            return "d" if p.is_float else ("Q" if p.dtype == "uint64" else "q")
        return "Q"  # data pointers and handles

    def _build_fast_checker(self):
        """Generate a straight-line checker for the common case; it returns the argument values, or
        None whenever anything is off (then the plan-driven checker produces the precise error)."""
        n = self._nargs
        ns = {"NDArray": NDArray}
        lines = ["def fast(args):", f"    if len(args) != {n}:", "        return None"]
        if n:
            lines.append("    " + "".join(f"a{i}, " for i in range(n)) + "= args")
        local = {}
        for index, var in self._var_scalars:
            local[var] = f"v{len(local)}"
            ns[f"c{index}"] = self._plan[index].convert
            lines.append(f"    {local[var]} = c{index}(a{index})")
        values, deferred = [], []
        for p in self._plan:
            i = p.index
            if isinstance(p, _BufferArg):
                ok = "_out_ok" if p.output else "_kernel_ok"
                lines.append(f"    if a{i}.__class__ is not NDArray or a{i}._dtype != {p.dtype!r} "
                             f"or not a{i}.{ok}:")
                lines.append("        return None")
                lines.append(f"    s{i} = a{i}._shape")
                if p.static_shape is not None:
                    lines += [f"    if s{i} != {p.static_shape!r}:", "        return None"]
                else:
                    lines += [f"    if len(s{i}) != {len(p.dims)}:", "        return None"]
                    for axis, (kind, payload) in enumerate(p.dims):
                        if kind == "int":
                            lines += [f"    if s{i}[{axis}] != {payload!r}:", "        return None"]
                        elif kind == "var" and payload in local:
                            lines += [f"    if s{i}[{axis}] != {local[payload]}:", "        return None"]
                        elif kind == "var":
                            local[payload] = f"v{len(local)}"
                            lines.append(f"    {local[payload]} = s{i}[{axis}]")
                            if payload in self._var_max:
                                lines += [f"    if {local[payload]} > {self._var_max[payload]}:",
                                          "        return None"]
                        else:
                            deferred.append((i, axis, payload[1]))
                values.append(f"a{i}._ptr")
            elif isinstance(p, _ScalarArg) and p.name in local and (i, p.name) in self._var_scalars:
                values.append(local[p.name])
            else:
                ns[f"c{i}"] = p.convert
                values.append(f"c{i}(a{i})")
        for i, axis, text in deferred:
            lines += [f"    if s{i}[{axis}] != ({_rename(text, local)}):", "        return None"]
        for o, b in self._overlap_pairs:
            lines += [f"    if a{o}._lo < a{b}._hi and a{b}._lo < a{o}._hi:", "        return None"]
        for i, (most, _) in self._buffer_max.items():
            most_bytes = most * parse_dtype(self._plan[i].dtype).numpy_dtype().itemsize
            lines += [f"    if a{i}._hi - a{i}._lo > {most_bytes}:", "        return None"]
        values += [local[v] for v in self._shape_vars]
        lines.append("    return (" + "".join(f"{v}, " for v in values) + ")")
        ns["min"], ns["max"] = min, max
        exec(compile("\n".join(lines), f"<kiln checker for {self.name}>", "exec"), ns)  # noqa: S102 - generated
        return ns["fast"]

    @staticmethod
    def _describe(p) -> str:
        if isinstance(p, _BufferArg):
            return f"{p.name}: NDArray[{p.dtype}, {_fmt_shape(p.spec)}]"
        if isinstance(p, _ScalarArg):
            return f"{p.name}: {p.dtype}"
        return f"{p.name}: handle"

    # -- argument checking ------------------------------------------------------------------------
    def _check_overlap(self, args) -> None:
        """Refuse an output that shares memory with another buffer argument (the kernel is restrict)."""
        for o, b in self._overlap_pairs:
            x, y = args[o], args[b]
            if x._lo < y._hi and y._lo < x._hi:
                po, pb = self._plan[o], self._plan[b]
                same = "is the same array as" if x._lo == y._lo and x._hi == y._hi else "overlaps the memory of"
                po.fail(f"the output {same} argument {b} ({pb.name}); kiln kernels assume their buffers do not "
                        "alias (C restrict), so the result would be wrong: pass a separate output array, or a "
                        "copy of the input")

    def _values(self, args) -> list:
        if len(args) != self._nargs:
            raise ArgumentError(f"{self.name}: expected {self._nargs} arguments ({self._signature}), "
                                f"got {len(args)}")
        values = []
        if self._static:
            for p, a in zip(self._plan, args):
                if type(p) is _BufferArg:
                    arr = p.check_array(a)
                    if arr._shape != p.static_shape:
                        p.fail(f"expected shape {p.static_shape}, got {arr._shape}")
                    values.append(arr._ptr)
                else:
                    values.append(p.convert(a))
            self._check_overlap(args)
            return values
        env = {}
        for index, var in self._var_scalars:
            env[var] = self._plan[index].convert(args[index])
        for p, a in zip(self._plan, args):
            if type(p) is _BufferArg:
                arr = p.check_array(a)
                shape = arr._shape
                if p.static_shape is not None:
                    if shape != p.static_shape:
                        p.fail(f"expected shape {p.static_shape}, got {shape}")
                else:
                    self._check_dims(p, shape, env)
                values.append(arr._ptr)
            else:
                values.append(p.convert(a))
        for p, a in zip(self._plan, args):  # composite extents, once everything is bound
            if type(p) is _BufferArg and p.static_shape is None:
                for axis, (kind, payload) in enumerate(p.dims):
                    if kind == "expr":
                        want = eval(payload[0], _EXPR_GLOBALS, env)  # noqa: S307 - AST whitelisted
                        if a._shape[axis] != want:
                            p.fail(f"expected shape {_fmt_shape(p.spec)} = {self._expected(p, env)}, got "
                                   f"{a._shape} (axis {axis}: {payload[1]} = {want})")
        self._check_overlap(args)
        self._check_index_limits(args, env)
        for var in self._shape_vars:
            values.append(env[var])
        return values

    def _check_dims(self, p: _BufferArg, shape: tuple, env: dict) -> None:
        for axis, (kind, payload) in enumerate(p.dims):
            got = shape[axis]
            if kind == "int":
                if got != payload:
                    p.fail(f"expected shape {_fmt_shape(p.spec)}, got {shape} (axis {axis} must be {payload})")
            elif kind == "var":
                bound = env.get(payload)
                if bound is None:
                    env[payload] = got
                elif bound != got:
                    p.fail(f"expected shape {_fmt_shape(p.spec)} = {self._expected(p, env)} with "
                           f"{payload}={bound}, got {shape}")

    @staticmethod
    def _expected(p: _BufferArg, env: dict) -> tuple:
        out = []
        for kind, payload in p.dims:
            if kind == "int":
                out.append(payload)
            elif kind == "var":
                out.append(env.get(payload, payload))
            else:
                try:
                    out.append(eval(payload[0], _EXPR_GLOBALS, env))  # noqa: S307
                except NameError:
                    out.append(payload[1])
        return tuple(out)

    def prepare(self, *args):
        """Check ``args`` once and return the ctypes argument array for repeated calls."""
        values = self._fast(args)
        if values is None:
            values = self._values(args)
        buf = self._argtype()
        self._pack_into(buf, 0, *values)
        return buf

    # -- calling --------------------------------------------------------------------------------
    def _call(self, *args):
        values = self._fast(args)
        if values is None:
            values = self._values(args)
        pool = self._pool
        buf = pool.pop() if pool else self._argtype()
        self._pack_into(buf, 0, *values)
        rc = self._fn(buf, self._total)
        pool.append(buf)
        if rc != 0:
            self._raise_failure(rc)
        return None

    __call__ = _call

    def _raise_failure(self, rc: int):
        pending = take_pending_error()
        if pending is not None:
            fname, exc = pending
            raise KilnError(f"{self.name}: packed function {fname!r} called from the kernel raised "
                            f"{type(exc).__name__}: {exc}") from exc
        msg = self._library.last_error() if self._library is not None else ""
        head, sep, check = msg.partition(": assertion failed: ")
        if sep and " " not in head:  # a run-time check of the kernel (an AssertStmt): its arguments broke it
            raise ArgumentError(f"{self.name}: {check}")
        raise KilnError(f"{self.name}: kernel failed (return code {rc})" + (f": {msg}" if msg else ""))

    def bind(self, *args):
        """Check ``args`` once; return ``run()`` that calls the kernel on them with no further checks
        (for executors that precompute a plan). The arguments are kept alive by ``run``."""
        buf = self.prepare(*args)
        fn, total, keep = self._fn, self._total, args

        def run() -> None:
            rc = fn(buf, total)
            if rc != 0:
                self._raise_failure(rc)

        run.args = keep
        return run

    @property
    def address(self) -> int:
        """Address of the C symbol, for native code that calls kernels directly."""
        return self._library.address(self.symbol)

    def make_timer(self, args):
        """A function ``timer(number) -> mean seconds per call`` that runs the kernel in C."""
        lib = self._library
        values = self.prepare(*args)
        if lib is None or not lib.can_time:
            return None
        address = lib.address(self.symbol)
        total = self._total
        keepalive = list(args)

        def timer(number: int) -> float:
            _ = keepalive
            t = lib.time_call(address, values, total, int(number))
            if t < 0:
                self._raise_failure(-1)
            return t

        return timer

    def __repr__(self) -> str:
        return f"KernelFunction({self.name}({self._signature}))"
