"""Tasks travel to spawned worker processes by name: the receiving process imports the module that
defines the template (so no cloudpickle is needed for module-level templates)."""
import pickle
import sys

from kiln.autotvm.task import task as task_mod
from kiln.testing.autotvm import get_synthetic_task


def test_template_is_restored_by_importing_its_module(monkeypatch):
    task, _ = get_synthetic_task(8, 8, 2)
    monkeypatch.setitem(sys.modules, "cloudpickle", None)  # as if cloudpickle were not installed
    data = pickle.dumps(task)
    # a fresh worker: neither the template nor its module is known yet
    monkeypatch.delitem(task_mod.TASK_TABLE, "testing/synthetic")
    monkeypatch.delitem(sys.modules, "kiln.testing.autotvm")
    restored = pickle.loads(data)
    assert "testing/synthetic" in task_mod.TASK_TABLE
    assert restored.func is task_mod.TASK_TABLE["testing/synthetic"]
    assert restored.instantiate(restored.config_space.get(0)) == (None, [])  # the template ran
