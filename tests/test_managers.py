"""
Tests for workingctx.managers: the context managers as scope compositions.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import logging
import multiprocessing
import pickle
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import attrs
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from tests.strategies import block_transcripts, positional_scopes, predicate_scopes, scope_transcripts, transcripts
from tests.wire_strategies import solid
from workingctx import ApproxTokenCounter, LastNTurns, Message, PrefixContext, ToolCall, WorkingContext, explain
from workingctx.adapters import anthropic, google, openai_chat, openai_responses
from workingctx.exceptions import InvalidMessageError, ScopeError
from workingctx.managers import (
    SUMMARY_NAME,
    BaseContextManager,
    BudgetCut,
    MessageContextManager,
    SummaryContextManager,
    TokenBudgetContextManager,
    _systems_first,
)
from workingctx.scopes import Tagged, TokenBudget, surviving_indices
from workingctx.scopes._index import TailIndex
from workingctx.snapshot import common_prefix_length
from workingctx.validity import _is_empty

# -- helpers -------------------------------------------------------------------------

ADAPTERS = (openai_chat, openai_responses, anthropic, google)
"""The providers' writers: a trim leaves each of them something to send."""

tool_heavy_transcripts = transcripts(max_turns=8) | block_transcripts()
"""Valid transcripts: OpenAI-shaped tool messages, or results carried by user messages, reasoning before calls."""


def problems(before: Sequence[Message], after: Sequence[Message], *, summary: bool = False) -> list[str]:
    """
    Every way *after* is not a valid trim of *before*: a lost or reordered
    system message, a tool result without its call, a kept call without one of
    its results, or a message that is not from *before* (the summary aside).
    """
    found: list[str] = []
    keep_sys = [m for m in before if m.role == "system" and not (summary and m.name == SUMMARY_NAME)]
    out_sys = [m for m in after if m.role == "system" and not (summary and m.name == SUMMARY_NAME)]
    if len(keep_sys) != len(out_sys) or any(a is not b for a, b in zip(keep_sys, out_sys, strict=False)):
        found.append("system messages lost or reordered")
    if summary and sum(1 for m in after if m.role == "system" and m.name == SUMMARY_NAME) > 1:
        found.append("more than one summary")
    rest = iter([m for m in before if m.role != "system"])
    for message in after:
        if message.role != "system" and not any(message is candidate for candidate in rest):
            found.append(f"{message!r} is not in order from the input")
            break
    asked: set[str] = set()
    for message in after:
        found.extend(f"orphaned result for {r!r}" for r in message.result_ids if r not in asked)
        asked.update(message.call_ids)
    kept = {id(m) for m in after}
    for message in before:
        if id(message) not in kept:
            found.extend(f"call {r!r} kept without its result" for r in message.result_ids if r in asked)
    return found


def conversation(*texts: str) -> list[Message]:
    """
    A system prompt, then alternating user and assistant messages.
    """
    out = [Message("system", "You are terse.")]
    for i, text in enumerate(texts):
        out.append(Message("user" if i % 2 == 0 else "assistant", text))
    return out


def tool_turn(n: int, *, final: bool = True) -> list[Message]:
    """
    One user turn with a tool exchange, answered when *final*.
    """
    call = ToolCall(f"c{n}", "lookup", {"q": n})
    out = [
        Message("user", f"question {n}"),
        Message("assistant", tool_calls=[call]),
        Message("tool", f"result {n}", tool_call_id=f"c{n}"),
    ]
    if final:
        out.append(Message("assistant", f"answer {n}"))
    return out


T = TypeVar("T")


def _summarize_into(manager: SummaryContextManager, queue: Any) -> None:
    """
    In a child process: summarize a conversation the sync way and put the second message's name in *queue*.
    """
    queue.put(manager.trim_context(WorkingContext(messages=conversation("q1", "a1", "q2", "a2"))).messages[1].name)


def _in_thread(call: Callable[[], T], timeout: float = 10) -> T:
    """
    The result of *call* run in another thread (what it raises, raised here),
    failing the test when it takes past *timeout* seconds (a hang).
    """
    out: list[tuple[T | None, BaseException | None]] = []

    def run() -> None:
        try:
            out.append((call(), None))
        except BaseException as exc:  # raised again in the caller
            out.append((None, exc))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout)
    if not out:
        pytest.fail("the call hung")
    result, raised = out[0]
    if raised is not None:
        raise raised
    return cast("T", result)


async def echo_summarizer(messages: Sequence[Message], *, prompt: str, max_tokens: int) -> str:
    """
    A deterministic summarizer: the texts it was given, joined.
    """
    assert prompt
    assert max_tokens > 0
    return " / ".join(m.text() or m.role for m in messages)


def recording(result: str = "summary"):
    """
    A summarizer returning *result*, and the list of the message batches it was given.
    """
    calls: list[tuple[Message, ...]] = []

    async def summarize(messages: Sequence[Message], **_settings: object) -> str:
        calls.append(tuple(messages))
        return result

    return calls, summarize


# -- the base class ------------------------------------------------------------------


class TestBaseContextManager:
    def test_subclass_with_both_methods_works(self):
        """
        A subclass implementing both trims is a context manager.
        """

        class KeepLast(BaseContextManager[WorkingContext]):
            def trim_context(self, ctx: WorkingContext) -> WorkingContext:
                return ctx.slice(LastNTurns(1))

            async def atrim_context(self, ctx: WorkingContext) -> WorkingContext:
                return self.trim_context(ctx)

        ctx = WorkingContext(messages=conversation("q1", "a1", "q2"))
        assert ["q2"] == [m.text() for m in KeepLast().trim_context(ctx).messages if m.role == "user"]

    @pytest.mark.parametrize("implemented", ["trim_context", "atrim_context"])
    def test_only_one_method_is_a_type_error_that_says_what_to_do(self, implemented):
        """
        Common error: implementing only one of the two methods raises TypeError
        at instantiation, naming the missing one and how to write it.
        """

        async def atrim(_self, ctx):
            return ctx

        body = {"trim_context": lambda _self, ctx: ctx} if implemented == "trim_context" else {"atrim_context": atrim}
        half = type("Half", (BaseContextManager,), body)
        missing = "atrim_context" if implemented == "trim_context" else "trim_context"

        with pytest.raises(TypeError, match=rf"Half: it does not implement {missing};.*implements both"):
            half()

    def test_abstract_base_cannot_be_instantiated(self):
        """
        The base itself is abstract.
        """
        with pytest.raises(TypeError, match="atrim_context and trim_context"):
            BaseContextManager()


# -- MessageContextManager -------------------------------------------------------------


class TestMessageContextManager:
    def test_keeps_the_system_prompt_and_the_last_two_user_turns(self, capsys):
        """
        The system prompt first, then the last two user turns.
        """
        ctx = WorkingContext(
            messages=[
                Message("system", "You are terse."),
                Message("user", "First question"),
                Message("assistant", "First answer"),
                Message("user", "Second question"),
                Message("assistant", "Second answer"),
                Message("user", "Third question"),
            ]
        )
        manager = MessageContextManager(max_messages=2)
        trimmed = manager.trim_context(ctx)

        for msg in trimmed.messages:
            print(msg.role, "|", msg.text())
        assert (
            "system | You are terse.\nuser | Second question\nassistant | Second answer\nuser | Third question\n"
            == capsys.readouterr().out
        )

    def test_returns_the_same_context_with_prefix_and_notes(self):
        """
        Trimming edits the context in place: the same object, prefix and
        scratchpad untouched.
        """
        prefix = PrefixContext(system_prompt="House rules.")
        ctx = WorkingContext(prefix=prefix, messages=conversation("q1", "a1", "q2", "a2", "q3"))
        ctx.note("ticket", "ENG-1")

        out = MessageContextManager(max_messages=1).trim_context(ctx)

        assert out is ctx
        assert prefix is ctx.prefix
        assert "ENG-1" == ctx.get("ticket")
        assert ["You are terse.", "q3"] == [m.text() for m in ctx.messages]

    def test_unchanged_within_the_limit(self):
        """
        With as many user turns as allowed, the context is left exactly as it
        was (even a system message in the middle stays where it is).
        """
        messages = [*conversation("q1", "a1"), Message("system", "later rule"), Message("user", "q2")]
        ctx = WorkingContext(messages=messages)
        before = ctx.messages

        MessageContextManager(max_messages=2).trim_context(ctx)

        assert before is ctx.messages

    def test_system_messages_are_never_trimmed_and_placed_first(self):
        """
        A system message from an old turn survives and moves to the front with
        the others.
        """
        messages = [
            Message("system", "rule 1"),
            Message("user", "q1"),
            Message("system", "rule 2"),
            Message("assistant", "a1"),
            Message("user", "q2"),
            Message("system", "rule 3"),
            Message("assistant", "a2"),
        ]
        ctx = WorkingContext(messages=messages)

        MessageContextManager(max_messages=1).trim_context(ctx)

        assert ["rule 1", "rule 2", "rule 3", "q2", "a2"] == [m.text() for m in ctx.messages]

    def test_zero_keeps_system_messages_and_the_newest_user_message(self):
        """
        max_messages=0 keeps the system messages, and the newest user message:
        a request needs one, so a conversation is never emptied.
        """
        ctx = WorkingContext(messages=conversation("q1", "a1"))
        MessageContextManager(max_messages=0).trim_context(ctx)
        assert ["You are terse.", "q1"] == [m.text() for m in ctx.messages]

    def test_remove_tool_msgs_drops_completed_sequences_only(self):
        """
        With remove_tool_msgs, a completed tool sequence (call, result, final
        answer) is removed; a pending one is kept whole.
        """
        messages = [Message("system", "s"), *tool_turn(1), *tool_turn(2, final=False)]
        ctx = WorkingContext(messages=messages)

        MessageContextManager(max_messages=5, remove_tool_msgs=True).trim_context(ctx)

        assert ["s", "question 1", "question 2", "", "result 2"] == [m.text() for m in ctx.messages]

    def test_remove_tool_msgs_before_counting(self):
        """
        Tool sequences are removed and the window is applied in one trim.
        """
        messages = [Message("system", "s"), *tool_turn(1), *tool_turn(2), *tool_turn(3)]
        ctx = WorkingContext(messages=messages)

        MessageContextManager(max_messages=2, remove_tool_msgs=True).trim_context(ctx)

        assert ["s", "question 2", "question 3"] == [m.text() for m in ctx.messages]

    def test_scope_reads_as_a_composition(self):
        """
        The manager is a composition of scopes, printable.
        """
        assert "ValidRequest(WholeExchanges(LastNTurns(3) & ~CompletedToolSequences(), mode='drop'))" == str(
            MessageContextManager(3, remove_tool_msgs=True).scope_for(WorkingContext())
        )

    def test_async_matches_sync(self):
        """
        atrim_context gives the same result as trim_context.
        """
        a = WorkingContext(messages=conversation("q1", "a1", "q2", "a2", "q3"))
        b = WorkingContext(messages=conversation("q1", "a1", "q2", "a2", "q3"))
        manager = MessageContextManager(max_messages=2)
        assert manager.trim_context(a).messages == asyncio.run(manager.atrim_context(b)).messages

    @pytest.mark.parametrize(
        ("kwargs", "error", "match"),
        [
            ({"max_messages": -1}, ScopeError, "max_messages must be 0 or more, got -1"),
            ({"max_messages": "10"}, TypeError, "max_messages must be an int, got '10'"),
            ({"remove_tool_msgs": 1}, TypeError, "remove_tool_msgs must be True or False, got 1"),
        ],
    )
    def test_bad_settings(self, kwargs, error, match):
        """
        A bad setting is refused with the value and what is expected.
        """
        with pytest.raises(error, match=match):
            MessageContextManager(**kwargs)

    def test_not_a_context(self):
        """
        A plain list is refused with the fix.
        """
        with pytest.raises(TypeError, match=r"WorkingContext\(messages=\.\.\.\)"):
            MessageContextManager().trim_context(conversation("q"))  # type: ignore[arg-type]

    @given(tool_heavy_transcripts, st.integers(0, 6), st.booleans())
    def test_output_is_always_valid(self, messages, n, remove):
        """
        Property: over random tool-heavy transcripts, the output keeps every
        system message, orphans nothing, and is the input's order.
        """
        ctx = WorkingContext(messages=messages)
        MessageContextManager(max_messages=n, remove_tool_msgs=remove).trim_context(ctx)
        assert [] == problems(messages, ctx.messages)

    @given(transcripts(max_turns=8), st.integers(0, 6))
    def test_keeps_at_most_n_user_turns(self, messages, n):
        """
        Property: after a trim, at most max(n, turns) user messages remain,
        and exactly n when there were more (at least one: a request needs a user message).
        """
        users = sum(1 for m in messages if m.role == "user")
        ctx = WorkingContext(messages=messages)
        MessageContextManager(max_messages=n).trim_context(ctx)
        assert min(users, max(n, 1)) == sum(1 for m in ctx.messages if m.role == "user")


# -- TokenBudgetContextManager -----------------------------------------------------------


class TestTokenBudgetContextManager:
    def test_unchanged_under_the_high_watermark(self):
        """
        Below max_tokens nothing changes, not even the tuple of messages.
        """
        ctx = WorkingContext(messages=conversation("q1", "a1", "q2"))
        before = ctx.messages
        TokenBudgetContextManager(ctx.count_tokens()).trim_context(ctx)
        assert before is ctx.messages

    def test_cuts_to_the_low_watermark_on_a_user_turn(self):
        """
        Past max_tokens, the tail is cut to fit the low watermark, starting on
        a user turn, system message kept.
        """
        messages = [Message("system", "s")]
        for n in range(10):
            messages.extend(tool_turn(n))
        ctx = WorkingContext(messages=messages)
        manager = TokenBudgetContextManager(ctx.count_tokens() - 1, low_watermark=80)

        manager.trim_context(ctx)

        assert ctx.count_tokens() <= 80
        assert ["system", "user"] == [m.role for m in ctx.messages[:2]]
        assert [] == problems(messages, ctx.messages)

    def test_prefix_counts_against_the_budget(self):
        """
        The watermarks are for the whole request: the prefix's tokens are
        taken from the budget of the tail.
        """
        long_prefix = PrefixContext(system_prompt="rules " * 40)
        a = WorkingContext(messages=conversation(*[f"message {i}" for i in range(20)]))
        b = WorkingContext(prefix=long_prefix, messages=a.messages)
        manager = TokenBudgetContextManager(100, low_watermark=90)
        manager.trim_context(a)
        manager.trim_context(b)
        assert b.size() < a.size()
        assert b.count_tokens() <= 90 or b.size() == 1

    def test_cache_stable_between_cuts(self):
        """
        A growing conversation under the watermark manager: every request
        either extends the previous one (sharing its whole prefix) or is a
        cut down to the low watermark; cuts are rare.
        """
        manager = TokenBudgetContextManager(600, low_watermark=300)
        ctx = WorkingContext(prefix=PrefixContext(system_prompt="Be brief."))
        previous = ctx.freeze()
        cuts = 0
        for n in range(60):
            ctx.extend(tool_turn(n))
            manager.trim_context(ctx)
            current = ctx.freeze()
            shared = common_prefix_length(previous, current)
            if shared < len(previous.messages) + 1:
                cuts += 1
                assert ctx.count_tokens() <= 300
            assert ctx.count_tokens() <= 600
            previous = current
        assert 0 < cuts < 15

    def test_low_defaults_to_half(self):
        """
        The low watermark defaults to half the high one.
        """
        assert 500 == TokenBudgetContextManager(1000).low_watermark

    def test_own_counter(self):
        """
        A counter other than the context's is used for both the check and the cut.
        """

        class Doubled(ApproxTokenCounter):
            @property
            def name(self) -> str:
                return "doubled"

            def count_message(self, message: Message) -> int:
                return 2 * super().count_message(message)

            def count(self, messages):
                return sum(self.count_message(m) for m in messages)

        ctx = WorkingContext(messages=conversation(*[f"message {i}" for i in range(20)]))
        tokens = ctx.count_tokens()
        TokenBudgetContextManager(tokens, counter=Doubled()).trim_context(ctx)
        assert Doubled().count(ctx.messages) <= tokens // 2

    @pytest.mark.parametrize(
        ("args", "kwargs", "error", "match"),
        [
            ((-1,), {}, ScopeError, "max_tokens must be 0 or more, got -1"),
            ((100,), {"low_watermark": 200}, ScopeError, "low_watermark=200 is above max_tokens=100"),
            ((100.0,), {}, TypeError, "max_tokens must be an int, got 100.0"),
            ((100,), {"counter": len}, TypeError, "needs a token counter with count_message"),
        ],
    )
    def test_bad_settings(self, args, kwargs, error, match):
        """
        Bad watermarks or counters are refused with the value and the fix.
        """
        with pytest.raises(error, match=match):
            TokenBudgetContextManager(*args, **kwargs)

    def test_a_tail_of_empty_turns_keeps_what_the_transcript_says(self):
        """
        A cut of a transcript ending in two empty turns keeps the newest
        exchange that says something (and the empty turns after it): it kept
        only the empty turns, which Gemini leaves out, so the request written
        for Gemini had no contents and ``write`` refused it.
        """
        said = [Message("user", "x" * 400), Message("assistant", "y" * 400)]
        ctx = WorkingContext(messages=[*said, Message("user", ""), Message("assistant", "")])
        TokenBudgetContextManager(60, low_watermark=10).trim_context(ctx)
        assert said == [m for m in ctx.messages if m.text()]
        written = google.write(ctx)["contents"]
        assert [("user", "x" * 400), ("model", "y" * 400)] == [(c["role"], c["parts"][0]["text"]) for c in written]

    @given(
        opener=solid,
        messages=tool_heavy_transcripts,
        empty=st.lists(
            st.builds(Message, st.sampled_from(["user", "assistant"]), st.sampled_from(["", " ", ()])),
            min_size=1,
            max_size=3,
        ),
        budget=st.integers(1, 400),
    )
    @settings(suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
    def test_a_cut_never_leaves_nothing_to_send(self, opener, messages, empty, budget):
        """
        Property: over transcripts opening with a user message and ending in
        empty turns, a cut keeps the newest message that says something, and
        leaves no provider's writer with nothing to send (its ``empty``
        problem) when the whole transcript gave it something.
        """
        ctx = WorkingContext(messages=[Message("user", opener), *messages, *empty])
        assume(not openai_chat.check(ctx))  # a broken exchange is dropped whole, whatever it says
        newest = next(m for m in reversed(ctx.messages) if m.role != "system" and not _is_empty(m))
        before = {adapter: {p.rule for p in adapter.check(ctx)} for adapter in ADAPTERS}
        TokenBudgetContextManager(budget).trim_context(ctx)
        assert any(newest is m for m in ctx.messages)
        for adapter in ADAPTERS:
            if "empty" not in before[adapter]:
                assert "empty" not in {p.rule for p in adapter.check(ctx)}, adapter.__name__

    @given(tool_heavy_transcripts, st.integers(0, 400), st.integers(0, 400))
    def test_output_is_always_valid(self, messages, a, b):
        """
        Property: over random transcripts and watermarks, the output is a
        valid subsequence of the input, fits the low watermark unless the
        messages always kept do not (then the report says so), and trimming
        again changes nothing.
        """
        low, high = min(a, b), max(a, b)
        ctx = WorkingContext(messages=messages)
        manager = TokenBudgetContextManager(high, low_watermark=low)
        over = ctx.count_tokens() > high

        manager.trim_context(ctx)

        assert [] == problems(messages, ctx.messages)
        out = ctx.messages
        assert list(out) == [m for m in messages if any(m is k for k in out)]
        if over:
            systems = ApproxTokenCounter().count([m for m in messages if m.role == "system"])
            assert ctx.count_tokens() <= max(low, systems) or manager.last_trim.over_budget
        again = ctx.messages
        manager.trim_context(ctx)
        assert again is ctx.messages


# -- SummaryContextManager ----------------------------------------------------------------


class TestSummaryContextManager:
    def test_summary_is_a_system_message_at_the_head_of_the_tail(self):
        """
        The older messages go to the summarizer; the summary becomes the
        system message named context_summary after the system messages and
        before the kept window.
        """
        ctx = WorkingContext(messages=conversation("q1", "a1", "q2", "a2", "q3", "a3"))
        manager = SummaryContextManager(echo_summarizer, max_messages=4, keep_recent=2)

        asyncio.run(manager.atrim_context(ctx))

        assert [
            ("system", None, "You are terse."),
            ("system", "context_summary", "q1 / a1 / q2 / a2"),
            ("user", None, "q3"),
            ("assistant", None, "a3"),
        ] == [(m.role, m.name, m.text()) for m in ctx.messages]

    def test_second_summary_appends_after_a_blank_line(self):
        """
        A later summary keeps the earlier one and appends after a blank line.
        """
        ctx = WorkingContext(messages=conversation("q1", "a1", "q2", "a2"))
        manager = SummaryContextManager(echo_summarizer, max_messages=3, keep_recent=2)
        manager.trim_context(ctx)
        ctx.append(Message("user", "q3"), Message("assistant", "a3"))

        manager.trim_context(ctx)

        summary = [m for m in ctx.messages if m.name == SUMMARY_NAME]
        assert ["q1 / a1\n\nq2 / a2"] == [m.text() for m in summary]
        assert ["You are terse.", "q1 / a1\n\nq2 / a2", "q3", "a3"] == [m.text() for m in ctx.messages]

    def test_unchanged_when_nothing_is_older_than_keep_recent(self):
        """
        Past the threshold but with nothing older than keep_recent: the
        summarizer is not called and nothing changes.
        """
        calls, summarize = recording()
        ctx = WorkingContext(messages=conversation("q1", "a1"))
        before = ctx.messages
        SummaryContextManager(summarize, max_messages=1, keep_recent=2).trim_context(ctx)
        assert before is ctx.messages
        assert [] == calls

    def test_not_called_under_the_thresholds(self):
        """
        Common error "summaries are slow": the summarizer runs only past a
        threshold, once per trim.
        """
        calls, summarize = recording()
        ctx = WorkingContext(messages=conversation("q1", "a1", "q2"))
        manager = SummaryContextManager(summarize, max_messages=10, token_budget=10_000, keep_recent=1)
        manager.trim_context(ctx)
        assert [] == calls
        ctx.extend(conversation(*[f"m{i}" for i in range(10)])[1:])
        manager.trim_context(ctx)
        assert 1 == len(calls)

    def test_token_budget_trigger(self):
        """
        The token trigger counts the whole request with the context's counter.
        """
        calls, summarize = recording()
        prefix = PrefixContext(system_prompt="rules " * 50)
        ctx = WorkingContext(prefix=prefix, messages=conversation("q1", "a1", "q2", "a2"))
        manager = SummaryContextManager(
            summarize, max_messages=None, token_budget=ctx.count_tokens() - 1, keep_recent=2
        )
        manager.trim_context(ctx)
        assert 1 == len(calls)
        assert ["q1", "a1"] == [m.text() for m in calls[0]]

    @pytest.mark.parametrize("result", ["", "   "])
    def test_empty_summary_leaves_the_context_unchanged(self, result, caplog):
        """
        Common error "context never shrinks": an empty summary is logged and
        nothing changes.
        """
        _, summarize = recording(result)
        ctx = WorkingContext(messages=conversation("q1", "a1", "q2", "a2"))
        before = ctx.messages
        with caplog.at_level(logging.WARNING, logger="workingctx.managers"):
            SummaryContextManager(summarize, max_messages=2, keep_recent=1).trim_context(ctx)
        assert before is ctx.messages
        assert "empty summary; the context is left unchanged" in caplog.text

    def test_failing_summarizer_is_logged_and_nothing_is_lost(self, caplog):
        """
        Common error: a summarizer that raises leaves the context as it was,
        and the failure is logged with its traceback.
        """

        async def broken(*_args, **_kwargs):
            msg = "provider timed out"
            raise ConnectionError(msg)

        ctx = WorkingContext(messages=[*conversation("q1", "a1", "q2", "a2"), *tool_turn(9)])
        before = ctx.messages
        manager = SummaryContextManager(broken, max_messages=2, keep_recent=1, remove_tool_msgs=True)
        with caplog.at_level(logging.ERROR, logger="workingctx.managers"):
            manager.trim_context(ctx)
        assert before is ctx.messages
        assert "summarizer call failed; the context is left unchanged" in caplog.text
        assert "provider timed out" in caplog.text

    def test_summarizer_returning_a_non_string(self, caplog):
        """
        A summarizer returning something other than text is logged; nothing changes.
        """

        async def wrong(*_args, **_kwargs):
            return None

        ctx = WorkingContext(messages=conversation("q1", "a1", "q2", "a2"))
        before = ctx.messages
        with caplog.at_level(logging.ERROR, logger="workingctx.managers"):
            SummaryContextManager(wrong, max_messages=2, keep_recent=1).trim_context(ctx)
        assert before is ctx.messages
        assert "returned None of type NoneType, not a str" in caplog.text

    def test_both_triggers_none_warns_at_construction(self):
        """
        Common error: with both triggers None it would never summarize, so
        construction warns and says what to set.
        """
        with pytest.warns(UserWarning, match="will never summarize: set max_messages or token_budget"):
            SummaryContextManager(echo_summarizer, max_messages=None)

    def test_trim_context_works_inside_a_running_loop(self):
        """
        Sync code called from async code (Jupyter, an async app) summarizes
        as plain sync code does.
        """
        manager = SummaryContextManager(echo_summarizer, max_messages=2, keep_recent=1)
        plain = manager.trim_context(WorkingContext(messages=conversation("q1", "a1", "q2", "a2")))
        inside = WorkingContext(messages=conversation("q1", "a1", "q2", "a2"))

        async def run() -> None:
            manager.trim_context(inside)

        asyncio.run(run())
        assert plain.messages == inside.messages
        assert SUMMARY_NAME == inside.messages[1].name

    def test_a_summarizer_bound_to_its_first_loop_works_on_every_sync_call(self, caplog):
        """
        A summarizer whose client belongs to the event loop it first ran in
        (as ChatAnthropic's async client does) summarizes on every sync call:
        they all run in one loop, which stays open.
        """
        loops: list[asyncio.AbstractEventLoop] = []

        async def bound(*_: object, **__: object) -> str:
            loop = asyncio.get_running_loop()
            loops.append(loop)
            if loops[0] is not loop or loops[0].is_closed():
                msg = "Event loop is closed"
                raise RuntimeError(msg)
            return "summary"

        manager = SummaryContextManager(bound, max_messages=2, keep_recent=1)
        with caplog.at_level(logging.ERROR, logger="workingctx.managers"):
            for _ in range(3):
                ctx = manager.trim_context(WorkingContext(messages=conversation("q1", "a1", "q2", "a2")))
                assert "summary" == ctx.messages[1].text()
        assert 3 == len(loops)
        assert "" == caplog.text

    def test_the_summarizer_sees_the_callers_context_variables(self):
        """
        A tracer's current run (a context variable the caller set) reaches
        the summarizer on the sync path, as it would under asyncio.run.
        """
        current: contextvars.ContextVar[str] = contextvars.ContextVar("current", default="none")
        seen: list[str] = []

        async def traced(*_: object, **__: object) -> str:
            seen.append(current.get())
            return "summary"

        manager = SummaryContextManager(traced, max_messages=2, keep_recent=1)
        token = current.set("run-7")
        try:
            manager.trim_context(WorkingContext(messages=conversation("q1", "a1", "q2", "a2")))
        finally:
            current.reset(token)
        assert ["run-7"] == seen

    def test_sync_summarizers_of_two_threads_run_at_once(self):
        """
        A plain (not async) summarizer called by trim_context on two threads
        runs for both at once: it held up the one loop every sync call shares,
        so each summary waited for the other's.
        """
        both = threading.Barrier(2, timeout=5)

        def meeting(*_: object, **__: object) -> str:
            both.wait()  # broken (and the summary dropped) unless the other thread's call is in here too
            return "summary"

        manager = SummaryContextManager(meeting, max_messages=2, keep_recent=1)
        contexts = [WorkingContext(messages=conversation("q1", "a1", "q2", "a2")) for _ in range(2)]
        workers = [threading.Thread(target=manager.trim_context, args=(ctx,)) for ctx in contexts]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(10)
        assert [SUMMARY_NAME, SUMMARY_NAME] == [ctx.messages[1].name for ctx in contexts]

    def test_a_summarizer_calling_trim_context_names_atrim_context(self):
        """
        Common error: a summarizer that trims another context the sync way
        while it runs gets a clear error naming atrim_context, not a hang.
        """
        inner = SummaryContextManager(echo_summarizer, max_messages=2, keep_recent=1)
        nested = WorkingContext(messages=conversation("q1", "a1", "q2", "a2"))
        before = nested.messages

        async def nesting(*_: object, **__: object) -> str:
            with pytest.raises(RuntimeError, match=r"called by a summarizer.*await atrim_context\(\)"):
                inner.trim_context(nested)
            return "summary"

        outer = SummaryContextManager(nesting, max_messages=2, keep_recent=1)
        ctx = outer.trim_context(WorkingContext(messages=conversation("q1", "a1", "q2", "a2")))
        assert "summary" == ctx.messages[1].text()
        assert before is nested.messages

    def test_a_forked_child_process_summarizes_with_a_loop_of_its_own(self):
        """
        A process forked after the parent summarized the sync way summarizes
        too: the parent's loop thread is not in it (it waited forever).
        """
        manager = SummaryContextManager(echo_summarizer, max_messages=2, keep_recent=1)
        manager.trim_context(WorkingContext(messages=conversation("q1", "a1", "q2", "a2")))
        fork = multiprocessing.get_context("fork")
        queue = fork.SimpleQueue()
        child = fork.Process(target=_summarize_into, args=(manager, queue))
        child.start()
        child.join(20)
        if child.is_alive():
            child.kill()
            pytest.fail("the forked process hung in trim_context")
        assert SUMMARY_NAME == queue.get()

    @pytest.mark.parametrize("exit_type", [KeyboardInterrupt, SystemExit])
    def test_a_summarizer_raising_an_exit_reaches_the_caller_and_the_loop_lives_on(self, exit_type):
        """
        A KeyboardInterrupt or SystemExit in the summarizer reaches the code
        that called trim_context, and later calls still summarize (the loop's
        thread died of it, and every later call waited forever).
        """

        async def leaving(*_: object, **__: object) -> str:
            raise exit_type

        ctx = WorkingContext(messages=conversation("q1", "a1", "q2", "a2"))
        before = ctx.messages
        with pytest.raises(exit_type):
            _in_thread(lambda: SummaryContextManager(leaving, max_messages=2, keep_recent=1).trim_context(ctx))
        assert before is ctx.messages
        done = _in_thread(
            lambda: SummaryContextManager(echo_summarizer, max_messages=2, keep_recent=1).trim_context(ctx)
        )
        assert SUMMARY_NAME == done.messages[1].name

    def test_a_caller_interrupted_while_it_waits_cancels_the_summary(self):
        """
        Ctrl-C while trim_context waits stops the summary: the context is not
        changed later, behind the back of the code that was interrupted.

        Ctrl-C is pressed again every second while the call has not ended, as
        a user would: one signal can land where the interpreter drops the
        exception it raises (inside a finalizer, say), and the call would then
        wait for the summary as if nothing came.
        """
        started, cancelled, ended = threading.Event(), threading.Event(), threading.Event()

        async def slow(*_: object, **__: object) -> str:
            started.set()
            try:
                await asyncio.sleep(60)  # far longer than the test: only a cancel ends it
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return "summary"

        ctx = WorkingContext(messages=conversation("q1", "a1", "q2", "a2"))
        before = ctx.messages
        main = threading.get_ident()
        waiting = [False]

        def on_interrupt(*_: object) -> None:
            if waiting[0]:  # only while the call runs: not in the test's own code once it has ended
                raise KeyboardInterrupt

        def interrupt() -> None:
            started.wait(5)
            while not ended.is_set():
                signal.pthread_kill(main, signal.SIGINT)
                ended.wait(1)

        def trim() -> None:
            waiting[0] = True
            try:
                SummaryContextManager(slow, max_messages=2, keep_recent=1).trim_context(ctx)
            finally:
                waiting[0] = False

        previous = signal.signal(signal.SIGINT, on_interrupt)
        interrupter = threading.Thread(target=interrupt)
        try:
            interrupter.start()
            with pytest.raises(KeyboardInterrupt):
                trim()
        finally:
            ended.set()
            interrupter.join()
            signal.signal(signal.SIGINT, previous)
        assert cancelled.wait(5)
        assert before is ctx.messages

    def test_an_interrupt_while_the_summary_is_handed_to_the_loop_cancels_it(self, monkeypatch):
        """
        Ctrl-C that lands after the summary started in the loop but before
        the caller began to wait for it (inside the hand-over) cancels it too.
        """
        started, cancelled = threading.Event(), threading.Event()

        async def slow(*_: object, **__: object) -> str:
            started.set()
            try:
                await asyncio.sleep(60)  # only a cancel ends it
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return "summary"

        hand_over = asyncio.run_coroutine_threadsafe

        def interrupted(coroutine: Any, loop: asyncio.AbstractEventLoop) -> Any:
            hand_over(coroutine, loop)
            assert started.wait(5)
            raise KeyboardInterrupt

        monkeypatch.setattr(asyncio, "run_coroutine_threadsafe", interrupted)
        ctx = WorkingContext(messages=conversation("q1", "a1", "q2", "a2"))
        before = ctx.messages
        with pytest.raises(KeyboardInterrupt):
            SummaryContextManager(slow, max_messages=2, keep_recent=1).trim_context(ctx)
        assert cancelled.wait(5)
        assert before is ctx.messages

    def test_boundary_moves_to_keep_an_exchange_whole(self):
        """
        When the newest keep_recent messages start on a tool result, the
        boundary moves back to its call: the window never starts orphaned;
        and the user message that asked for it stays in front of it, so the
        request still opens with a user turn.
        """
        messages = [
            Message("system", "s"),
            Message("user", "q1"),
            Message("assistant", "a1"),
            Message("user", "check both hosts"),
            Message("assistant", tool_calls=[ToolCall("c1", "ping"), ToolCall("c2", "ping")]),
            Message("tool", "up", tool_call_id="c1"),
            Message("tool", "down", tool_call_id="c2"),
            Message("assistant", "one is down"),
        ]
        calls, summarize = recording()
        ctx = WorkingContext(messages=messages)

        SummaryContextManager(summarize, max_messages=3, keep_recent=2).trim_context(ctx)

        assert ["q1", "a1"] == [m.text() for m in calls[0]]
        assert ["s", "summary", "check both hosts", "", "up", "down", "one is down"] == [m.text() for m in ctx.messages]
        assert [] == problems(messages, ctx.messages, summary=True)

    def test_remove_tool_msgs_applies_even_without_summary(self):
        """
        With remove_tool_msgs, completed tool sequences are removed on every
        call, before the thresholds are checked.
        """
        calls, summarize = recording()
        ctx = WorkingContext(messages=[Message("system", "s"), *tool_turn(1)])
        SummaryContextManager(summarize, max_messages=30, remove_tool_msgs=True).trim_context(ctx)
        assert ["s", "question 1"] == [m.text() for m in ctx.messages]
        assert [] == calls

    def test_custom_prompt_and_bound_reach_the_summarizer(self):
        """
        summary_prompt and max_summary_tokens are passed to the summarizer.
        """
        seen = {}

        async def summarize(_messages, *, prompt, max_tokens):
            seen.update(prompt=prompt, max_tokens=max_tokens)
            return "ok"

        ctx = WorkingContext(messages=conversation("q1", "a1", "q2"))
        manager = SummaryContextManager(
            summarize, max_messages=1, keep_recent=1, summary_prompt="Bullet points.", max_summary_tokens=50
        )
        manager.trim_context(ctx)
        assert {"prompt": "Bullet points.", "max_tokens": 50} == seen

    @pytest.mark.parametrize(
        ("args", "kwargs", "error", "match"),
        [
            (("not callable",), {}, TypeError, "needs a summarizer: an async callable"),
            ((echo_summarizer,), {"keep_recent": -1}, ScopeError, "keep_recent must be 0 or more, got -1"),
            ((echo_summarizer,), {"token_budget": "6000"}, TypeError, "token_budget must be an int or None"),
            ((echo_summarizer,), {"summary_prompt": 3}, TypeError, "summary_prompt must be a str or None"),
        ],
    )
    def test_bad_settings(self, args, kwargs, error, match):
        """
        Bad settings are refused with the value and what is expected.
        """
        with pytest.raises(error, match=match):
            SummaryContextManager(*args, **kwargs)

    @given(
        tool_heavy_transcripts,
        st.integers(0, 12),
        st.integers(0, 6),
        st.booleans(),
        st.none() | st.integers(0, 300),
    )
    def test_output_is_always_valid_and_loses_nothing(self, messages, max_messages, keep_recent, remove, budget):
        """
        Property: the output keeps every system message, orphans nothing, is
        the input's order plus one summary; every non-system message dropped
        was given to the summarizer (or was a completed tool sequence removed
        on request), and the summary sits before every non-system message.
        """
        calls, summarize = recording()
        ctx = WorkingContext(messages=messages)
        manager = SummaryContextManager(
            summarize, max_messages=max_messages, token_budget=budget, keep_recent=keep_recent, remove_tool_msgs=remove
        )

        manager.trim_context(ctx)
        out = ctx.messages

        assert [] == problems(messages, out, summary=True)
        if calls:
            summarized = {id(m) for m in calls[0]}
            assert not summarized & {id(m) for m in out}
            first_other = next((i for i, m in enumerate(out) if m.role != "system"), len(out))
            assert [SUMMARY_NAME] == [m.name for m in out[:first_other] if m.name == SUMMARY_NAME]
            if not remove:
                kept = {id(m) for m in out} | summarized
                assert all(id(m) in kept for m in messages if m.role != "system")
        else:
            assert len(out) <= len(messages)


# -- damaged input ----------------------------------------------------------------------------


def orphaned(messages: Sequence[Message]) -> list[str]:
    """
    The call ids answered by a message although no earlier message asks for them.
    """
    asked: set[str] = set()
    found: list[str] = []
    for message in messages:
        found.extend(r for r in message.result_ids if r not in asked)
        asked.update(message.call_ids)
    return found


async def _fixed(*_args: object, **_kwargs: object) -> str:
    return "summary"


class TestDamagedInput:
    @given(block_transcripts(broken=True), st.integers(0, 4), st.integers(0, 300))
    def test_a_trim_never_emits_an_orphan(self, messages, n, tokens):
        """
        Property: on transcripts with deleted messages (results without
        calls, calls without results), whenever a manager changes the
        context, the result holds no tool result without its call and keeps
        every system message.
        """
        managers = [
            MessageContextManager(max_messages=n),
            MessageContextManager(max_messages=n, remove_tool_msgs=True),
            TokenBudgetContextManager(tokens),
            SummaryContextManager(_fixed, max_messages=n, keep_recent=n),
        ]
        for manager in managers:
            ctx = WorkingContext(messages=messages)
            manager.trim_context(ctx)
            if ctx.messages != tuple(messages):
                assert [] == orphaned(ctx.messages), manager
                systems = [m for m in ctx.messages if m.role == "system" and m.name != SUMMARY_NAME]
                assert [m for m in messages if m.role == "system" and m.name != SUMMARY_NAME] == systems


# -- common errors ---------------------------------------------------------------------


class TestCommonErrors:
    @pytest.mark.parametrize("role", ["System", "SYSTEM", " system", "developer"])
    def test_a_role_not_exactly_system_is_refused(self, role):
        """
        Common error "system prompt disappears": a role that is not exactly
        "system" cannot be built, so it cannot be trimmed away unnoticed.
        """
        with pytest.raises(InvalidMessageError, match=r"unknown role .*'system', 'user', 'assistant' or 'tool'"):
            Message(role, "You are terse.")


class TestSummaryUnderConcurrentWrites:
    def test_messages_appended_while_summarizing_are_kept(self):
        """
        A message another coroutine appends while the summarizer runs stays,
        after the kept window.
        """

        async def main() -> list[str]:
            ctx = WorkingContext(messages=conversation(*(f"m{i}" for i in range(12))))
            started = asyncio.Event()

            async def slow(*_args: object, **_kwargs: object) -> str:
                started.set()
                await asyncio.sleep(0.01)
                return "summary"

            async def writer() -> None:
                await started.wait()
                ctx.append(Message("user", "late"))

            manager = SummaryContextManager(slow, max_messages=4, keep_recent=2)
            await asyncio.gather(manager.atrim_context(ctx), writer())
            return [m.text() for m in ctx.messages]

        texts = asyncio.run(main())
        assert "late" == texts[-1]
        assert ["You are terse.", "summary"] == texts[:2]


class TestBudgetWithAnyCounter:
    def test_a_counter_with_only_count_message(self):
        """
        The budget manager works with any counter that has count_message, as
        the budget scope does.
        """

        class Words:
            name = "words"

            def count_message(self, message: Message) -> int:
                return len(message.text().split()) + 1

        ctx = WorkingContext(messages=conversation(*(f"word {i} more words" for i in range(20))))
        TokenBudgetContextManager(30, counter=Words()).trim_context(ctx)
        assert sum(Words().count_message(m) for m in ctx.messages) <= 30


# -- managers are values, and scope_for is what they apply ------------------------------------

pins = st.none() | predicate_scopes() | positional_scopes()
"""What a manager may pin: nothing, or any built-in leaf scope."""


def _budget_managers(high: int) -> st.SearchStrategy[TokenBudgetContextManager]:
    return st.builds(
        TokenBudgetContextManager,
        st.just(high),
        low_watermark=st.none() | st.integers(0, high),
        counter=st.none() | st.just(ApproxTokenCounter()),
        pin=pins,
    )


context_managers = st.one_of(
    st.builds(MessageContextManager, st.integers(0, 4), st.booleans(), pin=pins),
    st.integers(0, 400).flatmap(_budget_managers),
    st.builds(
        SummaryContextManager,
        st.just(_fixed),
        max_messages=st.integers(0, 12),
        token_budget=st.none() | st.integers(0, 300),
        keep_recent=st.integers(0, 6),
        remove_tool_msgs=st.booleans(),
        pin=pins,
    ),
    st.builds(
        SummaryContextManager,
        st.just(_fixed),
        max_messages=st.none(),
        token_budget=st.integers(0, 300),
        keep_recent=st.integers(0, 6),
        summary_prompt=st.none() | st.just("Summarize."),
    ),
)
"""Every built-in manager, with any setting and any pin."""

contexts_to_trim = st.builds(
    WorkingContext,
    prefix=st.sampled_from(
        [PrefixContext(), PrefixContext("Be brief."), PrefixContext(grounding=[Message("user", "doc")])]
    ),
    messages=st.one_of(tool_heavy_transcripts, scope_transcripts(broken=True), block_transcripts(broken=True)),
)
"""Contexts with valid and damaged tails, under prefixes with and without a user message."""


def applied(manager: object, ctx: WorkingContext) -> list[Message]:
    """
    The tail *manager* leaves, as its scope says: the kept messages in order.

    The scope is applied to the context's view, as a trim applies it: a
    pinned TokenBudget then counts the prefix first (over ``ctx.messages``
    alone it would not know the prefix, and could keep more than the trim).
    """
    view = ctx.tail_view()
    return [view[i] for i in sorted(surviving_indices(manager.scope_for(ctx), view))]  # type: ignore[attr-defined]


def same(a: Sequence[Message], b: Sequence[Message]) -> bool:
    """
    Whether *a* and *b* hold the very same message objects, in the same order.
    """
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


class TestScopeForIsWhatATrimKeeps:
    @given(context_managers, contexts_to_trim)
    def test_a_trim_keeps_exactly_the_scope(self, manager, ctx):
        """
        Property: for every manager and context, the trimmed tail is the
        messages manager.scope_for(ctx) keeps, in order (a message manager
        that cut turns moves the system messages first; a summary manager
        adds its summary after the system messages), and explain() of that
        scope counts exactly what the trim kept and dropped.
        """
        expected = applied(manager, ctx)
        report = explain(manager.scope_for(ctx), ctx)
        before = ctx.messages
        out = manager.trim_context(ctx).messages
        if isinstance(manager, SummaryContextManager) and any(m.name == SUMMARY_NAME and m not in before for m in out):
            summary = next(i for i, m in enumerate(out) if m.name == SUMMARY_NAME and not any(m is b for b in before))
            systems = [m for m in expected if m.role == "system"]
            assert same(systems + [out[summary]] + [m for m in expected if m.role != "system"], out)
            assert len(report.kept) == len(out) - 1
        elif isinstance(manager, MessageContextManager):
            assert same(expected, out) or same(_systems_first(expected), out)
            assert len(report.kept) == len(out)
        else:
            assert same(expected, out)
            assert len(report.kept) == len(out)
        assert len(report.kept) + len(report.dropped) == len(before)

    def test_the_budget_manager_reads_as_its_cut(self):
        """
        Over its budget, the token manager's scope is its cut made a valid
        request; explain() says what the trim does.
        """
        ctx = WorkingContext(messages=conversation("q1 " * 20, "a1 " * 20, "q2 " * 20, "a2 " * 20, "q3"))
        manager = TokenBudgetContextManager(60, low_watermark=40)
        assert "ValidRequest(BudgetCut(40, counter=ApproxTokenCounter(images='openai')))" == str(manager.scope_for(ctx))
        report = explain(manager.scope_for(ctx), ctx)
        manager.trim_context(ctx)
        assert (0, 5) == report.kept
        assert ["You are terse.", "q3"] == [m.text() for m in ctx.messages]
        assert "ValidRequest(Since(0))" == str(manager.scope_for(ctx))

    def test_the_budget_manager_scope_keeps_its_pins(self):
        """
        A pinned message the cut keeps is in the scope too (a budget scope
        alone would leave it out), and explain() counts what the trim keeps.
        """
        ctx = WorkingContext(messages=[Message("user", "Migrate the database.", name="task")])
        for n in range(8):
            ctx.append(Message("assistant", f"step {n} " * 10), Message("user", f"next {n}"))
        manager = TokenBudgetContextManager(100, low_watermark=60, pin=Tagged("task"))
        report = explain(manager.scope_for(ctx), ctx)
        before = ctx.messages
        manager.trim_context(ctx)
        assert 0 in report.kept
        assert [before[i] for i in report.kept] == list(ctx.messages)
        assert "Migrate the database." == ctx.messages[0].text()

    def test_scope_for_takes_a_context(self):
        """
        scope_for() names what it needs when given something else.
        """
        for manager in (
            MessageContextManager(2),
            TokenBudgetContextManager(100),
            SummaryContextManager(_fixed, max_messages=4),
        ):
            with pytest.raises(TypeError, match=r"scope_for\(\) takes a WorkingContext, got \[\]"):
                manager.scope_for([])  # type: ignore[arg-type]

    def test_the_summary_manager_reads_as_its_window(self):
        """
        Over its threshold, the summary manager's scope is the newest
        keep_recent non-system messages in whole exchanges, the waiting calls
        and the pinned exchanges, made a valid request, less an earlier summary.
        """
        ctx = WorkingContext(messages=conversation("q1", "a1", "q2", "a2", "q3"))
        manager = SummaryContextManager(_fixed, max_messages=4, keep_recent=2, pin=LastNTurns(0))
        assert (
            "ValidRequest(WholeExchanges(Newest(2, ~RoleFilter({'system'})), mode='expand') | PendingCalls() "
            "| WholeExchanges(LastNTurns(0), mode='expand')) & ~(RoleFilter({'system'}) & Tagged('context_summary'))"
        ) == str(manager.scope_for(ctx))
        assert "ValidRequest(Since(0))" == str(SummaryContextManager(_fixed, max_messages=40).scope_for(ctx))


def _names() -> dict[str, object]:
    """
    The names a manager's repr uses.
    """
    from workingctx import scopes  # noqa: PLC0415  # the names eval() needs

    names: dict[str, object] = {name: getattr(scopes, name) for name in scopes.__all__}
    return names | {
        "MessageContextManager": MessageContextManager,
        "TokenBudgetContextManager": TokenBudgetContextManager,
        "ApproxTokenCounter": ApproxTokenCounter,
    }


class TestManagersAreValues:
    def test_equal_settings_are_equal_managers(self):
        """
        Managers built with equal settings are equal and hash alike; a default
        spelled out is the default.
        """
        assert MessageContextManager(10) == MessageContextManager(10)
        assert hash(MessageContextManager(10)) == hash(MessageContextManager(max_messages=10, remove_tool_msgs=False))
        assert MessageContextManager(10) != MessageContextManager(11)
        assert TokenBudgetContextManager(100) == TokenBudgetContextManager(100, low_watermark=50)
        assert SummaryContextManager(_fixed) == SummaryContextManager(_fixed, summary_prompt=None)
        assert SummaryContextManager(_fixed) != SummaryContextManager(echo_summarizer)
        assert {MessageContextManager(2), MessageContextManager(2)} == {MessageContextManager(2)}

    def test_frozen_and_last_trim_is_not_part_of_the_value(self):
        """
        A manager's settings cannot change; its last_trim records the last
        call and does not change what it equals.
        """
        manager = MessageContextManager(1)
        with pytest.raises(AttributeError):
            manager.max_messages = 3  # type: ignore[misc]
        manager.trim_context(WorkingContext(messages=conversation("q1", "a1", "q2")))
        assert manager.last_trim is not None
        assert manager == MessageContextManager(1)
        assert hash(manager) == hash(MessageContextManager(1))

    @given(context_managers)
    def test_round_trips(self, manager):
        """
        Property: a manager pickles and deep-copies to an equal manager with an
        equal hash; the message and token managers' repr evaluates to an equal one.
        """
        copies = [pickle.loads(pickle.dumps(manager)), copy.deepcopy(manager)]
        if not isinstance(manager, SummaryContextManager):
            copies.append(eval(repr(manager), _names()))  # noqa: S307  # repr is constructor syntax
        else:
            assert repr(manager).startswith(f"SummaryContextManager({_fixed!r}, max_messages=")
        for copied in copies:
            assert manager == copied
            assert hash(manager) == hash(copied)

    @given(context_managers, context_managers)
    def test_equality_and_hash_agree(self, a, b):
        """
        Property: equal managers hash alike, and a manager equals a copy of its settings.
        """
        if a == b:
            assert hash(a) == hash(b)
        assert a == attrs.evolve(a)


# -- a trim at every request reads the context's index, and keeps what a trim from scratch keeps ----

prefixes_to_trim = st.sampled_from(
    [PrefixContext(), PrefixContext("Be brief."), PrefixContext(grounding=[Message("user", "doc")])]
)
runs_to_trim = st.one_of(tool_heavy_transcripts, scope_transcripts(broken=True), block_transcripts(broken=True))
"""Runs with parallel calls, reasoning before calls, results in user messages, orphans and dangling calls."""

run_managers = st.one_of(
    st.builds(MessageContextManager, st.integers(0, 4), st.booleans(), pin=st.none() | predicate_scopes()),
    st.integers(0, 400).flatmap(
        lambda high: st.builds(
            TokenBudgetContextManager,
            st.just(high),
            low_watermark=st.none() | st.integers(0, high),
            counter=st.none() | st.just(ApproxTokenCounter()),
            pin=st.none() | predicate_scopes(),
        )
    ),
)
"""Managers whose scope, applied to a plain list, is the trim from scratch."""


def _calling(*ids: str) -> Message:
    return Message("assistant", "", tool_calls=tuple(ToolCall(i, "_") for i in ids))


class TestIncrementalTrims:
    @given(run_managers, prefixes_to_trim, runs_to_trim)
    @example(  # calls asked in two assistant turns in a row, none answered yet: one exchange, still open
        MessageContextManager(1),
        PrefixContext(),
        [
            Message("assistant", "Hello, how can I help?"),
            Message("user", ""),
            _calling("t0-0", "t0-1"),
            Message("tool", "", tool_call_id="t0-0", name="lookup"),
            Message("tool", "", tool_call_id="t0-1", name="lookup"),
            Message("assistant", ""),
            Message("user", ""),
            _calling("t1-0", "t1-1"),
            _calling("pending-0"),
        ],
    )
    def test_a_run_trimmed_at_every_message_keeps_what_a_trim_from_scratch_keeps(self, manager, prefix, run):
        """
        Property: a context trimmed after every message (its index and counts
        carried over from one trim to the next) keeps the same messages as a
        new context holding the same tail trimmed once, and as the manager's
        scope applied to the tail as a plain list; the reports agree.
        """
        live = WorkingContext(prefix=prefix)
        twin = attrs.evolve(manager)
        for message in run:
            live.append(message)
            before = live.messages
            manager.trim_context(live)
            fresh = WorkingContext(prefix=prefix, messages=list(before))
            scope = twin.scope_for(fresh)
            expected = [before[i] for i in sorted(surviving_indices(scope, list(before)))]
            twin.trim_context(fresh)
            assert same(live.messages, fresh.messages)
            assert manager.last_trim == twin.last_trim
            if isinstance(manager, MessageContextManager):
                assert same(expected, live.messages) or same(_systems_first(expected), live.messages)
            else:
                assert same(expected, live.messages)

    @given(runs_to_trim, st.integers(0, 300), st.booleans())
    def test_a_budget_cut_of_a_view_is_the_cut_of_the_list(self, run, budget, user_first):
        """
        Property: a BudgetCut read from a context's running sums and index keeps
        what it keeps over the same messages as a plain list.
        """
        ctx = WorkingContext(messages=run)
        cut = BudgetCut(budget, ctx.counter, user_first=user_first)
        assert surviving_indices(cut, ctx.tail_view()) == surviving_indices(cut, list(run))

    def test_a_trim_that_keeps_the_newest_messages_carries_the_index_over(self):
        """
        A cut keeping the system message and the newest turns leaves the
        context an index told from the old one, equal to one built anew: the
        next check walks nothing.
        """
        ctx = WorkingContext(messages=[Message("system", "Be brief.")])
        manager = TokenBudgetContextManager(200, low_watermark=100)
        cuts = 0
        for i in range(12):
            call = ToolCall(f"c{i}", "lookup", {"q": i})
            ctx.append(
                Message("user", f"question {i} " * 3),
                Message("assistant", tool_calls=(call,)),
                Message("tool", f"result {i} " * 3, tool_call_id=call.id),
                Message("assistant", f"answer {i} " * 3),
            )
            manager.trim_context(ctx)
            assert manager.last_trim is not None
            if not manager.last_trim.dropped:
                continue
            cuts += 1
            carried = ctx._tail._tail_index  # noqa: SLF001  # the index the trim left, before any read
            assert carried is not None
            built = TailIndex()
            built.update(ctx.messages)
            assert (carried.size, carried.positions()) == (built.size, built.positions())
            assert carried.walk.finish(allow_pending=True) == built.walk.finish(allow_pending=True)
        assert cuts >= 3


class TestPinnedBudgetsCountThePrefix:
    def test_every_manager_counts_the_prefix_before_a_pinned_budget(self):
        """
        A pinned TokenBudget counts the prefix first in every manager, as
        explain() of the manager's scope does: under a grounding prefix the
        budget has no room left for the user message, so no manager keeps it
        by the pin (the summary manager used to decide over the bare messages).
        """
        pin = TokenBudget(12)

        def make() -> WorkingContext:
            return WorkingContext(
                prefix=PrefixContext(grounding=[Message("user", "doc")]),
                messages=[
                    Message("system", ""),
                    Message("assistant", "Hello, how can I help?"),
                    Message("user", ""),
                    Message("system", ""),
                ],
            )

        summary = SummaryContextManager(_fixed, max_messages=0, keep_recent=0, pin=pin)
        ctx = make()
        assert len(explain(summary.scope_for(ctx), ctx).kept) == 2
        out = summary.trim_context(ctx).messages
        assert [(m.role, m.text()) for m in out] == [("system", ""), ("system", ""), ("system", "summary")]
        ctx = make()
        messages = MessageContextManager(0, pin=pin)
        assert [m.role for m in messages.trim_context(ctx).messages] == [m.role for m in applied(messages, make())]
