"""Which parallel loops of a lowered Relay kernel really open an OpenMP region.

A parallel region costs a fork and a join: a few microseconds on an idle machine, but on a loaded one the
join waits until every worker thread has been scheduled, often milliseconds. A graph of small kernels (an
MLP at batch 1) then spends almost all its time in joins: measured on a 2-core machine at load 8-10, the
MLP ran 0.07 ms of CPU per call single-threaded but 1.8 ms wall with two threads. So, like PyTorch's grain
size, a parallel loop whose estimated work is small runs serially.

Work is estimated on the loop nest before lowering: the number of statement executions (stores and
evaluations) under the loop, i.e. the product of the loop extents above each store summed over the stores
(vector lanes count as iterations; loops of unknown extent count as large). A store or evaluation of a
tensorized intrinsic, an extern call of a vector type such as the int8 kernels' ``c = kiln_dot4_u8s8(c, a, w)``
on 8 int32 lanes (32 multiply-adds in three instructions), counts its lanes: counted as one, an int8 1x1 conv
of ~0.1 ms on one core came to a quarter of the threshold and ran serially while the fp32 conv of the same
layer ran on every core. The threshold is the PassContext
config ``relay.backend.parallel_min_work`` (default :data:`DEFAULT_MIN_WORK`), or ``$KILN_PARALLEL_MIN_WORK``;
0 keeps every parallel loop. Each kernel's PrimFunc records its estimate in the attr ``kiln.work``.

A loop that reads at least ``relay.backend.parallel_min_read_bytes`` (default :data:`DEFAULT_MIN_READ_BYTES`, 1 MiB;
or ``$KILN_PARALLEL_MIN_READ_BYTES``) of the kernel's buffers stays parallel too, whatever its work: a dense layer at batch 1 does one multiply-add per weight
(784 x 512 weights: 401K iterations, below the work threshold) but streams 1.6 MB of weights, and a core
streams far slower than two: on a 16-core Intel Emerald Rapids VM (2 threads, session 14) the MLP 784-512-512-10
at batch 1 took 0.114 ms serial against ONNX Runtime's 0.051, and 0.035 with its two large denses parallel (on
the 2-core Zen 5 VM 0.027 -> 0.021; its first call after a 50 ms pause 0.141 -> 0.152, the worker's wake-up). Bytes read are counted per input buffer as the smaller of the buffer's size
and its loads (executions x element size): a weight read once per output row counts once, a gathered row of an
embedding table counts only the rows gathered. Each kernel records its estimate in the attr ``kiln.read_bytes``.
"""
from __future__ import annotations

import os

from ...error import KilnError
from ...runtime.dtype import nbytes, parse_dtype
from ...tir import expr as E, stmt as S
from ...transform.config import register_pass_config
from ...transform import PassContext

# About 1M scalar iterations: ~50-250 us of vectorized work on one core, the point from which a fork/join is a
# small fraction of the kernel even when it is slow: on a busy machine, with workers that sleep at once
# (PASSIVE), or right after the process was idle, when a worker's vCPU must be woken. Measured: an MLP at batch
# 1 called every 50 ms took 1.3 ms per call with its dense kernels parallel (64K threshold), 0.08 ms serial.
# The 64K threshold helped BERT-base by ~3% on a warm, quiet machine (softmax and GELU); not worth that.
# Measured again on kiln's own pool (Nov 26 2026; AMD EPYC Zen 5, a 2-core VM shared with other sessions at load
# 1-4; 2 threads; 1<<20, 1<<18, 1<<16 and 1<<14 built in one process and timed in interleaved blocks, each after
# a >= 50 ms pause, the later runs in rotating order with 1<<20 built twice as a control: 0.88-1.18x between the
# twins). 1<<16: the int8 BERT of benchmarks/qnn_int8.py (29 of 48 kernels parallel instead of 26) 0.96-1.03x
# paired median over three runs, 1<<14 (37 of 48) 0.62-1.03x; mobilenet_v2 and the MLP at batch 64 within the
# control's spread; the MLP at batch 1 0.025-0.035 -> 0.016-0.031 ms per call back to back (0.91-1.6x), but its
# first call after a pause 0.73-0.95x (0.10-0.14 -> 0.12-0.19 ms); BERT-base fp32 (its layer norms and head
# transposes, 98K of work each, made parallel) 0.72-0.81x whenever the other sessions were busy (equal best times,
# 1.04x in the quietest stretch); 1<<18 makes no more BERT-base kernels parallel and gave the int8 BERT (its softmax)
# 1.01-1.11x, mobilenet_v2 0.89-1.11x. So the pool keeps the OpenMP threshold: no clear gain on a quiet machine, up to
# a quarter lost on a busy one.
DEFAULT_MIN_WORK = 1 << 20
# A loop reading this many bytes stays parallel (module doc): 1 MiB streams in ~40 us on one Emerald Rapids core
# (~25 GB/s from L3), ~15 us on one Zen 5 core, a fork/join costs a few.
DEFAULT_MIN_READ_BYTES = 1 << 20
UNKNOWN_EXTENT = 1 << 16
CONFIG_KEY = "relay.backend.parallel_min_work"
BYTES_CONFIG_KEY = "relay.backend.parallel_min_read_bytes"
# For annotation: a boolean PrimExpr of the kernel's shape variables; the C codegen emits it as the OpenMP
# ``if(...)`` clause, so a loop over run-time extents forks only when its work reaches the threshold, with one
# loop nest (an ``IfThenElse`` over a parallel and a serial copy doubled every later pass's work and the code).
PARALLEL_IF_ATTR = "kiln.parallel_if"

register_pass_config(CONFIG_KEY, int, DEFAULT_MIN_WORK,
                     "parallel loops of relay kernels with less estimated work than this run serially (0: never), "
                     "unless they read parallel_min_read_bytes")
register_pass_config(BYTES_CONFIG_KEY, int, DEFAULT_MIN_READ_BYTES,
                     "parallel loops of relay kernels that read this many bytes of the kernel's buffers stay "
                     "parallel whatever their work")


def _setting(key: str, env: str, default: int) -> int:
    ctx = PassContext.current()
    config = getattr(ctx, "config", None) or {}
    if key in config:
        return int(config[key])
    text = os.environ.get(env, "").strip()
    if text:
        try:
            return int(text)
        except ValueError:
            raise KilnError(f"${env} must be an integer, got {text!r}") from None
    return default


def min_work() -> int:
    """The threshold in effect: PassContext config, else $KILN_PARALLEL_MIN_WORK, else the default."""
    return _setting(CONFIG_KEY, "KILN_PARALLEL_MIN_WORK", DEFAULT_MIN_WORK)


def min_read_bytes() -> int:
    """The read-bytes threshold in effect: PassContext config, else $KILN_PARALLEL_MIN_READ_BYTES, else the
    default."""
    return _setting(BYTES_CONFIG_KEY, "KILN_PARALLEL_MIN_READ_BYTES", DEFAULT_MIN_READ_BYTES)


def _extent(loop: S.For) -> int:
    value = getattr(loop.extent, "value", None)
    return int(value) if isinstance(value, int) else UNKNOWN_EXTENT


def estimate_work(stmt) -> int:
    """Statement executions under ``stmt`` (see the module doc)."""
    if stmt is None:
        return 0
    if isinstance(stmt, S.For):
        return _extent(stmt) * estimate_work(stmt.body)
    if isinstance(stmt, S.SeqStmt):
        return sum(estimate_work(s) for s in stmt.seq)
    if isinstance(stmt, S.IfThenElse):
        return max(estimate_work(stmt.then_case), estimate_work(stmt.else_case))
    if isinstance(stmt, S.While):
        return UNKNOWN_EXTENT * max(1, estimate_work(stmt.body))
    body = getattr(stmt, "body", None)
    if isinstance(body, S.Stmt):
        return estimate_work(body)
    return _lanes(stmt)  # a store, an evaluation, an assert


_EXTERN_CALLS = ("tir.call_extern", "tir.call_pure_extern")


def estimate_read_bytes(stmt, inputs) -> int:
    """Bytes of the buffers ``inputs`` (their data vars) that ``stmt`` reads: per buffer, the smaller of its size
    and its loads' executions times the element size (see the module doc)."""
    from ...tir.stmt_functor import post_order_visit
    wanted = {id(v) for v in inputs}
    loaded: dict = {}
    sizes: dict = {}

    def add_loads(node, mult):
        def visit(n):
            if isinstance(n, E.BufferLoad) and id(n.buffer.data) in wanted:
                key = id(n.buffer.data)
                sizes.setdefault(key, nbytes(n.buffer.shape, n.buffer.dtype))
                loaded[key] = loaded.get(key, 0) + mult * parse_dtype(n.dtype).itemsize
        post_order_visit(node, visit)

    stack = [(stmt, 1)]
    while stack:
        node, mult = stack.pop()
        if node is None:
            continue
        if isinstance(node, S.For):
            stack.append((node.body, mult * _extent(node)))
        elif isinstance(node, S.SeqStmt):
            stack.extend((x, mult) for x in node.seq)
        elif isinstance(node, S.IfThenElse):
            stack.extend([(node.then_case, mult), (node.else_case, mult)])
        elif isinstance(node, S.While):
            stack.append((node.body, mult * UNKNOWN_EXTENT))
        elif isinstance(getattr(node, "body", None), S.Stmt):
            stack.append((node.body, mult))
        else:
            add_loads(node, mult)
    return sum(v if sizes.get(k) is None else min(v, sizes[k]) for k, v in loaded.items())


def _lanes(stmt) -> int:
    """Vector lanes of a store's or an evaluation's value when it is an extern call (a tensorized intrinsic),
    else 1 (plain vector arithmetic counts once per vector, as the threshold was measured)."""
    value = getattr(stmt, "value", None)
    dtype = getattr(value, "dtype", None)
    if not isinstance(value, E.Call) or getattr(value, "op", None) not in _EXTERN_CALLS or not isinstance(dtype, str):
        return 1
    try:
        return max(1, int(parse_dtype(dtype).lanes))
    except Exception:  # noqa: BLE001 - a handle or an unparsable dtype counts as one execution
        return 1


def _work_expr(stmt):
    """``estimate_work`` as an expression of the kernel's shape variables (None: not expressible)."""
    if stmt is None:
        return 0
    if isinstance(stmt, S.For):
        inner = _work_expr(stmt.body)
        if inner is None:
            return None
        ext = stmt.extent
        v = getattr(ext, "value", None)
        if isinstance(v, int):
            return v * inner if isinstance(inner, int) else inner * v
        ext = ext if ext.dtype == "int64" else E.Cast("int64", ext)
        return ext * inner
    if isinstance(stmt, S.SeqStmt):
        total = 0
        for x in stmt.seq:
            w = _work_expr(x)
            if w is None:
                return None
            total = total + w
        return total
    if isinstance(stmt, S.IfThenElse):
        a, b = _work_expr(stmt.then_case), _work_expr(stmt.else_case)
        if a is None or b is None:
            return None
        if isinstance(a, int) and isinstance(b, int):
            return max(a, b)
        return E.Max(_as_expr(a), _as_expr(b))
    if isinstance(stmt, S.While):
        return None
    body = getattr(stmt, "body", None)
    if isinstance(body, S.Stmt):
        return _work_expr(body)
    return _lanes(stmt)


def _as_expr(w):
    return E.IntImm("int64", w) if isinstance(w, int) else w


def _symbolic_work(extent, body):
    """The work of a parallel loop as an expression when it depends on the kernel's shape variables only
    (``SizeVar``s: a VM kernel's unknown dims), else None (a static loop, or extents over loop variables)."""
    from ...tir.analysis import undefined_vars
    w = _work_expr(S.For(E.Var("_w", "int64"), E.IntImm("int64", 0), extent, S.ForKind.SERIAL, body)
                   if body is not None else None)
    if w is None or isinstance(w, int):
        return None
    free = undefined_vars(w)
    if not free or not all(isinstance(v, E.SizeVar) for v in free):
        return None
    return w


class _Serialize:
    """Rebuilds a statement with every parallel loop of small work made serial."""

    def __init__(self, threshold: int, inputs=(), min_bytes: int = DEFAULT_MIN_READ_BYTES):
        self.threshold = threshold
        self.inputs = list(inputs)
        self.min_bytes = min_bytes
        self.changed = 0

    def visit(self, stmt):
        if stmt is None or not isinstance(stmt, S.Stmt):
            return stmt
        if isinstance(stmt, S.For):
            body = self.visit(stmt.body)
            kind = stmt.kind
            if kind == S.ForKind.PARALLEL:
                work = _symbolic_work(stmt.extent, body)
                if work is not None:  # a VM kernel over run-time extents: decided per call, in the pragma
                    self.changed += 1
                    cond = work >= E.IntImm("int64", self.threshold)
                    annotations = dict(stmt.annotations or {})
                    annotations[PARALLEL_IF_ATTR] = cond
                    return S.For(stmt.loop_var, stmt.min, stmt.extent, kind, body, stmt.thread_binding,
                                 annotations)
            if kind == S.ForKind.PARALLEL and (_extent(stmt) < 2 or (
                    _extent(stmt) * estimate_work(body) < self.threshold and
                    estimate_read_bytes(S.For(stmt.loop_var, stmt.min, stmt.extent, S.ForKind.SERIAL, body),
                                        self.inputs) < self.min_bytes)):
                kind = S.ForKind.SERIAL
                self.changed += 1
            if body is stmt.body and kind == stmt.kind:
                return stmt
            return S.For(stmt.loop_var, stmt.min, stmt.extent, kind, body, stmt.thread_binding, stmt.annotations)
        if isinstance(stmt, S.SeqStmt):
            seq = [self.visit(s) for s in stmt.seq]
            return stmt if all(a is b for a, b in zip(seq, stmt.seq)) else S.SeqStmt(seq)
        if isinstance(stmt, S.IfThenElse):
            then_case, else_case = self.visit(stmt.then_case), self.visit(stmt.else_case)
            if then_case is stmt.then_case and else_case is stmt.else_case:
                return stmt
            return S.IfThenElse(stmt.condition, then_case, else_case)
        body = getattr(stmt, "body", None)
        if isinstance(body, S.Stmt):
            new = self.visit(body)
            if new is not body:
                return stmt.with_fields(body=new)
        return stmt


def apply_parallel_policy(prim_func, threshold: int | None = None, min_bytes: int | None = None):
    """``prim_func`` with its small parallel loops made serial (less work than ``threshold`` and fewer bytes read
    than ``min_bytes``) and its ``kiln.work`` and ``kiln.read_bytes`` attrs set."""
    threshold = min_work() if threshold is None else int(threshold)
    min_bytes = min_read_bytes() if min_bytes is None else int(min_bytes)
    work = estimate_work(prim_func.body)
    inputs = [b.data for b in (prim_func.buffer_map or {}).values()]
    out = prim_func
    if threshold > 0:
        pass_ = _Serialize(threshold, inputs, min_bytes)
        body = pass_.visit(prim_func.body)
        if body is not prim_func.body:
            out = prim_func.with_body(body)
    return out.with_attr({"kiln.work": int(work), "kiln.read_bytes": int(estimate_read_bytes(prim_func.body, inputs))})
