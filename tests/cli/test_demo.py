"""
Tests for ``python -m workingctx``: the report on the shipped sample and on files.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from workingctx.cli import main
from workingctx.cli._demo import _sample
from workingctx.cli._files import load_context


class TestSample:
    def test_report_on_the_shipped_sample(self, capsys):
        """
        The sample report lists every message of the request, the totals under
        both counters, a 64-digit snapshot digest and a valid fitted request.
        """
        assert 0 == main([])
        out = capsys.readouterr().out
        ctx = load_context(_sample())
        assert f"tokens: {ctx.count_tokens()} approximate" in out
        assert "cl100k" in out
        assert f"snapshot digest: {ctx.freeze().digest()}" in out
        table = [line[:3].strip() for line in out.splitlines()]
        assert len(ctx.prefix.as_messages()) == table.count("P")
        assert [str(i) for i in range(ctx.size())] == [label for label in table if label.isdigit()]
        fitted = out.split("roles: ")[-1].split()
        assert "user" == fitted[0]  # the fitted tail starts on a user turn, never on a tool result

    def test_module_runs_as_a_program(self, tmp_path):
        """
        ``python -m workingctx`` exits 0 and prints the report (run outside the
        checkout, so it is the installed package that runs).
        """
        result = subprocess.run(
            [sys.executable, "-m", "workingctx"], capture_output=True, text=True, check=False, timeout=120, cwd=tmp_path
        )
        assert 0 == result.returncode, result.stderr
        assert "snapshot digest:" in result.stdout


class TestFiles:
    def test_a_transcript_file_of_your_own(self, tmp_path, capsys):
        """
        A file in the documented shape is read and reported on.
        """
        path = tmp_path / "t.json"
        path.write_text(
            json.dumps({"messages": [{"role": "user", "content": "check the cert"}], "scratchpad": {"k": 1}})
        )
        assert 0 == main([str(path)])
        assert "tail messages: 1" in capsys.readouterr().out

    def test_a_damaged_file_names_the_problem(self, tmp_path, capsys):
        """
        A message with an unknown role exits 1 with an error naming where it is.
        """
        path = tmp_path / "bad.json"
        path.write_text(json.dumps({"prefix": {}, "messages": [{"role": "robot", "content": "x"}]}))
        assert 1 == main([str(path)])
        err = capsys.readouterr().err
        assert err.startswith("error: ")
        assert "$.messages[0].role" in err
        assert "robot" in err

    def test_a_missing_file(self, tmp_path, capsys):
        """
        A missing file exits 1 with the same line as every other command.
        """
        assert 1 == main([str(tmp_path / "nope.json")])
        assert f"error: {tmp_path / 'nope.json'}: no such file\n" == capsys.readouterr().err


class TestBadFiles:
    @pytest.mark.parametrize(
        ("content", "expected"),
        [
            (
                b'{"messages": [], "scratchpad": ["a", "b"]}',
                "$.scratchpad: not a workingctx request: the scratchpad is a JSON object of notes, got an array",
            ),
            (b'{"messages": [{"role": "user", "content": "caf\xe9"}]}', ":1: not UTF-8 text: byte 0xe9 at offset 46"),
            (b'{"messages": [\n' + b"[" * 100_000 + b"]" * 100_000 + b"]}", "nested too deeply"),
            (b'{"messages": [], "scratchpad": {"k": 1, "k": 2}}', "the key 'k' appears twice in one object"),
            (
                b'{"messages": [\n  {"role": "user",\n   "content": }]}',
                ":3: not valid JSON: Expecting value (column 15)",
            ),
            (b"[1, 2]", "messages[0] must be a JSON object, got 1"),
            (b'{"messages": [], "scratchpad": {"n": [1, NaN]}}', ":1: NaN is not JSON; write a number or null"),
            (
                b'{"messages": [{"role": "user", "content": "x", "metadata": {"m": -1e999}}]}',
                "the number -1e999 is too large for a float",
            ),
            (
                b'{"messages": [{"role": "user", "content": "hi", "metadata": '
                + b'{"a":' * 5000
                + b"1"
                + b"}" * 5000
                + b"}]}",
                "",
            ),
        ],
    )
    def test_bad_input_prints_one_error_line_and_exits_1(self, tmp_path, content, expected):
        """
        A scratchpad that is a list, a file that is not UTF-8, JSON nested too
        deeply, a repeated key, broken JSON, a file that is not an object and
        a deeply nested payload: ``error: FILE: ...`` naming the line or the
        JSON path, exit status 1, never a traceback.
        """
        path = tmp_path / "bad.json"
        path.write_bytes(content)
        result = subprocess.run(
            [sys.executable, "-m", "workingctx", str(path)],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            cwd=tmp_path,
        )
        assert 1 == result.returncode, result.stdout
        assert "Traceback" not in result.stderr
        assert 1 == len(result.stderr.splitlines()), result.stderr
        assert result.stderr.startswith(f"error: {path}:")
        assert expected in result.stderr

    def test_a_directory_is_not_a_transcript(self, tmp_path, capsys):
        """
        A directory exits 1 with the same line as every other command.
        """
        assert 1 == main(["demo", str(tmp_path)])
        assert f"error: {tmp_path}: not a regular file\n" == capsys.readouterr().err


class TestOneReader:
    @pytest.mark.parametrize("content", [None, b"\xff", b'{"messages": []}\n\xfe'])
    def test_demo_and_inspect_refuse_an_unreadable_file_alike(self, tmp_path, capsys, content):
        """
        A missing file and a file that is not UTF-8 give the same error line to
        ``demo`` and to ``inspect``: one reader reads both commands' files.
        """
        path = tmp_path / "t.json"
        if content is not None:
            path.write_bytes(content)
        assert 1 == main(["demo", str(path)])
        demo_err = capsys.readouterr().err
        with pytest.raises(SystemExit) as exited:
            main(["inspect", str(path)])
        assert 1 == exited.value.code
        assert demo_err == capsys.readouterr().err
        assert demo_err.startswith(f"error: {path}")


class TestOutputText:
    def test_help_is_plain_text(self, capsys):
        """
        ``--help`` prints plain text: no reStructuredText markup from the docstring.
        """
        with pytest.raises(SystemExit) as exited:
            main(["--help"])
        assert 0 == exited.value.code
        out = capsys.readouterr().out
        assert "``" not in out
        assert ":mod:" not in out
        assert "transcript" in out

    def test_cache_line_counts_the_prefix_that_stays_cached(self, capsys):
        """
        When the fitted window breaks at the first tail message, the report says
        the prefix's tokens stay cached, never "the 0 tokens before it".
        """
        assert 0 == main([])
        out = capsys.readouterr().out
        line = next(line for line in out.splitlines() if "cached prefix:" in line)
        assert "the 0 tokens" not in line
        ctx = load_context(_sample())
        prefix_tokens = ctx.counter.count(ctx.prefix.as_messages())
        assert f"cached prefix: breaks at message 0; the prefix ({prefix_tokens} tokens) stays cached" == line.strip()
