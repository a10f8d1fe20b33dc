"""Import TorchScript (``torch.jit.trace`` / ``torch.jit.script``) models into Relay: TVM's
``relay.frontend.from_pytorch``. Scripted control flow and run-time lists: ``pytorch_script.py``.

The graph is inlined (every ``CallMethod`` of a submodule becomes its body), parameters are read from the
module's attributes and named by their attribute path (``layer1.0.conv1.weight``), ``prim::`` nodes are
evaluated here, and every ``aten::`` node goes through the shared aten op table (``aten/``). Before
converting anything, the whole graph is checked, so a model with several unsupported operators reports all
of them in one error.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...error import FrontendError, KilnError, OpNotImplemented
from ...ir.module import IRModule
from .. import expr as _expr, op as _op
from ..expr import Constant, Expr, TupleGetItem
from .aten import AtenContext, lookup
from .common import TypeCache, c_array as _c_array
from .pytorch_inplace import VIEW_OPS, view_spec, write_into
from .pytorch_spans import SpanNamer, fill_span_enabled, make_span, tag as _tag_span
from .pytorch_script import LIST_MUTATORS, DynList, ScriptControlFlow, writes_first_input
from .pytorch_utils import (AtenArgs, DTypeName, SUPPORTED_DTYPES, normalize_args, parse_schema,
                            tensor_to_numpy, torch_dtype_to_str)
from ..analysis import free_vars
from ..transform import InferType
from ...runtime import ndarray as nd
from ...ir.type import TupleType

__all__ = ["from_pytorch"]

_SCRIPT_HINT = ("the graph has control flow (prim::If / prim::Loop), which kiln converts for the VM "
                "(relay.vm.compile); the operators above are missing either way")


class _ModuleRef:
    """A (sub)module reached through ``prim::GetAttr``: its attribute path and the Python object."""

    def __init__(self, path: list, obj):
        self.path, self.obj = path, obj


def _node_text(node) -> str:
    text = str(node).strip().split("\n")[0]
    text = text.split(" # ")[0]
    return text if len(text) < 200 else text[:197] + "..."


def _is_traced(script_module) -> bool:
    import torch
    return isinstance(script_module, torch.jit.TracedModule) or \
        type(script_module).__name__ in ("TopLevelTracedModule", "TracedModule")


class TorchScriptImporter(ScriptControlFlow):
    """Converts one inlined TorchScript graph into a Relay function.

    aten ops go through the aten table (``aten/``); TorchScript's ``prim::<Kind>`` nodes are evaluated by the
    method ``prim_<Kind>(node)``: defining that method is all it takes to support a new kind.
    """

    def __init__(self, script_module, input_infos, custom_convert_map=None, default_dtype="float32",
                 use_parser_friendly_name=False, keep_quantized_weight=False):
        self.module = script_module
        self.input_infos = input_infos
        self.custom = dict(custom_convert_map or {})
        self.default_dtype = default_dtype
        self.friendly = use_parser_friendly_name
        self.keep_quantized_weight = keep_quantized_weight
        self.env: dict = {}
        self.param_vars: dict = {}  # name -> Var
        self.params: dict = {}  # name -> numpy
        self.param_by_tensor: dict = {}  # id(tensor) -> name (tied weights share one var)
        self.ctx = AtenContext(default_dtype, TypeCache())
        self.ctx.param_values = self.params  # quantized-op converters read scales kept as tensor attributes
        self.ctx.importer = self  # the run-time list converters (aten/script.py) use its Prelude
        self._prelude = None  # created by the first loop / run-time if / run-time list
        self.views: dict = {}  # value name -> (base value name, where it lies in the base): pytorch_inplace.py
        self.export_path = None

    # -- entry ----------------------------------------------------------------------------------
    def run(self):
        graph = self._graph()
        self._check_ops(graph)
        inputs = list(graph.inputs())
        if inputs and inputs[0].type().kind() == "ClassType":
            self.env[inputs[0].debugName()] = _ModuleRef([], self.module)
            inputs = inputs[1:]
        input_vars = self._make_inputs(inputs)
        self._input_var_ids = {id(v) for v in input_vars}
        self._span_namer = SpanNamer() if fill_span_enabled() else None
        self._convert_block(graph.nodes())
        outs = [self._output_expr(self.env[o.debugName()]) for o in graph.outputs()]
        body = outs[0] if len(outs) == 1 else _expr.Tuple(outs)
        if not isinstance(body, Expr):
            raise FrontendError("the model returns no tensor")
        used = [v for v in free_vars(body) if v not in input_vars]
        func = _expr.Function(list(input_vars) + used, body)
        if self._prelude is not None:  # control flow: the Prelude's lists and tensor arrays are in the module
            mod = self._prelude.mod
            mod["main"] = func
        else:
            mod = IRModule.from_expr(func)
        mod = InferType()(mod)
        params = {v.name_hint: nd.array(self.params[v.name_hint]) for v in used if v.name_hint in self.params}
        return mod, params

    def export_renamed_graph(self, graph, location):
        """TVM's ``export_renamed_c_graph_path``: rename every node's outputs after its operator type
        (``aten::conv2d_0_0``: the first conv2d's first output; ``prim::GetAttr`` nodes keep their names) and
        write the graph's text to ``<location>/tvm_exported_c_graph_<timestamp>.txt``. Returns the file path
        and ``{node kind + index: node}`` (the source names, parser-friendly with use_parser_friendly_name)."""
        import datetime
        import os
        import re
        counts: dict = {}
        source_map: dict = {}

        def rename(nodes):
            for node in nodes:
                for block in node.blocks():
                    rename(block.nodes())
                kind = node.kind()
                if kind == "prim::GetAttr":
                    continue
                counts[kind] = counts.get(kind, -1) + 1
                src = f"{kind}_{counts[kind]}"
                for i, out in enumerate(node.outputs()):
                    out.setDebugName(f"{src}_{i}")
                source_map[re.sub(r"[:.]", "_", src) if self.friendly else src] = node
        rename(graph.nodes())
        os.makedirs(location, exist_ok=True)
        stamp = datetime.datetime.now().strftime("%m_%d_%Y_%H_%M_%S")
        path = os.path.join(location, f"tvm_exported_c_graph_{stamp}.txt")
        with open(path, "w") as f:
            f.write(str(graph))
        self.exported_graph_path, self.source_map = path, source_map
        return path, source_map

    def _graph(self):
        import torch
        if isinstance(self.module, torch.jit.ScriptFunction):
            graph = self.module.graph.copy()
        elif isinstance(self.module, torch.jit.ScriptModule):
            graph = self.module.graph.copy()
        elif isinstance(self.module, torch.nn.Module):
            raise FrontendError("from_pytorch expects a TorchScript module: trace the model first "
                                "(torch.jit.trace(model, example_inputs).eval()), or use "
                                "from_exported_program(torch.export.export(model, args))")
        else:
            raise FrontendError(f"from_pytorch expects a torch.jit.ScriptModule, got {type(self.module).__name__}")
        torch._C._jit_pass_inline(graph)
        if self.export_path is not None:
            self.export_renamed_graph(graph, self.export_path)
        return graph

    # -- checking -------------------------------------------------------------------------------
    def _walk(self, nodes):
        for node in nodes:
            yield node
            for block in node.blocks():
                yield from self._walk(block.nodes())

    def _supported(self, kind: str) -> bool:
        if kind in self.custom or kind in LIST_MUTATORS:
            return True
        ns, _, name = kind.partition("::")
        if ns == "prim":
            return self._prim_handler(name) is not None
        if ns == "aten":
            return lookup(name) is not None
        # aten/quantized.py: "quantized::conv2d", ...; aten/vision.py: "torchvision::deform_conv2d"
        return ns in ("quantized", "torchvision") and lookup(kind) is not None

    def _prim_handler(self, kind: str):
        """The ``prim_<kind>`` method, or None for a prim kind kiln does not evaluate."""
        return getattr(self, f"prim_{kind}", None)

    def _check_ops(self, graph):
        missing: dict = {}
        control_flow = False
        for node in self._walk(graph.nodes()):
            kind = node.kind()
            if kind in ("prim::Loop",) or (kind == "prim::If" and not self._constant_if(node)):
                control_flow = True
            if not self._supported(kind):
                missing.setdefault(kind, 0)
                missing[kind] += 1
        if not missing:
            return
        lines = [f"  {k} ({n} node{'s' if n > 1 else ''})" for k, n in sorted(missing.items())]
        msg = f"the PyTorch model uses {len(missing)} operator(s) that kiln cannot convert:\n" + "\n".join(lines)
        hints = []
        if control_flow:
            hints.append(_SCRIPT_HINT)
        if any(k.startswith("quantized::") for k in missing):
            hints.append("kiln converts the quantized ops of torch.ao eager-mode models listed in docs/qnn.md")
        hints.append(("or pass" if hints else "pass") + " custom_convert_map={'ns::op': fn(inputs, input_types)} "
                     "to convert them yourself")
        raise OpNotImplemented(msg + "\nhint: " + "\nhint: ".join(hints))

    @staticmethod
    def _constant_if(node) -> bool:
        cond = node.inputsAt(0).node()
        return cond.kind() == "prim::Constant"

    # -- inputs and parameters ------------------------------------------------------------------
    def _make_inputs(self, graph_inputs) -> list:
        infos = self.input_infos
        names_traced = [i.debugName() for i in graph_inputs]
        if infos is None:
            raise FrontendError(f"from_pytorch needs input_infos: a list of (name, shape) or (name, (shape, dtype)) "
                                f"for the {len(graph_inputs)} graph input(s) {names_traced}, "
                                f"e.g. [('input0', {self._traced_shape(graph_inputs[0]) if graph_inputs else ()})]")
        if isinstance(infos, dict):
            infos = list(infos.items())
        infos = list(infos)
        if len(infos) != len(graph_inputs):
            raise FrontendError(f"input_infos gives {len(infos)} input(s) but the graph has {len(graph_inputs)}: "
                                f"{names_traced}")
        out = []
        seen = set()
        for i, (info, gin) in enumerate(zip(infos, graph_inputs)):
            name, shape, dtype = self._parse_info(info, i)
            if name in seen:
                raise FrontendError(f"input_infos: input name {name!r} is used twice")
            seen.add(name)
            traced = self._traced_shape(gin)
            if traced is not None and len(traced) != len(shape):
                raise FrontendError(f"input {name!r} (graph input {gin.debugName()!r}): input_infos gives shape "
                                    f"{tuple(shape)} of rank {len(shape)}, but the model was traced with shape "
                                    f"{tuple(traced)} of rank {len(traced)}")
            ttype = gin.type()
            scalar = {"IntType": "int64", "FloatType": "float64", "BoolType": "bool"}.get(ttype.kind())
            if scalar is not None:  # a scripted model's number input: a 0-d tensor at run time
                if shape:
                    raise FrontendError(f"input {name!r} (graph input {gin.debugName()!r}) is a TorchScript "
                                        f"{ttype.kind()[:-4].lower()}; give it shape ()")
                if not self._dtype_given(info):
                    dtype = scalar
            if ttype.kind() == "TensorType" and ttype.scalarType() is not None:
                traced_dtype = torch_dtype_to_str(ttype.scalarType(), f"graph input {gin.debugName()!r}")
                if not self._dtype_given(info):
                    # the model was traced with inputs of this dtype: type the graph with it (a float16 or
                    # uint8 model typed float32 would reject its own inputs at set_input)
                    dtype = "float32" if traced_dtype == "bfloat16" else traced_dtype
            v = _expr.var(name, shape=tuple(shape), dtype=dtype)
            self.env[gin.debugName()] = v
            out.append(v)
        return out

    @staticmethod
    def _dtype_given(info) -> bool:
        return isinstance(info, (list, tuple)) and len(info) == 2 and isinstance(info[1], (list, tuple)) \
            and len(info[1]) == 2 and isinstance(info[1][1], str)

    def _parse_info(self, info, i):
        if not isinstance(info, (list, tuple)) or len(info) != 2 or not isinstance(info[0], str):
            raise FrontendError(f"input_infos[{i}] = {info!r}: expected (name, shape) or (name, (shape, dtype))")
        name, spec = info
        dtype = self.default_dtype
        if self._dtype_given(info):
            spec, dtype = spec
        if spec is None:
            raise FrontendError(f"input {name!r}: its shape is missing; give (name, shape) with a static shape")
        try:
            shape = [int(d) for d in (spec if isinstance(spec, (list, tuple)) else tuple(spec))]
        except (TypeError, ValueError):
            raise FrontendError(f"input {name!r}: shape {spec!r} is not a sequence of integers") from None
        if any(d < 0 for d in shape):
            raise FrontendError(f"input {name!r}: shape {tuple(shape)} has a negative dimension")
        if dtype not in SUPPORTED_DTYPES:
            raise FrontendError(f"input {name!r}: unsupported dtype {dtype!r} (supported: "
                                f"{', '.join(sorted(SUPPORTED_DTYPES))})")
        return name, shape, dtype

    @staticmethod
    def _traced_shape(gin):
        t = gin.type()
        if t.kind() != "TensorType":
            return None
        try:
            sizes = t.sizes()
        except RuntimeError:
            return None
        return None if sizes is None else list(sizes)

    def _param(self, path: list, tensor, node):
        name = ("_" if self.friendly else ".").join(path)
        key = id(tensor)
        if key in self.param_by_tensor:
            return self.param_vars[self.param_by_tensor[key]]
        arr = tensor_to_numpy(tensor, f"parameter {name!r} (node {_node_text(node)})")
        dtype = "bool" if arr.dtype == np.bool_ else str(arr.dtype)
        if str(tensor.dtype) == "torch.bfloat16":
            dtype = "float32"
        v = _expr.var(name, shape=arr.shape, dtype=dtype)
        self.param_vars[name] = v
        self.params[name] = arr
        self.param_by_tensor[key] = name
        return v

    # -- conversion -----------------------------------------------------------------------------
    def _convert_block(self, nodes):
        for node in nodes:
            try:
                src = self._span_namer.name(node) if getattr(self, "_span_namer", None) is not None else None
                if src is not None and not node.kind().startswith("prim::"):
                    self._tag_input_spans(node, src)
                self._convert_node(node)
                if src is not None:
                    for out in node.outputs():
                        _tag_span(self.env.get(out.debugName()), make_span(src))
            except FrontendError as err:
                if getattr(err, "_kiln_node_noted", False):
                    raise
                raise self._noted(FrontendError, err, node) from err
            except OpNotImplemented as err:
                raise self._noted(OpNotImplemented, err, node) from err
            except KilnError as err:
                raise self._noted(FrontendError, err, node) from err
            except (TypeError, ValueError, IndexError, KeyError, AttributeError) as err:
                raise self._noted(FrontendError, err, node) from err

    def _tag_input_spans(self, node, src: str) -> None:
        """A graph input or parameter first read by ``node`` gets the span ``<src>.<its name>``."""
        for inp in node.inputs():
            v = self.env.get(inp.debugName())
            if isinstance(v, _expr.Var) and v.span is None:
                name = v.name_hint if id(v) in self._input_var_ids else inp.debugName()
                v.span = make_span(f"{src}.{name}")

    @staticmethod
    def _noted(cls, err, node):
        src = node.sourceRange().split("\n")[0] if node.sourceRange() else ""
        where = f"\n  at {src}" if src else ""
        new = cls(f"while converting {node.kind()}: {err}\n  node: {_node_text(node)}{where}")
        new._kiln_node_noted = True
        return new

    def _convert_node(self, node):
        kind = node.kind()
        if kind in self.custom:
            inputs = [self.env[i.debugName()] for i in node.inputs()]
            types = [self.ctx.dtype(v) if isinstance(v, Expr) else type(v).__name__ for v in inputs]
            self._bind_outputs(node, self.custom[kind](inputs, types))
            return
        ns, _, name = kind.partition("::")
        if ns == "prim":
            self._prim_handler(name)(node)
            return
        if kind in LIST_MUTATORS and node.inputsAt(0).type().kind() == "ListType":
            self.list_mutation(node)
            return
        inputs = [self.env[i.debugName()] for i in node.inputs()]
        schema_text = node.schema()
        if schema_text and schema_text != "(no schema)":
            schema = parse_schema(schema_text)
            args = normalize_args(schema, inputs)
            overload = schema.overload_name
        else:
            args, overload = AtenArgs(inputs, [f"arg{i}" for i in range(len(inputs))]), ""
        self.ctx.op_name, self.ctx.overload = name, overload
        self.ctx.out_shapes = [self._traced_shape(o) for o in node.outputs()]
        fn = lookup(name if ns == "aten" else kind)
        value = fn(self.ctx, args)
        self._bind_outputs(node, value)
        if ns == "aten" and name in VIEW_OPS and isinstance(inputs[0], Expr) and isinstance(value, Expr):
            try:
                spec = view_spec(self.ctx, name, args, tuple(self.ctx.shape(inputs[0])))
            except KilnError:  # a position known only at run time (scripted loops): not a tracked view
                spec = None
            if spec is not None:
                self.views[node.output().debugName()] = (node.inputsAt(0).debugName(), spec)
        if isinstance(value, Expr) and isinstance(inputs[0], Expr) and writes_first_input(node):
            # an in-place op (add_, mul_, copy_...): later reads of its input see the new value, as in PyTorch
            self._write(node.inputsAt(0).debugName(), value)

    def _write(self, name: str, value):
        """Rebind ``name`` to ``value`` and, when it is a view, every base it was cut from."""
        self.env[name] = value
        seen = set()
        while name in self.views and name not in seen:
            seen.add(name)
            base_name, spec = self.views[name]
            base = self.env[base_name]
            value = write_into(self.ctx, base, spec, value)
            self.ctx.typecheck(value)
            self.env[base_name] = value
            name = base_name

    def _bind_outputs(self, node, value):
        self.ctx.typecheck(value)
        outs = list(node.outputs())
        if len(outs) == 1:
            self.env[outs[0].debugName()] = value
            return
        if isinstance(value, _expr.TupleWrapper):
            value = [value[i] for i in range(len(value))]
        if isinstance(value, Expr):
            value = [TupleGetItem(value, i) for i in range(len(outs))]
        if not isinstance(value, (list, tuple)) or len(value) < len(outs):
            raise FrontendError(f"{node.kind()} produced {type(value).__name__}, expected {len(outs)} values")
        for o, v in zip(outs, value):
            self.env[o.debugName()] = v

    def _output_expr(self, v):
        if isinstance(v, DynList):
            return v.expr
        if isinstance(v, _expr.TupleWrapper):
            return v.astuple()
        if isinstance(v, Expr):
            return v
        if isinstance(v, (list, tuple)):
            return _expr.Tuple([self._output_expr(x) for x in v])
        if isinstance(v, (numbers.Number, np.ndarray, np.generic)):
            return _expr.Constant(np.asarray(v))
        raise FrontendError(f"the model returns a {type(v).__name__}, which kiln cannot return")

    def _ins(self, node):
        return [self.env[i.debugName()] for i in node.inputs()]

    # -- prim:: ---------------------------------------------------------------------------------
    def prim_Constant(self, node):
        out = node.output()
        if not node.hasAttributes():
            value = None
        else:
            value = out.toIValue()
        import torch
        if isinstance(value, torch.Tensor):
            arr = tensor_to_numpy(value, f"constant {_node_text(node)}")
            value = _expr.Constant(_c_array(arr))
        elif isinstance(value, torch.device):
            value = str(value)
        elif isinstance(value, torch.dtype):
            value = DTypeName(torch_dtype_to_str(value, _node_text(node)))
        self.env[out.debugName()] = value

    def prim_ListConstruct(self, node):
        self.env[node.output().debugName()] = list(self._ins(node))

    def prim_TupleConstruct(self, node):
        self.env[node.output().debugName()] = tuple(self._ins(node))

    def prim_DictConstruct(self, node):
        ins = self._ins(node)
        self.env[node.output().debugName()] = dict(zip(ins[0::2], ins[1::2]))

    def _unpack(self, node):
        (value,) = self._ins(node)
        outs = list(node.outputs())
        if isinstance(value, Expr) and not isinstance(value, _expr.Tuple):
            t = self.ctx.type_of(value)
            if isinstance(t, TupleType):
                value = [TupleGetItem(value, i) for i in range(len(outs))]
            else:  # unpacking a tensor along its first axis
                n = self.ctx.shape(value)[0]
                parts = _op.split(value, n, axis=0)
                value = [_op.squeeze(parts[i], axis=[0]) for i in range(n)]
        elif isinstance(value, _expr.Tuple):
            value = list(value.fields)
        self._bind_outputs(node, list(value))

    prim_TupleUnpack = _unpack
    prim_ListUnpack = _unpack

    def prim_TupleIndex(self, node):
        seq, i = self._ins(node)
        self.env[node.output().debugName()] = seq[int(i)]

    prim_ListIndex = prim_TupleIndex

    def prim_TupleSlice(self, node):
        ins = self._ins(node)
        self.env[node.output().debugName()] = tuple(ins[0][int(ins[1]):int(ins[2])])

    def prim_GetAttr(self, node):
        (owner,) = self._ins(node)
        name = node.s("name")
        if not isinstance(owner, _ModuleRef):
            raise FrontendError(f"prim::GetAttr[name={name!r}] on a value that is not a module")
        import torch
        obj = getattr(owner.obj, name)
        path = owner.path + [name]
        if isinstance(obj, torch.Tensor):
            value = self._param(path, obj, node)
        elif isinstance(obj, (torch.jit.ScriptModule, torch.nn.Module)) or hasattr(obj, "_c"):
            value = _ModuleRef(path, obj)
        else:
            value = obj
        self.env[node.output().debugName()] = value

    def prim_NumToTensor(self, node):
        (v,) = self._ins(node)
        if isinstance(v, Expr):
            self.env[node.output().debugName()] = v
            return
        dtype = "bool" if isinstance(v, bool) else ("int64" if isinstance(v, numbers.Integral) else "float64")
        self.env[node.output().debugName()] = _expr.Constant(np.asarray(v, dtype=dtype))

    def prim_ImplicitTensorToNum(self, node):
        (v,) = self._ins(node)
        self.env[node.output().debugName()] = self.ctx.scalar(v, "the tensor converted to a number")

    def prim_If(self, node):
        cond = self._ins(node)[0]
        if isinstance(cond, Expr):
            val = self.ctx.value(cond)
            if val is None:  # a run-time condition: a Relay If (the VM runs it)
                self.dynamic_if(node, cond)
                return
            cond = bool(np.asarray(val).reshape(()))
        blocks = list(node.blocks())
        block = blocks[0] if cond else blocks[1]
        self._convert_block(block.nodes())
        outs = [self.env[o.debugName()] for o in block.outputs()]
        self._bind_outputs(node, outs if len(outs) != 1 else outs[0]) if outs else None

    def prim_dtype(self, node):
        (v,) = self._ins(node)
        self.env[node.output().debugName()] = DTypeName(self.ctx.dtype(v))

    def prim_device(self, node):
        self.env[node.output().debugName()] = "cpu"

    def prim_layout(self, node):
        self.env[node.output().debugName()] = 0

    def prim_shape(self, node):
        (v,) = self._ins(node)
        self.env[node.output().debugName()] = list(self.ctx.shape(v))

    def prim_unchecked_cast(self, node):
        self.env[node.output().debugName()] = self._ins(node)[0]

    prim_data = prim_unchecked_cast

    def prim_Uninitialized(self, node):
        self.env[node.output().debugName()] = None

    def prim_requires_grad(self, node):
        self.env[node.output().debugName()] = False

    prim_is_cuda = prim_requires_grad

    def prim_min(self, node):
        ins = self._ins(node)
        vals = ins[0] if len(ins) == 1 else ins
        self.env[node.output().debugName()] = min(vals)

    def prim_max(self, node):
        ins = self._ins(node)
        vals = ins[0] if len(ins) == 1 else ins
        self.env[node.output().debugName()] = max(vals)

    def prim_type(self, node):
        self.env[node.output().debugName()] = "cpu"

    def prim_RaiseException(self, node):
        raise FrontendError("the model raises an exception on this path (prim::RaiseException)")

    def prim_CreateObject(self, node):
        raise FrontendError("prim::CreateObject (TorchScript classes) is not supported")

    prim_SetAttr = prim_CreateObject


def from_pytorch(script_module, input_infos, custom_convert_map=None, default_dtype="float32",
                 use_parser_friendly_name=False, keep_quantized_weight=False, export_renamed_c_graph_path=None):
    """Convert a traced TorchScript module to ``(IRModule, params)``.

    ``input_infos``: ``[(name, shape)]`` or ``[(name, (shape, dtype))]``, one per graph input in order.
    ``custom_convert_map``: ``{"aten::op": fn(inputs, input_types) -> relay expr}`` for ops kiln lacks.
    Parameters are returned as a dict of NDArrays keyed by attribute path (``conv1.weight``; with
    ``use_parser_friendly_name``, ``conv1_weight``, which the Relay text parser can read back).
    Input dtypes come from ``input_infos`` when given there, else from the dtypes the model was traced with.
    ``export_renamed_c_graph_path``: a directory; the TorchScript graph, with every value renamed after the
    operator that makes it (``aten::conv2d_0_0``), is written there as ``tvm_exported_c_graph_<time>.txt``.
    """
    importer = TorchScriptImporter(script_module, input_infos, custom_convert_map, default_dtype,
                                   use_parser_friendly_name, keep_quantized_weight)
    if export_renamed_c_graph_path is not None:
        importer.export_path = str(export_renamed_c_graph_path)
    return importer.run()
