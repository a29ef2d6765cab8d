"""
The counts cached on each message: several counters' counts side by side, one
pass over a long list never counted, and a count that is no count refused.
"""

from __future__ import annotations

import re
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import messages
from tests.tokens.counts import _never, cached, fresh, openssl_transcript
from workingctx import ApproxTokenCounter, Message, TiktokenCounter
from workingctx.exceptions import ArgumentTypeError, ArgumentValueError
from workingctx.tokens import RunningCount, counting, estimate_message_tokens
from workingctx.tokens._cache import cached_total, count_cache


class TestMessageCounter:
    def test_cache_keeps_every_counter(self):
        """
        Counts under several names live side by side on one message; each is read back, none overwritten.
        """
        message = Message("user", "abc")
        caches = [count_cache(f"k{i}", lambda _m, i=i: i) for i in range(5)]
        assert [0, 1, 2, 3, 4] == [cache.count(message) for cache in caches]
        assert [0, 1, 2, 3, 4] == [cache.peek(message) for cache in caches]
        assert None is count_cache("k5", _never).peek(message)
        with pytest.raises(TypeError, match="of type str at position 0"):
            caches[0].peek("abc")  # type: ignore[arg-type]

    def test_warm_totals_read_each_counters_own_counts(self):
        """
        A transcript counted by several counters sums each counter's own counts
        when counted again (the warm path reads the cache, never another counter's).
        """
        messages = [Message("user", "x" * (40 * i + 1)) for i in range(80)]
        one, two = count_cache("k1", lambda m: len(m.text())), count_cache("k2", lambda _m: 7)
        assert sum(len(m.text()) for m in messages) == _cached_total_after(one, messages)
        assert 7 * len(messages) == _cached_total_after(two, messages)
        assert sum(len(m.text()) for m in messages) == cached_total(messages, "k1")
        assert 7 * len(messages) == cached_total(messages, "k2")
        assert None is cached_total(messages, "k3")
        assert None is cached_total([*messages, "not a message"], "k1")  # type: ignore[list-item]


def _cached_total_after(cache, messages):
    return sum(map(cache.count, messages))


class TestColdPass:
    """
    A long list of messages never counted is counted in one pass: the same counts, cached the same way.
    """

    @given(st.lists(messages(), min_size=1, max_size=6), st.sampled_from(["openai", "anthropic"]), st.data())
    def test_one_pass_counts_what_one_by_one_counts(self, drawn, images, data):
        """
        Each message of a long fresh list (text, blocks, tool calls, the same object twice,
        some already counted) gets the count it gets alone, cached under the counter's name.
        """
        counter = ApproxTokenCounter(images=images)
        batch = [fresh(drawn[i % len(drawn)]) for i in range(70)]
        batch.append(batch[3])  # the same message twice
        for i in data.draw(st.sets(st.integers(0, 69), max_size=5)):
            counter.count_message(batch[i])  # counted before the list
        alone = [counter.count_message(fresh(m)) for m in batch]

        assert sum(alone) == counter.count(batch)
        assert alone == [cached(m, counter.name) for m in batch]
        running = RunningCount(counter)
        assert sum(alone) == running.extend([fresh(m) for m in batch])
        assert running.upto(10) == sum(alone[:10])

    def test_estimate_of_a_fresh_transcript_is_cached(self):
        """
        estimate_message_tokens counts a long fresh transcript once: every count is cached on its message.
        """
        batch = [m for _ in range(30) for m in openssl_transcript()]
        total = estimate_message_tokens(batch)

        assert total == 30 * 37
        assert [cached(m, "approx") for m in batch] == [7, 19, 11] * 30

    def test_keeps_another_counters_count(self):
        """
        A message counted by another counter first keeps that count beside the approximation's.
        """
        batch = [Message("user", f"line {i} of the incident log") for i in range(100)]
        exact = TiktokenCounter()
        first = exact.count_message(batch[5])
        assert sum(ApproxTokenCounter().count_message(fresh(m)) for m in batch) == estimate_message_tokens(batch)
        assert (first, 10) == (cached(batch[5], exact.name), cached(batch[5], "approx"))

    @pytest.mark.parametrize("bad", [None, "hello", types.SimpleNamespace(_token_counts=None)])
    def test_names_a_non_message(self, bad):
        """
        A non-message in a long list is named with its position, and a running count stays as it was.
        """
        batch: list[object] = [Message("user", f"q{i}") for i in range(100)]
        batch.insert(70, bad)
        with pytest.raises(TypeError, match=f"of type {type(bad).__name__} at position 70"):
            estimate_message_tokens(batch)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="at position 70"):
            ApproxTokenCounter(images="anthropic").count(batch)  # type: ignore[arg-type]
        running = RunningCount()
        with pytest.raises(TypeError, match="at position 70"):
            running.extend(batch)  # type: ignore[arg-type]
        assert (0, 0) == (running.total, len(running))


class TestCustomCounts:
    @pytest.mark.parametrize(
        ("value", "error", "match"),
        [
            (-1, ArgumentValueError, "token counter 'bad' counted -1 tokens for a message; a count is an int >= 0"),
            (2.5, ArgumentTypeError, "token counter 'bad' gave an int count, got 2.5 of type float"),
            (True, ArgumentTypeError, "token counter 'bad' gave an int count, got True of type bool"),
            ("3", ArgumentTypeError, "got '3' of type str; return an int >= 0"),
        ],
    )
    def test_a_count_that_is_no_count_is_refused(self, value, error, match):
        """
        A custom counter's count is an int >= 0 (sums, budgets and cache plans
        rely on it): anything else is refused by name, and nothing is cached.
        """

        class Bad:
            name = "bad"

            def count_message(self, _message: Message) -> object:
                return value

        message = Message("user", "hello")
        with pytest.raises(error, match=re.escape(match)):
            counting(Bad())(message)  # type: ignore[arg-type]
        assert cached(message, "bad") is None

    def test_an_index_is_a_count(self):
        """
        A count of another int type (anything with ``__index__``, as NumPy's ints) is taken as the int it is.
        """

        class Seven:
            def __index__(self) -> int:
                return 7

        class Numpyish:
            name = "numpyish"

            def count_message(self, _message: Message) -> object:
                return Seven()

        message = Message("user", "hello")
        assert 7 == counting(Numpyish())(message)  # type: ignore[arg-type]
        assert 7 == cached(message, "numpyish")
