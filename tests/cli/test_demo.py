"""
Tests for ``workingctx demo``, what ``python -m workingctx`` runs with no
command: the report on the shipped sample and on files of every format.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cli.commands import run, sample
from workingctx.cli import main
from workingctx.cli._demo import _sample
from workingctx.cli._files import FORMATS, load_context, read_file


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


class TestDemoOfAnyFormat:
    @pytest.mark.parametrize("fmt", FORMATS)
    def test_demo_reads_every_format(self, capsys, fmt):
        """
        ``demo FILE`` reads the samples of every format, and reports the same
        conversation (the same token total) for each.
        """
        status, out, err = run(capsys, "demo", sample(fmt))
        assert 0 == status, err
        assert f"tail messages: {read_file(sample(fmt)).last.size()} " in out

    def test_demo_reads_provider_shapes(self, capsys, tmp_path):
        """
        An Anthropic request with ``tool_use`` blocks and an OpenAI request
        with ``content: null`` beside its tool calls (both valid bodies, as the
        SDK types say) are read by ``demo``.
        """
        anthropic_body = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 256,
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}],
                },
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18 C"}]},
            ],
        }
        openai_body = {
            "model": "gpt-4.1",
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_0",
                            "type": "function",
                            "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_0", "content": "18 C"},
            ],
        }
        from anthropic.types import MessageCreateParams  # noqa: PLC0415
        from openai.types.chat import CompletionCreateParams  # noqa: PLC0415
        from pydantic import TypeAdapter  # noqa: PLC0415

        TypeAdapter(MessageCreateParams).validate_python(anthropic_body)
        TypeAdapter(CompletionCreateParams).validate_python(openai_body)
        for name, body in (("a.json", anthropic_body), ("o.json", openai_body)):
            path = tmp_path / name
            path.write_text(json.dumps(body), encoding="utf-8")
            status, out, err = run(capsys, "demo", str(path))
            assert 0 == status, err
            assert 'weather({"city": "Paris"})' in out
            assert "tail messages: 3" in out
