"""The ONNX importer (TVM's ``relay.frontend.from_onnx``).

``from_onnx(model, shape, dtype, opset, freeze_params)`` checks the model, lists every operator kiln cannot
convert in one error, then converts the graph node by node into a Relay function. Shapes are static:
each graph input gets its shape from ``shape`` or from the model, and values that only depend on constants
(``Shape`` of a static tensor, shape arithmetic, folded weights) are evaluated at import time, so ops such
as ``Reshape`` or ``Slice`` see constant operands. The op converters live in ``onnx_ops_*.py``, registered
with ``@onnx_op(op_type, since=N)`` (``onnx_common.py``); each node uses the highest ``since`` not above the
model's opset for the node's domain.
"""
from __future__ import annotations

import os
import numpy as np

from ...error import FrontendError, KilnError, OpNotImplemented
from ...ir.module import IRModule
from ...ir.type import TupleType
from .common import TypeCache
from .onnx_common import (DEFAULT_DOMAINS, REGISTRY, canonical_domain, const, lookup, NodeContext,
                          decode_attributes, onnx_dtype)
from . import onnx_attention, onnx_ops_elemwise, onnx_ops_nn, onnx_ops_tensor, onnx_qnn  # noqa: F401 (registers the converters)
from . import onnx_ops_scatter_nms  # noqa: F401 (ScatterND, ScatterElements, NonMaxSuppression)
from ..analysis import free_vars
from ...runtime import ndarray as _nd
from .onnx_dynamic import convert_dynamic
from . import onnx_dynamic_axes  # noqa: F401,E402 (registers the run-time-axes converters)
from . import onnx_control  # noqa: F401,E402 (If, Loop, Scan)
from .onnx_sequence import Sequence
from .onnx_spans import OnnxSpanNamer, fill_span_enabled
from ..transform.fold_constant import fold_constant
from ..expr import Constant, Function, Tuple, TupleGetItem, TupleWrapper, Var, var, bind
from ...tir.expr import Any
from ..transform import InferType
from ..transform.dynamic_to_static import dynamic_to_static, has_dyn_ops
from ..transform.symbolic_reshape import IncrementalSymbolicReshapes

__all__ = ["from_onnx", "GraphConverter", "supported_ops", "MIN_OPSET", "MAX_OPSET"]

#: the opset range kiln's converters are written and tested for
MIN_OPSET = 11
MAX_OPSET = 21


def supported_ops(opset: int = MAX_OPSET, domain: str = "") -> list:
    """The ONNX op types kiln converts at ``opset`` of ``domain`` (the default domain unless named)."""
    return sorted(n for n, c in REGISTRY.get(canonical_domain(domain), {}).items()
                  if c.get_converter(opset) is not None)


def _model_opsets(model) -> dict:
    """The opset the model imports for each domain ("" for the default one)."""
    opsets = {canonical_domain(imp.domain): int(imp.version) for imp in model.opset_import}
    opsets.setdefault("", 1)  # an ONNX model without a default-domain import uses opset 1
    return opsets


class GraphConverter:
    """Converts one ONNX GraphProto into a Relay function (TVM's ``onnx.GraphProto``)."""

    def __init__(self, shape: dict | None, dtype, freeze_params: bool, opset: int, convert_config: dict | None,
                 domain_opsets: dict | None = None):
        self.shape = dict(shape or {})
        self.dtype = dtype
        self.freeze_params = freeze_params
        self.opset = opset  # the default domain's
        # custom domains (com.microsoft, ...) -> the opset the model imports for them
        self.opsets = {canonical_domain(d): int(v) for d, v in (domain_opsets or {}).items()}
        self.opsets[""] = opset
        self.config = dict(convert_config or {})
        self.table: dict = {}        # ONNX value name -> Relay expression
        self.param_values: dict = {}  # initializer name -> numpy value (for params that stay variables)
        self.input_vars: list = []
        self.types = TypeCache()
        # shared with subgraph converters: the graph's input names, and whether a Loop/Scan/If was converted
        # (onnx_dynamic.convert_dynamic reads both when use_dyn_ops is False)
        self.flags: dict = {"graph_inputs": set(), "control_flow": False}
        # source spans (relay.frontend.fill_span): one namer shared with subgraph converters
        self.span_namer = OnnxSpanNamer() if fill_span_enabled() else None
        # with unknown input dims: reshapes over computed shapes made static as each node converts (docs/vm.md)
        self.symbolic: IncrementalSymbolicReshapes | None = None

    def child(self, table: dict) -> "GraphConverter":
        """A converter for a subgraph (If branch, Loop/Scan body) sharing this one's settings and type cache;
        ``table`` is its name table (onnx_control.ScopeTable, falling back to this scope)."""
        sub = GraphConverter.__new__(GraphConverter)
        sub.__dict__.update(self.__dict__)
        sub.table = table
        sub.input_vars = []

        return sub

    # -- checks before converting ---------------------------------------------------------------------------------
    def _check_ops(self, graph) -> None:
        """Raise one OpNotImplemented naming every operator of the graph kiln cannot convert."""
        missing: dict = {}
        for node in _all_nodes(graph):
            reason = None
            conv = lookup(node.op_type, node.domain)
            if conv is None:
                reason = node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}::{node.op_type}"
            elif conv.get_converter(self._opset_of(node)) is None:
                reason = conv.why_not(self._opset_of(node))
            if reason is not None:
                missing.setdefault(reason, []).append(node.name or (node.output[0] if node.output else "?"))
        if missing:
            parts = []
            for op, nodes in sorted(missing.items()):
                shown = ", ".join(repr(n) for n in nodes[:3]) + (", ..." if len(nodes) > 3 else "")
                parts.append(f"{op} ({len(nodes)} node{'s' if len(nodes) > 1 else ''}: {shown})")
            raise OpNotImplemented(f"The following ONNX operators are not supported by kiln's ONNX frontend: "
                                   f"{'; '.join(parts)}")

    def _check_names(self, graph, known: set) -> None:
        """Every node input must be produced before it is used (a clear error naming the node otherwise)."""
        defined = set(known)
        for k, node in enumerate(graph.node):
            label = node.name or f"#{k}"
            for name in node.input:
                if name and name not in defined:
                    raise FrontendError(f"malformed ONNX model: node {label!r} ({node.op_type}) reads {name!r}, "
                                        f"which no graph input, initializer or earlier node produces")
            for name in node.output:
                if name:
                    defined.add(name)
        for out in graph.output:
            if out.name not in defined:
                raise FrontendError(f"malformed ONNX model: graph output {out.name!r} is not produced by any node, "
                                    f"input or initializer")

    # -- inputs ------------------------------------------------------------------------------------------------------
    def _input_dtype(self, value_info) -> str:
        name = value_info.name
        if isinstance(self.dtype, dict) and name in self.dtype:
            return str(self.dtype[name])
        vt = _value_type(value_info)
        tt = vt.tensor_type if vt.HasField("tensor_type") else None
        if vt.WhichOneof("value") not in (None, "tensor_type"):
            raise OpNotImplemented(f"graph input {name!r} is a {vt.WhichOneof('value')}; kiln's ONNX "
                                   f"frontend supports tensor inputs only")
        if tt is not None and tt.elem_type:
            return onnx_dtype(tt.elem_type, f"graph input {name!r}")
        return self.dtype if isinstance(self.dtype, str) else "float32"

    def _input_shape(self, value_info) -> tuple:
        name = value_info.name
        tt = _value_type(value_info).tensor_type
        has_shape = tt.HasField("shape")
        dims = list(tt.shape.dim) if has_shape else None
        model_dims = None
        if dims is not None:
            model_dims = tuple(int(d.dim_value) if d.HasField("dim_value") else None for d in dims)
        if name in self.shape:
            given = tuple(_given_dim(s, name) for s in self.shape[name])
            if model_dims is not None:
                if len(given) != len(model_dims) or any(m is not None and isinstance(g, int) and m != g
                                                        for m, g in zip(model_dims, given)):
                    shown = tuple("?" if m is None else m for m in model_dims)
                    raise FrontendError(f"graph input {name!r}: the shape given {given} does not match the shape "
                                        f"the model declares {shown}")
            if model_dims is not None:  # a dim left open in shape= keeps the model's static size
                given = tuple(m if not isinstance(g, int) and m is not None else g for m, g in zip(model_dims, given))
            return given
        if model_dims is None:
            raise FrontendError(f"graph input {name!r} has no shape in the model; pass it in shape={{{name!r}: "
                                f"(...)}}")
        # a named (dim_param) or unknown dimension stays dynamic: relay.Any(), run on the VM (docs/vm.md)
        return tuple(_any() if m is None else m for m in model_dims)

    def _dim_names(self, value_info) -> tuple:
        """The name of each dim of a graph input (``shape=``'s string, else the model's ``dim_param``) or None:
        unknown dims with the same name are taken as the same size (ONNX IR: equal ``dim_param``s)."""
        tt = _value_type(value_info).tensor_type
        model = [d.dim_param or None for d in tt.shape.dim] if tt.HasField("shape") else []
        given = self.shape.get(value_info.name)
        if given is None:
            return tuple(model)
        return tuple(g if isinstance(g, str) and g not in ("?", "") else (model[k] if k < len(model) else None)
                     for k, g in enumerate(given))

    # -- conversion -----------------------------------------------------------------------------------------------------
    def from_onnx(self, graph):
        from onnx import numpy_helper
        self._check_ops(graph)
        init_names = []
        for init in graph.initializer:
            try:
                arr = numpy_helper.to_array(init)
            except Exception as err:  # onnx raises plain exceptions for broken tensors
                raise FrontendError(f"initializer {init.name!r} cannot be read: {err}") from None
            onnx_dtype(init.data_type, f"initializer {init.name!r}")
            init_names.append(init.name)
            if self.freeze_params:
                self.table[init.name] = const(arr)
            else:
                self.param_values[init.name] = arr
                self.table[init.name] = var(init.name, shape=arr.shape, dtype=str(arr.dtype))
        if len(graph.sparse_initializer):
            raise OpNotImplemented("sparse initializers are not supported by kiln's ONNX frontend")
        input_names = []
        for vi in graph.input:
            input_names.append(vi.name)
            if vi.name in self.table:
                continue  # an initializer listed as an input too: its value is the default
            self.flags["graph_inputs"].add(vi.name)
            v = var(vi.name, shape=self._input_shape(vi), dtype=self._input_dtype(vi))
            if any(isinstance(d, Any) for d in v.type_annotation.shape):
                if self.symbolic is None:
                    self.symbolic = IncrementalSymbolicReshapes(self.types.type_of)
                self.symbolic.declare(v, self._dim_names(vi))
            self.input_vars.append(v)
            self.table[vi.name] = v
        unknown = sorted(set(self.shape) - set(input_names))
        if unknown:
            raise FrontendError(f"shape= names {unknown}, which are not inputs of the model (inputs: "
                                f"{[v.name_hint for v in self.input_vars]})")
        self._check_names(graph, set(self.table))
        for node in graph.node:
            self._convert_node(node)
        outputs = [self.table[o.name] for o in graph.output]
        outputs = [Tuple(list(o)) if isinstance(o, Sequence) else o for o in outputs]  # a sequence: a tuple
        if any(o is None for o in outputs):
            raise OpNotImplemented("a graph output that is an empty optional is not supported by kiln")
        # one output is the value itself; a lone sequence output stays a 1-tuple (of a tuple) so a caller can
        # tell it from several outputs
        body = outputs[0] if len(outputs) == 1 and not isinstance(outputs[0], Tuple) else Tuple(outputs)
        params = list(self.input_vars)
        if not self.freeze_params:
            used = {v.name_hint for v in free_vars(body)}
            params += [self.table[n] for n in init_names if n in used and isinstance(self.table[n], Var)]
        func = Function(params, body)
        param_dict = {}
        if not self.freeze_params:
            for p in params[len(self.input_vars):]:
                param_dict[p.name_hint] = _nd.array(np.array(self.param_values[p.name_hint], order="C"))
        return func, param_dict

    def _opset_of(self, node) -> int:
        """The opset the model imports for the node's domain (1 when it imports none)."""
        return self.opsets.get(canonical_domain(node.domain), 1)

    def _convert_node(self, node) -> None:
        opset = self._opset_of(node)
        ctx = NodeContext(self, node, opset)
        conv = lookup(node.op_type, node.domain).get_converter(opset)
        inputs = [self.table[name] if name else None for name in node.input]
        namer = getattr(self, "span_namer", None)
        src = namer.name(node) if namer is not None else None
        if src is not None:
            namer.tag_inputs(node, src, inputs)
        try:
            attr = decode_attributes(node)
            try:
                result = conv(inputs, attr, ctx)
            except KilnError as err:  # a shape operand known only at run time: the dyn.* conversion
                result = convert_dynamic(node.op_type, inputs, attr, ctx, err)
            outs = self._as_outputs(result, ctx)
            if self.symbolic is not None:
                outs = [o if o is None or isinstance(o, Sequence) else self.symbolic.rewrite(o) for o in outs]
            if all(i is None or isinstance(i, Constant) for i in inputs):
                outs = [o if isinstance(o, Sequence) else self._fold(o) for o in outs]
            for o in outs:
                if o is not None and not isinstance(o, Sequence):
                    self.types.type_of(o)  # surface type errors here, where the node is known
        except KilnError as err:
            msg = str(err)
            if ctx.where not in msg:
                msg = f"{ctx.where}: {msg}"
            new = (type(err) if _simple_ctor(type(err)) else FrontendError)(msg)
            if hasattr(err, "runtime_inputs"):
                new.runtime_inputs = err.runtime_inputs
            raise new from err
        if src is not None:
            namer.tag_outputs(outs, src)
        wanted = [n for n in node.output]
        for k, name in enumerate(wanted):
            if not name:
                continue
            if k >= len(outs) or outs[k] is None:
                raise OpNotImplemented(f"{ctx.where}: output #{k} ({name!r}) is not supported by kiln")
            self.table[name] = outs[k]

    def _as_outputs(self, result, ctx) -> list:
        if isinstance(result, TupleWrapper):
            return [result[k] for k in range(len(result))]
        if isinstance(result, (list, tuple)):
            return list(result)
        ty = ctx.type_of(result)
        if isinstance(ty, TupleType):
            return [TupleGetItem(result, k) for k in range(len(ty.fields))]
        return [result]

    def _fold(self, expr):
        if expr is None or isinstance(expr, Constant):
            return expr
        folded = fold_constant(expr)
        return folded if isinstance(folded, Constant) else expr

    def try_evaluate(self, expr):
        """The value of an expression that depends only on constants and known params, else None."""
        fv = free_vars(expr)
        if any(v.name_hint not in self.param_values for v in fv):
            return None
        if fv:
            expr = bind(expr, {v: const(self.param_values[v.name_hint]) for v in fv})
        folded = self._fold(expr)
        return folded.numpy() if isinstance(folded, Constant) else None


def _value_type(value_info):
    """The type of a graph input; an optional tensor input is a tensor (the backend passes a present value)."""
    t = value_info.type
    if t.HasField("optional_type") and t.optional_type.elem_type.HasField("tensor_type"):
        return t.optional_type.elem_type
    return t


def _all_nodes(graph):
    """The nodes of ``graph`` and of every subgraph (If branches, Loop/Scan bodies), depth first."""
    from onnx import AttributeProto
    stack = [graph]
    while stack:
        g = stack.pop()
        for node in g.node:
            yield node
            for a in node.attribute:
                if a.type == AttributeProto.GRAPH:
                    stack.append(a.g)
                elif a.type == AttributeProto.GRAPHS:
                    stack.extend(a.graphs)


def _simple_ctor(cls) -> bool:
    try:
        cls("probe")
        return True
    except Exception:  # noqa: BLE001 (any constructor signature other than (msg,))
        return False


def _check_model(model) -> None:
    import onnx
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as err:
        first = str(err).strip().splitlines()
        raise FrontendError("malformed ONNX model (onnx.checker): " + " | ".join(first[:6])) from None


def _any():
    return Any()


def _given_dim(d, input_name: str):
    """One dim of a ``shape=`` entry: an int, or dynamic (None, -1, "?", a dim name, relay.Any())."""
    if d is None or isinstance(d, str) or type(d).__name__ == "Any" or (isinstance(d, (int, np.integer)) and d == -1):
        return _any()
    try:
        v = int(d)
        if v != d or v < 0:
            raise ValueError(d)
        return v
    except (TypeError, ValueError):
        raise FrontendError(f"shape= for input {input_name!r}: dimension {d!r} is not an int (or None/-1/'?'/"
                            "relay.Any() for a dynamic one)") from None


def from_onnx(model, shape: dict | None = None, dtype="float32", opset: int | None = None,
              freeze_params: bool = True, convert_config: dict | None = None):
    """Convert an ONNX model into a Relay IRModule and a dict of parameters (TVM's ``from_onnx``).

    ``shape`` maps input names to static shapes (needed for inputs whose shape the model leaves
    symbolic); ``dtype`` is the input dtype where the model gives none (a str, or a dict per input);
    ``opset`` overrides the model's default-domain opset; with ``freeze_params`` the initializers become
    constants in the module (enabling constant folding), else they are parameters returned in the dict;
    with ``freeze_params`` the module also goes through DynamicToStatic, as in TVM.
    """
    import onnx
    if isinstance(model, (str, os.PathLike)):
        try:
            model = onnx.load(os.fspath(model))
        except Exception as err:  # protobuf's DecodeError and friends
            raise FrontendError(f"cannot read ONNX model {os.fspath(model)!r}: {err}") from None
    if isinstance(model, (bytes, bytearray)):
        try:
            model = onnx.load_from_string(bytes(model))
        except Exception as err:
            raise FrontendError(f"cannot parse ONNX model bytes: {err}") from None
    if not isinstance(model, onnx.ModelProto):
        raise FrontendError(f"from_onnx expects an onnx.ModelProto (or a path), got {type(model).__name__}")
    _check_model(model)
    opsets = _model_opsets(model)
    if opset is None:
        opset = opsets[""]
    if shape is not None and not isinstance(shape, dict):
        raise FrontendError(f"shape must be a dict from input name to shape, got {type(shape).__name__}")
    conv = GraphConverter(shape, dtype, freeze_params, int(opset), convert_config, opsets)
    func, params = conv.from_onnx(model.graph)
    mod = IRModule.from_expr(func)
    mod = InferType()(mod)
    if freeze_params and has_dyn_ops(mod):  # as TVM: frozen params may make dyn.* shape operands constant
        mod = dynamic_to_static(mod)
    return mod, params
