"""
workingctx.integrations._window: the local names the framework integrations give call ids.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from workingctx import Message
from workingctx.callids import fresh_call_id
from workingctx.integrations._window import CallNames
from workingctx.messages import ToolCallBlock

IDS = ["a", "a-2", "a-3", "b"]
"""Few ids, some named as fresh_call_id names a reused ``a``, so that they meet often."""


@st.composite
def exchanges(draw: Any) -> list[tuple[str, tuple[str, ...]]]:
    """
    A sequence of turns: ``("call", ids)`` an assistant message calling *ids* (repeats allowed),
    ``("result", (id,))`` a tool message answering *id*, in any order (orphans and second results too).
    """
    turns = st.one_of(
        st.tuples(st.just("call"), st.lists(st.sampled_from(IDS), min_size=1, max_size=3).map(tuple)),
        st.tuples(st.just("result"), st.tuples(st.sampled_from(IDS))),
    )
    return draw(st.lists(turns, max_size=12))


Call = tuple[int, int]
"""A call by the turn that makes it and its position in that turn."""


def reference(turns: list[tuple[str, tuple[str, ...]]]) -> dict[int, tuple[Call | None, set[Call]]]:
    """
    For each result (by its turn), the call it answers as the frameworks pair them (pydantic-ai's
    repair_messages: the oldest call of its id still waiting, a call from a later turn taking the
    id from the calls still waiting), None for a result that answers no call, and the calls still
    waiting when it comes.
    """
    waiting: dict[str, list[Call]] = {}
    paired: dict[int, tuple[Call | None, set[Call]]] = {}
    for turn, (kind, ids) in enumerate(turns):
        if kind == "call":
            for position, call_id in enumerate(ids):
                if waiting.get(call_id) and waiting[call_id][-1][0] != turn:
                    waiting[call_id] = []
                waiting.setdefault(call_id, []).append((turn, position))
        else:
            still = {c for calls in waiting.values() for c in calls}
            queue = waiting.get(ids[0])
            paired[turn] = (queue.pop(0) if queue else None, still)
    return paired


def message(kind: str, ids: tuple[str, ...]) -> Message:
    if kind == "call":
        return Message("assistant", tuple(ToolCallBlock(i, "weather", {"n": n}) for n, i in enumerate(ids)))
    return Message("tool", "18C", tool_call_id=ids[0])


@settings(max_examples=300, deadline=None)
@given(turns=exchanges())
def test_local_names_pair_results_as_the_frameworks_do(turns):
    """
    Every call gets a name no other call has; a result gets the name of the very call it answers;
    and a result that answers no call is never named like a call still waiting, so it cannot pass
    for that call's answer.
    """
    names = CallNames()
    renamed = [names.rename(message(kind, ids)) for kind, ids in turns]
    call_names: dict[Call, str] = {}
    for turn, m in enumerate(renamed):
        if turns[turn][0] == "call":
            blocks = [b for b in m.content if isinstance(b, ToolCallBlock)]
            assert [b.name for b in blocks] == ["weather"] * len(turns[turn][1])
            call_names.update({(turn, position): b.id for position, b in enumerate(blocks)})
    assert len(set(call_names.values())) == len(call_names)
    for turn, (call, waiting) in reference(turns).items():
        name = renamed[turn].tool_call_id
        if call is not None:
            assert call_names[call] == name
        else:
            assert name not in {call_names[c] for c in waiting}


def test_calls_sharing_an_id_in_one_message_are_answered_in_order():
    """
    Two calls under one id in one message get two names, and the results answer them in order.
    """
    names = CallNames()
    call = names.rename(message("call", ("call_0", "call_0")))
    first, second = (names.rename(message("result", ("call_0",))) for _ in range(2))
    assert ("call_0", "call_0-2") == call.call_ids
    assert ("call_0", "call_0-2") == (first.tool_call_id, second.tool_call_id)


def test_an_orphan_named_like_a_renamed_call_does_not_answer_it():
    """
    A result under ``a-2`` with no call of that id before it is not the answer of the second ``a``
    call, which workingctx calls ``a-2`` locally: the call stays unanswered, the result an orphan.
    """
    names = CallNames()
    names.rename(message("call", ("a",)))
    names.rename(message("result", ("a",)))
    second = names.rename(message("call", ("a",)))
    orphan = names.rename(message("result", ("a-2",)))
    assert ("a-2",) == second.call_ids
    assert orphan.tool_call_id not in {"a", "a-2"}


@settings(max_examples=200, deadline=None)
@given(calls=st.lists(st.lists(st.sampled_from(IDS), min_size=1, max_size=3), max_size=12))
def test_names_are_fresh_call_ids(calls):
    """
    The local name of a call is its id, or the name fresh_call_id gives it among the names taken before.
    """
    taken: set[str] = set()
    expected: list[str] = []
    for ids in calls:
        for call_id in ids:
            expected.append(call_id if call_id not in taken else fresh_call_id(call_id, taken))
            taken.add(expected[-1])
    names = CallNames()
    got = [b.id for ids in calls for b in names.rename(message("call", tuple(ids))).content]
    assert expected == got


class _Counted(set[str]):
    """
    A set that counts the lookups made in it.
    """

    lookups = 0

    def __contains__(self, item: object) -> bool:
        self.lookups += 1
        return super().__contains__(item)


def test_one_id_reused_throughout_is_named_in_linear_time():
    """
    A long history whose every call reuses one id (an OpenAI-compatible server's ``call_0``) is
    named with a few lookups per call, not one per call named before it.
    """
    names = CallNames()
    taken = names._taken = _Counted()  # noqa: SLF001  # the lookups naming makes
    for _ in range(2_000):
        names.rename(message("call", ("call_0",)))
        names.rename(message("result", ("call_0",)))
    assert taken.lookups < 10 * 2_000
