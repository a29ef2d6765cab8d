"""
Tests for workingctx.context: the four axes, fork, merge and concurrency.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import pickle
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tests.strategies import (
    json_values,
    messages,
    reused_id_forks,
    scratchpads,
    short_names,
    simple_messages,
    transcripts,
)
from workingctx import FrozenContext, Message, MutationJournal, PrefixContext, ToolCall, WorkingContext, _rekey
from workingctx.adapters import openai_chat
from workingctx.exceptions import MergeError, PayloadError, WorkingCtxError
from workingctx.frozen import MAX_DEPTH, thaw
from workingctx.history import entry_from_data, entry_to_data
from workingctx.messages import TextBlock, ToolCallBlock, ToolResultBlock
from workingctx.reducers import ToolResult, add_messages, add_messages_to
from workingctx.serialization import from_json, to_json
from workingctx.validity import STRUCTURAL_RULES, check_messages


class TestPrefixTailAndNotes:
    def test_the_prefix_renders_first_and_the_request_counts_25(self):
        """
        One message in the tail, the prefix rendered first, a note read back,
        and 25 tokens for the whole request.
        """
        ctx = WorkingContext(prefix=PrefixContext(system_prompt="You are a careful research assistant."))
        ctx.append(Message("user", "What changed in the pricing table?"))
        ctx.note("ticket", "ENG-4412")

        assert 1 == ctx.size()
        assert ["system", "user"] == [m.role for m in ctx.assembled()]
        assert "ENG-4412" == ctx.get("ticket")
        assert 25 == asyncio.run(ctx.tokens())

    def test_prefix_is_frozen_and_rendered_first(self):
        """
        The grounding follows the system prompt; assigning a prefix field raises
        attrs' FrozenInstanceError.
        """
        prefix = PrefixContext(
            system_prompt="You are a careful research assistant.",
            grounding=(Message("system", "Q3 pricing: input $3/Mtok, output $15/Mtok."),),
        )
        ctx = WorkingContext(prefix=prefix)
        ctx.append(Message("user", "What is the output price?"))

        assert [
            "system | You are a careful research assistant.",
            "system | Q3 pricing: input $3/Mtok, output $15/Mtok.",
            "user | What is the output price?",
        ] == [f"{m.role} | {m.content}" for m in ctx.assembled()]
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            prefix.system_prompt = "something else"  # type: ignore[misc]

    def test_tokens_of_the_tool_transcript(self):
        """
        A context built from the three-message tool transcript counts 37.
        """
        transcript = [
            Message("user", "check the cert"),
            Message("assistant", "", tool_calls=(ToolCall("c1", "openssl", {"host": "example.com", "port": 443}),)),
            Message("tool", "notAfter=2026-08-01", name="openssl", tool_call_id="c1"),
        ]
        assert 37 == asyncio.run(WorkingContext(messages=transcript).tokens())

    @given(st.lists(simple_messages, max_size=8), st.lists(simple_messages, max_size=8))
    def test_recount_after_append_equals_fresh_count(self, first, second):
        """
        The incremental count after appends equals a count from scratch.
        """
        ctx = WorkingContext(messages=first)
        ctx.count_tokens()
        ctx.extend(second)
        assert WorkingContext(messages=first + second).count_tokens() == ctx.count_tokens()

    def test_no_mutator_reaches_the_prefix(self):
        """
        Appending, noting and clearing leave the prefix object as it was.
        """
        prefix = PrefixContext(system_prompt="s")
        ctx = WorkingContext(prefix=prefix).append(Message("user", "u")).note("k", 1).clear_messages()
        assert ctx.prefix is prefix
        with pytest.raises(AttributeError):
            ctx.prefix = PrefixContext()  # type: ignore[misc]


class TestBadInput:
    def test_third_of_five_bad_changes_nothing(self):
        """
        A non-Message third argument raises a TypeError naming it, and none of
        the five is appended.
        """
        ctx = WorkingContext().append(Message("user", "before"))
        good = Message("assistant", "ok")
        with pytest.raises(TypeError, match=r"item 2 is 'oops' of type str, not a Message"):
            ctx.append(good, good, "oops", good, good)  # type: ignore[arg-type]
        assert ["before"] == [m.content for m in ctx.messages]

    def test_extend_checks_everything_first(self):
        """
        extend() with a bad item in the middle appends nothing.
        """
        ctx = WorkingContext()
        with pytest.raises(TypeError, match="item 1"):
            ctx.extend([Message("user", "a"), {"role": "user"}, Message("user", "b")])  # type: ignore[list-item]
        assert 0 == ctx.size()

    def test_append_a_list_suggests_extend(self):
        """
        Passing a list to append() says to use extend().
        """
        with pytest.raises(TypeError, match="extend"):
            WorkingContext().append([Message("user", "a")])  # type: ignore[arg-type]

    def test_non_str_scratchpad_key(self):
        """
        A non-str key raises a TypeError naming the key, and nothing is set.
        """
        ctx = WorkingContext().note("a", 1)
        with pytest.raises(TypeError, match="got 3 of type int"):
            ctx.note(3, "x")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="got 3 of type int"):
            ctx.update_scratchpad({"b": 2, 3: "x"})  # type: ignore[dict-item]
        assert {"a": 1} == ctx.scratchpad

    def test_bad_constructor_arguments(self):
        """
        Wrong types for prefix, messages, scratchpad and limit raise clearly.
        """
        with pytest.raises(TypeError, match="PrefixContext"):
            WorkingContext(prefix="You are terse.")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="wrap one message"):
            WorkingContext(messages=Message("user", "x"))  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="scratchpad keys"):
            WorkingContext(scratchpad={1: "x"})  # type: ignore[dict-item]
        with pytest.raises(ValueError, match="limit"):
            WorkingContext(limit=-1)

    def test_unknown_role_is_refused_before_append(self):
        """
        A message with an unknown role cannot even be built.
        """
        with pytest.raises(ValueError, match="unknown role 'System'"):
            Message("System", "x")  # type: ignore[arg-type]


class TestFork:
    def test_the_childs_message_and_note_stay_out_of_the_parent(self):
        """
        The child's message and note do not reach the parent.
        """
        parent = WorkingContext()
        parent.append(Message("user", "Summarise the incident."))
        parent.note("owner", "sre")

        child = parent.fork()
        child.append(Message("assistant", "Root cause: expired cert."))
        child.note("owner", "me")

        assert (1, "sre") == (parent.size(), parent.get("owner"))
        assert (2, "me") == (child.size(), child.get("owner"))

    def test_fork_shares_prefix_and_inherits_settings(self):
        """
        The prefix object is shared; counter, limit and shared are inherited;
        the lock is new; the journal is seeded and committed.
        """
        parent = WorkingContext(prefix=PrefixContext(system_prompt="s"), limit=100, shared=True)
        parent.journal.record("e1")
        child = parent.fork()
        assert child.prefix is parent.prefix
        assert (child.counter, child.limit, child.shared) == (parent.counter, parent.limit, parent.shared)
        assert child.lock is not parent.lock
        assert ("e1",) == tuple(child.journal)
        assert not child.journal.has_uncommitted()

    @given(
        base=st.lists(simple_messages, max_size=5),
        notes=scratchpads,
        parent_later=st.lists(simple_messages, max_size=3),
        child_later=st.lists(simple_messages, max_size=3),
        key=short_names,
        value=json_values(4),
    )
    def test_fork_and_parent_never_see_each_others_writes(self, base, notes, parent_later, child_later, key, value):
        """
        After a fork, messages, notes (nested included) and journal entries
        written on one side never show on the other.
        """
        parent = WorkingContext(messages=base, scratchpad={"nested": {"list": [1]}, **notes})
        before_parent = parent.freeze()
        child = parent.fork()
        before_child = child.freeze()
        assert before_parent == before_child

        parent.extend(parent_later).note(key, value)
        parent.journal.record("parent")
        child.extend(child_later).note(key + "_child", value)
        child.scratchpad["nested"]["list"].append(2)
        child.journal.record("child")

        assert list(before_parent.messages) + parent_later == list(parent.messages)
        assert list(before_child.messages) + child_later == list(child.messages)
        assert [1] == parent.scratchpad["nested"]["list"]
        assert key + "_child" not in parent.scratchpad or key + "_child" in notes
        assert "child" not in tuple(parent.journal)
        assert "parent" not in tuple(child.journal)

    def test_fork_copies_notes_pickle_cannot_handle(self):
        """
        A note holding an object of a local class (which pickle refuses) is
        still deep-copied into the fork, as copy.deepcopy would.
        """

        class Local:
            def __init__(self) -> None:
                self.items: list[int] = []

        parent = WorkingContext().note("obj", Local()).note("plain", {"a": [1]})
        child = parent.fork()
        child.get("obj").items.append(1)
        child.get("plain")["a"].append(2)
        assert [] == parent.get("obj").items
        assert {"a": [1]} == parent.get("plain")

    def test_fork_honours_deepcopy_of_your_objects(self):
        """
        A note whose class says how to deep-copy itself (here: shared, as a
        client would be) is copied the way copy.deepcopy would.
        """

        class Client:
            def __deepcopy__(self, memo: dict[int, object]) -> Client:
                return self

        client = Client()
        parent = WorkingContext().note("client", client).note("plain", [1])
        child = parent.fork()
        assert client is child.get("client")
        child.get("plain").append(2)
        assert [1] == parent.get("plain")


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


class TestSlice:
    def test_writes_to_a_slice_never_reach_the_parent(self):
        """
        Appending and noting on a slice leaves the parent as it was.
        """
        from workingctx import RoleFilter  # noqa: PLC0415

        parent = WorkingContext(shared=True).append(Message("user", "q"), Message("assistant", "a"))
        parent.note("plan", {"steps": []})
        part = parent.slice(RoleFilter({"user"}))
        part.append(Message("user", "more")).note("x", 1)
        part.scratchpad["plan"]["steps"].append("s")
        assert ["q", "a"] == [m.content for m in parent.messages]
        assert {"plan": {"steps": []}} == parent.scratchpad
        assert part.shared is False
        assert part.prefix is parent.prefix


class TestConcurrency:
    def test_locked_pairs_from_three_workers_stay_whole_and_in_order(self):
        """
        Three workers each append a pair with an await in between, under the
        lock: the pairs come out whole and in order.
        """

        async def main() -> list[str]:
            board = WorkingContext(shared=True)

            async def worker(name: str) -> None:
                async def add_pair(ctx: WorkingContext) -> None:
                    ctx.append(Message("assistant", f"{name}: starting"))
                    await asyncio.sleep(0)
                    ctx.append(Message("assistant", f"{name}: done"))

                await board.apply_locked(add_pair)

            await asyncio.gather(*(worker(n) for n in ("a", "b", "c")))
            return [str(m.content) for m in board.messages]

        assert [
            "a: starting",
            "a: done",
            "b: starting",
            "b: done",
            "c: starting",
            "c: done",
        ] == asyncio.run(main())

    def test_thousand_read_modify_writes_lose_nothing(self):
        """
        1,000 coroutines each read a counter, yield, and write it back plus
        one, under the lock: the final value is 1,000.
        """

        async def main() -> int:
            board = WorkingContext(shared=True).note("n", 0)

            async def bump(ctx: WorkingContext) -> None:
                value = ctx.get("n")
                await asyncio.sleep(0)
                ctx.note("n", value + 1)

            await asyncio.gather(*(board.apply_locked(bump) for _ in range(1000)))
            return int(board.get("n"))

        assert 1000 == asyncio.run(main())

    def test_apply_locked_accepts_sync_functions_and_returns(self):
        """
        A sync function runs under the lock and its result comes back.
        """

        async def main() -> int:
            ctx = WorkingContext()
            return await ctx.apply_locked(lambda c: c.append(Message("user", "x")).size())

        assert 1 == asyncio.run(main())


class TestMessagesView:
    @given(transcripts(), st.data())
    def test_messages_view_is_a_snapshot(self, transcript, data):
        """
        ctx.messages taken before an append does not change after it.
        """
        ctx = WorkingContext(messages=transcript)
        view = ctx.messages
        ctx.append(data.draw(messages()))
        assert tuple(transcript) == view
        assert len(transcript) + 1 == ctx.size()


def test_journal_argument_forms():
    """
    A journal can be passed as a MutationJournal or as seed entries (committed).
    """
    journal: MutationJournal[str] = MutationJournal()
    assert WorkingContext(journal=journal).journal is journal
    seeded = WorkingContext(journal=["a", "b"]).journal
    assert ("a", "b") == tuple(seeded)
    assert not seeded.has_uncommitted()


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


class TestLockUnderEveryLoop:
    @staticmethod
    def _request(ctx: WorkingContext, name: str, pairs: int = 6) -> None:
        """
        One request of an app that calls asyncio.run() per request: *pairs*
        coroutines each append a pair under the lock, with an await between.
        """

        async def add_pair(c: WorkingContext, i: int) -> None:
            c.append(Message("user", f"{name}-{i}-q"))
            await asyncio.sleep(0)
            c.append(Message("assistant", f"{name}-{i}-a"))

        async def main() -> None:
            await asyncio.gather(*(ctx.apply_locked(lambda c, i=i: add_pair(c, i)) for i in range(pairs)))

        asyncio.run(main())

    def test_a_long_lived_context_serves_one_asyncio_run_per_request(self):
        """
        The lock contended under one event loop still works under the next
        asyncio.run(): every request applies all its pairs, whole and in order.
        """
        ctx = WorkingContext(shared=True)
        for request in ("r1", "r2", "r3"):
            self._request(ctx, request)
        assert 36 == ctx.size()
        contents = [str(m.content) for m in ctx.messages]
        assert all(q.endswith("-q") and a == q[:-1] + "a" for q, a in zip(contents[::2], contents[1::2], strict=True))
        assert not ctx.lock.locked()

    def test_event_loops_on_two_threads_exclude_each_other(self):
        """
        Two threads, each with its own event loop, run 200 read-modify-writes
        on one context under its lock: none is lost.
        """
        import threading  # noqa: PLC0415

        ctx = WorkingContext(shared=True).note("n", 0)

        async def bump(c: WorkingContext) -> None:
            value = c.get("n")
            await asyncio.sleep(0)
            c.note("n", value + 1)

        async def main() -> None:
            await asyncio.gather(*(ctx.apply_locked(bump) for _ in range(100)))

        threads = [threading.Thread(target=asyncio.run, args=(main(),)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert 200 == ctx.get("n")
        assert not ctx.lock.locked()

    def test_a_failing_function_leaves_nothing_half_applied(self):
        """
        apply_locked() is all or nothing: a function that appends, notes and
        records, then raises, leaves the tail, notes and journal as they were.
        """
        ctx = WorkingContext(messages=[Message("user", "keep")]).note("plan", {"steps": ["a"]})
        ctx.journal.record({"kind": "kept"})
        before = ctx.freeze()

        async def half(c: WorkingContext) -> None:
            c.append(Message("assistant", "one"), Message("assistant", "two"))
            c.get("plan")["steps"].append("b")
            c.note("extra", 1)
            c.journal.record({"kind": "lost"})
            await asyncio.sleep(0)
            c.replace_tail([Message("user", "other")])
            msg = "tool failed"
            raise RuntimeError(msg)

        with pytest.raises(RuntimeError, match="tool failed"):
            asyncio.run(ctx.apply_locked(half))
        assert before == ctx.freeze()
        assert before.digest() == ctx.digest()
        assert (1, 0) == (len(ctx.journal), ctx.journal.committed)
        assert not ctx.lock.locked()
        # the context works on afterwards
        assert 2 == asyncio.run(ctx.apply_locked(lambda c: c.append(Message("user", "next")).size()))

    def test_a_cancelled_waiter_never_holds_the_lock(self):
        """
        A coroutine cancelled while it waits for the lock neither runs nor
        keeps the lock; the waiters behind it still get it, in order.
        """
        ctx = WorkingContext(shared=True)

        async def main() -> list[str]:
            order: list[str] = []
            gate = asyncio.Event()

            async def first(_c: WorkingContext) -> None:
                order.append("first")
                await gate.wait()

            holder = asyncio.create_task(ctx.apply_locked(first))
            await asyncio.sleep(0)
            cancelled = asyncio.create_task(ctx.apply_locked(lambda _c: order.append("cancelled")))
            last = asyncio.create_task(ctx.apply_locked(lambda _c: order.append("last")))
            await asyncio.sleep(0)
            cancelled.cancel()
            gate.set()
            await asyncio.gather(holder, last)
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            return order

        assert ["first", "last"] == asyncio.run(main())
        assert not ctx.lock.locked()

    def test_release_of_a_free_lock_raises(self):
        """
        Releasing a lock nobody holds is a RuntimeError, as with asyncio.Lock.
        """
        with pytest.raises(RuntimeError, match="not held"):
            WorkingContext().lock.release()


class TestFreezeCostsTheSameAtEveryLength:
    def test_freeze_after_an_append_allocates_the_same_at_any_length(self):
        """
        Taking a snapshot after an append allocates the same on a tail of
        100,000 messages as on one of 1,000: the snapshot reads the messages
        and journal entries into tuples only when they are first read.
        """
        import tracemalloc  # noqa: PLC0415

        def peak_of_one_step(n: int) -> int:
            ctx = WorkingContext(messages=[Message("user", f"m{i}") for i in range(n)])
            ctx.journal.apply(range(n))
            ctx.freeze().digest()
            for step in range(3):
                message = Message("user", f"step {step}")
                tracemalloc.start()
                ctx.append(message)
                ctx.journal.record(step)
                ctx.freeze().digest()
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
            return peak

        assert peak_of_one_step(100_000) < 4 * peak_of_one_step(1_000) + 4096

    def test_a_lazy_snapshot_keeps_its_moment_through_every_change(self):
        """
        A snapshot taken before appends, a trim that keeps the start, a trim
        that cuts, a clear, and an apply_locked() rolled back, reads the
        messages and journal of its own moment, equal to an eager copy.
        """
        ctx = WorkingContext(messages=[Message("user", "q0"), Message("assistant", "a0")])
        ctx.journal.record({"n": 0})
        snap = ctx.freeze()
        eager = FrozenContext(prefix=ctx.prefix, messages=ctx.messages, journal=tuple(ctx.journal))
        ctx.append(Message("user", "q1"))
        ctx.journal.record({"n": 1})
        ctx.replace_tail([*ctx.messages, Message("assistant", "a1")])
        ctx.replace_tail(ctx.messages[1:])

        async def fail(c: WorkingContext) -> None:
            c.append(Message("user", "lost"))
            c.journal.record({"n": "lost"})
            msg = "boom"
            raise RuntimeError(msg)

        with pytest.raises(RuntimeError):
            asyncio.run(ctx.apply_locked(fail))
        ctx.journal.record({"n": 2})
        ctx.clear_messages()
        assert eager.messages == snap.messages
        assert eager.journal == snap.journal
        assert eager == snap
        assert eager.digest() == snap.digest()
        assert isinstance(snap.messages, tuple)
        assert snap.messages is snap.messages


def _cycle() -> dict[str, object]:
    loop: dict[str, object] = {}
    loop["me"] = loop
    return loop


def _tuple_around_a_cycle() -> tuple[int, list[object]]:
    inner: list[object] = []
    inner.append(inner)
    return (0, inner)


def _nested(levels: int) -> object:
    deep: object = 1
    for _ in range(levels):
        deep = [deep]
    return deep


_UNKEEPABLE = {
    "a dict that contains itself": (_cycle, r"note 'bad'\['me'\] is note 'bad' again: the payload contains itself"),
    "nan": (lambda: float("nan"), r"note 'bad' is nan, which JSON cannot hold; store None or a string"),
    "inf": (lambda: float("inf"), r"note 'bad' is inf, which JSON cannot hold"),
    "-inf deep in data": (lambda: {"a": [1, {"b": -float("inf")}]}, r"note 'bad'\['a'\]\[1\]\['b'\] is -inf"),
    "a long int": (lambda: 10**5000, r"note 'bad' is an int of 16610 bits, longer than 4300 decimal digits"),
    "a long int in a tuple": (lambda: (1, 10**5000), r"note 'bad'\[1\] is an int .* store it as a string"),
    "inf in a set": (lambda: {1.0, float("inf")}, r"note 'bad'.* is inf"),
    "one level too deep": (lambda: _nested(MAX_DEPTH + 1), rf"note 'bad'\[0\].* nested more than {MAX_DEPTH} levels"),
    "10,000 levels deep": (lambda: _nested(10_000), rf"note 'bad'\[0\].* nested more than {MAX_DEPTH} levels"),
    "a list in a tuple that contains itself": (
        _tuple_around_a_cycle,
        r"note 'bad'\[1\]\[0\] is note 'bad'\[1\] again",
    ),
}


def _state(ctx: WorkingContext) -> tuple[Any, ...]:
    """
    Everything a refused write must leave as it was.
    """
    return ctx.digest(), dict(ctx.freeze().scratchpad), len(ctx.journal), ctx.messages[:]


class TestNotesThatCannotBeKept:
    @pytest.mark.parametrize("writer", ["note", "update_scratchpad", "setitem", "constructor", "merge", "edit_notes"])
    @pytest.mark.parametrize("kind", sorted(_UNKEEPABLE))
    def test_every_writer_refuses_a_note_that_cannot_be_kept(self, writer, kind):
        """
        A note that contains itself, nests deeper than MAX_DEPTH, or holds a
        NaN, an infinity or an int too long to write is refused by every
        writer of notes with a PayloadError naming the note, and nothing
        changes: not the notes, the journal, the messages nor the digest.
        """
        make, message = _UNKEEPABLE[kind]
        ctx = WorkingContext(scratchpad={"plan": {"steps": ["a"]}, "stage": "act"})
        ctx.append(Message("user", "hi"))
        ctx.journal.record("started")
        child = ctx.fork().append(Message("assistant", "hello"))
        child.journal.record("child")
        before = _state(ctx)
        error: type[Exception] = WorkingCtxError if writer == "edit_notes" else PayloadError  # edit_notes: JSON only

        def edit() -> None:
            with ctx.edit_notes() as notes:
                notes["stage"] = "verify"
                notes["bad"] = make()

        writers = {
            "note": lambda: ctx.note("bad", make()),
            "update_scratchpad": lambda: ctx.update_scratchpad({"aaa": 1, "stage": "verify", "bad": make(), "zzz": 2}),
            "setitem": lambda: ctx.scratchpad.__setitem__("bad", make()),
            "constructor": lambda: WorkingContext(scratchpad={"stage": "act", "bad": make()}),
            "merge": lambda: ctx.merge(
                child.note("stage", "done"), mode="delta", scratchpad={"stage": lambda _old, _new: make()}
            ),
            "edit_notes": edit,
        }
        if writer == "merge":  # the reducer of the note 'stage' makes the value
            message = message.replace("'bad'", "'stage'")
        with pytest.raises(error, match=message if writer != "edit_notes" else "'bad'"):
            writers[writer]()
        assert before == _state(ctx)
        assert "bad" not in ctx.scratchpad

    @pytest.mark.parametrize("kind", sorted(_UNKEEPABLE))
    def test_damage_in_place_is_refused_by_freeze_and_digest_as_a_write_is(self, kind):
        """
        A note changed in place after it was set (the scratchpad stays live)
        can only be checked when it is read: freeze() and digest() refuse it
        with the error the write would have raised; fork() still copies it.
        """
        make, _ = _UNKEEPABLE[kind]
        with pytest.raises(PayloadError) as refused:
            WorkingContext().note("bad", {"slot": make()})
        ctx = WorkingContext().note("bad", {"slot": None})
        ctx.scratchpad["bad"]["slot"] = make()
        for operation in (ctx.freeze, ctx.digest, ctx.freeze):
            with pytest.raises(PayloadError) as caught:
                operation()
            assert str(refused.value) == str(caught.value)
        if kind == "a dict that contains itself":  # a fork still copies it, cycle and all
            loop = ctx.fork().get("bad")["slot"]
            assert loop["me"] is loop is not ctx.get("bad")["slot"]
        del ctx.scratchpad["bad"]["slot"]
        assert WorkingContext().note("bad", {}).digest() == ctx.digest()

    @given(
        st.recursive(
            st.none()
            | st.text(max_size=3)
            | st.floats()
            | st.integers()
            | st.sampled_from([4299, 4300, -5000]).map(lambda d: (10 ** abs(d)) * (-1 if d < 0 else 1)),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(short_names, inner, max_size=3),
            max_leaves=8,
        )
    )
    def test_a_note_is_kept_exactly_when_json_can_write_it(self, value):
        """
        Law: note() keeps a JSON-like value exactly when json.dumps(...,
        allow_nan=False) can write it; a kept note freezes, digests and is
        written by to_json, and a refused one changes nothing.
        """
        try:
            json.dumps(value, allow_nan=False)
        except ValueError:
            writable = False
        else:
            writable = True
        ctx = WorkingContext().note("stage", "act")
        before = ctx.digest()
        try:
            ctx.note("v", value)
        except PayloadError:
            assert not writable
            assert before == ctx.digest()
            assert ["stage"] == list(ctx.scratchpad)
        else:
            assert writable
            assert value == json.loads(to_json(ctx.freeze()))["scratchpad"][1][1]
            assert ctx.digest() == ctx.freeze().digest()

    def test_what_can_be_kept_still_is(self):
        """
        The limits themselves are kept: MAX_DEPTH levels, the largest float,
        an int of 4300 digits, and data that is not JSON (a set, a tuple, an
        object of your own, a list shared twice) as before.
        """
        shared = [1]

        @attrs.define
        class Box:
            value: float

        keep = {
            "deep": _nested(MAX_DEPTH),
            "big": 1.7976931348623157e308,
            "long": 10**4299,
            "set": {1, 2},
            "pair": (1, 2.5),
            "box": Box(float("inf")),  # an object of your own is kept as it is
            "twice": [shared, shared],
        }
        ctx = WorkingContext().update_scratchpad(keep)
        assert keep == ctx.scratchpad
        assert ctx.freeze() == WorkingContext(scratchpad=keep).freeze()
        assert ctx.digest() == ctx.fork().digest()


class TestNotesCostWhatChanged:
    def test_a_note_read_out_is_the_live_note(self):
        """
        A note read through the scratchpad or get() is the note itself: a
        change in place, made before or after a freeze, is in the next
        snapshot and digest (the reference's live-dict example).
        """
        ctx = WorkingContext().note("plan", {"steps": ["a"]})
        before = ctx.digest()
        ctx.scratchpad["plan"]["steps"].append("b")
        steps = ctx.get("plan")["steps"]
        assert {"plan": {"steps": ["a", "b"]}} == dict(ctx.freeze().scratchpad)
        steps.append("c")
        assert {"plan": {"steps": ["a", "b", "c"]}} == dict(ctx.freeze().scratchpad)
        assert ctx.get("plan") is ctx.scratchpad["plan"]
        assert before != ctx.digest() == WorkingContext().note("plan", {"steps": ["a", "b", "c"]}).digest()

    def test_a_value_set_as_a_note_is_copied(self):
        """
        Plain data given to note(), update_scratchpad() or scratchpad[key] is
        copied: changing your own object afterwards does not change the note.
        """
        plan, seen, tags = {"steps": ["a"]}, [1], {"t": ["x"]}
        ctx = WorkingContext().note("plan", plan).update_scratchpad({"seen": seen})
        ctx.scratchpad["tags"] = tags
        plan["steps"].append("b")
        seen.append(2)
        tags["t"].clear()
        assert {"plan": {"steps": ["a"]}, "seen": [1], "tags": {"t": ["x"]}} == ctx.scratchpad

    def test_objects_of_your_own_stay_by_reference(self):
        """
        A note holding something other than plain data (here a tuple and an
        object of your own) is kept as it is, and read again at every freeze.
        """

        @attrs.define
        class Box:
            items: list[int]

        box = Box([1])
        ctx = WorkingContext().note("box", box).note("pair", (1, 2))
        first = ctx.digest()
        box.items.append(2)
        assert ctx.get("box") is box
        assert (1, 2) == ctx.get("pair")
        assert first != ctx.digest() == WorkingContext().note("box", Box([1, 2])).note("pair", (1, 2)).digest()

    def test_unchanged_notes_are_shared_not_copied(self):
        """
        A note that did not change is the same frozen object in every later
        snapshot and in a fork's snapshots: freezing and forking copy nothing.
        """
        ctx = WorkingContext(scratchpad={"plan": {"steps": ["a"]}, "stage": "act"})
        first = dict(ctx.freeze().scratchpad)["plan"]
        child = ctx.fork().note("stage", "verify")
        assert first is dict(ctx.freeze().scratchpad)["plan"] is dict(child.freeze().scratchpad)["plan"]
        assert {"plan": {"steps": ["a"]}, "stage": "verify"} == dict(child.freeze().scratchpad)
        child.get("plan")["steps"].append("b")
        assert {"steps": ["a"]} == ctx.get("plan")
        assert {"steps": ["a", "b"]} == child.get("plan")

    def test_the_scratchpad_is_a_dict_to_every_reader(self):
        """
        dict(), {**...}, json, pickle, copies and | give plain dicts of the
        notes; a dict copy shares the live notes, as dict.copy() does.
        """
        ctx = WorkingContext(scratchpad={"plan": {"steps": ["a"]}})
        notes = ctx.scratchpad
        assert isinstance(notes, dict)
        assert '{"plan": {"steps": ["a"]}}' == json.dumps(notes)
        for made in (pickle.loads(pickle.dumps(notes)), copy.deepcopy(notes)):
            assert type(made) is dict
            assert {"plan": {"steps": ["a"]}} == made
        shallow = notes.copy()
        assert type(shallow) is dict
        shallow["plan"]["steps"].append("b")
        assert {"plan": {"steps": ["a", "b"]}, "x": 1} == notes | {"x": 1} == {**notes, "x": 1}
        notes |= {"y": [2]}
        assert ["plan", "y"] == sorted(notes)
        assert ("y", [2]) == notes.popitem()
        assert {"steps": ["a", "b"]} == notes.pop("plan")
        assert "missing" == notes.pop("plan", "missing")
        assert {} == notes == dict(ctx.freeze().scratchpad)


def _containers(value: Any) -> list[Any]:
    """
    Every dict and list inside *value*, itself included, outermost first.
    """
    found: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop(0)
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            found.append(item)
            stack.extend(item)
    return found


def _poke(container: Any, token: int) -> None:
    """
    Change *container* in place, the same way for a note and for its model.
    """
    if isinstance(container, dict):
        container[f"k{token % 3}"] = token
    elif token % 2 and container:
        container.pop()
    else:
        container.append(token)


_KEYS = st.sampled_from(["plan", "seen", "stage", "tools"])


class NotesCachingMachine(RuleBasedStateMachine):
    """
    A context's notes beside a plain dict model, through note sets, in-place
    changes (through the scratchpad, get(), values(), a dict copy, and
    references held across freezes), deletes, forks and rolled-back edits.
    After every step the digest, the snapshot and its hash are those computed
    from scratch from the model: the caches are invisible.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ctx = WorkingContext(messages=[Message("user", "hi")], scratchpad={"plan": {"steps": ["a"]}})
        self.model: dict[str, Any] = {"plan": {"steps": ["a"]}}
        # (a container read out of the context, its counterpart in the model)
        self.held: list[tuple[Any, Any]] = []

    def _hold(self, key: str, value: Any, pick: int) -> bool:
        ours, theirs = _containers(value), _containers(self.model[key])
        if ours:
            self.held.append((ours[pick % len(ours)], theirs[pick % len(theirs)]))
        return bool(ours)

    @rule(key=_KEYS, value=json_values(6), later=st.booleans())
    def note(self, key: str, value: Any, later: bool) -> None:
        self.ctx.note(key, value)
        self.model[key] = copy.deepcopy(value)
        if later:  # the caller's own object, changed after the note was set: a copy was kept
            for container in _containers(value):
                _poke(container, 7)

    @rule(notes=st.dictionaries(_KEYS, json_values(4), max_size=3))
    def update(self, notes: dict[str, Any]) -> None:
        self.ctx.update_scratchpad(notes)
        self.model.update(copy.deepcopy(notes))

    @rule(key=_KEYS, value=json_values(4))
    def item_write(self, key: str, value: Any) -> None:
        self.ctx.scratchpad[key] = value
        self.model[key] = copy.deepcopy(value)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), pick=st.integers(0, 5), token=st.integers(0, 9), how=st.sampled_from(["[]", "get", "values"]))
    def change_in_place(self, data: st.DataObject, pick: int, token: int, how: str) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        notes = self.ctx.scratchpad
        if how == "[]":
            value = notes[key]
        elif how == "get":
            value = self.ctx.get(key)
        else:
            value = dict(zip(notes.keys(), notes.values(), strict=True))[key]
        if self._hold(key, value, pick):
            ours, theirs = self.held[-1]
            _poke(ours, token)
            _poke(theirs, token)

    @precondition(lambda self: self.held)
    @rule(data=st.data(), token=st.integers(0, 9))
    def change_held(self, data: st.DataObject, token: int) -> None:
        """A reference read out earlier, changed after freezes and digests."""
        ours, theirs = data.draw(st.sampled_from(self.held))
        _poke(ours, token)
        _poke(theirs, token)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), how=st.sampled_from(["del", "pop"]))
    def remove(self, data: st.DataObject, how: str) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        if how == "del":
            del self.ctx.scratchpad[key]
        else:
            assert self.model[key] == self.ctx.scratchpad.pop(key)
        del self.model[key]

    @rule(key=_KEYS, value=json_values(4))
    def setdefault(self, key: str, value: Any) -> None:
        assert self.model.setdefault(key, copy.deepcopy(value)) == self.ctx.scratchpad.setdefault(key, value)

    @rule()
    def fork(self) -> None:
        """The child goes on; what was read out of the parent no longer reaches it."""
        parent, self.ctx = self.ctx, self.ctx.fork()
        self.model = copy.deepcopy(self.model)
        self.held = []
        parent.note("stage", "parent only")
        for container in _containers(parent.get("plan")):
            _poke(container, 3)

    @rule(key=_KEYS, token=st.integers(0, 9))
    def rolled_back(self, key: str, token: int) -> None:
        """
        An apply_locked edit that raises changes nothing (notes come back by
        value: what was read out before no longer reaches the context).
        """

        def edit(ctx: WorkingContext) -> None:
            ctx.note("stage", "rolled back")
            if key in ctx.scratchpad:
                for container in _containers(ctx.scratchpad[key]):
                    _poke(container, token)
            raise RuntimeError

        with pytest.raises(RuntimeError):
            asyncio.run(self.ctx.apply_locked(edit))
        self.held = []

    @rule()
    def message(self) -> None:
        self.ctx.append(Message("assistant", "ok"))

    @invariant()
    def caches_are_invisible(self) -> None:
        snap = self.ctx.freeze()
        scratch = FrozenContext(prefix=self.ctx.prefix, messages=self.ctx.messages, scratchpad=self.model)
        assert scratch == snap
        assert hash(scratch) == hash(snap)
        assert scratch.digest() == self.ctx.digest() == snap.digest()
        assert self.model == dict(snap.scratchpad)


TestNotesCaching = NotesCachingMachine.TestCase


# -- call ids are local names: merges re-key -------------------------------------------

MERGE_MODES = ["concat", "union", "delta", add_messages]


def _blank(message: Message) -> Message:
    """
    *message* with every call id and result id replaced by one placeholder: its shape.
    """
    return _rekey.rename(message, dict.fromkeys(message.call_ids, "?"), dict.fromkeys(message.result_ids, "?"))


def _links(messages: list[Message]) -> list[tuple[int | None, ...]]:
    """
    For each message, the position of the call each of its results answers
    (the newest earlier call with that id), or None when no call asks for it.
    """
    asked: dict[str, int] = {}
    out = []
    for position, message in enumerate(messages):
        out.append(tuple(asked.get(answered) for answered in message.result_ids))
        for call_id in message.call_ids:
            asked[call_id] = position
    return out


def _segment(messages: list[Message], start: int, size: int) -> tuple[list[Message], list[tuple[int | None, ...]]]:
    """
    The shapes of ``messages[start:start + size]`` and the links of their
    results, counted from *start* (a link before it stays None).
    """
    links = _links(messages)[start : start + size]
    shifted = [tuple(None if at is None or at < start else at - start for at in row) for row in links]
    return [_blank(m) for m in messages[start : start + size]], shifted


def _fan_in(parent_messages: list[Message], work: list[list[Message]], mode: Any, **options: Any) -> WorkingContext:
    """
    A parent forked into one child per item of *work*, each child doing its
    work, merged back in fork order.
    """
    parent = WorkingContext(messages=parent_messages, **options)
    children = [parent.fork().extend(own) for own in work]
    for child in children:
        parent.merge(child, mode=mode)
    return parent


def _structural(messages: list[Message]) -> list[str]:
    return [p.rule for p in check_messages(messages, allow_pending=True) if p.rule in STRUCTURAL_RULES]


class TestMergeRekeys:
    """
    Call ids are local names: an incoming call whose id a different call here
    uses is re-keyed, with its results, in every merge mode.
    """

    @staticmethod
    def siblings(first: str = "Oslo", second: str = "Rome") -> tuple[WorkingContext, WorkingContext, WorkingContext]:
        parent = WorkingContext().append(Message("user", f"Compare {first} and {second}."))
        children = []
        for city in (first, second):
            child = parent.fork()
            child.append(
                openai_chat.read_response(
                    {
                        "id": "chatcmpl-1",
                        "object": "chat.completion",
                        "created": 1,
                        "model": "qwen2.5-7b-instruct",
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "tool_calls",
                                "message": {
                                    "role": "assistant",
                                    "content": None,
                                    "tool_calls": [
                                        {
                                            "id": "call_0",
                                            "type": "function",
                                            "function": {"name": "weather", "arguments": f'{{"city": "{city}"}}'},
                                        }
                                    ],
                                },
                            }
                        ],
                    }
                ),
                Message("tool", f"weather in {city}", tool_call_id="call_0"),
                Message("assistant", f"{city} done."),
            )
            children.append(child)
        return parent, children[0], children[1]

    @pytest.mark.parametrize("mode", MERGE_MODES, ids=["concat", "union", "delta", "add_messages"])
    def test_siblings_both_calling_call_0_merge_back(self, mode):
        """
        Two sub-agents forked from one parent both call `call_0` (as a local
        OpenAI-compatible server numbers them): both merge back, the second as
        `call_0-2` with its result, and the transcript is valid.
        """
        parent, oslo, rome = self.siblings()
        parent.merge(oslo, mode=mode).merge(rome, mode=mode)
        calls = [(m.tool_calls[0].id, m.tool_calls[0].arguments["city"]) for m in parent.messages if m.tool_calls]
        assert [("call_0", "Oslo"), ("call_0-2", "Rome")] == calls
        results = [(m.tool_call_id, m.text()) for m in parent.messages if m.role == "tool"]
        assert [("call_0", "weather in Oslo"), ("call_0-2", "weather in Rome")] == results
        assert () == check_messages(parent.assembled())
        name = mode if isinstance(mode, str) else "reducer"
        assert [{"kind": "merge", "mode": name, "rekeyed": [["call_0", "call_0-2"]]}] == thaw(list(parent.journal))

    def test_the_rekeyed_request_is_one_openai_accepts(self):
        """
        The merged transcript writes as a Chat Completions request whose
        messages the SDK's own param types accept, each id once.
        """
        from openai.types.chat import ChatCompletionMessageParam  # noqa: PLC0415
        from pydantic import TypeAdapter  # noqa: PLC0415

        parent, oslo, rome = self.siblings()
        parent.merge(oslo, mode="delta").merge(rome, mode="delta")
        payload = openai_chat.write(parent)
        TypeAdapter(list[ChatCompletionMessageParam]).validate_python(payload["messages"])
        ids = [c["id"] for m in payload["messages"] for c in m.get("tool_calls", ())]
        assert ["call_0", "call_0-2"] == ids

    def test_identical_calls_stay_one_call(self):
        """
        The history a fork shares with its parent (same id, same call) is one
        call under union and delta: nothing is re-keyed, nothing repeated.
        """
        parent = WorkingContext().append(
            Message("user", "q"),
            Message("assistant", tool_calls=[ToolCall("call_0", "search", {"q": "a"})]),
            Message("tool", "A", tool_call_id="call_0"),
        )
        for mode in ("union", "delta"):
            target = parent.fork()
            child = target.fork().append(Message("assistant", "done"))
            target.merge(child, mode=mode)
            assert 4 == target.size()
            assert [] == list(target.journal)

    def test_concat_repeats_shared_calls_under_new_ids(self):
        """
        concat appends every message of the other context: a call the fork
        shares with its parent comes in again, re-keyed, and stays valid.
        """
        parent = WorkingContext().append(
            Message("user", "q"),
            Message("assistant", tool_calls=[ToolCall("call_0", "search")]),
            Message("tool", "A", tool_call_id="call_0"),
        )
        parent.merge(parent.fork())
        assert ["call_0", "call_0-2"] == [m.call_ids[0] for m in parent.messages if m.call_ids]
        assert [] == _structural(list(parent.messages))

    def test_results_in_blocks_follow_their_call(self):
        """
        Anthropic-shaped exchanges (tool-call blocks, a user message of result
        blocks) are re-keyed in their blocks.
        """
        parent = WorkingContext().append(Message("user", "q"))
        children = []
        for text in ("one", "two"):
            child = parent.fork()
            child.append(
                Message("assistant", (TextBlock("Looking."), ToolCallBlock("toolu_01", "search", {"q": text}))),
                Message("user", (ToolResultBlock("toolu_01", text),)),
                Message("assistant", text),
            )
            children.append(child)
        for child in children:
            parent.merge(child, mode="delta")
        blocks = [b for m in parent.messages if not isinstance(m.content, str) for b in m.content]
        assert ["toolu_01", "toolu_01-2"] == [b.id for b in blocks if isinstance(b, ToolCallBlock)]
        assert [("toolu_01", "one"), ("toolu_01-2", "two")] == [
            (b.call_id, b.output) for b in blocks if isinstance(b, ToolResultBlock)
        ]
        assert () == check_messages(parent.assembled())

    def test_a_child_reusing_ids_across_its_own_turns(self):
        """
        A sub-agent whose server numbered every response's call `call_0`
        brings each exchange under its own name, each result with its call.
        """
        parent = WorkingContext().append(Message("user", "q"))
        child = parent.fork()
        for n in range(3):
            child.append(
                Message("assistant", tool_calls=[ToolCall("call_0", "step", {"n": n})]),
                Message("tool", f"r{n}", tool_call_id="call_0"),
            )
        parent.merge(child, mode="delta")
        pairs = [(m.call_ids or (m.tool_call_id,))[0] for m in parent.messages[1:]]
        assert ["call_0", "call_0", "call_0-2", "call_0-2", "call_0-3", "call_0-3"] == pairs
        assert [["call_0", "call_0-2"], ["call_0", "call_0-3"]] == thaw(list(parent.journal))[0]["rekeyed"]
        assert () == check_messages(parent.assembled())

    def test_a_refused_merge_changes_nothing_and_keeps_no_route(self):
        """
        A merge refused for another reason (a user message between a pending
        call and its result) re-keys nothing and records nothing.
        """
        parent = WorkingContext().append(Message("user", "q"), Message("assistant", tool_calls=[ToolCall("d1", "go")]))
        child = WorkingContext().append(
            Message("user", "meanwhile"), Message("assistant", tool_calls=[ToolCall("d1", "go", {"x": 1})])
        )
        before = parent.freeze()
        with pytest.raises(MergeError, match="dangling-call"):
            parent.merge(child, mode="union")
        assert before == parent.freeze()
        assert [] == list(parent.journal)


class TestRoutedResults:
    """
    A result that comes later under the old id of a call re-keyed while
    pending answers the call under its new id.
    """

    @staticmethod
    def pending_sibling(mode: Any = "delta", *, record: bool = False) -> tuple[WorkingContext, WorkingContext]:
        """
        A parent that merged one sibling's finished `call_0` and another's
        `call_0` still waiting: the second is `call_0-2` there.
        """
        parent = WorkingContext(record=record).append(Message("user", "Compare Oslo and Rome."))
        oslo, rome = parent.fork(), parent.fork()
        oslo.append(
            Message("assistant", tool_calls=[ToolCall("call_0", "weather", {"city": "Oslo"})]),
            Message("tool", "rain", tool_call_id="call_0"),
        )
        rome.append(Message("assistant", tool_calls=[ToolCall("call_0", "weather", {"city": "Rome"})]))
        parent.merge(oslo, mode=mode).merge(rome, mode=mode)
        assert ["call_0-2"] == [c.id for c in parent.pending_calls]
        return parent, rome

    @pytest.mark.parametrize("mode", MERGE_MODES, ids=["concat", "union", "delta", "add_messages"])
    @pytest.mark.parametrize("how", ["append", "extend", "add_messages_to", "apply_to", "append_result"])
    def test_a_later_result_under_the_old_id_answers_the_new_one(self, mode, how):
        """
        Every way a result comes in sends it to the re-keyed call.
        """
        parent, _ = self.pending_sibling(mode)
        sun = Message("tool", "sun", tool_call_id="call_0")
        {
            "append": lambda: parent.append(sun),
            "extend": lambda: parent.extend([sun]),
            "add_messages_to": lambda: add_messages_to(parent, sun),
            "apply_to": lambda: ToolResult("sun").apply_to(parent, call_id="call_0"),
            "append_result": lambda: parent.append_result(sun),
        }[how]()
        assert ("call_0-2", "sun") == (parent.messages[-1].tool_call_id, parent.messages[-1].text())
        assert () == check_messages(parent.assembled())
        parent.append(Message("tool", "again", tool_call_id="call_0"))  # the route went with the result
        assert "call_0" == parent.messages[-1].tool_call_id

    @pytest.mark.parametrize("mode", ["union", "delta"])
    def test_the_child_brings_its_result_in_a_later_merge(self, mode):
        """
        The sub-agent gets its result under its own id and merges again: the
        result answers the re-keyed call.
        """
        parent, rome = self.pending_sibling(mode)
        rome.append(Message("tool", "sun", tool_call_id="call_0"), Message("assistant", "Rome: sun."))
        parent.merge(rome, mode=mode)
        assert [("tool", "call_0-2"), ("assistant", None)] == [(m.role, m.tool_call_id) for m in parent.messages[-2:]]
        assert () == check_messages(parent.assembled())

    def test_the_old_id_pending_itself_keeps_its_result(self):
        """
        A result is routed only when its own id is not waiting: with both
        waiting in one message, each answers its own call.
        """
        parent = WorkingContext().append(Message("user", "q"))
        child = parent.fork().append(
            Message("assistant", tool_calls=[ToolCall("call_0", "a"), ToolCall("call_0-2", "b")]),
        )
        parent.merge(child, mode="delta")
        parent.append(Message("tool", "A", tool_call_id="call_0"), Message("tool", "B", tool_call_id="call_0-2"))
        assert ["call_0", "call_0-2"] == [m.tool_call_id for m in parent.messages[-2:]]

    def test_a_failed_apply_locked_takes_its_routes_back(self):
        """
        A merge inside apply_locked that then fails is undone with its route:
        a later result under the old id is not sent to a call that is gone.
        """
        parent = WorkingContext().append(
            Message("user", "q"),
            Message("assistant", tool_calls=[ToolCall("call_0", "weather", {"city": "Oslo"})]),
            Message("tool", "rain", tool_call_id="call_0"),
        )
        rome = WorkingContext().append(
            Message("assistant", tool_calls=[ToolCall("call_0", "weather", {"city": "Rome"})])
        )

        def merge_then_fail(ctx: WorkingContext) -> None:
            ctx.merge(rome, mode="union")
            assert ["call_0-2"] == [c.id for c in ctx.pending_calls]
            raise RuntimeError

        with pytest.raises(RuntimeError):
            asyncio.run(parent.apply_locked(merge_then_fail))
        assert 3 == parent.size()
        parent.append(Message("assistant", tool_calls=[ToolCall("call_0-2", "other")]))
        parent.append(Message("tool", "late", tool_call_id="call_0"))
        assert "call_0" == parent.messages[-1].tool_call_id

    def test_a_sub_agent_for_the_old_id_answers_the_new_one(self):
        """
        fork(for_call=old id) forks for the re-keyed call, and the result merge closes it.
        """
        parent, _ = self.pending_sibling()
        helper = parent.fork(for_call="call_0")
        assert "call_0-2" == helper.parent_call_id
        helper.append(Message("assistant", "Sunny in Rome."))
        parent.merge(helper, mode="result")
        assert ("call_0-2", "Sunny in Rome.") == (parent.messages[-1].tool_call_id, parent.messages[-1].text())
        assert () == check_messages(parent.assembled())

    def test_a_fork_inherits_the_routes(self):
        """
        A fork taken while the re-keyed call waits routes its result too.
        """
        parent, _ = self.pending_sibling()
        child = parent.fork().append(Message("tool", "sun", tool_call_id="call_0"))
        assert "call_0-2" == child.messages[-1].tool_call_id

    @pytest.mark.parametrize("how", ["from_snapshot", "messages", "json", "memory store", "sqlite store"])
    def test_a_context_rebuilt_while_the_call_waits_routes_its_result(self, how, tmp_path):
        """
        A context rebuilt from the parent (its snapshot, its messages, its JSON,
        a checkpoint in a store) routes the later result as the parent does.
        """
        from workingctx.persistence import Checkpoint, InMemoryStore, SQLiteStore, rehydrate  # noqa: PLC0415

        parent, _ = self.pending_sibling()

        def stored(store: Any) -> WorkingContext:
            checkpoint = Checkpoint.capture(parent)
            store.save(checkpoint)
            return rehydrate(store.load(checkpoint.id))

        rebuilt = {
            "from_snapshot": lambda: WorkingContext.from_snapshot(parent.freeze()),
            "messages": lambda: WorkingContext(messages=parent.messages),
            "json": lambda: WorkingContext.from_snapshot(from_json(to_json(parent.freeze()), FrozenContext)),
            "memory store": lambda: stored(InMemoryStore()),
            "sqlite store": lambda: stored(SQLiteStore(tmp_path / "s.db")),
        }[how]()
        sun = Message("tool", "sun", tool_call_id="call_0")
        rebuilt.append(sun)
        parent.append(sun)
        assert "call_0-2" == rebuilt.messages[-1].tool_call_id
        assert parent.freeze().digest() == rebuilt.freeze().digest()
        assert () == check_messages(rebuilt.assembled())

    @staticmethod
    def waiting_siblings(cities: int) -> WorkingContext:
        """
        A parent that merged one sibling's finished `call_0`, then *cities*
        siblings whose `call_0` still waits: `call_0-2`, `call_0-3`, ... there.
        """
        parent = WorkingContext().append(Message("user", "Compare the weather."))
        children = [parent.fork() for _ in range(cities + 1)]
        children[0].append(
            Message("assistant", tool_calls=[ToolCall("call_0", "weather", {"city": "Oslo"})]),
            Message("tool", "rain", tool_call_id="call_0"),
        )
        for n, child in enumerate(children[1:]):
            child.append(Message("assistant", tool_calls=[ToolCall("call_0", "weather", {"city": f"city {n}"})]))
        for child in children:
            parent.merge(child, mode="union")
        return parent

    @pytest.mark.parametrize("batch", [False, True], ids=["one by one", "in one extend"])
    def test_calls_rekeyed_from_one_id_take_its_results_in_order_live_or_rebuilt(self, batch):
        """
        Several calls re-keyed from one id while they wait each take one of its
        results, the first call the first result, in a live context and in one
        rebuilt from its snapshot alike (the live one sent the first result to
        the newest call, and the others none).
        """
        live = self.waiting_siblings(3)
        assert ["call_0-2", "call_0-3", "call_0-4"] == [c.id for c in live.pending_calls]
        rebuilt = WorkingContext.from_snapshot(live.freeze())
        results = [Message("tool", text, tool_call_id="call_0") for text in ("sun", "wind", "snow")]
        for ctx in (live, rebuilt):
            if batch:
                ctx.extend(results)
            else:
                for result in results:
                    ctx.append(result)
            assert [("call_0-2", "sun"), ("call_0-3", "wind"), ("call_0-4", "snow")] == [
                (m.tool_call_id, m.text()) for m in ctx.messages[-3:]
            ]
            assert () == check_messages(ctx.assembled())
        assert live.freeze().digest() == rebuilt.freeze().digest()

    @settings(max_examples=60, deadline=None)
    @given(
        st.lists(st.sampled_from(["finished", "waiting", "result", "two results", "user"]), max_size=7),
        st.integers(0, 7),
        st.booleans(),
    )
    @example(steps=["finished", "waiting", "waiting", "result", "result"], at=1, from_messages=True)
    @example(steps=["finished", "waiting", "waiting", "two results"], at=3, from_messages=False)
    @example(steps=["waiting", "waiting", "two results"], at=2, from_messages=False)
    @example(steps=["waiting", "waiting", "result", "result"], at=2, from_messages=True)
    def test_a_rebuilt_twin_ends_with_the_live_messages(self, steps, at, from_messages):
        """
        A context and its twin rebuilt at any step (from its snapshot or its
        messages) that then take the same merges and results end the same.
        """
        live = WorkingContext().append(Message("user", "Compare the weather."))
        base = live.fork()
        twin = None

        def step(ctx: WorkingContext, n: int, kind: str) -> None:
            if kind in ("finished", "waiting"):
                child = base.fork().append(Message("assistant", tool_calls=[ToolCall("call_0", "weather", {"n": n})]))
                if kind == "finished":
                    child.append(Message("tool", f"done {n}", tool_call_id="call_0"))
                ctx.merge(child, mode="union")
            elif kind == "user":
                ctx.append(Message("user", f"next {n}"))
            else:
                ctx.extend([Message("tool", f"r {n}.{i}", tool_call_id="call_0") for i in range(len(kind.split()))])

        for n, kind in enumerate(steps):
            if n == at:
                twin = (
                    WorkingContext(messages=live.messages)
                    if from_messages
                    else WorkingContext.from_snapshot(live.freeze())
                )
            outcomes = []
            for ctx in (live, twin) if twin is not None else (live,):
                try:
                    step(ctx, n, kind)
                    outcomes.append(None)
                except MergeError:
                    outcomes.append(MergeError)
            assert len(set(outcomes)) == 1
        if twin is not None:
            assert live.messages == twin.messages

    def test_a_rebuilt_context_looks_at_its_trailing_exchange_only(self):
        """
        Its calls' names decide whether the rule state is asked for at all:
        names no merge gave, or a trailing exchange with none, cost no walk.
        """

        def walk() -> Any:
            pytest.fail("the rule state was asked for")

        answered = [
            Message("user", "q"),
            Message("assistant", tool_calls=[ToolCall("call_0-2", "f")]),
            Message("tool", "r", tool_call_id="call_0-2"),
            Message("assistant", tool_calls=[ToolCall("call_1", "f"), ToolCall("toolu_01", "g")]),
            Message("tool", "r", tool_call_id="call_1"),
        ]
        assert {} == _rekey.rebuilt_routes(answered, walk)
        assert {} == _rekey.rebuilt_routes([*answered, Message("assistant", "done")], walk)
        assert {} == _rekey.rebuilt_routes([*answered[:3], Message("user", "next")], walk)
        # a renamed call that waits behind another calling turn is found too
        parent, _ = self.pending_sibling()
        joined = WorkingContext(messages=[*parent.messages, Message("assistant", tool_calls=[ToolCall("call_9", "f")])])
        joined.append(Message("tool", "sun", tool_call_id="call_0"), Message("tool", "r", tool_call_id="call_9"))
        assert ["call_0-2", "call_9"] == [m.tool_call_id for m in joined.messages[-2:]]
        assert () == check_messages(joined.assembled())

    def test_recorded_merge_entries_keep_the_map_and_replay_routes(self):
        """
        On a recorded context the merge entry holds the map; the history
        written and read back holds it, and a replay routes the same.
        """
        parent, _ = self.pending_sibling(record=True)
        merges = [e for e in parent.history if e.kind == "merge"]
        assert [(), (("call_0", "call_0-2"),)] == [e.content.rekeyed for e in merges]
        data = [entry_to_data(e) for e in parent.history]
        assert "rekeyed" not in data[-2]["content"]  # left out when empty
        assert [["call_0", "call_0-2"]] == data[-1]["content"]["rekeyed"]
        again = WorkingContext.replay([entry_from_data(json.loads(json.dumps(d))) for d in data])
        assert again.digest() == parent.digest()
        again.append(Message("tool", "sun", tool_call_id="call_0"))
        parent.append_result(Message("tool", "sun", tool_call_id="call_0"))
        assert again.digest() == parent.digest()
        assert "call_0-2" == parent.history[-1].content.tool_call_id


class TestRekeyLaws:
    """
    Properties: any two forks that reuse ids merge into a valid transcript,
    with each child's work present, in order, under a one-to-one renaming.
    """

    @given(reused_id_forks(), st.sampled_from(MERGE_MODES))
    def test_the_merged_transcript_is_valid(self, forks, mode):
        """
        No result without its call, no call without its results, no id twice.
        """
        parent_messages, work = forks
        merged = _fan_in(parent_messages, work, mode)
        assert [] == _structural(list(merged.messages))

    @given(reused_id_forks(), st.sampled_from(MERGE_MODES))
    def test_each_childs_work_is_there_in_order_renamed_one_to_one(self, forks, mode):
        """
        Each child's messages come in order, equal but for call ids, every
        result answering the same call as it did in the child; the new names
        are all different and each is a fresh name of its old id.
        """
        parent_messages, work = forks
        if mode == "union":
            # union compares by value: a waiting call equal to one here (same id, same call) is that call
            last = work[-1][-1]
            assume(not (last.call_ids and last in [*parent_messages, *(m for own in work for m in own[:-1])]))
        merged = list(_fan_in(parent_messages, work, mode).messages)
        start = len(parent_messages)
        for own in work:
            origin = own if mode in ("union", "delta") else [*parent_messages, *own]
            assert _segment(origin, 0, len(origin)) == _segment(merged, start, len(origin))
            start += len(origin)
        assert start == len(merged)
        calls = [i for m in merged for i in _validity_raw_calls(m)]
        assert len(calls) == len(set(calls))

    @given(reused_id_forks(), st.sampled_from(MERGE_MODES))
    def test_the_journal_names_every_rekey(self, forks, mode):
        """
        The journal's map lists one pair per renamed call, each a fresh name of its old id.
        """
        parent_messages, work = forks
        merged = _fan_in(parent_messages, work, mode)
        pairs = [tuple(p) for entry in thaw(list(merged.journal)) for p in entry["rekeyed"]]
        assert all(_rekey.derived_from(new, old) for old, new in pairs)
        renamed = {new for _, new in pairs}
        assert len(renamed) == len(pairs)
        assert renamed <= {i for m in merged.messages for i in m.call_ids}

    @given(reused_id_forks(), st.sampled_from(MERGE_MODES))
    def test_rekeying_is_deterministic(self, forks, mode):
        """
        The same merges give the same messages and digest.
        """
        parent_messages, work = forks
        one, two = _fan_in(parent_messages, work, mode), _fan_in(parent_messages, work, mode)
        assert one.messages == two.messages
        assert one.digest() == two.digest()

    @given(reused_id_forks(children=3), st.randoms(use_true_random=False))
    def test_fork_order_decides_whatever_finished_first(self, forks, rnd):
        """
        Children merged in fork order give one result, however their work interleaved.
        """
        parent_messages, work = forks
        expected = _fan_in(parent_messages, work, "delta")
        parent = WorkingContext(messages=parent_messages)
        children = [parent.fork() for _ in work]
        turns = [i for i, own in enumerate(work) for _ in own]
        rnd.shuffle(turns)
        queues = [list(own) for own in work]
        for i in turns:
            children[i].append(queues[i].pop(0))
        for child in children:
            parent.merge(child, mode="delta")
        assert expected.messages == parent.messages

    @given(reused_id_forks())
    def test_union_and_delta_twice_equal_once(self, forks):
        """
        Merging the same children again adds nothing, re-keyed exchanges included.
        """
        parent_messages, work = forks
        for mode in ("union", "delta"):
            parent = WorkingContext(messages=parent_messages)
            children = [parent.fork().extend(own) for own in work]
            for child in children:
                parent.merge(child, mode=mode)
            once = parent.freeze()
            for child in children:
                parent.merge(child, mode=mode)
            assert once == parent.freeze()

    @given(reused_id_forks(pending=False))
    def test_union_of_a_child_with_itself_is_the_child(self, forks):
        """
        A context merged with union into a copy of itself is unchanged; a
        union keeps every message of both sides.
        """
        parent_messages, work = forks
        merged = _fan_in(parent_messages, work, "union")
        copy_ = WorkingContext(messages=merged.messages)
        assert merged.messages == copy_.merge(merged, mode="union").messages
        for own in work:
            for message in own:
                assert any(_blank(message) == _blank(m) for m in merged.messages)

    @settings(max_examples=5, deadline=None)
    @given(reused_id_forks(), st.sampled_from(["concat", "union", "delta"]))
    def test_the_same_ids_in_another_process(self, tmp_path_factory, forks, mode):
        """
        Another process, with another hash seed, gives the same ids and digest.
        """
        parent_messages, work = forks
        merged = _fan_in(parent_messages, work, mode)
        data = to_json({"parent": parent_messages, "work": work, "mode": mode})
        # the process imports the same workingctx as this one, from a checkout or an installed wheel
        root = str(Path(_rekey.__file__).resolve().parent.parent)
        path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONHASHSEED": "4242", "PYTHONPATH": path}
        result = subprocess.run(
            [sys.executable, "-c", SUBPROCESS_FAN_IN],
            input=data,
            capture_output=True,
            text=True,
            env=env,
            check=True,
            cwd=tmp_path_factory.mktemp("fan-in"),
        )
        assert f"{merged.digest()} {[list(m.call_ids) for m in merged.messages]}" == result.stdout.strip()


SUBPROCESS_FAN_IN = """
import json, sys
from workingctx import Message, WorkingContext
from workingctx.serialization import from_json
data = json.loads(sys.stdin.read())
parent = WorkingContext(messages=from_json(json.dumps(data["parent"]), list[Message]))
children = [parent.fork().extend(from_json(json.dumps(own), list[Message])) for own in data["work"]]
for child in children:
    parent.merge(child, mode=data["mode"])
print(parent.digest(), [list(m.call_ids) for m in parent.messages])
"""


def _validity_raw_calls(message: Message) -> list[str]:
    ids = [call.id for call in message.tool_calls]
    if not isinstance(message.content, str):
        ids.extend(b.id for b in message.content if isinstance(b, ToolCallBlock))
    return ids
