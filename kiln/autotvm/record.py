"""Tuning logs (TVM's ``autotvm.record``), in TVM's format so logs move between kiln and TVM.

One record per line. The "json" protocol writes (log version 0.2)::

    {"input": [target, task_name, args, kwargs],
     "config": {"index": i, "code_hash": null, "entity": [[knob, type, value], ...]},
     "result": [costs, error_no, all_cost, timestamp], "version": 0.2, "tvm_version": "0.13.0"}

The "pickle" protocol writes tab-separated base64 pickles. Reading a pickle runs code chosen by whoever
wrote the file, so a log is read as JSON only (TVM's format): a pickle line is read back only when the
caller passes ``allow_unsafe_pickle=True`` (for logs it wrote itself). A corrupt, foreign or (without the
opt-in) pickle line is skipped, with one warning per file naming the lines skipped.
"""
from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import pickle
from collections import OrderedDict
from pathlib import Path

import numpy as np

from ..error import KilnError
from .measure.measure import MeasureInput, MeasureResult
from .task import ApplyHistoryBest, ConfigEntity
from .task.task import Task
from ..target.target import Target

AUTOTVM_LOG_VERSION = 0.2
# The TVM release whose log format this follows (written as "tvm_version").
TVM_VERSION = "0.13.0"
_old_version_warning = True

logger = logging.getLogger("autotvm")


class RecordError(KilnError, ValueError):
    """A log line that is not a valid AutoTVM record."""


def measure_str_key(inp: MeasureInput, include_config: bool = True) -> str:
    """A string key identifying (target, task, args[, config]) of a record."""
    config_str = str(inp.config) if include_config else ""
    return "".join([str(inp.target), inp.task.name, str(inp.task.args), str(inp.task.kwargs), config_str])


def _jsonable(x):
    if isinstance(x, (list, tuple)):
        return [_jsonable(a) for a in x]
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if x is None or isinstance(x, (str, int, float, bool)):
        return x
    return str(x)


def encode(inp: MeasureInput, result: MeasureResult, protocol: str = "json") -> str:
    """One log line for a measurement."""
    if protocol == "json":
        costs = tuple(float(c) for c in result.costs) if result.error_no == 0 else (1e9,)
        row = {
            "input": (str(inp.target), inp.task.name, _jsonable(inp.task.args), _jsonable(inp.task.kwargs)),
            "config": _jsonable(inp.config.to_json_dict()),
            "result": (costs, int(result.error_no), float(result.all_cost), float(result.timestamp)),
            "version": AUTOTVM_LOG_VERSION,
            "tvm_version": TVM_VERSION,
        }
        return json.dumps(row)
    if protocol == "pickle":
        res = tuple(result) if result.error_no == 0 else ((1e9,),) + tuple(result)[1:]

        def b64(obj):
            return base64.b64encode(pickle.dumps(obj)).decode()

        return "\t".join([str(inp.target), b64([inp.task.name, inp.task.args, inp.task.kwargs]),
                          b64(inp.config), b64(tuple(res)), str(AUTOTVM_LOG_VERSION), TVM_VERSION])
    raise RecordError(f"invalid log protocol {protocol!r}: expected 'json' or 'pickle'")


def _to_python(x):
    """JSON lists back to the tuples task args are made of."""
    if isinstance(x, list):
        return tuple(_to_python(a) for a in x)
    return x


def _make_target(text: str):
    text = str(text)
    if "-target" in text:
        text = text.replace("-target", "-mtriple")
    return Target(text)


def decode(row: str, protocol: str = "json", allow_unsafe_pickle: bool = False):
    """Parse one log line into (MeasureInput, MeasureResult); None for an unsupported old log version.
    Raises :class:`RecordError` for a line that is not a record.

    ``protocol="pickle"`` UNPICKLES the line, which executes whatever code its writer put there; it is
    refused unless ``allow_unsafe_pickle=True`` (use it only for logs you wrote yourself)."""
    global _old_version_warning
    if protocol == "json":
        try:
            obj = json.loads(row)
        except json.JSONDecodeError as err:
            raise RecordError(f"not JSON: {err}") from None
        if not isinstance(obj, dict):
            raise RecordError("not a JSON object")
        if obj.get("v") == 0.1:
            if _old_version_warning:
                logger.warning("AutoTVM log version 0.1 is no longer supported.")
                _old_version_warning = False
            return None
        try:
            tgt, task_name, task_args, task_kwargs = obj["input"]
            config = ConfigEntity.from_json_dict(obj["config"])
            raw = obj["result"]
            result = MeasureResult(tuple(raw[0]), int(raw[1]), float(raw[2]), float(raw[3]))
            tsk = Task(str(task_name), _to_python(task_args))
            tsk.kwargs = dict(task_kwargs or {})
            inp = MeasureInput(_make_target(tgt), tsk, config)
        except RecordError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, KilnError) as err:
            raise RecordError(f"not an AutoTVM record ({type(err).__name__}: {err})") from None
        config.cost = float(np.mean(result.costs))
        return inp, result
    if protocol == "pickle":
        if not allow_unsafe_pickle:
            raise RecordError("a pickle-protocol record executes code when read; it is read only with "
                              "allow_unsafe_pickle=True (for logs you wrote yourself); kiln and TVM write JSON")
        items = row.rstrip("\n").split("\t")
        if len(items) == 4:
            if _old_version_warning:
                logger.warning("AutoTVM log version 0.1 is no longer supported.")
                _old_version_warning = False
            return None
        if len(items) < 4:
            raise RecordError("not a pickle-protocol record (too few tab-separated fields)")
        try:
            task_tuple = pickle.loads(base64.b64decode(items[1].encode()))
            config = pickle.loads(base64.b64decode(items[2].encode()))
            result = MeasureResult(*pickle.loads(base64.b64decode(items[3].encode())))
            tsk = Task(task_tuple[0], task_tuple[1])
            if len(task_tuple) > 2:
                tsk.kwargs = dict(task_tuple[2] or {})
            inp = MeasureInput(_make_target(items[0]), tsk, config)
        except Exception as err:  # any unpickling failure means a corrupt line
            raise RecordError(f"not a pickle-protocol record ({type(err).__name__}: {err})") from None
        config.cost = float(np.mean(result.costs))
        return inp, result
    raise RecordError(f"invalid log protocol {protocol!r}: expected 'json' or 'pickle'")


def _guess_protocol(line: str, allow_unsafe_pickle: bool) -> str:
    """JSON unless the caller opted in to pickle and the line is not a JSON object."""
    if allow_unsafe_pickle and not line.lstrip().startswith("{"):
        return "pickle"
    return "json"


def _decode_lines(lines, source: str, allow_unsafe_pickle: bool):
    """Decode numbered lines, skipping blank/comment lines; warn once naming the lines skipped."""
    bad: list = []
    first_err = None
    try:
        for lineno, row in lines:
            if not row.strip() or row.startswith("#"):
                continue
            try:
                ret = decode(row, _guess_protocol(row, allow_unsafe_pickle), allow_unsafe_pickle)
            except RecordError as err:
                bad.append(lineno)
                first_err = first_err or str(err)
                continue
            if ret is not None:
                yield ret
    finally:
        if bad:
            shown = ", ".join(map(str, bad[:10])) + (", ..." if len(bad) > 10 else "")
            logger.warning("%s: skipped %d corrupt or foreign line(s) (line %s); first problem: %s",
                           source, len(bad), shown, first_err)


def load_from_file(filename, allow_unsafe_pickle: bool = False):
    """Yield (MeasureInput, MeasureResult) for every record in a log file. Lines are read as JSON;
    blank lines and ``#`` comments are ignored; corrupt or foreign lines are skipped with one warning
    naming them. ``allow_unsafe_pickle=True`` also reads pickle lines, which EXECUTES CODE from the file."""
    filename = os.fspath(filename)
    with open(filename, encoding="utf-8", errors="replace") as f:
        yield from _decode_lines(enumerate(f, start=1), filename, allow_unsafe_pickle)


def load_from_buffer(lines, allow_unsafe_pickle: bool = False):
    """Like :func:`load_from_file`, for an iterable of lines."""
    yield from _decode_lines(enumerate(lines, start=1), "<buffer>", allow_unsafe_pickle)


def save_to_file(records, filename, protocol: str = "json", mode: str = "a") -> None:
    """Write (MeasureInput, MeasureResult) pairs to a log file (appending by default)."""
    with open(os.fspath(filename), mode, encoding="utf-8") as f:
        for inp, res in records:
            f.write(encode(inp, res, protocol) + "\n")


def split_workload(in_file, clean: bool = True) -> None:
    """Split a log into one file per workload (``<in_file>.<i>.wkl``); with ``clean``, keep only the
    error-free records, ordered by cost."""
    records = list(load_from_file(in_file))
    by_wkl: OrderedDict = OrderedDict()
    for inp, res in records:
        by_wkl.setdefault(measure_str_key(inp, include_config=False), []).append((inp, res))
    logger.info("Load %d entries, %d workloads", len(records), len(by_wkl))
    for i, (_, group) in enumerate(by_wkl.items()):
        if clean:
            group = sorted((r for r in group if r[1].error_no == 0), key=lambda r: np.mean(r[1].costs))
        save_to_file(group, f"{os.fspath(in_file)}.{i:03d}.wkl", mode="w")


def pick_best(in_file, out_file) -> None:
    """Write to ``out_file`` only the best record of each workload (per target key and model)."""
    best_context = ApplyHistoryBest(load_from_file(in_file))
    best_set = set()
    for v in best_context.best_by_model.values():
        best_set.add(measure_str_key(v[0]))
    for v in best_context.best_by_targetkey.values():
        best_set.add(measure_str_key(v[0]))
    logger.info("Extract %d best records from %s", len(best_set), in_file)
    fout = open(os.fspath(out_file), "w", encoding="utf-8") if isinstance(out_file, (str, Path)) else out_file
    try:
        for inp, res in load_from_file(in_file):
            key = measure_str_key(inp)
            if key in best_set:
                fout.write(encode(inp, res) + "\n")
                best_set.remove(key)
    finally:
        if fout is not out_file:
            fout.close()


def main(argv=None) -> None:
    """``python -m kiln.autotvm.record --mode read|pick|split --i log [--o out]``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["read", "pick", "split"], default="read")
    parser.add_argument("--i", type=str, required=True, help="input file")
    parser.add_argument("--o", type=str, default=None, help="output file")
    args = parser.parse_args(argv)
    if args.mode == "pick":
        pick_best(args.i, args.o or args.i + ".best.log")
    elif args.mode == "read":
        for inp, res in load_from_file(args.i):
            print(inp.target, inp.task.name, inp.task.args, inp.config, res)
    else:
        split_workload(args.i)


if __name__ == "__main__":  # pragma: no cover
    main()
