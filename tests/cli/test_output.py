"""
Tests for what the command prints: tables drawn by rich on a terminal and as
plain text when piped, the progress bar, one-line message summaries, and file
names escaped in table headers.
"""

from __future__ import annotations

import io
import shutil
import sys

import pytest

from tests.cli.commands import run, sample
from workingctx import Message, WorkingContext
from workingctx.cli._output import Table, describe, emit, progress


def test_message_summaries_are_one_line():
    """
    ``describe`` keeps a message to one line of at most the width asked for.
    """
    ctx = WorkingContext().append(Message("user", "a\nb " * 100))
    line = describe(ctx.messages[0], 40)
    assert "\n" not in line
    assert len(line) <= 40


class _Terminal(io.StringIO):
    """
    A text stream that says it is a terminal, as a user's console does.
    """

    def isatty(self) -> bool:
        return True


class TestTerminalOutput:
    def test_tables_are_drawn_with_rich_on_a_terminal(self):
        """
        On a terminal a table is drawn by rich (box lines, every cell shown);
        piped, the same table is plain aligned text with no box characters.
        """
        table = Table("tokens", ("#", "role", "tokens"), ((0, "user", 24), (1, "assistant", 52)))
        drawn = _Terminal()
        emit([table, "total 76"], drawn)
        plain = io.StringIO()
        emit([table, "total 76"], plain)
        assert "━" in drawn.getvalue() or "─" in drawn.getvalue()
        assert all(cell in drawn.getvalue() for cell in ("assistant", "52", "total 76"))
        assert "─" not in plain.getvalue()
        assert ["0", "user", "24"] == plain.getvalue().splitlines()[3].split()

    def test_what_a_transcript_says_is_never_markup_on_a_terminal(self):
        """
        Brackets in a message (``[INST]``, ``[/INST]``, ``[link=...]``) are
        shown as they are on a terminal: rich reads no markup from them, and
        writes no hyperlink escape.
        """
        said = "[INST] hi [/INST] [link=https://example.com]x[/link] [bold]y"
        table = Table("[b]title[/b]", ("[i]#", "text"), ((0, said),))
        drawn = _Terminal()
        emit([table, said], drawn)
        out = drawn.getvalue()
        assert "[/INST]" in out
        assert "[link=https://example.com]" in out
        assert "[b]title[/b]" in out
        assert "\x1b]8;" not in out

    def test_progress_bar_only_on_a_terminal_for_long_work(self, monkeypatch):
        """
        The progress bar is drawn on a terminal's standard error for long work,
        and is a no-op when piped or for short work; the work is done either way.
        """
        terminal = _Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        done = 0
        with progress("counting", 5_000) as advance:
            for _ in range(5_000):
                advance()
                done += 1
        assert 5_000 == done
        assert "counting" in terminal.getvalue()
        quiet = _Terminal()
        monkeypatch.setattr(sys, "stderr", quiet)
        with progress("counting", 10) as advance:
            advance()
        assert "" == quiet.getvalue()


class TestEscapedHeaders:
    @pytest.mark.parametrize(
        "argv",
        [
            ["inspect", "{f}"],
            ["trim", "{f}", "--budget", "1700"],
            ["diff", "{f}", "{f}"],
            ["replay", "{f}", "--model", "claude-sonnet-4-6"],
        ],
    )
    def test_a_file_name_with_a_line_feed_is_escaped_in_headers(self, capsys, tmp_path, argv):
        """
        A file name holding a line feed and an escape character is shown in
        every header as the error lines show it (``\\x0a``, ``\\x1b``), never
        splitting the header or reaching the terminal raw.
        """
        path = tmp_path / "a\nb\x1bc.json"
        shutil.copy(sample("anthropic"), path)
        status, out, err = run(capsys, *(str(path) if a == "{f}" else a for a in argv))
        assert 0 == status, err
        assert "\x1b" not in out
        assert "a\\x0ab\\x1bc.json" in out.splitlines()[0]
