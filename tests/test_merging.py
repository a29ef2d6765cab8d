"""
Tests for the merge of contexts (workingctx._merging): the tail modes, the scratchpad
policies, delta merges after a context was rewritten, and the calls left pending.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.strategies import (
    scratchpads,
    simple_messages,
)
from workingctx import Message, PrefixContext, ToolCall, WorkingContext
from workingctx.adapters import openai_chat
from workingctx.exceptions import MergeError
from workingctx.frozen import thaw
from workingctx.validity import check_messages


class TestPendingCalls:
    @given(st.data())
    def test_every_kind_of_waiting_call_is_pending(self, data):
        """
        Any Chat Completions transcript with function and custom tool calls,
        or Responses client calls of every kind, cut inside an exchange: the
        pending calls are exactly the calls the rules say wait at the end
        (``pending-at-end``), in that order, each under the id and name its
        wire call gives; a fork for each one that a tool message answers is taken.
        """
        from tests.wire_strategies import chat_messages, client_call_examples  # noqa: PLC0415
        from workingctx.adapters import openai_responses  # noqa: PLC0415

        if data.draw(st.booleans(), label="chat"):
            wire = data.draw(chat_messages(custom=True))
            calls = [i for i, m in enumerate(wire) if m.get("tool_calls")]
            assume(calls)
            at = data.draw(st.sampled_from(calls))
            answered = data.draw(st.integers(0, len(wire[at]["tool_calls"]) - 1))
            wire = wire[: at + 1 + answered]
            names = {c["id"]: (c.get("function") or c["custom"])["name"] for c in wire[at]["tool_calls"]}
            ctx = openai_chat.read(wire)
        else:
            pairs = data.draw(st.lists(st.sampled_from(range(6)), min_size=1, max_size=4))
            asking = [client_call_examples(f"call_{n}")[kind] for n, kind in enumerate(pairs)]
            answered = data.draw(st.integers(0, len(asking) - 1))
            answers = [client_call_examples(f"call_{n}")[kind][1] for n, kind in enumerate(pairs)][:answered]
            items = [{"role": "user", "content": "go"}, *(a for a, _ in asking), *answers]
            names = {a.get("call_id") or a["id"]: a.get("name") or a["type"] for a, _ in asking}
            ctx = openai_responses.read(items)
        waiting = [p.ids for p in check_messages(ctx.assembled()) if p.rule == "pending-at-end"]
        assert waiting == [tuple(c.id for c in ctx.pending_calls)]
        assert [names[c.id] for c in ctx.pending_calls] == [c.name for c in ctx.pending_calls]
        for call in ctx.pending_calls:
            if call.provider_data.get("openai_responses", {}).get("item", {}).get("type", "custom_tool_call") in {
                "custom_tool_call",
                "function_call",
            }:
                assert call.id == ctx.fork(for_call=call.id).parent_call_id


class TestMerge:
    def test_union_keeps_a_shared_message_once_and_concat_twice(self):
        """
        Two contexts holding the same tool message: union keeps one, concat two.
        """
        hit = Message("tool", "cert expired 2026-08-01", name="lookup")
        a = WorkingContext().append(hit)
        b = WorkingContext().append(hit)

        union = WorkingContext()
        union.merge(a, mode="union").merge(b, mode="union")
        assert 1 == len(union.messages)

        concat = WorkingContext()
        concat.merge(a).merge(b)
        assert 2 == len(concat.messages)

    def test_union_rekeys_a_call_that_differs_only_in_arguments(self):
        """
        Two tool-call messages sharing a call id but not arguments are two
        calls: union keeps both, the incoming one (and its result) under a new
        id, and says so in the journal.
        """
        one = Message("assistant", "", tool_calls=(ToolCall("c1", "search", {"q": "a"}),))
        two = Message("assistant", "", tool_calls=(ToolCall("c1", "search", {"q": "b"}),))
        assert hash(one) != hash(two) or one != two
        ctx = WorkingContext().append(Message("user", "q"), one, Message("tool", "A", tool_call_id="c1"))
        other = WorkingContext().append(two, Message("tool", "B", tool_call_id="c1"))
        ctx.merge(other, mode="union")
        expected = [
            ("assistant", ("c1",), None),
            ("tool", (), "c1"),
            ("assistant", ("c1-2",), None),
            ("tool", (), "c1-2"),
        ]
        assert expected == [(m.role, m.call_ids, m.tool_call_id) for m in ctx.messages[1:]]
        assert {"q": "b"} == ctx.messages[3].tool_calls[0].arguments
        assert [{"kind": "merge", "mode": "union", "rekeyed": [["c1", "c1-2"]]}] == thaw(list(ctx.journal))

    def test_concat_after_fork_duplicates_history_delta_does_not(self):
        """
        A fork merged back with concat repeats the shared message; delta adds
        only the reply.
        """
        parent = WorkingContext().append(Message("user", "q"))
        child = parent.fork().append(Message("assistant", "a"))
        assert 3 == WorkingContext(messages=parent.messages).merge(child).size()

        parent.merge(child, mode="delta")
        assert ["q", "a"] == [m.content for m in parent.messages]

    def test_delta_twice_applies_once(self):
        """
        Merging the same child's delta twice appends its work once; new work
        after the first merge arrives with the second.
        """
        parent = WorkingContext().append(Message("user", "q"))
        child = parent.fork().append(Message("assistant", "a1"))
        parent.merge(child, mode="delta").merge(child, mode="delta")
        child.append(Message("assistant", "a2"))
        parent.merge(child, mode="delta")
        assert ["q", "a1", "a2"] == [m.content for m in parent.messages]

    def test_delta_refuses_a_stranger(self):
        """
        delta with a context that is not a fork of this one raises MergeError
        and changes nothing.
        """
        parent = WorkingContext().append(Message("user", "q"))
        stranger = WorkingContext().append(Message("user", "other"))
        stranger.note("k", 1)
        with pytest.raises(MergeError, match="mode='union'"):
            parent.merge(stranger, mode="delta")
        assert 1 == parent.size()
        assert {} == parent.scratchpad

    def test_delta_from_a_grandchild(self):
        """
        A fork of a fork merges into the grandparent with only its own and
        its parent's additions.
        """
        root = WorkingContext().append(Message("user", "q"))
        child = root.fork().append(Message("assistant", "c"))
        grandchild = child.fork().append(Message("assistant", "g"))
        root.merge(grandchild, mode="delta")
        assert ["q", "c", "g"] == [m.content for m in root.messages]

    def test_delta_only_applies_notes_the_fork_changed(self):
        """
        A parent's newer note is not overwritten by the child's stale copy of it.
        """
        parent = WorkingContext().note("stage", "plan").note("owner", "sre")
        child = parent.fork().note("owner", "me")
        parent.note("stage", "act")
        parent.merge(child, mode="delta")
        assert {"stage": "act", "owner": "me"} == parent.scratchpad

    def test_scratchpad_policies(self):
        """
        last-write-wins by default; 'raise' refuses a conflict and changes
        nothing; a per-key reducer combines.
        """
        base = WorkingContext().note("items", [1]).note("k", "a")
        other = WorkingContext().note("items", [2]).note("k", "b")
        merged = base.fork().merge(other)
        assert {"items": [2], "k": "b"} == merged.scratchpad

        strict = base.fork()
        with pytest.raises(MergeError, match="scratchpad conflict on 'items'"):
            strict.merge(other, scratchpad="raise")
        assert {"items": [1], "k": "a"} == strict.scratchpad

        combined = base.fork().merge(other, scratchpad={"items": lambda old, new: old + new})
        assert {"items": [1, 2], "k": "b"} == combined.scratchpad

    def test_journal_entries_applied_as_they_are(self):
        """
        The other's uncommitted entries arrive unchanged (attribution intact)
        and are acknowledged there.
        """
        parent = WorkingContext()
        parent.journal.record({"agent_id": "parent"})
        child = parent.fork()
        entry = {"kind": "row_written", "agent_id": "enricher-a"}
        child.journal.record(entry)
        recorded = tuple(child.journal)[-1]
        parent.merge(child, mode="delta")
        assert recorded is tuple(parent.journal)[-1]
        assert entry == recorded
        assert 2 == len(parent.journal)
        assert not child.journal.has_uncommitted()

    def test_merge_copies_notes(self):
        """
        A merged nested note is a copy: later writes in the child do not reach
        the parent.
        """
        parent = WorkingContext()
        child = parent.fork().note("plan", {"steps": ["a"]})
        parent.merge(child, mode="delta")
        child.scratchpad["plan"]["steps"].append("b")
        assert {"steps": ["a"]} == parent.get("plan")

    def test_unknown_scratchpad_policy_is_refused_up_front(self):
        """
        An unknown scratchpad policy raises MergeError even when no key
        conflicts, and nothing is merged.
        """
        ctx = WorkingContext()
        with pytest.raises(MergeError, match="unknown scratchpad policy 'newest'"):
            ctx.merge(WorkingContext().append(Message("user", "q")).note("k", 1), scratchpad="newest")  # type: ignore[arg-type]
        assert (0, {}) == (ctx.size(), ctx.scratchpad)

    def test_unknown_mode(self):
        """
        An unknown mode raises MergeError naming it.
        """
        with pytest.raises(MergeError, match="'zip'"):
            WorkingContext().merge(WorkingContext(), mode="zip")  # type: ignore[arg-type]

    @given(st.lists(simple_messages, max_size=6), st.lists(simple_messages, max_size=6), scratchpads)
    def test_union_twice_equals_once(self, mine, theirs, notes):
        """
        merge(x, "union") is idempotent.
        """
        other = WorkingContext(messages=theirs, scratchpad=notes)
        once = WorkingContext(messages=mine).merge(other, mode="union")
        twice = WorkingContext(messages=mine).merge(other, mode="union").merge(other, mode="union")
        assert once.freeze() == twice.freeze()

    @given(st.lists(simple_messages, max_size=6), st.lists(simple_messages, max_size=6))
    def test_union_is_multiset_max(self, mine, theirs):
        """
        After a union every message occurs as often as in the more frequent side.
        """
        merged = WorkingContext(messages=mine).merge(WorkingContext(messages=theirs), mode="union")
        mine_count, theirs_count = Counter(mine), Counter(theirs)
        expected = {m: max(mine_count[m], theirs_count[m]) for m in mine_count | theirs_count}
        assert expected == dict(Counter(merged.messages))
        assert mine == list(merged.messages[: len(mine)])

    @given(
        base=st.lists(simple_messages, max_size=4),
        additions=st.lists(st.lists(simple_messages, max_size=3), min_size=1, max_size=4),
        seed=st.integers(0, 1000),
    )
    def test_children_merged_in_fork_order_whatever_finished_first(self, base, additions, seed):
        """
        Children forked one after another and merged in fork order give one
        result, however their work interleaved.
        """
        parent = WorkingContext(messages=base)
        children = [parent.fork() for _ in additions]
        turns = [i for i, batch in enumerate(additions) for _ in batch]
        random.Random(seed).shuffle(turns)
        queues = [list(batch) for batch in additions]
        for i in turns:  # the children's work interleaves; each child's own order holds
            children[i].append(queues[i].pop(0))
        for child in children:
            parent.merge(child, mode="delta")
        assert base + [m for batch in additions for m in batch] == list(parent.messages)


class TestLineageAfterRewrites:
    def test_with_prefix_counts_the_new_prefix(self):
        """
        A context given a new prefix counts that prefix's tokens.
        """
        ctx = WorkingContext(prefix=PrefixContext(system_prompt="short")).append(Message("user", "hi"))
        ctx.count_tokens()
        longer = ctx.with_prefix(PrefixContext(system_prompt="long " * 100))
        fresh = WorkingContext(prefix=longer.prefix, messages=ctx.messages)
        assert fresh.count_tokens() == longer.count_tokens()

    def test_grandchild_delta_merges_only_changed_notes(self):
        """
        A fork of a fork, merged into the root with delta, does not bring back
        notes the root changed since.
        """
        root = WorkingContext().note("a", 1)
        child = root.fork()
        grandchild = child.fork().append(Message("user", "x"))
        root.note("a", 2)
        root.merge(grandchild, mode="delta", scratchpad="raise")
        assert 2 == root.get("a")
        assert ["x"] == [m.content for m in root.messages]

    def test_delta_after_a_reducer_rewrote_the_fork(self):
        """
        A fork whose tail a reducer rewrote merges back what it appended,
        without repeating the history it kept from its parent: a rewrite is
        not an append.
        """
        from workingctx.reducers import remove_tool_messages  # noqa: PLC0415

        parent = WorkingContext(messages=[Message("user", "q1"), Message("assistant", "a1")])
        child = parent.fork()
        child.extend(
            [
                Message("user", "q2"),
                Message("assistant", tool_calls=[ToolCall("t1", "f", {})]),
                Message("tool", "r", tool_call_id="t1"),
                Message("assistant", "a2"),
            ]
        )
        child.merge(WorkingContext(), mode=remove_tool_messages)
        parent.merge(child, mode="delta")
        # the reducer removed the completed tool sequence from the child's own tail only
        assert ["q1", "a1", "q2"] == [m.content for m in child.messages]
        assert ["q1", "a1", "q2", "", "r", "a2"] == [m.content for m in parent.messages]

    def test_replace_tail_keeps_the_shared_start(self):
        """
        replace_tail() keeps the lineage of the leading messages it keeps,
        and checks every item first.
        """
        parent = WorkingContext(messages=[Message("user", "q1"), Message("assistant", "a1")])
        child = parent.fork().append(Message("user", "q2"))
        with pytest.raises(TypeError, match="item 1"):
            child.replace_tail([child.messages[0], "x"])  # type: ignore[list-item]
        assert 3 == child.size()
        child.replace_tail([child.messages[0], child.messages[2]])
        parent.merge(child, mode="delta")
        assert ["q1", "a1", "q2"] == [m.content for m in parent.messages]
