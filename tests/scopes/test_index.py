"""
TailIndex: the cuts, turns, calls and rules' state of a tail, told after a trim from the
index before it (TailIndex.rebased, RuleState.rebased) instead of indexing the kept messages again.
"""

from __future__ import annotations

import unittest.mock
from collections.abc import Sequence

from hypothesis import assume, given
from hypothesis import strategies as st

from tests.strategies import system_heads as heads
from tests.strategies import trim_runs as runs
from workingctx import Message, ToolCall, validity
from workingctx.scopes._index import NEVER, TailIndex
from workingctx.validity import RuleState

SLACK = validity._STALE_SLACK  # noqa: SLF001  # how many dropped calls a rebased walk keeps before it prunes


def indexed(messages: Sequence[Message]) -> TailIndex:
    index = TailIndex()
    index.update(messages)
    return index


def state(index: TailIndex) -> tuple[object, ...]:
    """
    Everything an index answers with: its cuts, turns, calls and the rules' state.
    """
    walk = index.walk
    return (
        index.size,
        index.positions(),
        index.turn_count(),
        walk.size,
        walk.calls(),
        walk.open,
        walk.open_at,
        walk.calls_at,
        walk.problems,
        walk.broken,
        walk.first,
        walk.first_role,
        walk.users,
    )


@given(runs, heads, st.data())
def test_a_rebased_index_is_the_index_of_the_kept_messages(run, head, data):
    """
    Property: wherever an index can be told from the old one (a cut that splits
    no exchange of a transcript breaking no rule), it answers everything as an
    index built over the kept messages does, and it goes on indexing alike.
    """
    old = indexed(run)
    start = data.draw(st.integers(0, len(run)))
    rebased = old.rebased(head, run[start:], start)
    clean = old.blocker(start) == NEVER and not old.walk.problems
    if rebased is None:
        assert not clean or (old.walk.open and old.walk.open_at < start)
        return
    assert clean
    kept = [*head, *run[start:]]
    assert state(rebased) == state(indexed(kept))
    told = old.rebased(head, run[start:], start, run[:start])  # the dropped messages given: the same index
    assert told is not None
    assert state(told) == state(rebased)
    more = data.draw(runs)
    rebased.update([*kept, *more])
    assert state(rebased) == state(indexed([*kept, *more]))


@given(runs, st.data(), st.sampled_from([SLACK, 0]))
def test_indexes_trimmed_and_grown_in_turn_answer_as_new_ones(run, data, slack):
    """
    Property: an index trimmed again and again (each trim reading the arrays
    of the one before, sometimes copied when few messages are kept, and
    copying the rules' calls, pruned of those dropped at every trim with no
    slack), grown between the trims, answers as an index built over its
    messages; and an index a trim left behind, grown on its own afterwards, still does.
    """
    with unittest.mock.patch.object(validity, "_STALE_SLACK", slack):
        _trim_and_grow(run, data)


def _trim_and_grow(run: list[Message], data: st.DataObject) -> None:
    messages = list(run)
    index = indexed(messages)
    left: list[tuple[TailIndex, list[Message]]] = []
    for _ in range(data.draw(st.integers(1, 6))):
        if data.draw(st.booleans()):
            messages = [*messages, *data.draw(runs)]
            index.update(messages)
        else:
            start = data.draw(st.integers(0, len(messages)))
            head = data.draw(heads)
            rebased = index.rebased(head, messages[start:], start)
            if rebased is None:
                continue
            left.append((index, messages))
            index, messages = rebased, [*head, *messages[start:]]
        assert state(index) == state(indexed(messages))
    for old, kept in left:
        assert state(old) == state(indexed(kept))  # what another index wrote after it is not read
        grown = [*kept, *data.draw(runs)]
        old.update(grown)
        assert state(old) == state(indexed(grown))


def test_a_long_run_of_trims_keeps_only_the_kept_messages_arrays():
    """
    Trims that each drop one exchange copy the arrays once the messages
    dropped outnumber those kept, so the arrays stay near the window's size,
    and prune the rules' calls once those dropped outnumber those kept.
    """
    messages: list[Message] = [Message("system", "Be brief.")]
    index = indexed(messages)
    longest = most_calls = 0
    for turn in range(400):
        call = ToolCall(f"c{turn}", "lookup")
        messages = [
            *messages,
            Message("user", f"q{turn}"),
            Message("assistant", tool_calls=(call,)),
            Message("tool", "r", tool_call_id=call.id),
            Message("assistant", "a"),
        ]
        index.update(messages)
        if len(messages) > 41:
            told = index.rebased(messages[:1], messages[5:], 5)
            assert told is not None
            index, messages = told, [messages[0], *messages[5:]]
        longest = max(longest, len(index._opens))  # noqa: SLF001  # the stored arrays' length
        most_calls = max(most_calls, len(index.walk._asked))  # noqa: SLF001  # the calls stored, dropped ones too
    assert state(index) == state(indexed(messages))
    assert longest <= 3 * len(messages) + 64
    assert most_calls <= 2 * len(index.walk.calls()[0]) + SLACK + 1


@given(runs, st.data())
def test_a_rebased_walk_is_the_walk_of_the_kept_messages(run, data):
    """
    Property: a rules' state told from the old one finds what a walk over the kept messages finds.
    """
    old = indexed(run)
    start = data.draw(st.integers(0, len(run)))
    assume(old.blocker(start) == NEVER)
    walk = old.walk.rebased([], run[start:], start)
    if walk is None:
        return
    told = old.walk.rebased([], run[start:], start, run[:start])
    assert told is not None
    assert (told.users, told.calls()) == (walk.users, walk.calls())
    fresh = RuleState()
    for message in run[start:]:
        fresh.feed(message)
    assert walk.finish(allow_pending=True) == fresh.finish(allow_pending=True)
    assert (walk.size, walk.users, walk.first, walk.first_role, walk.open) == (
        fresh.size,
        fresh.users,
        fresh.first,
        fresh.first_role,
        fresh.open,
    )


def test_a_head_that_calls_is_walked_again():
    """
    A message before the kept ones that is not a plain system message cannot be told: None.
    """
    run = [Message("user", "q"), Message("assistant", "a")]
    old = indexed(run)
    call = ToolCall("c1", "lookup")
    assert old.rebased([Message("assistant", tool_calls=(call,))], run[1:], 1) is None
    assert old.rebased([Message("user", "x")], run[1:], 1) is None
