"""TVM's ``tvm.runtime.profiling``: the ``Report`` a profiling run returns (``debug_executor.profile()``)
and ``BenchmarkResult`` (what ``time_evaluator`` and ``GraphModule.benchmark`` return).

A report is a list of calls (one dict per kernel call: ``Name``, ``Duration (us)``, ``Percent``, ``Count``,
``Device``, ``Argument Shapes``, ...), per-device totals (``device_metrics``) and the run's configuration. It
prints as a table (optionally aggregated by name, sorted, with column sums), and round-trips through
``json()`` / ``Report.from_json`` in TVM's JSON layout (``{"Duration (us)": {"microseconds": 12.5}}``).
"""
from __future__ import annotations

import csv
import io
import json as _json

from .benchmark import BenchmarkResult  # noqa: F401  (defined with time_evaluator)

__all__ = ["Report", "Duration", "Percent", "Count", "Ratio", "BenchmarkResult"]


class Duration:
    """A time in microseconds (TVM's ``DurationNode``)."""

    json_key = "microseconds"

    def __init__(self, microseconds: float):
        self.microseconds = float(microseconds)

    def value(self) -> float:
        return self.microseconds

    def __repr__(self) -> str:
        return f"Duration({self.microseconds:.3f} us)"


class Percent:
    """A share in percent (TVM's ``PercentNode``)."""

    json_key = "percent"

    def __init__(self, percent: float):
        self.percent = float(percent)

    def value(self) -> float:
        return self.percent

    def __repr__(self) -> str:
        return f"Percent({self.percent:.2f})"


class Count:
    """A number of calls (TVM's ``CountNode``)."""

    json_key = "count"

    def __init__(self, count: int):
        self.count = int(count)

    def value(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"Count({self.count})"


class Ratio:
    """A ratio (TVM's ``RatioNode``)."""

    json_key = "ratio"

    def __init__(self, ratio: float):
        self.ratio = float(ratio)

    def value(self) -> float:
        return self.ratio

    def __repr__(self) -> str:
        return f"Ratio({self.ratio:.4g})"


_BY_JSON_KEY = {cls.json_key: cls for cls in (Duration, Percent, Count, Ratio)}
# columns the table shows first, in this order; the rest follow as they appear
_LEADING = ("Name", "Duration (us)", "Percent", "Count", "Device", "Argument Shapes")
_SUMMED = (Duration, Percent, Count)


def _plain(v):
    """The Python value of a metric (number or string)."""
    return v.value() if hasattr(v, "value") and callable(v.value) else v


def _to_json(v):
    if hasattr(v, "json_key"):
        return {v.json_key: _plain(v)}
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return {"string": str(v)}
    return {"count": v} if isinstance(v, int) else {"ratio": v}


def _from_json(d):
    if not isinstance(d, dict) or len(d) != 1:
        raise ValueError(f"a report metric is one {{kind: value}} pair, got {d!r}")
    (kind, value), = d.items()
    if kind == "string":
        return str(value)
    if kind not in _BY_JSON_KEY:
        raise ValueError(f"unknown report metric kind {kind!r}")
    return _BY_JSON_KEY[kind](value)


def _fmt(v) -> str:
    if isinstance(v, Duration):
        return f"{v.microseconds:,.2f}"
    if isinstance(v, Percent):
        return f"{v.percent:.2f}"
    if isinstance(v, Count):
        return str(v.count)
    if isinstance(v, Ratio):
        return f"{v.ratio:.4g}"
    return "" if v is None else str(v)


class Report:
    """Calls, per-device totals and configuration of one profiling run."""

    def __init__(self, calls, device_metrics, configuration=None):
        self.calls = [dict(c) for c in calls]
        self.device_metrics = {k: dict(v) for k, v in (device_metrics or {}).items()}
        self.configuration = dict(configuration or {})

    # -- views --------------------------------------------------------------------------------------
    def _aggregated(self) -> list:
        """Calls with the same Name on the same Device summed into one row (Argument Shapes kept when equal)."""
        groups: dict = {}
        for call in self.calls:
            key = (str(call.get("Name", "")), str(call.get("Device", "")))
            groups.setdefault(key, []).append(call)
        rows = []
        for members in groups.values():
            row = {}
            for col in members[0]:
                vals = [m.get(col) for m in members]
                if isinstance(vals[0], _SUMMED) and all(type(v) is type(vals[0]) for v in vals):
                    row[col] = type(vals[0])(sum(_plain(v) for v in vals))
                elif all(str(v) == str(vals[0]) for v in vals):
                    row[col] = vals[0]
                else:
                    row[col] = "(various)"
            if "Count" not in row or not isinstance(row["Count"], Count):
                row["Count"] = Count(len(members))
            rows.append(row)
        return rows

    def table(self, sort: bool = True, aggregate: bool = True, col_sums: bool = True, max_width: int = 120) -> str:
        """The calls as a text table at most ``max_width`` columns wide: slowest first when ``sort``, one row
        per Name when ``aggregate``, a ``Sum`` row when ``col_sums``, then each device's total and the
        configuration."""
        rows = self._aggregated() if aggregate else [dict(c) for c in self.calls]
        if sort:
            rows.sort(key=lambda r: -_plain(r.get("Duration (us)", Duration(0))))
        cols = [c for c in _LEADING if any(c in r for r in rows)]
        for r in rows:
            cols += [c for c in r if c not in cols]
        body = [[_fmt(r.get(c)) for c in cols] for r in rows]
        if col_sums and rows:
            sums = []
            for c in cols:
                vals = [r.get(c) for r in rows]
                if c == "Name":
                    sums.append("Sum")
                elif vals and all(isinstance(v, _SUMMED) and type(v) is type(vals[0]) for v in vals):
                    sums.append(_fmt(type(vals[0])(sum(_plain(v) for v in vals))))
                else:
                    sums.append("")
            body.append(None)   # separator
            body.append(sums)
        for dev, metrics in self.device_metrics.items():
            line = ["Total" if c == "Name" else _fmt(metrics.get(c)) if c in metrics else (dev if c == "Device" else "")
                    for c in cols]
            body.append(line)
        widths = [max([len(c)] + [len(b[k]) for b in body if b is not None]) for k, c in enumerate(cols)]
        widths = _fit(cols, widths, max_width)
        numeric = {k for k, c in enumerate(cols)
                   if any(isinstance(r.get(c), (Duration, Percent, Count, Ratio)) for r in rows)}

        def line(cells):
            out = []
            for k, (cell, w) in enumerate(zip(cells, widths)):
                cell = cell if len(cell) <= w else cell[:max(w - 3, 0)] + "..."
                out.append(cell.rjust(w) if k in numeric else cell.ljust(w))
            return "  ".join(out).rstrip()

        lines = [line(cols)]
        for b in body:
            lines.append("-" * min(max_width, sum(widths) + 2 * (len(widths) - 1)) if b is None else line(b))
        if self.configuration:
            lines += ["", "Configuration", "-------------"]
            lines += [f"{k}: {_fmt(v)}" for k, v in self.configuration.items()]
        return "\n".join(lines)

    def csv(self) -> str:
        """The calls as CSV (one row per call, numbers without units)."""
        cols: list = []
        for c in self.calls:
            cols += [k for k in c if k not in cols]
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(cols)
        for c in self.calls:
            writer.writerow([_plain(c.get(k, "")) for k in cols])
        return buf.getvalue()

    def json(self) -> str:
        """TVM's JSON layout: ``{"calls": [...], "device_metrics": {...}, "configuration": {...}}``."""
        return _json.dumps({
            "calls": [{k: _to_json(v) for k, v in c.items()} for c in self.calls],
            "device_metrics": {d: {k: _to_json(v) for k, v in m.items()} for d, m in self.device_metrics.items()},
            "configuration": {k: _to_json(v) for k, v in self.configuration.items()},
        })

    @classmethod
    def from_json(cls, s: str) -> "Report":
        """The report ``json()`` wrote."""
        data = _json.loads(s)
        return cls([{k: _from_json(v) for k, v in c.items()} for c in data.get("calls", [])],
                   {d: {k: _from_json(v) for k, v in m.items()} for d, m in data.get("device_metrics", {}).items()},
                   {k: _from_json(v) for k, v in data.get("configuration", {}).items()})

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"Report({len(self.calls)} calls, devices {list(self.device_metrics)})"


def _fit(cols: list, widths: list, max_width: int) -> list:
    """Shrink the widest text columns (names, shapes) until the row fits ``max_width``."""
    widths = list(widths)
    total = lambda: sum(widths) + 2 * (len(widths) - 1)  # noqa: E731
    shrinkable = [k for k, c in enumerate(cols) if c not in ("Duration (us)", "Percent", "Count", "Device")]
    while total() > max_width and shrinkable:
        k = max(shrinkable, key=lambda i: widths[i])
        floor = max(len(cols[k]), 12)
        if widths[k] <= floor:
            shrinkable.remove(k)
            continue
        widths[k] = max(floor, widths[k] - (total() - max_width))
    return widths
