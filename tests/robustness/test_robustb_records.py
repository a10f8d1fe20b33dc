"""Defect 6 of issue 15: a tuning log is data; reading it must never run code from the file."""
import base64
import logging
import pickle
import time

import pytest

from kiln import autotvm
from kiln.autotvm import record
from kiln.autotvm.measure import MeasureInput, MeasureResult
from kiln.testing.autotvm import get_synthetic_task


class _Boom:
    """Unpickling this calls ``_mark`` with the path: proof that a reader executed the file's code."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (_mark, (self.path,))


def _mark(path):
    with open(path, "w") as f:
        f.write("executed")
    return ("x", (), {})


def _evil_line(marker) -> str:
    b = base64.b64encode(pickle.dumps(_Boom(str(marker)))).decode()
    return "\t".join(["llvm", b, b, b, "0.2", "0.13.0"]) + "\n"


@pytest.fixture
def good_line():
    task = get_synthetic_task(16, 8, 3)[0]
    inp = MeasureInput(task.target, task, task.config_space.get(3))
    return record.encode(inp, MeasureResult((0.001,), 0, 0.1, time.time())) + "\n"


def test_load_from_file_never_unpickles(tmp_path, good_line, caplog):
    marker = tmp_path / "marker"
    log = tmp_path / "tune.log"
    log.write_text(good_line + _evil_line(marker) + "not a record\n")
    with caplog.at_level(logging.WARNING, logger="autotvm"):
        got = list(record.load_from_file(log))
    assert not marker.exists(), "reading a tuning log executed code from it"
    assert len(got) == 1
    # the warning names the skipped lines
    assert any("line 2, 3" in r.getMessage() for r in caplog.records)


def test_apply_history_best_never_unpickles(tmp_path, good_line):
    marker = tmp_path / "marker"
    log = tmp_path / "tune.log"
    log.write_text(_evil_line(marker) + good_line)
    with autotvm.apply_history_best(str(log)) as ctx:
        assert len(ctx.best_by_targetkey) >= 1
    assert not marker.exists()


def test_decode_pickle_requires_explicit_opt_in(tmp_path):
    marker = tmp_path / "marker"
    with pytest.raises(record.RecordError, match="executes code"):
        record.decode(_evil_line(marker), "pickle")
    assert not marker.exists()
    assert list(record.load_from_buffer([_evil_line(marker)])) == []
    assert not marker.exists()


def test_pickle_opt_in_still_reads_own_logs(tmp_path, good_line):
    task = get_synthetic_task(16, 8, 3)[0]
    inp = MeasureInput(task.target, task, task.config_space.get(5))
    line = record.encode(inp, MeasureResult((0.002,), 0, 0.1, time.time()), "pickle")
    log = tmp_path / "p.log"
    log.write_text(line + "\n" + good_line)
    assert len(list(record.load_from_file(log))) == 1  # JSON only by default
    both = list(record.load_from_file(log, allow_unsafe_pickle=True))
    assert len(both) == 2 and both[0][0].config.index == 5
