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

import numpy as np

from . import ndarray as nd
from .ndarray import NDArray
from .vm_shape_funcs import run_shape_func

#: the opcodes a replayed function may contain (no jumps, calls, closures or fatal)
STRAIGHT_OPS = frozenset({"move", "ret", "load_const", "load_consti", "alloc_tensor", "kernel_shapes",
                          "alloc_tensor_reg", "invoke_packed", "alloc_adt", "get_field", "get_tag", "tag_eq",
                          "shape_of", "shape_of_t", "shape_func", "reshape_tensor"})


def is_straight_line(func) -> bool:
    return all(ins[0] in STRAIGHT_OPS for ins in func.instructions) and bool(func.instructions) and \
        func.instructions[-1][0] == "ret" and sum(ins[0] == "ret" for ins in func.instructions) == 1


class ReplayRunner:
    """Runs one straight-line VM function, remembering per instruction (see the module docstring)."""

    def __init__(self, vm, func):
        self.vm = vm
        self.func = func
        self.made: dict = {}    # pc -> value made (tensor, shape tuple, shape tensor)
        self.keys: dict = {}    # pc -> the key ``made[pc]`` is valid for
        self.bound: dict = {}   # pc -> (argument list, bound run)

    def run(self, args: list):
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
                return result
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
        if not escaped:
            return
        for pc in [pc for pc, v in self.made.items() if id(v) in escaped]:
            del self.made[pc]
            self.keys.pop(pc, None)
        # a bound call over an escaped tensor is rebound next time anyway: dropping it now leaves the
        # caller the only owner, so the tensor's buffer returns to the pool as soon as the caller drops it
        for pc in [pc for pc, (a, _) in self.bound.items() if any(id(x) in escaped for x in a)]:
            del self.bound[pc]
