"""
Recorded contexts for the history tests: a recorded context, an assistant turn calling one tool,
the state a replay must reproduce, and random agent programs run on a recorded context step by step.
"""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import strategies as st

from tests.strategies import json_values
from workingctx import (
    LastNTurns,
    Message,
    PrefixContext,
    SummaryContextManager,
    TokenBudgetContextManager,
    ToolCall,
    Usage,
    WorkingContext,
)


def recorded(**kwargs: Any) -> WorkingContext:
    return WorkingContext(record=True, **kwargs)


def call(call_id: str, name: str = "search", usage: Usage | None = None) -> Message:
    return Message.assistant(tool_calls=[ToolCall(call_id, name, {"q": call_id})], usage=usage)


def state(ctx: WorkingContext) -> tuple[Any, ...]:
    """
    Everything a replay must reproduce.
    """
    rec = ctx._history
    assert rec is not None
    return (
        ctx.digest(),
        ctx.messages,
        dict(ctx.scratchpad),
        ctx.prefix,
        ctx.finished,
        ctx.answer,
        ctx.usage,
        ctx.turn,
        ctx.id,
        ctx.parent_id,
        tuple(call.id for call in ctx.pending_calls),
        tuple(rec.waiting),
    )


def assert_replays(ctx: WorkingContext) -> None:
    replayed = WorkingContext.replay(ctx.history)
    assert state(ctx) == state(replayed)
    assert ctx.history == replayed.history


# -- the property: random recorded programs ------------------------------------------------------

_OUTCOMES = st.sampled_from(["done", "error", "denied", "cancelled", "interrupted"])
_KEYS = st.sampled_from(["a", "b", "plan", "x"])


@st.composite
def steps(draw: st.DrawFn) -> tuple[Any, ...]:
    """
    One operation of an agent program on a recorded context.
    """
    return draw(
        st.one_of(
            st.tuples(st.just("user"), st.text(max_size=8)),
            st.tuples(st.just("notice"), st.text(max_size=8)),
            st.tuples(st.just("reply"), st.integers(0, 2), st.integers(0, 50)),
            st.tuples(st.just("result"), _OUTCOMES),
            st.tuples(st.just("close"), _OUTCOMES.filter(lambda o: o != "done")),
            st.tuples(st.just("note"), _KEYS, json_values(4)),
            st.tuples(st.just("edit"), _KEYS, json_values(4), st.booleans(), st.booleans()),
            st.tuples(st.just("trim"), st.integers(0, 6)),
            st.tuples(st.just("summary"), st.integers(0, 3)),
            st.tuples(st.just("clear")),
            st.tuples(st.just("merge"), st.sampled_from(["concat", "union", "delta"]), st.integers(0, 3)),
            st.tuples(st.just("restore"), st.integers(-40, 40)),
            st.tuples(st.just("finish"), json_values(3)),
            st.tuples(st.just("error"), st.text(max_size=5)),
            st.tuples(st.just("switch"), st.sampled_from(["fork", "slice", "prefix"])),
        )
    )


class _Program:
    def __init__(self) -> None:
        self.ctx = recorded(prefix=PrefixContext("sys"), messages=[Message("user", "task")])
        self.counter = 0

    def new_id(self) -> str:
        self.counter += 1
        return f"c{self.counter}"

    def run(self, step: tuple[Any, ...]) -> None:
        ctx = self.ctx
        op = step[0]
        pending = [call.id for call in ctx.pending_calls]
        if op == "user":
            ctx.append(Message("user", step[1]))
        elif op == "notice":
            ctx.append(Message.notice(step[1]))
        elif op == "reply":
            calls = [ToolCall(self.new_id(), "t", {"n": i}) for i in range(step[1])]
            ctx.append(Message.assistant("ok" if not calls else "", tool_calls=calls, usage=Usage(step[2], 1)))
        elif op == "result" and pending:
            ctx.append_result(Message.tool("out", call_id=pending[0]), outcome=step[1])
        elif op == "close":
            ctx.close_pending(step[1])
        elif op == "note":
            ctx.note(step[1], step[2])
        elif op == "edit":
            _, key, value, delete, fail = step
            with contextlib.suppress(KeyError), ctx.edit_notes() as notes:
                notes[key] = value
                if delete and "a" in notes:
                    del notes["a"]
                if fail:
                    raise KeyError(key)
        elif op == "trim":
            TokenBudgetContextManager(step[1] * 15 + 20).trim_context(ctx)
        elif op == "summary":

            async def summarize(messages: Any, *, prompt: str, max_tokens: int) -> str:  # noqa: ARG001
                return f"{len(messages)} messages"

            SummaryContextManager(summarize, max_messages=1, keep_recent=step[1]).trim_context(ctx)
        elif op == "clear":
            ctx.clear_messages()
        elif op == "merge":
            child = ctx.fork()
            for i in range(step[2]):
                child.append(Message("user", f"child {i}"), Message.assistant(f"a{i}", usage=Usage(2, 3)))
            child.note("child", step[2])
            ctx.merge(child, mode=step[1])
        elif op == "restore":
            ctx.restore(step[1])
        elif op == "finish":
            ctx.finish(step[1])
        elif op == "error":
            ctx.record_error(ValueError(step[1]), during="tool")
        elif op == "switch":
            if step[1] == "fork":
                self.ctx = ctx.fork()
            elif step[1] == "slice":
                self.ctx = ctx.slice(LastNTurns(2))
            else:
                self.ctx = ctx.with_prefix(PrefixContext("other"))
