"""
Tests for workingctx._tail: a trim's index told from the old one (TailIndex.rebased, RuleState.rebased).
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import assume, given
from hypothesis import strategies as st

from tests.strategies import block_transcripts, scope_transcripts, transcripts
from workingctx import Message, ToolCall, WorkingContext
from workingctx.scopes._index import NEVER, TailIndex
from workingctx.validity import RuleState

runs = st.one_of(transcripts(max_turns=8), scope_transcripts(broken=True), block_transcripts(broken=True))
heads = st.lists(st.sampled_from([Message("system", "Be brief."), Message("system", "Cite sources.")]), max_size=2)


def indexed(messages: Sequence[Message]) -> TailIndex:
    index = TailIndex()
    index.update(messages)
    return index


def state(index: TailIndex) -> tuple[object, ...]:
    """
    Everything an index answers with: its cuts, turns, calls and the rules' state.
    """
    walk = index.walk
    unmarked = [index._unmarked(c) for c in range(index.size + 1)]  # noqa: SLF001  # the next cut to mark
    return (
        index.size,
        list(index.blocked_by),
        bytes(index.turn_start),
        list(index.turns),
        dict(index._call_at),  # noqa: SLF001
        unmarked,
        walk.size,
        dict(walk.asked),
        set(walk.answered),
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
    clean = old.blocked_by[start] == NEVER and not old.walk.problems
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


@given(runs, st.data())
def test_a_rebased_walk_is_the_walk_of_the_kept_messages(run, data):
    """
    Property: a rules' state told from the old one finds what a walk over the kept messages finds.
    """
    old = indexed(run)
    start = data.draw(st.integers(0, len(run)))
    assume(old.blocked_by[start] == NEVER)
    walk = old.walk.rebased([], run[start:], start)
    if walk is None:
        return
    told = old.walk.rebased([], run[start:], start, run[:start])
    assert told is not None
    assert (told.users, set(told.answered), told.asked) == (walk.users, set(walk.answered), walk.asked)
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


def test_a_trimmed_context_keeps_its_system_positions():
    """
    The system positions carried over by a trim are those of the new tail.
    """
    ctx = WorkingContext(messages=[Message("system", "s"), Message("user", "q0"), Message("assistant", "a0")])
    ctx.append(Message("system", "late"), Message("user", "q1"), Message("assistant", "a1"))
    view = ctx.tail_view()
    assert view.tail_index.size == 6
    ctx.replace_tail([ctx.messages[0], *ctx.messages[3:]])
    assert ctx.tail_view().system_positions == (0, 1)
    assert ctx._tail._tail_index is not None  # noqa: SLF001  # carried over, not indexed again


@given(runs, heads, st.data())
def test_a_trim_carries_the_running_sums_over(run, head, data):
    """
    Property: a tail replaced by a few system messages and its newest messages
    keeps running sums equal to counting the new tail, without counting it again.
    """
    ctx = WorkingContext(messages=run)
    ctx.count_tokens()
    start = data.draw(st.integers(0, len(run)))
    kept = [*head, *run[start:]]
    ctx.replace_tail(kept)
    running = ctx._tail._running  # noqa: SLF001  # carried over before any read
    if kept and start < len(run):
        assert running is not None
        assert [running.upto(i) for i in range(len(kept) + 1)] == [
            ctx.counter.count(kept[:i]) for i in range(len(kept) + 1)
        ]
    assert ctx.count_tokens() == WorkingContext(messages=kept).count_tokens()
