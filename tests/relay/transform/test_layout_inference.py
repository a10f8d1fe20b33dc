"""Per-op layout rules: pools, concatenate, softmax, reductions, pad, bias_add and broadcast constants stay in
a split layout (NCHW4c with a test hook; NCHW[x]c with the x86 hooks on whole models), with numerics checked
against the reference interpreter."""
import collections

import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.ir.op import Op
from kiln.relay.expr_functor import post_order_visit
from kiln.relay.transform import AlterOpLayout, FoldConstant, InferType

from pass_helpers import alter_hook, assert_same_numerics, nchw4c_hook, need_ops, parse, run

X = "Tensor[(1, 8, 6, 6), float32]"
W = "Tensor[(8, 8, 3, 3), float32]"


@pytest.fixture(autouse=True)
def _ops():
    need_ops("nn.conv2d", "layout_transform", "nn.max_pool2d", "concatenate", "nn.contrib_conv2d_NCHWc")


def calls(mod):
    """[(op name, attrs)] of every op call in main, in post order."""
    out = []

    def visit(e):
        if isinstance(e, relay.Call) and isinstance(e.op, Op):
            out.append((e.op.name, e.attrs))
    post_order_visit(mod["main"], visit)
    return out


def transforms(mod):
    """(src, dst) of the layout_transforms of activations (weight transforms of parameters left out)."""
    return [(a.src_layout, a.dst_layout) for n, a in calls(mod) if n == "layout_transform"
            and not a.src_layout.startswith("OIHW")]


def altered(text):
    """AlterOpLayout with the NCHW4c hook, checked numerically against the original."""
    before = parse(text)
    with alter_hook("nn.conv2d", nchw4c_hook):
        out = run(AlterOpLayout(), before)
    out = InferType()(out)
    assert_same_numerics(before, out, rtol=1e-4, atol=1e-4)
    return out


def conv(src, name="%w"):
    return f"nn.conv2d({src}, {name}, padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3])"


@pytest.mark.parametrize("pool", [
    "nn.max_pool2d(%0, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1])",
    "nn.avg_pool2d(%0, pool_size=[2, 2], strides=[1, 1], padding=[0, 0, 1, 1], count_include_pad=False)",
    "nn.global_avg_pool2d(%0)",
    "nn.global_max_pool2d(%0)",
    "nn.adaptive_avg_pool2d(%0, output_size=[2, 3])",
])
def test_pools_stay_in_split_layout(pool):
    out = altered(f"""
    def @main(%x: {X}, %w: {W}) {{
      %0 = {conv('%x')};
      %1 = {pool};
      nn.relu(%1)
    }}""")
    names = dict((n, a) for n, a in calls(out))
    pool_name = pool.split("(")[0]
    assert names[pool_name].layout == "NCHW4c"
    assert transforms(out) == [("NCHW", "NCHW4c"), ("NCHW4c", "NCHW")]  # input, result: nothing in between


def test_concatenate_on_channels_stays_and_brings_plain_inputs():
    out = altered(f"""
    def @main(%x: {X}, %w: {W}, %y: Tensor[(1, 4, 6, 6), float32]) {{
      %0 = {conv('%x')};
      %1 = nn.relu(%0);
      %2 = concatenate((%0, %1, %y), axis=1);
      {conv('%2', '%w2')}
    }}""".replace("%w: " + W, f"%w: {W}, %w2: Tensor[(8, 20, 3, 3), float32]"))
    cat = [a for n, a in calls(out) if n == "concatenate"][0]
    assert cat.axis == 1
    # x in, y brought in, result out; the concat feeds the second conv without a transform
    assert sorted(transforms(out)) == sorted([("NCHW", "NCHW4c"), ("NCHW", "NCHW4c"), ("NCHW4c", "NCHW")])


def test_concatenate_falls_back_when_a_block_does_not_divide():
    out = altered(f"""
    def @main(%x: {X}, %w: {W}, %y: Tensor[(1, 6, 6, 6), float32]) {{
      %0 = {conv('%x')};
      concatenate((%0, %y), axis=1)
    }}""")
    cat = [a for n, a in calls(out) if n == "concatenate"][0]
    assert cat.axis == 1
    assert ("NCHW4c", "NCHW") in transforms(out)


def test_concatenate_on_spatial_axis():
    out = altered(f"""
    def @main(%x: {X}, %w: {W}) {{
      %0 = {conv('%x')};
      %1 = nn.relu(%0);
      concatenate((%0, %1), axis=-1)
    }}""")
    cat = [a for n, a in calls(out) if n == "concatenate"][0]
    assert cat.axis == 3
    assert transforms(out).count(("NCHW4c", "NCHW")) == 1


def test_softmax_and_reductions():
    out = altered(f"""
    def @main(%x: {X}, %w: {W}) {{
      %0 = {conv('%x')};
      %1 = nn.softmax(%0, axis=3);
      %2 = mean(%1, axis=[2, 3], keepdims=True);
      %3 = sum(%1, axis=[2]);
      %4 = nn.softmax(%0, axis=1);
      %5 = max(%0, axis=[1], keepdims=True);
      (%2, %3, %4, %5)
    }}""")
    attrs = collections.defaultdict(list)
    for n, a in calls(out):
        attrs[n].append(a)
    assert [a.axis for a in attrs["nn.softmax"]] == [3, 1]  # the channel softmax ran in NCHW
    assert list(attrs["mean"][0].axis) == [2, 3]
    assert list(attrs["sum"][0].axis) == [2]
    # softmax(axis=1) and max over channels need NCHW; mean/sum stay in NCHW4c / NC4cW... and go back at the end
    lts = transforms(out)
    assert ("NCHW4c", "NCHW") in lts and ("NCW4c", "NCW") in lts


def test_pad_and_bias_add_and_per_channel_constant():
    rng = np.random.default_rng(1)
    scale = relay.const(rng.standard_normal((8, 1, 1)).astype("float32"))
    text = f"""
    def @main(%x: {X}, %w: {W}, %b: Tensor[(8), float32]) {{
      %0 = {conv('%x')};
      %1 = nn.bias_add(%0, %b);
      %2 = multiply(%1, meta[relay.Constant][0]);
      %3 = nn.pad(%2, 0f, pad_width=[[0, 0], [0, 0], [1, 2], [0, 1]]);
      {conv('%3')}
    }}"""
    before = parse(text, [scale])
    with alter_hook("nn.conv2d", nchw4c_hook):
        out = run(kiln.transform.Sequential([AlterOpLayout(), FoldConstant()]), before)
    out = InferType()(out)
    assert_same_numerics(before, out, rtol=1e-4, atol=1e-4)
    names = [n for n, _ in calls(out)]
    assert "nn.bias_add" not in names and names.count("add") == 1
    pad = [a for n, a in calls(out) if n == "nn.pad"][0]
    assert [tuple(p) for p in pad.pad_width] == [(0, 0), (0, 0), (1, 2), (0, 1), (0, 0)]
    # activation transforms: x in, result out; the bias's transform stays (a parameter), the scale is folded
    lts = transforms(out)
    assert lts.count(("NCHW4c", "NCHW")) == 1
    assert ("NCHW", "NCHW4c") in lts


def test_batch_flatten_boundary_gets_one_transform():
    out = altered(f"""
    def @main(%x: {X}, %w: {W}, %d: Tensor[(10, 8), float32]) {{
      %0 = {conv('%x')};
      %1 = nn.global_avg_pool2d(%0);
      %2 = nn.batch_flatten(%1);
      nn.dense(%2, %d)
    }}""")
    assert transforms(out) == [("NCHW", "NCHW4c"), ("NCHW4c", "NCHW")]


# -- whole models with the x86 hooks ---------------------------------------------------------------------------
def _optimized(mod, params):
    from kiln.relay.build_module import bind_params_by_name
    from kiln.relay.transform import CanonicalizeOps, FoldScaleAxis, SimplifyExpr, SimplifyInference
    mod = kiln.IRModule.from_expr(bind_params_by_name(mod["main"], params))
    seq = kiln.transform.Sequential([InferType(), SimplifyInference(), FoldConstant(), FoldScaleAxis(),
                                     SimplifyExpr(), CanonicalizeOps(), InferType()])
    with kiln.transform.PassContext(opt_level=3):
        plain = seq(mod)
        with kiln.target.Target("llvm"):
            altered = kiln.transform.Sequential([AlterOpLayout(), FoldConstant(), InferType()])(plain)
    return plain, altered


def _check_model(plain, altered_mod, data_shape):
    lts = [(n, a) for n, a in calls(altered_mod) if n == "layout_transform"]
    assert len(lts) == 2, [(a.src_layout, a.dst_layout) for _, a in lts]
    first, last = lts[0][1], lts[1][1]
    assert first.src_layout == "NCHW" and first.dst_layout.startswith("NCHW") and first.dst_layout.endswith("c")
    assert last.dst_layout == "NCHW"
    names = [n for n, _ in calls(altered_mod)]
    # the only transform back sits right before the classifier
    assert names[names.index("layout_transform", names.index("layout_transform") + 1) + 1] == "nn.batch_flatten"
    x = np.random.default_rng(0).standard_normal(data_shape).astype("float32")
    from pass_helpers import evaluate
    a = evaluate(plain, {"data": x})[0]
    b = evaluate(altered_mod, {"data": x})[0]
    np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet", "squeezenet"])
def test_models_have_one_transform_in_and_one_before_classifier(name):
    from kiln.relay import testing
    shape = (3, 32, 32)
    if name == "resnet18":
        mod, params = testing.resnet.get_workload(num_layers=18, batch_size=1, image_shape=shape, num_classes=10)
    elif name == "mobilenet":
        mod, params = testing.mobilenet.get_workload(batch_size=1, image_shape=shape, num_classes=10)
    else:
        mod, params = testing.squeezenet.get_workload(batch_size=1, image_shape=shape, num_classes=16)
    plain, alt = _optimized(mod, params)
    _check_model(plain, alt, (1,) + shape)


@pytest.mark.slow
def test_resnet50_layouts():
    from kiln.relay import testing
    shape = (3, 32, 32)
    mod, params = testing.resnet.get_workload(num_layers=50, batch_size=1, image_shape=shape, num_classes=10)
    plain, alt = _optimized(mod, params)
    _check_model(plain, alt, (1,) + shape)


def test_small_cnn_builds_and_matches_interpreter():
    """relay.build (AlterOpLayout under the llvm target) of a net with pools, concat and a classifier."""
    rng = np.random.default_rng(2)
    c = lambda *s: relay.const(rng.standard_normal(s).astype("float32") * 0.2)  # noqa: E731
    x = relay.var("data", shape=(1, 3, 19, 17))
    y = relay.nn.relu(relay.nn.conv2d(x, c(16, 3, 3, 3), padding=(1, 1), channels=16, kernel_size=(3, 3)))
    y = relay.nn.max_pool2d(y, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    a = relay.nn.conv2d(y, c(16, 16, 1, 1), channels=16, kernel_size=(1, 1))
    b = relay.nn.conv2d(y, c(16, 16, 3, 3), padding=(1, 1), channels=16, kernel_size=(3, 3))
    y = relay.concatenate([relay.nn.relu(a), b * c(16, 1, 1)], axis=1)
    y = relay.nn.avg_pool2d(y, pool_size=(2, 2), strides=(2, 2))
    y = relay.nn.global_avg_pool2d(y)
    y = relay.nn.dense(relay.nn.batch_flatten(y), c(10, 32))
    mod = kiln.IRModule.from_expr(relay.Function([x], relay.nn.softmax(y)))
    xv = rng.standard_normal((1, 3, 19, 17)).astype("float32")
    from pass_helpers import evaluate
    ref = evaluate(mod, {"data": xv})[0]
    target = kiln.target.Target("llvm")
    with kiln.transform.PassContext(opt_level=3), target:
        lib = relay.build(mod, target=target)
    import json
    graph = json.loads(lib.get_graph_json())
    kernels = [n["attrs"]["func_name"] for n in graph["nodes"] if n["op"] == "tvm_op"]
    assert sum("layout_transform" in k for k in kernels) <= 2, kernels
    from kiln.runtime.graph_executor import GraphModule
    m = GraphModule(lib["default"](kiln.cpu(0)))
    m.set_input("data", xv)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-5)
