"""
Tests for workingctx.reducers: message and value reducers, and ToolResult.
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import json_values, short_names, texts, transcripts
from workingctx import Message, ToolCall, WorkingContext
from workingctx.exceptions import FrozenPayloadError, InvalidMessageError
from workingctx.messages import ToolResultBlock
from workingctx.reducers import (
    ToolResult,
    add_messages,
    add_messages_to,
    append_items,
    remove_tool_messages,
    replace_messages,
)
from workingctx.validity import check_messages

ids = st.none() | st.sampled_from(["m1", "m2", "m3", 1, 2])
tagged_messages = st.builds(
    Message,
    role=st.sampled_from(["user", "assistant"]),
    content=texts,
    id=ids,
    delta=st.booleans(),
)


def orphans(messages):
    """
    The call ids answered before (or without) being asked for.
    """
    asked: set[str] = set()
    found = []
    for message in messages:
        found.extend(r for r in message.result_ids if r not in asked)
        asked.update(message.call_ids)
    return found


def calling_context(*call_ids: str) -> WorkingContext:
    return WorkingContext().append(
        Message("user", "do it"),
        Message("assistant", tool_calls=[ToolCall(c, "tool") for c in call_ids]),
    )


# -- add_messages -------------------------------------------------------------------


class TestAddMessages:
    def test_skips_known_ids_and_deltas(self):
        """
        Two rules: a message whose id is already present is
        skipped, and a streaming chunk (delta=True) is never stored.
        """
        left = [Message("user", "hi", id="m1"), Message("assistant", "hello")]
        right = [
            Message("user", "hi again", id="m1"),
            Message("assistant", "par", delta=True),
            Message("assistant", "partial answer"),
        ]
        assert ["hi", "hello", "partial answer"] == [m.text() for m in add_messages(left, right)]

    def test_messages_without_id_are_always_appended(self):
        """
        No id means nothing to deduplicate on: equal messages are both kept.
        """
        hi = Message("user", "hi")
        assert [hi, hi] == add_messages([hi], [hi])

    def test_repeated_id_within_the_update_is_added_once(self):
        """
        Two new messages with the same id: the first is kept.
        """
        out = add_messages([], [Message("user", "a", id=7), Message("user", "b", id=7)])
        assert ["a"] == [m.text() for m in out]

    def test_inputs_unchanged(self):
        """
        A new list is returned; the arguments are untouched.
        """
        left, right = [Message("user", "a")], [Message("user", "b")]
        out = add_messages(left, right)
        assert out is not left
        assert [Message("user", "a")] == left

    def test_refuses_non_messages(self):
        """
        A dict in place of a message is refused with its position.
        """
        with pytest.raises(TypeError, match=r"add_messages\(right\)\[0\] must be a Message, got \{'role': 'user'\}"):
            add_messages([], [{"role": "user"}])  # type: ignore[list-item]

    def test_as_a_merge_mode_keeps_the_tail(self):
        """
        ctx.merge(other, mode=add_messages) appends only what is new, and the
        messages already there stay the same objects.
        """
        ctx = WorkingContext().append(Message("user", "q", id="u1"))
        first = ctx.messages[0]
        child = ctx.fork().append(Message("assistant", "a", id="a1"), Message("assistant", "a", delta=True))

        ctx.merge(child, mode=add_messages)

        assert ["q", "a"] == [m.text() for m in ctx.messages]
        assert first is ctx.messages[0]
        assert ctx.has_id("a1")

    @given(st.lists(tagged_messages, max_size=8), st.lists(tagged_messages, max_size=8))
    def test_on_a_context_equals_the_plain_function(self, left, right):
        """
        Property: add_messages_to on a context gives the same transcript as
        add_messages on its list.
        """
        ctx = WorkingContext(messages=left)
        add_messages_to(ctx, *right)
        assert add_messages(left, right) == list(ctx.messages)

    @given(st.lists(tagged_messages, max_size=8), st.lists(tagged_messages, max_size=8))
    def test_idempotent(self, left, right):
        """
        Property: adding the same update twice changes nothing the second time
        when every new message has an id.
        """
        right = [m for m in right if m.id is not None]
        once = add_messages(left, right)
        assert once == add_messages(once, right)

    def test_add_messages_to_chains_and_refuses_lists(self):
        """
        add_messages_to returns the context; a list in its place is refused
        with the fix.
        """
        ctx = WorkingContext()
        assert ctx is add_messages_to(ctx, Message("user", "q", id=1), Message("user", "q", id=1))
        assert 1 == ctx.size()
        with pytest.raises(TypeError, match=r"for plain lists use add_messages\(left, right\)"):
            add_messages_to([], Message("user", "q"))  # type: ignore[arg-type]

    def test_add_messages_to_checks_every_message_first(self):
        """
        A bad item among the messages: nothing is added.
        """
        ctx = WorkingContext()
        with pytest.raises(TypeError, match=r"\[1\] must be a Message, got 'oops'"):
            add_messages_to(ctx, Message("user", "q"), "oops")  # type: ignore[arg-type]
        assert 0 == ctx.size()


# -- the other message reducers ------------------------------------------------------


class TestAddMessagesRekeys:
    """
    add_messages gives a new call whose id a different call uses a new id, with its results.
    """

    @staticmethod
    def history() -> list[Message]:
        return [
            Message("user", "Weather in Oslo, then Rome?"),
            Message("assistant", tool_calls=[ToolCall("call_0", "weather", {"city": "Oslo"})]),
            Message("tool", "rain", tool_call_id="call_0"),
        ]

    def test_a_reused_id_is_rekeyed_with_its_result(self):
        """
        A local server's second response numbers its call call_0 again: it
        comes in as call_0-2, its result too, and the list is valid.
        """
        step = [
            Message("assistant", tool_calls=[ToolCall("call_0", "weather", {"city": "Rome"})]),
            Message("tool", "sun", tool_call_id="call_0"),
        ]
        merged = add_messages(self.history(), step)
        assert ["call_0-2", "call_0-2"] == [merged[3].tool_calls[0].id, merged[4].tool_call_id]
        assert () == check_messages(merged)
        assert merged == add_messages(self.history(), step)  # the same lists, the same ids

    def test_a_later_result_on_a_list_answers_the_pending_new_name(self):
        """
        A plain list keeps no map: a result for call_0 while call_0-2 waits
        (and call_0 does not) answers call_0-2.
        """
        history = add_messages(
            self.history(), [Message("assistant", tool_calls=[ToolCall("call_0", "weather", {"city": "Rome"})])]
        )
        history = add_messages(history, [Message("tool", "sun", tool_call_id="call_0")])
        assert "call_0-2" == history[-1].tool_call_id
        assert () == check_messages(history)

    def test_the_same_message_by_id_stays_one(self):
        """
        A message whose explicit id is here is skipped, so its calls are not re-keyed either.
        """
        call = Message("assistant", tool_calls=[ToolCall("call_0", "weather")], id="a1")
        left = [Message("user", "q"), call, Message("tool", "r", tool_call_id="call_0")]
        assert left == add_messages(left, [call])

    def test_add_messages_to_rekeys_and_routes_in_place(self):
        """
        On a live context the same: the new call is call_0-2, and the result
        that comes under call_0 answers it.
        """
        ctx = WorkingContext(messages=self.history())
        add_messages_to(ctx, Message("assistant", tool_calls=[ToolCall("call_0", "weather", {"city": "Rome"})]))
        add_messages_to(ctx, Message("tool", "sun", tool_call_id="call_0"))
        assert ["call_0-2", "call_0-2"] == [ctx.messages[3].call_ids[0], ctx.messages[4].tool_call_id]
        assert () == check_messages(ctx.assembled())

    @given(st.lists(st.sampled_from(["call_0", "call_1"]), min_size=1, max_size=6))
    def test_a_server_numbering_every_response_from_zero(self, numbering):
        """
        Any run of single-call exchanges whose ids repeat, added one response
        at a time, stays valid, each result with its own call.
        """
        history: list[Message] = [Message("user", "go")]
        for n, call_id in enumerate(numbering):
            history = add_messages(history, [Message("assistant", tool_calls=[ToolCall(call_id, "step", {"n": n})])])
            history = add_messages(history, [Message("tool", f"r{n}", tool_call_id=call_id)])
        assert () == check_messages(history)
        pairs = [(history[i].tool_calls[0].arguments["n"], history[i + 1].text()) for i in range(1, len(history), 2)]
        assert [(n, f"r{n}") for n in range(len(numbering))] == pairs


class TestReplaceMessages:
    def test_plain_function(self):
        """
        The update replaces the history.
        """
        assert [Message("user", "new")] == replace_messages([Message("user", "old")], [Message("user", "new")])

    def test_as_a_merge_mode_replaces_the_tail(self):
        """
        As a merge mode, the other context's messages become the tail.
        """
        ctx = WorkingContext().append(Message("user", "old"))
        other = WorkingContext().append(Message("user", "new"))
        ctx.merge(other, mode=replace_messages)
        assert ["new"] == [m.text() for m in ctx.messages]


class TestRemoveToolMessages:
    def test_completed_sequence_removed_pending_kept(self):
        """
        A completed tool sequence goes; a pending one stays whole.
        """
        history = [
            Message("user", "q1"),
            Message("assistant", tool_calls=[ToolCall("c1", "t")]),
            Message("tool", "r1", tool_call_id="c1"),
            Message("assistant", "a1"),
            Message("user", "q2"),
            Message("assistant", tool_calls=[ToolCall("c2", "t")]),
        ]
        assert ["q1", "q2", ""] == [m.text() for m in remove_tool_messages(history)]

    def test_as_a_merge_mode(self):
        """
        As a merge mode, the merged transcript comes back without completed
        tool sequences.
        """
        ctx = WorkingContext().append(Message("user", "q1"))
        other = WorkingContext().append(
            Message("assistant", tool_calls=[ToolCall("c1", "t")]),
            Message("tool", "r1", tool_call_id="c1"),
            Message("assistant", "a1"),
            Message("user", "q2"),
        )
        ctx.merge(other, mode=remove_tool_messages)
        assert ["q1", "q2"] == [m.text() for m in ctx.messages]

    @given(transcripts(max_turns=5))
    def test_never_orphans(self, messages):
        """
        Property: no tool result is left without its call, every system
        message is kept, and the output is in the input's order.
        """
        out = remove_tool_messages(messages)
        assert [] == orphans(out)
        assert [m for m in messages if m.role == "system"] == [m for m in out if m.role == "system"]
        it = iter(messages)
        assert all(any(m is k for k in it) for m in out)


# -- value reducers -------------------------------------------------------------------


class TestValueReducers:
    def test_append_items(self):
        """
        Items are appended; None counts as empty.
        """
        assert [1, 2, 3] == append_items([1, 2], [3])
        assert [1, 2, 2] == append_items([1, 2], [2])
        assert ["x"] == append_items(None, ["x"])
        assert [1] == append_items([1], None)

    def test_append_items_refuses_a_bare_item(self):
        """
        A str is one item, not a list of characters: refused with the fix.
        """
        with pytest.raises(TypeError, match=r"wrap a single item in a list: \['note'\]"):
            append_items([], "note")

    def test_append_items_merges_forks_once(self):
        """
        Two forks of a context that both append to a list note: merged with
        append_items, the parent's items appear once, then each fork's.
        """
        ctx = WorkingContext().note("findings", ["from parent"])
        first, second = ctx.fork(), ctx.fork()
        first.scratchpad["findings"].append("from first")
        second.scratchpad["findings"].append("from second")

        ctx.merge(first, scratchpad={"findings": append_items})
        ctx.merge(second, scratchpad={"findings": append_items})

        assert ["from parent", "from first", "from second"] == ctx.get("findings")

    def test_remove_tool_messages_drops_a_call_whose_results_never_came(self):
        """
        A call left without its result in the middle of a transcript is
        removed with the completed sequences; one still waiting at the end stays.
        """
        history = [
            Message("user", "q1"),
            Message("assistant", tool_calls=[ToolCall("c1", "lookup")]),
            Message("user", "q2"),
            Message("assistant", tool_calls=[ToolCall("c2", "lookup")]),
        ]
        assert ["q1", "q2", ""] == [m.text() for m in remove_tool_messages(history)]
        assert ("c2",) == remove_tool_messages(history)[-1].call_ids

    @given(st.lists(st.integers(), max_size=6), st.lists(st.integers(), max_size=6))
    def test_append_items_keeps_everything_new(self, old, new):
        """
        Property: the result is old followed by a suffix of new, and all of
        new when new does not start like old.
        """
        out = append_items(old, new)
        added = out[len(old) :]
        assert old == out[: len(old)]
        assert new[len(new) - len(added) :] == added
        if not old or not new or old[0] != new[0]:
            assert old + new == out


# -- ToolResult -----------------------------------------------------------------------


class TestToolResult:
    def test_the_message_goes_to_the_model_and_the_state_to_the_scratchpad(self):
        """
        A tool that updates state: the message goes to the model, the state to
        the scratchpad; other notes stay.
        """
        ctx = calling_context("c1").note("units", "metric")
        result = ToolResult(message="City updated to 'Oslo'.", state={"selected_city": "Oslo"})

        assert ctx is result.apply_to(ctx, call_id="c1", name="select_city")

        assert Message("tool", "City updated to 'Oslo'.", tool_call_id="c1", name="select_city") == ctx.messages[-1]
        assert {"units": "metric", "selected_city": "Oslo"} == ctx.scratchpad

    def test_content_is_an_alias(self):
        """
        content= means message=; passing both is refused.
        """
        assert ToolResult("done") == ToolResult(content="done")
        assert "done" == ToolResult(content="done").content
        with pytest.raises(TypeError, match="content is an alias of message: pass one of them"):
            ToolResult("a", content="b")

    def test_error_result_is_a_failed_result_block(self):
        """
        is_error=True produces a failed ToolResultBlock the model sees as an error.
        """
        message = ToolResult("permission denied", is_error=True).to_message("c9")
        assert (ToolResultBlock("c9", "permission denied", is_error=True, status="failed"),) == message.content
        assert "c9" == message.tool_call_id
        assert "permission denied" == message.text()

    def test_structured_result(self):
        """
        A non-text result is a completed ToolResultBlock, deep-frozen.
        """
        result = ToolResult({"rows": [1, 2]})
        with pytest.raises(FrozenPayloadError):
            result.message["rows"].append(3)
        assert "completed" == result.to_message("c1").content[0].status

    def test_frozen_hashable_picklable(self):
        """
        A ToolResult is a frozen value: hashable, equal after a pickle round trip.
        """
        result = ToolResult("ok", state={"k": [1, {"a": 2}]})
        assert result == pickle.loads(pickle.dumps(result))
        assert hash(result) == hash(ToolResult("ok", state={"k": [1, {"a": 2}]}))
        with pytest.raises(FrozenPayloadError):
            result.state["k"] = 3  # type: ignore[index]

    def test_state_is_thawed_into_the_scratchpad(self):
        """
        The scratchpad gets writable copies, not frozen payloads.
        """
        ctx = calling_context("c1")
        ToolResult("ok", state={"items": [1]}).apply_to(ctx, call_id="c1")
        ctx.scratchpad["items"].append(2)
        assert [1, 2] == ctx.get("items")

    def test_reducers_combine_with_existing_notes(self):
        """
        A per-key reducer combines the existing note with the new value.
        """
        ctx = calling_context("c1").note("seen", ["a"])
        ToolResult("ok", state={"seen": ["b"], "last": "b"}).apply_to(
            ctx, call_id="c1", reducers={"seen": append_items}
        )
        assert ["a", "b"] == ctx.get("seen")
        assert "b" == ctx.get("last")

    def test_unknown_call_is_refused_and_nothing_changes(self):
        """
        A result for a call no message asks for would be an orphan: refused,
        and neither the tail nor the scratchpad changes.
        """
        ctx = calling_context("c1")
        before = ctx.messages
        with pytest.raises(InvalidMessageError, match=r"no message in the context asks for tool call 'c2'"):
            ToolResult("ok", state={"x": 1}).apply_to(ctx, call_id="c2")
        assert before is ctx.messages
        assert {} == ctx.scratchpad

    def test_a_second_result_for_one_call_is_refused_and_nothing_changes(self):
        """
        A call that already has its result gets no second one (providers
        reject two answers to one call): refused, nothing changes; a call
        asked again may be answered again.
        """
        ctx = calling_context("c1")
        ToolResult("first", state={"n": 1}).apply_to(ctx, call_id="c1")
        before = ctx.freeze()
        with pytest.raises(InvalidMessageError, match=r"tool call 'c1' already has its result"):
            ToolResult("second", state={"n": 2}).apply_to(ctx, call_id="c1")
        assert before == ctx.freeze()
        ctx.append(Message("assistant", tool_calls=[ToolCall("c1", "select_city", {"city": "Bergen"})]))
        ToolResult("again", state={"n": 3}).apply_to(ctx, call_id="c1")
        assert ("c1",) == ctx.messages[-1].result_ids
        assert 3 == ctx.get("n")

    def test_calls_are_found_after_the_tail_is_trimmed_or_cleared(self):
        """
        The tail's call index follows replace_tail() and clear_messages(): a
        call trimmed away is unknown again, one kept is still known.
        """
        ctx = WorkingContext().append(
            Message("user", "do it"),
            Message("assistant", tool_calls=[ToolCall("c1", "tool")]),
            Message("assistant", tool_calls=[ToolCall("c2", "tool")]),
        )
        ToolResult("warm").apply_to(ctx, call_id="c1")  # the index exists before the trim
        ctx.replace_tail([ctx.messages[0], ctx.messages[2]])
        with pytest.raises(InvalidMessageError, match="no message in the context asks for tool call 'c1'"):
            ToolResult("ok").apply_to(ctx, call_id="c1")
        ToolResult("ok").apply_to(ctx, call_id="c2")
        ctx.clear_messages()
        with pytest.raises(InvalidMessageError, match="no message in the context asks for tool call 'c2'"):
            ToolResult("ok").apply_to(ctx, call_id="c2")

    def test_each_step_allocates_the_same_at_any_length(self):
        """
        Applying a result after its call allocates the same on a transcript
        of 100,000 messages as on one of 1,000: the call is found in the
        tail's index, never by copying or walking the transcript.
        """
        import tracemalloc  # noqa: PLC0415

        def peak_of_one_step(n: int) -> int:
            ctx = WorkingContext(messages=[Message("user", f"m{i}") for i in range(n)])
            for step in range(3):  # the first step builds the index
                ctx.append(Message("assistant", tool_calls=[ToolCall(f"c{step}", "lookup", {})]))
                tracemalloc.start()
                ToolResult("ok", state={"step": step}).apply_to(ctx, call_id=f"c{step}")
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
            return peak

        assert peak_of_one_step(100_000) < 4 * peak_of_one_step(1_000) + 4096

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"state": ["x"]}, "must be a mapping of scratchpad keys"),
            ({"state": {1: "x"}}, "keys must be str, got 1"),
            ({"is_error": "yes"}, "is_error=...\\) must be True or False"),
        ],
    )
    def test_bad_arguments(self, kwargs, match):
        """
        Bad state or flags are refused with the value.
        """
        with pytest.raises(TypeError, match=match):
            ToolResult("ok", **kwargs)

    def test_empty_call_id(self):
        """
        A result needs the id of its call.
        """
        with pytest.raises(InvalidMessageError, match="needs the id of the call"):
            ToolResult("ok").to_message("")

    @given(json_values(6), st.dictionaries(short_names, json_values(4), max_size=3), st.booleans())
    def test_apply_appends_one_valid_result(self, payload, state, is_error):
        """
        Property: applying any result appends exactly one tool message
        answering the call, and every state key lands in the scratchpad.
        """
        ctx = calling_context("c1", "c2")
        ToolResult(payload, state=state, is_error=is_error).apply_to(ctx, call_id="c2")
        assert 3 == ctx.size()
        assert ("c2",) == ctx.messages[-1].result_ids
        assert [] == orphans(ctx.messages)
        assert set(state) <= set(ctx.scratchpad)
