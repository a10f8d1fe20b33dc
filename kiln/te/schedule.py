"""Schedules and stages: how each TE operation's loops are split, ordered and placed.

A Schedule holds one Stage per operation (in producer-before-consumer order). A Stage keeps
the operation's root axes, the relations that derive new axes from them (split, fuse, and the
rebase added by ``normalize``), the current loop order (``leaf_iter_vars``), per-axis
annotations (vectorize/unroll/parallel, thread binding, pragmas) and where the stage is
computed (root, inlined, or at an axis of another stage).
"""
from __future__ import annotations

import logging

from ..ir.node import Node
from ..tir import expr as E, op as tir_op
from ..runtime.dtype import parse_dtype
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor
from .tensor_intrin import TensorIntrin
from .tensor_compute import TensorComputeOp
from ..error import ScheduleError, OpNotImplemented
from ..transform.pass_context import PassContext
from . import schedule_passes

# attach types (TVM's AttachType values)
kGroupRoot = 1
kInline = 2
kInlinedAlready = 3
kScope = 4
kScanUpdate = 5


# --------------------------------------------------------------------------------------------
# relations between iteration variables
# --------------------------------------------------------------------------------------------
class IterVarRelation(Node):
    _is_var = True
    _fields = ()


class Split(IterVarRelation):
    """``parent`` = ``outer`` * factor + ``inner`` (``factor`` or ``nparts`` given)."""

    def __init__(self, parent, outer, inner, factor, nparts):
        self.parent, self.outer, self.inner = parent, outer, inner
        self.factor, self.nparts = factor, nparts

    def __repr__(self):
        return f"Split({self.parent.var.name} -> {self.outer.var.name}, {self.inner.var.name})"


class Fuse(IterVarRelation):
    """``fused`` enumerates (``outer``, ``inner``) pairs row-major."""

    def __init__(self, outer, inner, fused):
        self.outer, self.inner, self.fused = outer, inner, fused

    def __repr__(self):
        return f"Fuse({self.outer.var.name}, {self.inner.var.name} -> {self.fused.var.name})"


class Rebase(IterVarRelation):
    """``rebased`` = ``parent`` - parent.min (added by normalize so every loop starts at 0)."""

    def __init__(self, parent, rebased):
        self.parent, self.rebased = parent, rebased

    def __repr__(self):
        return f"Rebase({self.parent.var.name} -> {self.rebased.var.name})"


class Singleton(IterVarRelation):
    """A unit loop created by fusing no axes."""

    def __init__(self, iter):  # noqa: A002 - TVM's field name
        self.iter = iter

    def __repr__(self):
        return f"Singleton({self.iter.var.name})"


class IterVarAttr:
    """Per-axis schedule annotations."""

    def __init__(self):
        self.iter_type = E.IterVar.DataPar
        self.bind_thread = None
        self.pragma_keys: list = []
        self.pragma_values: list = []
        self.dim_align_factor = 0
        self.dim_align_offset = 0
        self.tensor_intrin = None
        self.prefetch_data: list = []     # tensors to prefetch at this loop (Stage.prefetch)
        self.prefetch_offset: list = []   # how many iterations ahead, one per tensor
        self.prefetch_spread: list = []   # per tensor: False, or True for a spread prefetch (its loop is marked)
        self.prefetch_spread_at: list = []  # tensors whose spread prefetch is shared over this loop

    def copy(self) -> "IterVarAttr":
        n = IterVarAttr()
        n.__dict__.update(self.__dict__)
        n.pragma_keys = list(self.pragma_keys)
        n.pragma_values = list(self.pragma_values)
        n.prefetch_data = list(self.prefetch_data)
        n.prefetch_offset = list(self.prefetch_offset)
        n.prefetch_spread = list(self.prefetch_spread)
        n.prefetch_spread_at = list(self.prefetch_spread_at)
        return n


_ITER_TYPE_NAMES = {
    E.IterVar.DataPar: "data-parallel", E.IterVar.ThreadIndex: "thread", E.IterVar.CommReduce: "reduction",
    E.IterVar.Ordered: "ordered", E.IterVar.DimInfo: "dim-info", E.IterVar.Unrolled: "unrolled",
    E.IterVar.Vectorized: "vectorized", E.IterVar.Parallelized: "parallel", E.IterVar.Tensorized: "tensorized",
}


def _upstream_tensors(op) -> list:
    """Every tensor ``op`` reads, directly or through the operations producing its inputs."""
    out, seen, todo = [], set(), [op]
    while todo:
        o = todo.pop()
        for t in o.input_tensors:
            out.append(t)
            if id(t.op) not in seen:
                seen.add(id(t.op))
                todo.append(t.op)
    return out


def _axis_name(iv) -> str:
    return iv.var.name if isinstance(iv, E.IterVar) else repr(iv)


# --------------------------------------------------------------------------------------------
# schedule record (PassContext config "te.keep_schedule_record")
# --------------------------------------------------------------------------------------------
def _recorded(name: str):
    """Make a primitive append (a snapshot of the schedule, ``name``) to its schedule's
    ``schedule_record``/``primitive_record`` when the schedule keeps a record. Primitives called by
    another primitive (``tile`` splits and reorders) are not recorded on their own, as in TVM."""
    def deco(fn):
        def wrapper(self, *args, **kwargs):
            sch = self if isinstance(self, Schedule) else self.attach_sch
            if sch is None or not getattr(sch, "keep_schedule_record", False):
                return fn(self, *args, **kwargs)
            sch._record_depth += 1
            try:
                out = fn(self, *args, **kwargs)
            finally:
                sch._record_depth -= 1
            if sch._record_depth == 0:
                sch._add_record(name)
            return out
        wrapper.__name__ = fn.__name__
        wrapper.__qualname__ = fn.__qualname__
        wrapper.__doc__ = fn.__doc__
        return wrapper
    return deco


# --------------------------------------------------------------------------------------------
# Stage
# --------------------------------------------------------------------------------------------
class Stage(Node):
    """The schedule of one operation (``s[tensor]``)."""

    _is_var = True
    _fields = ()

    def __init__(self, op: Operation, sch=None):
        self.op = op
        self.origin_op = op
        self.all_iter_vars = list(op.root_iter_vars)
        self.leaf_iter_vars = list(self.all_iter_vars)
        self.relations: list = []
        self.iter_var_attrs: dict = {}
        self.attach_type = kGroupRoot
        self.attach_ivar = None
        self.attach_stage = None
        self.scope = ""
        self.is_output = False
        self.is_double_buffer = False
        self.group = None
        self.env_threads: list = []
        self.store_predicate = None
        self.attach_sch = sch
        setup = getattr(op, "setup_stage", None)
        if setup is not None:  # an op that starts scheduled (a tensor intrinsic called in te.compute)
            setup(self)

    # -- helpers -------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.op.name

    def __repr__(self):
        return f"stage({self.op.name}, {type(self.op).__name__})"

    __str__ = __repr__

    def astext(self) -> str:
        return repr(self)

    def _copy(self) -> "Stage":
        n = object.__new__(Stage)
        n.__dict__.update(self.__dict__)
        n.all_iter_vars = list(self.all_iter_vars)
        n.leaf_iter_vars = list(self.leaf_iter_vars)
        n.relations = list(self.relations)
        n.iter_var_attrs = {k: v.copy() for k, v in self.iter_var_attrs.items()}
        n.env_threads = list(self.env_threads)
        return n

    def _find_leaf(self, iv, what: str) -> int:
        """Position of ``iv`` in this stage's loop order, or a ScheduleError saying why not."""
        if not isinstance(iv, E.IterVar):
            raise ScheduleError(f"{what} on stage '{self.op.name}': expected an axis (IterVar), got {iv!r}")
        for pos, x in enumerate(self.leaf_iter_vars):
            if x is iv:
                return pos
        leaves = ", ".join(_axis_name(x) for x in self.leaf_iter_vars)
        if any(x is iv for x in self.all_iter_vars):
            raise ScheduleError(
                f"{what} on stage '{self.op.name}': axis '{_axis_name(iv)}' has already been split or fused "
                f"and is no longer a loop of this stage; its current loops are [{leaves}]")
        if isinstance(self.op, TensorComputeOp) and not self.leaf_iter_vars and \
                any(iv is x for x in getattr(self.op, "axis", ()) or ()):
            raise OpNotImplemented(
                f"{what} on stage '{self.op.name}': the loops of a tensor intrinsic called inside te.compute "
                "(TensorComputeOp) cannot be scheduled in kiln (the stage is opaque); schedule a consumer stage, and "
                "attach pragmas such as import_c to another stage's loop")
        owner = self._owner_of(iv)
        where = f" (it belongs to stage '{owner.op.name}')" if owner is not None else ""
        raise ScheduleError(
            f"{what} on stage '{self.op.name}': axis '{_axis_name(iv)}' is not an axis of this stage{where}; "
            f"its current loops are [{leaves}]")

    def _owner_of(self, iv):
        sch = self.attach_sch
        if sch is None:
            return None
        for st in sch.stages:
            if st is not self and any(x is iv for x in st.all_iter_vars):
                return st
        return None

    def _attr(self, iv) -> IterVarAttr:
        a = self.iter_var_attrs.get(iv)
        if a is None:
            a = IterVarAttr()
            self.iter_var_attrs[iv] = a
        return a

    # -- loop transformations ------------------------------------------------------------------
    @_recorded("split")
    def split(self, parent, factor=None, nparts=None):
        """Split ``parent`` into (outer, inner) by ``factor`` (inner extent) or ``nparts`` (outer)."""
        if (factor is None) == (nparts is None):
            raise ScheduleError(f"split on stage '{self.op.name}': give exactly one of factor or nparts")
        pos = self._find_leaf(parent, "split")
        amount = factor if factor is not None else nparts
        amount = tir_op.convert(amount)
        if not isinstance(amount, E.PrimExpr) or not parse_dtype(amount.dtype).is_integral:
            raise ScheduleError(f"split on stage '{self.op.name}': the split factor must be an integer, got {amount!r}")
        if isinstance(amount, E.IntImm) and amount.value <= 0:
            raise ScheduleError(
                f"split on stage '{self.op.name}': the split {'factor' if factor is not None else 'nparts'} "
                f"must be positive, got {amount.value}")
        amount = tir_op.cast(amount, parent.var.dtype)
        outer = E.IterVar(None, E.Var(parent.var.name + ".outer", parent.var.dtype), parent.iter_type)
        inner = E.IterVar(None, E.Var(parent.var.name + ".inner", parent.var.dtype), parent.iter_type)
        self.relations.append(Split(parent, outer, inner,
                                    amount if factor is not None else None,
                                    amount if nparts is not None else None))
        self.all_iter_vars += [outer, inner]
        self.leaf_iter_vars[pos:pos + 1] = [outer, inner]
        return outer, inner

    @_recorded("fuse")
    def fuse(self, *args):
        """Fuse adjacent axes (outer first) into one; with no axes, add a unit outermost loop."""
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        if not args:
            single = E.IterVar(E.Range(0, 1), E.Var("singleton", "int32"), E.IterVar.DataPar)
            self.relations.append(Singleton(single))
            self.all_iter_vars.append(single)
            self.leaf_iter_vars.insert(0, single)
            return single
        fused = args[0]
        for nxt in args[1:]:
            fused = self._fuse2(fused, nxt)
        if len(args) == 1:
            self._find_leaf(fused, "fuse")
        return fused

    def _fuse2(self, outer, inner):
        for iv in (outer, inner):
            self._find_leaf(iv, "fuse")
            if iv.iter_type not in (E.IterVar.DataPar, E.IterVar.CommReduce, E.IterVar.Ordered):
                raise ScheduleError(
                    f"fuse on stage '{self.op.name}': cannot fuse the {_ITER_TYPE_NAMES.get(iv.iter_type)} "
                    f"axis '{_axis_name(iv)}'")
        p_outer = self._find_leaf(outer, "fuse")
        p_inner = self._find_leaf(inner, "fuse")
        if p_inner + 1 == p_outer:
            outer, inner = inner, outer
            p_outer, p_inner = p_inner, p_outer
        if p_inner != p_outer + 1:
            leaves = ", ".join(_axis_name(x) for x in self.leaf_iter_vars)
            raise ScheduleError(
                f"fuse on stage '{self.op.name}': axes '{_axis_name(outer)}' and '{_axis_name(inner)}' are not "
                f"adjacent in the loop order [{leaves}]; only consecutive loops can be fused (reorder first)")
        dtype = outer.var.dtype if outer.var.dtype == inner.var.dtype else "int64"
        itype = max(outer.iter_type, inner.iter_type)
        fused = E.IterVar(None, E.Var(f"{outer.var.name}.{inner.var.name}.fused", dtype), itype)
        self.relations.append(Fuse(outer, inner, fused))
        self.all_iter_vars.append(fused)
        self.leaf_iter_vars[p_outer:p_inner + 1] = [fused]
        return fused

    @_recorded("reorder")
    def reorder(self, *args):
        """Put the given axes in this order, in the loop positions they occupy now."""
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        seen = []
        for iv in args:
            if any(iv is x for x in seen):
                raise ScheduleError(
                    f"reorder on stage '{self.op.name}': axis '{_axis_name(iv)}' appears more than once")
            seen.append(iv)
        pos = [self._find_leaf(iv, "reorder") for iv in args]
        for iv in args:
            if iv.iter_type not in (E.IterVar.DataPar, E.IterVar.CommReduce, E.IterVar.ThreadIndex):
                raise ScheduleError(
                    f"reorder on stage '{self.op.name}': can only reorder data-parallel, reduction or thread "
                    f"axes, not '{_axis_name(iv)}'")
        for p, iv in zip(sorted(pos), args):
            self.leaf_iter_vars[p] = iv

    @_recorded("tile")
    def tile(self, x_parent, y_parent, x_factor, y_factor):
        """Split two axes and order them (x_outer, y_outer, x_inner, y_inner)."""
        xo, xi = self.split(x_parent, factor=x_factor)
        yo, yi = self.split(y_parent, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    # -- loop annotations ----------------------------------------------------------------------
    def _set_iter_type(self, iv, itype, what):
        self._find_leaf(iv, what)
        if iv.iter_type == E.IterVar.CommReduce and itype in (E.IterVar.Vectorized, E.IterVar.Parallelized):
            raise ScheduleError(
                f"{what} on stage '{self.op.name}': axis '{_axis_name(iv)}' is a reduction axis; iterations "
                f"of a reduction depend on each other, so it cannot be {what}d directly. Use "
                f"s.rfactor(tensor, axis) to turn it into a data-parallel axis of a new stage first")
        if iv.iter_type not in (E.IterVar.DataPar, E.IterVar.CommReduce, E.IterVar.Ordered, E.IterVar.Unrolled,
                                E.IterVar.Vectorized, E.IterVar.Parallelized, E.IterVar.Tensorized):
            raise ScheduleError(
                f"{what} on stage '{self.op.name}': cannot {what} the "
                f"{_ITER_TYPE_NAMES.get(iv.iter_type)} axis '{_axis_name(iv)}'")
        self._attr(iv).iter_type = itype

    @_recorded("vectorize")
    def vectorize(self, var):
        """Mark an axis to be vectorized."""
        self._set_iter_type(var, E.IterVar.Vectorized, "vectorize")

    @_recorded("unroll")
    def unroll(self, var):
        """Mark an axis to be unrolled."""
        self._set_iter_type(var, E.IterVar.Unrolled, "unroll")

    @_recorded("parallel")
    def parallel(self, var):
        """Mark an axis to run in parallel threads."""
        self._set_iter_type(var, E.IterVar.Parallelized, "parallel")

    @_recorded("tensorize")
    def tensorize(self, var, tensor_intrin):
        """Replace the loops from ``var`` inward by ``tensor_intrin`` (``te.decl_tensor_intrin``)."""
        if not isinstance(tensor_intrin, TensorIntrin):
            raise ScheduleError(f"tensorize on stage '{self.op.name}': expected a te.decl_tensor_intrin result, "
                                f"got {tensor_intrin!r}")
        if isinstance(self.op, TensorComputeOp) and self.attach_sch is not None:
            # a tensor intrinsic call's stage is computed by its intrinsic already: TVM leaves it unchanged
            logging.getLogger("kiln.te").warning("tensorize on stage '%s' (a tensor intrinsic called in te.compute) "
                                                 "has no effect", self.op.name)
            return
        if not isinstance(self.op, ComputeOp):
            raise ScheduleError(f"tensorize on stage '{self.op.name}': only compute stages can be tensorized")
        self._find_leaf(var, "tensorize")
        a = self._attr(var)
        a.iter_type = E.IterVar.Tensorized
        a.tensor_intrin = tensor_intrin

    @_recorded("bind")
    def bind(self, ivar, thread_ivar):
        """Bind a loop to a GPU thread axis (``te.thread_axis``)."""
        self._find_leaf(ivar, "bind")
        if not isinstance(thread_ivar, E.IterVar) or thread_ivar.iter_type != E.IterVar.ThreadIndex:
            raise ScheduleError(
                f"bind on stage '{self.op.name}': the target must be a te.thread_axis, got {thread_ivar!r}")
        if ivar.iter_type not in (E.IterVar.DataPar, E.IterVar.CommReduce):
            raise ScheduleError(
                f"bind on stage '{self.op.name}': cannot bind the {_ITER_TYPE_NAMES.get(ivar.iter_type)} axis "
                f"'{_axis_name(ivar)}' to a thread")
        self._attr(ivar).bind_thread = thread_ivar

    @_recorded("pragma")
    def pragma(self, var, pragma_type: str, pragma_value=None):
        """Annotate a loop with ``pragma_<type>`` (becomes an AttrStmt around the loop)."""
        if pragma_type == "unroll":
            self.unroll(var)
        elif pragma_type == "vectorize":
            self.vectorize(var)
        else:
            self._find_leaf(var, "pragma")
            a = self._attr(var)
            a.pragma_keys.append(str(pragma_type))
            a.pragma_values.append(tir_op.convert(pragma_value) if pragma_value is not None else None)

    @_recorded("prefetch")
    def prefetch(self, tensor, var, offset, spread_over=None):
        """Prefetch ``tensor`` at loop ``var``: before each iteration, the part of ``tensor`` that iteration
        ``var + offset`` reads is requested into the cache (TE lowering puts a ``prefetch_scope`` attribute on the
        loop; ``kiln.tir.transform.InjectPrefetch`` turns it into a ``Prefetch`` of that region, clamped to the
        buffer; StorageFlatten makes it one ``tir.prefetch`` call per 64-byte cache line).

        ``spread_over`` (kiln's extension; TVM's ``prefetch`` has three arguments): a loop inside ``var``'s (of
        this stage or of a stage computed inside it). The region of iteration ``var + offset`` is then requested
        a little at a time instead of in one burst: iteration ``var`` takes part ``var mod offset`` of ``offset``
        equal parts of its cache lines (so the ``offset`` iterations before it request it once, between them),
        and each iteration of the loops from ``var``'s body down to ``spread_over`` an equal share of that part,
        at the start of ``spread_over``'s body, into the caches below L1 (``__builtin_prefetch`` locality 2). It is
        for data needed a whole task later, such as the next output-channel chunk's weights of a convolution
        whose parallel loop runs ``offset`` row tiles per chunk: a burst of thousands of prefetches fills the
        core's miss buffers and stalls it until memory answers, where requests between the arithmetic overlap
        it. It applies where the region is one contiguous span of an argument buffer and ``offset`` is a
        positive constant; elsewhere no prefetch is emitted (a prefetch is a hint: dropping one changes no
        result)."""
        if not isinstance(tensor, Tensor):
            raise ScheduleError(f"prefetch on stage '{self.op.name}': the first argument must be a te.Tensor "
                                f"(the tensor to prefetch), got {tensor!r}")
        self._find_leaf(var, "prefetch")
        if not any(t.op is tensor.op and t.value_index == tensor.value_index for t in _upstream_tensors(self.op)):
            raise ScheduleError(f"prefetch on stage '{self.op.name}': tensor '{tensor.name}' is not an input of "
                                f"this stage (directly or through its producers), so there is nothing of it to "
                                "prefetch")
        offset = tir_op.convert(offset)
        if not parse_dtype(offset.dtype).is_integral:
            raise ScheduleError(f"prefetch on stage '{self.op.name}': the offset must be an integer, got {offset!r}")
        owner = None
        if spread_over is not None:
            stages = self.attach_sch.stages if self.attach_sch is not None else [self]
            owner = next((st for st in stages if any(x is spread_over for x in st.leaf_iter_vars)), None)
            if owner is None:
                raise ScheduleError(f"prefetch on stage '{self.op.name}': spread_over must be a loop (IterVar) of a "
                                    f"stage of this schedule, inside '{_axis_name(var)}'; got {spread_over!r}")
        a = self._attr(var)
        a.prefetch_data.append(tensor)
        a.prefetch_offset.append(offset)
        a.prefetch_spread.append(owner is not None)
        if owner is not None:
            owner._attr(spread_over).prefetch_spread_at.append(tensor)

    @_recorded("storage_align")
    def storage_align(self, axis, factor, offset):
        """Record a row alignment for the stage's buffer (an optimization hint; kiln keeps it only)."""
        if not any(axis is x for x in getattr(self.op, "axis", [])):
            raise ScheduleError(
                f"storage_align on stage '{self.op.name}': '{_axis_name(axis)}' is not a root axis of this stage")
        a = self._attr(axis)
        a.dim_align_factor = int(factor)
        a.dim_align_offset = int(offset)

    @_recorded("double_buffer")
    def double_buffer(self):
        """Mark the stage's buffer for double buffering (recorded; kiln's CPU path ignores it)."""
        self.is_double_buffer = True

    @_recorded("set_scope")
    def set_scope(self, scope: str):
        """Storage scope of this stage's buffer ("global", "shared", "local", ...)."""
        self.scope = scope

    @_recorded("set_store_predicate")
    def set_store_predicate(self, predicate):
        self.store_predicate = predicate

    # -- placement -----------------------------------------------------------------------------
    @_recorded("compute_at")
    def compute_at(self, parent, scope):
        """Compute this stage inside the loop ``scope`` of the consumer stage ``parent``.

        As in TVM, whether the attachment makes sense (``parent`` consumes this stage, no stage is
        computed at itself or in a cycle, outputs stay at root) is checked when the schedule is lowered.
        """
        if not isinstance(parent, Stage):
            raise ScheduleError(f"compute_at on stage '{self.op.name}': parent must be a Stage (s[tensor])")
        if isinstance(self.op, PlaceholderOp):
            raise ScheduleError(f"compute_at on stage '{self.op.name}': a placeholder is not computed")
        if not any(scope is x for x in parent.leaf_iter_vars):
            leaves = ", ".join(_axis_name(x) for x in parent.leaf_iter_vars)
            raise ScheduleError(
                f"compute_at on stage '{self.op.name}': axis '{_axis_name(scope)}' is not a loop of stage "
                f"'{parent.op.name}' (its loops are [{leaves}])")
        self.attach_type = kScope
        self.attach_ivar = scope
        self.attach_stage = parent

    @_recorded("compute_inline")
    def compute_inline(self):
        """Substitute this stage's body into its consumers instead of materializing it."""
        if not isinstance(self.op, ComputeOp):
            raise ScheduleError(f"compute_inline on stage '{self.op.name}': only compute stages can be inlined")
        if self.is_output:
            raise ScheduleError(
                f"compute_inline on stage '{self.op.name}': it is an output of the schedule; outputs must be "
                "materialized")
        if self.op.reduce_axis or isinstance(self.op.body[0], E.Reduce):
            raise ScheduleError(
                f"compute_inline on stage '{self.op.name}': it is a reduction; a reduction cannot be inlined "
                "into its consumers (use compute_at instead)")
        if self.op.num_outputs != 1:
            raise ScheduleError(f"compute_inline on stage '{self.op.name}': cannot inline a multi-output compute")
        self.attach_type = kInline
        self.attach_ivar = None
        self.attach_stage = None

    @_recorded("compute_root")
    def compute_root(self):
        """Compute this stage at the root of the function (the default)."""
        self.attach_type = kGroupRoot
        self.attach_ivar = None
        self.attach_stage = None

    def get_attach_spec(self) -> "Stage":
        return self


def check_attachments(sch) -> None:
    """The compute_at rules TVM enforces when lowering: a ScheduleError naming the broken one."""
    for st in sch.stages:
        if st.attach_type != kScope:
            continue
        parent = st.attach_stage
        where = f"s[{st.op.name}].compute_at(s[{parent.op.name}], {_axis_name(st.attach_ivar)})"
        if parent is st:
            raise ScheduleError(f"{where}: a stage cannot be computed at itself; attach it to a stage that reads it")
        if st.is_output:
            raise ScheduleError(f"{where}: '{st.op.name}' is an output of the schedule and must be computed at root")
        seen, p = {id(st)}, parent
        while p is not None and p.attach_type == kScope:
            if id(p) in seen:
                raise ScheduleError(f"{where}: the compute_at attachments form a cycle through stage '{p.op.name}'")
            seen.add(id(p))
            p = p.attach_stage
        if not _reads_transitively(parent.op, st.op):
            raise ScheduleError(
                f"{where}: stage '{parent.op.name}' does not consume '{st.op.name}' (directly or through other "
                f"stages), so '{st.op.name}' cannot be computed inside it")


def legalize_invalid_attach(sch) -> None:
    """Move an attachment whose loop was split or fused after compute_at to the loop that replaced it
    (the inner loop of a split, the fused loop of a fuse), as TVM's LegalizeInvalidAttach does."""
    for st in sch.stages:
        if st.attach_type != kScope:
            continue
        parent, iv = st.attach_stage, st.attach_ivar
        for _ in range(len(parent.relations) + 1):
            if any(iv is x for x in parent.leaf_iter_vars):
                break
            nxt = None
            for rel in parent.relations:
                if isinstance(rel, Split) and rel.parent is iv:
                    nxt = rel.inner
                elif isinstance(rel, Fuse) and (rel.inner is iv or rel.outer is iv):
                    nxt = rel.fused
                elif isinstance(rel, Rebase) and rel.parent is iv:
                    nxt = rel.rebased
                if nxt is not None:
                    break
            if nxt is None:
                break
            iv = nxt
        st.attach_ivar = iv


def _reads_transitively(consumer_op, producer_op) -> bool:
    """Whether ``consumer_op`` reads ``producer_op``'s output, directly or through other ops."""
    return any(op is producer_op for op in _post_dfs_ops([consumer_op]) if op is not consumer_op)


# --------------------------------------------------------------------------------------------
# Schedule
# --------------------------------------------------------------------------------------------
def _post_dfs_ops(roots):
    """Operations reachable from ``roots``, inputs before their consumers (a depth-first post-order,
    from an explicit stack: a chain of thousands of stages costs no interpreter stack)."""
    order, seen = [], set()
    for root in roots:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, iter([t.op for t in root.input_tensors]))]
        while stack:
            op, it = stack[-1]
            for child in it:
                if id(child) not in seen:
                    seen.add(id(child))
                    stack.append((child, iter([t.op for t in child.input_tensors])))
                    break
            else:
                stack.pop()
                order.append(op)
    return order


def _as_op(x, what="create_schedule"):
    if isinstance(x, Tensor):
        return x.op
    if isinstance(x, Operation):
        return x
    raise ScheduleError(f"{what}: expected a te.Tensor or an operation, got {type(x).__name__}")


class Schedule(Node):
    """A schedule of a group of operations (``te.create_schedule``)."""

    _is_var = True
    _fields = ()

    def __init__(self, ops):
        if not isinstance(ops, (list, tuple)):
            ops = [ops]
        self.outputs = [_as_op(o) for o in ops]
        self.keep_schedule_record = bool(PassContext.current().get_config("te.keep_schedule_record", False))
        self.schedule_record: list = []
        self.primitive_record: list = []
        self._record_depth = 0
        self.stages: list = []
        self.stage_map: dict = {}
        self.groups: list = []
        for op in _post_dfs_ops(self.outputs):
            st = Stage(op, self)
            st.is_output = any(op is o for o in self.outputs)
            self.stages.append(st)
            self.stage_map[op] = st
        if self.keep_schedule_record:
            self._add_record("vanilla")

    def _add_record(self, name: str) -> None:
        snap = self.copy()
        snap.keep_schedule_record = False  # a snapshot records nothing itself
        self.schedule_record.append(snap)
        self.primitive_record.append(name)

    def __repr__(self):
        return f"Schedule({', '.join(s.op.name for s in self.stages)})"

    __str__ = __repr__

    def astext(self):
        return repr(self)

    def __getitem__(self, key) -> Stage:
        op = key.op if isinstance(key, Tensor) else key
        if isinstance(key, Stage):
            return key
        st = self.stage_map.get(op) if isinstance(op, Operation) else None
        if st is None:
            for s in self.stages:
                if s.op is op:
                    return s
            names = ", ".join(s.op.name for s in self.stages)
            what = getattr(op, "name", repr(key))
            raise ScheduleError(f"'{what}' is not an operation of this schedule (its stages are: {names})")
        return st

    def __contains__(self, key) -> bool:
        try:
            self[key]
            return True
        except ScheduleError:
            return False

    def _stage_of_op(self, op):
        for s in self.stages:
            if s.op is op:
                return s
        return self.stage_map.get(op)

    def copy(self) -> "Schedule":
        """A copy whose stages can be changed without touching this schedule."""
        n = object.__new__(Schedule)
        n.outputs = list(self.outputs)
        n.keep_schedule_record = getattr(self, "keep_schedule_record", False)
        n.schedule_record, n.primitive_record, n._record_depth = [], [], 0
        smap = {id(s): s._copy() for s in self.stages}
        for g in self.groups:
            smap[id(g)] = g._copy()
        n.stages = [smap[id(s)] for s in self.stages]
        n.groups = [smap[id(g)] for g in self.groups]
        n.stage_map = {op: smap[id(s)] for op, s in self.stage_map.items()}
        for s in list(n.stages) + list(n.groups):
            s.attach_sch = n
            if s.attach_stage is not None:
                s.attach_stage = smap.get(id(s.attach_stage), s.attach_stage)
            if s.group is not None:
                s.group = smap.get(id(s.group), s.group)
        return n

    def normalize(self) -> "Schedule":
        """A copy with inlined stages substituted and every loop rebased to start at 0."""
        from .schedule_dataflow import inject_inline, rebase_non_zero_min_loop
        sn = self.copy()
        check_attachments(sn)
        inject_inline(sn)
        rebase_non_zero_min_loop(sn)
        legalize_invalid_attach(sn)
        return sn

    def create_group(self, outputs, inputs, include_inputs=False):
        raise OpNotImplemented("Schedule.create_group is not implemented in kiln")

    @_recorded("cache_read")
    def cache_read(self, tensor, scope: str, readers):
        """A stage copying ``tensor`` into ``scope`` that ``readers`` read instead."""
        from .schedule_dataflow import cache_read
        return cache_read(self, tensor, scope, readers)

    @_recorded("cache_write")
    def cache_write(self, tensor, scope: str):
        """A stage computing ``tensor`` in ``scope``; the original stage then copies it out."""
        from .schedule_dataflow import cache_write
        return cache_write(self, tensor, scope)

    @_recorded("rfactor")
    def rfactor(self, tensor, axis, factor_axis: int = 0):
        """Factor a reduction over ``axis`` into a data-parallel stage plus a smaller reduction."""
        from .schedule_dataflow import rfactor
        return rfactor(self, tensor, axis, factor_axis)


def create_schedule(ops) -> Schedule:
    """A default schedule (every stage at root, loops in axis order) for the output ops/tensors."""
    return Schedule(ops)


def __getattr__(name):
    # TVM's te.schedule.* lowering steps (kiln/te/schedule_passes.py) and its IterVar name
    if name in ("InferBound", "ScheduleOps", "AutoInlineElemWise", "AutoInlineBroadcast", "AutoInlineInjective"):
        return getattr(schedule_passes, name)
    if name == "IterVar":
        return E.IterVar
    raise AttributeError(f"module 'kiln.te.schedule' has no attribute {name!r}")
