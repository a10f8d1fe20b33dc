"""Control flow and lists of scripted TorchScript models (``torch.jit.script``), as TVM's PyTorch frontend.

- ``prim::Loop`` (for loops with a trip count, while loops with a condition, both) becomes a recursive local
  function (``relay.loops.while_loop``) over ``(i, cond, loop-carried values...)``. Lists the body changes
  (``aten::append``) and values computed outside it that it reads are extra loop variables, so the body
  refers only to its parameters. A loop-carried tensor whose shape changes between iterations gets ``Any``
  for the dims that change (the body is converted again with the wider types until they are stable).
- ``prim::If`` on a run-time condition becomes a Relay ``If`` whose value is the tuple of the block outputs
  (plus the lists the branches change).
- A list whose length is known only at run time (changed inside a loop or an If) is a Prelude ``List`` of
  tensors (:class:`DynList`); ``aten::stack``/``aten::cat`` of it go through static tensor arrays
  (``tensor_array_stack``/``tensor_array_concat`` + ``tensor_get_data``), ``aten::__getitem__`` is ``nth``,
  ``len`` is ``length``. Lists built in straight-line code stay Python lists (as in traced graphs).
- TorchScript ints, floats and bools computed at run time are 0-d Relay tensors (int64, float64, bool).

The result runs on the VM (``relay.vm.compile`` / ``relay.create_executor("vm", ...)``); ``relay.build``
refuses control flow and says so.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...error import FrontendError, OpNotImplemented
from ...ir.type import TensorType
from ...tir.expr import Any as _Any
from .. import expr as _expr
from .. import op as _op
from ..expr import Constant, Expr, TupleGetItem, Var
from .pytorch_utils import parse_schema
from ...ir.module import IRModule
from ..prelude import Prelude
from ..prelude_tensor_array import StaticTensorArrayOps

__all__ = ["DynList", "ScriptControlFlow", "LIST_MUTATORS"]

#: aten ops that change a list in place (TorchScript lists are mutable; its SSA value stays the same)
LIST_MUTATORS = ("aten::append", "aten::extend", "aten::add_")

_MAX_TYPE_ROUNDS = 4


def _var_name(debug_name: str) -> str:
    """A Relay-printable variable name from a TorchScript value name (``x.11`` -> ``x_11``)."""
    return "v_" + debug_name.replace(".", "_") if debug_name[:1].isdigit() else debug_name.replace(".", "_")


def writes_first_input(node) -> bool:
    """Whether ``node`` changes its first input in place: a list mutator, or an aten op whose schema marks
    ``self`` as written (``Tensor(a!) self``: ``add_``, ``mul_``, ``copy_``...)."""
    if len(list(node.inputs())) == 0:
        return False
    if node.kind() in LIST_MUTATORS and node.inputsAt(0).type().kind() == "ListType":
        return True
    if not node.kind().startswith("aten::"):
        return False
    try:
        schema = node.schema()
    except RuntimeError:
        return False
    if not schema or schema == "(no schema)":
        return False
    args = parse_schema(schema).arguments
    info = args[0].alias_info if args else None
    return bool(info is not None and info.is_write)


class DynList:
    """A TorchScript list whose length is a run-time value: ``expr`` of type Prelude ``List[elem_type]``
    (``elem_type`` None while nothing is known about the elements: an empty list)."""

    __slots__ = ("expr", "elem_type")

    def __init__(self, expr, elem_type=None):
        self.expr, self.elem_type = expr, elem_type

    def __repr__(self) -> str:
        return f"DynList({self.elem_type})"


def _dim_value(d):
    v = getattr(d, "value", d)
    return int(v) if isinstance(v, (int, np.integer)) else None


def _join_tensor(a: TensorType, b: TensorType, what: str) -> TensorType:
    if str(a.dtype) != str(b.dtype):
        raise FrontendError(f"{what} changes dtype inside the loop ({a.dtype} -> {b.dtype}); kiln needs one dtype")
    if len(a.shape) != len(b.shape):
        raise FrontendError(f"{what} changes rank inside the loop ({len(a.shape)} -> {len(b.shape)}); "
                            "kiln needs one rank")
    dims = []
    for x, y in zip(a.shape, b.shape):
        vx, vy = _dim_value(x), _dim_value(y)
        dims.append(x if (vx is not None and vx == vy) else _Any())
    return TensorType(dims, a.dtype)


def _same_type(a, b) -> bool:
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return str(a.dtype) == str(b.dtype) and len(a.shape) == len(b.shape) and all(
            _dim_value(x) == _dim_value(y) for x, y in zip(a.shape, b.shape))
    if a is None or b is None:
        return a is b
    return a == b


class ScriptControlFlow:
    """Mixed into the TorchScript importer: ``prim::Loop``, run-time ``prim::If`` and list mutation."""

    # -- the Prelude (created when the graph first needs it) ------------------------------------------
    @property
    def prelude(self):
        if getattr(self, "_prelude", None) is None:
            self._prelude = Prelude(IRModule())
            self.ctx.types._inf.mod = self._prelude.mod  # ADT constructors and globals type-check in it
        return self._prelude

    # -- values ---------------------------------------------------------------------------------------
    def _runtime_scalar(self, v, what: str):
        """A loop or branch value as a Relay expression (numbers become 0-d constants as TorchScript types
        them: int64, float64, bool)."""
        if isinstance(v, (Expr, DynList)):
            return v
        if isinstance(v, (bool, np.bool_)):
            return Constant(np.array(bool(v)))
        if isinstance(v, (numbers.Integral, np.integer)):
            return Constant(np.array(int(v), "int64"))
        if isinstance(v, (numbers.Real, np.floating)):
            return Constant(np.array(float(v), "float64"))
        if isinstance(v, list):
            return self.to_dyn_list(v, what)
        raise FrontendError(f"{what} is a {type(v).__name__}, which kiln cannot keep as a run-time value "
                            "(loop-carried and branch values must be tensors, numbers or lists of tensors)")

    def to_dyn_list(self, values, what: str = "the list") -> DynList:
        """A Python list of tensors (or a DynList) as a Prelude List expression."""
        if isinstance(values, DynList):
            return values
        p = self.prelude
        exprs = [self._runtime_scalar(v, what) for v in values]
        elem = None
        for e in exprs:
            if isinstance(e, DynList):
                raise OpNotImplemented(f"{what}: lists of lists are not supported at run time")
            t = self.ctx.type_of(e)
            if not isinstance(t, TensorType):
                raise OpNotImplemented(f"{what}: a run-time list of {t} is not supported (tensors only)")
            elem = t if elem is None else _join_tensor(elem, t, what)
        out = p.nil()
        for e in reversed(exprs):
            out = p.cons(e, out)
        return DynList(out, elem)

    def _value_type(self, v):
        if isinstance(v, DynList):
            return ("list", v.elem_type)
        return self.ctx.type_of(v)

    def _join(self, a, b, what: str):
        if isinstance(a, tuple) or isinstance(b, tuple):
            if not (isinstance(a, tuple) and isinstance(b, tuple)):
                raise FrontendError(f"{what} is a list on one path and not on the other")
            ea, eb = a[1], b[1]
            if ea is None or eb is None:
                return ("list", ea if eb is None else eb)
            return ("list", _join_tensor(ea, eb, what))
        if isinstance(a, TensorType) and isinstance(b, TensorType):
            return _join_tensor(a, b, what)
        if a != b:
            raise FrontendError(f"{what} changes type inside the loop ({a} -> {b})")
        return a

    def _var_for(self, name: str, ty):
        p = self.prelude
        if isinstance(ty, tuple):
            elem = ty[1] if ty[1] is not None else TensorType((), "float32")  # a stand-in until it is known
            return DynList(Var(name, p.list(elem)), ty[1])
        return Var(name, ty)

    @staticmethod
    def _expr_of(v):
        return v.expr if isinstance(v, DynList) else v

    # -- TorchScript graph analysis ---------------------------------------------------------------------
    @staticmethod
    def _block_scope(block):
        """(names defined inside ``block``, names it uses) over its nested blocks too."""
        defined, used = set(), []
        stack = [block]
        while stack:
            b = stack.pop()
            defined.update(v.debugName() for v in b.inputs())
            used.extend(v.debugName() for v in b.outputs())
            for node in b.nodes():
                used.extend(v.debugName() for v in node.inputs())
                defined.update(v.debugName() for v in node.outputs())
                stack.extend(node.blocks())
        return defined, used

    def _outer_values(self, blocks):
        """Outer names the blocks read (in order) and the outer lists they change in place."""
        free, mutated = [], []
        for block in blocks:
            defined, used = self._block_scope(block)
            for n in used:
                if n not in defined and n not in free:
                    free.append(n)
            stack = [block]
            while stack:
                b = stack.pop()
                for node in b.nodes():
                    stack.extend(node.blocks())
                    if writes_first_input(node):
                        name = node.inputsAt(0).debugName()
                        if name not in defined and name not in mutated:
                            mutated.append(name)
        return free, mutated

    # -- list mutation ----------------------------------------------------------------------------------
    def list_mutation(self, node):
        """``aten::append(list, x)`` / ``extend`` / ``add_`` (list): a new list value bound to the list's name
        (so later reads see it) and to the node's output."""
        kind = node.kind()
        ins = self._ins(node)
        lst, item = ins[0], ins[1]
        name = node.inputsAt(0).debugName()
        if isinstance(lst, list) and not isinstance(item, DynList):
            if kind == "aten::append":
                lst.append(item)
            else:
                lst.extend(item)
            new = lst
        else:
            dyn = self.to_dyn_list(lst, "the list")
            p = self.prelude
            if kind == "aten::append":
                x = self._runtime_scalar(item, "the appended value")
                t = self.ctx.type_of(x)
                if not isinstance(t, TensorType):
                    raise OpNotImplemented(f"appending a {t} to a run-time list is not supported")
                elem = t if dyn.elem_type is None else _join_tensor(dyn.elem_type, t, "the list's elements")
                if dyn.elem_type is None:  # first type pass of a loop: the list's own type is a stand-in
                    new = DynList(p.cons(x, p.nil()), elem)
                else:
                    new = DynList(p.concat(dyn.expr, p.cons(x, p.nil())), elem)
            else:
                more = self.to_dyn_list(item, "the list")
                elem = more.elem_type if dyn.elem_type is None else dyn.elem_type
                new = DynList(p.concat(dyn.expr, more.expr) if dyn.elem_type is not None else more.expr, elem)
        self.env[name] = new
        self.env[node.output().debugName()] = new

    # -- prim::Loop -------------------------------------------------------------------------------------
    def prim_Loop(self, node):
        ins = self._ins(node)
        trip, cond0, inits = ins[0], ins[1], list(ins[2:])
        block = next(iter(node.blocks()))
        b_inputs = list(block.inputs())
        b_outputs = list(block.outputs())
        free, mutated = self._outer_values([block])
        mutated = [n for n in mutated if n in self.env]
        # outer values the body reads that are computed expressions: passed in as loop variables
        passed = [n for n in free if n not in mutated and self._needs_param(self.env.get(n))]
        what = [f"loop variable {v.debugName()!r}" for v in b_inputs[1:]] + \
            [f"value {n!r} (changed in place in the loop)" for n in mutated] + [f"value {n!r}" for n in passed]
        trip_e = self._trip_count(trip)
        state0 = [Constant(np.array(0, "int64")), self._as_bool(cond0)]
        state0 += [self._runtime_scalar(v, w) for v, w in zip(inits, what)]
        state0 += [self._mutable_state(self.env[n], w) for n, w in zip(mutated, what[len(inits):])]
        state0 += [self.env[n] for n in passed]
        nk, nm = len(inits), len(mutated)
        types = [self._value_type(v) for v in state0]
        names = ["i", "cond"] + [_var_name(v.debugName()) for v in b_inputs[1:]] + \
            [_var_name(n) for n in mutated + passed]
        saved = dict(self.env)

        def run_body(params):
            """Convert the body with the loop variables bound to ``params``; the state of the next iteration."""
            self.env.update(saved)
            i, cond = params[0], params[1]
            self.env[b_inputs[0].debugName()] = i
            for v, x in zip(b_inputs[1:], params[2:2 + nk]):
                self.env[v.debugName()] = x
            for n, x in zip(mutated + passed, params[2 + nk:]):
                self.env[n] = x
            self._convert_block(block.nodes())
            outs = [self.env[o.debugName()] for o in b_outputs]
            nxt = [_op.add(i, Constant(np.array(1, "int64"))), self._as_bool(outs[0])]
            nxt += [self._runtime_scalar(v, w) for v, w in zip(outs[1:], what)]
            nxt += [self._mutable_state(self.env[n], w) for n, w in zip(mutated, what[nk:])]
            nxt += list(params[2 + nk + nm:])
            return nxt

        for _ in range(_MAX_TYPE_ROUNDS):  # widen the loop variables' types until the body keeps them
            params = [self._var_for(n, t) for n, t in zip(names, types)]
            nxt = run_body(params)
            new_types = [self._join(t, self._value_type(v), w)
                         for t, v, w in zip(types, nxt, ["the loop counter", "the loop condition"] + what)]
            if all(_same_type(a, b) if not isinstance(a, tuple) else
                   (isinstance(b, tuple) and _same_type(a[1], b[1])) for a, b in zip(types, new_types)):
                break
            types = new_types
        else:
            raise FrontendError("the types of the loop variables do not settle: " + ", ".join(what))

        loop_var = Var("while_loop")
        params = [self._var_for(n, t) for n, t in zip(names, types)]
        nxt = run_body(params)
        pexprs = [self._expr_of(v) for v in params]
        go = _op.logical_and(pexprs[1], _op.less(pexprs[0], trip_e))
        func = _expr.Function(pexprs, _expr.If(go, _expr.Call(loop_var, [self._expr_of(v) for v in nxt]),
                                                _expr.Tuple(pexprs)))
        result = _expr.Let(loop_var, func, _expr.Call(loop_var, [self._expr_of(v) for v in state0]))
        self.env.update(saved)
        outs = []
        for k in range(nk + nm):
            item = TupleGetItem(result, 2 + k)
            outs.append(DynList(item, types[2 + k][1]) if isinstance(types[2 + k], tuple) else item)
        for n, v in zip(mutated, outs[nk:]):
            self.env[n] = v
        for o, v in zip(node.outputs(), outs[:nk]):
            self.env[o.debugName()] = v

    def _mutable_state(self, v, what: str):
        return self.to_dyn_list(v, what) if isinstance(v, (list, DynList)) else self._runtime_scalar(v, what)

    def _needs_param(self, v) -> bool:
        if isinstance(v, DynList):
            return not isinstance(v.expr, Var)
        return isinstance(v, Expr) and not isinstance(v, (Var, Constant))

    def _trip_count(self, trip):
        if isinstance(trip, Expr):
            return self.ctx.cast(trip, "int64") if self.ctx.dtype(trip) != "int64" else trip
        n = int(trip)
        return Constant(np.array(min(n, np.iinfo(np.int64).max), "int64"))

    def _as_bool(self, v):
        if isinstance(v, Expr):
            if self.ctx.dtype(v) != "bool":
                v = _op.not_equal(v, Constant(np.array(0, self.ctx.dtype(v))))
            if self.ctx.shape(v) != ():
                v = _op.reshape(v, ())
            return v
        return Constant(np.array(bool(v)))

    # -- prim::If on a run-time condition ---------------------------------------------------------------
    def dynamic_if(self, node, cond):
        blocks = list(node.blocks())
        _, mutated = self._outer_values(blocks)
        mutated = [n for n in mutated if n in self.env]
        saved = dict(self.env)
        for n in mutated:  # a list a branch changes is a run-time list from here on
            saved[n] = self._mutable_state(saved[n], f"value {n!r} (changed in a branch)")
        branches = []
        for block in blocks:
            self.env.clear()
            self.env.update(saved)
            self._convert_block(block.nodes())
            outs = [self.env[o.debugName()] for o in block.outputs()] + [self.env[n] for n in mutated]
            branches.append(outs)
        self.env.clear()
        self.env.update(saved)
        names = [o.debugName() for o in node.outputs()] + mutated
        results, fields_t, fields_f, slots = [None] * len(names), [], [], []
        for k, (a, b) in enumerate(zip(*branches)):
            if not isinstance(a, (Expr, DynList, list)) and not isinstance(b, (Expr, DynList, list)) and a == b:
                results[k] = a  # the same Python value on both paths
                continue
            ea = self._runtime_scalar(a, f"output {names[k]!r} of the if")
            eb = self._runtime_scalar(b, f"output {names[k]!r} of the if")
            ta, tb = self._value_type(ea), self._value_type(eb)
            joined = self._join(ta, tb, f"output {names[k]!r} of the if")
            if not isinstance(joined, tuple) and not (_same_type(ta, tb)):
                raise OpNotImplemented(f"output {names[k]!r} of the if has type {ta} on one path and {tb} on the "
                                       "other; kiln's Relay If needs one type")
            fields_t.append(self._expr_of(ea))
            fields_f.append(self._expr_of(eb))
            slots.append((k, joined))
        if slots:
            if len(slots) == 1:
                value = _expr.If(self._as_bool(cond), fields_t[0], fields_f[0])
                parts = [value]
            else:
                value = _expr.If(self._as_bool(cond), _expr.Tuple(fields_t), _expr.Tuple(fields_f))
                parts = [TupleGetItem(value, j) for j in range(len(slots))]
            for (k, joined), part in zip(slots, parts):
                results[k] = DynList(part, joined[1]) if isinstance(joined, tuple) else part
        for n, v in zip(names, results):
            self.env[n] = v

    # -- helpers the aten list converters use -----------------------------------------------------------
    def list_getitem(self, lst: DynList, index):
        p = self.prelude
        if lst.elem_type is None:
            raise FrontendError("indexing a run-time list that is always empty")
        i = self._runtime_scalar(index, "the list index")
        i = self.ctx.cast(i, "int32")
        n = p.length(lst.expr)
        i = _op.where(_op.less(i, Constant(np.array(0, "int32"))), _op.add(i, n), i)
        return p.nth(lst.expr, i)

    def list_len(self, lst: DynList):
        return _op.cast(self.prelude.length(lst.expr), "int64")

    def list_stack(self, lst: DynList, dim: int, concat: bool):
        """``torch.stack`` / ``torch.cat`` of a run-time list through a static tensor array of its elements."""
        p = self.prelude
        elem = lst.elem_type
        if elem is None:
            raise FrontendError("stack/cat of a run-time list that is always empty")
        shape, dtype = tuple(elem.shape), str(elem.dtype)
        ndim = len(shape) + (0 if concat else 1)
        dim = int(dim) + ndim if int(dim) < 0 else int(dim)
        if concat and not shape:
            raise FrontendError("torch.cat of zero-dimensional tensors")
        items = lst.expr
        if dim != 0:  # move the joined axis to the front of every element, join on axis 0, move it back
            if concat:
                perm = [dim] + [a for a in range(len(shape)) if a != dim]
                x = Var("x", elem)
                moved = _op.transpose(x, perm)
                items = p.map(_expr.Function([x], moved), items)
                shape = tuple(shape[a] for a in perm)
        StaticTensorArrayOps(p, dtype, shape).register()
        # stack takes elements of their own shape; concat (as TVM's) takes row blocks of shape [Any] + rest
        wrap = p.get_tensor_ctor_static("tensor_constructor", dtype, ((_Any(),) + shape[1:]) if concat else shape)
        x = Var("x", TensorType(shape, dtype))
        arr = p.map(_expr.Function([x], wrap(x)), items)
        if concat:
            joined = p.get_global_var_static("tensor_array_concat", dtype, shape)(arr)
            out_shape = (_Any(),) + shape[1:]
        else:
            joined = p.get_global_var_static("tensor_array_stack", dtype, shape)(arr)
            out_shape = (_Any(),) + shape
        out = p.get_global_var_static("tensor_get_data", dtype, out_shape)(joined)
        if dim != 0:
            n = len(out_shape)
            if concat:
                inv = list(np.argsort(perm))
                out = _op.transpose(out, [int(a) for a in inv])
            else:
                perm = list(range(1, n))
                perm.insert(dim, 0)
                out = _op.transpose(out, perm)
        return out

