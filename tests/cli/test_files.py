"""
Tests for the files the command reads and writes: each format detected, logs
and standard input read, bad input named by its file, line and JSON path, each
message placed where the file holds it, and outputs written whole or not at all.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import io
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

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

from tests.cli.commands import MODELS, run, run_json, sample
from tests.strategies import block_transcripts, json_values, messages, prefixes, scratchpads, transcripts
from tests.wire_strategies import anthropic_bodies, chat_messages, google_bodies, responses_bodies
from workingctx.adapters import langchain
from workingctx.cli import main
from workingctx.cli._facts import trim_facts
from workingctx.cli._files import FORMATS, PROVIDERS, detect, places, position, read_file, write_context
from workingctx.exceptions import ProviderError
from workingctx.serialization import unstructure


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
