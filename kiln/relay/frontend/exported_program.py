"""Import ``torch.export`` programs into Relay: ``relay.frontend.from_exported_program``.

An ExportedProgram is an FX graph of aten op calls whose placeholders are, per its graph signature, the
user inputs, the parameters, the buffers and the lifted constants. Each ``call_function`` of an aten op
goes through the same aten op table as the TorchScript importer; its args/kwargs are first put in
schema order (defaults filled in) so the converters see exactly what a TorchScript node gives them.

Source spans (``relay.frontend.fill_span``, on unless a PassContext sets it False), as from_pytorch fills them
(``pytorch_spans.py``) but named after the FX nodes: the expressions a node's conversion creates get
``Span(SourceName(<node name>))`` (``conv2d``, ``add_1``: the names ``ep.graph`` prints); a user input or
parameter gets ``<name of the first node that reads it>.<its Relay name>`` (``conv2d.x``,
``conv2d.conv.weight``).
"""
from __future__ import annotations

import numbers
import operator

import numpy as np

from ...error import FrontendError, KilnError, OpNotImplemented
from ...ir.module import IRModule
from .. import expr as _expr
from ..expr import Expr, TupleGetItem
from .aten import AtenContext, lookup
from .common import TypeCache, c_array as _c_array
from .pytorch_spans import fill_span_enabled, make_span, tag as _tag_span
from .pytorch_utils import DTypeName, SUPPORTED_DTYPES, normalize_args, tensor_to_numpy, torch_dtype_to_str
from ..analysis import free_vars
from ..transform import InferType
from ...runtime import ndarray as nd

__all__ = ["from_exported_program"]

# Python operators on sizes (``sym_size`` of a data-dependent result, known at run time only): ints fold
# now, run-time sizes (int64 scalar expressions) become Relay ops.
_SIZE_OPS = {operator.ge: "greater_equal", operator.le: "less_equal", operator.gt: "greater",
             operator.lt: "less", operator.eq: "equal", operator.ne: "not_equal", operator.add: "add",
             operator.sub: "subtract", operator.mul: "multiply", operator.floordiv: "floor_divide",
             operator.mod: "floor_mod"}


def _aten_name(target) -> str | None:
    """``torch.ops.aten.add.Tensor`` -> ``"add"``; None for non-aten targets."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return None
    ns, _, name = schema.name.partition("::")
    return name if ns == "aten" else None


def _describe(node) -> str:
    return f"%{node.name} = {node.op}[target={getattr(node.target, '__name__', node.target)}]"


class ExportedProgramImporter:
    """Converts one ExportedProgram's graph into a Relay function."""

    def __init__(self, exported_program, custom_convert_map=None, default_dtype="float32",
                 keep_params_as_input=True):
        self.ep = exported_program
        self.custom = dict(custom_convert_map or {})
        self.env: dict = {}
        self.params: dict = {}
        self.keep_params_as_input = keep_params_as_input
        self.ctx = AtenContext(default_dtype, TypeCache())

    def run(self):
        import torch
        ep = self.ep
        if not isinstance(ep, torch.export.ExportedProgram):
            raise FrontendError(f"from_exported_program expects a torch.export.ExportedProgram, got "
                                f"{type(ep).__name__}; call torch.export.export(model, args) first")
        graph = ep.graph_module.graph
        self._check_ops(graph)
        input_vars = self._make_placeholders(graph)
        spans = fill_span_enabled()
        for node in graph.nodes:
            if node.op in ("placeholder",):
                continue
            if node.op == "output":
                body = self._outputs(node)
                break
            try:
                if spans:
                    self._tag_input_spans(node)
                self.env[node] = self._convert(node)
                self.ctx.typecheck(self.env[node])
                if spans:
                    _tag_span(self.env[node], make_span(node.name))
            except FrontendError as err:
                raise FrontendError(f"while converting {_describe(node)}: {err}") from err
            except OpNotImplemented as err:
                raise OpNotImplemented(f"while converting {_describe(node)}: {err}") from err
            except (KilnError, TypeError, ValueError, IndexError, KeyError, AttributeError) as err:
                raise FrontendError(f"while converting {_describe(node)}: {err}") from err
        used = [v for v in free_vars(body) if v not in input_vars]
        func = _expr.Function(list(input_vars) + used, body)
        mod = InferType()(IRModule.from_expr(func))
        params = {v.name_hint: nd.array(self.params[v.name_hint]) for v in used if v.name_hint in self.params}
        return mod, params

    def _tag_input_spans(self, node) -> None:
        """A user input or parameter first read by ``node`` gets the span ``<node name>.<its name>``."""
        from torch.fx import Node
        stack = list(node.args) + list(node.kwargs.values())
        while stack:
            a = stack.pop()
            if isinstance(a, (list, tuple)):
                stack.extend(a)
                continue
            v = self.env.get(a) if isinstance(a, Node) else None
            if isinstance(v, _expr.Var) and v.span is None:
                v.span = make_span(f"{node.name}.{v.name_hint}")

    # -- checking ---------------------------------------------------------------------------------
    def _supported(self, node) -> bool:
        t = node.target
        if t is operator.getitem or t in _SIZE_OPS:
            return True
        name = _aten_name(t)
        key = f"aten::{name}" if name else str(t)
        if key in self.custom or t in self.custom:
            return True
        return name is not None and lookup(name) is not None

    def _check_ops(self, graph):
        missing: dict = {}
        for node in graph.nodes:
            if node.op == "call_function" and not self._supported(node):
                name = _aten_name(node.target)
                key = f"aten::{name}" if name else str(node.target)
                missing[key] = missing.get(key, 0) + 1
            elif node.op in ("call_module", "call_method"):
                missing[f"{node.op}:{node.target}"] = missing.get(f"{node.op}:{node.target}", 0) + 1
        if missing:
            lines = [f"  {k} ({n} node{'s' if n > 1 else ''})" for k, n in sorted(missing.items())]
            raise OpNotImplemented(
                f"the exported program uses {len(missing)} operator(s) that kiln cannot convert:\n"
                + "\n".join(lines)
                + "\nhint: pass custom_convert_map={'aten::op': fn(inputs, input_types)} to convert them yourself")

    # -- inputs -----------------------------------------------------------------------------------
    def _make_placeholders(self, graph) -> list:
        from torch.export.graph_signature import InputKind
        sig = self.ep.graph_signature
        specs = {spec.arg.name: spec for spec in sig.input_specs}
        state = self.ep.state_dict
        consts = getattr(self.ep, "constants", {}) or {}
        inputs = []
        for node in graph.nodes:
            if node.op != "placeholder":
                continue
            spec = specs.get(node.name)
            kind = spec.kind if spec is not None else InputKind.USER_INPUT
            if kind == InputKind.USER_INPUT:
                v = self._user_input(node)
                inputs.append(v)
                self.env[node] = v
                continue
            target = spec.target
            if kind in (InputKind.PARAMETER, InputKind.BUFFER):
                tensor = state[target] if target in state else consts.get(target)
            elif kind == InputKind.CONSTANT_TENSOR:
                tensor = consts[target]
            else:
                raise FrontendError(f"placeholder {node.name!r} of kind {kind.name} is not supported by kiln")
            if tensor is None:
                raise FrontendError(f"{kind.name.lower()} {target!r} is missing from the exported program's state")
            self.env[node] = self._param(target, tensor)
        return inputs

    def _user_input(self, node):
        import torch
        val = node.meta.get("val")
        if val is None:
            tm = node.meta.get("tensor_meta")
            shape, dtype = (tm.shape, tm.dtype) if tm is not None else (None, None)
        elif isinstance(val, torch.Tensor):
            shape, dtype = val.shape, val.dtype
        else:
            raise FrontendError(f"input {node.name!r}: non-tensor inputs ({type(val).__name__}) are not "
                                "supported; make it a constant of the model")
        if shape is None:
            raise FrontendError(f"input {node.name!r}: its shape is not recorded in the exported program")
        dims = []
        for d in shape:
            if isinstance(d, torch.SymInt) and not d.node.is_constant() if hasattr(d, "node") else False:
                raise FrontendError(f"input {node.name!r}: dimension {d} is symbolic (dynamic_shapes); kiln needs "
                                    "static shapes: export without dynamic_shapes")
            try:
                dims.append(int(d))
            except (TypeError, ValueError):
                raise FrontendError(f"input {node.name!r}: dimension {d} is symbolic (dynamic_shapes); kiln needs "
                                    "static shapes: export without dynamic_shapes") from None
        dt = torch_dtype_to_str(dtype, f"input {node.name!r}")
        return _expr.var(node.name, shape=tuple(dims), dtype=dt)

    def _param(self, name, tensor):
        arr = tensor_to_numpy(tensor, f"parameter {name!r}")
        dtype = "bool" if arr.dtype == np.bool_ else str(arr.dtype)
        if dtype not in SUPPORTED_DTYPES:
            raise FrontendError(f"parameter {name!r}: unsupported dtype {dtype}")
        if not self.keep_params_as_input:
            return _expr.Constant(_c_array(arr))
        v = _expr.var(name, shape=arr.shape, dtype=dtype)
        self.params[name] = arr
        return v

    # -- nodes ------------------------------------------------------------------------------------
    def _value(self, a):
        import torch
        from torch.fx import Node
        if isinstance(a, Node):
            return self.env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self._value(x) for x in a)
        if isinstance(a, torch.dtype):
            return DTypeName(torch_dtype_to_str(a))
        if isinstance(a, (torch.device, torch.layout, torch.memory_format)):
            return str(a)
        if isinstance(a, torch.Tensor):
            return _expr.Constant(tensor_to_numpy(a, "a tensor argument"))
        return a

    def _convert(self, node):
        if node.op == "get_attr":
            tensor = getattr(self.ep.graph_module, node.target)
            return self._param(node.target, tensor)
        if node.op != "call_function":
            raise FrontendError(f"node kind {node.op} is not supported")
        args = [self._value(a) for a in node.args]
        kwargs = {k: self._value(v) for k, v in node.kwargs.items()}
        t = node.target
        if t is operator.getitem:
            seq, i = args
            if isinstance(seq, Expr):
                return TupleGetItem(seq, int(i))
            if isinstance(seq, _expr.TupleWrapper):
                return seq[int(i)]
            return seq[i]
        if t in _SIZE_OPS:
            return self._size_op(t, args)
        name = _aten_name(t)
        custom = self.custom.get(f"aten::{name}") or self.custom.get(t)
        if custom is not None:
            inputs = args + list(kwargs.values())
            types = [self.ctx.dtype(v) if isinstance(v, Expr) else type(v).__name__ for v in inputs]
            return custom(inputs, types)
        schema = t._schema
        norm = normalize_args(schema, args, kwargs)
        self.ctx.op_name, self.ctx.overload = name, schema.overload_name
        out = lookup(name)(self.ctx, norm)
        if isinstance(out, _expr.TupleWrapper):
            out = [out[i] for i in range(len(out))]
        return out

    def _size_op(self, t, args):
        a, b = args
        if not isinstance(a, Expr) and not isinstance(b, Expr):
            return t(a, b)
        from .. import op as _op
        a, b = (v if isinstance(v, Expr) else self.ctx.const(v, "int64") for v in (a, b))
        return getattr(_op, _SIZE_OPS[t])(a, b)

    def _outputs(self, node):
        from torch.export.graph_signature import OutputKind
        outs = node.args[0]
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        specs = self.ep.graph_signature.output_specs
        user = [o for o, s in zip(outs, specs) if s.kind == OutputKind.USER_OUTPUT] if len(specs) == len(outs) \
            else outs
        values = [self._as_output(self._value(o)) for o in user]
        return values[0] if len(values) == 1 else _expr.Tuple(values)

    def _as_output(self, v):
        if isinstance(v, _expr.TupleWrapper):
            return v.astuple()
        if isinstance(v, Expr):
            return v
        if isinstance(v, (list, tuple)):
            return _expr.Tuple([self._as_output(x) for x in v])
        if isinstance(v, (numbers.Number, np.ndarray)):
            return _expr.Constant(np.asarray(v))
        raise FrontendError(f"the program returns a {type(v).__name__}, which kiln cannot return")


def from_exported_program(exported_program, custom_convert_map=None, default_dtype: str = "float32",
                          keep_params_as_input: bool = True):
    """Convert a ``torch.export.ExportedProgram`` to ``(IRModule, params)``.

    Inputs are named after the program's user inputs (``x`` for ``forward(self, x)``); parameters, buffers
    and lifted constants after their state-dict keys (``conv1.weight``). With
    ``keep_params_as_input=False`` they are embedded as constants and ``params`` is empty.
    """
    return ExportedProgramImporter(exported_program, custom_convert_map, default_dtype, keep_params_as_input).run()
