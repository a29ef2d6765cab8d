"""
Runs to checkpoint, for the persistence tests: contexts of a few tool-using
turns, a run saved after every turn, and a recorded context of one exchange.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from workingctx import Checkpoint, Message, PrefixContext, ToolCall, WorkingContext
from workingctx.persistence import CheckpointStore

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def run_context(turns: int, *, journal: bool = True) -> WorkingContext:
    """
    A small tool-using run: turns of a question, a call, its result, an answer.
    """
    ctx = WorkingContext(prefix=PrefixContext("You are careful."))
    for turn in range(turns):
        ctx.append(
            Message("user", f"question {turn}"),
            Message.assistant(tool_calls=[ToolCall(f"c{turn}", "lookup", {"q": turn})]),
            Message.tool(f"result {turn}", call_id=f"c{turn}"),
            Message("assistant", f"answer {turn}"),
        )
        ctx.note("turn", turn)
        if journal:
            ctx.journal.record({"kind": "turn", "n": turn})
    return ctx


def arguments_run() -> WorkingContext:
    ctx = WorkingContext().append(
        Message("user", "weather?"),
        Message.assistant(tool_calls=[ToolCall("c1", "weather", {"city": "Oslo", "units": "C", "days": 3})]),
        Message.tool("cold", call_id="c1"),
    )
    ctx.journal.record({"kind": "turn", "n": 1})
    return ctx


def turns(ctx: WorkingContext, start: int, count: int) -> WorkingContext:
    """
    Append *count* tool-using turns (a question, a call, its result, one shared answer).
    """
    for turn in range(start, start + count):
        ctx.append(
            Message("user", f"question {turn}"),
            Message.assistant(tool_calls=[ToolCall(f"c{turn}", "lookup", {"q": turn})]),
            Message.tool(f"result {turn}", call_id=f"c{turn}"),
            Message("assistant", "noted"),
        )
        ctx.note("turn", turn)
        ctx.journal.record({"kind": "turn", "n": turn})
    return ctx


def run(store: CheckpointStore, count: int, *, thread: str | None = None) -> list[Checkpoint]:
    """
    A run checkpointed after every turn, each checkpoint continuing the last.
    """
    ctx = WorkingContext(prefix=PrefixContext("You are careful."))
    saved: list[Checkpoint] = []
    for turn in range(count):
        turns(ctx, turn, 1)
        checkpoint = Checkpoint.capture(
            ctx,
            parent=saved[-1] if saved else None,
            metadata={"turn": turn},
            created_at=T0 + timedelta(seconds=turn),
        )
        store.save(checkpoint, thread=thread)
        saved.append(checkpoint)
    return saved


def recorded(context_id: str, text: str) -> WorkingContext:
    """
    A recorded context of one exchange.
    """
    return WorkingContext(record=True, id=context_id).append(Message("user", text), Message("assistant", "ok"))
