"""
Exact counts on two threads (``workingctx.tokens._encode``): the same counts as one
call per text, whoever encodes which chunk, whatever the texts hold.
"""

from __future__ import annotations

import contextlib
import gc
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import tiktoken
from hypothesis import given
from hypothesis import strategies as st

from workingctx import Message, TiktokenCounter
from workingctx.exceptions import ArgumentTypeError
from workingctx.tokens import _encode as encode_module

HELPER = encode_module.HELPER_NAME


@pytest.fixture(scope="module")
def encoding() -> Any:
    found = TiktokenCounter().encoding
    assert found is not None
    return found


@pytest.fixture(autouse=True, scope="module")
def two_cores() -> Iterator[None]:
    """
    The helper takes part whatever the machine running the tests, from 32 items on.
    """
    before = encode_module._TWO_CORES, encode_module._MIN_ITEMS, encode_module._CHUNKS  # noqa: SLF001
    # two cores, small batches (quick tests) and chunks of 20 of 320 items, whatever the defaults
    encode_module._TWO_CORES, encode_module._MIN_ITEMS, encode_module._CHUNKS = True, 32, 16  # noqa: SLF001
    try:
        yield
    finally:
        encode_module._TWO_CORES, encode_module._MIN_ITEMS, encode_module._CHUNKS = before  # noqa: SLF001


def one_by_one(encoding: Any, items: list[tuple[str, int]]) -> list[int]:
    return [len(encoding.encode_ordinary(text)) + extra for text, extra in items]


def as_is(item: tuple[str, int]) -> tuple[str, int]:
    return item


def recording(where: set[str], pause: float) -> Callable[[tuple[str, int]], tuple[str, int]]:
    """
    A prepare that adds the name of the thread it runs on to *where* and takes *pause* seconds.
    """

    def prepare(item: tuple[str, int]) -> tuple[str, int]:
        where.add(threading.current_thread().name)
        time.sleep(pause)
        return item

    return prepare


_EOT = "<|endoftext|>"
PIECES = [" ", "\n", "\t", "a", "1", "\u00e9", "\ud800", "\udc00", "'s", "<", "|", ">"]
SPECIAL = ["<|endoftext|>", "<|fim_prefix|>", "<|endofprompt|>", "<|endoftext", "|>", "<|", "endoftext|>"]

texts = st.one_of(
    st.text(max_size=40),
    st.lists(st.sampled_from(PIECES), max_size=12).map("".join),
    st.lists(st.sampled_from([*SPECIAL, " ", "\n", "x", "  "]), max_size=5).map("".join),
)
items = st.one_of(
    st.lists(st.tuples(texts, st.integers(0, 9)), max_size=8),
    st.lists(st.tuples(texts, st.integers(0, 9)), min_size=33, max_size=80),
)


@contextlib.contextmanager
def chunking(chunks: int, min_items: int) -> Iterator[None]:
    before = encode_module._CHUNKS, encode_module._MIN_ITEMS  # noqa: SLF001
    encode_module._CHUNKS, encode_module._MIN_ITEMS = chunks, min_items  # noqa: SLF001
    try:
        yield
    finally:
        encode_module._CHUNKS, encode_module._MIN_ITEMS = before  # noqa: SLF001


class TestSameCounts:
    @given(batch=items, threads=st.booleans(), chunks=st.integers(1, 20), min_items=st.sampled_from([0, 2, 32]))
    def test_equal_one_call_per_text(self, encoding, batch, threads, chunks, min_items):
        """
        Joined by a special token and cut in any number of chunks, on one
        thread or two, the texts get the counts they get alone: around
        whitespace, with special token strings and pieces of them, with lone
        surrogates.
        """
        with chunking(chunks, min_items):
            assert one_by_one(encoding, batch) == encode_module.counts(encoding, batch, as_is, threads=threads)

    def test_a_text_holding_the_separator(self, encoding):
        """
        A chunk where a text holds the separator is encoded text by text:
        the separator in it counts as the text it is.
        """
        batch = [(f"line {i}", 1) for i in range(40)]
        batch[5] = ("ends <|endoftext|> here", 0)
        counted = encode_module.counts(encoding, batch, as_is)
        assert one_by_one(encoding, batch) == counted
        assert counted[5] > 3  # not the one special token the join would make of it

    def test_encoding_without_special_tokens(self, encoding):
        """
        An encoding with no special token, or only ones that can overlap
        themselves, has no separator: its texts are encoded one by one.
        """
        ranks = encoding._mergeable_ranks  # noqa: SLF001  # the same ranks, other special tokens
        bare = tiktoken.Encoding(name="bare", pat_str=encoding._pat_str, mergeable_ranks=ranks, special_tokens={})  # noqa: SLF001
        overlapping = tiktoken.Encoding(
            name="overlapping",
            pat_str=encoding._pat_str,  # noqa: SLF001
            mergeable_ranks=ranks,
            special_tokens={"<ab<ab": 100300},
        )
        batch = [(f"word {i} <ab<ab", 0) for i in range(40)]
        ends_with_its_start = [("word <ab", 0), ("next", 0)] * 20  # "<ab" + "<ab<ab" holds "<ab<ab" early
        for other in (bare, overlapping):
            assert encode_module._separator(other) is None  # noqa: SLF001
            for texts in (batch, ends_with_its_start):
                assert one_by_one(other, texts) == encode_module.counts(other, texts, as_is)
        assert encode_module._separator(encoding).text == "<|endoftext|>"  # noqa: SLF001

    def test_special_tokens_that_could_hide_the_separator(self, encoding):
        """
        A special token beginning with the separator (or one it begins with)
        could match where a separator was put, and a special token whose id is
        an ordinary token's cannot be told from it: neither is chosen, and the
        counts are the ones alone.
        """
        ranks = encoding._mergeable_ranks  # noqa: SLF001
        pat = encoding._pat_str  # noqa: SLF001
        batch = [(f"{i} apples", 0) for i in range(64)]
        longer = tiktoken.Encoding(
            name="longer", pat_str=pat, mergeable_ranks=ranks, special_tokens={_EOT: 100257, _EOT + "1": 100258}
        )
        shorter = tiktoken.Encoding(
            name="shorter", pat_str=pat, mergeable_ranks=ranks, special_tokens={_EOT: 100257, "<|end": 100258}
        )
        colliding = tiktoken.Encoding(
            name="colliding", pat_str=pat, mergeable_ranks=ranks, special_tokens={_EOT: ranks[b"hello"]}
        )
        for other in (longer, shorter, colliding):
            assert encode_module._separator(other) is None  # noqa: SLF001
            assert one_by_one(other, batch) == encode_module.counts(other, batch, as_is)
            hello = [("hello there", 0), ("two words", 0)] * 20
            assert one_by_one(other, hello) == encode_module.counts(other, hello, as_is)

    def test_a_subclass_is_called_as_it_is(self, encoding):
        """
        A subclass of ``tiktoken.Encoding`` may encode otherwise: its own
        ``encode_ordinary`` counts each text, on the caller's thread.
        """

        class Doubled(tiktoken.Encoding):
            def encode_ordinary(self, text: str) -> list[int]:
                return [*super().encode_ordinary(text), *super().encode_ordinary(text)]

        doubled = Doubled(
            name="doubled",
            pat_str=encoding._pat_str,  # noqa: SLF001
            mergeable_ranks=encoding._mergeable_ranks,  # noqa: SLF001
            special_tokens=encoding._special_tokens,  # noqa: SLF001
        )
        batch = [(f"text {i}", 1) for i in range(64)]
        assert [2 * (n - 1) + 1 for n in one_by_one(encoding, batch)] == encode_module.counts(doubled, batch, as_is)

    def test_an_encoding_of_another_kind(self, encoding):
        """
        An object with ``encode_ordinary`` only: no copy for the helper and no
        separator; the caller encodes every text, once each.
        """
        calls: list[str] = []

        class Plain:
            name = "plain"

            def encode_ordinary(self, text: str) -> list[int]:
                calls.append(text)
                return list(encoding.encode_ordinary(text))

        batch = [(f"text {i}", 2) for i in range(50)]
        assert one_by_one(encoding, batch) == encode_module.counts(Plain(), batch, as_is)
        assert sorted(calls) == sorted(text for text, _ in batch)


class TestTwoThreads:
    def test_the_helper_encodes_part_of_a_batch(self, encoding):
        """
        On a batch that takes a while, the helper thread takes chunks, and
        the counts come back in the items' order.
        """
        where: dict[int, str] = {}

        def slow(item: tuple[str, int]) -> tuple[str, int]:
            where[item[1]] = threading.current_thread().name
            time.sleep(0.002)
            return item

        batch = [(f"item number {i} " * (i % 7), i) for i in range(320)]
        assert one_by_one(encoding, batch) == encode_module.counts(encoding, batch, slow)
        assert HELPER in where.values()
        assert threading.current_thread().name in where.values()
        assert encode_module.counts(encoding, batch, slow, threads=False) == one_by_one(encoding, batch)

    def test_small_batches_stay_on_the_caller(self, encoding):
        """
        Below the default minimum (1,000 items), a batch is counted by its caller alone.
        """
        where: set[str] = set()

        record = recording(where, 0.0005)

        with chunking(16, 1_000):
            batch = [(f"t{i}", 0) for i in range(999)]
            assert one_by_one(encoding, batch) == encode_module.counts(encoding, batch, record)
        assert where == {threading.current_thread().name}

    def test_threads_false_stays_on_the_caller(self, encoding):
        where: set[str] = set()

        record = recording(where, 0.001)

        encode_module.counts(encoding, [(f"t{i}", 0) for i in range(100)], record, threads=False)
        assert where == {threading.current_thread().name}

    def test_what_fails_on_the_helper_is_done_again_by_the_caller(self, encoding):
        """
        A chunk the helper could not count is counted by the caller: the
        counts are whole.
        """

        failed: list[int] = []

        def fails_on_the_helper(item: tuple[str, int]) -> tuple[str, int]:
            time.sleep(0.001)
            if threading.current_thread().name == HELPER:
                failed.append(item[1])
                msg = "helper only"
                raise RuntimeError(msg)
            return item

        batch = [(f"entry {i}", i) for i in range(200)]
        assert one_by_one(encoding, batch) == encode_module.counts(encoding, batch, fails_on_the_helper)
        assert failed  # the helper took chunks, and failed them

    @pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the helper killed on purpose
    def test_a_base_exception_on_the_helper(self, encoding):
        """
        Whatever the helper meets (here a BaseException, as a cancellation
        is), the caller counts the chunk again and returns; a helper that died
        is replaced.
        """

        class Cancelled(BaseException):
            pass

        met: list[int] = []

        def cancelled_on_the_helper(item: tuple[str, int]) -> tuple[str, int]:
            time.sleep(0.001)
            if threading.current_thread().name == HELPER:
                met.append(item[1])
                raise Cancelled
            return item

        batch = [(f"entry {i}", i) for i in range(200)]
        assert one_by_one(encoding, batch) == encode_module.counts(encoding, batch, cancelled_on_the_helper)
        assert met
        time.sleep(0.05)
        assert encode_module._helper is not None  # noqa: SLF001
        assert encode_module._helper.thread.is_alive()  # noqa: SLF001  # it caught what it met
        encode_module._get_helper().jobs.put(None)  # type: ignore[arg-type]  # noqa: SLF001  # kills it
        time.sleep(0.05)
        where: set[str] = set()

        slow = recording(where, 0.002)

        assert one_by_one(encoding, batch) == encode_module.counts(encoding, batch, slow)
        assert HELPER in where  # a new helper

    def test_the_helper_stops_when_the_caller_raises(self, encoding):
        """
        When the caller raises, the helper finishes the chunk it holds and takes no other.
        """
        after: list[str] = []
        raised = threading.Event()

        def interrupted(item: tuple[str, int]) -> tuple[str, int]:
            time.sleep(0.001)
            if raised.is_set():
                after.append(threading.current_thread().name)
            if item[1] >= 40 and threading.current_thread().name != HELPER and not raised.is_set():
                raised.set()
                raise KeyboardInterrupt
            return item

        batch = [(f"entry {i}", i) for i in range(320)]  # chunks of 20
        with pytest.raises(KeyboardInterrupt):
            encode_module.counts(encoding, batch, interrupted)
        time.sleep(0.2)
        assert len(after) <= 20

    def test_the_helper_ends_when_idle(self, encoding):
        """
        The helper thread ends after a while without batches (a process that
        forks then has no thread of ours), and the next batch starts one again.
        """
        before = encode_module._IDLE_SECONDS  # noqa: SLF001
        encode_module._IDLE_SECONDS = 0.05  # noqa: SLF001
        try:
            batch = [(f"entry {i}", i) for i in range(200)]
            encode_module.counts(encoding, batch, as_is)
            deadline = time.monotonic() + 5
            while any(t.name == HELPER for t in threading.enumerate()) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert not any(t.name == HELPER for t in threading.enumerate())
            where: set[str] = set()

            slow = recording(where, 0.002)

            assert one_by_one(encoding, batch) == encode_module.counts(encoding, batch, slow)
            assert HELPER in where
        finally:
            encode_module._IDLE_SECONDS = before  # noqa: SLF001

    def test_nothing_of_a_batch_is_kept(self, encoding):
        """
        Once the counts are back, neither the helper nor a batch still queued holds the items.
        """

        class Item:
            __slots__ = ("__weakref__", "text")

            def __init__(self, text: str) -> None:
                self.text = text

        refs = []
        for _ in range(5):
            batch = [Item(f"item {i}") for i in range(100)]
            refs += [weakref.ref(item) for item in batch]
            encode_module.counts(encoding, batch, lambda item: (item.text, 0))
            del batch
        time.sleep(0.1)
        gc.collect()
        assert [] == [ref for ref in refs if ref() is not None]

    def test_an_error_reaches_the_caller(self, encoding):
        """
        An item that cannot be counted raises in the caller's thread, and the
        helper counts the next batch.
        """

        def refuses(item: tuple[str, int]) -> tuple[str, int]:
            time.sleep(0.001)
            if item[1] == 150:
                msg = "item 150"
                raise ValueError(msg)
            return item

        batch = [(f"entry {i}", i) for i in range(200)]
        with pytest.raises(ValueError, match="item 150"):
            encode_module.counts(encoding, batch, refuses)
        again = [(f"entry {i}", 0) for i in range(200)]
        assert one_by_one(encoding, again) == encode_module.counts(encoding, again, as_is)

    @pytest.mark.usefixtures("fast_switching")
    def test_callers_on_many_threads(self, encoding):
        """
        Eight threads counting their own batches at once each get their own counts.
        """
        batches = [[(f"thread {t} line {i} " * (1 + i % 3), t) for i in range(120)] for t in range(8)]
        expected = [one_by_one(encoding, batch) for batch in batches]
        results: list[list[int] | BaseException | None] = [None] * 8
        barrier = threading.Barrier(8)
        where: set[str] = set()

        recorded = recording(where, 0.0002)

        def run(t: int) -> None:
            barrier.wait()
            try:
                results[t] = encode_module.counts(encoding, batches[t], recorded)
            except BaseException as exc:  # reported by the assertion below
                results[t] = exc

        workers = [threading.Thread(target=run, args=(t,)) for t in range(8)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        assert expected == results
        assert HELPER in where

    def test_a_forked_child_has_its_own_helper(self):
        """
        After ``os.fork`` the child counts on two threads with a helper of its own.
        """
        script = textwrap.dedent(
            """
            import os, threading, time
            from workingctx import TiktokenCounter
            from workingctx.tokens import _encode
            _encode._TWO_CORES, _encode._MIN_ITEMS = True, 32
            encoding = TiktokenCounter().encoding
            batch = [(f"line {i}", 0) for i in range(200)]
            def slow(item):
                where.add(threading.current_thread().name)
                time.sleep(0.002)
                return item
            where = set()
            _encode.counts(encoding, batch, slow)  # the parent's helper exists
            pid = os.fork()
            if pid == 0:
                where = set()
                ok = _encode.counts(encoding, batch, slow) == [len(encoding.encode_ordinary(t)) for t, _ in batch]
                os._exit(0 if ok and "workingctx-tiktoken" in where else 3)
            _, status = os.waitpid(pid, 0)
            print(os.waitstatus_to_exitcode(status))
            """
        )
        done = subprocess.run(
            [sys.executable, "-W", "ignore", "-c", script], capture_output=True, text=True, timeout=120, check=True
        )
        assert done.stdout.strip() == "0", done.stderr


class TestCounter:
    def test_threads_must_be_a_bool(self):
        with pytest.raises(ArgumentTypeError, match="threads must be True or False, got 'yes'"):
            TiktokenCounter(threads="yes")  # type: ignore[arg-type]

    @given(n=st.integers(0, 150), seed=st.integers(0, 3))
    def test_threads_do_not_change_counts(self, n, seed):
        """
        A cold count with the helper equals one on the calling thread, message by message.
        """

        def transcript() -> list[Message]:
            return [Message("user" if i % 2 else "assistant", f"step {i * seed} of {n}: " * (i % 5)) for i in range(n)]

        assert TiktokenCounter(threads=False).count(transcript()) == TiktokenCounter().count(transcript())
        together = transcript()
        TiktokenCounter().count(together)
        single = TiktokenCounter(threads=False)
        assert [single.count_message(m) for m in transcript()] == [single.count_message(m) for m in together]
