"""conv2d_NCHWc.x86 (regular conv): its config space (pixel tiles, loop order, unroll_kw, oc blocks), every
config of small spaces checked against numpy on odd shapes, the fallback rules, and fused epilogues through
relay.build under a tuned record."""
import re
import time

import numpy as np
import pytest

import kiln as tvm
from kiln import autotvm, relay, te
from kiln.autotvm.measure import MeasureInput, MeasureResult
from kiln.runtime.graph_executor import GraphModule
from kiln.target import x86 as x86_target
from kiln.topi import x86
from kiln.topi.testing import conv2d_nchw_python
from kiln.topi.testing import layout_transform_python as lt
from kiln.target.x86 import host_can_run
from kiln.topi.x86.conv2d import (channel_block, fallback_chunks, fallback_order, fallback_row, register_budget,
                                  tile_budget)
from tests.vector_code_util import target_asm

TARGET = "llvm"  # numerical checks run on the host
# config-space / fallback checks name the ISA they are about, whatever the host
ISA = {"avx2": "llvm -mcpu=core-avx2", "avx512": "llvm -mcpu=skylake-avx512"}
LANES = {"avx2": 8, "avx512": 16}


def _task(ic, h, w, oc, k, s, p, target=TARGET):
    with tvm.target.Target(target):
        return autotvm.task.create(
            "conv2d_NCHWc.x86", args=(("TENSOR", (1, ic, h, w), "float32"), ("TENSOR", (oc, ic, k, k), "float32"),
                                      (s, s), (p,) * 4, (1, 1), "NCHW", "NCHW", "float32"), target=target)


def _configs(space):
    return [space.get(i) for i in range(space.range_length) if space.is_index_valid(i)]


def _run_packed(cfg, a, wt, s, p, bias=None, target=TARGET, source=None):
    """Build the packed conv (+ optional bias/relu epilogue) with ``cfg`` (None: the fallback of ``target``) for
    ``target``; return the NCHW result (None when the host cannot run ``target``'s code: then only compiled).
    ``source``: a list the C goes to."""
    ic, oc = a.shape[1], wt.shape[0]
    with tvm.target.Target(target):
        icb = cfg["tile_ic"].size[-1] if cfg is not None else channel_block(ic)
        ocb = cfg["tile_oc"].size[-1] if cfg is not None else channel_block(oc)
    a5, w6 = lt(a, "NCHW", f"NCHW{icb}c"), lt(wt, "OIHW", f"OIHW{icb}i{ocb}o")
    with tvm.target.Target(target):
        A = te.placeholder(a5.shape, name="data")
        W = te.placeholder(w6.shape, name="kernel")
        args = [a5, w6]

        def make():
            out = x86.conv2d_NCHWc(A, W, (s, s), (p,) * 4, (1, 1), f"NCHW{icb}c", f"NCHW{ocb}c", "float32")
            tensors = [A, W]
            if bias is not None:
                B = te.placeholder((1, oc // ocb, 1, 1, ocb), name="bias")
                out = te.compute(out.shape, lambda n, c, y, x, cb: te.max(out[n, c, y, x, cb] + B[0, c, 0, 0, cb],
                                                                         tvm.tir.const(0.0, "float32")),
                                 name="relu", tag="elemwise")
                tensors.append(B)
                args.append(bias.reshape(1, oc // ocb, 1, 1, ocb))
            return tensors, out, x86.schedule_conv2d_NCHWc([out])
        if cfg is None:
            tensors, out, s_ = make()
        else:
            with autotvm.task.ApplyConfig(cfg):
                tensors, out, s_ = make()
        f = tvm.build(s_, tensors + [out], target=target)
    if source is not None:
        source.append(f.get_source())
    if target != TARGET and not x86_target.host_can_run(target):
        return None
    res = tvm.nd.array(np.zeros([int(d) for d in out.shape], "float32"))
    f(*[tvm.nd.array(x) for x in args], res)
    return lt(res.numpy(), f"NCHW{ocb}c", "NCHW")


def _check_fallback_bias_relu(ic, h, w, oc, k, s, p, seed):
    """The fallback config's conv with a fused bias + relu, run on the host, against numpy."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((1, ic, h, w)).astype("float32")
    wt = rng.standard_normal((oc, ic, k, k)).astype("float32")
    bias = rng.standard_normal(oc).astype("float32")
    ref = np.maximum(conv2d_nchw_python(a, wt, (s, s), (p,) * 4) + bias[None, :, None, None], 0)
    np.testing.assert_allclose(_run_packed(None, a, wt, s, p, bias), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_space_knobs_and_register_budget(isa):
    """Every tile of the space holds its accumulators in the ISA's registers: 14 of AVX2's 16 ymm (12 with a
    two-vector block: :func:`tile_budget`), 28 of AVX-512's 32 zmm (the rest hold the weight vectors and a
    broadcast)."""
    target, lanes = ISA[isa], LANES[isa]
    with tvm.target.Target(target):
        max_acc, min_acc = register_budget()
    assert (max_acc, min_acc) == {"avx2": (14, 12), "avx512": (28, 24)}[isa]

    def task(*args):
        return _task(*args, target=target)

    def tiles_of(cfgs, occ=1):
        out = set()
        for c in cfgs:
            if c["tile_occ"].val != occ:
                continue
            vecs = -(-c["tile_oc"].size[-1] // lanes) * occ
            acc = vecs * c["tile_oh"].size[-1] * c["tile_ow"].size[-1]
            assert (min_acc if occ == 1 else 8) <= acc <= max_acc, c
            out.add((c["tile_oc"].size[-1], c["tile_oh"].size[-1], c["tile_ow"].size[-1]))
        return out
    space = task(64, 56, 56, 64, 3, 1, 1).config_space
    assert {"tile_ic", "tile_oc", "tile_oh", "tile_ow", "order", "unroll_kw", "tile_occ"} <= set(space.space_map)
    cfgs = _configs(space)
    assert len(cfgs) == len(space) == {"avx2": 12, "avx512": 20}[isa]
    # the blocks follow the channel_block rule (no layout the tuner cannot see): two AVX2 vectors, one
    # AVX-512 vector
    if isa == "avx2":
        # two vectors of output channels take a row of 6 (7 would leave no register for a weight vector)
        assert tiles_of(cfgs) == {(16, 1, 6)}
        # two chunks (four vectors): 2 pixels in a row or a column, the most that fit in 14 registers
        assert tiles_of(cfgs, occ=2) == {(16, 1, 2), (16, 2, 1)}
        # a 7-pixel row: 3 pixels (a peeled tail) fit four vectors
        assert tiles_of(_configs(task(64, 7, 7, 64, 3, 1, 1).config_space), occ=2) == {(16, 1, 3)}
        # one vector of output channels (24 = 3 x 8) opens 2-D pixel tiles
        assert tiles_of(_configs(task(16, 14, 14, 24, 3, 1, 1).config_space)) == {(8, 1, 14), (8, 2, 7)}
    else:
        # one vector of output channels: 24 to 28 pixels, in rows of 28, 14 or 7
        assert tiles_of(cfgs) == {(16, 1, 28), (16, 2, 14), (16, 4, 7)}
        assert tiles_of(cfgs, occ=2) == {(16, 1, 14), (16, 2, 7)}
        # a 7x7 output: the whole row of two chunks (14 accumulators, the most that the shape allows)
        assert tiles_of(_configs(task(64, 7, 7, 64, 3, 1, 1).config_space), occ=2) == {(16, 1, 7)}
        # 24 channels: one block of a zmm and a ymm (12, the largest divisor under 16, is no machine vector),
        # two vectors a pixel: 14 pixels, a row or two half rows
        assert tiles_of(_configs(task(16, 14, 14, 24, 3, 1, 1).config_space)) == {(24, 1, 14), (24, 2, 7)}
    # an odd number of chunks has no 2-chunk tiles
    assert {c["tile_occ"].val for c in _configs(task(16, 14, 14, 48, 3, 1, 1).config_space)} == {1}
    assert {c["order"].val for c in cfgs} == {0, 1} and {c["unroll_kw"].val for c in cfgs} == {False, True}
    assert {c["tile_ic"].size[-1] for c in cfgs} == {16}
    # a 1x1 kernel has nothing to unroll
    assert {c["unroll_kw"].val for c in _configs(task(32, 7, 7, 32, 1, 1, 0).config_space)} == {False}


def test_fallback_order():
    assert fallback_order(64, 64, 58, 58, 56, 3, 3, 16, 16) == 0           # few ic chunks: weights resident
    assert fallback_order(512, 256, 28, 28, 28, 1, 1, 16, 16) == 1         # many chunks, input > cache
    assert fallback_order(1024, 512, 14, 14, 14, 1, 1, 16, 16) == 1
    assert fallback_order(512, 512, 9, 9, 7, 3, 3, 16, 16) == 0            # 9 MB of weights per row: no
    # strided: the few input rows of an output row stay in cache, the weights pass (if they fit)
    assert fallback_order(128, 128, 58, 58, 28, 3, 3, 16, 16, stride=2) == 1
    assert fallback_order(64, 128, 56, 56, 28, 1, 1, 16, 16, stride=2) == 1
    assert fallback_order(512, 512, 16, 16, 7, 3, 3, 16, 16, stride=2) == 0  # 9 MB of weights


@pytest.mark.parametrize("isa,cases", [
    # accumulators + weight vectors + broadcast all in registers: 12 + 2 + 1 of 16 for a 16-channel block (rows
    # of 6, the tiles evened out, a peeled tail: 56 = 9 x 6 + 2, 7 = 4 + 3), 14 + 1 + 1 for 8 channels; a narrow
    # (3-channel) block keeps the kernel row a loop
    ("avx2", [((3, 224, 224, 64, 7, 2, 3), (3, 16, 1, 6, 0, False)),
              ((3, 224, 224, 24, 7, 2, 3), (3, 8, 1, 14, 0, False)),
              ((64, 56, 56, 64, 3, 1, 1), (16, 16, 1, 6, 0, False)),
              ((512, 7, 7, 512, 3, 1, 1), (16, 16, 1, 4, 0, False)),
              ((24, 8, 7, 24, 1, 1, 0), (8, 8, 2, 7, 0, False))]),
    # AVX-512: one 16-lane vector per pixel, rows of up to 28 accumulators
    ("avx512", [((3, 224, 224, 64, 7, 2, 3), (3, 16, 1, 28, 0, False)),
                ((3, 224, 224, 96, 3, 2, 1), (3, 16, 1, 28, 0, False)),
                ((64, 56, 56, 64, 3, 1, 1), (16, 16, 1, 28, 0, False)),
                ((512, 7, 7, 512, 3, 1, 1), (16, 16, 1, 7, 0, True)),
                ((24, 8, 7, 24, 1, 1, 0), (24, 24, 2, 7, 0, False))]),
])
def test_fallback_rules(isa, cases):
    from kiln.autotvm.task.space import FallbackConfigEntity
    for args, want in cases:
        task = _task(*args, target=ISA[isa])
        fb = FallbackConfigEntity()
        with task.target:
            task.instantiate(fb)
        got = (fb["tile_ic"].size[-1], fb["tile_oc"].size[-1], fb["tile_oh"].size[-1], fb["tile_ow"].size[-1],
               fb["order"].val, bool(fb["unroll_kw"].val))
        assert got == want, (args, got)
        # tile_occ: see test_fallback_chunks_of_narrow_rows (two chunks on AVX-512's 512@7 only, here)
        assert fb["tile_occ"].val == (2 if (isa, args) == ("avx512", (512, 7, 7, 512, 3, 1, 1)) else 1), args


@pytest.mark.parametrize("isa,cases", [
    # AVX2: a 7-wide row of two vectors is two tiles (4 + 3 pixels, 8 accumulators; two chunks would be 16, over
    # the 13 that leave room for two weight vectors and a broadcast); a 3-wide row (6) takes two chunks (12),
    # unless the chunks are odd (48 = 3 x 16)
    ("avx2", [((512, 7, 7, 512, 3, 1, 1), (1, 4, 1)), ((160, 7, 7, 960, 1, 1, 0), (1, 4, 1)),
              ((64, 3, 3, 64, 3, 1, 1), (1, 3, 2)), ((64, 3, 3, 48, 3, 1, 1), (1, 3, 1)),
              ((64, 5, 5, 64, 1, 1, 0), (1, 5, 1))]),
    # AVX-512: a 7-wide row of one vector (7 of 28) takes two chunks (14), strided or 1x1 alike; a 14x14
    # output keeps its 2 x 14 tile; odd chunks (48 = 3 x 16, 80 = 5 x 16) keep one
    ("avx512", [((512, 7, 7, 512, 3, 1, 1), (1, 7, 2)), ((256, 14, 14, 512, 3, 2, 1), (1, 7, 2)),
                ((2048, 7, 7, 512, 1, 1, 0), (1, 7, 2)), ((960, 7, 7, 160, 1, 1, 0), (1, 7, 2)),
                ((160, 7, 7, 960, 1, 1, 0), (1, 7, 2)), ((256, 14, 14, 256, 3, 1, 1), (2, 14, 1)),
                ((64, 7, 7, 48, 3, 1, 1), (1, 7, 1)), ((64, 7, 7, 80, 1, 1, 0), (1, 7, 1)),
                ((64, 5, 5, 64, 1, 1, 0), (1, 5, 2)), ((3, 29, 29, 64, 7, 2, 3), (1, 15, 1))]),
])
def test_fallback_chunks_of_narrow_rows(isa, cases):
    """A fallback pixel tile under the register budget's fewest accumulators takes two output-channel chunks
    when they pair up and fit the budget (``tile_occ``); a narrow input block (the stem) keeps one."""
    from kiln.autotvm.task.space import FallbackConfigEntity
    for args, want in cases:
        task = _task(*args, target=ISA[isa])
        fb = FallbackConfigEntity()
        with task.target:
            task.instantiate(fb)
        got = (fb["tile_oh"].size[-1], fb["tile_ow"].size[-1], fb["tile_occ"].val)
        assert got == want, (args, got)


def test_fallback_chunks_rule():
    assert fallback_chunks(7, 24, 28, 32) == 2          # AVX-512, 7-wide row: 14 of 28
    assert fallback_chunks(7, 24, 28, 5) == 1           # odd chunks
    assert fallback_chunks(14, 24, 28, 32) == 2         # 28 fits
    assert fallback_chunks(15, 24, 28, 32) == 1         # 30 does not
    assert fallback_chunks(24, 24, 28, 32) == 1         # full enough
    assert fallback_chunks(6, 12, 14, 4) == 2 and fallback_chunks(8, 12, 14, 4) == 1   # AVX2
    assert fallback_chunks(7, 24, 28, 32, narrow=True) == 1



@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_tile_budget_leaves_registers_for_weights_and_broadcast(isa):
    """A fallback tile's accumulators, its weight vectors and the broadcast fit the ISA's vector registers: AVX2
    12 + 2 + 1 of 16 for a 16-channel block (13 allowed, 6 pixels), 14 + 1 + 1 for an 8-channel one; AVX-512
    28 + 1 + 1 of 32."""
    with tvm.target.Target(ISA[isa]):
        max_acc, _ = register_budget()
        got = {vecs: tile_budget(max_acc, vecs) for vecs in (1, 2)}
    assert got == {"avx2": {1: 14, 2: 13}, "avx512": {1: 28, 2: 28}}[isa]


def test_fallback_row_rule():
    """The fewest tiles of at most budget // vecs pixels, evened out (the last one peeled)."""
    assert [fallback_row(w, 2, 13) for w in (56, 28, 14, 7, 6, 3, 112)] == [6, 6, 5, 4, 6, 3, 6]
    assert [fallback_row(w, 1, 14) for w in (56, 28, 14, 7, 15)] == [14, 14, 14, 7, 8]
    assert [fallback_row(w, 1, 28) for w in (112, 56, 28, 14, 7, 31, 29)] == [28, 28, 28, 14, 7, 16, 15]


# (shape ic, h, w, oc, k, s, p) -> (pixels a tile row, output-channel chunks a tile) per ISA
_FULL_BLOCK_TILES = [
    ((256, 56, 56, 64, 1, 1, 0), {"avx2": (6, 1), "avx512": (28, 1)}),     # resnet50's 1x1 at 56x56
    ((128, 57, 57, 128, 3, 2, 1), {"avx2": (6, 1), "avx512": (15, 1)}),    # strided 3x3 to 29x29 (unrolled kw)
    ((512, 7, 7, 128, 1, 1, 0), {"avx2": (4, 1), "avx512": (7, 2)}),       # a 7-wide row
]


def _reduction_loop(asm: str) -> str:
    """The innermost loop of ``asm`` (from a label to a backward jump to it) with the most FMAs: the conv's
    reduction step. A row whose last tile is shorter keeps the tile's tail pixels behind a branch inside it."""
    lines = asm.split("\n")
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"^(\.L\w+):\s*$", line))}
    spans = []
    for j, line in enumerate(lines):
        m = re.match(r"^\s+j\w+\s+(\.L\w+)\s*$", line)
        if m and labels.get(m.group(1), j) < j:
            spans.append((labels[m.group(1)], j))
    inner = [(i, j) for i, j in spans if not any(i < i2 and j2 < j for i2, j2 in spans)]
    loops = ["\n".join(lines[i + 1:j]) for i, j in inner]
    return max(loops, key=lambda b: b.count("vfmadd"), default="")


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("args,tiles", _FULL_BLOCK_TILES)
def test_full_block_tile_keeps_accumulators_in_registers(isa, args, tiles):
    """Generated code of the fallback of full 16-channel blocks (compiled for the named ISA, not run): the tile's
    accumulators are vector variables (AVX2: 2 ymm a pixel, at most 6 pixels; AVX-512: 1 zmm, at most 28), and in
    gcc's assembly the reduction loop's FMAs run on registers only: no stack access in the hot block (with AVX2's
    former 7-pixel rows, 14 ymm accumulators, gcc kept one on the stack there)."""
    from kiln.autotvm.task.space import FallbackConfigEntity
    target, lanes = ISA[isa], LANES[isa]
    task = _task(*args, target=target)
    fb = FallbackConfigEntity()
    with task.target:
        sch, targs = task.instantiate(fb)
        src = tvm.build(sch, targs, target=target).get_source()
    vecs = 16 // lanes
    row, occ = tiles[isa]
    assert (fb["tile_oh"].size[-1], fb["tile_ow"].size[-1], fb["tile_occ"].val) == (1, row, occ)
    n_acc = vecs * row * occ
    assert n_acc + vecs + 1 <= {"avx2": 16, "avx512": 32}[isa]
    vec = {"avx2": "kiln_f32x8", "avx512": "kiln_f32x16"}[isa]
    assert re.search(rf"{vec} conv2d_NCHWc_global_r0\b", src)
    assert f"conv2d_NCHWc_global_r{n_acc - 1}" in src
    assert not re.search(rf"conv2d_NCHWc_global_r{n_acc}\b", src)
    hot = _reduction_loop(target_asm(src, target))
    fmas = re.findall(r"vfmadd\w+\s+([^\n]*)", hot)
    # at least a reduction step of the widest tile (gcc may merge a row's two tiles of a 7-wide row into one
    # loop, their weights then FMA memory operands), accumulating in registers of the ISA's width
    assert len(fmas) >= n_acc, (len(fmas), n_acc)
    reg = {"avx2": "%ymm", "avx512": "%zmm"}[isa]
    assert all(f.rstrip().rsplit(",", 1)[-1].strip().startswith(reg) for f in fmas), fmas
    assert not re.search(r"\((%rsp|%rbp)\)", hot), hot


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("ic,h,w,oc,k,s,p", [
    (48, 13, 13, 32, 1, 1, 0),     # 13-wide rows: AVX2 tiles of 5 + 5 + 3, AVX-512 one tile of 13
    (32, 9, 31, 48, 3, 1, 1),      # 31-wide: AVX2 6 x 5 + 1, AVX-512 16 + 15; 3 chunks of 16
    (16, 15, 15, 32, 3, 2, 1),     # strided 3x3 to 8x8 (AVX2 rows of 4 + 4)
    (64, 7, 7, 32, 1, 1, 0),       # 7-wide: AVX2 4 + 3
    (24, 11, 11, 40, 3, 1, 1),     # 8-channel blocks (one ymm a pixel on AVX2: rows of 11)
])
def test_fallback_rows_numerics_per_isa(isa, ic, h, w, oc, k, s, p):
    """The fallback of each ISA's code (run where the host has the ISA), with its evened-out rows and peeled
    tails, with a fused bias + relu, against numpy."""
    if not host_can_run(tvm.target.Target(ISA[isa])):
        pytest.skip(f"the host cannot run {ISA[isa]} code")
    rng = np.random.default_rng(ic * 7 + w)
    a = rng.standard_normal((1, ic, h, w)).astype("float32")
    wt = rng.standard_normal((oc, ic, k, k)).astype("float32")
    bias = rng.standard_normal(oc).astype("float32")
    ref = np.maximum(conv2d_nchw_python(a, wt, (s, s), (p,) * 4) + bias[None, :, None, None], 0)
    np.testing.assert_allclose(_run_packed(None, a, wt, s, p, bias, target=ISA[isa]), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("ic,h,w,oc,k,s,p", [
    (48, 7, 7, 96, 3, 1, 1),       # 7x7, 3x3: 6 chunks of 16 on AVX-512 (two a tile), 3 of 32 on AVX2 (one)
    (40, 7, 7, 160, 1, 1, 0),      # 1x1 at 7x7, odd input chunks (5 x 8 on both)
    (32, 13, 13, 96, 3, 2, 1),     # strided to 7x7
    (24, 7, 7, 48, 3, 1, 1),       # 3 chunks of 16 (AVX-512) / of 16 (AVX2): one chunk a tile
    (16, 3, 3, 64, 3, 1, 1),       # a 3-wide row: two chunks on both ISAs
])
def test_fallback_on_narrow_rows_numerics(ic, h, w, oc, k, s, p):
    """The fallback (two chunks a tile where the rule takes them) on the host, against numpy, with a fused
    bias + relu, on 7x7 outputs with channel counts that allow and forbid two chunks."""
    _check_fallback_bias_relu(ic, h, w, oc, k, s, p, seed=ic * 31 + oc)


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_two_chunk_fallback_tile_is_registers(isa):
    """Generated code of a 7x7 conv's fallback per ISA (compiled, not run): AVX-512 holds 2 chunks x 7 pixels
    = 14 zmm accumulators, AVX2 one chunk of 2 ymm x 4 pixels = 8 (the row in tiles of 4 and 3: 14 ymm
    accumulators with the two weight vectors and the broadcast are 17 of 16 registers)."""
    with tvm.target.Target(ISA[isa]):
        lanes = LANES[isa]
        ocb = channel_block(64, lanes)
        A = te.placeholder((1, 64 // 16, 9, 9, 16), name="A")
        W = te.placeholder((64 // ocb, 64 // 16, 3, 3, 16, ocb), name="W")
        out = x86.conv2d_NCHWc(A, W, (1, 1), (0, 0, 0, 0), (1, 1), "NCHW16c", f"NCHW{ocb}c", "float32")
        f = tvm.build(x86.schedule_conv2d_NCHWc([out]), [A, W, out], target=ISA[isa])
    src = f.get_source()
    vec = {"avx2": "kiln_f32x8", "avx512": "kiln_f32x16"}[isa]
    assert f"{vec} conv2d_NCHWc_global_r0," in src or f"{vec} conv2d_NCHWc_global_r0;" in src
    n = {"avx2": 4 * 2, "avx512": 7 * 2}[isa]
    assert f"conv2d_NCHWc_global_r{n - 1}" in src and f"conv2d_NCHWc_global_r{n}" not in src


@pytest.mark.parametrize("ic,h,w,oc,k,s,p", [
    (24, 13, 13, 40, 3, 1, 1),     # 8-blocks, odd size with a non-dividing 7-pixel row
    (16, 7, 9, 64, 1, 2, 0),       # strided 1x1 (2-chunk tiles too)
    (3, 15, 15, 32, 7, 2, 3),      # a 7x7 stem with 3 input channels (2-chunk tiles too)
])
def test_every_config_of_the_space(ic, h, w, oc, k, s, p):
    rng = np.random.default_rng(ic + 7 * oc)
    a = rng.standard_normal((1, ic, h, w)).astype("float32")
    wt = rng.standard_normal((oc, ic, k, k)).astype("float32")
    ref = conv2d_nchw_python(a, wt, (s, s), (p,) * 4)
    cfgs = _configs(_task(ic, h, w, oc, k, s, p).config_space)
    assert cfgs
    for cfg in cfgs:
        np.testing.assert_allclose(_run_packed(cfg, a, wt, s, p), ref, rtol=1e-4, atol=1e-4, err_msg=str(cfg))


@pytest.mark.parametrize("ic,h,w,oc,k,s,p", [
    (144, 9, 11, 24, 1, 1, 0),     # writes a 24-block: rows of 11 (no 14- or 7-pixel tile divides them)
    (24, 13, 13, 48, 3, 2, 1),     # reads a 24-block, strided 3x3
    (72, 5, 6, 120, 1, 1, 0),      # 24-blocks in and out, a 5x6 output
])
def test_24_channel_blocks_on_avx512(ic, h, w, oc, k, s, p):
    """AVX-512's 24-channel block (a zmm and a ymm per pixel, :func:`channel_block`): every config of the space
    against numpy where the host runs AVX-512 code, and generated for ``llvm -mcpu=skylake-avx512`` with the
    accumulators of a 24-block output in 16-lane and 8-lane register slots, no array."""
    target = ISA["avx512"]
    rng = np.random.default_rng(ic + 5 * oc)
    a = rng.standard_normal((1, ic, h, w)).astype("float32")
    wt = rng.standard_normal((oc, ic, k, k)).astype("float32")
    ref = conv2d_nchw_python(a, wt, (s, s), (p,) * 4)
    cfgs = _configs(_task(ic, h, w, oc, k, s, p, target=target).config_space)
    assert cfgs and {c["tile_ic"].size[-1] for c in cfgs} == {channel_block(ic, 16)}
    assert {c["tile_oc"].size[-1] for c in cfgs} == {channel_block(oc, 16)}
    for cfg in cfgs + [None]:
        src = []
        got = _run_packed(cfg, a, wt, s, p, target=target, source=src)
        if got is not None:
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4, err_msg=str(cfg))
        if oc % 24 == 0 and oc % 16:
            assert "kiln_f32x16 conv2d_NCHWc_global_r0" in src[0] and "conv2d_NCHWc_global_w8_r0" in src[0], cfg
            assert "float conv2d_NCHWc_global[" not in src[0], cfg
    # with a fused bias + relu (the fallback)
    bias = rng.standard_normal(oc).astype("float32")
    got = _run_packed(None, a, wt, s, p, bias, target=target)
    if got is not None:
        np.testing.assert_allclose(got, np.maximum(ref + bias[None, :, None, None], 0), rtol=1e-4, atol=1e-4)


def test_last_config_and_fallback_with_epilogue():
    """The last index of the space (order 1, unroll), a 2-row tile of 8-channel blocks and the fallback, with a
    fused bias + relu, on a shape whose channels are no multiple of 16."""
    ic, h, w, oc, k, s, p = 40, 14, 14, 24, 3, 1, 1
    rng = np.random.default_rng(5)
    a = rng.standard_normal((1, ic, h, w)).astype("float32")
    wt = rng.standard_normal((oc, ic, k, k)).astype("float32")
    bias = rng.standard_normal(oc).astype("float32")
    ref = np.maximum(conv2d_nchw_python(a, wt, (s, s), (p,) * 4) + bias[None, :, None, None], 0)
    space = _task(ic, h, w, oc, k, s, p).config_space
    cfgs = _configs(space)
    last = space.get(max(i for i in range(space.range_length) if space.is_index_valid(i)))
    assert (last["order"].val, bool(last["unroll_kw"].val)) == (1, True)
    two_rows = next(c for c in cfgs if c["tile_oh"].size[-1] == 2 and c["order"].val == 0)
    for cfg in (last, two_rows, None):
        np.testing.assert_allclose(_run_packed(cfg, a, wt, s, p, bias), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("ic,h,w,oc,k,s,p", [
    (3, 37, 29, 32, 7, 2, 3),      # stem-like: 2 vectors, 6-pixel rows with a peeled tail of 3 (15 = 2 x 6 + 3)
    (3, 23, 31, 24, 3, 2, 1),      # one vector: 14-pixel rows, tail of 2 (16 = 14 + 2)
    (5, 19, 21, 16, 5, 1, 2),      # an odd narrow block (5 channels), stride 1
])
def test_fallback_of_narrow_blocks(ic, h, w, oc, k, s, p):
    """The fallback of a conv whose input block is narrower than a vector (the network stem), on the host,
    against numpy, with a fused bias + relu."""
    _check_fallback_bias_relu(ic, h, w, oc, k, s, p, seed=ic * 100 + oc)


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_narrow_block_tile_is_registers(isa):
    """Generated code of the stem's fallback for each ISA (compiled, run only by the numerical tests): the
    accumulators are vector variables, 6 pixels x 2 ymm on AVX2 (room left for both weight vectors and the
    broadcast), 16 pixels x 1 zmm on AVX-512 (its 31-pixel rows in tiles of 16 and 15, not 28 and 3), and the
    kernel row stays a loop."""
    with tvm.target.Target(ISA[isa]):
        A = te.placeholder((1, 1, 61, 61, 3), name="A")
        W = te.placeholder((4, 1, 7, 7, 3, 16), name="W")
        out = x86.conv2d_NCHWc(A, W, (2, 2), (3, 3, 3, 3), (1, 1), "NCHW3c", "NCHW16c", "float32")
        f = tvm.build(x86.schedule_conv2d_NCHWc([out]), [A, W, out], target=ISA[isa])
    src = f.get_source()
    vec, n_acc = {"avx2": ("kiln_f32x8", 12), "avx512": ("kiln_f32x16", 16)}[isa]
    assert f"{vec} conv2d_NCHWc_global_r0," in src and f"conv2d_NCHWc_global_r{n_acc - 1}" in src
    assert f"conv2d_NCHWc_global_r{n_acc}" not in src
    assert "for (int32_t kw = 0; kw < 7; ++kw)" in src
    assert "for (int32_t ic_block = 0; ic_block < 3; ++ic_block)" in src


def _net(rng):
    """conv3x3(8->24, stride 2) + bias + relu -> conv1x1(24->16) + residual-free add of a bias, NCHW 13x11."""
    x = relay.var("data", shape=(1, 8, 13, 11))
    w1 = relay.const(rng.standard_normal((24, 8, 3, 3)).astype("float32") * 0.3)
    b1 = relay.const(rng.standard_normal((24,)).astype("float32"))
    w2 = relay.const(rng.standard_normal((16, 24, 1, 1)).astype("float32") * 0.3)
    y = relay.nn.conv2d(x, w1, strides=(2, 2), padding=(1, 1), channels=24, kernel_size=(3, 3))
    y = relay.nn.relu(relay.nn.bias_add(y, b1))
    y = relay.nn.conv2d(y, w2, channels=16, kernel_size=(1, 1))
    return tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(y)))


@pytest.mark.parametrize("pick", ["first", "last"])
def test_relay_build_with_tuned_records(tmp_path, pick):
    rng = np.random.default_rng(11)
    mod = _net(rng)
    xv = rng.standard_normal((1, 8, 13, 11)).astype("float32")
    ref = relay.create_executor("debug", mod=mod).evaluate()(xv).numpy()
    tasks = autotvm.task.extract_from_program(mod["main"], target=TARGET, params={},
                                              ops=(relay.op.get("nn.conv2d"),))
    assert len(tasks) == 2
    log = tmp_path / "t.log"
    with open(log, "w") as f:
        for task in tasks:
            cfgs = _configs(task.config_space)
            cfg = cfgs[0] if pick == "first" else cfgs[-1]
            f.write(autotvm.record.encode(MeasureInput(task.target, task, cfg),
                                          MeasureResult((1e-5,), 0, 0.1, time.time())) + "\n")
    target = tvm.target.Target(TARGET)
    with tvm.transform.PassContext(opt_level=3), target, autotvm.apply_history_best(str(log)):
        lib = relay.build(mod, target=target)
    m = GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("data", xv)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("h,w,oc,k,s,p", [(15, 17, 32, 3, 2, 1), (13, 10, 24, 7, 2, 3)])
def test_narrow_input_padding_is_a_pad_fused_with_the_input_transform(tmp_path, isa, h, w, oc, k, s, p):
    """A conv of a 3-channel image (the stem; a block narrower than a vector) gets its padding as an nn.pad of the
    NCHW input, which fuses with the input's layout_transform and (FuseOps' ``input_transform``) the conv into
    the graph's first kernel, with no padded copy of the whole image of its own, and a tuning record of the NCHW workload still reaches the packed conv. Generated
    for the named target, checked against numpy where the host runs it, untuned and with the space's last
    config (odd sizes)."""
    import json
    target = ISA[isa]
    rng = np.random.default_rng(h * w + k)
    x = relay.var("data", shape=(1, 3, h, w))
    wt = relay.const(rng.standard_normal((oc, 3, k, k)).astype("float32"))
    y = relay.clip(relay.nn.conv2d(x, wt, strides=(s, s), padding=(p, p), channels=oc, kernel_size=(k, k)), 0.0, 6.0)
    mod = tvm.IRModule.from_expr(relay.Function([x], y))
    xv = rng.standard_normal((1, 3, h, w)).astype("float32")
    ref = relay.create_executor("debug", mod=mod).evaluate()(xv).numpy()
    (task,) = autotvm.task.extract_from_program(mod["main"], target=target, params={},
                                                ops=(relay.op.get("nn.conv2d"),))
    log = tmp_path / "t.log"
    with open(log, "w") as f:
        f.write(autotvm.record.encode(MeasureInput(task.target, task, _configs(task.config_space)[-1]),
                                      MeasureResult((1e-5,), 0, 0.1, time.time())) + "\n")
    for tuned in (False, True):
        with tvm.transform.PassContext(opt_level=3), tvm.target.Target(target):
            ctx = autotvm.apply_history_best(str(log)) if tuned else None
            if ctx is not None:
                with ctx:
                    lib = relay.build(mod, target=target)
            else:
                lib = relay.build(mod, target=target)
        text = lib.optimized_mod["main"].astext()
        (conv_line,) = [ln for ln in text.splitlines() if "nn.contrib_conv2d_NCHWc(" in ln]
        assert "nn.pad(" in text and "padding=" not in conv_line, conv_line   # no padding left in the conv
        kernels = [n["attrs"]["func_name"] for n in json.loads(lib.get_graph_json())["nodes"] if n["op"] == "tvm_op"]
        # FuseOps' input_transform: the pad and the layout transform run inside the conv's kernel, per row tile
        assert kernels[0].endswith("nn_pad_layout_transform_nn_contrib_conv2d_NCHWc_clip"), kernels
        (conv,) = [c for c in lib.lowered if c.anchor_op == "nn.contrib_conv2d_NCHWc"]
        assert "data_pad" not in str(conv.prim_func)
        if tuned:
            with tvm.target.Target(target) as tgt, ctx:
                got = autotvm.task.DispatchContext.current.query(tgt, autotvm.task.get_workload(conv.outputs))
            assert not got.is_fallback
        if x86_target.host_can_run(target):
            m = GraphModule(lib["default"](tvm.cpu(0)))
            m.set_input("data", xv)
            m.run()
            np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-4)


def test_padded_copy_of_a_narrow_block_is_scalar_copies():
    """Without AlterOpLayout (plain NCHW in, packed inside), a 3-channel input's padded copy moves three scalars a
    pixel instead of 3-lane vectors padded to 4 (against numpy, odd size)."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1, 3, 11, 13)).astype("float32")
    wt = rng.standard_normal((16, 3, 3, 3)).astype("float32")
    with tvm.target.Target(TARGET):
        A = te.placeholder(a.shape, name="data")
        W = te.placeholder(wt.shape, name="kernel")
        out = x86.conv2d_nchw(A, W, (2, 2), (1, 1, 1, 1), (1, 1), "float32")
        f = tvm.build(x86.schedule_conv2d_nchw([out]), [A, W, out], target=TARGET)
    assert "kiln_f32x3" not in f.get_source()
    res = tvm.nd.array(np.zeros([int(d) for d in out.shape], "float32"))
    f(tvm.nd.array(a), tvm.nd.array(wt), res)
    np.testing.assert_allclose(res.numpy(), conv2d_nchw_python(a, wt, (2, 2), (1,) * 4), rtol=1e-4, atol=1e-4)


def test_tuning_measures_the_packed_kernel():
    """While tuning, the NCHW task's kernel takes packed data and weights (as the network runs it), so the
    measurement does not include packing the weights; it still computes the conv."""
    from kiln.autotvm.env import GLOBAL_SCOPE
    ic, h, w, oc, k, s, p = 16, 9, 11, 64, 3, 1, 1
    task = _task(ic, h, w, oc, k, s, p)
    cfg = next(c for c in _configs(task.config_space) if c["tile_occ"].val == 2)
    with task.target:
        _, plain_args = task.instantiate(cfg)
    assert [len(a.shape) for a in plain_args[1:]] == [4, 4]
    old = GLOBAL_SCOPE.in_tuning
    GLOBAL_SCOPE.in_tuning = True
    try:
        with task.target:
            sch, args = task.instantiate(cfg)
            f = tvm.build(sch, args, target=TARGET)
    finally:
        GLOBAL_SCOPE.in_tuning = old
    out, ins = args[0], sorted(args[1:], key=lambda t: len(t.shape))
    assert [tuple(int(d) for d in t.shape) for t in ins] == [(1, 1, h, w, 16), (4, 1, k, k, 16, 16)]
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1, ic, h, w)).astype("float32")
    wt = rng.standard_normal((oc, ic, k, k)).astype("float32")
    res = tvm.nd.array(np.zeros([int(d) for d in out.shape], "float32"))
    packed = {ins[0]: lt(a, "NCHW", "NCHW16c"), ins[1]: lt(wt, "OIHW", "OIHW16i16o")}
    f(res, *[tvm.nd.array(packed[t]) for t in args[1:]])
    np.testing.assert_allclose(lt(res.numpy(), "NCHW16c", "NCHW"), conv2d_nchw_python(a, wt, (s, s), (p,) * 4),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("ic,h,w,oc,k,p", [
    (48, 15, 13, 40, 3, 1),    # 40 output channels (8 / 10-channel blocks), 8x7 output
    (32, 17, 19, 24, 1, 0),    # strided 1x1, 9x10 output, 24 output channels
])
def test_strided_fallback_takes_rows_outside(ic, h, w, oc, k, p):
    """A strided conv with full input blocks takes order 1 in its fallback (rows outside the output-channel
    chunks) on both ISAs; on the host it matches numpy with a fused bias + relu, and the AVX-512 code
    compiles."""
    from kiln.autotvm.task.space import FallbackConfigEntity
    for isa in ISA:
        task = _task(ic, h, w, oc, k, 2, p, target=ISA[isa])
        fb = FallbackConfigEntity()
        with task.target:
            sch, args = task.instantiate(fb)
            src = tvm.build(sch, args, target=ISA[isa]).get_source()
        assert fb["order"].val == 1, (isa, fb)
        assert ("kiln_f32x16" if isa == "avx512" else "kiln_f32x8") in src
    rng = np.random.default_rng(ic + h)
    a = rng.standard_normal((1, ic, h, w)).astype("float32")
    wt = rng.standard_normal((oc, ic, k, k)).astype("float32")
    bias = rng.standard_normal(oc).astype("float32")
    ref = np.maximum(conv2d_nchw_python(a, wt, (2, 2), (p,) * 4) + bias[None, :, None, None], 0)
    np.testing.assert_allclose(_run_packed(None, a, wt, 2, p, bias), ref, rtol=1e-4, atol=1e-4)
