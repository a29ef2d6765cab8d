"""
RunningCount: a running total that bad input leaves as it was, sums rebased on
a head and a slice (again and again, grown and cut between), and a long list counted in one batch.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import system_heads as heads
from tests.strategies import trim_runs as runs
from tests.tokens.counts import fresh
from workingctx import Message, TiktokenCounter
from workingctx.tokens import RunningCount


class TestBadInput:
    def test_running_count_unchanged_by_bad_input(self):
        """
        A bad item leaves a running count as it was.
        """
        running = RunningCount()
        running.extend([Message("user", "check the cert")])
        with pytest.raises(TypeError, match="position 1"):
            running.extend([Message("user", "more"), None])  # type: ignore[list-item]

        assert (7, 1) == (running.total, len(running))

    def test_rebased_running_sums_count_the_head_and_read_the_rest(self):
        """
        Sums rebased on a head and a slice of the counted messages are those of
        the head and the slice counted anew; a slice out of range is refused.
        """
        messages = [Message("user", "check the cert " * i) for i in range(1, 6)]
        running = RunningCount()
        running.extend(messages)
        head = [Message("system", "Be brief.")]
        rebased = running.rebased(head, 2, 4)
        fresh = RunningCount()
        fresh.extend([*head, *messages[2:4]])
        assert [rebased.upto(i) for i in range(4)] == [fresh.upto(i) for i in range(4)]
        assert len(rebased) == 3
        for start, stop in ((3, 2), (0, 6), (-1, 2)):
            with pytest.raises(IndexError):
                running.rebased(head, start, stop)
        assert len(running) == 5


class TestTiktokenCounter:
    def test_running_count_batches(self):
        """
        A running count under the exact counter counts a long list in one batch, the same as one by one.
        """
        batch = [Message("user", f"line {i} of the incident log") for i in range(100)]
        running = RunningCount(TiktokenCounter())
        assert sum(TiktokenCounter().count_message(fresh(m)) for m in batch) == running.extend(batch)
        assert running.upto(50) == TiktokenCounter().count(batch[:50])


@given(runs, st.data())
def test_running_sums_trimmed_and_grown_in_turn_are_those_counted_anew(run, data):
    """
    Property: running sums rebased again and again (each reading the buffer
    of the ones before, sometimes copied), extended and truncated between,
    equal sums counted over their messages; and sums a trim left behind,
    extended on their own afterwards, still do.
    """
    messages = list(run)
    running = RunningCount()
    running.extend(messages)
    left: list[tuple[RunningCount, list[Message]]] = []
    for _ in range(data.draw(st.integers(1, 6))):
        step = data.draw(st.sampled_from(["extend", "truncate", "rebase", "rebase"]))
        if step == "extend":
            more = data.draw(runs)
            running.extend(more)
            messages = [*messages, *more]
        elif step == "truncate":
            n = data.draw(st.integers(0, len(messages)))
            running.truncate(n)
            messages = messages[:n]
        else:
            start = data.draw(st.integers(0, len(messages)))
            stop = data.draw(st.integers(start, len(messages)))
            head = data.draw(heads)
            left.append((running, messages))
            running, messages = running.rebased(head, start, stop), [*head, *messages[start:stop]]
        fresh = RunningCount()
        fresh.extend(messages)
        assert running == fresh
        assert (running.total, len(running)) == (fresh.total, len(fresh))
    for old, kept in left:
        more = data.draw(runs)
        old.extend(more)
        fresh = RunningCount()
        fresh.extend([*kept, *more])
        assert old == fresh
