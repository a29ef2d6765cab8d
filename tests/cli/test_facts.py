"""
Tests for the facts the commands report: ``inspect``, ``check``, ``trim``,
``diff`` and ``replay`` on the shipped samples of every format and on logs,
the messages a trim keeps, and the problems ``check`` finds in a file as written.
"""

from __future__ import annotations

import importlib
import itertools
import json
from pathlib import Path

import pytest
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessageParam
from pydantic import TypeAdapter

from tests.cli.commands import MODELS, run, run_json, sample
from workingctx import Message
from workingctx.cli._facts import _kept
from workingctx.cli._files import FORMATS, detect, read_file


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
