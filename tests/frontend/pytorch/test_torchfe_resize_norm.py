"""interpolate in every mode (nearest, nearest-exact, bilinear / trilinear / linear with and without
align_corners, bicubic) with scale factors and sizes on odd sizes, and instance_norm with and without running
statistics, compared with PyTorch."""
import pytest

from torch_frontend_util import Fn, torch, verify_model

F = torch.nn.functional
nn = torch.nn
pytestmark = pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")


SIZES = [dict(scale_factor=2), dict(scale_factor=1.7), dict(scale_factor=(0.6, 2.3)), dict(size=(9, 4)),
         dict(size=(3, 11)), dict(scale_factor=1.7, recompute_scale_factor=True)]
MODES = [("nearest", None), ("nearest-exact", None), ("bilinear", False), ("bilinear", True), ("bicubic", False),
         ("bicubic", True)]


def _kw_id(kw):
    return "-".join(f"{k}={v}" for k, v in kw.items()).replace(" ", "")


@pytest.mark.parametrize("kw", SIZES, ids=_kw_id)
@pytest.mark.parametrize("mode, align", MODES, ids=lambda v: str(v))
def test_interpolate_2d(mode, align, kw):
    torch.manual_seed(0)
    x = torch.randn(1, 2, 5, 7)
    paths = ("script",) if kw.get("recompute_scale_factor") else ("script", "export")
    verify_model(Fn(lambda a: F.interpolate(a, mode=mode, align_corners=align, **kw)), [x], paths=paths)


@pytest.mark.parametrize("mode, align", [("nearest", None), ("nearest-exact", None), ("linear", False),
                                         ("linear", True)], ids=str)
@pytest.mark.parametrize("kw", [dict(scale_factor=2.5), dict(size=6)], ids=_kw_id)
def test_interpolate_1d(mode, align, kw):
    verify_model(Fn(lambda a: F.interpolate(a, mode=mode, align_corners=align, **kw)), [torch.randn(2, 3, 5)])


@pytest.mark.parametrize("mode, align", [("nearest", None), ("nearest-exact", None), ("trilinear", False),
                                         ("trilinear", True)], ids=str)
@pytest.mark.parametrize("kw", [dict(scale_factor=(1.5, 2, 0.7)), dict(size=(4, 3, 6))], ids=_kw_id)
def test_interpolate_3d(mode, align, kw):
    verify_model(Fn(lambda a: F.interpolate(a, mode=mode, align_corners=align, **kw)), [torch.randn(1, 2, 3, 4, 5)])


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_interpolate_nan_inf(mode):
    x = torch.randn(1, 1, 4, 5)
    x[0, 0, 1, 2] = float("nan")
    x[0, 0, 3, 0] = float("inf")
    verify_model(Fn(lambda a: F.interpolate(a, scale_factor=1.5, mode=mode)), [x], paths=("script",))


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("track", [False, True])
def test_instance_norm(affine, track):
    torch.manual_seed(1)
    m = nn.InstanceNorm2d(3, affine=affine, track_running_stats=track)
    if track:
        m.running_mean.uniform_(-1, 1)
        m.running_var.uniform_(0.5, 2)
    if affine:
        m.weight.data.uniform_(0.5, 1.5)
        m.bias.data.uniform_(-1, 1)
    verify_model(m, [torch.randn(2, 3, 5, 3) * 3 + 1])


@pytest.mark.parametrize("make, shape", [(lambda: nn.InstanceNorm1d(3), (2, 3, 7)),
                                         (lambda: nn.InstanceNorm3d(3, affine=True), (1, 3, 3, 4, 5))],
                         ids=["1d", "3d"])
def test_instance_norm_nd(make, shape):
    verify_model(make(), [torch.randn(*shape)])


def test_resize_modes_built():
    """The take-based (PyTorch-mapped) and the Relay resize paths through relay.build."""
    def f(a):
        return (F.interpolate(a, scale_factor=1.7, mode="bilinear"), F.interpolate(a, size=(9, 4), mode="bicubic"),
                F.interpolate(a, scale_factor=2.5, mode="nearest"))
    verify_model(Fn(f), [torch.randn(1, 2, 5, 7)], paths=("script",), executor="graph")
