"""Config spaces: knob enumeration counts (as TVM's), indexing, features, serialization, fallback."""
import itertools
import math

import numpy as np
import pytest

from kiln import autotvm
from kiln.autotvm.task.space import (AnnotateEntity, ConfigEntity, ConfigSpace, ConfigSpaceError,
                                     FallbackConfigEntity, OtherOptionEntity, ReorderEntity, SplitEntity,
                                     get_factors, get_pow2s)


class FakeStage:
    """Records schedule primitives; split returns (outer, inner) names."""

    def __init__(self, log, name):
        self.log, self.name = log, name

    def split(self, axis, factor=None, nparts=None):
        self.log.append(("split", axis, factor))
        return f"{axis}.o", f"{axis}.i"

    def reorder(self, *axes):
        self.log.append(("reorder",) + axes)

    def unroll(self, axis):
        self.log.append(("unroll", axis))

    def vectorize(self, axis):
        self.log.append(("vectorize", axis))

    def fuse(self, a, b):
        self.log.append(("fuse", a, b))
        return f"({a}*{b})"

    def compute_at(self, stage, axis):
        self.log.append(("compute_at", self.name, stage.name, axis))


class FakeSchedule:
    def __init__(self):
        self.log = []

    def __getitem__(self, op):
        return FakeStage(self.log, op)


def brute_split_count(n, k, factors, no_tail):
    count = 0
    for combo in itertools.product(factors, repeat=k - 1):
        prod = math.prod(combo)
        if prod > n:
            continue
        if n % prod == 0 or (not no_tail and prod < n):
            count += 1
    return count


def test_factor_helpers():
    assert get_factors(64) == [1, 2, 4, 8, 16, 32, 64]
    assert get_factors(60) == [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60]
    assert get_factors(1) == [1]
    assert get_factors(97) == [1, 97]
    assert get_pow2s(60) == [1, 2, 4, 8, 16, 32]
    assert get_pow2s(64) == [1, 2, 4, 8, 16, 32, 64]
    with pytest.raises(ConfigSpaceError):
        get_factors(0)


@pytest.mark.parametrize("n", [64, 60, 97, 1, 48])
@pytest.mark.parametrize("k", [2, 3])
def test_split_counts_match_tvm_rules(n, k):
    cfg = ConfigSpace()
    cfg.define_split("f", cfg.axis(n), policy="factors", num_outputs=k)
    assert len(cfg.space_map["f"]) == brute_split_count(n, k, get_factors(n), True)
    cfg.define_split("p", cfg.axis(n), policy="power2", num_outputs=k)
    assert len(cfg.space_map["p"]) == brute_split_count(n, k, get_pow2s(n), False)
    cfg.define_split("v", cfg.axis(n), policy="verbose", num_outputs=k)
    verbose = sorted(set(get_factors(n)) | set(get_pow2s(n)))
    assert len(cfg.space_map["v"]) == brute_split_count(n, k, verbose, False)


def test_split_known_values():
    cfg = ConfigSpace()
    cfg.define_split("tile", cfg.axis(64), num_outputs=2)
    assert len(cfg) == 7  # TVM: 7 entities for extent 64, 2 outputs, "factors"
    sizes = [e.size for e in cfg.space_map["tile"].entities]
    assert sizes == [[-1, f] for f in [1, 2, 4, 8, 16, 32, 64]]
    cfg.define_split("t3", cfg.axis(64), num_outputs=3)
    assert len(cfg.space_map["t3"]) == 28
    # every 3-way split's inner product divides 64
    assert all(64 % (e.size[1] * e.size[2]) == 0 for e in cfg.space_map["t3"].entities)


def test_split_max_factor_filter_candidate():
    cfg = ConfigSpace()
    cfg.define_split("a", cfg.axis(64), num_outputs=2, max_factor=8)
    assert [e.size[1] for e in cfg.space_map["a"].entities] == [1, 2, 4, 8]
    cfg.define_split("b", cfg.axis(64), num_outputs=3, filter=lambda e: e.size[-1] <= 4)
    assert all(e.size[-1] <= 4 for e in cfg.space_map["b"].entities)
    assert len(cfg.space_map["b"]) == 7 + 6 + 5  # exponents i + j <= 6 with inner j <= 2
    cfg.define_split("c", cfg.axis(64), policy="candidate", num_outputs=3, candidate=[[1, 4, 16], [4, 4, 4]])
    assert [e.size for e in cfg.space_map["c"].entities] == [[1, 4, 16], [4, 4, 4]]
    with pytest.raises(ConfigSpaceError):
        cfg.define_split("d", cfg.axis(64), policy="candidate", num_outputs=2, candidate=[[1, 2, 3]])
    with pytest.raises(ConfigSpaceError):
        cfg.define_split("e", cfg.axis(64), policy="bogus", num_outputs=2)
    with pytest.raises(ConfigSpaceError):
        cfg.define_split("f", cfg.axis(64), num_outputs=0)
    cfg.define_split("a", cfg.axis(32), num_outputs=2)  # redefinition replaces (templates re-run)
    assert len(cfg.space_map["a"]) == 6


def test_reorder_annotate_knob_counts():
    cfg = ConfigSpace()
    axes = [cfg.axis(4), cfg.axis(4), cfg.axis(4), cfg.axis(4)]
    cfg.define_reorder("all", axes, "all")
    assert len(cfg.space_map["all"]) == 24
    cfg.define_reorder("id", axes, "identity")
    assert [e.perm for e in cfg.space_map["id"].entities] == [[0, 1, 2, 3]]
    cfg.define_reorder("cand", axes, "candidate", candidate=[[axes[3], axes[2], axes[1], axes[0]]])
    assert cfg.space_map["cand"].entities[0].perm == [3, 2, 1, 0]
    cfg.define_reorder("iv", axes, "interval_all", interval=(1, 3))
    assert [e.perm for e in cfg.space_map["iv"].entities] == [[0, 1, 2, 3], [0, 2, 1, 3]]
    two = axes[:2]
    cfg.define_annotate("un", two, "unroll")
    assert [e.anns for e in cfg.space_map["un"].entities] == [["unroll", "unroll"]]
    cfg.define_annotate("tu", two, "try_unroll")
    assert len(cfg.space_map["tu"]) == 4
    cfg.define_annotate("tuv", two, "try_unroll_vec")
    assert len(cfg.space_map["tuv"]) == 8  # 3*3 minus (vec, vec)
    cfg.define_annotate("tv", two, "try_vec")
    assert len(cfg.space_map["tv"]) == 3
    cfg.define_annotate("lc", axes, "locate_cache", num_anchor=2)
    assert len(cfg.space_map["lc"]) == 6
    cfg.define_knob("k", [1, 2, 3])
    assert [e.val for e in cfg.space_map["k"].entities] == [1, 2, 3]
    assert len(cfg) == 24 * 1 * 1 * 2 * 1 * 4 * 8 * 3 * 6 * 3
    with pytest.raises(ConfigSpaceError):
        cfg.define_annotate("bad", two, "spin")
    with pytest.raises(ConfigSpaceError):
        cfg.define_knob("empty", [])


def make_space():
    cfg = ConfigSpace()
    cfg.define_split("tile_x", cfg.axis(16), num_outputs=2)   # 5
    cfg.define_knob("unroll", [0, 1])                          # 2
    cfg.define_reorder("re", [cfg.axis(2), cfg.axis(2), cfg.axis(2)], "all")  # 6
    return cfg


def test_indexing_is_mixed_radix_first_knob_fastest():
    cfg = make_space()
    assert len(cfg) == cfg.range_length == 60
    assert cfg.dims == [5, 2, 6]
    seen = set()
    for i in range(len(cfg)):
        c = cfg.get(i)
        assert c.index == i
        knob = cfg.point2knob(i)
        assert knob == [i % 5, (i // 5) % 2, i // 10]
        assert cfg.knob2point(knob) == i
        assert c["tile_x"].size == cfg.space_map["tile_x"][knob[0]].size
        assert c["unroll"].val == knob[1]
        assert c["re"].perm == cfg.space_map["re"][knob[2]].perm
        seen.add(repr(c))
    assert len(seen) == 60
    with pytest.raises(IndexError):
        cfg.get(60)
    with pytest.raises(IndexError):
        cfg.get(-1)
    assert list(cfg) == ["tile_x", "unroll", "re"]  # iterating a space gives knob names, as TVM
    assert cfg["unroll"].val == 0  # while collecting: the first entity
    with pytest.raises(KeyError, match="not defined"):
        cfg["nope"]


def test_multi_filter_and_sampling():
    cfg = make_space()
    cfg.multi_filter(filter=lambda e: e["tile_x"].size[-1] * (e["unroll"].val + 1) <= 8)
    valid = [i for i in range(cfg.range_length) if cfg.is_index_valid(i)]
    expected = [i for i in range(60)
                if cfg.space_map["tile_x"][i % 5].size[-1] * ((i // 5) % 2 + 1) <= 8]
    assert valid == expected
    assert len(cfg) == len(expected)
    assert cfg.subrange_length(0, 10) == len([i for i in expected if i < 10])
    s = cfg.sample_ints(len(cfg))
    assert sorted(s.tolist()) == expected
    for _ in range(20):
        assert cfg.get_rand_index() in expected
        p = cfg.random_walk(expected[0])
        assert p in expected
    nxt = cfg.get_next_index(expected[0])
    assert nxt == expected[1]
    with pytest.raises(IndexError):
        cfg.get([i for i in range(60) if i not in expected][0])


def test_entity_json_roundtrip_and_features():
    cfg = ConfigSpace()
    axes = [cfg.axis(4), cfg.axis(8)]
    cfg.define_split("tile", cfg.axis(32), num_outputs=3)
    cfg.define_reorder("re", axes, "all")
    cfg.define_annotate("ann", axes, "try_unroll_vec")
    cfg.define_knob("opt", [True, False])
    for i in [0, 7, len(cfg) - 1, len(cfg) // 3]:
        c = cfg.get(i)
        d = c.to_json_dict()
        assert d["index"] == i and d["code_hash"] is None
        assert [x[1] for x in d["entity"]] == ["sp", "re", "an", "ot"]
        back = ConfigEntity.from_json_dict(d)
        assert back == c and repr(back) == repr(c)
        fea = c.get_flatten_feature()
        assert fea.dtype == np.float32
        # split sizes (3) + perm (2) + one-hot of 2 annotations (2 * 11) + knob (1)
        assert fea.shape == (3 + 2 + 22 + 1,)
        assert list(fea[:3]) == c["tile"].size
        assert list(fea[3:5]) == c["re"].perm
        assert c.get_other_option() == {"opt": c["opt"].val}
    with pytest.raises(ConfigSpaceError):
        ConfigEntity.from_json_dict({"index": 0, "code_hash": None, "entity": [["x", "zz", 1]]})


def test_entity_apply_with_fake_stage():
    s = FakeSchedule()
    assert SplitEntity([-1, 4, 8]).apply(s, "C", "x") == ["x.o", "x.i.o", "x.i.i"]
    assert s.log == [("split", "x", 32), ("split", "x.i", 8)]
    s = FakeSchedule()
    assert ReorderEntity([2, 0, 1]).apply(s, "C", ["a", "b", "c"]) == ["c", "a", "b"]
    assert s.log == [("reorder", "c", "a", "b")]
    s = FakeSchedule()
    errors = ConfigSpace()
    out = AnnotateEntity(["unroll", "none", "vec"]).apply(s, "C", ["a", "b", "c"], axis_lens=[64, 2, 3],
                                                           max_unroll=16, vec_size=[4, 8], cfg=errors)
    assert out == ["a", "b", "c"]
    assert s.log == [("unroll", "a"), ("vectorize", "c")]
    assert errors.errors == ["Too large factor for unrolling", "Wrong size of lanes in vectorization"]
    assert not errors.valid()
    s = FakeSchedule()
    out = AnnotateEntity(["fuse", "none"]).apply(s, "C", ["a", "b"])
    assert out == ["a", "(a*b)"]
    s = FakeSchedule()
    AnnotateEntity([1]).apply(s, "C", ["a", "b"], source=[["AA", "BB"]])
    assert s.log == [("compute_at", "AA", "C", "b"), ("compute_at", "BB", "C", "b")]


def test_config_entity_ignores_definitions_and_returns_axes():
    cfg = make_space()
    c = cfg.get(3)
    out = c.define_split("tile_x", "some_axis", num_outputs=2)
    assert len(out) == 2
    assert c["tile_x"].size == [-1, 8]
    assert c.space_map == {}  # an entity collects nothing


def test_add_flop_and_errors():
    cfg = ConfigSpace()
    cfg.add_flop(10)
    from kiln.tir import IntImm
    cfg.add_flop(IntImm("int32", 5))
    assert cfg.flop == 15.0
    assert cfg.valid()
    cfg.raise_error("bad")
    assert not cfg.valid()


def test_fallback_split_and_reference_log():
    fb = FallbackConfigEntity()
    assert fb.is_fallback
    fb.define_split("tile_x", fb.axis(64), num_outputs=3)
    fb.define_split("tile_y", fb.axis(60), num_outputs=2)
    assert fb["tile_x"].size == [-1, 1, 1]
    fb.fallback_split("tile_x", [-1, 8, 4])
    assert fb["tile_x"].size == [2, 8, 4]
    fb.fallback_split("tile_y", [-1, 7])
    assert fb["tile_y"].size == [10, 6]
    # the space's own first entity is untouched
    assert fb.space_map["tile_x"][0].size == [-1, 1, 1]
    with pytest.raises(ConfigSpaceError):
        fb.fallback_split("tile_x", [-1, 4])

    # reference log: pick the record whose extents share the most factors, mimic its tiling
    ref_space = ConfigSpace()
    ref_space.define_split("tile_x", ref_space.axis(64), num_outputs=3)
    ref_space.define_split("tile_y", ref_space.axis(60), num_outputs=2)

    class Inp:
        def __init__(self, config):
            self.config = config

    want = next(i for i in range(len(ref_space))
                if ref_space.get(i)["tile_x"].size == [-1, 4, 2] and ref_space.get(i)["tile_y"].size == [-1, 5])
    fb2 = FallbackConfigEntity()
    fb2.define_split("tile_x", fb2.axis(64), num_outputs=3)
    fb2.define_split("tile_y", fb2.axis(60), num_outputs=2)
    fb2.fallback_with_reference_log([(Inp(ref_space.get(want)), None)])
    assert fb2["tile_x"].size[1:] == [4, 2]
    assert fb2["tile_y"].size[1:] == [5]
    fb3 = FallbackConfigEntity()
    fb3.define_split("tile_x", fb3.axis(64), num_outputs=3)
    fb3.fallback_with_reference_log([])  # nothing to mimic: unchanged
    assert fb3["tile_x"].size == [-1, 1, 1]
    fb3["tile_x"] = SplitEntity([-1, 2, 2])
    assert fb3["tile_x"].size == [-1, 2, 2]


def test_other_option_entity_equality():
    assert OtherOptionEntity(3) == OtherOptionEntity(3)
    assert SplitEntity([-1, 2]) != SplitEntity([-1, 4])
