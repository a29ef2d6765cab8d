"""
Tests for workingctx.validity: the provider rules as one checker.
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import block_transcripts, calls_moved_back, messages, transcripts
from workingctx import Message, ToolCall
from workingctx.exceptions import ProviderError, WorkingCtxError
from workingctx.messages import TextBlock, ToolCallBlock, ToolResultBlock
from workingctx.validity import (
    PROVIDERS,
    RULES,
    STRUCTURAL_RULES,
    Problem,
    check_messages,
    require_valid,
)


def call(*ids: str, text: str = "") -> Message:
    return Message("assistant", text, tool_calls=tuple(ToolCall(i, "lookup") for i in ids))


def result(call_id: str, text: str = "ok") -> Message:
    return Message("tool", text, tool_call_id=call_id)


def rules(problems: tuple[Problem, ...]) -> list[str]:
    return [p.rule for p in problems]


USER = Message("user", "Find it.")


class TestCheckMessages:
    def test_valid_exchange(self):
        """
        A user turn, a call, its result and an answer break no rule of any provider.
        """
        msgs = [Message("system", "Be brief."), USER, call("c1"), result("c1"), Message("assistant", "Found.")]
        for provider in (*PROVIDERS, None):
            assert () == check_messages(msgs, provider=provider)

    def test_orphan_result(self):
        """
        A result whose call is nowhere is reported at its index with its id.
        """
        problems = check_messages([USER, result("c9")])
        assert [(1, "orphan-result", ("c9",))] == [(p.index, p.rule, p.ids) for p in problems]
        assert "c9" in problems[0].message

    def test_dangling_call(self):
        """
        A call without its result, followed by other messages, dangles; the problem is at the call.
        """
        problems = check_messages([USER, call("c1", "c2"), result("c2"), Message("user", "and?")])
        assert [(1, "dangling-call", ("c1",))] == [(p.index, p.rule, p.ids) for p in problems]

    def test_pending_at_end(self):
        """
        Trailing unanswered calls are pending: refused unless allow_pending.
        """
        msgs = [USER, call("c1", "c2"), result("c1")]
        assert [(1, "pending-at-end", ("c2",))] == [(p.index, p.rule, p.ids) for p in check_messages(msgs)]
        assert () == check_messages(msgs, allow_pending=True)

    def test_misplaced_result(self):
        """
        A result separated from its call by a user turn is misplaced; its call dangles.
        """
        problems = check_messages([USER, call("c1"), Message("user", "wait"), result("c1")])
        assert [(1, "dangling-call"), (3, "misplaced-result")] == [(p.index, p.rule) for p in problems]

    def test_system_message_between_call_and_result(self):
        """
        A system message between a call and its result splits them too.
        """
        problems = check_messages([USER, call("c1"), Message("system", "note"), result("c1")])
        assert ["dangling-call", "misplaced-result"] == rules(problems)

    def test_duplicate_result(self):
        """
        A second result for one call is reported.
        """
        problems = check_messages([USER, call("c1"), result("c1"), result("c1")])
        assert [(3, "duplicate-result", ("c1",))] == [(p.index, p.rule, p.ids) for p in problems]

    def test_duplicate_call_ids(self):
        """
        Two calls with one id while a result could not tell them apart (in one
        message, or the id asked again before its result) are reported at the later call.
        """
        within = check_messages([USER, call("c1", "c1"), result("c1")])
        assert ["duplicate-call-id"] == rules(within)
        unanswered = check_messages([USER, call("c1"), USER, call("c1"), result("c1")])
        assert (3, "duplicate-call-id", ("c1",)) in [(p.index, p.rule, p.ids) for p in unanswered]

    def test_reused_call_id(self):
        """
        An id used again after its call was answered (OpenAI-compatible servers'
        ``call_0`` in every response) is a new exchange: OpenAI takes it, Anthropic
        and Gemini need each id once per request.
        """
        across = [USER, call("c1"), result("c1"), USER, call("c1"), result("c1")]
        assert [(4, "reused-call-id", ("c1",))] == [(p.index, p.rule, p.ids) for p in check_messages(across)]
        assert () == check_messages(across, provider="openai")
        assert ["reused-call-id"] == rules(check_messages(across, provider="anthropic"))
        assert ["reused-call-id"] == rules(check_messages(across, provider="gemini"))

    def test_consecutive_call_turns_are_one_exchange(self):
        """
        Two assistant turns that only call, one after the other, followed by one
        turn holding both results, is one exchange (the providers join consecutive turns).
        """
        both = Message("user", [ToolResultBlock("a", "1"), ToolResultBlock("b", "2")])
        assert () == check_messages([USER, call("a"), call("b"), both])
        separated = check_messages([USER, call("a"), USER, call("b"), both])
        assert ["dangling-call", "misplaced-result"] == rules(separated)

    def test_result_without_id(self):
        """
        A tool message naming no call is reported.
        """
        assert ["result-without-id"] == rules(check_messages([USER, Message("tool", "loose")]))

    def test_first_not_user(self):
        """
        Gemini wants a user message first (after system messages); OpenAI and
        Anthropic (recorded traffic: an assistant greeting first) do not.
        """
        msgs = [Message("system", "Be brief."), Message("assistant", "Hello!"), USER]
        assert [(1, "first-not-user")] == [(p.index, p.rule) for p in check_messages(msgs)]
        assert () == check_messages(msgs, provider="anthropic")
        assert ["first-not-user"] == rules(check_messages(msgs, provider="gemini"))
        assert () == check_messages(msgs, provider="openai")

    def test_no_user_message(self):
        """
        Only system messages: no user message, for the providers that need one.
        """
        msgs = [Message("system", "Be brief.")]
        assert [(None, "no-user-message")] == [(p.index, p.rule) for p in check_messages(msgs)]
        assert () == check_messages(msgs, provider="openai")

    def test_empty(self):
        """
        An empty conversation is refused by every provider.
        """
        for provider in (*PROVIDERS, None):
            assert ["empty"] == rules(check_messages([], provider=provider))

    def test_empty_content(self):
        """
        An empty user turn is refused by Anthropic and Gemini; a call-only assistant message is not empty.
        """
        msgs = [Message("user", "  "), call("c1"), result("c1")]
        assert [(0, "empty-content")] == [(p.index, p.rule) for p in check_messages(msgs)]
        assert () == check_messages(msgs, provider="openai")

    def test_a_call_in_another_role_than_assistant(self):
        """
        A call block in a user, tool or system message is refused by every
        provider, naming the message and its call ids; it still counts as a
        call, so its result is no orphan.
        """
        block = ToolCallBlock("c1", "lookup")
        for role in ("user", "system", "tool"):
            holder = Message(role, (TextBlock("see"), block), tool_call_id="c0" if role == "tool" else None)
            msgs = [USER, call("c0"), holder, result("c1"), Message("assistant", "done")]
            if role != "tool":
                msgs = [USER, holder, result("c1"), Message("assistant", "done")]
            found = [(p.index, p.rule, p.ids) for p in check_messages(msgs, provider="openai")]
            at = msgs.index(holder)
            assert found == [(at, "call-not-assistant", ("c1",))], role
            assert f"this {role} message holds the tool call(s) 'c1'" in check_messages(msgs)[0].message
        assert () == check_messages([USER, Message("assistant", (block,)), result("c1")])

    def test_anthropic_shape(self):
        """
        Results carried by a user message as blocks answer their calls like tool messages.
        """
        msgs = [
            USER,
            call("c1", "c2"),
            Message("user", (ToolResultBlock("c1", "a"), ToolResultBlock("c2", "b"))),
            Message("assistant", "Both done."),
        ]
        assert () == check_messages(msgs)
        orphan = check_messages([USER, Message("user", (ToolResultBlock("zz", "a"),))])
        assert ["orphan-result"] == rules(orphan)

    def test_wrong_types(self):
        """
        A dict in place of a message, or one message in place of a list, is a TypeError naming it.
        """
        with pytest.raises(TypeError, match=r"item 1 is \{'role': 'user'\}"):
            check_messages([USER, {"role": "user"}])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="sequence of messages"):
            check_messages(USER)  # type: ignore[arg-type]

    def test_unknown_provider(self):
        """
        An unknown provider name is a ProviderError (a ValueError) naming the known ones.
        """
        with pytest.raises(ProviderError, match=r"unknown provider 'claude'.*'anthropic'"):
            check_messages([USER], provider="claude")  # type: ignore[arg-type]


class TestRequireValid:
    def test_lists_every_problem(self):
        """
        The error lists every problem, with position and rule, and carries them.
        """
        msgs = [Message("assistant", "Hi"), result("c9")]
        with pytest.raises(ProviderError) as info:
            require_valid(msgs, provider="anthropic")
        error = info.value
        assert isinstance(error, WorkingCtxError)
        assert isinstance(error, ValueError)
        assert "anthropic" == error.provider
        assert ["orphan-result", "no-user-message"] == rules(error.problems)
        text = str(error)
        assert "message 1: orphan-result" in text

    def test_error_pickles(self):
        """
        A ProviderError survives pickling with its problems.
        """
        with pytest.raises(ProviderError) as info:
            require_valid([result("c9")])
        again = pickle.loads(pickle.dumps(info.value))
        assert info.value.problems == again.problems
        assert str(info.value) == str(again)


def _no_structural(problems: tuple[Problem, ...]) -> bool:
    return not [p for p in problems if p.rule in STRUCTURAL_RULES]


class TestProperties:
    @given(transcripts())
    def test_generated_transcripts_are_structurally_valid(self, msgs):
        """
        Transcripts of whole exchanges break no tool rule (a trailing pending exchange is allowed).
        """
        assert _no_structural(check_messages(msgs, allow_pending=True))
        assert [] == [p for p in check_messages(msgs, allow_pending=True) if p.rule == "pending-at-end"]

    @given(block_transcripts())
    def test_block_shaped_transcripts_are_structurally_valid(self, msgs):
        """
        The same holds when results ride in user messages as blocks (Anthropic shape).
        """
        assert _no_structural(check_messages(msgs, allow_pending=True))

    @given(st.lists(messages(), max_size=8))
    def test_provider_rules_are_a_filter_of_the_union(self, msgs):
        """
        A provider's problems are exactly the union's problems whose rule it enforces.
        """
        union = check_messages(msgs)
        for provider in PROVIDERS:
            expected = tuple(p for p in union if provider in RULES[p.rule][1])
            assert expected == check_messages(msgs, provider=provider)
        for problem in union:
            assert problem.rule in RULES
            assert problem.index is None or 0 <= problem.index < len(msgs)

    @given(transcripts(allow_pending=False), st.data())
    def test_removing_a_result_leaves_its_call_unanswered(self, msgs, data):
        """
        Dropping one tool result reports its call as dangling (or pending, at the end), by id.
        """
        positions = [i for i, m in enumerate(msgs) if m.role == "tool"]
        if not positions:
            return
        gone = data.draw(st.sampled_from(positions))
        answered = msgs[gone].tool_call_id
        damaged = msgs[:gone] + msgs[gone + 1 :]
        found = [p for p in check_messages(damaged) if answered in p.ids]
        assert [r for r in (p.rule for p in found) if r in {"dangling-call", "pending-at-end"}]

    @given(transcripts(), st.data())
    def test_inserted_stranger_result_is_an_orphan(self, msgs, data):
        """
        A result for an id nobody asked for is an orphan at the index it was put.
        """
        at = data.draw(st.integers(0, len(msgs)))
        damaged = [*msgs[:at], result("stranger"), *msgs[at:]]
        orphans = [p for p in check_messages(damaged, allow_pending=True) if p.rule == "orphan-result"]
        assert [(at, ("stranger",))] == [(p.index, p.ids) for p in orphans]

    @given(transcripts(allow_pending=False), st.data())
    def test_a_repeated_call_message_is_a_duplicate(self, msgs, data):
        """
        Appending again an assistant message that made calls repeats its ids.
        """
        callers = [m for m in msgs if m.tool_calls]
        if not callers:
            return
        again = data.draw(st.sampled_from(callers))
        problems = check_messages([*msgs, again], allow_pending=True)
        duplicates = [p for p in problems if p.rule in {"duplicate-call-id", "reused-call-id"}]
        assert {c.id for c in again.tool_calls} == {i for p in duplicates for i in p.ids}

    @given(transcripts(allow_pending=False), st.data())
    def test_calls_moved_into_the_message_before_are_reported_there(self, msgs, data):
        """
        The calls of a call-only assistant message written into the message
        before it (of any other role) are reported at that message, by id,
        and nothing else is reported that the transcript did not break.
        """
        moved = calls_moved_back(data.draw, msgs, ("user", "tool", "system"))
        if moved is None:
            return
        damaged, at = moved
        expected = {(p.rule, p.ids) for p in check_messages(msgs)}
        found = check_messages(damaged)
        assert (at, "call-not-assistant", msgs[at + 1].call_ids) in [(p.index, p.rule, p.ids) for p in found]
        assert {(p.rule, p.ids) for p in found if p.rule != "call-not-assistant"} <= expected

    @given(st.lists(messages(), max_size=10), st.integers(0, 10))
    def test_walking_further_never_takes_back_a_problem(self, msgs, k):
        """
        The problems found in a prefix (besides those about where it ends) stay problems of the whole.
        """
        ending = {"pending-at-end", "first-not-user", "no-user-message", "empty"}
        head = [p for p in check_messages(msgs[:k]) if p.rule not in ending]
        whole = check_messages(msgs)
        assert all(p in whole for p in head)


def test_a_tool_message_and_its_own_result_block_are_one_result():
    """
    ``Message.tool_message`` gives a tool message whose ``tool_call_id`` and
    result block name the same call: one result, not a duplicate.
    """
    msgs = [
        Message("user", "q"),
        Message("assistant", "", tool_calls=(ToolCall("c1", "f", {}),)),
        Message.tool_message([ToolResultBlock("c1", "out")]),
    ]
    assert () == check_messages(msgs)
    twice = [*msgs, Message("tool", "again", tool_call_id="c1")]
    assert ["duplicate-result"] == [p.rule for p in check_messages(twice)]
