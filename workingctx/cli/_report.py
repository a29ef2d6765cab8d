"""
The page ``workingctx report`` writes: one self-contained HTML file (inline CSS
and SVG, no script, nothing fetched) with the tokens of every request (cache
read, cache write, fresh), where the manager cut, the cumulative cost of each
strategy, and the problems of the transcript.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from html import escape
from typing import Any

from workingctx.cli._facts import strategy_rows
from workingctx.cli._output import shown_path

__all__ = ["render"]

_COLORS = {"read": "#2e7d32", "write": "#f9a825", "fresh": "#c62828"}
_LINES = ("#1565c0", "#6a1b9a", "#00838f", "#ef6c00")
_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 980px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; }
table { border-collapse: collapse; } td, th { padding: 2px 10px; border-bottom: 1px solid #ddd; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.legend span { display: inline-block; margin-right: 1.5em; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
svg text { font: 11px system-ui, sans-serif; fill: #444; }
"""


def _chart(
    chart_id: str, label: str, size: tuple[int, int], left: int, plot_h: float, ticks: Sequence[str]
) -> list[str]:
    """
    The start of a chart of *size* (width, height): its ``<svg>`` element and
    a grid line for each of *ticks*, labelled with it, evenly from the bottom
    of the plot (*plot_h* high, 8 below the top) to its top.
    """
    width, height = size
    parts = [
        (
            f'<svg id="{chart_id}" role="img" aria-label="{label}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
        )
    ]
    steps = max(len(ticks) - 1, 1)
    for tick, text in enumerate(ticks):
        y = 8 + plot_h - plot_h * tick / steps
        parts.append(f'<line x1="{left}" x2="{width - 8}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{text}</text>')
    return parts


def _bars(strategy: dict[str, Any], width: int = 920, height: int = 260) -> str:
    rows: Sequence[dict[str, Any]] = strategy["requests"]
    top = max((r["input_tokens"] for r in rows), default=0) or 1
    left, bottom = 56, 24
    plot_w, plot_h = width - left - 8, height - bottom - 8
    step = plot_w / max(len(rows), 1)
    bar = max(step * 0.8, 0.5)
    ticks = [f"{top * tick / 4:,.0f}" for tick in range(5)]
    parts = _chart("tokens-chart", "tokens per request", (width, height), left, plot_h, ticks)
    for i, row in enumerate(rows):
        x = left + i * step
        y = 8 + plot_h
        for key, amount in (
            ("read", row["cache_read_tokens"]),
            ("write", row["cache_write_tokens"]),
            ("fresh", row["fresh_tokens"]),
        ):
            h = plot_h * amount / top
            if h <= 0:
                continue
            y -= h
            parts.append(
                f'<rect class="bar {key}" x="{x:.2f}" y="{y:.2f}" width="{bar:.2f}" height="{h:.2f}" '
                f'fill="{_COLORS[key]}"><title>request {row["request"]}: {amount:,} {key}</title></rect>'
            )
    for cut in strategy["cuts"]:
        x = left + cut * step + bar / 2
        parts.append(
            f'<line class="cut" x1="{x:.2f}" x2="{x:.2f}" y1="8" y2="{8 + plot_h}" stroke="#000" '
            f'stroke-dasharray="3,3"><title>the manager cut before request {cut}</title></line>'
        )
    parts.append(f'<text x="{left}" y="{height - 6}">request 0</text>')
    parts.append(f'<text x="{width - 8}" y="{height - 6}" text-anchor="end">request {max(len(rows) - 1, 0)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _cumulative(
    strategies: Sequence[dict[str, Any]], costs: Sequence[Sequence[Decimal]], width: int = 920, height: int = 260
) -> str:
    """
    The chart of each strategy's running cost, summed from the exact cost of
    each request (*costs*, one list per strategy), not from the rounded
    amounts the rows show: a line ends at the strategy's cost in the table.
    """
    series = []
    for strategy, paid in zip(strategies, costs, strict=True):
        total = Decimal(0)
        points = []
        for amount in paid:
            total += amount
            points.append(total)
        series.append((strategy["name"], points))
    top = max((float(p[-1]) for _, p in series if p), default=0.0) or 1.0
    longest = max((len(p) for _, p in series), default=1)
    left, bottom = 64, 24
    plot_w, plot_h = width - left - 8, height - bottom - 8
    digits = 2 if top >= 10 else 4
    ticks = [f"${top * tick / 4:,.{digits}f}" for tick in range(5)]
    parts = _chart("cost-chart", "cumulative cost per strategy", (width, height), left, plot_h, ticks)
    for number, (name, points) in enumerate(series):
        if not points:
            continue
        coords = " ".join(
            f"{left + plot_w * i / max(longest - 1, 1):.2f},{8 + plot_h - plot_h * float(v) / top:.2f}"
            for i, v in enumerate(points)
        )
        color = _LINES[number % len(_LINES)]
        parts.append(
            f'<polyline class="cost" fill="none" stroke="{color}" stroke-width="2" points="{coords}">'
            f"<title>{escape(name)}: ${points[-1]:.4f}</title></polyline>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _table(columns: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[bool]) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{escape(str(c))}</td>' if n else f"<td>{escape(str(c))}</td>"
            for c, n in zip(row, numeric, strict=True)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _legend(entries: Sequence[tuple[str, str]]) -> str:
    return "".join(
        f'<span><i class="swatch" style="background:{color}"></i>{escape(label)}</span>' for label, color in entries
    )


def _sent_to(requests: Sequence[dict[str, Any]], replayed: dict[str, Any]) -> str:
    """
    Where the requests went: a provider and model, or each of those a log mixes, in order.
    """
    sent = dict.fromkeys(f"{r['provider']} {r['model']}" for r in requests if "model" in r)
    return ", ".join(sent) if len(sent) > 1 else f"{replayed['provider']} {replayed['model']}"


def _what(checked: dict[str, Any], replayed: dict[str, Any]) -> str:
    """
    What the file is: the format of its request, or a log of so many requests and the formats of its lines.
    """
    requests = len(checked["requests"])
    if requests == 1:
        return str(replayed["format"])
    return f"a log of {requests} requests ({', '.join(dict.fromkeys(checked['_formats']))})"


def _problems(checked: dict[str, Any]) -> str:
    """
    The problems ``check`` finds in the file: of each request of a log, under its line's number.
    """
    log = len(checked["requests"]) > 1
    rows = [
        (*((request["line"],) if log else ()), p["where"] or "", p["rule"], p["message"])
        for request in checked["requests"]
        for p in request["problems"]
    ]
    if rows:
        columns = (*(("line",) if log else ()), "message", "rule", "what and how to fix")
        return _table(columns, rows, (*((True,) if log else ()), False, False, False))
    rules = f"{checked['provider']} rules" if checked["provider"] else "the rules of each request's provider"
    return f'<p id="no-problems">No problem under {escape(rules)}.</p>'


def render(replayed: dict[str, Any], inspected: dict[str, Any], checked: dict[str, Any]) -> str:
    """
    The report page for the facts of ``replay``, ``inspect`` and ``check`` on one file.
    """
    strategies = replayed["strategies"]
    main = strategies[-1]
    legend = _legend(
        (("cache read", _COLORS["read"]), ("cache write", _COLORS["write"]), ("fresh input", _COLORS["fresh"]))
    )
    lines_legend = _legend([(s["name"], _LINES[i % len(_LINES)]) for i, s in enumerate(strategies)])
    timed = replayed["gap"] is not None
    expiry = ("expiry misses",) if timed else ()
    summary = _table(
        ("strategy", "requests", "read from cache", "lookback misses", *expiry, "cost $", "uncached $"),
        strategy_rows(replayed),
        (False, True, True, True, *((True,) if timed else ()), True, True),
    )
    pause = f"; {replayed['gap']:.15g} seconds between requests" if timed else ""
    totals = inspected["totals"]
    title = f"workingctx report: {shown_path(replayed['file'])}"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>{_CSS}</style></head><body>
<h1>{escape(title)}</h1>
<p>{escape(_what(checked, replayed))} on {escape(_sent_to(main["requests"], replayed))};
{"the last request's " if len(checked["requests"]) > 1 else ""}prefix {totals["prefix_tokens"]:,} tokens, \
tail {totals["tail_messages"]:,} messages ({totals["tail_tokens"]:,} tokens);
window {escape(str(replayed["window"] or "none"))}{pause}.</p>
<h2>Tokens per request: {escape(main["name"])}</h2>
<p class="legend">{legend}<span>- - - the manager cut</span></p>
{_bars(main)}
<h2>Cumulative cost per strategy</h2>
<p class="legend">{lines_legend}</p>
{_cumulative(strategies, replayed["_costs"])}
{summary}
<h2>Problems</h2>
{_problems(checked)}
</body></html>
"""
