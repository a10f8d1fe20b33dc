"""Template configuration spaces (TVM's ``autotvm.task.space``).

A template declares its tunable knobs on a config object: while a task is being *created* the config
is a :class:`ConfigSpace` that collects every knob's set of choices (a "space"); while the template is
*instantiated* for measurement it is a :class:`ConfigEntity` holding one choice (an "entity") per knob.
A config's index is a mixed-radix number whose digits are the entity indices of the knobs, in the order
they were defined (first knob = least significant digit), exactly as in TVM, so tuning logs agree.
"""
from __future__ import annotations

import functools
import itertools
import math
from collections import OrderedDict, namedtuple
from random import randrange
from typing import Callable, Iterable, Sequence

import numpy as np

from ...error import KilnError
from ..utils import get_const_int
from ...te import thread_axis

Axis = namedtuple("Axis", ["space", "index"])


class InstantiationError(ValueError):
    """A config the template itself rejected (``cfg.raise_error``), e.g. an unroll factor too large."""


class ConfigSpaceError(KilnError, ValueError):
    """A knob definition that cannot make a space (bad policy, empty candidates, bad axis...)."""


# --------------------------------------------------------------------------------------------
# Axes and transform spaces
# --------------------------------------------------------------------------------------------
class TransformSpace:
    """The set of choices of one knob. ``entities`` lists them; ``num_output`` is how many axes the
    transform produces."""

    def __init__(self):
        self.ins: list = []
        self.num_output = 0
        self.entities: list = []

    def __len__(self) -> int:
        return len(self.entities)

    def __getitem__(self, index: int):
        return self.entities[index]

    @staticmethod
    def get_num_output(*args, **kwargs) -> int:
        return 0


class VirtualAxis(TransformSpace):
    """An axis placeholder of known length: from an int, a te IterVar (its domain's extent), or another
    VirtualAxis."""

    name_ct = 0

    def __init__(self, var, name: str | None = None):
        super().__init__()
        self.num_output = 1
        if name is None:
            name = f"axis_{VirtualAxis.name_ct}"
            VirtualAxis.name_ct += 1
        self.name = name
        if isinstance(var, (int, np.integer)) and not isinstance(var, bool):
            self.length = int(var)
        elif isinstance(var, VirtualAxis):
            self.length = var.length
        elif type(var).__name__ == "IntImm":
            self.length = get_const_int(var)
        elif hasattr(var, "dom") and hasattr(var, "var"):  # an IterVar
            self.name = getattr(var.var, "name", None) or getattr(var.var, "name_hint", name)
            if var.dom is None:
                self.length = -1
            else:
                try:
                    self.length = get_const_int(var.dom.extent)
                except ValueError as err:
                    raise ConfigSpaceError(
                        f"axis {self.name!r} has a non-constant extent {var.dom.extent!r}; "
                        "tunable knobs need constant extents") from err
        else:
            raise ConfigSpaceError(f"invalid axis {var!r} of type {type(var).__name__}: expected an int, "
                                   "a te IterVar or a VirtualAxis")

    @staticmethod
    def get_num_output(var, name=None) -> int:
        return 1

    def __repr__(self) -> str:
        return f"vaxis({self.name})"


def get_factors(n: int) -> list:
    """All divisors of ``n`` in increasing order."""
    n = int(n)
    if n <= 0:
        raise ConfigSpaceError(f"cannot factorize {n}: the axis length must be a positive integer")
    small = [i for i in range(1, int(math.isqrt(n)) + 1) if n % i == 0]
    return sorted(set(small) | {n // i for i in small})


def get_pow2s(n: int) -> list:
    """All powers of two that are <= ``n``."""
    n = int(n)
    if n <= 0:
        raise ConfigSpaceError(f"cannot list powers of two up to {n}: the axis length must be positive")
    return [2 ** x for x in range(int(math.floor(math.log2(n))) + 1)]


class SplitEntity:
    """One way to split an axis: ``size`` lists the extent of each resulting axis, outermost first; a
    leading -1 means "whatever is left" (e.g. [-1, 4, 8] for an axis of 128 gives 4 x 4 x 8)."""

    def __init__(self, size: Sequence[int]):
        self.size = list(size)

    def apply(self, sch, op, axis):
        """Split ``axis`` of stage ``sch[op]`` into ``len(size)`` axes; returns them outermost first."""
        ret = []
        for i in range(1, len(self.size)):
            outer, inner = sch[op].split(axis, factor=int(np.prod(self.size[i:])))
            ret.append(outer)
            axis = inner
        return ret + [axis]

    def __eq__(self, other):
        return isinstance(other, SplitEntity) and self.size == other.size

    def __hash__(self):
        return hash(("sp", tuple(self.size)))

    def __repr__(self) -> str:
        return str(self.size)


class SplitSpace(TransformSpace):
    """All ways to split one axis into ``num_outputs`` axes under a policy:

    * ``factors``: only exact divisors (no loop tails);
    * ``power2``: powers of two (tails allowed unless ``no_tail=True``);
    * ``verbose``: divisors and powers of two;
    * ``candidate``: the given ``candidate`` list of sizes.

    ``max_factor`` bounds each inner factor; ``filter`` (SplitEntity -> bool) drops entities.
    """

    def __init__(self, axes, policy, **kwargs):
        super().__init__()
        axis = axes[0]
        if not hasattr(axis, "length"):
            raise ConfigSpaceError(f"define_split needs an axis of known length, got {axis!r}")
        self.policy = policy
        self.product = int(axis.length)
        self.num_output = int(kwargs.get("num_outputs", 0))
        if self.num_output <= 0:
            raise ConfigSpaceError(f"define_split: num_outputs must be a positive integer, got {self.num_output}")
        # TVM's callers pass max_factor=None / filter=None to mean "no bound" / "keep all"
        max_factor = kwargs.get("max_factor")
        max_factor = (1 << 31) if max_factor is None else int(max_factor)
        fil = kwargs.get("filter")
        if fil is None:
            fil = lambda _: True  # noqa: E731
        elif not callable(fil):
            raise ConfigSpaceError(f"define_split: filter must be a callable (SplitEntity -> bool), got {fil!r}")

        if policy == "candidate":
            if not kwargs.get("candidate"):
                raise ConfigSpaceError("define_split with policy='candidate' needs candidate=[[...], ...]")
            for size in kwargs["candidate"]:
                if len(size) != self.num_output:
                    raise ConfigSpaceError(
                        f"define_split candidate {size} has {len(size)} entries, expected num_outputs="
                        f"{self.num_output}")
                self.entities.append(SplitEntity(size))
        else:
            if policy == "factors":
                factors = get_factors(self.product)
            elif policy == "power2":
                factors = get_pow2s(self.product)
            elif policy == "verbose":
                factors = sorted(set(get_factors(self.product)) | set(get_pow2s(self.product)))
            else:
                raise ConfigSpaceError(f"invalid split policy {policy!r}: expected 'factors', 'power2', "
                                       "'verbose' or 'candidate'")
            self.factors = [f for f in factors if f <= max_factor]
            no_tail = kwargs.get("no_tail", policy == "factors")
            self._enumerate(0, [None] * (self.num_output - 1), no_tail)
        self.entities = [e for e in self.entities if fil(e)]
        if not self.entities:
            raise ConfigSpaceError(f"define_split over extent {self.product} with policy {policy!r} "
                                   "has no valid choice (check max_factor/filter/candidate)")

    def _enumerate(self, depth: int, stack: list, no_tail: bool) -> None:
        """Depth-first enumeration of inner factors (innermost chosen first, as TVM orders them)."""
        if depth == self.num_output - 1:
            prod = functools.reduce(lambda a, b: a * b, stack, 1)
            if prod > self.product:
                return
            if self.product % prod == 0 or (not no_tail and prod < self.product):
                self.entities.append(SplitEntity([-1] + stack[::-1]))
            return
        for factor in self.factors:
            stack[depth] = factor
            self._enumerate(depth + 1, stack, no_tail)

    @staticmethod
    def get_num_output(axes, policy, **kwargs) -> int:
        return int(kwargs["num_outputs"])

    def __repr__(self) -> str:
        return (f"Split(policy={self.policy}, product={self.product}, num_outputs={self.num_output}) "
                f"len={len(self)}")


class ReorderEntity:
    """A permutation of a list of axes: the new order is ``[axes[i] for i in perm]``."""

    def __init__(self, perm: Iterable[int]):
        self.perm = list(perm)

    def apply(self, sch, op, axes):
        """Reorder ``axes`` of stage ``sch[op]``; returns the axes in their new order."""
        if len(axes) == len(self.perm):
            new_order = [axes[i] for i in self.perm]
        else:
            new_order = [axes[i] for i in self.perm if i < len(axes)]
        sch[op].reorder(*new_order)
        return new_order

    def __eq__(self, other):
        return isinstance(other, ReorderEntity) and self.perm == other.perm

    def __hash__(self):
        return hash(("re", tuple(self.perm)))

    def __repr__(self) -> str:
        return str(self.perm)


class ReorderSpace(TransformSpace):
    """Orders of a list of axes: ``identity``, ``all`` permutations, ``interval_all`` (permute only
    ``interval=(begin, end)``), ``candidate`` (lists of axes), ``interleave`` / ``interleave_cuda``
    (merge chains of ``spatial`` and ``reduce`` axes)."""

    def __init__(self, axes, policy, **kwargs):
        super().__init__()
        self.ins = axes
        self.policy = policy
        self.num_output = len(axes)
        n = len(axes)
        if policy == "identity":
            self.entities = [ReorderEntity(range(n))]
        elif policy == "all":
            self.entities = [ReorderEntity(p) for p in itertools.permutations(range(n))]
        elif policy == "interval_all":
            begin, end = kwargs["interval"]
            prefix, suffix = tuple(range(begin)), tuple(range(end, n))
            self.entities = [ReorderEntity(prefix + p + suffix)
                             for p in itertools.permutations(range(begin, end))]
        elif policy == "candidate":
            for cand in kwargs["candidate"]:
                self.entities.append(ReorderEntity([self._index_of(axes, x) for x in cand]))
        elif policy in ("interleave", "interleave_cuda"):
            spatial = [[self._index_of(axes, x) for x in ch] for ch in kwargs["spatial"]]
            reduce = [[self._index_of(axes, x) for x in ch] for ch in kwargs["reduce"]]
            outer = self._merge_chains([ch[:-1] for ch in spatial])
            if policy == "interleave":
                inner = self._merge_chains([ch[-1:] for ch in spatial] + reduce)
                self.entities = [ReorderEntity(o + i) for o in outer for i in inner]
            else:
                reduce_merged = self._merge_chains(reduce)
                innermost = [ch[-1] for ch in spatial]
                self.entities = [ReorderEntity(o + r + innermost) for o in outer for r in reduce_merged]
        else:
            raise ConfigSpaceError(f"invalid reorder policy {policy!r}: expected 'identity', 'all', "
                                   "'interval_all', 'candidate', 'interleave' or 'interleave_cuda'")
        if not self.entities:
            raise ConfigSpaceError(f"define_reorder with policy {policy!r} has no valid choice")

    @staticmethod
    def _index_of(axes, x) -> int:
        for i, a in enumerate(axes):
            if a is x or (isinstance(a, Axis) and isinstance(x, Axis) and a == x):
                return i
        raise ConfigSpaceError(f"axis {x!r} is not one of the axes passed to define_reorder")

    @staticmethod
    def _merge_chains(chains: list) -> list:
        """All interleavings of the chains that keep each chain's order, always drawing from the chain
        with the most remaining axes (TVM's merge rule)."""
        merged: list = []
        pos = [0] * len(chains)
        size = sum(len(c) for c in chains)
        stack: list = []

        def dfs():
            if sum(pos) == size:
                merged.append(list(stack))
                return
            remaining = [len(chains[j]) - pos[j] for j in range(len(chains))]
            best = int(np.argmax(remaining))
            for i in range(len(chains)):
                if pos[i] < len(chains[i]) and i == best:
                    stack.append(chains[i][pos[i]])
                    pos[i] += 1
                    dfs()
                    pos[i] -= 1
                    stack.pop()

        dfs()
        return merged

    @staticmethod
    def get_num_output(axes, policy, **kwargs) -> int:
        return len(axes)

    def __repr__(self) -> str:
        return f"Reorder(policy={self.policy}) len={len(self)}"


_ANN_TO_NUMBER = {
    "none": 0, "vec": 1, "unroll": 2, "blockIdx.x": 3, "blockIdx.y": 4, "blockIdx.z": 5,
    "threadIdx.x": 6, "threadIdx.y": 7, "threadIdx.z": 8, "vthread": 9, "fuse": 10,
}
_THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread")


class AnnotateEntity:
    """Annotations of a list of axes ("none", "unroll", "vec", a GPU thread tag, "fuse"), or for the
    ``locate_cache`` policy the indices of the anchor axes."""

    def __init__(self, anns: Iterable):
        self.anns = list(anns)

    def apply(self, sch, op, axes, axis_lens=None, max_unroll=None, vec_size=None, cfg=None, source=None):
        """Annotate ``axes`` of stage ``sch[op]``. With ``source`` (lists of tensors), attach each list at
        the chosen anchor axis with ``compute_at``. Sizes over ``max_unroll`` or outside ``vec_size`` are
        reported through ``cfg.raise_error``. Returns the (possibly fused) axes."""
        axes = list(axes)
        if source is not None:
            for srcs, to in zip(source, self.anns):
                for t in srcs:
                    sch[t].compute_at(sch[op], axes[to])
            return axes
        for i, ann in enumerate(self.anns):
            if ann == "none":
                continue
            if ann == "unroll":
                if max_unroll and axis_lens is not None and axis_lens[i] > max_unroll and cfg is not None:
                    cfg.raise_error("Too large factor for unrolling")
                sch[op].unroll(axes[i])
            elif ann == "vec":
                if vec_size and axis_lens is not None and axis_lens[i] not in vec_size and cfg is not None:
                    cfg.raise_error("Wrong size of lanes in vectorization")
                sch[op].vectorize(axes[i])
            elif ann in _THREAD_TAGS:
                sch[op].bind(axes[i], thread_axis(ann))
            elif ann == "fuse":
                if i >= len(axes) - 1:
                    raise ConfigSpaceError("'fuse' annotation on the last axis: nothing to fuse with")
                axes[i + 1] = sch[op].fuse(axes[i], axes[i + 1])
            else:
                raise ConfigSpaceError(f"invalid annotation {ann!r}")
        return axes

    def __eq__(self, other):
        return isinstance(other, AnnotateEntity) and self.anns == other.anns

    def __hash__(self):
        return hash(("an", tuple(map(str, self.anns))))

    def __repr__(self) -> str:
        return str(self.anns)


class AnnotateSpace(TransformSpace):
    """Annotations of a list of axes. Policies: a ``_``-joined list of "none"/"unroll"/"vec" where
    "try" means "none or" (``unroll``, ``vec``, ``try_unroll``, ``try_vec``, ``try_unroll_vec``; at most
    one axis vectorized), ``bind_gpu``, ``bind_gpu_virtual``, and ``locate_cache`` (choose
    ``num_anchor`` axes)."""

    def __init__(self, axes, policy, **kwargs):
        super().__init__()
        self.ins = axes
        self.policy = policy
        self.num_output = len(axes)
        self.num_axis = n = len(axes)
        if policy == "bind_gpu":
            tags = (["blockIdx.z", "blockIdx.y", "blockIdx.x", "threadIdx.z", "threadIdx.y", "threadIdx.x"]
                    if n >= 6 else ["blockIdx.y", "blockIdx.x", "threadIdx.y", "threadIdx.x"] if n >= 4
                    else ["blockIdx.x", "threadIdx.x"] if n >= 2 else None)
            if tags is None:
                raise ConfigSpaceError("bind_gpu needs at least 2 axes")
            self.entities = [AnnotateEntity(["fuse"] * (n - len(tags)) + tags)]
        elif policy == "bind_gpu_virtual":
            if n >= 9:
                tags = ["blockIdx.z", "blockIdx.y", "blockIdx.x"] + ["vthread"] * 3 + \
                       ["threadIdx.z", "threadIdx.y", "threadIdx.x"]
            elif n >= 6:
                tags = ["blockIdx.y", "blockIdx.x", "vthread", "vthread", "threadIdx.y", "threadIdx.x"]
            elif n >= 3:
                tags = ["blockIdx.x", "vthread", "threadIdx.x"]
            else:
                raise ConfigSpaceError("bind_gpu_virtual needs at least 3 axes")
            self.entities = [AnnotateEntity(["fuse"] * (n - len(tags)) + tags)]
        elif policy == "locate_cache":
            num_anchor = kwargs["num_anchor"]
            self.anns = list(itertools.combinations(range(n), num_anchor))
            self.entities = [AnnotateEntity(x) for x in self.anns]
        else:
            anns = policy.replace("try", "none").split("_")
            for ann in anns:
                if ann not in ("none", "unroll", "vec"):
                    raise ConfigSpaceError(
                        f"invalid annotate policy {policy!r}: expected e.g. 'unroll', 'vec', 'try_unroll', "
                        "'try_vec', 'try_unroll_vec', 'bind_gpu', 'bind_gpu_virtual' or 'locate_cache'")
            self.anns = [anns] * n
            for combo in itertools.product(*self.anns):
                if combo.count("vec") <= 1:
                    self.entities.append(AnnotateEntity(list(combo)))
        if not self.entities:
            raise ConfigSpaceError(f"define_annotate with policy {policy!r} has no valid choice")

    @staticmethod
    def get_num_output(axes, policy, **kwargs) -> int:
        return len(axes)

    def __repr__(self) -> str:
        return f"Annotate(policy={self.policy}) len={len(self)}"


class OtherOptionEntity:
    """One value of a ``define_knob`` knob."""

    def __init__(self, val):
        self.val = val

    def __eq__(self, other):
        return isinstance(other, OtherOptionEntity) and self.val == other.val

    def __hash__(self):
        return hash(("ot", repr(self.val)))

    def __repr__(self) -> str:
        return str(self.val)


class OtherOptionSpace(TransformSpace):
    """The candidates of a generic knob (``define_knob``)."""

    def __init__(self, axes, policy, **kwargs):
        super().__init__()
        candidate = list(kwargs["candidate"])
        if not candidate:
            raise ConfigSpaceError("define_knob needs a non-empty list of candidates")
        self.entities = [OtherOptionEntity(x) for x in candidate]

    @staticmethod
    def get_num_output(axes, policy, **kwargs) -> int:
        return 0

    def __repr__(self) -> str:
        return f"OtherOption({self.entities}) len={len(self)}"


# --------------------------------------------------------------------------------------------
# Config space / entity
# --------------------------------------------------------------------------------------------
class ConfigSpace:
    """The configuration space of a template: an ordered map knob name -> space. While collecting,
    each ``define_*`` adds a knob and ``cfg[name]`` gives that knob's first entity, so a template runs
    unchanged under a space and under a single config."""

    def __init__(self):
        self.space_map: OrderedDict = OrderedDict()
        self._collect = True
        self._length = None
        self._range_length = None
        self._dims = None
        self._entity_map: OrderedDict = OrderedDict()
        self._constraints: list = []
        self.errors: list = []
        self.code_hash = None
        self.flop = 0
        self.cost = None
        self.is_fallback = False
        self._shared_filter = None
        self._shared_filter_cache = None

    @staticmethod
    def axis(var) -> VirtualAxis:
        """An axis placeholder: an int length or a te IterVar."""
        return VirtualAxis(var)

    reduce_axis = axis

    # -- knob definitions --------------------------------------------------------------------
    def define_split(self, name: str, axis, policy: str = "factors", **kwargs):
        """A knob splitting ``axis`` into ``num_outputs`` axes (see :class:`SplitSpace`)."""
        return self._add_new_transform(SplitSpace, name, [axis], policy, **kwargs)

    def define_reorder(self, name: str, axes, policy: str, **kwargs):
        """A knob reordering ``axes`` (see :class:`ReorderSpace`)."""
        return self._add_new_transform(ReorderSpace, name, axes, policy, **kwargs)

    def define_annotate(self, name: str, axes, policy: str, **kwargs):
        """A knob annotating ``axes`` (see :class:`AnnotateSpace`)."""
        return self._add_new_transform(AnnotateSpace, name, axes, policy, **kwargs)

    def define_knob(self, name: str, candidate: Sequence):
        """A knob taking one of ``candidate`` values (read with ``cfg[name].val``)."""
        return self._add_new_transform(OtherOptionSpace, name, [], None, candidate=candidate)

    def multi_filter(self, filter: Callable) -> None:  # noqa: A002 - TVM's name
        """Keep only configs for which ``filter(entity_map)`` is true (a predicate over several knobs)."""
        if self._collect:
            self._clear_cache()
            self._shared_filter = filter

    def _add_new_transform(self, space_class, name, axes, policy, **kwargs):
        if self._collect:
            # Re-running a template on the same config (e.g. a cached fallback) redefines its knobs.
            axes = [x if isinstance(x, (VirtualAxis, Axis)) else self.axis(x) for x in axes]
            space = space_class(axes, policy, **kwargs)
            self.space_map[name] = space
            self._entity_map[name] = space[0]
            self._clear_cache()
            return [Axis(space, i) for i in range(space.num_output)]
        return [Axis(None, i) for i in range(space_class.get_num_output(axes, policy, **kwargs))]

    # -- statistics and validity -----------------------------------------------------------
    def add_flop(self, flop) -> None:
        """Add to this template's floating-point operation count (used when it cannot be derived)."""
        if hasattr(flop, "value"):
            flop = flop.value
        if not isinstance(flop, (int, float)):
            flop = getattr(flop, "value", flop)
        if not isinstance(flop, (int, float)):
            return  # a symbolic count (a dim known only at run time, a VM kernel): nothing to measure by
        self.flop += float(flop)

    def raise_error(self, msg: str) -> None:
        """Mark this config invalid (checked before it is compiled)."""
        self.errors.append(msg)

    def valid(self) -> bool:
        """Whether instantiating the template with this config reported no error."""
        return not self.errors

    # -- index arithmetic ---------------------------------------------------------------------
    def _clear_cache(self) -> None:
        self._length = None
        self._range_length = None
        self._dims = None
        self._shared_filter_cache = None

    @property
    def range_length(self) -> int:
        """Number of raw indices (product of all knob sizes), valid or not."""
        if self._range_length is None:
            self._range_length = int(np.prod([len(s) for s in self.space_map.values()], dtype=np.int64))
        return self._range_length

    @property
    def dims(self) -> list:
        """The size of each knob, in definition order."""
        if self._dims is None:
            self._dims = [len(s) for s in self.space_map.values()]
        return self._dims

    def _entities_of(self, index: int) -> OrderedDict:
        entities = OrderedDict()
        t = index
        for name, space in self.space_map.items():
            entities[name] = space[t % len(space)]
            t //= len(space)
        return entities

    def _make_filter_cache(self) -> None:
        self._shared_filter_cache = np.fromiter(
            (bool(self._shared_filter(self._entities_of(i))) for i in range(self.range_length)),
            dtype=bool, count=self.range_length)
        self._length = int(self._shared_filter_cache.sum())

    def is_index_valid(self, index: int) -> bool:
        """Whether ``index`` is in range and passes the ``multi_filter``."""
        if not 0 <= index < self.range_length:
            return False
        if self._shared_filter is None:
            return True
        if self._shared_filter_cache is None:
            self._make_filter_cache()
        return bool(self._shared_filter_cache[index])

    def subrange_length(self, start: int, end: int) -> int:
        """Number of valid indices in [start, end)."""
        if not 0 <= start <= end <= self.range_length:
            raise IndexError(f"subrange [{start}, {end}) is outside [0, {self.range_length})")
        if self._shared_filter is None:
            return end - start
        if self._shared_filter_cache is None:
            self._make_filter_cache()
        return int(self._shared_filter_cache[start:end].sum())

    def get_rand_index(self, start: int | None = None, end: int | None = None, to_exclude=None) -> int:
        """A random valid index in [start, end) not in ``to_exclude``."""
        start = start or 0
        end = end or self.range_length
        excl = to_exclude if to_exclude is not None else ()
        for _ in range(64):
            index = randrange(start, end)
            if self.is_index_valid(index) and index not in excl:
                return index
        # sparse remainder: enumerate what is left instead of rejection sampling forever
        left = [i for i in range(start, end) if self.is_index_valid(i) and i not in excl]
        if not left:
            raise IndexError(f"no valid index left in [{start}, {end})")
        return left[randrange(len(left))]

    def get_next_index(self, index: int, n: int = 1, start: int | None = None, end: int | None = None):
        """The ``n``-th valid index after (n > 0) or before (n < 0) ``index``; None when out of range."""
        if n == 0:
            raise ValueError("n must be non-zero")
        start = start or 0
        end = end or self.range_length
        if self._shared_filter is None:
            index += n
            return index if start <= index < end else None
        step = 1 if n > 0 else -1
        count = abs(n)
        while count:
            index += step
            if index < start or index >= end:
                return None
            if self.is_index_valid(index):
                count -= 1
        return index

    def point2knob(self, point: int) -> list:
        """Index -> list of per-knob entity indices."""
        knob = []
        for dim in self.dims:
            knob.append(int(point % dim))
            point //= dim
        return knob

    def knob2point(self, knob: Sequence[int]) -> int:
        """List of per-knob entity indices -> index."""
        point, mul = 0, 1
        for k, dim in zip(knob, self.dims):
            point += int(k) * mul
            mul *= dim
        return point

    def sample_ints(self, m: int) -> np.ndarray:
        """``m`` distinct valid indices, uniformly at random."""
        if m > len(self):
            raise ValueError(f"cannot sample {m} distinct configs from a space of {len(self)}")
        if m * 2 > len(self):
            valid = [i for i in range(self.range_length) if self.is_index_valid(i)]
            return np.array(np.random.permutation(valid)[:m], dtype=np.int64)
        vis: set = set()
        while len(vis) < m:
            i = randrange(0, self.range_length)
            if self.is_index_valid(i):
                vis.add(i)
        return np.fromiter(vis, np.int64, len(vis))

    def random_walk(self, point: int) -> int:
        """A valid neighbour of ``point`` that differs in one knob."""
        old = self.point2knob(point)
        if all(d <= 1 for d in self.dims):
            return int(point)
        for _ in range(1000):
            new = list(old)
            i = np.random.randint(len(old))
            if self.dims[i] <= 1:
                continue
            new[i] = np.random.randint(self.dims[i])
            if new != old:
                p = self.knob2point(new)
                if self.is_index_valid(p):
                    return p
        return int(point)

    def random_walk_batch(self, points) -> np.ndarray:
        """:meth:`random_walk` for an array of points at once (one knob changed per point); a point
        with no valid neighbour found stays where it is."""
        points = np.asarray(points, dtype=np.int64)
        dims = np.asarray(self.dims, dtype=np.int64)
        if len(points) == 0 or np.all(dims <= 1):
            return points.copy()
        radix = np.concatenate(([1], np.cumprod(dims)[:-1])).astype(np.int64)
        knobs = (points[:, None] // radix[None, :]) % dims[None, :]
        movable = np.flatnonzero(dims > 1)
        out = points.copy()
        todo = np.arange(len(points))
        for _ in range(8):
            if len(todo) == 0:
                break
            which = movable[np.random.randint(len(movable), size=len(todo))]
            old = knobs[todo, which]
            new = (old + np.random.randint(1, dims[which])) % dims[which]
            cand = points[todo] + (new - old) * radix[which]
            if self._shared_filter is None:
                out[todo] = cand
                break
            ok = np.array([self.is_index_valid(int(c)) for c in cand], dtype=bool)
            out[todo[ok]] = cand[ok]
            todo = todo[~ok]
        return out

    # -- pickling (tasks travel to builder processes) ------------------------------------------
    def __getstate__(self):
        state = dict(self.__dict__)
        filt = state.get("_shared_filter")
        if filt is not None:
            import pickle
            try:
                pickle.dumps(filt)
            except Exception:  # a lambda: ship the evaluated validity mask instead
                if self._shared_filter_cache is None:
                    self._make_filter_cache()
                state["_shared_filter_cache"] = self._shared_filter_cache
                state["_length"] = self._length
                state["_shared_filter"] = _MaskFilter()
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    # -- container protocol ---------------------------------------------------------------------
    def __len__(self) -> int:
        if self._length is None:
            if self._shared_filter is None:
                self._length = self.range_length
            else:
                self._make_filter_cache()
        return self._length

    def get(self, index: int) -> "ConfigEntity":
        """The config with this index."""
        index = int(index)
        if not self.is_index_valid(index):
            raise IndexError(f"config index {index} is not valid: the space has range [0, {self.range_length})"
                             + (" and a multi_filter" if self._shared_filter is not None else ""))
        return ConfigEntity(index, self.code_hash, self._entities_of(index), self._constraints)

    def __iter__(self):
        """Iterates over knob names (as TVM does); use ``get(i)`` for configs."""
        return iter(self._entity_map)

    def __getitem__(self, name: str):
        """The entity of knob ``name`` (a space's first entity while collecting)."""
        try:
            return self._entity_map[name]
        except KeyError:
            raise KeyError(f"knob {name!r} is not defined in this config; defined knobs: "
                           f"{list(self._entity_map)}") from None

    def __repr__(self) -> str:
        res = f"ConfigSpace (len={len(self)}, range_length={self.range_length}, space_map=\n"
        for i, (name, space) in enumerate(self.space_map.items()):
            res += f"  {i:2d} {name}: {space}\n"
        return res + ")"


class _MaskFilter:
    """Stands for a multi_filter that could not be pickled; the space carries its evaluated mask."""

    def __call__(self, entities):
        raise ConfigSpaceError("this config space was unpickled without its multi_filter function; only its "
                               "precomputed validity mask is available")


def _entity_map_str(entity_map) -> str:
    return "[" + ", ".join(f"({k!r}, {v!r})" for k, v in entity_map.items()) + "]"


class ConfigEntity(ConfigSpace):
    """One configuration: an entity per knob, and its index in the space."""

    def __init__(self, index: int, code_hash, entity_map, constraints):
        super().__init__()
        self.index = index
        self._collect = False
        self._entity_map = entity_map
        self._space_map = None
        self._constraints = constraints
        self.code_hash = code_hash

    def get_flatten_feature(self) -> np.ndarray:
        """A numeric vector of the knob values (split sizes, permutations, one-hot annotations,
        option values), used as "knob" features by cost models."""
        fea: list = []
        for v in self._entity_map.values():
            if isinstance(v, SplitEntity):
                fea.extend(v.size)
            elif isinstance(v, ReorderEntity):
                fea.extend(v.perm)
            elif isinstance(v, AnnotateEntity):
                for ann in v.anns:
                    one_hot = [0] * len(_ANN_TO_NUMBER)
                    if isinstance(ann, str):
                        one_hot[_ANN_TO_NUMBER[ann]] = 1
                    fea.extend(one_hot)
            elif isinstance(v, OtherOptionEntity):
                val = v.val
                if isinstance(val, bool):
                    val = int(val)
                elif not isinstance(val, (int, float, np.number)):
                    val = float(abs(hash(str(val))) % 1000)  # non-numeric knob: a stable code
                fea.append(val)
        return np.array(fea, dtype=np.float32)

    def get_other_option(self) -> dict:
        """The ``define_knob`` knobs of this config, name -> value."""
        return {k: v.val for k, v in self._entity_map.items() if isinstance(v, OtherOptionEntity)}

    def to_json_dict(self) -> dict:
        """The config as TVM's log format: {"index", "code_hash", "entity": [[name, type, value], ...]}."""
        entities = []
        for k, v in self._entity_map.items():
            if isinstance(v, SplitEntity):
                entities.append((k, "sp", [int(x) for x in v.size]))
            elif isinstance(v, ReorderEntity):
                entities.append((k, "re", [int(x) for x in v.perm]))
            elif isinstance(v, AnnotateEntity):
                entities.append((k, "an", list(v.anns)))
            elif isinstance(v, OtherOptionEntity):
                entities.append((k, "ot", v.val))
            else:
                raise ConfigSpaceError(f"invalid entity {v!r} for knob {k!r}")
        return {"index": int(self.index), "code_hash": self.code_hash, "entity": entities}

    @staticmethod
    def from_json_dict(json_dict: dict) -> "ConfigEntity":
        """Inverse of :meth:`to_json_dict`."""
        entity_map = OrderedDict()
        for item in json_dict["entity"]:
            key, knob_type, knob_args = item
            if knob_type == "sp":
                entity = SplitEntity(knob_args)
            elif knob_type == "re":
                entity = ReorderEntity(knob_args)
            elif knob_type == "an":
                entity = AnnotateEntity(knob_args)
            elif knob_type == "ot":
                entity = OtherOptionEntity(knob_args)
            else:
                raise ConfigSpaceError(f"invalid config knob type {knob_type!r} for knob {key!r}")
            entity_map[str(key)] = entity
        return ConfigEntity(int(json_dict["index"]), json_dict.get("code_hash"), entity_map, [])

    def __eq__(self, other):
        return (isinstance(other, ConfigEntity) and self.index == other.index
                and self._entity_map == other._entity_map)

    def __hash__(self):
        return hash((self.index, tuple(self._entity_map.items())))

    def __repr__(self) -> str:
        return f"{_entity_map_str(self._entity_map)},{self.code_hash},{self.index}"


class FallbackConfigEntity(ConfigSpace):
    """The config used when no tuned one exists: knobs take their first entity, and schedules may pick
    better defaults with :meth:`fallback_split` or :meth:`fallback_with_reference_log`."""

    def __init__(self):
        super().__init__()
        self.is_fallback = True

    def fallback_split(self, name: str, constraints: Sequence[int]) -> None:
        """Pick, innermost first, the largest divisor of what is left not above each constraint
        (-1 = no constraint)."""
        space = self.space_map.get(name)
        if not isinstance(space, SplitSpace):
            raise ConfigSpaceError(f"fallback_split: {name!r} is not a split knob")
        if len(constraints) != space.num_output:
            raise ConfigSpaceError(f"fallback_split({name!r}): {len(constraints)} constraints for "
                                   f"{space.num_output} outputs")
        limits = [x if x != -1 else 1e10 for x in constraints]
        size = [1] * space.num_output
        now = space.product
        for i in reversed(range(space.num_output)):
            cands = [f for f in get_factors(now) if f <= limits[i]]
            if not cands:
                raise ConfigSpaceError(f"cannot find a feasible fallback split for knob {name!r}")
            size[i] = cands[-1]
            now //= cands[-1]
        self._entity_map[name] = SplitEntity(size)

    def fallback_with_reference_log(self, ref_log) -> None:
        """Mimic the tiling of the record (in ``ref_log``: (MeasureInput, MeasureResult) pairs) whose
        split extents share the most divisors with this config's."""
        knob_names = [k for k, s in self.space_map.items() if isinstance(s, SplitSpace)]
        factor_list = [set(get_factors(self.space_map[k].product)) for k in knob_names]
        best_cfg, best_score = None, 0.0
        for inp, _ in ref_log:
            score = 0.0
            try:
                for i, k in enumerate(knob_names):
                    factors = get_factors(abs(int(np.prod(inp.config[k].size))))
                    score += len(factor_list[i].intersection(factors)) / len(factor_list[i])
            except (KeyError, AttributeError, ConfigSpaceError):
                continue
            if score > best_score:
                best_score, best_cfg = score, inp.config
        if best_cfg is None:
            return
        for k in knob_names:
            constraint = list(best_cfg[k].size)
            constraint[0] = 1
            self.fallback_split(k, constraint)

    def __setitem__(self, name: str, entity) -> None:
        self._entity_map[name] = entity

    def __repr__(self) -> str:
        return f"{_entity_map_str(self._entity_map)},{self.code_hash}"
