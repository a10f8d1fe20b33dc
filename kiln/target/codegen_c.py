"""C code generation: lowered TIR PrimFuncs -> one readable C translation unit (docs/abi.md, docs/targets.md).

``codegen_c`` runs the C backend's own TIR pass (:func:`c_lowering_passes`: ``PromoteRegisters``) and hands
the result to :class:`CodeGenC`, which only prints. Intrinsics arrive lowered: ``kiln.build`` runs
``LowerIntrin`` (whose default rules turn math intrinsics into C library calls) once, before any backend, as
TVM's driver does; a caller printing TIR directly runs it first (the printer names it when it meets an
unlowered call). Input functions are lowered: buffers flat (multi-dimensional
accesses are still accepted and flattened here through the buffer's shape/strides), vectors as
Ramp/Broadcast, loops tagged serial/parallel/vectorized/unrolled. Output: ``C_PRELUDE``, vector
typedefs and inline helpers, then one ``int32_t name(KilnValue* args, int32_t num_args)`` per function.

Decisions:
* the outermost PARALLEL loop runs on kiln's thread pool (``PARALLEL_BACKEND`` "pool", the default): its
  body becomes ``static int32_t kiln_par_<fn>_<k>(begin, end, closure)`` with the kernel variables it uses
  in a closure struct, and the kernel calls ``kiln_parallel_run`` -> the module's ``__kiln_parallel_launch``
  pointer (filled by the loader; null: serial). See :meth:`FunctionCodegen._pool_loop` and
  docs/architecture.md ("Parallel loops: kiln's thread pool"). With ``PARALLEL_BACKEND`` "openmp" it becomes
  ``#pragma omp parallel for num_threads(kiln_omp_threads()) schedule(guided)``; ``kiln_omp_threads()``
  returns ``__kiln_num_threads``, or ``omp_get_max_threads()`` when that is 0 (the clause is always
  present). A loop with the ``kiln.parallel_if`` annotation (a run-time work test of a kernel over symbolic
  extents, relay.backend.parallel_policy) goes parallel only when the test holds: the pool prints
  ``if (cond) launch; else body(0, n, closure);``, OpenMP ``if (cond) { parallel loop } else { the same loop,
  serial }`` (the body printed twice from one TIR nest, no libgomp call for small sizes). Either way a
  PARALLEL loop inside a parallel loop runs serially.
* OpenMP parallel loops are scheduled ``guided`` (``OMP_SCHEDULE``, :func:`omp_schedule_clause`: the one place).
  Why: with OpenMP's default static split each thread owns a fixed share, so when another process
  deschedules one thread the others wait at the closing barrier for its *whole share*; with guided chunks
  (each about what is left / threads) the thread that runs takes the work that is left and the barrier
  waits only for the late thread to wake and arrive. A/B in one process (2-core EPYC VM, 2 threads fixed,
  the same kernels built each way, interleaved), under load average 7-12 from other processes:
  conv2d 3x3 64->64 56x56 median 20.3 / 14.9 ms static vs 12.5 / 8.5 ms guided (dynamic, chunks of
  extent / (4 * threads): 12.3 / 8.6); at load 3.7 and beside one CPU-bound neighbour all three were equal
  (conv 7.95 ms, resnet18 65-66 ms; with the neighbour 11.7 ms, 117-119 ms). Quiet cost (load 3.5), median
  per call of an elementwise parallel loop of 8 / 64 / 512 / 4096 rows of 64 floats: static 6.1 / 7.0 / 10.0
  / 31.0 us, guided 6.6 / 7.5 / 11.9 / 31.2, dynamic 7.3 / 8.8 / 14.3 / 45.0 (dynamic's chunks land on a
  different core each call, so the data leaves the core's L2; guided's first, large chunk mostly goes to
  the caller, as static's does). So guided costs 0.2-2 us per region, under 1% of the regions kiln runs in
  parallel (below 2^20 iterations of work a loop runs serially). The MLP at batch 1 has no parallel loop
  (``relay.backend.parallel_policy`` makes small kernels serial). Not fixed by any schedule: an OpenMP
  region cannot end before every thread of its team arrives, so a descheduled worker still costs its
  wake-up; a caller that finishes without it needs outlined loop bodies and a kiln-owned pool.
* errors (failed asserts, failed packed calls, failed heap allocations) leave through the error exits
  (``c_error_exits.py``): set the last error, free the live heap buffers, return -1 (or, inside a
  parallel loop, record the failure and return -1 after the loop).
* allocations of constant size up to ``STACK_LIMIT_BYTES`` live on the stack (64-byte aligned);
  larger or symbolic ones on the heap (``kiln_alloc``: ``aligned_alloc`` behind a per-thread block cache);
  an allocation PromoteRegisters marked ``kiln.registers`` is C local variables ``name_r0, name_r1, ...``.
* binary operators print from tables; intrinsic calls dispatch on the op name through ``_CALL_PRINTERS``.
"""
from __future__ import annotations

import math
import os
import re

from ..arith import Analyzer
from ..error import LoweringError, KilnError
from ..runtime.abi import C_PRELUDE
from ..runtime.dtype import parse_dtype
from ..tir.buffer import Buffer
from ..tir.op import convert
from ..tir.stmt_functor import StmtExprVisitor
from ..tir.transform.intrin_rule import LANEWISE_EXTERN, LIBM
from ..tir.transform.promote_registers import REGISTERS_ATTR, PromoteRegisters
from ..tir.transform.vector_split import as_ramp, split_store
from ..tir.op import ANY_LANE, LANE_MASKED
from .c_error_exits import ErrorExits, HeapBuffer, ParallelLoop
from ..tir.assert_message import is_assert_message, message_parts
from .c_support import CSupport, scalar_ctype, suffix, vector_extern_helper
from .imports import IMPORT_C_PREFIX, imported_c_items
from .metadata import function_metadata, implicit_shape_vars
from .x86 import target_cpu_flags
from ..tir import expr as E, stmt as S, op as tir_op

STACK_LIMIT_BYTES = 32 * 1024

_C_KEYWORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
    "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed",
    "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool",
    "true", "false", "args", "num_args", "main", "abs", "exp", "log", "sqrt", "pow", "floor", "ceil", "round",
    "NULL", "errno", "fabs", "free", "malloc", "memcpy", "isnan", "isinf", "y0", "y1", "j0", "j1",
}

_PREDICATES = {"isnan", "isinf", "isfinite"}
IMPORT_LLVM_MARK = "__kiln_import_llvm"  # helper key: the module links objects from pragma import_llvm
_BITWISE = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "shift_left": "<<", "shift_right": ">>"}
_COMMENT_ATTRS = ("relay_op", "relay.op", "op_name", "compute_name")
# binary operators that print as one C operator; And/Or: (scalar, vector) forms
_ARITHMETIC = {E.Add: "+", E.Sub: "-", E.Mul: "*"}
_COMPARISONS = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}
_LOGICAL = {E.And: ("&&", "&"), E.Or: ("||", "|")}

# intrinsic name (without "tir.") -> FunctionCodegen method printing a call of it (filled by @_prints)
_CALL_PRINTERS: dict = {}


def _wide_mask(cond) -> bool:
    """Whether a vector condition is built from compares of 32- or 64-bit lanes (its int32 mask is not a widened
    8/16-bit compare): compares, and the ``&``/``|``/``!`` of conditions (iteratively: padding masks chain many)."""
    stack = [cond]
    while stack:
        c = stack.pop()
        if isinstance(c, (E.And, E.Or)):
            stack.extend((c.a, c.b))
        elif isinstance(c, E.Not):
            stack.append(c.a)
        elif isinstance(c, (E.LT, E.LE, E.GT, E.GE, E.EQ, E.NE)) and parse_dtype(c.a.dtype).bits >= 32:
            return True
    return False


def _prints(*names):
    """Register the decorated FunctionCodegen method as the printer of the intrinsics ``names``."""
    def register(method):
        for name in names:
            _CALL_PRINTERS[name] = method
        return method
    return register


# How the iterations of a parallel loop are handed out (module doc, "parallel loops"): "guided" (chunks
# from a shared counter, each about what is left / threads), "static" (OpenMP's default, one contiguous
# share per thread) or "dynamic" (chunks of about extent / (OMP_CHUNKS_PER_THREAD * threads)). Read at code
# generation time; the one place the choice is made.
OMP_SCHEDULE = "guided"
OMP_CHUNKS_PER_THREAD = 4

# What runs parallel loops (module doc, "parallel loops"): "pool" (the body outlined into a static function that
# kiln's thread pool runs through the module's ``__kiln_parallel_launch`` pointer) or "openmp" (``#pragma omp
# parallel for``). ``PARALLEL_BACKEND`` (None: ``$KILN_PARALLEL_BACKEND``, else DEFAULT_PARALLEL_BACKEND) is
# read at code generation time; the generated source differs, so the two never share a cache entry.
PARALLEL_BACKENDS = ("pool", "openmp")
DEFAULT_PARALLEL_BACKEND = "pool"
PARALLEL_BACKEND = None


def parallel_backend() -> str:
    """The parallel-loop backend code generated now uses: ``"pool"`` or ``"openmp"`` (see PARALLEL_BACKEND)."""
    choice = PARALLEL_BACKEND
    if choice is None:
        choice = os.environ.get("KILN_PARALLEL_BACKEND", "").strip().lower() or DEFAULT_PARALLEL_BACKEND
    if choice not in PARALLEL_BACKENDS:
        raise KilnError(f"the parallel backend (codegen_c.PARALLEL_BACKEND / $KILN_PARALLEL_BACKEND) must be "
                        f"one of {', '.join(PARALLEL_BACKENDS)}, got {choice!r}")
    return choice


def parallel_loop_marker(backend: str | None = None) -> str:
    """Text that each parallel loop of generated C contains under ``backend`` (default: the one in use): the
    pool's launch call or OpenMP's pragma (for tests and tools that look for parallel loops in the source)."""
    return {"pool": "kiln_parallel_run(kiln_par_", "openmp": "#pragma omp parallel for"}[backend or parallel_backend()]


# the launch ABI of the pool backend: kiln.runtime.thread_pool fills __kiln_parallel_launch at load time
_PARALLEL_LAUNCH_HELPER = (
    "/* parallel loops (kiln thread pool): the loader stores kiln_pool_launch in __kiln_parallel_launch; while\n"
    " * it is null (a loader that does not know it) a parallel loop runs serially. 0 threads: the pool's default. */\n"
    "typedef int32_t (*KilnParallelBody)(int64_t begin, int64_t end, void* closure);\n"
    "typedef int32_t (*KilnParallelLaunchFn)(KilnParallelBody body, void* closure, int64_t extent,\n"
    "                                        int32_t num_threads);\n"
    "__attribute__((weak)) KilnParallelLaunchFn __kiln_parallel_launch = 0;\n"
    "static inline void kiln_parallel_run(KilnParallelBody body, void* closure, int64_t extent) {\n"
    "  KilnParallelLaunchFn launch = __kiln_parallel_launch;\n"
    "  if (extent <= 0) return;\n"
    "  if (launch == 0 || __kiln_num_threads == 1 || extent == 1) (void)body(0, extent, closure);\n"
    "  else (void)launch(body, closure, extent, __kiln_num_threads);\n"
    "}")


def omp_schedule_clause(c, extent: str) -> str:
    """The ``schedule(...)`` clause (with its leading space, or nothing) of a parallel loop of ``extent``
    (a C expression) iterations; ``c`` is the unit's CSupport (for the chunk helper)."""
    if OMP_SCHEDULE == "static":
        return ""
    if OMP_SCHEDULE == "guided":
        return " schedule(guided)"
    if OMP_SCHEDULE != "dynamic":
        raise KilnError(f"codegen_c.OMP_SCHEDULE must be 'static', 'dynamic' or 'guided', got {OMP_SCHEDULE!r}")
    k = OMP_CHUNKS_PER_THREAD
    threads = c.omp_threads()
    chunk = c.helper(f"kiln_omp_chunk_{k}", (
        f"/* about {k} chunks per thread of a dynamically scheduled parallel loop, at least 1 iteration */\n"
        f"static inline int64_t kiln_omp_chunk_{k}(int64_t extent) {{\n"
        f"  int64_t c = extent / ((int64_t){k} * {threads}());\n"
        "  return c > 0 ? c : 1;\n}"))
    return f" schedule(dynamic, {chunk}({extent}))"


class CodegenError(LoweringError):
    """The C backend met TIR it cannot translate (names the node and the function)."""


def _const_mask(m):
    """True / False when the lane mask ``m`` is a broadcast constant (Simplify proved the guard for every lane or
    for none), else None."""
    if isinstance(m, E.Broadcast) and isinstance(m.value, E.IntImm):
        return bool(m.value.value)
    return None


def _is_int_const(e, value=None) -> bool:
    if isinstance(e, E.IntImm):
        return value is None or e.value == value
    return False


def bare(text: str) -> str:
    """``text`` without one pair of parentheses that encloses all of it (for statement contexts)."""
    if not (text.startswith("(") and text.endswith(")")) or text.startswith("({"):
        return text
    depth = 0
    for pos, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0 and pos != len(text) - 1:
                return text
    return text[1:-1]


def c_string(text: str) -> str:
    out = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    out = re.sub(r"[\x00-\x1f\x7f]", lambda m: "\\%03o" % ord(m.group(0)), out)
    return '"' + out + '"'


def _sanitize(name: str) -> str:
    name = re.sub(r"[^0-9A-Za-z_]", "_", name or "v")
    if not name or name[0].isdigit():
        name = "v_" + name
    if name.startswith("kiln_") or name.startswith("__"):
        name = "u_" + name
    if name in _C_KEYWORDS:
        name = name + "_"
    return name


class _Names:
    """Unique C identifiers for variables, stable per variable object."""

    def __init__(self):
        self._by_var: dict = {}
        self._used: set = set()

    def fresh(self, hint: str) -> str:
        base = _sanitize(hint)
        name, k = base, 1
        while name in self._used:
            name = f"{base}_{k}"
            k += 1
        self._used.add(name)
        return name

    def define(self, var, hint=None) -> str:
        name = self.fresh(hint or var.name)
        self._by_var[id(var)] = name
        return name

    def get(self, var):
        return self._by_var.get(id(var))


class _PointerTypes(StmtExprVisitor):
    """Element dtype of each data pointer, from the buffers that use it."""

    def __init__(self):
        self.types: dict = {}

    def _note(self, buf):
        self.types.setdefault(id(buf.data), buf.dtype)

    def visit_BufferLoad(self, e):
        self._note(e.buffer)
        self.generic_visit(e)

    def visit_BufferStore(self, s):
        self._note(s.buffer)
        self.generic_visit(s)

    def visit_Allocate(self, s):
        self.types.setdefault(id(s.buffer_var), str(parse_dtype(s.dtype).element_of()))
        return self.generic_visit_iter(s)  # a generator the walker drives: nesting costs no stack

    def visit_DeclBuffer(self, s):
        self._note(s.buffer)
        return self.generic_visit_iter(s)


class FunctionCodegen(StmtExprVisitor):
    """Emits one PrimFunc as C. Expressions visit to C text; statements append lines."""

    def __init__(self, support: CSupport, func, symbol: str):
        self.c = support
        self.func = func
        self.symbol = symbol
        self.names = _Names()
        self.lines: list[str] = []
        self.indent = 1
        self.nonneg: set = set()       # ids of variables known to be >= 0
        self.exits = ErrorExits()      # live heap buffers and the enclosing parallel loop
        self.parallel_depth = 0
        self.counter = 0
        self.analyzer = Analyzer()
        self.registers: dict = {}      # id(buffer var) -> C name prefix of allocations held in registers
        self.decl_types: dict = {}     # C name -> C type a parallel body captures it as (None: cannot)
        self.outlined: list = []       # the static functions of the parallel loop bodies (pool backend)
        pt = _PointerTypes()
        pt(func.body)
        self.ptr_types = pt.types

    # ------------------------------------------------------------------ output helpers
    def emit(self, line: str):
        # indentation stops growing at 32 levels: a deep nest stays linear in size
        self.lines.append("  " * min(self.indent, 32) + line)

    def uid(self) -> int:
        self.counter += 1
        return self.counter

    def name_of(self, var) -> str:
        name = self.names.get(var)
        if name is None:
            raise CodegenError(
                f"function {self.symbol}: variable `{var.name}` is used but never defined "
                "(not a parameter, a buffer shape variable, a loop variable or a let binding)"
            )
        return name

    def fail(self, node, what: str):
        raise CodegenError(f"C codegen of function {self.symbol}: {what} (in `{node}`)")

    # ------------------------------------------------------------------ function
    def generate(self) -> tuple[str, dict]:
        f = self.func
        noalias = bool(f.attrs.get("tir.noalias", False))
        header_lines = []
        for i, p in enumerate(f.params):
            buf = f.buffer_map.get(p)
            if buf is not None:
                if buf.strides or not _is_int_const(buf.elem_offset, 0):
                    if any(not isinstance(s, E.IntImm) for s in list(buf.strides) + [buf.elem_offset]):
                        raise NotImplementedError(
                            f"function {self.symbol}: argument {buf.name} has symbolic strides or offset; "
                            "kiln kernels take compact row-major buffers"
                        )
                name = self.names.define(buf.data, buf.name)
                self.names._by_var[id(p)] = name
                et = scalar_ctype(self.ptr_types.get(id(buf.data), buf.dtype))
                qual = " restrict" if noalias else ""
                header_lines.append(f"{et}*{qual} {name} = ({et}*)args[{i}].v_handle;")
                self.decl_types[name] = f"{et}*{qual}"
                for dim in buf.shape:
                    if isinstance(dim, E.Var):
                        self.nonneg.add(id(dim))
            else:
                name = self.names.define(p)
                header_lines.append(self._unpack_scalar(p, name, i))
        for j, v in enumerate(implicit_shape_vars(f)):
            if self.names.get(v) is None:
                name = self.names.define(v)
                header_lines.append(self._unpack_scalar(v, name, len(f.params) + j))
            self.nonneg.add(id(v))
        for line in header_lines:
            self.emit(line)
        self.emit("(void)num_args;")
        self.visit(f.body)
        self.emit("return 0;")
        meta = function_metadata(f, self.symbol, self.name_of)
        comment = self._comment()
        c_name, proto = c_function_name(self.symbol)
        head = self.outlined + [comment] + ([proto] if proto else [])
        text = "\n".join(head + [f"int32_t {c_name}(KilnValue* args, int32_t num_args) {{"] + self.lines + ["}"])
        return text, meta

    def _comment(self) -> str:
        parts = [f"kernel {self.symbol}"]
        for key in _COMMENT_ATTRS:
            if key in self.func.attrs:
                parts.append(f"{key.replace('.', '_')}: {self.func.attrs[key]}")
        return "/* " + "; ".join(str(p).replace("*/", "* /") for p in parts) + " */"

    def _unpack_scalar(self, var, name: str, index: int) -> str:
        dt = parse_dtype(var.dtype)
        t = scalar_ctype(dt)
        if dt.is_handle:
            et = self.ptr_types.get(id(var))
            if et is not None:
                ct = scalar_ctype(et)
                self.decl_types[name] = f"{ct}*"
                return f"{ct}* {name} = ({ct}*)args[{index}].v_handle;"
            self.decl_types[name] = "void*"
            return f"void* {name} = args[{index}].v_handle;"
        if dt.is_float:
            self.decl_types[name] = t
            return f"{t} {name} = ({t})args[{index}].v_float64;"
        if dt.is_bool:
            self.decl_types[name] = "bool"
            return f"bool {name} = args[{index}].v_int64 != 0;"
        self.decl_types[name] = t
        return f"{t} {name} = ({t})args[{index}].v_int64;"

    # ------------------------------------------------------------------ error exits
    def emit_error(self, message_expr: str | None):
        """Set the last error (unless a callee did) and leave through the error exits."""
        lines = ([f"__kiln_set_last_error({message_expr});"] if message_expr else []) + \
            self.exits.lines(self.c.record_failure)
        for line in lines:
            self.emit(line)

    # ------------------------------------------------------------------ statements
    # Statement visitors that contain statements are generators: ``yield child`` visits the child
    # (kiln.tir.stmt_functor drives them from an explicit stack, so nesting costs no interpreter stack).
    def visit_SeqStmt(self, s):
        for x in s.seq:
            yield x

    def visit_Evaluate(self, s):
        v = s.value
        if isinstance(v, (E.IntImm, E.FloatImm, E.StringImm)):
            return
        if isinstance(v, E.Call) and v.op in ("tir.tvm_call_packed", "tir.tvm_call_packed_lowered"):
            self.emit("{")
            self.indent += 1
            self._packed_call_lines(v, None)
            self.indent -= 1
            self.emit("}")
            return
        self.emit(f"(void){self.visit(v)};")

    def visit_BufferStore(self, s):
        elem_bytes = max(parse_dtype(s.buffer.dtype).itemsize, 1)
        pieces = split_store(s, self.c.max_vector_bytes // elem_bytes)
        if pieces is not None:
            for piece in pieces:
                self.visit(piece)
            return
        buf = s.buffer
        if id(buf.data) in self.registers:
            self.emit(f"{self._register(buf, s.indices)} = {bare(self._value_for(s.value, buf.dtype))};")
            return
        index = self._flat_index(buf, s.indices)
        ptr = self._pointer(buf)
        value = s.value
        idx_lanes = parse_dtype(index.dtype).lanes
        val_lanes = parse_dtype(value.dtype).lanes
        if idx_lanes == 1:
            if val_lanes != 1:
                self.fail(s, "vector value stored at a scalar index")
            self.emit(f"{ptr}[{bare(self.visit(index))}] = {bare(self._value_for(value, buf.dtype))};")
            return
        vdt = parse_dtype(buf.dtype).with_lanes(idx_lanes)
        if val_lanes == 1:
            value = E.Broadcast(value, idx_lanes)
        ramp = as_ramp(index)
        if isinstance(value, E.Call) and value.op == LANE_MASKED:  # VectorizeLoop's masked last vector
            value, mask = value.args
            if not _const_mask(mask):
                fn, args = self._masked_access(vdt, ptr, index, ramp, mask, store=True)
                self.emit(f"{fn}({', '.join(args)}, {bare(self.visit(value))});")
                return
        if ramp is not None and _is_int_const(ramp.stride, 1):
            fn = self.c.vstore(vdt)
            self.emit(f"{fn}({ptr} + {self.visit(ramp.base)}, {bare(self.visit(value))});")
        else:
            fn = self.c.scatter(vdt, index.dtype)
            self.emit(f"{fn}({ptr}, {bare(self.visit(index))}, {bare(self.visit(value))});")

    def _value_for(self, value, dtype) -> str:
        text = self.visit(value)
        if value.dtype != dtype and parse_dtype(value.dtype).lanes == 1:
            return f"({scalar_ctype(dtype)})({text})"
        return text

    def visit_For(self, s):
        var = s.loop_var
        t = scalar_ctype(var.dtype)
        if s.kind == S.ForKind.THREAD_BINDING:
            tag = s.thread_binding.thread_tag if s.thread_binding is not None else "?"
            raise CodegenError(
                f"function {self.symbol}: loop `{var.name}` is bound to GPU thread axis '{tag}', "
                "but the target is a CPU ('llvm'/'c'); build for target 'cuda' or remove the bind"
            )
        lo = bare(self.visit(s.min))
        extent = self.visit(s.extent)
        name = self.names.define(var)
        if self._is_nonneg(s.min):
            self.nonneg.add(id(var))
        try:
            self.analyzer.bind(var, E.Range.from_min_extent(s.min, s.extent), allow_override=True)
        except Exception:  # noqa: BLE001 - the analyzer is an optimization aid only
            pass
        end = bare(extent) if _is_int_const(s.min, 0) else f"{lo} + {extent}"
        header = f"for ({t} {name} = {lo}; {name} < {end}; ++{name}) {{"
        if s.kind == S.ForKind.PARALLEL and self.parallel_depth == 0:
            if parallel_backend() == "openmp":
                cond = (s.annotations or {}).get("kiln.parallel_if")
                if cond is None:
                    yield from self._parallel_loop(s, header, bare(extent))
                    return
                # decided per call (relay.backend.parallel_policy): the parallel region, or the same loop
                # inline (no libgomp call, body optimized in place); TIR lowering saw one loop nest
                self.emit(f"if ({bare(self.visit(cond))}) {{")
                self.indent += 1
                yield from self._parallel_loop(s, header, bare(extent))
                self.indent -= 1
                self.emit("} else {")
                self.indent += 1
                self.emit(header)
                self.indent += 1
                yield s.body
                self.indent -= 1
                self.emit("}")
                self.indent -= 1
                self.emit("}")
            elif self.registers:
                # register slots live outside the loop cannot be shared with an outlined body: run serially
                self.emit("/* parallel loop beside live register slots: runs serially */")
                yield from self._parallel_loop(s, header, bare(extent), pragma=False)
            else:
                yield from self._pool_loop(name, t, lo, bare(extent), s)
            return
        self.decl_types[name] = t
        if s.kind == S.ForKind.PARALLEL:
            self.emit("/* nested parallel loop: runs serially inside the outer parallel loop */")
        elif s.kind == S.ForKind.UNROLLED:
            n = s.extent.value if isinstance(s.extent, E.IntImm) else None
            self.emit(f"#pragma GCC unroll {n}" if n is not None and n <= 512 else "#pragma GCC unroll 8")
        elif s.kind == S.ForKind.VECTORIZED:
            self.emit("#pragma GCC ivdep")
        self.emit(header)
        self.indent += 1
        yield s.body
        self.indent -= 1
        self.emit("}")

    def _parallel_loop(self, s, header: str, extent: str, pragma: bool = True):
        loop = ParallelLoop.numbered(self.uid())
        outer_lines, self.lines = self.lines, []
        base_indent = self.indent
        self.indent = base_indent + 1
        self.exits.push(loop)
        self.parallel_depth += 1
        yield s.body
        self.parallel_depth -= 1
        self.exits.pop()
        body_lines, self.lines = self.lines, outer_lines
        self.indent = base_indent
        if loop.used:
            self.emit(f"int32_t {loop.flag} = 0;")
            self.emit(f"char {loop.msg}[1024];")
            self.emit(f"{loop.msg}[0] = 0;")
        if pragma:
            threads = self.c.omp_threads()
            self.emit(f"#pragma omp parallel for num_threads({threads}()){omp_schedule_clause(self.c, extent)}")
        self.emit(header)
        self.lines.extend(body_lines)
        if loop.used:
            self.emit(f"  {loop.label}: ;")
        self.emit("}")
        if loop.used:
            self.emit(f"if ({loop.flag}) {{")
            self.indent += 1
            self.emit_error(loop.msg)
            self.indent -= 1
            self.emit("}")

    def _pool_loop(self, name: str, t: str, lo: str, extent: str, s):
        """A parallel loop for kiln's thread pool: the body becomes ``static int32_t kiln_par_<fn>_<k>(begin,
        end, closure)`` over a range of iterations; the variables it uses from the kernel are copied into a
        closure struct (buffers as pointers, scalars by value: TIR never assigns an outer variable). An error
        inside the body records the first message in the kernel's flag (through the closure) and ends the
        iteration; the kernel checks the flag after the loop, as with OpenMP."""
        k = self.uid()
        fn = f"kiln_par_{c_function_name(self.symbol)[0]}_{k}"
        outer = {n: ty for n, ty in self.decl_types.items() if n != name}
        loop = ParallelLoop(f"kiln_par_end_{k}", "(*kiln_cl->failed)", "kiln_cl->msg")
        outer_lines, self.lines = self.lines, []
        base_indent = self.indent
        self.indent = 2
        self.exits.push(loop)
        self.parallel_depth += 1
        yield s.body
        self.parallel_depth -= 1
        self.exits.pop()
        body_lines, self.lines = self.lines, outer_lines
        self.indent = base_indent
        code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', "\n".join(body_lines))  # names inside strings do not count
        used = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code))
        captured = [n for n in outer if n in used]
        bad = [n for n in captured if outer[n] is None]
        if bad:
            self.fail(s, f"a parallel loop uses register slots {bad} allocated outside it")
        fields = [f"{outer[n]} {n};" for n in captured] + ["int64_t lo;"]
        if loop.used:
            fields += ["int32_t* failed;", "char* msg;"]
        struct = f"struct {fn}_closure"
        head = [f"{struct} {{ {' '.join(fields)} }};",
                f"static int32_t {fn}(int64_t kiln_begin, int64_t kiln_end, void* kiln_arg) {{",
                f"  {struct}* kiln_cl = ({struct}*)kiln_arg;"]
        head += [f"  {outer[n]} {n} = kiln_cl->{n};" for n in captured]
        head += ["  for (int64_t kiln_it = kiln_begin; kiln_it < kiln_end; ++kiln_it) {",
                 f"    {t} {name} = ({t})(kiln_cl->lo + kiln_it);"]
        tail = ([f"  {loop.label}: ;"] if loop.used else []) + ["  }", "  return 0;", "}"]
        self.outlined.append("\n".join(head + body_lines + tail))
        run = self.c.helper("kiln_parallel_run", _PARALLEL_LAUNCH_HELPER)
        inits = [f".{n} = {n}" for n in captured] + [f".lo = (int64_t)({lo})"]
        self.emit("{")
        self.indent += 1
        if loop.used:
            self.emit(f"int32_t kiln_par_failed_{k} = 0;")
            self.emit(f"char kiln_par_msg_{k}[1024];")
            self.emit(f"kiln_par_msg_{k}[0] = 0;")
            inits += [f".failed = &kiln_par_failed_{k}", f".msg = kiln_par_msg_{k}"]
        self.emit(f"{struct} kiln_cl_{k} = {{ {', '.join(inits)} }};")
        cond = (s.annotations or {}).get("kiln.parallel_if")  # relay.backend.parallel_policy: launch only if
        if cond is None:
            self.emit(f"{run}({fn}, &kiln_cl_{k}, (int64_t)({extent}));")
        else:
            self.emit(f"if ({bare(self.visit(cond))}) {run}({fn}, &kiln_cl_{k}, (int64_t)({extent})); "
                      f"else (void){fn}(0, (int64_t)({extent}), &kiln_cl_{k});")
        if loop.used:
            self.emit(f"if (kiln_par_failed_{k}) {{")
            self.indent += 1
            self.emit_error(f"kiln_par_msg_{k}")
            self.indent -= 1
            self.emit("}")
        self.indent -= 1
        self.emit("}")

    def visit_While(self, s):
        self.emit(f"while ({bare(self.visit(s.condition))}) {{")
        self.indent += 1
        yield s.body
        self.indent -= 1
        self.emit("}")

    def visit_IfThenElse(self, s):
        self.emit(f"if ({bare(self.visit(s.condition))}) {{")
        self.indent += 1
        yield s.then_case
        self.indent -= 1
        if s.else_case is not None:
            self.emit("} else {")
            self.indent += 1
            yield s.else_case
            self.indent -= 1
        self.emit("}")

    def visit_LetStmt(self, s):
        while isinstance(s, S.LetStmt):  # a chain of lets in a loop
            value = self.visit(s.value)
            var = s.var
            name = self.names.define(var)
            if self._is_nonneg(s.value):
                self.nonneg.add(id(var))
            if parse_dtype(var.dtype).is_handle and id(var) in self.ptr_types:
                ct = scalar_ctype(self.ptr_types[id(var)])
                self.emit(f"{ct}* {name} = ({ct}*)({value});")
                self.decl_types[name] = f"{ct}*"
            else:
                self.emit(f"{self.c.ctype(var.dtype)} {name} = {bare(value)};")
                self.decl_types[name] = self.c.ctype(var.dtype)
            s = s.body
        yield s

    def visit_AttrStmt(self, s):
        key = s.attr_key
        if key in ("thread_extent", "virtual_thread"):
            tag = getattr(s.node, "thread_tag", "") or str(s.node)
            raise CodegenError(
                f"function {self.symbol}: the schedule binds an axis to GPU thread '{tag}', but the target "
                "is a CPU ('llvm'/'c'); build for target 'cuda' or remove the bind"
            )
        if key == "pragma_import_c":  # C source for the module's declarations (extern kernels of tensorize)
            for name, text in imported_c_items(s.value.value if isinstance(s.value, E.StringImm) else s.value):
                self.c.helper(name, text)
        elif key == "pragma_import_llvm":  # compiled and linked by the build (kiln.target.imports)
            self.c.helper(IMPORT_LLVM_MARK, "/* pragma import_llvm: extern functions below come from LLVM IR */")
        elif key == "pragma_gcc_unroll" and isinstance(s.body, S.For) and s.body.kind == S.ForKind.SERIAL \
                and isinstance(s.value, E.IntImm):
            # the loop right inside gets `#pragma GCC unroll N` (N = 1: gcc keeps it a loop, not one straight run)
            self.emit(f"#pragma GCC unroll {max(1, int(s.value.value))}")
        elif key.startswith("pragma_"):
            self.emit(f"/* {key} = {s.value} */")
        yield s.body

    def visit_AssertStmt(self, s):
        self.emit(f"if (!({bare(self.visit(s.condition))})) {{")
        self.indent += 1
        if is_assert_message(s.message):  # a message naming run-time values: formatted when it fails
            text, values = message_parts(s.message)
            fmt = "%lld".join(part.replace("%", "%%") for part in text.split("{}"))
            args = "".join(f", (long long)({bare(self.visit(v))})" for v in values)
            self.c.uses_stdio = True
            self.emit("char kiln_assert_msg[512];")
            self.emit(f"snprintf(kiln_assert_msg, sizeof(kiln_assert_msg), "
                      f"{c_string(f'{self.symbol}: assertion failed: {fmt}')}{args});")
            self.emit_error("kiln_assert_msg")
        else:
            msg = s.message.value if isinstance(s.message, E.StringImm) else str(s.message)
            self.emit_error(c_string(f"{self.symbol}: assertion failed: {msg}"))
        self.indent -= 1
        self.emit("}")
        yield s.body

    def visit_Allocate(self, s):
        if s.annotations.get(REGISTERS_ATTR):
            yield from self._registers(s)
            return
        dt = parse_dtype(s.dtype)
        elem = dt.element_of()
        et = scalar_ctype(elem)
        name = self.names.define(s.buffer_var)
        self.ptr_types[id(s.buffer_var)] = str(elem)
        self.decl_types[name] = f"{et}*"  # a stack array is captured as a pointer to it
        extents = [convert(x) for x in s.extents]
        count = dt.lanes
        const = True
        for ext in extents:
            if isinstance(ext, E.IntImm):
                count *= ext.value
            else:
                const = False
        nbytes = count * elem.itemsize
        if const and nbytes <= STACK_LIMIT_BYTES:
            self.emit(f"{et} {name}[{max(count, 1)}] __attribute__((aligned(64)));")
            yield s.body
            return
        alloc = self.c.alloc()
        if const:
            size = f"(size_t){nbytes}"
        else:
            terms = [f"(size_t)({self.visit(ext)})" for ext in extents]
            if dt.lanes > 1:
                terms.append(str(dt.lanes))
            size = " * ".join(terms + [f"sizeof({et})"])
        self.emit(f"{et}* {name} = ({et}*){alloc}({size});")
        self.emit(f"if ({name} == NULL) {{")
        self.indent += 1
        self.emit_error(c_string(f"{self.symbol}: out of memory allocating buffer '{s.buffer_var.name}'"))
        self.indent -= 1
        self.emit("}")
        self.exits.push(HeapBuffer(name))
        yield s.body
        self.exits.pop()
        self.emit(f"kiln_free({name});")

    def _registers(self, s):
        """An allocation PromoteRegisters marked: one local variable per slot, ``name_r0, name_r1, ...``."""
        name = self.names.define(s.buffer_var)
        (count,) = s.extents
        if not isinstance(count, E.IntImm) or parse_dtype(s.dtype).is_bool:
            self.fail(s, f"an allocation marked {REGISTERS_ATTR} must have one constant extent")
        self.emit(f"{self.c.ctype(s.dtype)} {', '.join(f'{name}_r{k}' for k in range(count.value))};")
        self.decl_types[name] = None
        self.registers[id(s.buffer_var)] = name
        yield s.body
        del self.registers[id(s.buffer_var)]

    def _register(self, buf, indices) -> str:
        (index,) = indices
        if not isinstance(index, E.IntImm):
            raise CodegenError(f"function {self.symbol}: register slots of {buf.name} are indexed with a "
                               f"non-constant `{index}` (PromoteRegisters writes constant slot numbers)")
        return f"{self.registers[id(buf.data)]}_r{index.value}"

    def visit_DeclBuffer(self, s):
        yield s.body

    def visit_Prefetch(self, s):
        return

    def visit_BufferRealize(self, s):
        self.fail(s, "BufferRealize survived lowering; run kiln.tir.transform.StorageFlatten first")

    def visit_ProducerRealize(self, s):
        self.fail(s, "ProducerRealize survived lowering; lower the TE schedule first (kiln.lower)")

    def visit_ProducerStore(self, s):
        self.fail(s, "ProducerStore survived lowering; lower the TE schedule first (kiln.lower)")

    # ------------------------------------------------------------------ memory access
    def _flat_index(self, buf: Buffer, indices):
        """One flat element index for an access (flattening N-d accesses through the buffer)."""
        if len(indices) == len(buf.shape):
            return buf.offset_of(indices)
        if len(indices) == 1:
            index = indices[0]
            if not _is_int_const(buf.elem_offset, 0):
                index = index + buf.elem_offset
            return index
        raise CodegenError(
            f"function {self.symbol}: buffer {buf.name} has {len(buf.shape)} dimensions but is "
            f"indexed with {len(indices)} indices"
        )

    def _pointer(self, buf: Buffer) -> str:
        name = self.name_of(buf.data)
        declared = self.ptr_types.get(id(buf.data))
        if declared is not None and declared != buf.dtype:
            return f"(({scalar_ctype(buf.dtype)}*){name})"
        return name

    def visit_BufferLoad(self, e, mask=None):
        """A load; ``mask`` (a vector bool): a vector load of only the lanes where it is true."""
        buf = e.buffer
        if id(buf.data) in self.registers:
            return self._register(buf, e.indices)
        index = self._flat_index(buf, e.indices)
        ptr = self._pointer(buf)
        lanes = parse_dtype(index.dtype).lanes
        if lanes == 1:
            return f"{ptr}[{bare(self.visit(index))}]"
        vdt = parse_dtype(buf.dtype).with_lanes(lanes)
        ramp = as_ramp(index)
        if mask is not None:
            fn, args = self._masked_access(vdt, ptr, index, ramp, mask, store=False)
            return f"{fn}({', '.join(args)})"
        if ramp is not None and _is_int_const(ramp.stride, 1):
            return f"{self.c.vload(vdt)}({ptr} + {self.visit(ramp.base)})"
        if ramp is not None and _is_int_const(ramp.stride, 0):
            return f"{self.c.broadcast(vdt)}({ptr}[{self.visit(ramp.base)}])"
        return f"{self.c.gather(vdt, index.dtype)}({ptr}, {self.visit(index)})"

    # ------------------------------------------------------------------ leaves
    def visit_Var(self, v):
        return self.name_of(v)

    def visit_IntImm(self, e):
        return int_literal(e.value, e.dtype)

    def visit_FloatImm(self, e):
        return float_literal(e.value, e.dtype)

    def visit_StringImm(self, e):
        return c_string(e.value)

    # ------------------------------------------------------------------ arithmetic
    def _binary(self, e, op: str):
        return f"({self.visit(e.a)} {op} {self.visit(e.b)})"

    def visit_BinaryOpExpr(self, e):
        """The operators that are one C operator (the tables above); the others have a visit_ of their own."""
        op = _ARITHMETIC.get(type(e))
        if op is not None:
            return self._binary(e, op)
        op = _COMPARISONS.get(type(e))
        if op is not None:
            return self._compare(e, op)
        scalar_op, vector_op = _LOGICAL[type(e)]
        return self._binary(e, vector_op if parse_dtype(e.dtype).lanes > 1 else scalar_op)

    def visit_Div(self, e):
        dt = parse_dtype(e.dtype)
        if dt.is_float or dt.lanes == 1:
            return self._binary(e, "/")
        return self._lanewise_binary(e, "div", "a[k] / b[k]")

    def visit_Mod(self, e):
        dt = parse_dtype(e.dtype)
        if dt.is_float:
            self._not_lowered(e)
        if dt.lanes == 1:
            return self._binary(e, "%")
        return self._lanewise_binary(e, "mod", "a[k] % b[k]")

    def visit_FloorDiv(self, e):
        if parse_dtype(e.dtype).is_float:
            self._not_lowered(e)
        return self._floor_int(e, "floordiv", self.visit_Div)

    def visit_FloorMod(self, e):
        if parse_dtype(e.dtype).is_float:
            self._not_lowered(e)
        return self._floor_int(e, "floormod", self.visit_Mod)

    def _not_lowered(self, e):
        self.fail(e, "float %, floordiv and floormod are C library calls that LowerIntrin makes; "
                     "run kiln.tir.transform.LowerIntrin before printing (kiln.build does)")

    def _floor_int(self, e, kind: str, truncating):
        """Integer floordiv / floormod: C's truncating operator where it agrees (unsigned or provably
        non-negative operands), else the ``kind`` helper, lane by lane for vectors."""
        dt = parse_dtype(e.dtype)
        if dt.is_uint or (self._is_nonneg(e.a) and self._is_nonneg(e.b)):
            return truncating(e)
        helper = getattr(self.c, kind)
        if dt.lanes == 1:
            return f"{helper(e.dtype)}({self.visit(e.a)}, {self.visit(e.b)})"
        return self._lanewise_binary(e, kind, f"{helper(dt.element_of())}(a[k], b[k])")

    def _lanewise_binary(self, e, opname: str, lane_expr: str):
        name = f"kiln_{opname}_{suffix(e.dtype)}"
        fn = self.c.lanewise(name, e.dtype, [e.a.dtype, e.b.dtype], lane_expr)
        return f"{fn}({self.visit(e.a)}, {self.visit(e.b)})"

    def visit_Min(self, e):
        return self._minmax("min", e)

    def visit_Max(self, e):
        return self._minmax("max", e)

    def _minmax(self, which: str, e):
        """min/max propagate NaN (c_support.minmax); a constant operand, never NaN, goes second so the
        helper can use its one-instruction form (relu's and clip's bounds are constants)."""
        a, b = e.a, e.b
        if parse_dtype(e.dtype).is_float:
            if _is_number_const(a) and not _is_number_const(b):
                a, b = b, a
            if _is_number_const(b):
                return f"{self.c.minmax(which, e.dtype, b_not_nan=True)}({self.visit(a)}, {self.visit(b)})"
        return f"{self.c.minmax(which, e.dtype)}({self.visit(a)}, {self.visit(b)})"

    def _compare(self, e, op: str):
        text = self._binary(e, op)
        if parse_dtype(e.a.dtype).lanes > 1:
            return self.c.to_mask(text, e.a.dtype)
        return text

    def visit_Not(self, e):
        if parse_dtype(e.dtype).lanes > 1:
            return f"(~{self.visit(e.a)})"
        return f"(!{self.visit(e.a)})"

    def visit_Select(self, e):
        cond_lanes = parse_dtype(e.condition.dtype).lanes
        if cond_lanes == 1:
            return f"({self.visit(e.condition)} ? {self.visit(e.true_value)} : {self.visit(e.false_value)})"
        fn = self.c.select(e.dtype, wide_mask=_wide_mask(e.condition))
        return f"{fn}({self.visit(e.condition)}, {self.visit(e.true_value)}, {self.visit(e.false_value)})"

    def visit_Cast(self, e):
        src, dst = parse_dtype(e.value.dtype), parse_dtype(e.dtype)
        value = self.visit(e.value)
        if dst.lanes == 1:
            if dst.is_bool:
                return f"({value} != 0)"
            if dst.is_handle:
                return f"((void*)({value}))"
            return f"(({scalar_ctype(dst)})({value}))"
        if src.lanes != dst.lanes:
            self.fail(e, f"cast between vectors of {src.lanes} and {dst.lanes} lanes")
        if src.is_bool and dst.is_bool:
            return value
        if src.is_bool:
            return f"(-__builtin_convertvector({value}, {self.c.ctype(dst)}))"
        if dst.is_bool:
            zero = f"{self.c.broadcast(src)}(0)"
            return self.c.to_mask(f"{value} != {zero}", src)
        fn = self.c.int_convert(src, dst)
        if fn is not None:
            return f"{fn}({value})"
        # float32 <-> 8/16-bit integer lanes: GCC 12 converts these one lane at a time on x86; through int32 lanes
        # they are one vcvt(t)ps2dq / vcvtdq2ps plus the integer widening / narrowing helper (a quantize's store)
        if src.is_float and src.bits == 32 and dst.is_integral and not dst.is_bool and dst.bits in (8, 16):
            i32 = parse_dtype(f"int32x{src.lanes}")
            fn = self.c.int_convert(i32, dst)
            if fn is not None:
                return f"{fn}(__builtin_convertvector({value}, {self.c.ctype(i32)}))"
        if dst.is_float and dst.bits == 32 and src.is_integral and not src.is_bool and src.bits in (8, 16):
            i32 = parse_dtype(f"int32x{src.lanes}")
            fn = self.c.int_convert(src, i32)
            if fn is not None:
                return f"__builtin_convertvector({fn}({value}), {self.c.ctype(dst)})"
        return f"__builtin_convertvector({value}, {self.c.ctype(dst)})"

    def visit_Ramp(self, e):
        fn = self.c.ramp(e.dtype)
        return f"{fn}({self.visit(e.base)}, {self.visit(e.stride)})"

    def visit_Broadcast(self, e):
        fn = self.c.broadcast(e.dtype)
        if parse_dtype(e.dtype).is_bool:
            return f"{fn}(-(int32_t)({self.visit(e.value)}))"
        return f"{fn}({self.visit(e.value)})"

    def visit_Shuffle(self, e):
        k = self.uid()
        parts, sources = [], []
        for j, v in enumerate(e.vectors):
            lanes = parse_dtype(v.dtype).lanes
            tmp = f"kiln_shuf_{k}_{j}"
            parts.append(f"{self.c.ctype(v.dtype)} {tmp} = {self.visit(v)};")
            sources.extend((tmp, lane, lanes) for lane in range(lanes))
        lanes = []
        for i in e.indices:
            tmp, lane, n = sources[i]
            lanes.append(f"{tmp}[{lane}]" if n > 1 else tmp)
        vt = self.c.ctype(e.dtype)
        return "({ " + " ".join(parts) + f" ({vt}){{{', '.join(lanes)}}}; }})"

    def visit_Let(self, e):
        value = self.visit(e.value)
        name = self.names.define(e.var)
        if self._is_nonneg(e.value):
            self.nonneg.add(id(e.var))
        body = yield e.body  # a generator: nested lets cost no stack
        return f"({{ {self.c.ctype(e.var.dtype)} {name} = {value}; {body}; }})"

    # ------------------------------------------------------------------ calls
    def visit_Call(self, e):
        op = e.op if isinstance(e.op, str) else getattr(e.op, "name", str(e.op))
        short = op[4:] if op.startswith("tir.") else op
        printer = _CALL_PRINTERS.get(short)
        if printer is None:
            raise CodegenError(
                f"C codegen of function {self.symbol}: unknown intrinsic {op!r} in `{e}`; an intrinsic "
                "reaches the C printer lowered by a LowerIntrin rule (kiln.ir.register_intrin_lowering), "
                "or use kiln.tir.call_extern for C library functions"
            )
        return printer(self, e, short)

    @_prints("likely")
    def _likely(self, e, _name):
        return self.visit(e.args[0])

    @_prints(LANE_MASKED[4:])
    def _lane_masked(self, e, _name):
        """VectorizeLoop's masked last vector: a load of the lanes that are on (a value stored through
        visit_BufferStore's masked store); any other operand is its value (lanes off are never stored)."""
        x, m = e.args
        if isinstance(x, E.BufferLoad) and id(x.buffer.data) not in self.registers and \
                parse_dtype(x.dtype).lanes > 1 and not _const_mask(m):
            return self.visit_BufferLoad(x, mask=m)
        return self.visit(x)

    def _masked_access(self, vdt, ptr: str, index, ramp, mask, store: bool):
        """``(helper, leading C arguments)`` of a load or store (its value goes last) of the lanes of ``index``
        where the vector bool ``mask`` is true: a lane count for a contiguous access under a prefix mask, else
        the int32 mask, contiguous or a gather / scatter."""
        if ramp is not None and _is_int_const(ramp.stride, 1):
            count = self._prefix_count(mask)
            if count is not None:
                return self.c.prefix_access(vdt, store), [f"{ptr} + {self.visit(ramp.base)}", count]
            return self.c.masked_access(vdt, store), [f"{ptr} + {self.visit(ramp.base)}", self.visit(mask)]
        access = self.c.scatter if store else self.c.gather
        return access(vdt, index.dtype, masked=True), [ptr, bare(self.visit(index)), self.visit(mask)]

    def _prefix_count(self, m):
        """C text of how many leading lanes are on when the lane mask ``m`` is a prefix, ``ramp(b, 1) <
        broadcast(e)`` (a split's last vector, a padded panel): ``e - b``; else None."""
        if isinstance(m, E.LT) and isinstance(m.a, E.Ramp) and _is_int_const(m.a.stride, 1) \
                and isinstance(m.b, E.Broadcast):
            return f"((int64_t)({bare(self.visit(m.b.value))}) - (int64_t)({bare(self.visit(m.a.base))}))"
        return None

    @_prints(ANY_LANE[4:])
    def _any_lane(self, e, _name):
        const = _const_mask(e.args[0])  # a guard the simplifier proved for every lane (or for none)
        if const is not None:
            return "1" if const else "0"
        count = self._prefix_count(e.args[0])
        if count is not None:
            return f"({count} > 0)"
        return f"{self.c.any_lane(parse_dtype(e.args[0].dtype).lanes)}({bare(self.visit(e.args[0]))})"

    @_prints("call_extern", "call_pure_extern")
    def _extern_call(self, e, _name):
        fname = e.args[0].value if isinstance(e.args[0], E.StringImm) else str(e.args[0])
        make = vector_extern_helper(fname) if parse_dtype(e.dtype).lanes > 1 else None
        if make is not None:  # a lane-wise helper the vectorizer widened: its vector form
            vname, code, x86 = make(parse_dtype(e.dtype).lanes)
            self.c.helper(vname, code)
            self.c.uses_x86_intrinsics = self.c.uses_x86_intrinsics or x86
            return f"{vname}({', '.join(self.visit(a) for a in e.args[1:])})"
        self.c.extern_helper(fname)
        if self.c.has_helper(IMPORT_LLVM_MARK):
            self._extern_prototype(fname, e)
        return f"{fname}({', '.join(self.visit(a) for a in e.args[1:])})"

    def _extern_prototype(self, fname: str, e):
        """Declare an extern function that no C text declares (one from ``pragma import_llvm``)."""
        if self.c.has_helper(fname) or fname in _LIBRARY_NAMES or any(
                re.search(rf"\b{re.escape(fname)}\s*\(", code) for key, code in self.c._helpers.items()
                if key.startswith(IMPORT_C_PREFIX)):
            return
        params = ", ".join(_prototype_ctype(a.dtype) for a in e.args[1:]) or "void"
        self.c.helper("__kiln_proto_" + fname, f"{_prototype_ctype(e.dtype)} {fname}({params});")

    @_prints("prefetch")
    def _prefetch(self, e, _name):
        """``tir.prefetch(address, rw, locality, cache_type)`` (StorageFlatten's lowering of a Prefetch region):
        GCC's ``__builtin_prefetch``; the address is an element of the buffer, never past it."""
        rw, loc = (int(a.value) for a in e.args[1:3])
        return f"__builtin_prefetch({bare(self.visit(e.args[0]))}, {rw}, {loc})"

    @_prints("tvm_access_ptr")
    def _access_ptr(self, e, _name):
        """``tvm_access_ptr(type_annotation, data, offset, extent, mask)``: a typed pointer into a buffer."""
        tdt = parse_dtype(e.args[0].dtype)
        et = scalar_ctype(tdt.element_of())
        ptr = f"(({et}*){self.name_of(e.args[1])} + {bare(self.visit(e.args[2]))})"
        return ptr if tdt.lanes == 1 else f"(({self.c.ctype(tdt)}*){ptr})"

    @_prints(*_BITWISE)
    def _bitwise(self, e, name):
        return f"({self.visit(e.args[0])} {_BITWISE[name]} {self.visit(e.args[1])})"

    @_prints("bitwise_not")
    def _bitwise_not(self, e, _name):
        return f"(~{self.visit(e.args[0])})"

    @_prints("reinterpret")
    def _reinterpret(self, e, _name):
        fn = self.c.reinterpret(e.dtype, e.args[0].dtype)
        return f"{fn}({self.visit(e.args[0])})"

    @_prints("abs")
    def _abs(self, e, _name):
        dt = parse_dtype(e.dtype)
        if dt.lanes == 1:
            return f"{self.c.abs_int(e.dtype)}({self.visit(e.args[0])})"
        fn = self.c.abs_int(dt.element_of())
        return self._lanewise_call(e, "abs", f"{fn}(a[k])")

    @_prints("ret")
    def _ret(self, e, _name):
        self.fail(e, "tir.ret is not supported by the C backend")

    @_prints(LANEWISE_EXTERN[4:])
    def _lanewise_extern(self, e, _name):
        """A scalar C function applied to each lane: a helper looping over the lanes (scalars at lane 1)."""
        if parse_dtype(e.dtype).lanes == 1:
            return self._extern_call(e, _name)
        fname = e.args[0].value
        args = e.args[1:]
        vround = self.c.vector_round(fname, e.dtype) if len(args) == 1 else None
        if vround is not None:
            return f"{vround}({self.visit(args[0])})"
        lane_args = [f"{'abc'[i]}[k]" if parse_dtype(a.dtype).lanes > 1 else "abc"[i] for i, a in enumerate(args)]
        fn = self.c.lanewise(f"kiln_{fname}_{suffix(e.dtype)}", e.dtype, [a.dtype for a in args],
                             f"{fname}({', '.join(lane_args)})")
        return f"{fn}({', '.join(self.visit(a) for a in args)})"

    @_prints("if_then_else")
    def _if_then_else(self, e, _name):
        cond, t, f = e.args
        if parse_dtype(cond.dtype).lanes == 1:
            return f"({self.visit(cond)} ? {self.visit(t)} : {self.visit(f)})"
        # lane by lane, so that only the taken branch of each lane is evaluated
        lanes = parse_dtype(e.dtype).lanes
        values = [self.visit(E.Call(str(parse_dtype(e.dtype).element_of()), "tir.if_then_else",
                                    [lane_of(cond, k), lane_of(t, k), lane_of(f, k)]))
                  for k in range(lanes)]
        if parse_dtype(e.dtype).is_bool:
            values = [f"-(int32_t){v}" for v in values]
        return f"(({self.c.ctype(e.dtype)}){{{', '.join(values)}}})"

    def _lanewise_call(self, e, opname, lane_expr):
        fn = self.c.lanewise(f"kiln_{opname}_{suffix(e.dtype)}", e.dtype, [a.dtype for a in e.args], lane_expr)
        return f"{fn}({', '.join(self.visit(a) for a in e.args)})"

    @_prints(*_PREDICATES)
    def _predicate(self, e, name):
        x = e.args[0]
        xdt = parse_dtype(x.dtype)
        if not xdt.is_float:
            return "true" if name == "isfinite" else "false"
        cast = "(float)" if xdt.bits == 16 else ""
        if xdt.lanes == 1:
            return f"({name}({cast}{self.visit(x)}) != 0)"
        fn = self.c.lanewise(f"kiln_{name}_{suffix(x.dtype)}", e.dtype, [x.dtype], f"{name}({cast}a[k])")
        return f"{fn}({self.visit(x)})"

    @_prints("popcount")
    def _popcount(self, e, _name):
        x = e.args[0]
        dt = parse_dtype(x.dtype)
        if dt.lanes > 1:
            self.fail(e, "vector popcount")
        if dt.bits == 64:
            return f"(({scalar_ctype(e.dtype)})__builtin_popcountll((uint64_t)({self.visit(x)})))"
        mask = (1 << dt.bits) - 1
        return f"(({scalar_ctype(e.dtype)})__builtin_popcount((uint32_t)({self.visit(x)}) & {mask}u))"

    # ------------------------------------------------------------------ packed calls
    @staticmethod
    def _packed_strides(buf):
        """The strides (in elements) of a buffer passed to a packed call, or None when it is compact (a
        strided view made by tensorize goes out as a DLTensor with strides)."""
        if not buf.strides:
            return None
        ana, acc = Analyzer(), tir_op.const(1, "int32")
        for d, st in reversed(list(zip(buf.shape, buf.strides))):
            if not ana.can_prove_equal(st, acc):
                return list(buf.strides)
            acc = tir_op.mul(acc, d)
        return None

    def _packed_buffer_ptr(self, e, buf) -> str:
        """The data pointer of a buffer passed to a packed call: its data plus its element offset (a view
        made by tensorize)."""
        data = self.name_of(buf.data)
        off = buf.elem_offset
        if isinstance(off, E.IntImm) and off.value == 0:
            return data
        return f"(({scalar_ctype(buf.dtype)}*){data} + ({self.visit(off)}))"

    def _packed_call_lines(self, e, result_dtype):
        """Emit the statements of a packed call; returns the C name holding the result (if any)."""
        name = e.args[0].value if isinstance(e.args[0], E.StringImm) else str(e.args[0])
        args = e.args[1:]
        k = self.uid()
        n = len(args)
        av, cv = f"kiln_pk_args_{k}", f"kiln_pk_codes_{k}"
        self.emit(f"/* call_packed {name} */")
        self.emit(f"KilnValue {av}[{max(n, 1)}];")
        self.emit(f"int32_t {cv}[{max(n, 1)}];")
        for i, a in enumerate(args):
            if isinstance(a, Buffer):
                shape, tensor = f"kiln_pk_shape_{k}_{i}", f"kiln_pk_tensor_{k}_{i}"
                dims = ", ".join(f"(int64_t)({self.visit(d)})" for d in a.shape) or "0"
                adt = parse_dtype(a.dtype)
                ptr = self._packed_buffer_ptr(e, a)
                self.emit(f"int64_t {shape}[{max(len(a.shape), 1)}] = {{{dims}}};")
                strides = self._packed_strides(a)
                st_name = "NULL"
                if strides is not None:
                    st_name = f"kiln_pk_strides_{k}_{i}"
                    vals = ", ".join(f"(int64_t)({self.visit(x)})" for x in strides)
                    self.emit(f"int64_t {st_name}[{len(strides)}] = {{{vals}}};")
                self.emit(f"DLTensor {tensor} = {{(void*){ptr}, {{1, 0}}, {len(a.shape)}, "
                          f"{{{adt.dl_code}, {adt.bits if not adt.is_bool else 8}, {adt.lanes}}}, {shape}, "
                          f"{st_name}, 0}};")
                self.emit(f"{av}[{i}].v_handle = &{tensor};")
                self.emit(f"{cv}[{i}] = KILN_ARG_DLTENSOR;")
                continue
            adt = parse_dtype(a.dtype)
            text = self.visit(a)
            if isinstance(a, E.StringImm):
                self.emit(f"{av}[{i}].v_handle = (void*){text};")
                self.emit(f"{cv}[{i}] = KILN_ARG_STR;")
            elif adt.is_handle:
                self.emit(f"{av}[{i}].v_handle = (void*)({text});")
                self.emit(f"{cv}[{i}] = KILN_ARG_HANDLE;")
            elif adt.lanes > 1:
                self.fail(e, "vector arguments to call_packed")
            elif adt.is_float:
                self.emit(f"{av}[{i}].v_float64 = (double)({text});")
                self.emit(f"{cv}[{i}] = KILN_ARG_FLOAT;")
            else:
                self.emit(f"{av}[{i}].v_int64 = (int64_t)({text});")
                self.emit(f"{cv}[{i}] = {'KILN_ARG_UINT' if adt.is_uint else 'KILN_ARG_INT'};")
        rv, rc = f"kiln_pk_ret_{k}", f"kiln_pk_rcode_{k}"
        self.emit(f"KilnValue {rv};")
        self.emit(f"{rv}.v_int64 = 0;")
        self.emit(f"int32_t {rc} = KILN_ARG_NULL;")
        self.emit("if (__kiln_call_packed == NULL) {")
        self.indent += 1
        self.emit_error(c_string(f"call_packed {name}: no function registry is attached to this library"))
        self.indent -= 1
        self.emit("}")
        self.emit(f"if (__kiln_call_packed({c_string(name)}, {av}, {cv}, {n}, &{rv}, &{rc}) != 0) {{")
        self.indent += 1
        self.emit_error(None)
        self.indent -= 1
        self.emit("}")
        if result_dtype is None:
            return None
        t = scalar_ctype(result_dtype)
        res = f"kiln_pk_result_{k}"
        self.emit(f"{t} {res} = 0;")
        self.emit(f"if ({rc} == KILN_ARG_FLOAT) {res} = ({t}){rv}.v_float64;")
        self.emit(f"else if ({rc} == KILN_ARG_INT || {rc} == KILN_ARG_UINT) {res} = ({t}){rv}.v_int64;")
        return res

    @_prints("tvm_call_packed", "tvm_call_packed_lowered")
    def _packed_call_expr(self, e, _name):
        """A packed call inside an expression: a GCC statement expression yielding the return value."""
        saved_lines, saved_indent = self.lines, self.indent
        self.lines, self.indent = [], 0
        res = self._packed_call_lines(e, e.dtype)
        inner = " ".join(line.strip() for line in self.lines)
        self.lines, self.indent = saved_lines, saved_indent
        return f"({{ {inner} {res}; }})"

    # ------------------------------------------------------------------ analysis
    def _is_nonneg(self, e) -> bool:
        """Whether ``e`` is provably >= 0 (constants, shape vars, loop vars from 0, + * / % of such).
        An and/or tree over the operands, decided left to right from an explicit stack (any depth)."""
        stack = []  # (True for "all operands", False for "any operand", iterator over the rest)
        while True:
            rule, arg = self._nonneg_rule(e)
            if rule is not None:
                it = iter(arg)
                stack.append((rule, it))
                e = next(it)
                continue
            val = arg
            while stack:
                rule, it = stack[-1]
                nxt = next(it, None) if val == rule else None  # all: False decides; any: True decides
                if nxt is None:
                    stack.pop()
                    continue
                e = nxt
                break
            else:
                return val

    def _nonneg_rule(self, e):
        """(True: all of / False: any of, operands) for an operator, or (None, the answer) for a leaf."""
        if isinstance(e, E.IntImm):
            return None, e.value >= 0
        if isinstance(e, E.SizeVar):
            return None, True
        if isinstance(e, E.Var):
            return None, id(e) in self.nonneg
        if isinstance(e, (E.Add, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod, E.Min)):
            return True, (e.a, e.b)
        if isinstance(e, E.Max):
            return False, (e.a, e.b)
        if isinstance(e, E.Ramp):
            return True, (e.base, e.stride)
        if isinstance(e, E.Broadcast):
            return True, (e.value,)
        if isinstance(e, E.Cast):
            src = parse_dtype(e.value.dtype)
            if not (src.is_integral and parse_dtype(e.dtype).bits >= src.bits):
                return None, False
            return True, (e.value,)
        if isinstance(e, E.Select):
            return True, (e.true_value, e.false_value)
        return None, self._analyzer_nonneg(e)

    def _analyzer_nonneg(self, e) -> bool:
        if parse_dtype(e.dtype).lanes != 1:
            return False
        try:
            return bool(self.analyzer.can_prove_greater_equal(e, 0))
        except Exception:  # the analyzer is an optimization aid only
            return False


def _prototype_ctype(dtype) -> str:
    """The C type of a parameter or result in a declared extern prototype (handles as ``void*``)."""
    return "void*" if parse_dtype(dtype).is_handle else scalar_ctype(dtype)


def _is_number_const(e) -> bool:
    """A float constant (or a broadcast of one) that is not NaN."""
    if isinstance(e, E.Broadcast):
        e = e.value
    return isinstance(e, E.FloatImm) and e.value == e.value


_LIBRARY_NAMES = set(LIBM.values()) | {n + "f" for n in LIBM.values()} | {
    "memcpy", "memset", "free", "malloc", "aligned_alloc", "isnan", "isinf", "isfinite", "abs", "strlen",
    "clock_gettime", "omp_get_max_threads", "omp_get_num_threads", "omp_get_thread_num"}
_LANGUAGE_KEYWORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
    "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed",
    "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool",
    "true", "false", "main", "args", "num_args"}


def c_function_name(symbol: str) -> tuple[str, str | None]:
    """The C identifier of a kernel and, when it differs from the exported symbol (a C keyword such as
    ``double``, or ``main``), a prototype binding it to the symbol with an asm label."""
    if symbol in _LIBRARY_NAMES or symbol.startswith("__kiln") or symbol.startswith("kiln_"):
        raise CodegenError(
            f"function name {symbol!r} clashes with a C library or kiln runtime symbol of that name; "
            "choose another name (e.g. name='my_{symbol}')".replace("{symbol}", symbol)
        )
    if symbol in _LANGUAGE_KEYWORDS:
        c_name = f"kiln_fn_{symbol}"
        return c_name, f'int32_t {c_name}(KilnValue* args, int32_t num_args) __asm__("{symbol}");'
    return symbol, None


def lane_of(e, k: int):
    """The scalar expression of lane ``k`` of vector expression ``e`` (scalars are returned as is)."""
    dt = parse_dtype(e.dtype)
    if dt.lanes == 1:
        return e
    if isinstance(e, E.Ramp):
        return e.base + e.stride * k
    if isinstance(e, E.Broadcast):
        return e.value
    if isinstance(e, E.BufferLoad):
        return E.BufferLoad(e.buffer, [lane_of(i, k) for i in e.indices])
    if isinstance(e, E.BinaryOpExpr):
        return type(e)(lane_of(e.a, k), lane_of(e.b, k))
    if isinstance(e, E.Not):
        return E.Not(lane_of(e.a, k))
    if isinstance(e, E.Select):
        return E.Select(lane_of(e.condition, k), lane_of(e.true_value, k), lane_of(e.false_value, k))
    if isinstance(e, E.Cast):
        return E.Cast(str(dt.element_of()), lane_of(e.value, k))
    if isinstance(e, E.Call):
        return E.Call(str(dt.element_of()), e.op, [lane_of(a, k) if isinstance(a, E.PrimExpr) else a
                                                   for a in e.args])
    if isinstance(e, E.Let) and parse_dtype(e.value.dtype).lanes == 1:
        return E.Let(e.var, e.value, lane_of(e.body, k))
    if isinstance(e, E.Shuffle):
        idx = e.indices[k]
        for v in e.vectors:
            n = parse_dtype(v.dtype).lanes
            if idx < n:
                return lane_of(v, idx)
            idx -= n
    raise CodegenError(f"cannot take lane {k} of vector expression `{e}`")


def int_literal(value: int, dtype) -> str:
    dt = parse_dtype(dtype)
    if dt.is_bool:
        return "true" if value else "false"
    if dt.is_handle:
        return "NULL" if value == 0 else f"((void*){value})"
    if dt.lanes > 1:
        raise CodegenError(f"vector immediate of dtype {dtype}")
    if dt.is_uint:
        if dt.bits == 64:
            return f"UINT64_C({value})"
        return f"{value}u" if dt.bits == 32 else f"(({scalar_ctype(dt)}){value})"
    if dt.bits == 64:
        return "INT64_MIN" if value == -(2 ** 63) else f"INT64_C({value})"
    if dt.bits == 32:
        if value == -(2 ** 31):
            return "(-2147483647 - 1)"
        return f"({value})" if value < 0 else str(value)
    return f"(({scalar_ctype(dt)}){value})"


def float_literal(value: float, dtype) -> str:
    dt = parse_dtype(dtype)
    if math.isnan(value):
        text = "NAN"
    elif math.isinf(value):
        text = "INFINITY" if value > 0 else "(-INFINITY)"
    else:
        text = repr(float(value))
        if dt.bits == 32:
            text += "f"
        if value < 0:
            text = f"({text})"
    if dt.bits == 16:
        return f"((_Float16){text})"
    if dt.bits == 64 and (math.isinf(value) or math.isnan(value)):
        return f"((double){text})"
    return text


def max_vector_bytes_for(target=None) -> int:
    """Widest vector the generated C uses: the target's SIMD register width in bytes."""
    flags = target_cpu_flags(target)
    if "avx512f" in flags:
        return 64
    if "avx" in flags or "avx2" in flags:
        return 32
    return 16


class CodeGenC:
    """Turns PrimFuncs into one C translation unit; ``add_function`` per kernel, then ``finish``."""

    def __init__(self, max_vector_bytes: int = 32):
        self.support = CSupport(max_vector_bytes)
        self.functions: list[str] = []
        self.metadata: list[dict] = []
        self._symbols: set = set()

    def add_function(self, func, symbol: str | None = None) -> dict:
        symbol = symbol or func.attrs.get("global_symbol") or "default_function"
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", symbol):
            raise CodegenError(f"function name {symbol!r} is not a valid C identifier")
        if symbol in self._symbols:
            raise CodegenError(f"two functions are named {symbol!r} in one module")
        self._symbols.add(symbol)
        text, meta = FunctionCodegen(self.support, func, symbol).generate()
        self.functions.append(text)
        self.metadata.append(meta)
        return meta

    def finish(self) -> str:
        return "\n".join([C_PRELUDE, self.support.preamble(), "\n\n".join(self.functions), ""])


def c_lowering_passes(target=None, max_vector_bytes: int | None = None) -> list:
    """The TIR passes the C backend runs right before printing: register promotion for the target's SIMD
    width (docs/targets.md). ``LowerIntrin`` is not among them: ``kiln.build`` has run it already."""
    if max_vector_bytes is None:
        max_vector_bytes = max_vector_bytes_for(target)
    return [PromoteRegisters(max_vector_bytes)]


def codegen_c(funcs, target=None) -> tuple[str, list]:
    """C source and metadata for ``funcs``: a list of (symbol, PrimFunc) pairs whose intrinsics are lowered
    (``LowerIntrin``), run through :func:`c_lowering_passes` and printed by :class:`CodeGenC`."""
    max_vector_bytes = max_vector_bytes_for(target)
    passes = c_lowering_passes(target, max_vector_bytes)
    gen = CodeGenC(max_vector_bytes)
    for symbol, func in funcs:
        for p in passes:
            func = p(func)
        gen.add_function(func, symbol)
    return gen.finish(), gen.metadata
