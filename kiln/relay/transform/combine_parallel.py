"""CombineParallelConv2D / CombineParallelDense: merge sibling ops that read the same input.

A *group* is a set of at least ``min_num_branches`` compatible ops (conv2d with equal attrs and
kernel size; dense with compatible weights) whose data argument is the same expression. Each branch
continues from its op through elementwise/broadcast ops that are the only user of the previous
value; those are combined level by level while all branches apply the same op with the same attrs
and arguments that can be joined along the channel axis.

- conv2d (groups=1): the weights are concatenated along the kernel's 'O' axis into one wider conv2d,
  following args along the output's 'C' axis; each branch's result is a ``strided_slice`` (mode
  "size") of the combined output.
- dense, ``to_batch=True``: inputs and weights are stacked into one ``nn.batch_matmul``, following
  args stacked too (1-d ones get a leading axis first); branches read ``squeeze(split(out)[i])``.
- dense, ``to_batch=False``: weights concatenated along units, outputs sliced on the last axis.
"""
from __future__ import annotations

from ...ir.node import structural_equal
from ...transform.pass_base import register_pass
from ..analysis.graph import edge_counts
from ..expr import Call, Function, Tuple, TupleGetItem
from ..expr_functor import Substituter, post_order_visit
from ._util import infer, is_op, op_call, op_pattern, static_shape, tensor_type, typed_function_pass
from .fusion_graph import BROADCAST


def _children(func) -> dict:
    """expr -> list of Call nodes that take it as an argument (in post order)."""
    children: dict = {}

    def visit(node):
        if isinstance(node, Call):
            for a in node.args:
                lst = children.setdefault(a, [])
                if node not in lst:
                    lst.append(node)
    post_order_visit(func, visit)
    return children


class ParallelOpCombiner:
    """Finds and merges one group at a time until none is left."""

    op_name = ""

    def __init__(self, min_num_branches: int):
        self.min_num_branches = min_num_branches

    # hooks --------------------------------------------------------------------------------------
    def is_supported(self, call) -> bool:
        return True

    def can_combine(self, a, b) -> bool:
        raise NotImplementedError

    def combined_op(self, branches):
        raise NotImplementedError

    def arg_compatible(self, a, b, index) -> bool:
        raise NotImplementedError

    def combined_following(self, branches, depth, parent_index, data):
        raise NotImplementedError

    def outputs(self, data, branches, depth) -> list:
        raise NotImplementedError

    # driver -------------------------------------------------------------------------------------
    def find_group(self, func):
        children = _children(func)
        counts = edge_counts(func)
        order = []
        post_order_visit(func, order.append)
        for node in order:
            cands = [c for c in children.get(node, ()) if is_op(c, self.op_name) and c.args[0] is node
                     and self.is_supported(c)]
            if len(cands) < self.min_num_branches:
                continue
            classes: list = []
            for c in cands:
                for cls in classes:
                    if self.can_combine(cls[0], c):
                        cls.append(c)
                        break
                else:
                    classes.append([c])
            for cls in classes:
                if len(cls) >= self.min_num_branches:
                    return [self.branch(c, children, counts) for c in cls]
        return None

    @staticmethod
    def branch(start, children, counts) -> list:
        br = [start]
        while True:
            last = br[-1]
            users = children.get(last, [])
            if counts.get(last, 0) != 1 or len(users) != 1:
                return br
            nxt = users[0]
            if not isinstance(nxt.op, type(start.op)) or op_pattern(nxt.op) > BROADCAST:
                return br
            br.append(nxt)

    def check_level(self, branches, depth, parent_index) -> bool:
        first = branches[0]
        if len(first) <= depth:
            return False
        ref = first[depth]
        if len(ref.args) < 1 or ref.args[parent_index] is not first[depth - 1]:
            return False
        for br in branches[1:]:
            if len(br) <= depth:
                return False
            c = br[depth]
            if c.op is not ref.op or len(c.args) != len(ref.args) or not structural_equal(c.attrs, ref.attrs):
                return False
            if c.args[parent_index] is not br[depth - 1]:
                return False
            for i in range(len(c.args)):
                if i != parent_index and not self.arg_compatible(ref, c, i):
                    return False
        return True

    def combine_group(self, func, branches):
        data = self.combined_op(branches)
        depth = 1
        while True:
            first = branches[0]
            if len(first) <= depth:
                break
            parent_index = next((i for i, a in enumerate(first[depth].args) if a is first[depth - 1]), None)
            if parent_index is None or not self.check_level(branches, depth, parent_index):
                break
            data = self.combined_following(branches, depth, parent_index, data)
            depth += 1
        subst = {br[depth - 1]: out for br, out in zip(branches, self.outputs(data, branches, depth))}
        return Substituter(subst).visit(func)

    def run(self, func, mod=None):
        for _ in range(64):
            branches = self.find_group(func)
            if branches is None:
                return func
            func = infer(self.combine_group(func, branches), mod)
        return func


def _concat(exprs, axis):
    return op_call("concatenate", [Tuple(list(exprs))], axis=axis)


class ParallelConv2DCombiner(ParallelOpCombiner):
    op_name = "nn.conv2d"

    def is_supported(self, call) -> bool:
        a = call.attrs
        return int(a.groups) == 1 and "O" in a.kernel_layout and "C" in (a.out_layout or a.data_layout)

    def channel_pos(self, call) -> int:
        return (call.attrs.out_layout or call.attrs.data_layout).index("C")

    def can_combine(self, a, b) -> bool:
        aa, ab = a.attrs, b.attrs
        for f in ("strides", "padding", "dilation", "groups", "data_layout", "kernel_layout", "out_dtype",
                  "out_layout"):
            if not structural_equal(getattr(aa, f), getattr(ab, f)):
                return False
        wa, wb = static_shape(a.args[1]), static_shape(b.args[1])
        if wa is None or wb is None or tensor_type(a.args[1]).dtype != tensor_type(b.args[1]).dtype:
            return False
        layout = aa.kernel_layout
        return all(wa[layout.index(ch)] == wb[layout.index(ch)] for ch in "IHW")

    def combined_op(self, branches):
        convs = [br[0] for br in branches]
        layout = convs[0].attrs.kernel_layout
        o_axis = layout.index("O")
        channels = sum(static_shape(c.args[1])[o_axis] for c in convs)
        weight = _concat([c.args[1] for c in convs], o_axis)
        attrs = dict(convs[0].attrs.items())
        attrs["channels"] = channels
        return op_call("nn.conv2d", [convs[0].args[0], weight], **attrs)

    def arg_compatible(self, a, b, index) -> bool:
        """The argument has the channel axis (not broadcast) where the output has it, and equal dims
        elsewhere, so the branches' arguments can be concatenated on it."""
        ta, tb = tensor_type(a.args[index]), tensor_type(b.args[index])
        oa, ob = tensor_type(a), tensor_type(b)
        if None in (ta, tb, oa, ob) or ta.dtype != tb.dtype or len(ta.shape) != len(tb.shape):
            return False
        arg_c = self._cpos - len(oa.shape) + len(ta.shape)
        if arg_c < 0:
            return False
        if ta.shape[arg_c] != oa.shape[self._cpos] or tb.shape[arg_c] != ob.shape[self._cpos]:
            return False
        return all(ta.shape[i] == tb.shape[i] for i in range(len(ta.shape)) if i != arg_c)

    def combined_following(self, branches, depth, parent_index, data):
        ref = branches[0][depth]
        out_ndim = len(tensor_type(ref).shape)
        args = []
        for i in range(len(ref.args)):
            if i == parent_index:
                args.append(data)
                continue
            arg_ndim = len(tensor_type(ref.args[i]).shape)
            args.append(_concat([br[depth].args[i] for br in branches], self._cpos - out_ndim + arg_ndim))
        return Call(ref.op, args, ref.attrs, ref.type_args)

    def outputs(self, data, branches, depth):
        outs = []
        index = 0
        for br in branches:
            channels = static_shape(br[0])[self._cpos]
            begin = [0] * self._cpos + [index]
            end = [-1] * self._cpos + [channels]
            index += channels
            outs.append(op_call("strided_slice", [data], begin=begin, end=end, strides=[1] * len(begin),
                                slice_mode="size"))
        return outs

    def combine_group(self, func, branches):
        self._cpos = self.channel_pos(branches[0][0])
        return super().combine_group(func, branches)


class ParallelDenseToDenseCombiner(ParallelConv2DCombiner):
    op_name = "nn.dense"

    def is_supported(self, call) -> bool:
        return True

    def can_combine(self, a, b) -> bool:
        wa, wb = static_shape(a.args[1]), static_shape(b.args[1])
        return (wa is not None and wb is not None and wa[1] == wb[1]
                and tensor_type(a.args[1]).dtype == tensor_type(b.args[1]).dtype
                and structural_equal(a.attrs.out_dtype, b.attrs.out_dtype))

    def combined_op(self, branches):
        denses = [br[0] for br in branches]
        units = sum(static_shape(d.args[1])[0] for d in denses)
        attrs = dict(denses[0].attrs.items())
        attrs["units"] = units
        return op_call("nn.dense", [denses[0].args[0], _concat([d.args[1] for d in denses], 0)], **attrs)

    def combine_group(self, func, branches):
        self._cpos = len(static_shape(branches[0][0])) - 1
        return ParallelOpCombiner.combine_group(self, func, branches)


class ParallelDenseToBatchCombiner(ParallelOpCombiner):
    op_name = "nn.dense"

    def can_combine(self, a, b) -> bool:
        wa, wb = static_shape(a.args[1]), static_shape(b.args[1])
        return (wa is not None and wa == wb and tensor_type(a.args[1]).dtype == tensor_type(b.args[1]).dtype
                and structural_equal(a.attrs.out_dtype, b.attrs.out_dtype) and len(static_shape(a.args[0]) or ()) == 2)

    def combined_op(self, branches):
        denses = [br[0] for br in branches]
        data = op_call("stack", [Tuple([d.args[0] for d in denses])], axis=0)
        weight = op_call("stack", [Tuple([d.args[1] for d in denses])], axis=0)
        return op_call("nn.batch_matmul", [data, weight], out_dtype=denses[0].attrs.out_dtype,
                       transpose_a=False, transpose_b=True)

    def arg_compatible(self, a, b, index) -> bool:
        ta, tb = tensor_type(a.args[index]), tensor_type(b.args[index])
        return (ta is not None and tb is not None and ta.dtype == tb.dtype and not ta.is_dynamic()
                and tuple(ta.shape) == tuple(tb.shape))

    def combined_following(self, branches, depth, parent_index, data):
        ref = branches[0][depth]
        args = []
        for i in range(len(ref.args)):
            if i == parent_index:
                args.append(data)
                continue
            fields = []
            for br in branches:
                a = br[depth].args[i]
                fields.append(op_call("expand_dims", [a], axis=0, num_newaxis=1)
                              if len(tensor_type(a).shape) == 1 else a)
            args.append(op_call("stack", [Tuple(fields)], axis=0))
        return Call(ref.op, args, ref.attrs, ref.type_args)

    def outputs(self, data, branches, depth):
        split = op_call("split", [data], indices_or_sections=len(branches), axis=0)
        return [op_call("squeeze", [TupleGetItem(split, i)], axis=[0]) for i in range(len(branches))]


def CombineParallelConv2D(min_num_branches: int = 3):  # noqa: N802 (TVM's name)
    """Merge >= min_num_branches parallel conv2d ops on the same input into one (opt level 4)."""
    return typed_function_pass(lambda f, mod, ctx: ParallelConv2DCombiner(min_num_branches).run(f, mod), 4,
                               "CombineParallelConv2D")


def CombineParallelDense(min_num_branches: int = 3, to_batch: bool = True):  # noqa: N802 (TVM's name)
    """Merge parallel dense ops on the same input: into one batch_matmul (``to_batch``) or one wider
    dense (opt level 4)."""
    cls = ParallelDenseToBatchCombiner if to_batch else ParallelDenseToDenseCombiner
    return typed_function_pass(lambda f, mod, ctx: cls(min_num_branches).run(f, mod), 4, "CombineParallelDense")


register_pass("CombineParallelConv2D", CombineParallelConv2D)
register_pass("CombineParallelDense", CombineParallelDense)
