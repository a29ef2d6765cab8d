"""
Tests for workingctx.context: the four axes, bad input, fork, slice and the messages view.
"""

from __future__ import annotations

import asyncio

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import (
    json_values,
    messages,
    scratchpads,
    short_names,
    simple_messages,
    transcripts,
)
from workingctx import Message, MutationJournal, PrefixContext, ToolCall, WorkingContext


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
