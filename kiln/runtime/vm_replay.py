"""The VM's fast path for straight-line functions: each instruction remembers what it made on the previous
call, so a call at the shapes of the previous one costs little more than the kernel calls themselves.

A function without jumps, calls or closures (the ``main`` of a dataflow model: BERT, ResNet) runs each
instruction once per call, so per instruction (by program counter) the runner keeps:

- ``alloc_tensor*``: the tensor it allocated, reused while the shape is the same and it did not escape;
- ``kernel_shapes`` / ``shape_of*`` / ``load_consti``: the result for the same input shapes;
- ``invoke_packed``: the kernel bound to its arguments (``KernelFunction.bind``: shapes checked once); when
  every argument is the very object of the previous call (reused tensors, constants, an unchanged input)
  the bound call runs with no checks, like the graph executor's plan.

A tensor reachable from the function's result escapes to the caller: its instruction forgets it, so the
next call allocates a new one and results the caller keeps are never overwritten (the VM's contract).
Functions with control flow or calls run on the general dispatch loop (a recursive function would have
several live frames per instruction).
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..error import KilnError
from . import ndarray as nd
from .kernel import KernelFunction
from .ndarray import NDArray
from .vm_shape_funcs import run_shape_func

#: the opcodes a replayed function may contain (no jumps, calls, closures or fatal)
STRAIGHT_OPS = frozenset({"move", "ret", "load_const", "load_consti", "alloc_tensor", "kernel_shapes",
                          "alloc_tensor_reg", "invoke_packed", "alloc_adt", "get_field", "get_tag", "tag_eq",
                          "shape_of", "shape_of_t", "shape_func", "reshape_tensor"})


def is_straight_line(func) -> bool:
    return all(ins[0] in STRAIGHT_OPS for ins in func.instructions) and bool(func.instructions) and \
        func.instructions[-1][0] == "ret" and sum(ins[0] == "ret" for ins in func.instructions) == 1


#: plans kept per function (input signatures seen most recently); each keeps its own intermediate tensors
MAX_PLANS = 4


class _Stale(Exception):
    """A plan's recorded data-dependent shape differs this call: run the instructions instead."""


def _signature(args: list):
    """Shapes and dtypes of the arguments (None: an argument that is not a tensor: no plan)."""
    sig = []
    for a in args:
        if not isinstance(a, NDArray):
            return None
        sig.append((a._shape, a.dtype))
    return tuple(sig)


def _output_positions(kernel, n_args: int):
    """Positions of a kernel's output arguments (None: not a compiled kernel with metadata)."""
    if not isinstance(kernel, KernelFunction):
        return None
    args = kernel.meta.get("args", [])
    if len(args) != n_args:
        return None
    return {i for i, a in enumerate(args) if a.get("output")}


def data_dependent_regs(func, kernels, n_args: int) -> set:
    """Registers whose value may depend on the *values* of the inputs, not only on their shapes and dtypes.
    Everything else (constants, shapes, and what kernels compute from those only: BERT's position ids and
    attention-mask broadcast) is fixed by the input signature, so a plan computes it once."""
    dep = set(range(n_args))
    for ins in func.instructions:
        op = ins[0]
        if op == "invoke_packed":
            regs = list(ins[2])
            outs = _output_positions(kernels[ins[1]], len(regs))
            if outs is None:  # unknown kernel: any argument may be read and written
                if any(r in dep for r in regs):
                    dep.update(regs)
            elif any(r in dep for i, r in enumerate(regs) if i not in outs):
                dep.update(regs[i] for i in outs)
        elif op in ("move", "get_tag"):
            if ins[1] in dep:
                dep.add(ins[2])
        elif op in ("get_field", "tag_eq", "reshape_tensor"):
            if ins[1] in dep:
                dep.add(ins[3])
        elif op == "alloc_adt":
            if any(r in dep for r in ins[2]):
                dep.add(ins[3])
        elif op == "shape_func":
            if any(r in dep for r in ins[3]):
                dep.update(ins[4])
        # alloc_tensor* (fresh storage, written by a kernel), shape_of*, kernel_shapes, load_const*: shapes only
    return dep


def _alloc_step(reg: int, t: NDArray) -> tuple:
    """A prologue allocation like the recorded tensor ``t``."""
    return ("alloc", reg, tuple(t._shape), t._arr.dtype, t.dtype, int(t._arr.nbytes))


def plan_storage(instructions: list, escaped: set, regs: list) -> dict:
    """Storage sharing for one plan (the graph executor's memory planning, made per input signature): the
    tensors that ``alloc_tensor*`` instructions made for the recorded call and that stay inside the function
    get buffers reused once their last reader has run, so a call's intermediates occupy about what a static
    build's planned storage does (the recording keeps one buffer per instruction: for a 12-layer encoder
    that was every layer's activations at once) and stay warm in cache. Returns register -> new tensor.

    Registers related by ``move`` / ``reshape_tensor`` (views) share a lifetime; registers that go into or
    come out of an ADT (``alloc_adt`` / ``get_field``), registers assigned twice, and escaping allocations
    (the caller's results, fresh each call) keep their own buffers."""
    from .vm import _regs_of
    root: dict = {}

    def find(r):
        while root.get(r, r) != r:
            r = root[r]
        return r
    defs: dict = {}
    pinned: set = set()
    for pc, ins in enumerate(instructions):
        op = ins[0]
        if op in ("alloc_tensor", "alloc_tensor_reg"):
            defs[ins[3]] = defs.get(ins[3], 0) + 1
        elif op == "reshape_tensor" or op == "move":
            src, dst = (ins[1], ins[3]) if op == "reshape_tensor" else (ins[1], ins[2])
            a, b = find(src), find(dst)
            if a != b:
                root[b] = a
        elif op in ("alloc_adt", "get_field"):
            pinned.update(_regs_of(ins))
    pinned = {find(r) for r in pinned}
    last: dict = {}
    for pc, ins in enumerate(instructions):
        for r in _regs_of(ins):
            last[find(r)] = pc
    free: list = []        # [nbytes, raw uint8 buffer]
    release: dict = {}     # pc -> buffers free after it
    out: dict = {}
    for pc, ins in enumerate(instructions):
        if ins[0] in ("alloc_tensor", "alloc_tensor_reg") and pc not in escaped:
            reg = ins[3]
            t = regs[reg]
            rt = find(reg)
            if isinstance(t, NDArray) and defs.get(reg) == 1 and rt not in pinned:
                nbytes = max(int(t._arr.nbytes), 1)
                fits = [b for b in free if b[0] >= nbytes]
                if fits:
                    buf = min(fits, key=lambda b: b[0])
                    free.remove(buf)
                else:
                    buf = [nbytes, nd._aligned_empty((nbytes,), np.dtype(np.uint8), huge=True)]
                out[reg] = NDArray(buf[1][:int(t._arr.nbytes)].view(t._arr.dtype).reshape(t._shape))
                release.setdefault(max(last.get(rt, pc), pc), []).append(buf)
        free.extend(release.pop(pc, ()))
    return out


def _private_copy(t: NDArray) -> NDArray:
    arr = nd._aligned_empty(t._shape, t._arr.dtype)
    np.copyto(arr, t._arr)
    return NDArray(arr)


class _Plan:
    """What one call at given input shapes does, precomputed from a recorded call (see the module doc).

    - kernels whose inputs depend on the input shapes only (``data_dependent_regs``) ran in the recording;
      their outputs are kept (private copies) and they never run again for this signature; the same holds
      for data-dependent shape functions whose operands are such values;
    - every other kernel is one step of a native call sequence (the graph executor's plan runner), its ctypes
      argument array prepared once: arguments that are new objects each call (the inputs, tensors that escape
      to the caller, views of those) have their data pointers written into the arrays at the start of a call
      (the signature fixes their shapes and dtypes, the checks the arrays were prepared with still hold);
    - in Python per call: allocation of the escaping tensors (fresh each call, so kept results are never
      overwritten), the pointer writes, data-dependent shape functions over data (re-evaluated and compared
      with the recording: a different result abandons the plan), copies into escaping reshapes, and
      moves / tuple building of per-call values."""

    def __init__(self, runner: "ReplayRunner", sig, regs: list, escaped: set):
        from .graph_executor import PLAN_RUNNER_SYMBOL, _PlanStep
        self.sig = sig
        vm, f = runner.vm, runner.func
        kernels = vm._kernels
        lib = vm.exe.lib
        native = lib._find_function(PLAN_RUNNER_SYMBOL, True) if lib is not None else None
        self._step_type = _PlanStep
        self._native = native if isinstance(native, KernelFunction) else None
        self.regs = list(regs)
        self.planned = plan_storage(f.instructions, escaped, regs)
        for r, t in self.planned.items():
            self.regs[r] = t
        n_args = len(sig)
        dep = runner.data_dependent()
        varying = set(range(n_args))   # registers holding a new object each call
        known = set(range(n_args))     # varying registers set before the steps run (pointer-patchable)
        prologue: list = []            # ("alloc", dst, shape, np dtype) | ("view", src, shape, dst)
        patches: list = []             # (ctypes argument array, slot, register)
        steps: list = []
        segment: list = []             # (kernel, prepared args buffer) of consecutive native kernel calls
        keep: list = []
        self.precomputed = 0
        self.skipped_shape_funcs = 0

        def flush():
            if segment:
                steps.append(self._segment(list(segment), keep))
                segment.clear()
        for pc, ins in enumerate(f.instructions):
            op = ins[0]
            if op == "invoke_packed":
                k, arg_regs = kernels[ins[1]], list(ins[2])
                outs = _output_positions(k, len(arg_regs))
                var_pos = [i for i, r in enumerate(arg_regs) if r in varying]
                if outs is not None and not var_pos and not any(
                        r in dep for i, r in enumerate(arg_regs) if i not in outs):
                    # shape-derived: computed by the recording, kept private to this plan (the runner's
                    # per-instruction memory may reuse the recorded tensors for another signature)
                    for i in outs:  # (from the recording: a planned buffer holds no data yet)
                        self.regs[arg_regs[i]] = _private_copy(regs[arg_regs[i]])
                    self.precomputed += 1
                    continue
                if not isinstance(k, KernelFunction) or any(arg_regs[i] not in known for i in var_pos):
                    flush()
                    steps.append(("call", k, arg_regs))
                    continue
                # varying arguments are patched in: prepare with the recorded objects (same shapes/dtypes)
                buf = k.prepare(*[regs[r] if r in varying else self.regs[r] for r in arg_regs])
                patches.extend((buf, i, arg_regs[i]) for i in var_pos)
                segment.append((k, buf))
            elif op in ("alloc_tensor", "alloc_tensor_reg"):
                if pc in escaped:
                    prologue.append(_alloc_step(ins[3], regs[ins[3]]))
                    varying.add(ins[3])
                    known.add(ins[3])
            elif op == "reshape_tensor" and pc not in escaped and ins[1] not in varying:
                # a view of the source (no copy): within a call every instruction has a buffer of its own,
                # written once by its kernel, so the view and its source never disagree (the graph
                # executor's reshapes alias their input the same way)
                src = self.regs[ins[1]]
                self.regs[ins[3]] = NDArray(src._arr.reshape(tuple(regs[ins[3]]._shape)))
            elif op == "reshape_tensor" and pc not in escaped and ins[1] in known:
                prologue.append(("view", ins[1], tuple(regs[ins[3]]._shape), ins[3]))
                varying.add(ins[3])
                known.add(ins[3])
            elif op == "reshape_tensor":
                flush()
                fresh = pc in escaped
                shape = tuple(regs[ins[3]]._shape)
                if fresh:
                    prologue.append(_alloc_step(ins[3], regs[ins[3]]))
                    known.add(ins[3])
                steps.append(("reshape", ins[1], shape, ins[3]))
                if fresh:  # otherwise the copy goes to the recorded buffer, stable like a kernel output
                    varying.add(ins[3])
            elif op == "shape_func":
                if not any(r in dep for r in ins[3]):
                    self.skipped_shape_funcs += 1  # its operands are fixed by the signature
                    continue
                flush()
                steps.append(("shape_func", ins[1], ins[2], list(ins[3]), [regs[r] for r in ins[4]]))
            elif op == "move" or op == "get_field":
                if ins[1] in varying:
                    flush()
                    steps.append((op, ins[1], ins[2], ins[-1]))
                    varying.add(ins[-1])
            elif op == "alloc_adt":
                if any(r in varying for r in ins[2]):
                    flush()
                    steps.append(("adt", ins[1], list(ins[2]), ins[3]))
                    varying.add(ins[3])
            elif op == "ret":
                flush()
                self.ret = ins[1]
            # kernel_shapes, shape_of*, load_const*, get_tag, tag_eq: the recorded values hold (same shapes)
        for r in varying:
            self.regs[r] = None  # the caller's tensors (inputs, escaped results) are not kept alive by the plan
        self.prologue = prologue
        self.patches = patches
        self.steps = steps
        self._keep = keep

    def _segment(self, calls: list, keep: list):
        if self._native is None or len(calls) == 1:
            return ("kernels", [(k._fn, buf, k._total, k) for k, buf in calls])
        steps = (self._step_type * len(calls))()
        for i, (k, buf) in enumerate(calls):
            steps[i].fn = k.address
            steps[i].args = ctypes.addressof(buf)
            steps[i].num_args = k._total
        args = (ctypes.c_int64 * 2)(ctypes.addressof(steps), len(calls))
        keep.append((steps, args, calls))
        return ("native", self._native._fn, args, [k for k, _ in calls])

    def run(self, args: list, pool):
        regs = list(self.regs)
        regs[:len(args)] = args
        for st in self.prologue:
            if st[0] == "alloc":
                regs[st[1]] = pool.tensor_of(st[2], st[3], st[4], st[5])
            else:  # a view of a per-call tensor
                src = regs[st[1]]
                view = src._arr.reshape(st[2])
                # a compact writable source: the view has its address and size (asking numpy costs ~3 us)
                regs[st[3]] = NDArray._compact(view, st[2], src._dtype, src._ptr, src._hi - src._lo, src._device) \
                    if src._out_ok else NDArray(view)
        for buf, slot, r in self.patches:
            buf[slot] = regs[r]._ptr
        for st in self.steps:
            kind = st[0]
            if kind == "native":
                rc = st[1](st[2], 2)
                if rc:
                    if 0 < rc <= len(st[3]):
                        st[3][rc - 1]._raise_failure(rc)
                    raise KilnError(f"VM: the plan runner failed (code {rc})")
            elif kind == "kernels":
                for fn, buf, total, k in st[1]:
                    if fn(buf, total):
                        k._raise_failure(-1)
            elif kind == "call":
                st[1](*[regs[r] for r in st[2]])
            elif kind == "reshape":
                np.copyto(regs[st[3]]._arr, regs[st[1]]._arr.reshape(st[2]))
            elif kind == "shape_func":
                shapes = run_shape_func(st[1], st[2], [regs[r]._arr for r in st[3]])
                if [tuple(x) for x in shapes] != [tuple(x) for x in st[4]]:
                    raise _Stale()
            elif kind == "move":
                regs[st[3]] = regs[st[1]]
            elif kind == "get_field":
                regs[st[3]] = regs[st[1]][st[2]]
            else:  # adt
                from .vm import ADT
                regs[st[3]] = ADT(st[1], [regs[r] for r in st[2]])
        return regs[self.ret]


class ReplayRunner:
    """Runs one straight-line VM function, remembering per instruction (see the module docstring)."""

    def __init__(self, vm, func):
        self.vm = vm
        self.func = func
        self.made: dict = {}    # pc -> value made (tensor, shape tuple, shape tensor)
        self.keys: dict = {}    # pc -> the key ``made[pc]`` is valid for
        self.bound: dict = {}   # pc -> (argument list, bound run)
        self.plans: dict = {}   # input signature -> _Plan (each holds its own intermediate tensors)
        self._escaped_pcs: set = set()
        self._dep = None

    def data_dependent(self) -> set:
        """The function's registers whose values depend on input data (``data_dependent_regs``)."""
        if self._dep is None:
            self._dep = data_dependent_regs(self.func, self.vm._kernels, len(self.func.params))
        return self._dep

    def run(self, args: list):
        sig = _signature(args)
        plan = self.plans.get(sig) if sig is not None else None
        if plan is not None:
            try:
                return plan.run(args, self.vm.pool)
            except _Stale:  # kernels are pure: the instructions below redo the call from the start
                del self.plans[sig]
        result, regs = self._run(args)
        if sig is not None:
            if len(self.plans) >= MAX_PLANS:
                self.plans.pop(next(iter(self.plans)))
            self.plans[sig] = _Plan(self, sig, regs, set(self._escaped_pcs))
        return result

    def _run(self, args: list):
        vm, f = self.vm, self.func
        kernels, consts, pool = vm._kernels, vm._consts, vm.pool
        made, keys, bound = self.made, self.keys, self.bound
        regs = [None] * f.num_regs
        regs[:len(args)] = args
        for pc, ins in enumerate(f.instructions):
            op = ins[0]
            if op == "invoke_packed":
                a = [regs[r] for r in ins[2]]
                hit = bound.get(pc)
                if hit is not None and all(x is y for x, y in zip(hit[0], a)):
                    hit[1]()
                else:
                    run = kernels[ins[1]].bind(*a)
                    bound[pc] = (a, run)
                    run()
            elif op == "alloc_tensor" or op == "alloc_tensor_reg":
                if op == "alloc_tensor":
                    shape = ins[1]
                else:
                    shape = regs[ins[1]]
                    if isinstance(shape, NDArray):
                        shape = tuple(int(x) for x in shape.numpy().reshape(-1))
                key = (tuple(shape), ins[2])
                t = made.get(pc)
                if t is None or keys[pc] != key:
                    t = made[pc] = pool.tensor(key[0], ins[2])
                    keys[pc] = key
                regs[ins[3]] = t
            elif op == "kernel_shapes":
                key = tuple(regs[r]._shape for r in ins[2])
                if keys.get(pc) != key:
                    made[pc] = vm._shape_func(ins[1])([regs[r] for r in ins[2]])
                    keys[pc] = key
                for r, s in zip(ins[3], made[pc]):
                    regs[r] = s
            elif op == "load_const":
                regs[ins[2]] = consts[ins[1]]
            elif op == "move":
                regs[ins[2]] = regs[ins[1]]
            elif op == "shape_of" or op == "shape_of_t":
                src = regs[ins[1]]
                dtype = "int64" if op == "shape_of" else ins[2]
                key = (src.shape, dtype)
                if keys.get(pc) != key:
                    made[pc] = nd.array(np.array(src.shape, dtype=dtype))
                    keys[pc] = key
                regs[ins[-1]] = made[pc]
            elif op == "load_consti":
                if pc not in made:
                    made[pc] = nd.array(np.array(ins[1], dtype="int64"))
                regs[ins[2]] = made[pc]
            elif op == "shape_func":  # values in, shapes out: cheap, and may depend on data
                shapes = run_shape_func(ins[1], ins[2], [regs[r]._arr for r in ins[3]])
                for r, sh in zip(ins[4], shapes):
                    regs[r] = sh
            elif op == "alloc_adt":
                from .vm import ADT
                regs[ins[3]] = ADT(ins[1], [regs[r] for r in ins[2]])
            elif op == "get_field":
                regs[ins[3]] = regs[ins[1]][ins[2]]
            elif op == "get_tag":
                regs[ins[2]] = regs[ins[1]].tag
            elif op == "tag_eq":
                regs[ins[3]] = regs[ins[1]].tag == ins[2]
            elif op == "reshape_tensor":
                t, shape = regs[ins[1]], regs[ins[2]]
                if isinstance(shape, NDArray):
                    shape = tuple(int(x) for x in shape.numpy().reshape(-1))
                key = (tuple(shape), t.dtype)
                out = made.get(pc)
                if out is None or keys[pc] != key:
                    out = made[pc] = pool.tensor(key[0], t.dtype)  # a copy: pooled buffers never alias
                    keys[pc] = key
                np.copyto(out._arr, t._arr.reshape(key[0]))
                regs[ins[3]] = out
            else:  # ret (the last instruction)
                result = regs[ins[1]]
                self._escape(result)
                return result, regs
        raise AssertionError("unreachable: a straight-line function ends with ret")

    def _escape(self, value) -> None:
        """Forget every remembered value reachable from the result (it now belongs to the caller)."""
        escaped = set()
        todo = [value]
        while todo:
            v = todo.pop()
            if isinstance(v, NDArray):
                escaped.add(id(v))
            elif isinstance(v, (tuple, list)):
                todo.extend(v)
            elif hasattr(v, "captured"):
                todo.extend(v.captured)
        self._escaped_pcs = set()
        if not escaped:
            return
        for pc in [pc for pc, v in self.made.items() if id(v) in escaped]:
            self._escaped_pcs.add(pc)
            del self.made[pc]
            self.keys.pop(pc, None)
        # a bound call over an escaped tensor is rebound next time anyway: dropping it now leaves the
        # caller the only owner, so the tensor's buffer returns to the pool as soon as the caller drops it
        for pc in [pc for pc, (a, _) in self.bound.items() if any(id(x) in escaped for x in a)]:
            del self.bound[pc]
