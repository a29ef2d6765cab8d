"""
The benchmark harness: timing with medians, and one table for every row.

Each ``benchmarks/bench_*.py`` module defines ``run(table: Table, quick: bool) -> None``
and adds rows to the table; ``python -m benchmarks`` runs them all in one process,
so every ratio compares two measurements taken in the same run.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Row", "Table", "fmt_seconds", "measure"]


def measure(
    fn: Callable[[], Any],
    *,
    repeat: int = 7,
    number: int = 1,
    setup: Callable[[], Any] | None = None,
) -> float:
    """
    Median seconds per call of *fn* over *repeat* rounds of *number* calls.

    *setup* runs before each round, untimed (to rebuild cold state).
    """
    samples: list[float] = []
    gc_was_enabled = gc.isenabled()
    try:
        for _ in range(repeat):
            if setup is not None:
                setup()
            gc.collect()
            gc.disable()
            start = time.perf_counter()
            for _ in range(number):
                fn()
            samples.append((time.perf_counter() - start) / number)
            if gc_was_enabled:
                gc.enable()
    finally:
        if gc_was_enabled:
            gc.enable()
    return statistics.median(samples)


def fmt_seconds(seconds: float) -> str:
    """
    Seconds as a short human figure: ns, µs, ms or s.
    """
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


@dataclass
class Row:
    """
    One line of the table: an operation at a size, its median time, and the
    baseline it is compared with (measured in the same run).
    """

    group: str
    operation: str
    size: str
    seconds: float | None
    baseline: str = ""
    baseline_seconds: float | None = None
    note: str = ""

    @property
    def ratio(self) -> str:
        if self.seconds is None or self.baseline_seconds is None or self.seconds <= 0:
            return ""
        return f"{self.baseline_seconds / self.seconds:,.1f}x"


@dataclass
class Table:
    """
    Every benchmark row of one run, printed as a plain-text table.

    ``ratio`` is baseline time / workingctx time: above 1 means workingctx is faster.
    """

    rows: list[Row] = field(default_factory=list)

    def add(
        self,
        group: str,
        operation: str,
        size: object,
        seconds: float | None,
        *,
        baseline: str = "",
        baseline_seconds: float | None = None,
        note: str = "",
    ) -> Row:
        row = Row(group, operation, str(size), seconds, baseline, baseline_seconds, note)
        self.rows.append(row)
        print(self._line(row), flush=True)
        return row

    @staticmethod
    def _cells(row: Row) -> list[str]:
        return [
            row.group,
            row.operation,
            row.size,
            "" if row.seconds is None else fmt_seconds(row.seconds),
            row.baseline,
            "" if row.baseline_seconds is None else fmt_seconds(row.baseline_seconds),
            row.ratio,
            row.note,
        ]

    def _line(self, row: Row) -> str:
        return " | ".join(self._cells(row))

    def render(self) -> str:
        header = ["group", "operation", "size", "median", "baseline", "baseline median", "ratio", "note"]
        cells = [header] + [self._cells(row) for row in self.rows]
        widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
        lines = [" | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells]
        lines.insert(1, "-+-".join("-" * w for w in widths))
        return "\n".join(lines)
