"""
Tests for workingctx._rekey: call ids are local names, so a merge re-keys an incoming call
whose id a different call here uses, routes its later results to the new name, and gives
the same ids in every process.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from tests.strategies import (
    reused_id_forks,
)
from workingctx import FrozenContext, Message, ToolCall, WorkingContext, _rekey
from workingctx.adapters import openai_chat
from workingctx.exceptions import MergeError
from workingctx.frozen import thaw
from workingctx.history import entry_from_data, entry_to_data
from workingctx.messages import TextBlock, ToolCallBlock, ToolResultBlock
from workingctx.reducers import ToolResult, add_messages, add_messages_to
from workingctx.serialization import from_json, to_json
from workingctx.validity import STRUCTURAL_RULES, check_messages

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

    def test_a_call_that_only_looks_rekeyed_is_another_call_under_union(self):
        """
        A transcript may name its own calls ``call_0-2``. Under union, an
        incoming ``call_0`` equal to that call once renamed is still another
        call, as no merge gave ``call_0`` that name: it comes in, re-keyed;
        merging again adds nothing, as the journal records the new name.
        """
        parent = WorkingContext().append(Message("user", "Research both."))
        first = parent.fork().append(
            Message("assistant", tool_calls=[ToolCall("call_0", "search", {"q": "b"})]),
            Message("tool", "B", tool_call_id="call_0"),
            Message("assistant", tool_calls=[ToolCall("call_0-2", "search", {"q": "a"})]),
            Message("tool", "A", tool_call_id="call_0-2"),
        )
        second = parent.fork().append(Message("assistant", tool_calls=[ToolCall("call_0", "search", {"q": "a"})]))
        parent.merge(first, mode="union").merge(second, mode="union")
        assert ["call_0", "call_0-2", "call_0-3"] == [m.call_ids[0] for m in parent.messages if m.call_ids]
        assert [["call_0", "call_0-3"]] == [list(pair) for pair in list(parent.journal)[-1]["rekeyed"]]
        once = parent.freeze()
        parent.merge(first, mode="union").merge(second, mode="union")
        assert once == parent.freeze()

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
