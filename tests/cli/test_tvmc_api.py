"""``kiln.driver.tvmc``: TVM's tvmc Python API (load / compile / run / tune, TVMCModel / Package / Result)."""
from __future__ import annotations

import numpy as np
import pytest

from kiln.driver import tvmc
from kiln.error import KilnError


def test_load_compile_run_relay_text(relay_model, tmp_path):
    model = tvmc.load(str(relay_model["path"]))
    assert isinstance(model, tvmc.TVMCModel) and "w" in model.params
    package = tvmc.compile(model, target="llvm", opt_level=2, package_path=str(tmp_path / "prog.so"),
                           dump_code="relay")
    assert isinstance(package, tvmc.TVMCPackage) and (tmp_path / "prog.so.relay").exists()
    x = np.random.default_rng(4).standard_normal((3, 5)).astype("float32")
    result = tvmc.run(package, device="cpu", inputs={"x": x}, benchmark=True, repeat=2, number=1)
    assert isinstance(result, tvmc.TVMCResult)
    np.testing.assert_allclose(result.get_output("output_0"), np.maximum((x + relay_model["w"]) * 3, 0), rtol=1e-6)
    assert "mean (ms)" in result.format_times() and result.times.median > 0
    result.save(str(tmp_path / "out.npz"))
    with np.load(tmp_path / "out.npz") as data:
        np.testing.assert_array_equal(data["output_0"], result.outputs["output_0"])


def test_model_save_and_reload(relay_model, tmp_path):
    model = tvmc.load(str(relay_model["path"]))
    path = model.save(str(tmp_path / "model.tar"))
    back = tvmc.load(path)
    from kiln.relay.transform import InferType
    assert InferType()(back.mod).astext() == InferType()(model.mod).astext()
    np.testing.assert_array_equal(back.params["w"].numpy(), model.params["w"].numpy())
    package = tvmc.compile(back)      # default package path: a temporary model_package.so
    assert package.package_path.endswith("model_package.so") and '"nodes"' in package.graph
    out = tvmc.run(package, fill_mode="zeros").outputs["output_0"]
    np.testing.assert_allclose(out, np.maximum(relay_model["w"] * 3, 0), rtol=1e-6)


def test_run_applies_the_cli_input_rule(relay_model, tmp_path):
    package = tvmc.compile(tvmc.load(str(relay_model["path"])), package_path=str(tmp_path / "p.so"))
    with pytest.raises(KilnError, match="is float64, the model expects float32"):
        tvmc.run(package, inputs={"x": np.zeros((3, 5))})
    with pytest.raises(KilnError, match="not inputs of the model"):
        tvmc.run(package, inputs={"nope": np.zeros((3, 5), "float32")})


def test_unsupported_options_are_named(relay_model):
    model = tvmc.load(str(relay_model["path"]))
    with pytest.raises(NotImplementedError, match="cross"):
        tvmc.compile(model, cross="aarch64-linux-gnu-gcc")
    with pytest.raises(NotImplementedError, match="enable_autoscheduler"):
        tvmc.tune(model, enable_autoscheduler=True)
    with pytest.raises(NotImplementedError, match="device 'cuda'"):
        tvmc.run(tvmc.TVMCPackage.__new__(tvmc.TVMCPackage), device="cuda")


@pytest.mark.slow
def test_tune_then_compile_with_the_records(tmp_path):
    import kiln as tvm
    from kiln import relay
    x, w = relay.var("x", shape=(2, 16), dtype="float32"), relay.var("w", shape=(8, 16), dtype="float32")
    wv = np.random.default_rng(2).random((8, 16)).astype("float32")
    model = tvmc.TVMCModel(tvm.IRModule.from_expr(relay.Function([x, w], relay.nn.dense(x, w))), {"w": wv})
    log = tvmc.tune(model, target="llvm", trials=2, tuner="random", repeat=1, number=1, parallel=1,
                    tuning_records=str(tmp_path / "t.log"))
    from kiln.autotvm import record
    records = list(record.load_from_file(log))
    assert len(records) == 2 and all(r.error_no == 0 for _, r in records)
    assert {inp.task.name for inp, _ in records} == {"dense_pack.x86"}
    package = tvmc.compile(model, tuning_records=log, package_path=str(tmp_path / "d.so"))
    xv = np.random.default_rng(3).random((2, 16)).astype("float32")
    np.testing.assert_allclose(tvmc.run(package, inputs={"x": xv}).outputs["output_0"], xv @ wv.T, rtol=1e-5)
