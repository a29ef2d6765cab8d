"""
Output for the command line: tables drawn with ``rich`` on a terminal, plain
aligned text when piped (or without ``rich``), a progress bar for long work,
and the one-line text of a message and of a path.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Iterator, Sequence
from typing import IO, Any

import attrs

from workingctx.messages import Message, ToolCallBlock

__all__ = ["STDIN", "Table", "describe", "emit", "printable", "progress", "shown_path"]

STDIN = "-"
"""The file argument that reads standard input, as ``cat request.json | workingctx check -``."""


@attrs.frozen
class Table:
    """
    A titled table of text cells; numbers are right-aligned.
    """

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def numeric(self, column: int) -> bool:
        """
        Whether the cells of *column* are all numbers (or empty): those are right-aligned.
        """
        return all(isinstance(r[column], int | float) or r[column] is None for r in self.rows)


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ANY_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _escaped(found: re.Match[str]) -> str:
    return f"\\x{ord(found.group()):02x}"


def printable(text: str) -> str:
    """
    *text* as the command prints it: each control character but the tab and
    the line feed (a terminal escape sequence in a transcript could retitle or
    clear the terminal) written as its escape, such as ``\\x1b``, and each lone
    surrogate (which no output encoding takes) too, such as ``\\ud800``.
    """
    text = _CONTROL.sub(_escaped, text)
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _rich_console(stream: IO[str]) -> Any:
    try:
        from rich.console import Console  # noqa: PLC0415  # optional: the [cli] extra
    except ImportError:
        return None
    return Console(file=stream, soft_wrap=False)


def _plain(table: Table) -> str:
    cells = [
        tuple(printable(str(c)) for c in table.columns),
        *(tuple("" if c is None else printable(str(c)) for c in r) for r in table.rows),
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(table.columns))]
    numeric = [table.numeric(i) for i in range(len(widths))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(
            cell.rjust(width) if right else cell.ljust(width)
            for cell, width, right in zip(row, widths, numeric, strict=True)
        ).rstrip()

    out = [table.title, line(cells[0]), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells[1:])
    return "\n".join(out)


def emit(items: Sequence[Table | str], stream: IO[str] | None = None) -> None:
    """
    Print tables and lines of text: with ``rich`` when *stream* is a terminal, else plain.
    """
    stream = stream or sys.stdout
    console = _rich_console(stream) if stream.isatty() else None
    if console is None:
        blocks = [printable(item) if isinstance(item, str) else _plain(item) for item in items]
        print("\n".join(blocks), file=stream)  # the command line's output
        return
    from rich.table import Table as RichTable  # noqa: PLC0415  # optional: the [cli] extra
    from rich.text import Text  # noqa: PLC0415

    # Text objects throughout: what a transcript says ("[INST]", "[link=...]") is never read as markup
    for item in items:
        if isinstance(item, str):
            console.print(Text(printable(item)), highlight=False)
            continue
        drawn = RichTable(title=Text(printable(item.title)), title_justify="left")
        for position, column in enumerate(item.columns):
            drawn.add_column(Text(printable(column)), justify="right" if item.numeric(position) else "left")
        for row in item.rows:
            drawn.add_row(*(Text("" if c is None else printable(str(c))) for c in row))
        console.print(drawn)


@contextlib.contextmanager
def progress(label: str, total: int, *, threshold: int = 2_000) -> Iterator[Any]:
    """
    A progress bar on standard error for work over *total* items, shown only on
    a terminal, with ``rich``, and when *total* reaches *threshold*; yields a
    function to call with the number of items done since the last call.
    """
    console = _rich_console(sys.stderr) if sys.stderr.isatty() and total >= threshold else None
    if console is None:
        yield lambda _done=1: None
        return
    from rich.progress import Progress  # noqa: PLC0415  # optional: the [cli] extra

    with Progress(console=console, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda done=1: bar.advance(task, done)


def shown_path(path: str) -> str:
    """
    *path* as an error line shows it: each control character, the tab and the
    line feed too (a line feed in a file name would split the line), written
    as its escape, such as ``\\x0a``; ``-``, standard input read as a file, as ``<stdin>``.
    """
    if path == STDIN:
        return "<stdin>"
    return _ANY_CONTROL.sub(_escaped, path)


def describe(message: Message, width: int = 60) -> str:
    """
    One line for a message: its text, and the tools it calls, cut to *width* characters.
    """
    calls = [(c.name, c.arguments) for c in message.tool_calls]
    if not isinstance(message.content, str):
        calls += [(b.name, b.args) for b in message.content if isinstance(b, ToolCallBlock)]
    text = message.text()
    if calls:
        shown = ", ".join(f"{name}({json.dumps(args, sort_keys=True, default=str)})" for name, args in calls)
        text = f"{text} → {shown}".strip(" →")
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
