"""``relay.vm.compile``: Relay module -> VM bytecode + kernel library (TVM's VMCompiler).

The module goes through relay.build's optimization pipeline and FuseOps. Every global function becomes a VM
function (registers 0..n-1 hold its parameters); each fused primitive call becomes output allocations
(static shapes, or ``kernel_shapes`` + ``alloc_tensor_reg`` when dims are unknown) and ``invoke_packed``;
If/Let/tuples/closures/global calls become jumps, moves, ADT and closure instructions. Local functions are
lifted into VM functions whose leading parameters are their captured variables; a let-bound function that
calls itself rebuilds its closure from those captured registers.
"""
from __future__ import annotations

import numpy as np

from ....error import KilnError, LoweringError
from ....ir.expr import GlobalVar
from ....ir.module import IRModule
from ....ir.op import Op
from ....ir.type import TensorType, TupleType
from ....runtime.vm import Executable, VMFunction
from ...adt import Constructor, Match, PatternConstructor, PatternTuple, PatternVar, PatternWildcard
from ...expr import Call, Constant, Function, If, Let, Tuple, TupleGetItem, Var
from ..te_compiler import _type_of, flatten_type, weight_residency
from .lower import SymbolicTECompiler
from .symdims import SymDims, dim_classes, merge_same_dims, output_shapes
from ...analysis import free_vars
from ...op.dyn._common import attrs_json
from ... import transform as T


REF_LIMITATION = ("references (RefCreate/RefRead/RefWrite) run only on the debug interpreter "
                  "(relay.create_executor('debug')), as kiln has no PartialEvaluate to remove them; "
                  "relay.transform.gradient(mode='higher_order') produces them: compile a gradient with "
                  "mode='first_order' (dataflow programs) instead")


def _param_type(ty):
    """JSON description of a parameter type for the runtime's input checks."""
    if isinstance(ty, TensorType):
        return ["tensor", [int(getattr(d, "value", d)) if isinstance(getattr(d, "value", d), (int, np.integer))
                           else -1 for d in ty.shape], str(ty.dtype)]
    if isinstance(ty, TupleType):
        return ["tuple", [_param_type(f) for f in ty.fields]]
    return None


def _dataflow_operands(expr):
    """Operands of a node `_FuncBuilder.compile` walks from its stack (a primitive call, tuple or
    projection), or None for every other node."""
    if isinstance(expr, Call):
        op = expr.op
        return expr.args if isinstance(op, Function) and op.get_attr("Primitive") else None
    if isinstance(expr, Tuple):
        return expr.fields
    if isinstance(expr, TupleGetItem):
        return (expr.tuple_value,)
    return None


class _FuncBuilder:
    """Bytecode of one VM function."""

    def __init__(self, compiler: "VMCompiler", name: str, params: list, self_closure=None):
        self.c = compiler
        self.name = name
        self.code: list = []
        self.env: dict = {}
        self.num_regs = 0
        for p in params:
            self.env[p] = self.new_reg()
        self.params = params
        # registers of the expressions compiled so far in the current scope, by identity: a value the
        # program shares (DAG) is computed once, not once per use (a branch's values stay in the branch)
        self.memo: dict = {}
        self.self_closure = self_closure  # (let var, function index, captured params) for self-recursion
        self.syms = SymDims()  # which unknown extents of the registers are equal (symdims.py)

    def new_reg(self) -> int:
        r = self.num_regs
        self.num_regs += 1
        return r

    def emit(self, *ins) -> int:
        self.code.append(list(ins))
        return len(self.code) - 1

    # -- expressions ----------------------------------------------------------------------------------
    def compile(self, expr) -> int:
        """Register holding ``expr``. Dataflow nodes (primitive calls, tuples, projections) are compiled
        post-order from an explicit stack, emitting exactly what a recursive walk would, in the same
        order, so graph depth costs no interpreter stack."""
        hit = self.memo.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        if _dataflow_operands(expr) is None:
            return self._remember(expr, self._compile1(expr))
        todo = [(expr, None)]
        regs: list = []
        while todo:
            n, kinfo = todo.pop()
            if kinfo is not None:
                k = len(_dataflow_operands(n))
                args = regs[len(regs) - k:]
                del regs[len(regs) - k:]
                regs.append(self._remember(n, self._emit_dataflow(n, kinfo, args)))
                continue
            hit = self.memo.get(id(n))
            if hit is not None and hit[0] is n:
                regs.append(hit[1])
                continue
            ops = _dataflow_operands(n)
            if ops is None:
                regs.append(self._remember(n, self._compile1(n)))
                continue
            todo.append((n, ()))  # emitted once its operands are (a primitive's kernel is looked up then)
            todo.extend((a, None) for a in reversed(ops))
        return regs[0]

    def _remember(self, expr, reg: int) -> int:
        if not isinstance(expr, Var):
            self.memo[id(expr)] = (expr, reg)
        return reg

    def _emit_dataflow(self, n, kinfo, args: list) -> int:
        if isinstance(n, Call):
            return self._emit_primitive(n, args)
        dst = self.new_reg()
        if isinstance(n, Tuple):
            self.emit("alloc_adt", 0, args, dst)
            self._tuple_syms(dst, args, n.fields)
        else:
            self.emit("get_field", args[0], int(n.index), dst)
            self.syms.field(args[0], _type_of(n.tuple_value), int(n.index), dst)
        return dst

    def _tuple_syms(self, dst: int, regs: list, fields) -> None:
        self.syms.set(dst, ("tuple", [self.syms.get(r, _type_of(f)) for r, f in zip(regs, fields)]))

    def _compile1(self, expr) -> int:
        if isinstance(expr, Var):
            if self.self_closure is not None and expr == self.self_closure[0]:
                _, index, captured = self.self_closure
                dst = self.new_reg()
                self.emit("alloc_closure", index, [self.env[v] for v in captured], dst)
                return dst
            if expr not in self.env:
                raise KilnError(f"vm compile: unbound variable %{expr.name_hint} in @{self.name}")
            return self.env[expr]
        if isinstance(expr, Constant):
            dst = self.new_reg()
            self.emit("load_const", self.c.add_const(expr.numpy()), dst)
            return dst
        if isinstance(expr, GlobalVar):
            dst = self.new_reg()
            self.emit("alloc_closure", self.c.global_index(expr.name_hint), [], dst)
            return dst
        if isinstance(expr, Tuple):
            fields = [self.compile(f) for f in expr.fields]
            dst = self.new_reg()
            self.emit("alloc_adt", 0, fields, dst)
            self._tuple_syms(dst, fields, expr.fields)
            return dst
        if isinstance(expr, TupleGetItem):
            src = self.compile(expr.tuple_value)
            dst = self.new_reg()
            self.emit("get_field", src, int(expr.index), dst)
            self.syms.field(src, _type_of(expr.tuple_value), int(expr.index), dst)
            return dst
        if isinstance(expr, Let):
            e = expr
            while isinstance(e, Let):  # let chains without Python recursion per binding
                if isinstance(e.value, Function) and not e.value.get_attr("Primitive"):
                    self.env[e.var] = self.compile_closure(e.value, let_var=e.var)
                else:
                    self.env[e.var] = self.compile(e.value)
                e = e.body
            return self.compile(e)
        if isinstance(expr, If):
            cond = self.compile(expr.cond)
            dst = self.new_reg()
            at_if = self.emit("if", cond, 1, 0)
            outer = self.memo
            self.memo = dict(outer)
            t = self.compile(expr.true_branch)
            self.emit("move", t, dst)
            at_goto = self.emit("goto", 0)
            self.code[at_if][3] = len(self.code) - at_if
            self.memo = dict(outer)
            f = self.compile(expr.false_branch)
            self.emit("move", f, dst)
            self.code[at_goto][1] = len(self.code) - at_goto
            self.memo = outer
            return dst
        if isinstance(expr, Function):
            if expr.get_attr("Primitive"):
                raise LoweringError("vm compile: a primitive function used as a value")
            return self.compile_closure(expr)
        if isinstance(expr, Call):
            return self.compile_call(expr)
        if isinstance(expr, Match):
            return self.compile_match(expr)
        if isinstance(expr, Constructor):  # a constructor used as a function value
            return self.compile_closure(self.c.constructor_function(expr))
        if type(expr).__name__ in ("RefCreate", "RefRead", "RefWrite"):
            raise NotImplementedError(
                f"the kiln VM compiler cannot compile {type(expr).__name__}: " + REF_LIMITATION)
        raise NotImplementedError(f"the kiln VM compiler cannot compile {type(expr).__name__} yet")

    def compile_closure(self, func: Function, let_var=None) -> int:
        captured = [v for v in free_vars(func) if v != let_var]
        index = self.c.lift(func, captured, let_var)
        dst = self.new_reg()
        self.emit("alloc_closure", index, [self.compile(v) for v in captured], dst)
        return dst

    def compile_call(self, call: Call) -> int:
        op = call.op
        if isinstance(op, Function) and op.get_attr("Primitive"):
            return self.compile_primitive(call)
        if isinstance(op, Op) and op.name == "shape_of":  # left unfused (TNonComputational): the VM's ShapeOf
            src = self.compile(call.args[0])
            dst = self.new_reg()
            self.emit("shape_of_t", src, str(call.attrs.dtype), dst)
            return dst
        if isinstance(op, Op):
            raise LoweringError(f"vm compile: operator {op.name} called outside a fused function")
        args = [self.compile(a) for a in call.args]
        dst = self.new_reg()
        if isinstance(op, Constructor):
            self.emit("alloc_adt", op.tag, args, dst)
            return dst
        if isinstance(op, GlobalVar):
            self.emit("invoke", self.c.global_index(op.name_hint), args, dst)
        else:
            clo = self.compile(op)
            self.emit("invoke_closure", clo, args, dst)
        return dst

    # -- match ------------------------------------------------------------------------------------------
    def compile_match(self, m: Match) -> int:
        """Clauses in order: each tests its pattern (jumping to the next clause on a miss), binds the pattern
        variables to registers, computes its right-hand side into ``dst`` and jumps to the end."""
        data = self.compile(m.data)
        dst = self.new_reg()
        to_end = []
        outer = self.memo
        for clause in m.clauses:
            misses: list = []
            self.memo = dict(outer)
            self._match_pattern(clause.lhs, data, misses)
            self.emit("move", self.compile(clause.rhs), dst)
            to_end.append(self.emit("goto", 0))
            for at in misses:  # a failed test jumps to the next clause
                self.code[at][3] = len(self.code) - at
        self.memo = outer
        self.emit("fatal", "match: no clause matches the value (non-exhaustive match?)")
        for at in to_end:
            self.code[at][1] = len(self.code) - at
        return dst

    def _match_pattern(self, pat, reg: int, misses: list) -> None:
        if isinstance(pat, PatternVar):
            self.env[pat.var] = reg
        elif isinstance(pat, PatternConstructor):
            ok = self.new_reg()
            self.emit("tag_eq", reg, pat.constructor.tag, ok)
            misses.append(self.emit("if", ok, 1, 0))
            self._match_fields(pat.patterns, reg, misses)
        elif isinstance(pat, PatternTuple):
            self._match_fields(pat.patterns, reg, misses)
        elif not isinstance(pat, PatternWildcard):
            raise NotImplementedError(f"the kiln VM compiler cannot match a {type(pat).__name__}")

    def _match_fields(self, patterns, reg: int, misses: list) -> None:
        for k, p in enumerate(patterns):
            if isinstance(p, PatternWildcard):
                continue
            r = self.new_reg()
            self.emit("get_field", reg, k, r)
            self._match_pattern(p, r, misses)

    def _flat_regs(self, reg: int, ty) -> list:
        if isinstance(ty, TupleType):
            out = []
            for k, f in enumerate(ty.fields):
                r = self.new_reg()
                self.emit("get_field", reg, k, r)
                self.syms.field(reg, ty, k, r)
                out.extend(self._flat_regs(r, f))
            return out
        return [reg]

    def _host_op(self, func: Function):
        """The single op call of a primitive function that the VM handles on the host side (``shape_of`` of an
        unknown shape), or whose output shape is data-dependent (the dyn.* ops); else None."""
        body = func.body
        if not (isinstance(body, Call) and isinstance(body.op, Op)):
            return None
        if body.op.name == "shape_of" and _type_of(body.args[0]).is_dynamic():
            return body
        if body.op.get_attr("TShapeDataDependent") and _type_of(body).is_dynamic():
            return body
        return None

    def _body_arg_regs(self, func: Function, body: Call, ins: list) -> list:
        """Registers of the host op's operands: parameters map to the call's argument registers."""
        index = {p: k for k, p in enumerate(func.params)}
        regs = []
        for a in body.args:
            if isinstance(a, Var) and a in index and not isinstance(_type_of(a), TupleType):
                regs.append(ins[index[a]])
            elif isinstance(a, Constant):
                r = self.new_reg()
                self.emit("load_const", self.c.add_const(a.numpy()), r)
                regs.append(r)
            else:
                raise LoweringError(f"vm compile: operand of {body.op.name} is neither a parameter nor a constant")
        return regs

    _RESHAPE_OPS = frozenset({"reshape", "reshape_like", "dyn.reshape", "contrib_reverse_reshape", "squeeze",
                              "dyn.squeeze", "expand_dims", "dyn.expand_dims", "nn.batch_flatten"})

    def _reshape_source(self, func: Function, ins: list):
        """The register of the data operand when ``func`` is one row-major reshape of a parameter (the
        elements keep their order: only the shape changes), else None."""
        body = func.body
        if not (isinstance(body, Call) and isinstance(body.op, Op) and body.op.name in self._RESHAPE_OPS):
            return None
        data = body.args[0]
        if not isinstance(data, Var) or data not in func.params or isinstance(_type_of(data), TupleType):
            return None
        if any(isinstance(_type_of(p), TupleType) for p in func.params):
            return None
        if str(_type_of(data).dtype) != str(_type_of(body).dtype):
            return None
        return ins[func.params.index(data)]

    def compile_primitive(self, call: Call) -> int:
        return self._emit_primitive(call, [self.compile(a) for a in call.args])

    def _emit_primitive(self, call: Call, arg_regs: list) -> int:
        ins, in_types = [], []
        for a, reg in zip(call.args, arg_regs):
            ins.extend(self._flat_regs(reg, _type_of(a)))
            in_types.extend(flatten_type(_type_of(a)))
        host = self._host_op(call.op)
        if host is not None and host.op.name == "shape_of":
            (src,) = self._body_arg_regs(call.op, host, ins)
            dst = self.new_reg()
            self.emit("shape_of_t", src, str(host.attrs.dtype), dst)
            return dst
        in_shapes = [self.syms.get(r, t) for r, t in zip(ins, in_types)]
        classes = dim_classes(in_shapes, in_types)
        if len(in_types) == len(call.args):  # no tuple operands: parameter k is operand k
            classes = merge_same_dims(classes, in_types, call.op.get_attr("kiln.same_dims"))
        cached, kidx, const_idx = self.c.kernel(call.op, classes)
        n_in = len(ins)
        for ci in const_idx:
            r = self.new_reg()
            self.emit("load_const", ci, r)
            ins.append(r)
        out_types = flatten_type(_type_of(call))
        outs = [self.new_reg() for _ in out_types]
        if host is not None:  # data-dependent output shapes: the host shape function reads the operand values
            shape_regs = [self.new_reg() for _ in out_types]
            self.emit("shape_func", host.op.name, attrs_json(host.attrs),
                      self._body_arg_regs(call.op, host, ins), shape_regs)
        elif any(t.is_dynamic() for t in out_types):
            shape_regs = [self.new_reg() for _ in out_types]
            self.emit("kernel_shapes", kidx, ins, shape_regs)
        src = self._reshape_source(call.op, ins)
        if src is not None and len(out_types) == 1 and out_types[0].is_dynamic():
            # a reshape of a contiguous tensor: a host-side copy (numpy memcpy) instead of a kernel whose every
            # element divides by symbolic extents (BERT's attention reshapes: 8 ms each at batch 4 seq 64)
            self.emit("reshape_tensor", src, shape_regs[0], outs[0])
            return outs[0]
        for k, t in enumerate(out_types):
            if t.is_dynamic():
                self.emit("alloc_tensor_reg", shape_regs[k], str(t.dtype), outs[k])
            else:
                self.emit("alloc_tensor", [int(getattr(d, "value", d)) for d in t.shape], str(t.dtype), outs[k])
        self.emit("invoke_packed", kidx, ins + outs)
        if host is None:
            for r, shape in zip(outs, output_shapes(cached.inputs[:n_in], in_shapes, cached.outputs, self.syms)):
                self.syms.set(r, shape)
        return self._restructure(outs, _type_of(call))

    def _restructure(self, flat: list, ty) -> int:
        flat = list(flat)

        def take(t):
            if isinstance(t, TupleType):
                fields = [take(f) for f in t.fields]
                dst = self.new_reg()
                self.emit("alloc_adt", 0, fields, dst)
                self.syms.set(dst, ("tuple", [self.syms.get(r, ft) for r, ft in zip(fields, t.fields)]))
                return dst
            return flat.pop(0)
        return take(ty)


class VMCompiler:
    """Compiles an IRModule for the VM (TVM's ``relay.vm.VMCompiler``)."""

    def __init__(self):
        self.functions: list = []
        self.constants: list = []
        self.packed: list = []
        self._kernel_index: dict = {}
        self._globals: dict = {}
        self._ctor_funcs: dict = {}
        self.mod = None
        self.te = None

    # -- tables -------------------------------------------------------------------------------------
    def add_const(self, value: np.ndarray) -> int:
        self.constants.append(np.array(value, copy=True, order="C"))
        return len(self.constants) - 1

    def global_index(self, name: str) -> int:
        if name not in self._globals:
            raise KilnError(f"vm compile: call of unknown global function @{name}")
        return self._globals[name]

    def kernel(self, func: Function, dim_classes: tuple | None = None):
        cached = self.te.lower(func, dim_classes)
        hit = self._kernel_index.get(cached.func_name)
        if hit is None:
            consts = [self.add_const(v) for _, v in cached.const_inputs]
            hit = self._kernel_index[cached.func_name] = (len(self.packed), consts)
            self.packed.append(cached.func_name)
        return cached, hit[0], hit[1]

    def constructor_function(self, ctor) -> Function:
        """``fn (x1, ..., xn) { Ctor(x1, ..., xn) }``: a constructor used as a value (one per constructor)."""
        fn = self._ctor_funcs.get(ctor)
        if fn is None:
            params = [Var(f"field{k}") for k in range(len(ctor.inputs))]
            fn = self._ctor_funcs[ctor] = Function(params, Call(ctor, params))
        return fn

    def lift(self, func: Function, captured: list, let_var) -> int:
        index = len(self.functions)
        self.functions.append(None)
        name = f"lifted_{index}"
        b = _FuncBuilder(self, name, list(captured) + list(func.params),
                         self_closure=(let_var, index, captured) if let_var is not None else None)
        result = b.compile(func.body)
        b.emit("ret", result)
        self.functions[index] = VMFunction(name, [v.name_hint for v in list(captured) + list(func.params)],
                                           b.num_regs, b.code)
        return index

    # -- driver ---------------------------------------------------------------------------------------
    def set_params(self, params: dict) -> None:
        """Constants to bind to @main's parameters of the same names at ``lower``/``optimize`` (TVM's)."""
        self._params = dict(params or {})

    def _bound(self, mod, params):
        from ...build_module import bind_params_by_name
        if not isinstance(mod, IRModule):
            mod = IRModule.from_expr(mod)
        if "main" not in mod:
            raise KilnError("relay.vm.compile: the module has no @main function")
        params = {**getattr(self, "_params", {}), **(params or {})}
        if params:
            mod = IRModule(dict(mod.functions), getattr(mod, "type_definitions", None))
            mod["main"] = bind_params_by_name(mod["main"], params)
        return mod

    def optimize(self, mod: IRModule, target=None, target_host=None, params=None):
        """The Relay passes ``lower`` runs, alone: returns ``(optimized module, params)`` (TVM's)."""
        from ...build_module import _canon_target, _run_optimizations
        mod = self._bound(mod, params)
        with _canon_target(target or "llvm"):
            return _run_optimizations(T.InferType()(mod)), {}

    def get_exec(self) -> Executable:
        """The Executable of the last ``lower`` (TVM's ``get_exec``; same as ``codegen``)."""
        return self.codegen()

    def lower(self, mod: IRModule, target=None, target_host=None, params=None) -> None:
        """Compiles every function of ``mod`` (TVM's signature; the host is the target's CPU, so
        ``target_host`` is accepted and unused)."""
        from ...build_module import _canon_target, _run_optimizations
        if isinstance(target_host, dict) and params is None:  # kiln's old positional lower(mod, target, params)
            target_host, params = None, target_host
        mod = self._bound(mod, params)
        target = _canon_target(target or "llvm")
        with target:
            mod = T.InferType()(mod)
            self.mod = _run_optimizations(mod)
            self.te = SymbolicTECompiler(target, "vm")
            names = [gv.name_hint for gv, f in self.mod.functions.items() if isinstance(f, Function)]
            names.sort(key=lambda n: n != "main")
            for n in names:
                self._globals[n] = len(self.functions)
                self.functions.append(None)
            with weight_residency(self.mod):  # the prefetching schedules ask whether the weights stay in cache
                for n in names:
                    func = self.mod[n]
                    b = _FuncBuilder(self, n, list(func.params))
                    result = b.compile(func.body)
                    b.emit("ret", result)
                    ptypes = [_param_type(_type_of(p)) for p in func.params]
                    self.functions[self._globals[n]] = VMFunction(n, [p.name_hint for p in func.params],
                                                                  b.num_regs, b.code, ptypes)
            self.lib = self.te.build_module()
            if self.lib is not None:  # the replay's plans run runs of kernels in one native call (vm_replay.py)
                from ..graph_executor_codegen import plan_runner_module
                self.lib.import_module(plan_runner_module(target))

    def codegen(self) -> Executable:
        return Executable(self.functions, self.constants, self.packed, self.lib)


def compile(mod, target=None, target_host=None, params=None) -> Executable:  # noqa: A001 - TVM's name
    """Compile ``mod`` to a VM Executable (TVM's ``relay.vm.compile``)."""
    c = VMCompiler()
    c.lower(mod, target, target_host, params=params)
    return c.codegen()
