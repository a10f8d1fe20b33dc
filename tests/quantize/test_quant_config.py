"""relay.quantize.qconfig: TVM's fields and defaults, nesting, immutability, clear errors."""
import pytest

from kiln import relay
from kiln.error import KilnError
from kiln.relay.quantize import QuantizeConfigError, current_qconfig, qconfig


def test_quant_defaults_are_tvms():
    cfg = current_qconfig()
    assert (cfg.nbit_input, cfg.nbit_weight, cfg.nbit_activation) == (8, 8, 32)
    assert (cfg.dtype_input, cfg.dtype_weight, cfg.dtype_activation) == ("int8", "int8", "int32")
    assert cfg.calibrate_mode == "global_scale" and cfg.global_scale == 8.0 and cfg.weight_scale == "power2"
    assert cfg.skip_dense_layer is True and tuple(cfg.skip_conv_layers) == (0,)
    assert cfg.do_simulation is False and cfg.round_for_shift is True and cfg.debug_enabled_ops is None
    assert cfg.rounding == "UPWARD" and cfg.calibrate_chunk_by == -1 and cfg.partition_conversions == "disabled"


def test_quant_nesting_restores_outer():
    base = current_qconfig()
    with qconfig(nbit_input=7, calibrate_mode="percentile") as outer:
        assert current_qconfig() is outer and current_qconfig().nbit_input == 7
        with qconfig(global_scale=4.0, skip_conv_layers=[1, 2]) as inner:
            cur = current_qconfig()
            assert cur is inner and cur.global_scale == 4.0 and tuple(cur.skip_conv_layers) == (1, 2)
            # fields not given take TVM's default, not the enclosing config's value (as in TVM)
            assert cur.nbit_input == 8 and cur.calibrate_mode == "global_scale"
        assert current_qconfig() is outer
    assert current_qconfig() is base


def test_quant_config_restored_after_exception():
    base = current_qconfig()
    with pytest.raises(ZeroDivisionError):
        with qconfig(global_scale=2.0):
            1 / 0
    assert current_qconfig() is base


def test_quant_config_is_immutable():
    cfg = qconfig()
    with pytest.raises(AttributeError):
        cfg.global_scale = 3.0


def test_quant_kind_lookup():
    from kiln.relay.quantize import QAnnotateKind
    cfg = qconfig(nbit_weight=4, dtype_activation="int16")
    assert cfg.get_nbit_by_kind(QAnnotateKind.WEIGHT) == 4
    assert cfg.get_dtype_by_kind(QAnnotateKind.ACTIVATION) == "int16"
    with pytest.raises(QuantizeConfigError, match="QAnnotateKind"):
        cfg.get_nbit_by_kind(9)


@pytest.mark.parametrize("kwargs, match", [
    ({"calibrate_mode": "minmax"}, "calibrate_mode.*global_scale.*kl_divergence.*percentile"),
    ({"weight_scale": "pow2"}, "weight_scale.*power2.*max"),
    ({"rounding": "DOWN"}, "rounding.*UPWARD.*TONEAREST"),
    ({"nbit_input": 0}, r"nbit_input=0.*\[2, 32\]"),
    ({"nbit_weight": "8"}, "nbit_weight"),
    ({"dtype_input": "float16"}, "dtype_input.*integer dtype"),
    ({"dtype_weight": "notatype"}, "dtype_weight.*not a data type"),
    ({"global_scale": -1.0}, "global_scale.*positive"),
    ({"skip_conv_layers": "0"}, "skip_conv_layers.*list"),
    ({"skip_conv_layers": [-1]}, "skip_conv_layers"),
    ({"skip_dense_layer": "yes"}, "skip_dense_layer.*True or False"),
    ({"partition_conversions": "on"}, "partition_conversions.*disabled"),
    ({"calibrate_chunk_by": 0}, "calibrate_chunk_by"),
    ({"debug_enabled_ops": "nn.conv2d"}, "debug_enabled_ops.*list"),
    ({"nbit_inputs": 8}, "unknown field.*nbit_inputs.*did you mean 'nbit_input'"),
])
def test_quant_bad_config_is_a_clear_error(kwargs, match):
    with pytest.raises(QuantizeConfigError, match=match) as info:
        qconfig(**kwargs)
    assert isinstance(info.value, KilnError)


def test_quant_public_names():
    q = relay.quantize
    for name in ("qconfig", "current_qconfig", "quantize", "prerequisite_optimize", "annotate", "calibrate",
                 "realize", "partition", "register_annotate_function", "QAnnotateKind"):
        assert hasattr(q, name), name
