"""
Sub-agents, pending calls and valid requests: the flows users hit, and random agent programs.
"""

from __future__ import annotations

import logging
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.agent_programs import key, make_program, run_workingctx, structural
from workingctx import (
    LastNTurns,
    Message,
    MessageContextManager,
    PrefixContext,
    SummaryContextManager,
    TokenBudget,
    TokenBudgetContextManager,
    ToolCall,
    WorkingContext,
)
from workingctx.exceptions import MergeError
from workingctx.managers import fit
from workingctx.messages import ProviderBlock
from workingctx.scopes import Tagged, surviving_indices
from workingctx.validity import PROVIDERS, check_messages


def call(*ids: str, name: str = "lookup") -> Message:
    return Message("assistant", tool_calls=tuple(ToolCall(i, name, {"q": i}) for i in ids))


def result(call_id: str, text: str = "ok") -> Message:
    return Message("tool", text, tool_call_id=call_id, name="lookup")


def valid_everywhere(messages: list[Message], *, allow_pending: bool = True) -> list[str]:
    """
    The rules *messages* break under any provider.
    """
    return sorted(
        {
            p.rule
            for provider in PROVIDERS
            for p in check_messages(messages, provider=provider, allow_pending=allow_pending)
        }
    )


async def summarize(messages, *, prompt, max_tokens):  # noqa: ARG001
    return f"summary of {len(messages)}"


def parent_with_history() -> WorkingContext:
    ctx = WorkingContext(prefix=PrefixContext(system_prompt="You are the lead agent."))
    ctx.append(Message("user", "Audit the three hosts."), Message("assistant", "Starting."))
    for n in range(3):
        ctx.append(call(f"p{n}"), result(f"p{n}", f"host {n} up"), Message("assistant", f"host {n} checked"))
    return ctx


class TestDelta:
    def test_a_child_that_trimmed_itself_merges_only_its_work(self):
        """
        A sub-agent trims itself before its model call; its delta is still the
        messages it appended, once each, and no call id repeats in the parent.
        """
        parent = parent_with_history()
        child = parent.fork()
        mine = [Message("user", "Check the certificates.")]
        for n in range(4):
            mine += [call(f"c{n}"), result(f"c{n}", "valid " * 30), Message("assistant", f"cert {n} fine")]
        for message in mine:
            child.append(message)
            TokenBudgetContextManager(200, low_watermark=100).trim_context(child)
        before = parent.messages
        parent.merge(child, mode="delta")
        assert [*before, *mine] == list(parent.messages)
        assert [] == structural(parent.messages)

    def test_replace_tail_is_not_an_append(self):
        """
        fork().replace_tail(...) then appends: the delta is the appends only.
        """
        parent = parent_with_history()
        child = parent.fork()
        child.replace_tail(child.messages[-3:])
        child.append(Message("user", "more?"), Message("assistant", "no"))
        size = parent.size()
        parent.merge(child, mode="delta")
        assert ["more?", "no"] == [m.text() for m in parent.messages[size:]]

    def test_a_slice_merges_back_like_a_fork(self):
        """
        ctx.slice(...) is a fork whose tail was replaced: delta brings its appends.
        """
        parent = parent_with_history()
        child = parent.slice(LastNTurns(1))
        child.append(Message("user", "and the fourth host?"), Message("assistant", "down"))
        parent.merge(child, mode="delta")
        assert ["and the fourth host?", "down"] == [m.text() for m in parent.messages[-2:]]
        assert [] == structural(parent.messages)

    def test_a_summary_is_never_merged(self):
        """
        A summary the child's manager wrote stays in the child.
        """
        parent = parent_with_history()
        child = parent.fork()
        child.append(Message("user", "go on"), Message("assistant", "done"))
        SummaryContextManager(summarize, max_messages=3, keep_recent=2).trim_context(child)
        assert any(m.name == "context_summary" for m in child.messages)
        parent.merge(child, mode="delta")
        assert not any(m.name == "context_summary" for m in parent.messages)
        assert ["go on", "done"] == [m.text() for m in parent.messages[-2:]]

    def test_work_brought_in_by_a_grandchild_merge_is_the_childs(self):
        """
        What a child received through its own merges is part of its delta.
        """
        parent = parent_with_history()
        child = parent.fork()
        grandchild = child.fork().append(Message("user", "deep"), Message("assistant", "found"))
        child.merge(grandchild, mode="delta")
        TokenBudgetContextManager(60, low_watermark=30).trim_context(child)
        parent.merge(child, mode="delta")
        assert ["deep", "found"] == [m.text() for m in parent.messages[-2:]]

    def test_merging_twice_brings_only_the_new_work(self):
        """
        The watermark moves at each merge.
        """
        parent = parent_with_history()
        child = parent.fork().append(Message("user", "a"))
        parent.merge(child, mode="delta")
        child.append(Message("assistant", "b"))
        parent.merge(child, mode="delta")
        assert ["a", "b"] == [m.text() for m in parent.messages[-2:]]


class TestMergeRefusals:
    def test_siblings_reusing_a_call_id_are_rekeyed(self):
        """
        Two siblings that used one call id both merge back: the second one's
        call and result take the next free name, and the transcript stays valid.
        """
        parent = parent_with_history()
        one = parent.fork().append(Message("user", "x"), call("dup"), result("dup"), Message("assistant", "1"))
        two = parent.fork().append(Message("user", "y"), call("dup"), result("dup"), Message("assistant", "2"))
        parent.merge(one, mode="delta").merge(two, mode="delta")
        assert ["dup", "dup-2"] == [m.call_ids[0] for m in parent.messages if m.call_ids][-2:]
        assert ["dup", "dup-2"] == [m.tool_call_id for m in parent.messages if m.role == "tool"][-2:]
        assert [] == valid_everywhere(parent.assembled())

    def test_siblings_reusing_a_custom_tool_call_id_are_rekeyed(self):
        """
        The same for a call in a provider's own kind (a Responses custom tool
        call and its output item): the second sibling's pair takes the next free name.
        """

        def pair(text: str) -> list[Message]:
            asking = {"type": "custom_tool_call", "call_id": "dup", "name": "sql", "input": text}
            answering = {"type": "custom_tool_call_output", "call_id": "dup", "output": text}
            return [
                Message("assistant", (ProviderBlock("openai_responses", asking),)),
                Message("user", (ProviderBlock("openai_responses", answering),)),
            ]

        parent = parent_with_history()
        one = parent.fork().append(Message("user", "x"), *pair("1"), Message("assistant", "1"))
        two = parent.fork().append(Message("user", "y"), *pair("2"), Message("assistant", "2"))
        parent.merge(one, mode="delta").merge(two, mode="delta")
        assert ["dup", "dup-2"] == [m.call_ids[0] for m in parent.messages if m.call_ids][-2:]
        assert ["dup", "dup-2"] == [m.result_ids[0] for m in parent.messages if m.result_ids][-2:]
        assert ["2", "2"] == [m.content[0].data["input" if m.call_ids else "output"] for m in parent.messages[-3:-1]]
        assert [] == valid_everywhere(parent.assembled())

    def test_an_orphan_result_is_refused(self):
        """
        Concatenating a context whose results answer calls not here is refused.
        """
        ctx = WorkingContext(messages=[Message("user", "q")])
        stranger = WorkingContext(messages=[result("zz")])
        with pytest.raises(MergeError, match="orphan-result") as info:
            ctx.merge(stranger)
        assert ("zz",) == info.value.ids
        assert 1 == ctx.size()

    def test_a_plain_delta_after_a_pending_call_is_refused(self):
        """
        A plain fork's messages cannot go between a pending call and its result.
        """
        parent = WorkingContext(messages=[Message("user", "q"), call("d1", name="delegate")])
        child = parent.fork().append(Message("user", "sub"), Message("assistant", "done"))
        with pytest.raises(MergeError, match="'d1'"):
            parent.merge(child, mode="delta")
        assert 2 == parent.size()


class TestPendingCalls:
    def test_pending_calls_are_the_trailing_unanswered_ones(self):
        """
        pending_calls lists the newest calls without results, in order.
        """
        ctx = WorkingContext(messages=[Message("user", "q"), call("a", "b", "c"), result("b")])
        assert ["a", "c"] == [c.id for c in ctx.pending_calls]
        ctx.append(result("a"), result("c"))
        assert () == ctx.pending_calls

    def test_fork_for_a_call_leaves_the_exchange_out(self):
        """
        The child starts before the unanswered exchange, so its own request is valid.
        """
        parent = WorkingContext(messages=[Message("user", "q"), call("d1", "t1", name="delegate"), result("t1")])
        child = parent.fork(for_call="d1")
        assert ["q"] == [m.text() for m in child.messages]
        assert "d1" == child.parent_call_id
        assert parent.parent_call_id is None
        child.append(Message("user", "sub-task"), Message("assistant", "sub-answer"))
        assert [] == valid_everywhere(child.assembled(), allow_pending=False)

    def test_result_merge_appends_exactly_one_result(self):
        """
        merge(mode="result") closes the call with the child's final answer, and
        brings the notes it changed; the child's transcript stays out.
        """
        parent = WorkingContext(messages=[Message("user", "q"), call("d1", name="delegate")])
        child = parent.fork(for_call="d1")
        child.append(Message("user", "sub"), call("x1"), result("x1"), Message("assistant", "the answer"))
        child.note("found", 42)
        parent.merge(child, mode="result")
        assert Message("tool", "the answer", tool_call_id="d1", name="delegate") == parent.messages[-1]
        assert 3 == parent.size()
        assert 42 == parent.get("found")
        assert () == parent.pending_calls
        assert [] == valid_everywhere(parent.assembled(), allow_pending=False)

    def test_parallel_delegations_merge_in_any_order(self):
        """
        Two calls delegated at once: results merge in whatever order the children finish.
        """
        parent = WorkingContext(messages=[Message("user", "q"), call("d1", "d2", name="delegate")])
        first, second = parent.fork(for_call="d1"), parent.fork(for_call="d2")
        first.append(Message("user", "one"), Message("assistant", "A"))
        second.append(Message("user", "two"), Message("assistant", "B"))
        parent.merge(second, mode="result").merge(first, mode="result")
        assert [("d2", "B"), ("d1", "A")] == [(m.tool_call_id, m.text()) for m in parent.messages[2:]]
        assert [] == valid_everywhere(parent.assembled(), allow_pending=False)

    def test_result_text_or_message(self):
        """
        result= gives the text (or the tool message) instead of the child's answer.
        """
        parent = WorkingContext(messages=[Message("user", "q"), call("d1", "d2")])
        parent.merge(parent.fork(for_call="d1"), mode="result", result="given")
        parent.merge(parent.fork(for_call="d2"), mode="result", result=Message("tool", "as a message"))
        assert [("d1", "given"), ("d2", "as a message")] == [(m.tool_call_id, m.text()) for m in parent.messages[2:]]

    def test_a_fork_for_a_chat_completions_custom_tool_call(self):
        """
        A pending Chat Completions custom tool call (held as a Responses
        ``custom_tool_call``) is answered by a tool message, as a function call
        is: fork(for_call=...) takes it, the result merge closes it, and both
        OpenAI formats send the exchange (Responses as a ``custom_tool_call_output``).
        """
        from workingctx.adapters import openai_chat, openai_responses  # noqa: PLC0415

        custom = {"id": "call_1", "type": "custom", "custom": {"name": "grep", "input": "TODO"}}
        body = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [custom]}]}
        parent = openai_chat.read(body)
        child = parent.fork(for_call="call_1")
        assert "call_1" == child.parent_call_id
        assert ["user"] == [m.role for m in child.messages]
        parent.merge(child.append(Message("assistant", "3 hits")), mode="result")
        assert ("call_1", "3 hits") == (parent.messages[-1].tool_call_id, parent.messages[-1].text())
        assert {"role": "tool", "content": "3 hits", "tool_call_id": "call_1"}.items() <= openai_chat.write(parent)[
            "messages"
        ][-1].items()
        output = {"type": "custom_tool_call_output", "call_id": "call_1", "output": "3 hits"}
        assert output == openai_responses.write(parent)["input"][-1]
        assert [] == valid_everywhere(parent.assembled(), allow_pending=False)

    def test_no_fork_for_a_call_answered_in_its_own_kind(self):
        """
        A pending Responses shell call is answered by an output item of its
        own kind, which a result merge cannot write: fork(for_call=...)
        refuses it with MergeError naming the id (no IndexError at the merge).
        """
        asking = {"type": "shell_call", "call_id": "c1", "action": {"commands": ["ls"]}, "status": "completed"}
        parent = WorkingContext(
            messages=[Message("user", "q"), Message("assistant", (ProviderBlock("openai_responses", asking),))]
        )
        with pytest.raises(MergeError, match="'c1' is a call in a provider's own kind") as info:
            parent.fork(for_call="c1")
        assert ("c1",) == info.value.ids
        assert 2 == parent.size()

    def test_refusals(self):
        """
        A for_call id that is not pending, a result merge of a plain fork, of a
        child without an answer, or a second time: MergeError naming the id, nothing changed.
        """
        parent = WorkingContext(messages=[Message("user", "q"), call("d1")])
        with pytest.raises(MergeError, match=r"'nope' is not a pending tool call.*'d1'") as info:
            parent.fork(for_call="nope")
        assert ("nope",) == info.value.ids
        with pytest.raises(TypeError, match="for_call must be a tool call id"):
            parent.fork(for_call=1)  # type: ignore[arg-type]
        with pytest.raises(MergeError, match=r"fork\(for_call=\.\.\.\)"):
            parent.merge(parent.fork(), mode="result")
        silent = parent.fork(for_call="d1").append(Message("user", "sub"))
        with pytest.raises(MergeError, match="no final answer"):
            parent.merge(silent, mode="result")
        child = parent.fork(for_call="d1").append(Message("assistant", "done"))
        parent.merge(child, mode="result")
        size = parent.size()
        with pytest.raises(MergeError, match="'d1' is no longer pending"):
            parent.merge(child, mode="result")
        with pytest.raises(MergeError, match="mode='result'"):
            parent.merge(parent.fork(), mode="delta", result="x")
        assert size == parent.size()

    def test_a_plain_fork_of_a_pending_parent_still_sends_valid_requests(self):
        """
        A plain fork inherits the unanswered call mid-transcript; its manager
        drops that broken exchange from its own request (even WholeExchanges kept it).
        """
        parent = WorkingContext(messages=[Message("user", "q"), call("d1", name="delegate")])
        child = parent.fork().append(Message("user", "sub-task"))
        assert "dangling-call" in valid_everywhere(list(child.messages))
        for manager in (
            MessageContextManager(10),
            TokenBudgetContextManager(10_000),
            SummaryContextManager(summarize, max_messages=100),
        ):
            trial = child.fork()
            manager.trim_context(trial)
            assert [] == valid_everywhere(trial.assembled(), allow_pending=False)
            assert "dangling-call" in manager.last_trim.repaired


class TestManagersAlwaysValid:
    def test_below_thresholds_an_orphan_is_dropped(self):
        """
        Nothing to trim, but an orphaned result: every manager drops it.
        """
        messages = [Message("user", "q"), result("ghost"), Message("assistant", "a")]
        for manager in (MessageContextManager(10), TokenBudgetContextManager(10_000), SummaryContextManager(summarize)):
            ctx = WorkingContext(messages=messages)
            manager.trim_context(ctx)
            assert ["q", "a"] == [m.text() for m in ctx.messages]
            assert ("orphan-result",) == manager.last_trim.repaired

    def test_summary_never_swallows_a_pending_call(self):
        """
        keep_recent=0 with a pending call: the call stays, so the next result is not an orphan.
        """
        ctx = WorkingContext(messages=[Message("user", "q"), Message("assistant", "a"), call("c1")])
        SummaryContextManager(summarize, max_messages=1, keep_recent=0).trim_context(ctx)
        assert [("c1",)] == [m.call_ids for m in ctx.messages if m.call_ids]
        ctx.append(result("c1"), Message("assistant", "done"))
        assert [] == valid_everywhere(ctx.assembled(), allow_pending=False)

    def test_budget_smaller_than_the_prefix_keeps_the_question_and_says_so(self, caplog):
        """
        A prefix larger than the low watermark: the newest question is kept,
        a warning is logged, and the report's flag is set.
        """
        ctx = WorkingContext(prefix=PrefixContext(system_prompt="rules " * 200))
        ctx.append(Message("user", "old"), Message("assistant", "old answer"), Message("user", "What now?"))
        manager = TokenBudgetContextManager(300, low_watermark=100)
        with caplog.at_level(logging.WARNING, logger="workingctx.managers"):
            manager.trim_context(ctx)
        assert ["What now?"] == [m.text() for m in ctx.messages]
        assert manager.last_trim.over_budget
        assert "over the low watermark of 100" in caplog.text

    def test_a_newest_message_larger_than_the_budget_is_kept(self):
        """
        The newest message alone exceeds the budget: kept, flagged, never an empty tail.
        """
        ctx = WorkingContext(messages=[Message("user", "hi"), Message("assistant", "x " * 500)])
        manager = TokenBudgetContextManager(100, low_watermark=50)
        manager.trim_context(ctx)
        assert ["user", "assistant"] == [m.role for m in ctx.messages]
        assert manager.last_trim.over_budget

    def test_autonomous_loop_keeps_the_task_first(self):
        """
        One user message, then twenty tool turns: every trimmed request opens with the user's task.
        """
        ctx = WorkingContext(prefix=PrefixContext(system_prompt="Work alone."))
        ctx.append(Message("user", "Migrate the database."))
        manager = TokenBudgetContextManager(200, low_watermark=120)
        for n in range(20):
            ctx.append(call(f"s{n}"), result(f"s{n}", "step output " * 5))
            manager.trim_context(ctx)
            request = ctx.assembled()
            assert "Migrate the database." == request[1].text()
            assert [] == valid_everywhere(request, allow_pending=False)

    @pytest.mark.parametrize("keep_recent", range(10))
    def test_summary_opens_with_a_user_message(self, keep_recent):
        """
        Whatever keep_recent is, the summarized request opens with a user message.
        """
        ctx = WorkingContext(messages=[Message("user", "Migrate the database.")])
        for n in range(8):
            ctx.append(call(f"s{n}"), result(f"s{n}"), Message("assistant", f"step {n}"))
        SummaryContextManager(summarize, max_messages=5, keep_recent=keep_recent).trim_context(ctx)
        assert [] == valid_everywhere(ctx.assembled(), allow_pending=False)

    def test_pin_keeps_the_task(self):
        """
        pin= keeps the task message, counted first, through every cut.
        """
        ctx = WorkingContext(messages=[Message("user", "The task.", name="task")])
        manager = TokenBudgetContextManager(150, low_watermark=80, pin=Tagged("task"))
        for n in range(15):
            ctx.append(Message("user", f"question {n} " * 3), Message("assistant", f"answer {n} " * 3))
            manager.trim_context(ctx)
            assert "The task." == ctx.messages[0].text()
        assert ctx.count_tokens() <= 150

    def test_pin_must_be_a_scope(self):
        """
        A pin that is not a scope is refused at construction.
        """
        with pytest.raises(TypeError, match="pin"):
            MessageContextManager(3, pin="task")


class TestFit:
    def test_fit_and_a_budget_through_the_context_both_count_the_prefix(self):
        """
        fit(ctx, n) is a new context whose whole request (prefix included) fits
        n, and so is ctx.slice(TokenBudget(n)): a budget applied through a
        context counts the prefix. On a bare list the same scope counts only
        the messages it is given.
        """
        ctx = WorkingContext(prefix=PrefixContext(system_prompt="rules " * 40))
        for n in range(10):
            ctx.append(Message("user", f"question {n} " * 3), Message("assistant", f"answer {n} " * 3))
        fitted = fit(ctx, 200)
        assert fitted.count_tokens() <= 200
        assert 20 == ctx.size()
        scoped = ctx.slice(TokenBudget(200))
        assert scoped.count_tokens() <= 200
        assert len(surviving_indices(TokenBudget(200), ctx.tail_view())) == scoped.size()
        assert len(surviving_indices(TokenBudget(200), ctx.messages)) > scoped.size()
        assert [] == valid_everywhere(fitted.assembled(), allow_pending=False)

    def test_fit_merges_back_like_a_slice(self):
        """
        What is appended to a fitted context comes back with a delta merge.
        """
        ctx = parent_with_history()
        fitted = fit(ctx, 120).append(Message("user", "new"))
        ctx.merge(fitted, mode="delta")
        assert "new" == ctx.messages[-1].text()

    def test_fit_checks_its_budget(self):
        """
        A negative or non-int budget is refused.
        """
        with pytest.raises(TypeError):
            fit(WorkingContext(), "10")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="0 or more"):
            fit(WorkingContext(), -1)


class TestAgentPrograms:
    @settings(deadline=None)
    @given(st.integers(0, 2**32 - 1), st.integers(5, 60))
    def test_random_agent_programs(self, seed, steps):
        """
        Random agent programs (forks plain and for a call, slices, children that
        append, trim with every manager, summarize and merge back in random
        order, parallel and pending calls): after every step no context holds a
        duplicate or an orphan, every request a manager emits is valid for
        OpenAI, Anthropic and Gemini, and a merge brings every message the
        child appended exactly once.
        """
        program = make_program(random.Random(seed), steps=steps)

        def check(what, details):
            if what == "step":
                for ctx in details.values():
                    assert [] == structural(ctx.messages)
            elif what == "request":
                before, ctx, broken = details
                assert set() == broken
                systems = [m for m in before if m.role == "system" and m.name != "context_summary"]
                kept = [m for m in ctx.messages if m.role == "system" and m.name != "context_summary"]
                assert systems == kept
            elif what == "merge":
                before, ctx, appended, call_id = details
                added = list(ctx.messages[len(before) :])
                assert list(before) == list(ctx.messages[: len(before)])
                if call_id is None:
                    assert [key(m) for m in appended] == [key(m) for m in added]
                else:
                    assert [call_id] == [m.tool_call_id for m in added]
                present = [key(m) for m in ctx.messages]
                assert all(present.count(key(m)) == 1 for m in added)
            else:
                pytest.fail(f"a merge the program makes was refused: {details}")

        tally = run_workingctx(program, check=check)
        assert (0, 0, 0) == (tally.invalid_requests, tally.duplicated, tally.lost)


def test_calling_turns_one_after_another_are_one_pending_exchange():
    """
    Two assistant turns that only call, one right after the other, are one
    exchange: the calls of both are pending, and a sub-agent forked for the
    second call merges its result as it does for the first.
    """
    calls = [ToolCall("a", "weather", {"city": "Oslo"}), ToolCall("b", "weather", {"city": "Rome"})]
    ctx = WorkingContext()
    ctx.append(Message.user("Oslo and Rome?"), *(Message("assistant", tool_calls=(call,)) for call in calls))
    assert ctx.pending_calls == tuple(calls)
    child = ctx.fork(for_call="b")
    child.append(Message.assistant("sun in Rome"))
    ctx.merge(child, mode="result")
    assert [m.tool_call_id for m in ctx.messages[3:]] == ["b"]
    assert [c.id for c in ctx.pending_calls] == ["a"]
