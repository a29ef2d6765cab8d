"""
The tool-call scopes CompletedToolSequences, WholeExchanges, PendingCalls and
ValidRequest: what each keeps, never a call apart from its results.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.scopes.transcripts import assert_whole, call, orphans, units
from tests.strategies import block_transcripts, scope_transcripts, scope_trees, transcripts
from workingctx import Message, Since, WholeExchanges
from workingctx.context import WorkingContext
from workingctx.messages import ReasoningBlock, ToolResultBlock
from workingctx.scopes import CompletedToolSequences, PendingCalls, ValidRequest, surviving_indices
from workingctx.scopes._exchanges import is_reasoning_only, starts_turn
from workingctx.validity import STRUCTURAL_RULES, check_messages


class TestCompletedToolSequences:
    def test_complete_and_pending(self):
        """
        A call with its results and final answer is complete; one waiting for its answer is not.
        """
        messages = [
            Message("user", "q"),
            Message("assistant", tool_calls=(call("c1"), call("c2"))),
            Message("tool", "r1", tool_call_id="c1"),
            Message("tool", "r2", tool_call_id="c2"),
            Message("assistant", "answer"),
            Message("user", "q2"),
            Message("assistant", tool_calls=(call("c3"),)),
            Message("tool", "r3", tool_call_id="c3"),
        ]
        assert [1, 2, 3, 4] == sorted(surviving_indices(CompletedToolSequences(), messages))

    def test_missing_result_is_incomplete(self):
        """
        A final answer given before every call was answered leaves the sequence incomplete.
        """
        messages = [
            Message("assistant", tool_calls=(call("c1"), call("c2"))),
            Message("tool", "r1", tool_call_id="c1"),
            Message("assistant", "answer"),
        ]
        assert frozenset() == surviving_indices(CompletedToolSequences(), messages)

    def test_chained_reasoning_and_untagged(self):
        """
        Chained calls, a reasoning-only message before the call and an id-less tool message join the sequence.
        """
        messages = [
            Message("user", "q"),
            Message("assistant", (ReasoningBlock("think"),)),
            Message("assistant", tool_calls=(call("c1"),)),
            Message("tool", "r1", tool_call_id="c1"),
            Message("tool", "extra", name="lookup"),
            Message("assistant", tool_calls=(call("c2"),)),
            Message("tool", "r2", tool_call_id="c2"),
            Message("assistant", "answer"),
            Message("user", "thanks"),
        ]
        assert [1, 2, 3, 4, 5, 6, 7] == sorted(surviving_indices(CompletedToolSequences(), messages))

    def test_interrupted_by_user(self):
        """
        A user message before the final answer ends the sequence incomplete.
        """
        messages = [
            Message("assistant", tool_calls=(call("c1"),)),
            Message("tool", "r1", tool_call_id="c1"),
            Message("user", "never mind"),
            Message("assistant", "ok"),
        ]
        assert frozenset() == surviving_indices(CompletedToolSequences(), messages)

    @given(scope_transcripts())
    def test_removing_keeps_pairs(self, messages):
        """
        Removing completed sequences from a valid transcript never splits an exchange.
        """
        assert_whole(messages, surviving_indices(~CompletedToolSequences(), messages))


class TestWholeExchanges:
    def transcript(self) -> list[Message]:
        return [
            Message("user", "q"),
            Message("assistant", (ReasoningBlock("think"),)),
            Message("assistant", tool_calls=(call("c1"), call("c2"))),
            Message("tool", "r1", tool_call_id="c1"),
            Message("tool", "r2", tool_call_id="c2"),
            Message("assistant", "answer"),
        ]

    def test_expand_adds_partners(self):
        """
        expand adds the call, its other results and its reasoning to a kept result.
        """
        scope = WholeExchanges(Since(4) & ~Since(5))
        assert [1, 2, 3, 4] == sorted(surviving_indices(scope, self.transcript()))

    def test_drop_removes_partial(self):
        """
        drop removes an exchange the inner scope kept only part of.
        """
        scope = WholeExchanges(Since(2), mode="drop")
        assert [5] == sorted(surviving_indices(scope, self.transcript()))
        assert [1, 2, 3, 4, 5] == sorted(surviving_indices(WholeExchanges(Since(1), mode="drop"), self.transcript()))

    def test_pending_call_kept(self):
        """
        A call at the end still waiting for results is kept as it is, in both modes.
        """
        messages = [*self.transcript(), Message("assistant", tool_calls=(call("c9"),))]
        for mode in ("expand", "drop"):
            assert 6 in surviving_indices(WholeExchanges(Since(6), mode=mode), messages)

    def test_orphan_dropped(self):
        """
        A result whose call is not in the list is dropped in both modes; an id-less tool message is its own unit.
        """
        messages = [Message("tool", "lost", tool_call_id="gone"), Message("tool", "note", name="lookup")]
        for mode in ("expand", "drop"):
            assert [1] == sorted(surviving_indices(WholeExchanges(Since(0), mode=mode), messages))

    def test_one_message_answering_two_exchanges(self):
        """
        A message answering calls of two assistant messages joins both exchanges into one.
        """
        messages = [
            Message("assistant", tool_calls=(call("c1"),)),
            Message("assistant", tool_calls=(call("c2"),)),
            Message("user", (ToolResultBlock("c1", "r1"), ToolResultBlock("c2", "r2"))),
            Message("assistant", "done"),
        ]
        assert [0, 1, 2] == sorted(surviving_indices(WholeExchanges(Since(1) & ~Since(2)), messages))
        assert [3] == sorted(surviving_indices(WholeExchanges(Since(1), mode="drop"), messages))

    @given(scope_trees(), st.sampled_from(["expand", "drop"]), block_transcripts(broken=True))
    def test_integrity_with_result_blocks(self, inner, mode, messages):
        """
        Integrity holds when results arrive as blocks, several to a message.
        """
        assert_whole(messages, surviving_indices(WholeExchanges(inner, mode=mode), messages))

    @given(scope_trees(), st.sampled_from(["expand", "drop"]), scope_transcripts(broken=True))
    def test_integrity(self, inner, mode, messages):
        """
        Any scope wrapped in WholeExchanges keeps no result without its call, no call without its
        later results, no reasoning apart from its call; expand only adds, drop only removes.
        """
        inner_set = surviving_indices(inner, messages)
        result = surviving_indices(WholeExchanges(inner, mode=mode), messages)
        assert_whole(messages, result)
        unit = units(messages)
        tainted = {i for i in range(len(messages)) if unit[i] in {unit[o] for o in orphans(messages)}}
        if mode == "drop":
            assert result <= inner_set
        else:
            assert inner_set - tainted <= result
            assert all(any(unit[i] == unit[j] for j in inner_set) for i in result - inner_set)

    @given(scope_trees(), scope_transcripts())
    def test_slice_integrity(self, inner, messages):
        """
        A slice through the integrity scope holds whole exchanges only.
        """
        ctx = WorkingContext(messages=messages)
        sliced = list(ctx.slice(WholeExchanges(inner)).messages)
        assert not orphans(sliced)
        asked = [a for m in sliced for a in m.call_ids]
        answered_in_input = {a for m in messages for a in m.result_ids}
        answered_in_slice = [a for m in sliced for a in m.result_ids]
        for a in asked:
            assert (a in answered_in_input) == (a in answered_in_slice)


class TestWholeExchangesDropsBrokenExchanges:
    def test_a_call_whose_results_never_come_is_dropped_mid_transcript(self):
        """
        mode="drop" drops a call whose results do not follow it before other
        messages; mode="expand" keeps it, as the inner scope chose it.
        """
        messages = [
            Message("user", "q0"),
            Message("assistant", tool_calls=(call("c1"),)),
            Message("user", "q1"),
            Message("assistant", "a1"),
        ]
        assert [0, 2, 3] == sorted(surviving_indices(WholeExchanges(Since(0), mode="drop"), messages))
        assert [0, 1, 2, 3] == sorted(surviving_indices(WholeExchanges(Since(0)), messages))

    def test_a_call_missing_one_of_its_results_goes_with_the_results_it_has(self):
        """
        An exchange with one result of two dropped whole in drop mode; the same
        exchange pending at the end is kept.
        """
        exchange = [
            Message("assistant", tool_calls=(call("c1"), call("c2"))),
            Message("tool", "r1", tool_call_id="c1"),
        ]
        mid = [Message("user", "q0"), *exchange, Message("user", "q1")]
        assert [0, 3] == sorted(surviving_indices(WholeExchanges(Since(0), mode="drop"), mid))
        end = [Message("user", "q0"), *exchange]
        assert [0, 1, 2] == sorted(surviving_indices(WholeExchanges(Since(0), mode="drop"), end))

    @given(scope_trees(), st.one_of(scope_transcripts(broken=True), block_transcripts(broken=True)))
    def test_drop_keeps_no_dangling_call(self, inner, messages):
        """
        Property: what mode="drop" keeps has no call left without its results
        before other kept messages (the rules' dangling-call), and is whole.
        """
        kept = sorted(surviving_indices(WholeExchanges(inner, mode="drop"), messages))
        sub = [messages[i] for i in kept]
        assert "dangling-call" not in [p.rule for p in check_messages(sub, provider=None)]
        assert_whole(messages, frozenset(kept))


class TestPendingCalls:
    @given(transcripts())
    def test_the_waiting_exchange_at_the_end(self, messages):
        """
        Property: on a valid transcript, PendingCalls keeps a suffix that the
        rules call pending at the end, and nothing when nothing waits.
        """
        kept = sorted(surviving_indices(PendingCalls(), messages))
        rules = [p.rule for p in check_messages(messages, provider=None)]
        if "pending-at-end" in rules:
            assert kept
            assert kept == list(range(kept[0], len(messages)))
            assert messages[kept[0]].call_ids or is_reasoning_only(messages[kept[0]])
        else:
            assert [] == kept


class TestValidRequest:
    @given(scope_trees(), st.booleans(), st.one_of(scope_transcripts(broken=True), block_transcripts(broken=True)))
    def test_what_it_keeps_is_a_valid_request(self, inner, user_first, messages):
        """
        Property: ValidRequest keeps every system message, and what it keeps
        breaks no tool rule; with user_first, its first non-system message is
        a user turn whenever one is kept or comes before it.
        """
        scope = ValidRequest(inner, user_first=user_first)
        kept = sorted(surviving_indices(scope, messages))
        sub = [messages[i] for i in kept]
        assert {i for i, m in enumerate(messages) if m.role == "system"} <= set(kept)
        rules = {p.rule for p in check_messages(sub, provider=None)}
        assert not rules & set(STRUCTURAL_RULES)
        assert (kept, scope.repair(messages)[1]) == scope.repair(messages)
        others = [i for i in kept if messages[i].role != "system"]
        if user_first and others:
            reachable = [i for i in range(len(messages)) if starts_turn(messages[i]) and (i < others[0] or i in kept)]
            assert not reachable or starts_turn(messages[others[0]])

    def test_reports_what_it_repaired(self):
        """
        repair() names the rules it enforced; an already valid request needs none.
        """
        messages = [
            Message("user", "q"),
            Message("tool", "lost", tool_call_id="gone"),
            Message("assistant", "a"),
        ]
        assert ([0, 2], ["orphan-result"]) == ValidRequest(Since(0)).repair(messages)
        assert ([0, 2], []) == ValidRequest(Since(0)).repair(messages, [0, 2])
        assert "ValidRequest(Since(0), user_first=False)" == repr(ValidRequest(Since(0), user_first=False))

    def test_bad_input(self):
        """
        A non-scope or a non-bool flag is refused.
        """
        with pytest.raises(TypeError, match=r"ValidRequest\(\) needs a scope, got 3"):
            ValidRequest(3)
        with pytest.raises(TypeError, match=r"user_first=...\) must be True or False, got 1"):
            ValidRequest(Since(0), user_first=1)
