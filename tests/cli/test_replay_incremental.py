"""
``workingctx replay`` gives the same output, byte for byte, with every
incremental path of the replay turned off: layouts laid out from scratch for
every request, a trimmed tail indexed and counted again, and every price
worked out by genai-prices' own calculation.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from workingctx import Message, ToolCall, WorkingContext
from workingctx.adapters import anthropic
from workingctx.cache import _layout, _plan
from workingctx.cli import main
from workingctx.scopes._index import TailIndex
from workingctx.tokens import RunningCount
from workingctx.validity import RuleState

_WORDS = [
    "cache",
    "window",
    "budget",
    "trim",
    "request",
    "token",
    "prefix",
    "tail",
    "exchange",
    "result",
    "call",
    "answer",
    "latency",
    "region",
]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _transcript(turns: int, seed: int) -> list[Message]:
    """
    *turns* user turns, each a question, one or two rounds of one to three
    tool calls with their results, and an answer.
    """
    rng = random.Random(seed)
    out = [Message("user", _text(rng, 12) + "?")]
    for turn in range(turns):
        if turn:
            out.append(Message("user", _text(rng, rng.randint(4, 20)) + "?"))
        for step in range(rng.randint(1, 2)):
            calls = tuple(
                ToolCall(f"call_{turn}_{step}_{k}", "lookup", {"q": _text(rng, 3)}) for k in range(rng.randint(1, 3))
            )
            out.append(Message("assistant", _text(rng, 5) if rng.random() < 0.4 else "", tool_calls=calls))
            out.extend(
                Message("tool", _text(rng, rng.randint(20, 200)), tool_call_id=call.id, name=call.name)
                for call in calls
            )
        out.append(Message("assistant", _text(rng, rng.randint(10, 60))))
    return out


def _replay(capsys: pytest.CaptureFixture[str], path: Path, *argv: str) -> str:
    status = main(["replay", str(path), "--json", *argv])
    out = capsys.readouterr().out
    assert status == 0
    return out


def _from_scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    """
    Turn every incremental path of a replay off.
    """
    lay_out = _layout.lay_out
    monkeypatch.setattr(_plan, "lay_out", lambda messages, counter, *_reused: lay_out(messages, counter))
    monkeypatch.setattr(TailIndex, "rebased", lambda *_args: None)
    monkeypatch.setattr(RuleState, "rebased", lambda *_args: None)
    monkeypatch.setattr(RunningCount, "rebased", lambda *_args: None)
    monkeypatch.setattr("workingctx.pricing._genai_rates", lambda _model: (None, None))


@pytest.mark.parametrize(
    ("model", "window", "extra"),
    [
        ("claude-sonnet-4-5", "9000", ()),
        ("claude-sonnet-4-6", "6000", ("--low", "2500")),
        ("claude-sonnet-4-5", "7000", ("--gap", "200")),
    ],
)
def test_replay_output_equals_the_replay_from_scratch(capsys, monkeypatch, tmp_path, model, window, extra):
    """
    The facts of a replay whose managers cut the tail again and again (a
    system prompt in the prefix, a tool-heavy transcript) are the same bytes
    as those of the replay with layouts, indexes, sums and prices made afresh.
    """
    ctx = WorkingContext()
    ctx.extend([Message("system", "Answer from the tools. " * 40), *_transcript(60, seed=len(window))])
    body = anthropic.write(ctx)
    body["model"] = model
    path = tmp_path / "run.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    argv = ("--window", window, *extra)
    incremental = _replay(capsys, path, *argv)
    facts = json.loads(incremental)
    cut = [s["cuts"] for s in facts["strategies"][1:]]
    assert all(len(cuts) > 3 for cuts in cut), cut  # both managers cut the tail many times
    _from_scratch(monkeypatch)
    assert _replay(capsys, path, *argv) == incremental
