"""
Tests for the ``workingctx`` command: every subcommand on the shipped samples
of every format, ``--json`` against its schema, the report page, and bad input
and bad usage reported in one line with the right exit status.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import importlib
import io
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from anthropic.types import MessageParam
from google.genai import types
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from langchain_core.load import dumpd
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, messages_to_dict
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputParam
from pydantic import TypeAdapter

import workingctx
import workingctx.cli as cli_module
from tests.strategies import block_transcripts, json_values, messages, prefixes, scratchpads, transcripts
from tests.wire_strategies import anthropic_bodies, chat_messages, google_bodies, responses_bodies
from workingctx import Message, WorkingContext
from workingctx.adapters import langchain
from workingctx.cli import main, model_provider
from workingctx.cli._facts import _kept, trim_facts
from workingctx.cli._files import FORMATS, PROVIDERS, detect, places, position, read_file, write_context
from workingctx.cli._output import Table, describe, emit, progress
from workingctx.exceptions import ProviderError
from workingctx.serialization import unstructure

SAMPLES = resources.files("workingctx").joinpath("data/samples")
SCHEMAS = json.loads(resources.files("workingctx").joinpath("data/cli_schema.json").read_text(encoding="utf-8"))
MODELS = {"openai": "gpt-4.1", "anthropic": "claude-sonnet-4-6", "gemini": "gemini-2.5-flash"}


def sample(fmt: str, suffix: str = "json") -> str:
    """
    The path of the shipped sample in format *fmt*.
    """
    return str(SAMPLES.joinpath(f"incident.{fmt}.{suffix}"))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """
    Run the command in-process; return its exit status, standard output and standard error.
    """
    try:
        status = main(list(argv))
    except SystemExit as exc:
        status = int(exc.code or 0)
    out = capsys.readouterr()
    return status, out.out, out.err


def run_json(capsys, command: str, *argv: str) -> dict:
    """
    Run a command with ``--json``, check its output against the command's schema and return it.
    """
    status, out, err = run(capsys, command, *argv, "--json")
    assert status in {0, 1}, err
    facts = json.loads(out)
    jsonschema.validate(facts, SCHEMAS[command])
    return facts


class TestDetect:
    @pytest.mark.parametrize("fmt", FORMATS)
    def test_each_sample_is_detected_as_its_format(self, fmt):
        """
        Every shipped sample is detected as the format its name says, and reads
        to the same conversation as the workingctx sample.
        """
        doc = read_file(sample(fmt))
        assert fmt == doc.format
        reference = read_file(sample("workingctx")).last
        calls = [i for m in reference.messages for i in m.call_ids]
        assert calls == [i for m in doc.last.messages for i in m.call_ids]
        assert reference.messages[-1].text() == doc.last.messages[-1].text()

    def test_unknown_shapes_are_none(self):
        """
        Values that are no request of any format are not detected as one.
        """
        assert detect(42) is None
        assert detect("text") is None
        assert detect({"model": "x"}) is None

    @pytest.mark.parametrize(
        ("body", "fmt"),
        [
            ({"model": "gpt-4.1", "messages": []}, "openai_chat"),
            ({"model": "openai/gpt-4.1", "max_tokens": 100, "messages": []}, "openai_chat"),
            ({"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": []}, "anthropic"),
            ({"model": "claude-sonnet-4-5", "system": "Be brief.", "messages": []}, "anthropic"),
            ({"model": "gpt-4.1", "input": []}, "openai_responses"),
            ({"model": "gemini-2.5-flash", "contents": []}, "google"),
            ({"messages": []}, "workingctx"),
            ({"model": "gpt-4.1", "prefix": {}, "messages": []}, "workingctx"),
            ({"model": "gpt-4.1", "messages": [], "scratchpad": {}}, "workingctx"),
        ],
    )
    def test_a_request_with_no_message_is_the_providers_it_names(self, body, fmt):
        """
        A body naming its model is a provider's request by its fields even
        with no message (a Chat Completions request with no messages was read
        as workingctx JSON); workingctx JSON, which names no model, is still
        told by its prefix or notes, or by messages alone.
        """
        assert fmt == detect(body)

    @given(
        model=st.sampled_from(["gpt-4.1", "o3", "openai/gpt-4.1-mini", "my-fine-tune"]),
        messages=chat_messages() | st.just([]),
    )
    def test_a_chat_request_naming_its_model_is_chat(self, model, messages):
        """
        Law: a Chat Completions request naming a model not Claude's is
        detected as one, whatever its messages, none included.
        """
        assert "openai_chat" == detect({"model": model, "messages": messages})

    @given(prefix=prefixes, messages=st.lists(messages(), max_size=4), notes=scratchpads, model=st.booleans())
    def test_workingctx_json_is_still_workingctx(self, prefix, messages, notes, model):
        """
        Law: the workingctx JSON the command line writes is detected as
        workingctx JSON, with a model named beside it or not.
        """
        document = {"prefix": unstructure(prefix), "messages": [unstructure(m) for m in messages], "scratchpad": notes}
        assert "workingctx" == detect({"model": "gpt-4.1", **document} if model else document)


@pytest.mark.parametrize("fmt", FORMATS)
class TestEachFormat:
    def test_inspect(self, capsys, fmt):
        """
        ``inspect`` lists every message with its tokens, the totals add up, and
        with a model it prices the request and plans its breakpoints.
        """
        provider = "anthropic" if fmt == "workingctx" else None
        extra = ["--provider", provider] if provider else []
        owner = {"openai_chat": "openai", "openai_responses": "openai", "google": "gemini"}.get(fmt, "anthropic")
        facts = run_json(capsys, "inspect", sample(fmt), "--model", MODELS[owner], *extra)
        ctx = read_file(sample(fmt)).last
        assert len(ctx.prefix.as_messages()) + ctx.size() == len(facts["messages"])
        assert facts["totals"]["tokens"] == sum(m["tokens"] for m in facts["messages"])
        assert ctx.freeze().digest() == facts["digest"]
        assert [] == facts["problems"]
        assert float(facts["cost"]["input_uncached"]) > 0
        status, out, _ = run(capsys, "inspect", sample(fmt), *extra)
        assert 0 == status
        assert f"total {facts['totals']['tokens']}" in out

    def test_check(self, capsys, fmt):
        """
        ``check`` finds the samples valid, under their own provider's rules and under every provider's.
        """
        facts = run_json(capsys, "check", sample(fmt))
        assert facts["valid"]
        for provider in ("openai", "anthropic", "gemini"):
            status, out, _ = run(capsys, "check", sample(fmt), "--provider", provider)
            assert 0 == status, out

    def test_trim(self, capsys, fmt, tmp_path):
        """
        ``trim`` keeps a window that fits, starts on a user message and writes
        the trimmed request back in the file's own format.
        """
        totals = run_json(capsys, "inspect", sample(fmt))["totals"]
        budget = totals["prefix_tokens"] + totals["tail_tokens"] * 3 // 4
        low = totals["prefix_tokens"] + totals["tail_tokens"] * 2 // 3
        out_file = tmp_path / f"trimmed.{fmt}.json"
        facts = run_json(capsys, "trim", sample(fmt), "--budget", str(budget), "--low", str(low), "-o", str(out_file))
        assert facts["fits"]
        assert facts["tokens_after"] <= budget < facts["tokens_before"]
        assert sorted(facts["kept"] + facts["dropped"]) == [m["index"] for m in facts["messages"]]
        written = read_file(str(out_file))
        assert fmt == written.format
        assert "user" == next(m.role for m in written.last.messages if m.role != "system")

    def test_trim_to_a_log_writes_a_log_it_reads_back(self, capsys, fmt, tmp_path):
        """
        ``trim -o out.jsonl`` writes the trimmed request on one line: a log
        the command reads back, whose request is the one written.
        """
        out_file = tmp_path / "trimmed.jsonl"
        run_json(capsys, "trim", sample(fmt), "--budget", "100000", "-o", str(out_file))
        assert 1 == len(out_file.read_text(encoding="utf-8").splitlines())
        status, out, err = run(capsys, "check", str(out_file))
        assert 0 == status, (out, err)
        assert fmt == read_file(str(out_file)).format

    def test_diff_against_itself_shares_everything(self, capsys, fmt):
        """
        ``diff`` of a file with itself adds and removes nothing and shares every token.
        """
        facts = run_json(capsys, "diff", sample(fmt), sample(fmt))
        assert ([], []) == (facts["messages_added"], facts["messages_removed"])
        assert facts["b_tokens"] == facts["shared_prefix_tokens"]

    def test_replay(self, capsys, fmt):
        """
        ``replay`` prices one request per assistant message under each strategy,
        and the watermark manager with planned breakpoints costs no more than
        trimming the window every turn.
        """
        provider = "anthropic"
        ctx = read_file(sample(fmt)).last
        totals = run_json(capsys, "inspect", sample(fmt))["totals"]
        window = str(totals["prefix_tokens"] + totals["tail_tokens"] * 3 // 4)
        argv = ["--provider", provider, "--model", MODELS[provider], "--window", window]
        facts = run_json(capsys, "replay", sample(fmt), *argv)
        assistants = sum(1 for m in ctx.messages if m.role == "assistant")
        whole, every_turn, watermarks = facts["strategies"]
        assert all(assistants == len(s["requests"]) for s in facts["strategies"])
        assert [] == whole["cuts"]
        assert watermarks["cuts"]
        assert float(watermarks["cost"]) <= float(every_turn["cost"])
        assert watermarks["cached_share"] > 0.5

    def test_replay_with_a_gap(self, capsys, fmt):
        """
        ``replay --gap SECONDS`` sends the requests that far apart: entries
        older than their lifetime expire and are written again, so no strategy
        costs less than with no time passing and some request pays for an
        expired entry; ``--gap 0`` gives the run with no time passing.
        """
        provider = "anthropic"
        argv = ["--provider", provider, "--model", MODELS[provider], "--window", "1700"]
        still = run_json(capsys, "replay", sample(fmt), *argv)
        paused = run_json(capsys, "replay", sample(fmt), *argv, "--gap", "400")
        assert (None, 400) == (still["gap"], paused["gap"])
        for before, after in zip(still["strategies"], paused["strategies"], strict=True):
            assert [400 * i for i in range(len(after["requests"]))] == [r["at"] for r in after["requests"]]
            assert float(before["cost"]) <= float(after["cost"])
            assert 0 == before["expiry_misses"]
        assert any(s["expiry_misses"] for s in paused["strategies"])
        zero = run_json(capsys, "replay", sample(fmt), *argv, "--gap", "0")
        assert still["strategies"] == zero["strategies"]
        status, out, _ = run(capsys, "replay", sample(fmt), *argv, "--gap", "400")
        assert 0 == status
        assert "400 s between requests" in out
        assert "expiry misses" in out


class TestLogs:
    def test_replay_of_a_request_log_measures_real_reuse(self, capsys):
        """
        On a ``.jsonl`` log each request is priced against the cache the one
        before it left: later requests, which extend earlier ones, read from it.
        """
        path = sample("openai_chat", "jsonl")
        doc = read_file(path)
        assert len(doc.requests) > 1
        facts = run_json(capsys, "replay", path, "--model", MODELS["openai"])
        rows = facts["strategies"][0]["requests"]
        assert len(doc.requests) == len(rows)
        assert 0 == rows[0]["cache_read_tokens"]
        assert all(a["input_tokens"] <= b["input_tokens"] for a, b in itertools.pairwise(rows))

    def test_a_gap_longer_than_the_lifetime_empties_a_log_replay(self, capsys):
        """
        With ``--gap 600`` OpenAI's entries (five idle minutes) are gone before
        every request of a log: nothing is read, every request after the first
        is an expiry miss; a one-minute gap changes nothing but the times.
        """
        path = sample("openai_chat", "jsonl")
        still = run_json(capsys, "replay", path, "--model", MODELS["openai"])
        assert still["gap"] is None
        paused = run_json(capsys, "replay", path, "--model", MODELS["openai"], "--gap", "600")
        assert 600 == paused["gap"]
        rows = paused["strategies"][0]["requests"]
        assert [600 * i for i in range(len(rows))] == [r["at"] for r in rows]
        assert all(0 == r["cache_read_tokens"] for r in rows)
        assert len(rows) - 1 == paused["strategies"][0]["expiry_misses"]
        assert all(r["expired_tokens"] > 0 for r in rows[1:])
        brisk = run_json(capsys, "replay", path, "--model", MODELS["openai"], "--gap", "60")
        strip = ("at",)
        same = [{k: v for k, v in r.items() if k not in strip} for r in brisk["strategies"][0]["requests"]]
        assert [{k: v for k, v in r.items() if k not in strip} for r in still["strategies"][0]["requests"]] == same

    def test_check_names_the_line_of_a_bad_request(self, capsys, tmp_path):
        """
        ``check`` on a log reports each request by its line; an invalid one fails the check.
        """
        good = {"messages": [{"role": "user", "content": "hi"}]}
        orphan = {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "c9", "content": "result"},
            ]
        }
        log = tmp_path / "log.jsonl"
        log.write_text(json.dumps(good) + "\n" + json.dumps(orphan) + "\n", encoding="utf-8")
        facts = run_json(capsys, "check", str(log), "--provider", "openai")
        assert not facts["valid"]
        assert [1, 2] == [r["line"] for r in facts["requests"]]
        assert [] == facts["requests"][0]["problems"]
        assert facts["requests"][1]["problems"]
        status, _, _ = run(capsys, "check", str(log))
        assert 1 == status


class _Page(HTMLParser):
    """
    Collects the tags, ids and classes of an HTML page, and every external reference.
    """

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


class TestReport:
    @pytest.fixture
    def page(self, capsys, tmp_path) -> Path:
        """
        The report page of the Anthropic sample with a window that makes the manager cut.
        """
        path = sample("anthropic")
        tokens = run_json(capsys, "inspect", path)["totals"]["tokens"]
        out = tmp_path / "report.html"
        status, _, err = run(
            capsys, "report", path, "--model", MODELS["anthropic"], "--window", str(tokens // 2), "-o", str(out)
        )
        assert 0 == status, err
        return out

    def test_page_is_self_contained_with_both_charts(self, page):
        """
        The page holds the tokens chart (one stacked bar per request) and the
        cost chart (one line per strategy), and refers to nothing outside itself.
        """
        parser = _Page()
        parser.feed(page.read_text(encoding="utf-8"))
        ids = {a.get("id") for _, a in parser.tags}
        assert {"tokens-chart", "cost-chart"} <= ids
        assert any(t == "rect" and "bar" in (a.get("class") or "") for t, a in parser.tags)
        assert 3 == sum(1 for t, a in parser.tags if t == "polyline" and a.get("class") == "cost")
        assert not [t for t, _ in parser.tags if t in {"script", "link", "img", "iframe"}]
        refs = [v for _, a in parser.tags for k, v in a.items() if k in {"src", "href"}]
        assert [] == refs

    def test_page_with_a_gap_counts_expiry_misses(self, capsys, tmp_path):
        """
        ``report --gap`` says how far apart the requests were and how many paid for expired entries.
        """
        out = tmp_path / "report.html"
        argv = ["--model", MODELS["anthropic"], "--window", "1700", "--gap", "400", "-o", str(out)]
        status, _, err = run(capsys, "report", sample("anthropic"), *argv)
        assert 0 == status, err
        text = out.read_text(encoding="utf-8")
        assert "400 seconds between requests" in text
        assert "<th>expiry misses</th>" in text

    def test_the_problems_of_a_log_are_those_of_every_request(self, capsys, tmp_path):
        """
        The page of a log lists the problems ``check`` finds in each of its
        requests, with the line of each; it showed those of the last request
        only, and so said "No problem" of a log that ``check`` refuses.
        """
        calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
        dangling = [{"role": "user", "content": "Hi"}, {"role": "assistant", "tool_calls": calls}]
        requests = [{"model": "gpt-4.1", "messages": [*dangling, {"role": "user", "content": "Go on"}]}]
        requests.append({"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hi"}]})
        log = tmp_path / "requests.jsonl"
        log.write_text("".join(json.dumps(r) + "\n" for r in requests), encoding="utf-8")
        checked = run_json(capsys, "check", str(log))
        assert [["dangling-call"], []] == [[p["rule"] for p in r["problems"]] for r in checked["requests"]]
        out = tmp_path / "report.html"
        status, _, err = run(capsys, "report", str(log), "-o", str(out))
        assert 0 == status, err
        text = out.read_text(encoding="utf-8")
        assert 'id="no-problems"' not in text
        assert '<td class="n">1</td><td>$.messages[1]</td><td>dangling-call</td>' in text
        log.write_text(json.dumps(requests[1]) + "\n" + json.dumps(requests[1]) + "\n", encoding="utf-8")
        assert 0 == run(capsys, "report", str(log), "-o", str(out))[0]
        assert 'id="no-problems"' in out.read_text(encoding="utf-8")

    @pytest.mark.parametrize(
        ("fmt", "model"),
        [
            ("google", "gemini-2.0-flash-lite"),
            ("openai_chat", "gpt-4.1-nano"),
            ("anthropic", "claude-3-haiku-20240307"),
        ],
    )
    def test_each_cost_line_ends_at_the_cost_in_the_table(self, capsys, tmp_path, fmt, model):
        """
        The cost chart's line of each strategy ends at that strategy's cost as
        ``replay`` gives it (and the page's table shows): its running total
        adds up the exact cost of each request, not the amounts rounded to
        four places (on gemini-2.0-flash-lite those ended the line at $0.0008,
        below the $0.0010 in the table).
        """
        argv = ["--model", model, "--window", "1700"]
        replayed = run_json(capsys, "replay", sample(fmt), *argv)
        out = tmp_path / "report.html"
        status, _, err = run(capsys, "report", sample(fmt), *argv, "-o", str(out))
        assert 0 == status, err
        ends = re.findall(r'<polyline class="cost"[^>]*><title>(.*?): \$([0-9.]+)</title>', out.read_text("utf-8"))
        assert [(s["name"], s["cost"]) for s in replayed["strategies"]] == ends

    @pytest.mark.skipif(shutil.which("chromium") is None, reason="no headless chromium on this machine")
    def test_page_renders_in_a_headless_browser(self, page):
        """
        Headless Chromium loads the page and its DOM holds both charts' SVG.
        """
        result = subprocess.run(
            [
                shutil.which("chromium") or "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--no-first-run",
                f"--user-data-dir={page.parent / 'profile'}",
                "--dump-dom",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert 0 == result.returncode, result.stderr[-2000:]
        assert 'id="tokens-chart"' in result.stdout
        assert 'id="cost-chart"' in result.stdout
        assert "<rect" in result.stdout


class TestBadInput:
    @pytest.mark.parametrize(
        ("content", "expected"),
        [
            (b'{"messages": [{"role": "user", "content": "hi"}', ":1: not valid JSON"),
            (b'{"messages": []}\xff\xfe', ":1: not UTF-8 text: byte 0xff at offset 16"),
            (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
            (b"42", ":1: a number that is no known transcript format"),
            (b"null", ":1: null that is no known transcript format"),
            (b'{"model": "gpt-4.1"}', ":1: an object that is no known transcript format"),
            (b"[]", ":1: $: not a workingctx request: a transcript file holds a JSON object, got an array"),
            (b'{"messages": [{"role": "wizard", "content": "hi"}]}', "not an openai_chat request: "),
            (b'{"system": "x", "messages": [{"role": "wizard", "content": "hi"}]}', "not an anthropic request: "),
            (b'{"contents": [{"role": "wizard", "parts": []}]}', "not a google request: "),
            (b'{"messages": [{"role": "assistant", "tool_calls": 5}]}', "messages[0].tool_calls is 5"),
            (b'{"role": "user", "role": "system"}', "appears twice"),
            (b'{"messages": [{"role": "user", "content": NaN}]}', "NaN is not JSON"),
            (b'{"messages": [], "scratchpad": {"n": -1e400}}', "the number -1e400 is too large"),
            (b'{"messages": [], "scratchpad": {"n": ' + b"7" * 5000 + b"}}", "an integer of 5000 digits"),
        ],
    )
    def test_one_line_and_status_1(self, capsys, tmp_path, content, expected):
        """
        Truncated, non-UTF-8, deeply nested, wrong-format and ill-formed files are
        reported on one line naming the file (and line), with exit status 1 and
        no traceback.
        """
        path = tmp_path / "bad.json"
        path.write_bytes(content)
        status, out, err = run(capsys, "inspect", str(path))
        assert 1 == status
        assert "" == out
        assert err.startswith(f"error: {path}")
        assert expected in err
        assert "Traceback" not in err
        assert 1 == len(err.strip().splitlines())

    def test_the_json_path_is_named_once(self, capsys, tmp_path):
        """
        A value a workingctx file cannot hold is named by its JSON path, once, before the reason.
        """
        path = tmp_path / "bad.json"
        path.write_text('{"prefix": {}, "messages": [{"role": "user", "content": "x"}, {"role": "wizard"}]}')
        status, _, err = run(capsys, "inspect", str(path))
        assert 1 == status
        assert err.startswith(f"error: {path}:1: $.messages[1].role: not a workingctx request: ")
        assert 1 == err.count("$.messages[1].role")

    def test_a_log_is_split_on_newlines_only(self, capsys, tmp_path):
        """
        A ``.jsonl`` line whose strings hold U+2028, U+0085 or a form feed (all
        valid in JSON text) is one request, and CRLF line ends are read too.
        """
        path = tmp_path / "log.jsonl"
        text = "a\u2028b\x0cc\x85d\x1ce"
        lines = [json.dumps({"messages": [{"role": "user", "content": t}]}, ensure_ascii=False) for t in (text, "x")]
        path.write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")
        doc = read_file(str(path))
        assert ((1, 2), [text, "x"]) == (doc.lines, [ctx.messages[0].text() for ctx in doc.requests])
        status, _, _ = run(capsys, "check", str(path))
        assert 0 == status

    def test_a_log_named_in_capitals_is_a_log(self, capsys, tmp_path):
        """
        ``LOG.JSONL`` is read as a log of requests, as ``log.jsonl`` is.
        """
        path = tmp_path / "LOG.JSONL"
        path.write_text('{"messages": [{"role": "user", "content": "a"}]}\n' * 2, encoding="utf-8")
        assert (1, 2) == read_file(str(path)).lines
        status, _, err = run(capsys, "check", str(path))
        assert (0, "") == (status, err)

    def test_a_log_named_ndjson_is_a_log(self, capsys, tmp_path):
        """
        ``requests.ndjson`` (NDJSON, the other name of JSON Lines) is read as a
        log of requests, one per line, as ``requests.jsonl`` is; it was read
        as one JSON document and refused at its second line ("Extra data").
        """
        path = tmp_path / "requests.ndjson"
        path.write_text('{"model": "gpt-4.1", "messages": [{"role": "user", "content": "a"}]}\n' * 2, "utf-8")
        assert (1, 2) == read_file(str(path)).lines
        status, out, err = run(capsys, "check", str(path))
        assert (0, "") == (status, err)
        assert "line 2: valid" in out
        assert 0 == main(["replay", str(path)])

    def test_a_log_in_a_json_file_says_to_name_it_jsonl(self, capsys, tmp_path):
        """
        A ``.json`` file holding one request body per line (a log saved under
        another name) is refused on one line that says to name it ``.jsonl``;
        it said only "Extra data (column 1)".
        """
        path = tmp_path / "requests.json"
        path.write_text('{"messages": [{"role": "user", "content": "a"}]}\n' * 2, encoding="utf-8")
        status, _, err = run(capsys, "check", str(path))
        assert 1 == status
        assert err.startswith(f"error: {path}:2: not valid JSON: Extra data (column 1); ")
        assert "name it .jsonl" in err
        assert 1 == err.count("\n")
        path.write_text('{"messages": []} x', encoding="utf-8")  # extra data inside a line: no log
        status, _, err = run(capsys, "check", str(path))
        assert (1, f"error: {path}:1: not valid JSON: Extra data (column 18)\n") == (status, err)

    @pytest.mark.parametrize(
        ("envelope", "key"),
        [
            ({"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions"}, "body"),
            ({"custom_id": "r1"}, "params"),
            ({"key": "r1"}, "request"),
        ],
    )
    def test_a_batch_file_says_where_its_bodies_are(self, capsys, tmp_path, envelope, key):
        """
        A line of a batch API's file (OpenAI's ``body``, Anthropic's
        ``params``, Gemini's ``request``) is refused on one line naming the
        field that holds the request body and how to take it out; it said
        to force a format with --format, which reads no such line.
        """
        fmt = {"body": "openai_chat", "params": "anthropic", "request": "google"}[key]
        body = json.loads(Path(sample(fmt)).read_text(encoding="utf-8"))
        path = tmp_path / "batch.jsonl"
        path.write_text(json.dumps({**envelope, key: body}) + "\n", encoding="utf-8")
        status, out, err = run(capsys, "check", str(path))
        assert (1, "") == (status, out)
        assert err.startswith(f"error: {path}:1: ")
        assert f"whose request body is under '{key}': give the bodies themselves" in err
        assert f"jq -c .{key}" in err
        assert 1 == err.count("\n")

    def test_a_byte_order_mark_is_read_past(self, capsys, tmp_path):
        """
        A UTF-8 byte order mark (as some Windows editors save files) starts a
        JSON file or a log and is ignored, as RFC 8259 allows.
        """
        body = '{"messages": [{"role": "user", "content": "hi"}]}'
        for name, text in (("bom.json", body), ("bom.jsonl", f"{body}\n{body}\n")):
            path = tmp_path / name
            path.write_bytes(b"\xef\xbb\xbf" + text.encode())
            status, _, err = run(capsys, "check", str(path))
            assert (0, "") == (status, err)
        assert 0 == main(["demo", str(tmp_path / "bom.json")])

    def test_line_of_a_log(self, capsys, tmp_path):
        """
        A bad line in a ``.jsonl`` log is named by its number.
        """
        path = tmp_path / "log.jsonl"
        path.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n\n{"messages": [\n', encoding="utf-8")
        status, _, err = run(capsys, "check", str(path))
        assert 1 == status
        assert f"error: {path}:3: not valid JSON" in err

    def test_missing_file_and_directory(self, capsys, tmp_path):
        """
        A missing file and a directory are named, with exit status 1.
        """
        status, _, err = run(capsys, "inspect", str(tmp_path / "nope.json"))
        assert (1, f"error: {tmp_path / 'nope.json'}: no such file\n") == (status, err)
        status, _, err = run(capsys, "inspect", str(tmp_path))
        assert (1, f"error: {tmp_path}: not a regular file\n") == (status, err)

    def test_a_file_name_with_a_line_feed_stays_on_one_line(self, capsys, tmp_path):
        """
        A control character in a file name is written as its escape: the error is one line.
        """
        for command in ("inspect", "check"):
            status, _, err = run(capsys, command, str(tmp_path / "two\nlines.json"))
            assert (1, f"error: {tmp_path}/two\\x0alines.json: no such file\n") == (status, err)
        named = tmp_path / "a\x1b[2Jb.jsonl"
        request = '{"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]}\n'
        named.write_text(request * 2, encoding="utf-8")
        status, _, err = run(capsys, "replay", str(named), "--model", "gpt-4.1", "--window", "100")
        assert 2 == status
        assert f"error: --window 100: {tmp_path}/a\\x1b[2Jb.jsonl is a log of 2 requests" in err
        assert 1 == err.count("\n")


_NAMES = st.sampled_from(["user", "assistant", "tool_use", "tool_result", "thinking", "human", "text"]) | json_values(4)
"""What a file may hold where a role or a block's type belongs: a name, or any JSON value."""


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    messages=st.lists(
        st.fixed_dictionaries(
            {"role": _NAMES, "content": st.text(max_size=3) | st.lists(st.fixed_dictionaries({"type": _NAMES}))}
        ),
        min_size=1,
        max_size=3,
    ),
    fields=st.sampled_from([{}, {"model": "claude-sonnet-4-5"}, {"system": "Be brief."}]),
    listed=st.booleans(),
)
def test_a_role_or_type_that_is_no_name_is_bad_input_named_in_the_file(tmp_path, messages, fields, listed):
    """
    A role or a block type that is a list or an object (not a name) is read
    like any other value: detecting the format never fails on it, and the
    command says what is wrong where, on one line naming the file, with status
    0 or 1, never as an internal error ("TypeError: unhashable type").
    """
    path = tmp_path / "body.json"
    path.write_text(json.dumps(messages if listed else {**fields, "messages": messages}), encoding="utf-8")
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            status = main(["check", str(path)])
        except SystemExit as exc:
            status = int(exc.code or 0)
    said = err.getvalue()
    assert status in {0, 1}
    assert said == "" or (said.startswith(f"error: {path}:1: ") and 1 == said.count("\n")), said
    assert "WORKINGCTX_DEBUG" not in said


class TestBadUsage:
    @pytest.mark.parametrize(
        "argv",
        [
            ["frobnicate"],
            ["trim", "x.json"],
            ["trim", "x.json", "--budget", "-5"],
            ["trim", "x.json", "--budget", "ten"],
            ["replay", sample("anthropic")],
            ["check", "x.json", "--provider", "acme"],
            ["inspect", "x.json", "--format", "yaml"],
        ],
    )
    def test_status_2(self, capsys, argv):
        """
        A command line that asks for something impossible exits with status 2 and says why.
        """
        status, _, err = run(capsys, *argv)
        assert 2 == status
        assert "error:" in err

    @pytest.mark.parametrize("command", ["replay", "report"])
    def test_a_window_on_a_log(self, capsys, tmp_path, command):
        """
        --window on a log of requests (replayed as sent, never trimmed) is a usage error naming the log's size.
        """
        extra = ["-o", str(tmp_path / "page.html")] if command == "report" else []
        log = sample("openai_chat", "jsonl")
        status, out, err = run(capsys, command, log, "--model", MODELS["openai"], "--window", "2000", *extra)
        assert (2, "") == (status, out)
        assert "--window 2000" in err
        assert "is a log of 8 requests" in err
        assert not (tmp_path / "page.html").exists()

    @pytest.mark.parametrize("command", ["replay", "inspect"])
    def test_a_model_of_another_provider(self, capsys, command):
        """
        A model of another provider than the file's is a usage error naming both and the fix;
        --provider says whose cache to replay it under.
        """
        status, out, err = run(capsys, command, sample("anthropic"), "--model", "gpt-4.1")
        assert (2, "") == (status, out)
        assert "--model gpt-4.1 is a model of openai" in err
        assert "is a request to anthropic" in err
        verb = {"replay": "replay it under openai's cache", "inspect": "inspect it under openai's rules"}[command]
        assert f"pass --provider openai to {verb}, or --model with a model of anthropic" in err
        facts = run_json(capsys, command, sample("anthropic"), "--model", "gpt-4.1", "--provider", "openai")
        assert "openai" == facts["provider"]

    @pytest.mark.parametrize(
        ("model", "provider"),
        [
            ("claude-sonnet-4-6", "anthropic"),
            ("anthropic/claude-haiku-4-5", "anthropic"),
            ("gpt-5", "openai"),
            ("openai:gpt-4.1-mini", "openai"),
            ("o3-mini", "openai"),
            ("gemini-2.5-pro", "gemini"),
            ("GPT-5", "openai"),
            ("my-finetune", None),
            ("", None),
        ],
    )
    def test_model_families(self, model, provider):
        """
        A model's provider is read from its family, with or without a provider prefix; unknown names have none.
        """
        assert provider == model_provider(model)

    @pytest.mark.parametrize(
        ("gap", "expected"),
        [("-1", "zero or more"), ("nan", "finite"), ("soon", "'soon'"), ("1e308", "1e308 seconds: give")],
    )
    def test_a_bad_gap(self, capsys, gap, expected):
        """
        A negative, non-finite or non-numeric ``--gap`` is a usage error naming the value.
        """
        status, _, err = run(capsys, "replay", sample("anthropic"), "--model", MODELS["anthropic"], "--gap", gap)
        assert 2 == status
        assert "--gap" in err
        assert expected in err

    @pytest.mark.parametrize("command", ["replay", "report"])
    def test_a_low_watermark_that_cannot_apply(self, capsys, tmp_path, command):
        """
        ``--low`` above ``--window``, or without one, is a usage error naming
        the values (exit status 2), as it is for ``trim``; no page is written.
        """
        page = tmp_path / "r.html"
        output = ["-o", str(page)] if command == "report" else []
        base = [command, sample("anthropic"), "--model", MODELS["anthropic"], *output]
        status, _, err = run(capsys, *base, "--window", "100", "--low", "500")
        assert (2, True) == (status, "low_watermark=500 is above max_tokens=100" in err)
        status, _, err = run(capsys, *base, "--low", "500")
        assert (2, True) == (status, "--low 500 needs --window" in err)
        assert not page.exists()

    def test_unknown_model_and_pin(self, capsys):
        """
        An unknown model and a pin that is no scope are usage errors (status 2), named.
        """
        status, _, err = run(capsys, "replay", sample("anthropic"), "--model", "no-such-model-1")
        assert 2 == status
        assert "no-such-model-1" in err
        status, _, err = run(capsys, "trim", sample("anthropic"), "--budget", "100", "--pin", "first")
        assert 2 == status
        assert "--pin 'first'" in err

    @pytest.mark.parametrize("role", ["User", "human", "developer", "model"])
    def test_a_pin_of_no_role_is_bad_usage(self, capsys, role):
        """
        ``--pin role:ROLE`` of a role no message has (a capital, LangChain's
        "human", OpenAI's "developer", Gemini's "model") is bad usage (status
        2) naming the option and the roles there are; it was reported as bad
        input (status 1) without naming ``--pin``.
        """
        status, out, err = run(capsys, "trim", sample("anthropic"), "--budget", "100", "--pin", f"role:{role}")
        assert (2, "") == (status, out)
        assert err.startswith(f"error: --pin 'role:{role}': '{role}' is no role; ")
        assert "role:user" in err
        assert 1 == err.count("\n")


def test_inspect_of_a_body_with_too_many_breakpoints_is_bad_input(capsys, tmp_path):
    """
    ``inspect`` of an Anthropic body whose blocks carry five ``cache_control``
    breakpoints (Anthropic allows four) is bad input (status 1) naming the
    file, the count and the fix in the file's terms; it was bad usage
    (status 2) without the file, telling to remove ``cache=``.
    """
    body = json.loads(Path(sample("anthropic")).read_text(encoding="utf-8"))
    texts = [m for m in body["messages"] if isinstance(m["content"], str)][:5]
    for message in texts:
        message["content"] = [{"type": "text", "text": message["content"], "cache_control": {"type": "ephemeral"}}]
    TypeAdapter(list[MessageParam]).validate_python(body["messages"])
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"model": "claude-sonnet-4-6", **body}), encoding="utf-8")
    status, out, err = run(capsys, "inspect", str(path))
    assert (1, "") == (status, out)
    assert err.startswith(f"error: {path}:1: cache plan for anthropic claude-sonnet-4-6: ")
    assert "already carry 5 breakpoints" in err
    assert "remove cache_control from some blocks" in err
    assert 1 == err.count("\n")


def test_trim_of_a_log_onto_itself_is_refused_and_the_log_kept(capsys, tmp_path):
    """
    ``trim LOG.jsonl -o LOG.jsonl`` is bad usage (status 2) and leaves the log
    as it was: it wrote the last request, trimmed, over the log of every
    request. A single request body may still be trimmed in place.
    """
    log = tmp_path / "requests.jsonl"
    shutil.copyfile(sample("openai_chat", "jsonl"), log)
    before = log.read_bytes()
    status, out, err = run(capsys, "trim", str(log), "--budget", "1500", "-o", str(log))
    assert (2, "") == (status, out)
    assert err.startswith(f"error: -o {log} is the log trim reads, of 8 requests: ")
    assert before == log.read_bytes()
    body = tmp_path / "request.json"
    shutil.copyfile(sample("openai_chat"), body)
    status, _, _ = run(capsys, "trim", str(body), "--budget", "1500", "-o", str(body))
    assert 0 == status
    assert read_file(str(body)).last.size() < read_file(sample("openai_chat")).last.size()


def program(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """
    ``python -m workingctx ARGV`` run in a process of its own, from *cwd*.
    """
    return subprocess.run(
        [sys.executable, "-m", "workingctx", *argv], capture_output=True, text=True, check=False, timeout=120, cwd=cwd
    )


class TestProgram:
    def test_console_script_and_module_agree(self, tmp_path):
        """
        ``python -m workingctx check FILE`` runs the same command as the console script.
        """
        result = program(tmp_path, "check", sample("openai_chat"), "--json")
        assert 0 == result.returncode, result.stderr
        assert json.loads(result.stdout)["valid"]

    @pytest.mark.parametrize("entry", ["module", "script"])
    def test_version_prints_the_installed_version(self, tmp_path, entry):
        """
        ``workingctx --version`` and ``python -m workingctx --version`` print
        the version of workingctx and exit 0; ``--version`` was an unknown option.
        """
        script = Path(sys.executable).with_name("workingctx")
        command = [sys.executable, "-m", "workingctx"] if entry == "module" else [str(script)]
        result = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, check=False, timeout=120, cwd=tmp_path
        )
        assert (0, f"workingctx {workingctx.__version__}\n", "") == (result.returncode, result.stdout, result.stderr)

    @pytest.mark.parametrize(
        ("argv", "status"),
        [
            (["replay", "openai_chat", "--model", "gpt-4.1", "--window", "2000"], 0),
            (["check", "anthropic"], 0),
            (["replay", "workingctx"], 2),  # refused once the file is read: no provider to replay with
        ],
    )
    @pytest.mark.parametrize("young", [700, 50_000])
    def test_a_command_run_in_process_leaves_the_garbage_collector_as_it_found_it(self, capsys, argv, status, young):
        """
        A command lets the garbage collector run less often while it runs (at
        10,000 new objects, or the caller's threshold when it is higher) and
        sets the thresholds back when it ends, failing or not.
        """
        argv = [argv[0], sample(argv[1]), *argv[2:]]
        during: list[tuple[int, int, int]] = []
        provider = cli_module._provider  # noqa: SLF001  # a step every command takes once its file is read

        def seen(*args: object) -> str | None:
            during.append(gc.get_threshold())
            return provider(*args)  # type: ignore[arg-type]

        before = gc.get_threshold()
        try:
            gc.set_threshold(young, 11, 12)
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(cli_module, "_provider", seen)
                assert status == run(capsys, *argv)[0]
            after = gc.get_threshold()
        finally:
            gc.set_threshold(*before)
        assert ((max(young, cli_module.YOUNG_OBJECTS), 11, 12), (young, 11, 12)) == (during[0], after)

    def test_a_warning_repeated_at_every_request_is_shown_once(self, tmp_path):
        """
        ``replay`` with a window below the prefix, where the managers warn at
        every request that they cannot cut down to their watermark, shows the
        warning once after ``warning:`` and then how many more came; it showed
        sixteen bare lines, one per request of each trimming strategy.
        """
        argv = ["replay", sample("openai_chat"), "--model", "gpt-4.1", "--window", "100", "--low", "10"]
        result = program(tmp_path, *argv)
        assert 0 == result.returncode, result.stderr
        lines = result.stderr.splitlines()
        assert 2 == len(lines), result.stderr
        assert lines[0].startswith("warning: TokenBudgetContextManager: the context holds ")
        assert "warning: and 15 more like it" == lines[1]

    def test_demo_is_the_default(self, capsys):
        """
        With no command the program prints the demo report on the shipped sample.
        """
        status, out, _ = run(capsys)
        assert 0 == status
        assert "snapshot digest:" in out

    def test_trim_output_of_workingctx_json_keeps_other_fields(self, capsys, tmp_path):
        """
        Fields of a workingctx file other than its prefix, messages and notes are kept by ``trim -o``.
        """
        source = tmp_path / "in.json"
        body = json.loads(Path(sample("workingctx")).read_text(encoding="utf-8"))
        source.write_text(json.dumps({"run": "r-17", **body, "labels": ["a"]}), encoding="utf-8")
        out_file = tmp_path / "out.json"
        run_json(capsys, "trim", str(source), "--budget", "1500", "-o", str(out_file))
        written = json.loads(out_file.read_text(encoding="utf-8"))
        assert ["run", *body, "labels"] == list(written)
        assert ("r-17", ["a"]) == (written["run"], written["labels"])

    def test_trim_output_of_workingctx_json_reads_back(self, capsys, tmp_path):
        """
        A trimmed workingctx file keeps the prefix and notes, and reads back as the trimmed context.
        """
        out_file = tmp_path / "t.json"
        tokens = run_json(capsys, "inspect", sample("workingctx"))["totals"]["tokens"]
        run_json(capsys, "trim", sample("workingctx"), "--budget", str(tokens // 2), "-o", str(out_file))
        original = read_file(sample("workingctx")).last
        trimmed = read_file(str(out_file)).last
        assert original.prefix == trimmed.prefix
        assert original.scratchpad == trimmed.scratchpad
        assert set(trimmed.messages) <= set(original.messages)


@pytest.mark.parametrize("fmt", [fmt for fmt in FORMATS[1:] if fmt != "langchain"])  # request bodies, not lists
def test_trim_output_keeps_the_request_fields(capsys, fmt, tmp_path):
    """
    ``trim -o`` keeps every field of the request other than its messages
    (model, tools, sampling settings), in their order; only the messages change.
    """
    body = json.loads(Path(sample(fmt)).read_text(encoding="utf-8"))
    extras = {"model": MODELS[PROVIDERS[fmt]], "max_tokens": 512, "tools": [{"name": "f"}], "temperature": 0.25}
    source = tmp_path / f"full.{fmt}.json"
    source.write_text(json.dumps({"model": extras["model"], **body, **extras}), encoding="utf-8")
    out_file = tmp_path / f"out.{fmt}.json"
    totals = run_json(capsys, "inspect", str(source))["totals"]
    budget = str(totals["prefix_tokens"] + totals["tail_tokens"] // 2)
    run_json(capsys, "trim", str(source), "--budget", budget, "-o", str(out_file))
    written = json.loads(out_file.read_text(encoding="utf-8"))
    assert list(json.loads(source.read_text(encoding="utf-8"))) == list(written)
    assert extras == {key: written[key] for key in extras}
    trimmed = read_file(str(out_file)).last
    assert importlib.import_module(f"workingctx.adapters.{fmt}").write(trimmed) == {
        key: value for key, value in written.items() if key not in extras
    }


@pytest.mark.parametrize("fmt", FORMATS)
# one directory serves every example; Gemini's rules refuse most generated transcripts (those are skipped)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
@given(
    prefix=prefixes,
    messages=transcripts(allow_pending=False) | block_transcripts() | st.lists(messages(), max_size=4),
    notes=scratchpads,
    budget=st.integers(1, 3000),
)
def test_trim_writes_what_it_trimmed(tmp_path, fmt, prefix, messages, notes, budget):
    """
    Law: the file ``trim -o`` writes reads back as the context the trim made
    (workingctx JSON: the same prefix, messages and notes; a provider's
    format: a context that writes the same request).
    """
    source, out = tmp_path / "in.json", tmp_path / "out.json"
    data = {"prefix": unstructure(prefix), "messages": [unstructure(m) for m in messages], "scratchpad": notes}
    source.write_text(json.dumps(data), encoding="utf-8")
    adapter = None if fmt == "workingctx" else importlib.import_module(f"workingctx.adapters.{fmt}")
    try:
        doc = read_file(str(source))
        if adapter is not None:
            body = adapter.write(doc.last)
            if fmt == "langchain":  # messages, serialized as the command reads them
                body = messages_to_dict(body)
            source.write_text(json.dumps(body), encoding="utf-8")
            doc = read_file(str(source), fmt)
    except (ValueError, TypeError):  # a context this format cannot carry: no request to trim
        reject()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a budget below what must be kept warns
        trimmed = trim_facts(doc, budget=budget, low=None, pin=[], exact=False)["_trimmed"]
    try:
        write_context(doc, trimmed, str(out))
    except ProviderError:  # the trimmed request is one the provider refuses: nothing written
        reject()
    back = read_file(str(out), fmt).last
    if adapter is None:
        assert (trimmed.prefix, trimmed.messages, dict(trimmed.scratchpad)) == (
            back.prefix,
            back.messages,
            dict(back.scratchpad),
        )
    else:
        assert adapter.write(trimmed) == adapter.write(back)


def test_pin_keeps_the_task(capsys):
    """
    ``--pin role:user`` keeps the first user message (the task) in a window
    too small for the exchanges after it.
    """
    totals = run_json(capsys, "inspect", sample("workingctx"))["totals"]
    budget = str(totals["prefix_tokens"] + totals["tail_tokens"] // 3)
    plain = run_json(capsys, "trim", sample("workingctx"), "--budget", budget)
    pinned = run_json(capsys, "trim", sample("workingctx"), "--budget", budget, "--pin", "role:user")
    assert 0 not in plain["kept"]
    assert 0 in pinned["kept"]


def test_samples_are_what_the_adapters_write():
    """
    Every shipped sample in a provider format is exactly what that format's
    ``write`` gives for the workingctx sample, so the samples cannot go stale.
    """
    reference = read_file(sample("workingctx")).last
    for fmt in FORMATS[1:]:
        written = importlib.import_module(f"workingctx.adapters.{fmt}").write(reference)
        if fmt == "langchain":  # messages, serialized with their model_dump()
            written = json.loads(json.dumps([m.model_dump() for m in written]))
        assert written == json.loads(Path(sample(fmt)).read_text(encoding="utf-8")), fmt


def test_message_summaries_are_one_line():
    """
    ``describe`` keeps a message to one line of at most the width asked for.
    """
    ctx = WorkingContext().append(Message("user", "a\nb " * 100))
    line = describe(ctx.messages[0], 40)
    assert "\n" not in line
    assert len(line) <= 40


def test_a_plain_anthropic_body_reads_as_anthropic(capsys, tmp_path):
    """
    A body Chat Completions and Anthropic would read alike (user and
    assistant text only) that names a Claude model is Anthropic's: every
    command reads it; a Chat Completions body to another provider's model
    (an OpenAI-compatible endpoint) is checked and trimmed as it is.
    """
    claude = tmp_path / "claude.json"
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    claude.write_text(json.dumps(body), encoding="utf-8")
    for command in ("check", "inspect", "replay"):
        status, out, err = run(capsys, command, str(claude))
        assert 0 == status, (command, out, err)
    assert "anthropic" == read_file(str(claude)).format
    compatible = tmp_path / "compatible.json"
    compatible.write_text(json.dumps({**body, "model": "gemini-2.5-flash"}), encoding="utf-8")
    for argv in (["check"], ["trim", "--budget", "1000", "-o", str(tmp_path / "out.json")]):
        status, out, err = run(capsys, argv[0], str(compatible), *argv[1:])
        assert 0 == status, (argv, out, err)


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


class TestOutputFiles:
    """
    ``trim -o`` and ``report -o`` write their file whole or not at all, and an
    output that cannot be written is named on one line, exit status 1.
    """

    @pytest.fixture
    def lone(self, tmp_path: Path) -> Path:
        """
        An OpenAI Chat request whose texts hold lone surrogates (JSON escapes; a streamed emoji cut in half).
        """
        path = tmp_path / "lone.json"
        path.write_text(
            '{"messages": [{"role": "system", "content": "rules \\ud83d"},'
            ' {"role": "user", "content": "half \\ud800 an emoji \\\\\\udfff"}]}',
            encoding="utf-8",
        )
        return path

    def test_trim_output_refuses_lone_surrogates(self, capsys, lone, tmp_path):
        """
        A request holding lone surrogates is inspected, its table escaping them;
        trimming it to a request is refused naming each message and offset (no
        SDK could send it), and nothing is written.
        """
        out_file = tmp_path / "out.json"
        status, out, err = run(capsys, "trim", str(lone), "--budget", "1000", "-o", str(out_file))
        assert 1 == status
        assert "$.messages[0]: unencodable-text" in err
        assert "$.messages[1]: unencodable-text: content holds the lone surrogate '\\ud800' at character 5" in err
        assert not out_file.exists()
        status, out, err = run(capsys, "inspect", str(lone))
        assert (0, "") == (status, err)
        assert "rules \\ud83d" in out

    def test_report_page_of_lone_surrogates(self, capsys, lone, tmp_path):
        """
        The report page of a file whose name is not UTF-8 (Python reads it with
        lone surrogates) is written as UTF-8 text, the name escaped.
        """
        named = tmp_path / "lone\udcff.json"
        named.write_bytes(lone.read_bytes())
        page = tmp_path / "r.html"
        status, out, err = run(capsys, "report", str(named), "--model", "gpt-4.1", "-o", str(page))
        assert (0, "") == (status, err)
        text = page.read_bytes().decode("utf-8")
        assert "lone\\udcff.json" in text
        assert f"({len(text.encode())} bytes)" in out

    def test_control_characters_are_printed_escaped(self, capsys, tmp_path):
        """
        Terminal escape sequences in a transcript (which could retitle or clear
        the terminal) are printed as escapes, by every command's text output.
        """
        path = tmp_path / "esc.json"
        text = "look \x1b]0;owned\x07 here \x1b[2J \x9b1m \x00 end"
        path.write_text(json.dumps({"messages": [{"role": "user", "content": text}]}), encoding="utf-8")
        for argv in (["inspect"], ["trim", "--budget", "100"], ["demo"]):
            status, out, _ = run(capsys, argv[0], str(path), *argv[1:])
            assert 0 == status
            assert not any(c in out for c in "\x1b\x07\x9b\x00")
            assert "look \\x1b]0;owned\\x07 here" in out

    def test_demo_of_lone_surrogates(self, capsys, tmp_path):
        """
        The demo report prints a workingctx transcript holding lone surrogates, escaped.
        """
        path = tmp_path / "lone.workingctx.json"
        path.write_text('{"messages": [{"role": "user", "content": "half \\ud800"}]}', encoding="utf-8")
        status, out, _ = run(capsys, "demo", str(path))
        assert 0 == status
        assert "half \\ud800" in out

    @pytest.mark.parametrize("command", ["trim", "report"])
    def test_a_failed_write_keeps_the_old_file(self, capsys, tmp_path, monkeypatch, command):
        """
        When writing the output fails half way (a full disk), the file that was
        there is left as it was, no temporary file is left behind, and the error
        names the output on one line with exit status 1.
        """
        target = tmp_path / "out.file"
        target.write_bytes(b"precious")

        real = os.write

        def full(fd: int, data: bytes) -> int:
            if fd > 2:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(fd, data)

        monkeypatch.setattr(os, "write", full)
        argv = ["--budget", "1500"] if command == "trim" else ["--model", MODELS["anthropic"]]
        status, _, err = run(capsys, command, sample("anthropic"), *argv, "-o", str(target))
        assert 1 == status
        assert f"error: {target}: cannot be written: No space left on device" in err
        assert "Traceback" not in err
        assert b"precious" == target.read_bytes()
        assert ["out.file"] == [p.name for p in tmp_path.iterdir()]

    def test_trim_onto_its_own_input_that_fails_keeps_the_input(self, capsys, tmp_path, monkeypatch):
        """
        ``trim FILE -o FILE`` that fails while writing leaves FILE whole.
        """
        path = tmp_path / "in.json"
        original = Path(sample("anthropic")).read_bytes()
        path.write_bytes(original)
        monkeypatch.setattr(os, "fsync", lambda _fd: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error")))
        status, _, err = run(capsys, "trim", str(path), "--budget", "1500", "-o", str(path))
        assert 1 == status
        assert "I/O error" in err
        assert original == path.read_bytes()

    @pytest.mark.parametrize("command", ["trim", "report"])
    def test_outputs_that_cannot_be_written(self, capsys, tmp_path, command):
        """
        A directory, or a file in a directory that does not exist, is named with the fix.
        """
        argv = ["--budget", "1500"] if command == "trim" else ["--model", MODELS["anthropic"]]
        status, _, err = run(capsys, command, sample("anthropic"), *argv, "-o", str(tmp_path))
        assert (1, f"error: {tmp_path}: is a directory; give -o a file path\n") == (status, err)
        missing = tmp_path / "no" / "such" / "out"
        status, _, err = run(capsys, command, sample("anthropic"), *argv, "-o", str(missing))
        assert 1 == status
        assert f"error: {missing}: cannot be written: the directory {missing.parent} does not exist" in err

    def test_a_report_never_replaces_its_transcript(self, capsys, tmp_path):
        """
        ``report FILE -o FILE`` (the page over the transcript itself) is a usage
        error, exit status 2, and the transcript is left as it was.
        """
        path = tmp_path / "t.json"
        original = Path(sample("anthropic")).read_bytes()
        path.write_bytes(original)
        alias = tmp_path / "link.json"
        alias.symlink_to(path)
        for output in (path, alias):
            status, _, err = run(capsys, "report", str(path), "--model", MODELS["anthropic"], "-o", str(output))
            assert 2 == status
            assert f"error: -o {output} is the transcript the page reports on; give the page another name" in err
        assert original == path.read_bytes()

    def test_a_directory_that_cannot_be_written(self, capsys, tmp_path, monkeypatch):
        """
        A writable file in a directory that cannot be written: the error says
        the directory is where the new file goes, and the file is left as it was.
        """
        target = tmp_path / "out.json"
        target.write_bytes(b"old")
        real = os.open

        def refuse(name, flags, *args):
            if str(name).endswith(".tmp"):
                raise PermissionError(errno.EACCES, "Permission denied")
            return real(name, flags, *args)

        monkeypatch.setattr(os, "open", refuse)
        status, _, err = run(capsys, "trim", sample("anthropic"), "--budget", "1500", "-o", str(target))
        assert 1 == status
        assert f"error: {target}: cannot be written: Permission denied (in its directory {tmp_path}," in err
        assert b"old" == target.read_bytes()

    def test_output_keeps_the_mode_of_the_file_it_replaces(self, capsys, tmp_path):
        """
        Replacing an existing file keeps its permissions; a new file gets the usual ones.
        """
        target = tmp_path / "t.json"
        target.write_text("{}", encoding="utf-8")
        target.chmod(0o640)
        run(capsys, "trim", sample("anthropic"), "--budget", "1500", "-o", str(target))
        assert 0o640 == target.stat().st_mode & 0o777
        fresh = tmp_path / "fresh.json"
        (tmp_path / "probe").write_text("", encoding="utf-8")
        run(capsys, "trim", sample("anthropic"), "--budget", "1500", "-o", str(fresh))
        assert (tmp_path / "probe").stat().st_mode & 0o777 == fresh.stat().st_mode & 0o777

    def test_output_to_a_device(self, capsys):
        """
        ``-o /dev/null`` writes to the device (it is never replaced by a file).
        """
        status, _, err = run(capsys, "trim", sample("anthropic"), "--budget", "1500", "-o", os.devnull)
        assert (0, "") == (status, err)
        assert Path(os.devnull).is_char_device()

    def test_a_killed_trim_leaves_the_old_output_whole(self, tmp_path):
        """
        A ``trim -o`` killed with SIGKILL while writing leaves either the old file or the new one, never part.
        """
        target = tmp_path / "out.json"
        target.write_bytes(b"old")
        program = (
            "import os, sys, signal\n"
            "real = os.write\n"
            "def write(fd, data):\n"
            "    if fd > 2:\n"
            "        real(fd, data[: len(data) // 2])\n"
            "        os.kill(os.getpid(), signal.SIGKILL)\n"
            "    return real(fd, data)\n"
            "os.write = write\n"
            "from workingctx.cli import main\n"
            "main(sys.argv[1:])\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", program, "trim", sample("anthropic"), "--budget", "1500", "-o", str(target)],
            capture_output=True,
            check=False,
            timeout=120,
        )
        assert -9 == result.returncode
        assert b"old" == target.read_bytes()

    def test_a_reader_that_goes_away_is_no_error(self):
        """
        Output piped into a reader that stops early (``| head``) ends the command
        quietly: no error line, no traceback.
        """
        command = [sys.executable, "-m", "workingctx", "replay", sample("anthropic"), "--model", MODELS["anthropic"]]
        process = subprocess.Popen([*command, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout is not None
        assert process.stderr is not None
        process.stdout.close()
        err = process.stderr.read()
        process.stderr.close()
        assert 1 == process.wait(timeout=120)
        assert b"" == err


def _with_model(tmp_path, fmt: str, **fields) -> str:
    """
    The shipped sample of *fmt* with *fields* (a model, ...) added to its body, written to a file.
    """
    body = json.loads(Path(sample(fmt)).read_text(encoding="utf-8"))
    path = tmp_path / f"named.{fmt}.json"
    path.write_text(json.dumps({**fields, **body}), encoding="utf-8")
    return str(path)


class TestModelFromTheFile:
    @pytest.mark.parametrize("model", ["ft:gpt-4o-mini-2024-07-18:acme:support:9abc", "my-azure-deployment"])
    def test_inspect_of_a_file_naming_a_model_without_a_price_leaves_the_cost_out(self, capsys, tmp_path, model):
        """
        ``inspect`` of a body naming a model no price table knows (a fine-tuned
        model, a deployment's name) shows everything but the cost, and says
        how to get it; it refused the whole file (status 2). Naming that model
        with ``--model`` is still bad usage.
        """
        body = json.loads(Path(sample("openai_chat")).read_text(encoding="utf-8"))
        path = tmp_path / "request.json"
        path.write_text(json.dumps({"model": model, **body}), encoding="utf-8")
        facts = run_json(capsys, "inspect", str(path))
        assert (model, None) == (facts["model"], facts["cost"])
        assert facts["totals"]["tokens"] == read_file(sample("openai_chat")).last.count_tokens()
        status, out, err = run(capsys, "inspect", str(path))
        assert (0, "") == (status, err)
        assert f"no price for the file's model {model}: give --model" in out
        status, _, err = run(capsys, "inspect", str(path), "--model", model)
        assert 2 == status
        assert f"no price for model '{model}'" in err

    @pytest.mark.parametrize(
        ("fmt", "fields", "model"),
        [
            ("openai_chat", {"model": "gpt-4.1"}, "gpt-4.1"),
            ("openai_responses", {"model": "gpt-4o"}, "gpt-4o"),
            ("anthropic", {"model": "claude-haiku-4-5"}, "claude-haiku-4-5"),
            ("google", {"model": "models/gemini-2.5-pro"}, "gemini-2.5-pro"),
            ("google", {"model_version": "gemini-2.5-flash"}, "gemini-2.5-flash"),
            ("google", {"modelVersion": "gemini-2.5-flash"}, "gemini-2.5-flash"),
        ],
    )
    def test_every_command_takes_the_model_the_file_names(self, capsys, tmp_path, fmt, fields, model):
        """
        ``inspect``, ``replay`` and ``report`` price a file with the model it
        names (a body's ``model``, a Gemini model path or ``model_version``),
        giving what ``--model`` with that name gives; no ``--model`` is needed.
        """
        path = _with_model(tmp_path, fmt, **fields)
        named = run_json(capsys, "inspect", path)
        given = run_json(capsys, "inspect", sample(fmt), "--model", model)
        assert model == named["model"]
        assert given["cost"] == named["cost"]
        assert given["breakpoints"] == named["breakpoints"]
        replayed = run_json(capsys, "replay", path, "--window", "1700")
        assert model == replayed["model"]
        assert run_json(capsys, "replay", sample(fmt), "--model", model, "--window", "1700") == {
            **replayed,
            "file": sample(fmt),
        }
        page = tmp_path / "page.html"
        status, _, err = run(capsys, "report", path, "-o", str(page))
        assert 0 == status, err
        assert model in page.read_text(encoding="utf-8")

    def test_model_overrides_the_file(self, capsys, tmp_path):
        """
        ``--model`` wins over the model the file names.
        """
        path = _with_model(tmp_path, "anthropic", model="claude-haiku-4-5")
        facts = run_json(capsys, "inspect", path, "--model", "claude-sonnet-4-6")
        assert "claude-sonnet-4-6" == facts["model"]
        assert run_json(capsys, "inspect", sample("anthropic"), "--model", "claude-sonnet-4-6")["cost"] == facts["cost"]

    @pytest.mark.parametrize("gap", [None, 200])  # 200 s apart: each model's requests 400 s, past a 5m entry
    def test_a_log_prices_each_line_with_its_own_model(self, capsys, tmp_path, gap):
        """
        In a ``.jsonl`` log each request is priced with the model its line
        names, against that model's own prompt cache: a log whose lines
        alternate two models costs, line by line, what the lines of each model
        cost replayed alone (twice as far apart), as a request to one model
        neither reads nor fills another's cache.
        """
        lines = Path(sample("openai_chat", "jsonl")).read_text(encoding="utf-8").splitlines()
        names = ["gpt-4o" if number % 2 else "gpt-4.1-mini" for number in range(len(lines))]

        def log(name: str, models: list[str]) -> str:
            path = tmp_path / name
            sent = [json.dumps({"model": m, **json.loads(line)}) + "\n" for m, line in zip(models, lines, strict=True)]
            path.write_text("".join(line for m, line in zip(models, sent, strict=True) if m), encoding="utf-8")
            return str(path)

        timed = [] if gap is None else ["--gap", str(gap)]
        mixed = run_json(capsys, "replay", log("mixed.jsonl", names), *timed)["strategies"][0]["requests"]
        assert names == [r["model"] for r in mixed]
        for model in set(names):
            mine = [name if name == model else "" for name in names]
            timed = [] if gap is None else ["--gap", str(2 * gap)]
            alone = run_json(capsys, "replay", log(f"{model}.jsonl", mine), *timed)["strategies"][0]["requests"]
            assert [{**r, "request": 0, "at": 0} for r in alone] == [
                {**r, "request": 0, "at": 0} for r in mixed if r["model"] == model
            ]
            assert (gap is None) == any(r["cache_read_tokens"] for r in alone)
        assert len({r["cost"] for r in mixed}) > 1
        assert "gpt-4o" == run_json(capsys, "inspect", log("mixed.jsonl", names))["model"]  # the last line's

    def test_a_file_naming_a_model_of_another_provider(self, capsys, tmp_path):
        """
        An Anthropic body naming an OpenAI model is refused (status 2) with the
        file's model named as such, and the fixes: ``--provider`` or ``--model``.
        """
        path = _with_model(tmp_path, "anthropic", model="gpt-4.1")
        status, _, err = run(capsys, "replay", path)
        assert 2 == status
        assert "the file's model gpt-4.1 is a model of openai" in err
        assert "--provider openai" in err
        assert "--model with a model of anthropic" in err
        assert 0 == run(capsys, "replay", path, "--model", "claude-sonnet-4-6")[0]

    def test_a_file_without_a_model_asks_for_one(self, capsys):
        """
        ``replay`` and ``report`` of a file that names no model exit 2 saying
        to give ``--model``; ``inspect`` says the cost needs it.
        """
        for argv in (["replay", sample("anthropic")], ["report", sample("anthropic"), "-o", "page.html"]):
            status, _, err = run(capsys, *argv)
            assert 2 == status
            assert "names no model" in err
            assert "--model" in err
        status, out, _ = run(capsys, "inspect", sample("anthropic"))
        assert 0 == status
        assert "the file names no model: give --model for the cost" in out


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


class TestTrimKeepsWhatFits:
    def test_without_low_the_cut_keeps_as_much_as_fits(self, capsys):
        """
        ``trim --budget N`` keeps as much as fits N: on the sample (user turns
        at 0, 4, 8 and 16), 300 tokens over the prefix keep the exchanges from
        message 8 (296 tokens), and those from message 4 would not have fitted.
        With ``--low`` the cut goes down to that watermark instead (fewer kept),
        which was the default cut: half the budget, leaving one message.
        """
        totals = run_json(capsys, "inspect", sample("anthropic"))["totals"]
        budget = totals["prefix_tokens"] + 300
        full = run_json(capsys, "trim", sample("anthropic"), "--budget", str(budget))
        assert list(range(8, 17)) == full["kept"]
        assert totals["prefix_tokens"] + 296 == full["tokens_after"] <= budget
        ctx = read_file(sample("anthropic")).last
        counter = ctx.counter
        assert totals["prefix_tokens"] + sum(counter.count_message(m) for m in ctx.messages[4:]) > budget
        explicit = run_json(capsys, "trim", sample("anthropic"), "--budget", str(budget), "--low", str(budget))
        assert full == {**explicit, "low": None}
        low = run_json(capsys, "trim", sample("anthropic"), "--budget", str(budget), "--low", str(budget // 2))
        assert [16] == low["kept"]


def _documented_synopsis() -> list[str]:
    """
    The lines of the first ``sh`` block of docs/cli.md: one per command.
    """
    text = (Path(__file__).parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


class TestHelpAndDocsAgree:
    def test_the_synopsis_is_in_the_help(self, capsys):
        """
        Every line of the synopsis in docs/cli.md is printed by ``--help`` as it is written.
        """
        with pytest.raises(SystemExit):
            main(["--help"])
        shown = [line.strip() for line in capsys.readouterr().out.splitlines()]
        for line in _documented_synopsis():
            assert line in shown

    def test_required_and_optional_options_agree(self):
        """
        For each command, the options docs/cli.md writes bare are exactly the
        ones the parser requires, those in brackets exist and are optional,
        and every command of the parser is documented.
        """
        from workingctx.cli import _parser  # noqa: PLC0415

        parser = _parser()
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices  # noqa: SLF001
        documented = {}
        for line in _documented_synopsis():
            usage = line.split("#", 1)[0].split()
            assert "workingctx" == usage[0]
            documented[usage[1]] = usage[2:]
        assert set(commands) == set(documented)
        for name, words in documented.items():
            sub = commands[name]
            options = {o: a for a in sub._actions for o in a.option_strings}  # noqa: SLF001
            required = {a.option_strings[0] for a in sub._actions if a.required and a.option_strings}  # noqa: SLF001
            positional = [a for a in sub._actions if not a.option_strings]  # noqa: SLF001
            bare = {w for w in words if w.startswith("-")}
            bracketed = {w.strip("[]") for w in words if w.startswith("[-")}
            assert {options[o].option_strings[0] for o in bare} == required, name
            for option in bracketed:
                assert option in options, (name, option)
                assert not options[option].required, (name, option)
            shown_positional = [w for w in words if w in {"FILE", "[FILE]", "A", "B"}]
            assert len(positional) == len(shown_positional), name


class TestCheckAsWritten:
    @pytest.mark.parametrize(
        ("body", "rules"),
        [
            (
                {
                    "system": "Be brief.",
                    "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure "}],
                },
                {"trailing-whitespace"},
            ),
            (
                {
                    "system": "Be brief.",
                    "messages": [
                        {"role": "user", "content": "hi"},
                        {"role": "assistant", "content": [{"type": "tool_use", "id": "a.b", "name": "f", "input": {}}]},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a.b", "content": "r"}]},
                    ],
                },
                {"id-format"},
            ),
            ({"messages": [{"role": "user", "content": []}, {"role": "user", "content": "x"}]}, {"empty-content"}),
            (
                {
                    "system": "Be brief.",
                    "thinking": {"type": "enabled", "budget_tokens": 1024},
                    "messages": [
                        {"role": "user", "content": "Oslo and Rome?"},
                        {
                            "role": "assistant",
                            "content": [
                                {"type": "thinking", "thinking": "Both.", "signature": "EqQBCg"},
                                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"city": "Oslo"}},
                                {"type": "tool_use", "id": "toolu_2", "name": "f", "input": {"city": "Rome"}},
                            ],
                        },
                        {
                            "role": "user",
                            "content": [
                                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "rain"},
                                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "sun"},
                            ],
                        },
                        {"role": "assistant", "content": "Rain, then sun."},
                        {"role": "user", "content": "And Lima?"},
                        {
                            "role": "assistant",
                            "content": [{"type": "tool_use", "id": "toolu_3", "name": "f", "input": {}}],
                        },
                        {
                            "role": "user",
                            "content": [{"type": "tool_result", "tool_use_id": "toolu_3", "content": "fog"}],
                        },
                    ],
                },
                {"thinking-not-first"},
            ),
        ],
    )
    def test_check_reports_what_the_adapter_reports(self, capsys, tmp_path, body, rules):
        """
        A body its reader takes but its adapter's ``check(payload)`` refuses
        (a prefill ending in a space, an id outside Anthropic's alphabet, an
        empty content list, a tool-use loop sent without its thinking while
        thinking is on) is reported by ``check`` with the same problems,
        and exits 1; ``inspect`` reports the same problems.
        """
        path = tmp_path / "request.json"
        path.write_text(json.dumps(body), encoding="utf-8")
        fmt = detect(body)
        expected = importlib.import_module(f"workingctx.adapters.{fmt}").check(body)
        assert rules == {p.rule for p in expected}
        facts = run_json(capsys, "check", str(path))
        assert not facts["valid"]
        assert [p.rule for p in expected] == [p["rule"] for p in facts["requests"][0]["problems"]]
        shift = 1 if "system" in body else 0  # the adapter counts the system prompt; the file's array does not
        assert [p.index - shift for p in expected] == [p["index"] for p in facts["requests"][0]["problems"]]
        assert facts["requests"][0]["problems"] == run_json(capsys, "inspect", str(path))["problems"]  # the same
        status, out, _ = run(capsys, "check", str(path))
        assert 1 == status
        for rule in rules:
            assert rule in out


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


def _dangling_bodies() -> list[tuple[dict, str]]:
    """
    Request bodies of each format, built with the provider SDK's types, whose
    tool call at index 1 of the body's own array has no result, and whose
    system prompt is outside that array (inside it, for Chat Completions);
    with the JSON path of that call.
    """
    anthropic_turns = [
        {"role": "user", "content": "Restart the web tier"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "restart", "input": {}}]},
        {"role": "user", "content": "Never mind, what time is it?"},
    ]
    contents = [
        types.Content(role="user", parts=[types.Part(text="Restart the web tier")]),
        types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(name="restart", args={}))]),
        types.Content(role="user", parts=[types.Part(text="Never mind, what time is it?")]),
    ]
    items = [
        {"role": "user", "content": "Restart the web tier"},
        {"type": "function_call", "call_id": "call_1", "name": "restart", "arguments": "{}"},
        {"role": "user", "content": "Never mind, what time is it?"},
    ]
    for kind, value in ((list[MessageParam], anthropic_turns), (ResponseInputParam, items)):
        TypeAdapter(kind).validate_python(value)
    TypeAdapter(list[ChatCompletionMessageParam]).validate_python(
        chat := [
            {"role": "system", "content": "Be brief."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "restart", "arguments": "{}"}}
                ],
            },
            {"role": "user", "content": "Never mind, what time is it?"},
        ]
    )
    config = types.GenerateContentConfig(system_instruction="Be brief.").model_dump(mode="json", exclude_none=True)
    return [
        (
            {"system": "Be brief.", "messages": anthropic_turns},
            "$.messages[1]",
        ),
        (
            {"config": config, "contents": [c.model_dump(mode="json", exclude_none=True) for c in contents]},
            "$.contents[1]",
        ),
        ({"instructions": "Be brief.", "input": items}, "$.input[1]"),
        ({"messages": chat}, "$.messages[1]"),
    ]


@pytest.mark.parametrize(("body", "where"), _dangling_bodies())
def test_every_command_names_a_message_where_the_file_holds_it(capsys, tmp_path, body, where):
    """
    ``check``, ``inspect`` and ``trim`` number a message by its index in the
    body's own array (``messages[i]``, ``contents[i]``, ``input[i]``), never
    counting a system prompt held outside it, and name its JSON path: a
    problem of the call at index 1 is at 1, where ``inspect`` lists that call.
    """
    path = tmp_path / "request.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    checked = run_json(capsys, "check", str(path))["requests"][0]["problems"]
    assert [(1, where, "dangling-call")] == [(p["index"], p["where"], p["rule"]) for p in checked]
    assert where in run(capsys, "check", str(path))[1]
    inspected = run_json(capsys, "inspect", str(path))
    assert [(1, where)] == [(p["index"], p["where"]) for p in inspected["problems"]]
    assert {"assistant"} == {m["role"] for m in inspected["messages"] if m["index"] == 1}
    trimmed = run_json(capsys, "trim", str(path), "--budget", "100000")
    assert [(1, "assistant"), (2, "user")] == [(m["index"], m["role"]) for m in trimmed["messages"]][-2:]
    assert sorted(trimmed["kept"] + trimmed["dropped"]) == [m["index"] for m in trimmed["messages"]]


def test_trim_of_a_repeated_exchange_names_the_newest_kept(capsys, tmp_path):
    """
    A request repeating one exchange (a status poll) trimmed to the newest
    two: ``trim`` says it keeps those, 3-6, and drops 1-2, the cache breaking
    at message 1, as the written request holds; it matched equal messages
    from the oldest and reported the newest exchange dropped.
    """
    poll = [{"role": "user", "content": "Status?"}, {"role": "assistant", "content": "All green. " * 40}]
    messages = TypeAdapter(list[ChatCompletionMessageParam]).validate_python(
        [{"role": "system", "content": "Be brief."}, *poll * 3]
    )
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"model": "gpt-4.1", "messages": messages}), encoding="utf-8")
    out = tmp_path / "trimmed.json"
    facts = run_json(capsys, "trim", str(path), "--budget", "250", "-o", str(out))
    assert ([3, 4, 5, 6], [1, 2], 1) == (facts["kept"], facts["dropped"], facts["cache_break"])
    assert "keeps 4 of 6 messages: 3-6" in facts["explain"]
    assert 5 == len(json.loads(out.read_text(encoding="utf-8"))["messages"])


def test_kept_messages_rebuilt_by_a_manager_are_matched_from_the_newest():
    """
    A manager's result holding equal messages, not the same ones, is matched
    from the newest: the repeated exchange kept is the last one.
    """
    poll = [Message("user", "Status?"), Message("assistant", "All green.")]
    rebuilt = [Message("user", "Status?"), Message("assistant", "All green.")]
    assert [2, 3] == _kept([*poll, *poll], rebuilt)
    assert [0, 3] == _kept([poll[0], *rebuilt, poll[1]], [poll[0], poll[1]])


def test_trim_output_refused_names_the_message_where_the_file_holds_it(capsys, tmp_path):
    """
    ``trim -o`` of a request whose kept window breaks the provider's rules (a
    prefill ending in a space) writes nothing and says so on one line, naming
    the message by its JSON path in the file read, not by its position in the
    trimmed context (``message 4``, with the system prompt counted).
    """
    turns = []
    for i in range(6):
        turns += [
            {"role": "user", "content": f"question {i} " * 20},
            {"role": "assistant", "content": f"answer {i} " * 20},
        ]
    turns[-1]["content"] = "Sure "
    TypeAdapter(list[MessageParam]).validate_python(turns)
    path = tmp_path / "request.jsonl"
    path.write_text(json.dumps({"model": "claude-sonnet-4-6", "system": "Be brief.", "messages": turns}) + "\n")
    out = tmp_path / "trimmed.jsonl"
    status, _, err = run(capsys, "trim", str(path), "--budget", "200", "-o", str(out))
    assert (1, False) == (status, out.exists())
    assert 1 == len(err.strip().splitlines())
    assert "request.jsonl:1: the trimmed request breaks anthropic's rules, so -o " in err
    assert "was not written: $.messages[11]: trailing-whitespace: " in err


def test_a_problem_of_a_call_points_at_its_item_in_a_responses_run(capsys, tmp_path):
    """
    A Responses message of several output items (reasoning, text, two calls)
    is numbered by its first item, and a problem of one of its calls points,
    by ``where``, at the item holding that call, not at the reasoning item
    that opens the run.
    """
    items = [
        {"role": "user", "content": "Restart the web tier"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Restarting.", "annotations": []}]},
        {"type": "function_call", "call_id": "call_1", "name": "restart", "arguments": "{}"},
        {"type": "function_call", "call_id": "call_2", "name": "status", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_2", "output": "up"},
        {"role": "user", "content": "Never mind"},
    ]  # fmt: skip
    TypeAdapter(ResponseInputParam).validate_python(items)
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"model": "gpt-4.1", "input": items}), encoding="utf-8")
    for command in ("check", "inspect"):
        facts = run_json(capsys, command, str(path))
        problems = facts["requests"][0]["problems"] if command == "check" else facts["problems"]
        assert [(1, "$.input[3]", "dangling-call")] == [(p["index"], p["where"], p["rule"]) for p in problems]
    assert [0, 1, 5, 6] == [m["index"] for m in run_json(capsys, "inspect", str(path))["messages"]]


def test_a_responses_input_of_one_text_is_message_0_not_the_prefix(capsys, tmp_path):
    """
    A Responses body whose ``input`` is one text holds one message of the
    tail: ``inspect`` numbers it 0, as ``trim`` does, and marks only the
    ``instructions`` ``P`` (it marked the text ``P`` too, a prefix message it is not).
    """
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"model": "gpt-4.1", "instructions": "Be brief.", "input": "hi"}), encoding="utf-8")
    inspected = run_json(capsys, "inspect", str(path))
    assert [("P", "prefix"), (0, "tail")] == [(m["index"], m["part"]) for m in inspected["messages"]]
    assert [0] == [m["index"] for m in run_json(capsys, "trim", str(path), "--budget", "1000")["messages"]]
    path.write_text(json.dumps({"model": "gpt-4.1", "input": "hi"}), encoding="utf-8")
    status, out, _ = run(capsys, "inspect", str(path))
    assert (0, "prefix: 0 messages, 0 tokens") == (status, out.splitlines()[4].partition(";")[0])


def _langchain_messages() -> list:
    """
    A LangChain conversation with a tool exchange, built with ``langchain_core``'s own messages.
    """
    return [
        SystemMessage("Be brief."),
        HumanMessage("Weather in Paris?", id="m1"),
        AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "c1"}]),
        ToolMessage("18C", tool_call_id="c1"),
        AIMessage("18C in Paris.", usage_metadata={"input_tokens": 30, "output_tokens": 5, "total_tokens": 35}),
        HumanMessage("And in Oslo?"),
    ]


LANGCHAIN_FORMS = {
    "model_dump": lambda messages: [m.model_dump() for m in messages],
    "dumpd": dumpd,
    "messages_to_dict": messages_to_dict,
    "state": lambda messages: {"messages": messages_to_dict(messages)},
}


@pytest.mark.parametrize("form", LANGCHAIN_FORMS)
def test_langchain_dumps_are_read_as_langchain(capsys, tmp_path, form):
    """
    LangChain messages serialized with ``model_dump()``, ``dumpd`` or
    ``messages_to_dict`` (alone or as a state's ``messages``) are LangChain
    messages, never another provider's request: they read to the context the
    messages themselves read to, ``check`` takes them, and ``trim -o`` writes
    them back in the same form.
    """
    messages = _langchain_messages()
    dumped = json.loads(json.dumps(LANGCHAIN_FORMS[form](messages)))
    assert "langchain" == detect(dumped)
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(dumped), encoding="utf-8")
    assert langchain.read(messages).assembled() == read_file(str(path)).last.assembled()
    checked = run_json(capsys, "check", str(path))
    assert ("langchain", True) == (checked["format"], checked["valid"])
    assert [3] == [m["index"] for m in run_json(capsys, "inspect", str(path))["messages"] if m["role"] == "tool"]
    out = tmp_path / "trimmed.json"
    run_json(capsys, "trim", str(path), "--budget", "30", "-o", str(out))
    written = json.loads(out.read_text(encoding="utf-8"))
    trimmed = read_file(str(out)).last
    assert trimmed.size() < len(messages) - 1
    assert written == json.loads(json.dumps(LANGCHAIN_FORMS[form](langchain.write(trimmed))))


def test_a_list_that_is_not_all_langchain_names_the_item(capsys, tmp_path):
    """
    A list of LangChain messages with an item in no serialized form of theirs
    is refused, naming the item and the forms to write.
    """
    path = tmp_path / "messages.json"
    path.write_text(json.dumps([HumanMessage("hi").model_dump(), {"role": "user", "content": "x"}]), encoding="utf-8")
    status, _, err = run(capsys, "check", str(path))
    assert 1 == status
    assert "item 1 is no LangChain message serialized with model_dump(), langchain_core.load.dumpd" in err


@pytest.mark.parametrize("form", ["model_dump", "state"])
@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda item: item.update(role="user"), "item 2 is no LangChain message serialized with"),
        (lambda item: item.update(content=5), "item 2 is no LangChain 'ai' message: content.str: Input should be"),
        (lambda item: item.update(tool_calls=[{"name": "f"}]), "item 2 is no LangChain 'ai' message: tool_call()"),
    ],
    ids=["foreign", "content", "tool_call"],
)
def test_a_damaged_langchain_item_is_named_by_its_json_path_on_one_line(capsys, tmp_path, form, damage, reason):
    """
    A LangChain list whose item is foreign, or one LangChain cannot build (a
    content that is no text, a tool call without its arguments), is refused
    on one line naming the item's JSON path in the file, not with pydantic's
    multi-line report or no place at all.
    """
    items = [m.model_dump() for m in _langchain_messages()]
    damage(items[2])
    path = tmp_path / "messages.json"
    body = {"messages": items} if form == "state" else items
    path.write_text(json.dumps(body), encoding="utf-8")
    status, _, err = run(capsys, "check", str(path))
    assert 1 == status
    where = "$.messages[2]" if form == "state" else "$[2]"
    assert f"messages.json:1: {where}: not a langchain request: {reason}" in err
    assert 1 == len(err.strip().splitlines())


@pytest.mark.parametrize("body", [{"contents": []}, {"messages": "hi"}])
def test_a_body_forced_to_langchain_without_a_list_of_messages_says_so(capsys, tmp_path, body):
    """
    ``--format langchain`` on a body with no list of messages names what was
    expected, not a bare ``'messages'`` (the KeyError it raised).
    """
    path = tmp_path / "request.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    status, _, err = run(capsys, "check", str(path), "--format", "langchain")
    assert 1 == status
    assert "request.json:1: $.messages: not a langchain request: LangChain messages are a list of serialized" in err


@pytest.mark.parametrize("where", ["config", "systemInstruction"])
def test_trim_output_keeps_a_gemini_system_instruction_where_it_was(capsys, tmp_path, where):
    """
    ``trim -o`` of a Gemini body holding its system instruction in the SDK's
    ``config`` (or as REST's ``systemInstruction``) writes the same shape:
    the instruction where it was, once, and only the contents trimmed.
    """
    sent = json.loads(Path(sample("google")).read_text(encoding="utf-8"))
    instruction = types.Content(parts=[types.Part(text=p["text"]) for p in sent["system_instruction"]["parts"]])
    contents = [types.Content.model_validate(c).model_dump(mode="json", exclude_none=True) for c in sent["contents"]]
    if where == "config":
        config = types.GenerateContentConfig(system_instruction=instruction, temperature=0.2)
        body = {
            "model": "gemini-2.5-flash",
            "contents": contents,
            "config": config.model_dump(mode="json", exclude_none=True),
        }
    else:
        body = {"systemInstruction": instruction.model_dump(mode="json", exclude_none=True), "contents": contents}
    source, out = tmp_path / "request.json", tmp_path / "trimmed.json"
    source.write_text(json.dumps(body), encoding="utf-8")
    run_json(capsys, "trim", str(source), "--budget", "1700", "-o", str(out))
    written = json.loads(out.read_text(encoding="utf-8"))
    assert list(body) == list(written)
    assert {k: v for k, v in body.items() if k != "contents"} == {k: v for k, v in written.items() if k != "contents"}
    kept = TypeAdapter(list[types.Content]).validate_python(written["contents"])
    assert 0 < len(kept) < len(contents)
    assert contents[-len(kept) :] == written["contents"]
    if where == "config":
        assert instruction == types.GenerateContentConfig.model_validate(written["config"]).system_instruction


def test_a_log_mixing_providers_checks_and_replays_each_line_under_its_own(capsys, tmp_path):
    """
    A log whose lines go to different providers is checked and replayed line
    by line under each line's own provider and model, not under the last
    line's: a Chat Completions request opening with an assistant turn (which
    OpenAI takes and Gemini refuses) is valid. ``--provider`` still puts every
    line under one; a line going to no provider of its own is refused by number.
    Its report says it is a log of both formats (it named the last line's
    format, "google"), and that the sizes it gives are the last request's.
    """
    chat = {
        "model": "gpt-4.1",
        "messages": TypeAdapter(list[ChatCompletionMessageParam]).validate_python(
            [{"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "Hi"}]
        ),
    }
    contents = [types.Content(role="user", parts=[types.Part(text="Hi")]).model_dump(mode="json", exclude_none=True)]
    gemini = {"model": "gemini-2.5-flash", "contents": contents}
    path = tmp_path / "mixed.jsonl"
    path.write_text(f"{json.dumps(chat)}\n{json.dumps(gemini)}\n", encoding="utf-8")
    facts = run_json(capsys, "check", str(path))
    assert (True, None) == (facts["valid"], facts["provider"])
    assert ["openai", "gemini"] == [r["provider"] for r in facts["requests"]]
    assert "line 1: valid under openai's rules" in run(capsys, "check", str(path))[1]
    forced = run_json(capsys, "check", str(path), "--provider", "gemini")
    assert ["first-not-user"] == [p["rule"] for p in forced["requests"][0]["problems"]]
    rows = run_json(capsys, "replay", str(path))["strategies"][0]["requests"]
    assert [("openai", "gpt-4.1"), ("gemini", "gemini-2.5-flash")] == [(r["provider"], r["model"]) for r in rows]
    assert "sent to" in run(capsys, "replay", str(path))[1]
    page = tmp_path / "report.html"
    assert 0 == run(capsys, "report", str(path), "-o", str(page))[0]
    text = page.read_text(encoding="utf-8")
    # a log, not the format of its last line; the sizes are the last request's, and said so
    assert "<p>a log of 2 requests (openai_chat, google) on openai gpt-4.1, gemini gemini-2.5-flash;" in text
    assert "the last request's prefix 0 tokens, tail 1 messages" in text
    path.write_text(f'{json.dumps(chat)}\n{{"messages": []}}\n{json.dumps(gemini)}\n', encoding="utf-8")
    status, _, err = run(capsys, "replay", str(path))
    assert 2 == status
    assert "mixed.jsonl, line 2: workingctx JSON or LangChain messages, sent to no provider of their own" in err
    path.write_text(f"{json.dumps(gemini)}\n{json.dumps(chat)}\n", encoding="utf-8")
    status, _, err = run(capsys, "replay", str(path), "--model", "gpt-4.1")
    assert 2 == status
    assert "mixed.jsonl, line 1: a request to gemini priced with gpt-4.1, a model of openai" in err


@pytest.mark.parametrize("command", ["replay", "report"])
def test_provider_and_a_model_of_another_provider_are_refused(capsys, tmp_path, command):
    """
    ``--provider P`` with a model of another provider (``--model``, the
    file's own, or a log line's) is refused (status 2) naming the model, the
    lines of a log, and the fixes, as ``--model`` of another provider than the
    file's is: it priced Claude under OpenAI's cache rules ("openai
    claude-sonnet-4-5"), and a log's GPT lines under Anthropic's.
    """
    page = ["-o", str(tmp_path / "page.html")] if command == "report" else []
    status, _, err = run(
        capsys, command, sample("anthropic"), "--provider", "openai", "--model", "claude-sonnet-4-6", *page
    )
    assert 2 == status
    assert "--model claude-sonnet-4-6 is a model of anthropic, but --provider openai replays" in err
    assert "pass --model with a model of openai, or --provider anthropic" in err
    path = _with_model(tmp_path, "anthropic", model="claude-sonnet-4-6")
    status, _, err = run(capsys, command, path, "--provider", "openai", *page)
    assert (2, True) == (status, "the file's model claude-sonnet-4-6 is a model of anthropic" in err)
    chat = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hi"}]}
    claude = {"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "Hi"}]}
    log = tmp_path / "mixed.jsonl"
    log.write_text(f"{json.dumps(chat)}\n{json.dumps(claude)}\n{json.dumps(chat)}\n", encoding="utf-8")
    status, _, err = run(capsys, command, str(log), "--provider", "anthropic", *page)
    assert 2 == status
    assert "mixed.jsonl, lines 1, 3: a request to anthropic priced with gpt-4.1, a model of openai" in err
    assert "pass --model with a model of anthropic, or replay without --provider" in err
    assert not (tmp_path / "page.html").exists()
    status, _, err = run(capsys, command, str(log), "--provider", "anthropic", "--model", "claude-sonnet-4-6", *page)
    assert (0, "") == (status, err)


def test_a_mixed_log_whose_last_line_names_no_model_is_replayed(capsys, tmp_path):
    """
    A log mixing providers whose last line names no model is replayed, that
    line priced with the last model the log names, as a line naming none
    before the last is: it was refused for naming no model, and the
    ``--model`` it asked for was refused too (one model for every line of a
    log going to two providers), so no command could replay it.
    """
    claude = {"model": "claude-sonnet-4-6", "max_tokens": 100, "messages": [{"role": "user", "content": "Hi"}]}
    TypeAdapter(list[MessageParam]).validate_python(claude["messages"])
    chat = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hi"}]}
    unnamed = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(f"{json.dumps(body)}\n" for body in (claude, chat, unnamed)), encoding="utf-8")
    rows = run_json(capsys, "replay", str(path))["strategies"][0]["requests"]
    assert [("anthropic", "claude-sonnet-4-6"), ("openai", "gpt-4.1"), ("openai", "gpt-4.1")] == [
        (r["provider"], r["model"]) for r in rows
    ]
    assert 0 == run(capsys, "report", str(path), "-o", str(tmp_path / "report.html"))[0]
    path.write_text("".join(f"{json.dumps(body)}\n" for body in (chat, claude, unnamed)), encoding="utf-8")
    status, _, err = run(capsys, "replay", str(path))
    assert 2 == status
    assert "mixed.jsonl, line 3: a request to openai priced with claude-sonnet-4-6, a model of anthropic" in err


def _resolve(body, path: str):
    """
    The value at the JSON *path* (``$.a.b[2]``) of *body*.
    """
    value = body
    for name, index in re.findall(r"\.(\w+)|\[(\d+)\]", path.removeprefix("$")):
        value = value[name] if name else value[int(index)]
    return value


@settings(max_examples=60)
@given(
    st.one_of(
        anthropic_bodies().map(lambda b: (b, "anthropic")),
        google_bodies().map(lambda b: (b, "google")),
        responses_bodies().map(lambda b: (b, "openai_responses")),
        chat_messages().map(lambda m: ({"messages": m}, "openai_chat")),
    )
)
def test_every_message_is_placed_in_the_file(case):
    """
    Law: each message a body reads to has a place in the body (a JSON path
    that resolves in it), in order, one per message; a message of the body's
    array is numbered by its index there.
    """
    body, fmt = case
    ctx = importlib.import_module(f"workingctx.adapters.{fmt}").read(body)
    where = places(body, fmt, ctx)
    assert len(ctx.assembled()) == len(where)
    for path in where:
        _resolve(body, path)
    numbered = [position(path) for path in where if position(path) is not None]
    assert numbered == sorted(set(numbered))


def _piped(monkeypatch, data: bytes) -> None:
    """
    Make *data* the standard input of the command run in-process.
    """
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def _without_paths(facts: dict) -> dict:
    return {key: value for key, value in facts.items() if key not in {"file", "a", "b"}}


class TestStandardInput:
    @pytest.mark.parametrize(
        ("command", "suffix", "extra"),
        [
            ("inspect", "json", ["--model", "gpt-4.1"]),
            ("check", "json", []),
            ("check", "jsonl", []),
            ("trim", "json", ["--budget", "1500"]),
            ("replay", "json", ["--model", "gpt-4.1"]),
            ("replay", "jsonl", ["--model", "gpt-4.1"]),
        ],
    )
    def test_dash_reads_standard_input_as_the_file(self, capsys, monkeypatch, command, suffix, extra):
        """
        ``-`` as FILE reads standard input: the facts are those of the file
        piped in, a log when it holds one body per line; ``-`` was a missing file.
        """
        path = sample("openai_chat", suffix)
        expected = run_json(capsys, command, path, *extra)
        _piped(monkeypatch, Path(path).read_bytes())
        facts = run_json(capsys, command, "-", *extra)
        assert "-" == facts["file"]
        assert _without_paths(expected) == _without_paths(facts)

    @pytest.mark.parametrize("side", [0, 1])
    def test_diff_reads_either_side_from_standard_input(self, capsys, monkeypatch, side):
        """
        ``diff - B`` and ``diff A -`` read that side from standard input.
        """
        files = [sample("openai_chat", "jsonl"), sample("openai_chat")]
        expected = run_json(capsys, "diff", *files)
        _piped(monkeypatch, Path(files[side]).read_bytes())
        argv = [*files]
        argv[side] = "-"
        assert _without_paths(expected) == _without_paths(run_json(capsys, "diff", *argv))

    def test_demo_and_report_read_standard_input(self, capsys, monkeypatch, tmp_path):
        """
        ``demo -`` reports on the request piped in, and ``report - -o PAGE``
        writes the page of it, titled ``<stdin>``.
        """
        path = sample("anthropic")
        status, expected, _ = run(capsys, "demo", path)
        assert 0 == status
        _piped(monkeypatch, Path(path).read_bytes())
        assert (0, expected, "") == run(capsys, "demo", "-")
        _piped(monkeypatch, Path(path).read_bytes())
        page = tmp_path / "report.html"
        status, _, err = run(capsys, "report", "-", "--model", MODELS["anthropic"], "-o", str(page))
        assert 0 == status, err
        assert "workingctx report: &lt;stdin&gt;" in page.read_text(encoding="utf-8")

    @pytest.mark.parametrize(
        ("data", "reason"),
        [
            (
                b"",
                (
                    "error: <stdin>: empty: pipe a request body into standard input (cat request.json | workingctx "
                    "check -)"
                ),
            ),
            (b" \n\t\n", "error: <stdin>: empty: pipe a request body into standard input"),
            (b'{"messages": [', "error: <stdin>:1: not valid JSON: "),
            (b'{"model": "gpt-4.1"}', "error: <stdin>:1: an object that is no known transcript format"),
            (b'{"messages": []}\n[1]\n', "error: <stdin>:2: "),
            (b"\xff", "error: <stdin>:1: not UTF-8 text: byte 0xff"),
        ],
    )
    def test_bad_standard_input_is_named_stdin(self, capsys, monkeypatch, data, reason):
        """
        Bad input piped in is reported as a file's is, named ``<stdin>`` (with
        the line), and empty input says what to pipe in.
        """
        _piped(monkeypatch, data)
        status, out, err = run(capsys, "check", "-")
        assert (1, "") == (status, out)
        assert err.startswith(reason), err
        assert 1 == len(err.splitlines())

    @pytest.mark.parametrize(
        ("argv", "reason"),
        [
            (["diff", "-", "-"], "error: diff - -: standard input is read once; give one of A and B as a file"),
            (["trim", "PATH", "--budget", "1500", "-o", "-"], "error: -o -: trim writes a file, not standard output"),
            (["report", "PATH", "--model", "gpt-4.1", "-o", "-"], "error: -o -: report writes a file"),
        ],
    )
    def test_impossible_uses_of_dash_are_bad_usage(self, capsys, monkeypatch, tmp_path, argv, reason):
        """
        Both sides of ``diff`` from standard input, and ``-o -``, are refused
        as bad usage, and no file named ``-`` is written.
        """
        monkeypatch.chdir(tmp_path)
        _piped(monkeypatch, Path(sample("openai_chat")).read_bytes())
        status, _, err = run(capsys, *(sample("openai_chat") if word == "PATH" else word for word in argv))
        assert 2 == status
        assert err.startswith(reason), err
        assert [] == list(tmp_path.iterdir())

    def test_the_program_reads_a_pipe(self, tmp_path):
        """
        ``cat request.json | python -m workingctx check -`` checks the request
        piped in; an empty pipe fails with the error naming ``<stdin>`` and the fix.
        """
        command = [sys.executable, "-m", "workingctx", "check", "-", "--json"]
        text = Path(sample("google")).read_text(encoding="utf-8")
        result = subprocess.run(
            command, input=text, capture_output=True, text=True, check=False, timeout=120, cwd=tmp_path
        )
        assert 0 == result.returncode, result.stderr
        facts = json.loads(result.stdout)
        assert (True, "-") == (facts["valid"], facts["file"])
        result = subprocess.run(
            command, input="", capture_output=True, text=True, check=False, timeout=120, cwd=tmp_path
        )
        assert (1, "") == (result.returncode, result.stdout)
        assert result.stderr.startswith("error: <stdin>: empty: pipe a request body into standard input"), result.stderr


class TestEmptyRequest:
    def test_check_applies_the_rules_of_the_provider_it_names(self, capsys, tmp_path):
        """
        ``check`` of a Chat Completions request with no messages reports the
        empty request under OpenAI's rules (it was checked as workingctx JSON,
        under no provider's).
        """
        path = tmp_path / "request.json"
        path.write_text(json.dumps({"model": "gpt-4.1", "messages": []}), encoding="utf-8")
        status, out, _ = run(capsys, "check", str(path), "--json")
        facts = json.loads(out)
        assert 1 == status
        assert ("openai_chat", "openai") == (facts["format"], facts["provider"])
        assert ["empty"] == [p["rule"] for p in facts["requests"][0]["problems"]]

    @pytest.mark.parametrize(
        ("argv", "verb"),
        [
            (["trim", "--budget", "100"], "trim"),
            (["replay"], "replay"),
            (["report", "-o", "OUT"], "report"),
            (["demo"], "report on"),
        ],
    )
    @pytest.mark.parametrize(
        ("body", "where"),
        [
            ({"model": "gpt-4.1", "messages": []}, "$.messages"),
            ({"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": []}, "$.messages"),
            ({"model": "gemini-2.5-flash", "contents": []}, "$.contents"),
            ({"model": "gpt-4.1", "input": []}, "$.input"),
            ({"messages": []}, "$.messages"),
        ],
    )
    def test_a_request_with_no_message_has_nothing_to_do(self, capsys, tmp_path, argv, verb, body, where):
        """
        ``trim``, ``replay``, ``report`` and ``demo`` of a request holding no
        message say there is nothing to do and where the messages go, and
        write nothing; they reported an empty trim and a replay of no request.
        """
        path = tmp_path / "request.json"
        path.write_text(json.dumps(body), encoding="utf-8")
        command, *rest = argv
        out_file = tmp_path / "out.html"
        rest = [str(out_file) if word == "OUT" else word for word in rest]
        status, out, err = run(capsys, command, str(path), *rest)
        assert (1, "") == (status, out), err
        expected = f"error: {path}:1: {where}: the request holds no message, so there is nothing to {verb}; "
        assert err.startswith(expected), err
        assert not out_file.exists()
