"""
Token counts of many items (messages), encoded on two threads.

tiktoken releases the GIL while it encodes, but two threads encoding with the
same ``Encoding`` run slower than one: its Rust core shares state between
threads (measured with tiktoken 0.14 on two cores: each thread's CPU time
tripled). Two threads that each hold their own copy of the encoding run
1.75-1.85x as fast as one. So a batch is cut in chunks that the calling thread
and one helper thread take in turn, the helper with its own copy; each thread
makes the texts of the chunks it takes, so one makes texts while the other
encodes.

A chunk is encoded in one call: its texts joined by a special token (such as
``<|endoftext|>``) that is allowed as such. tiktoken finds the special tokens
first, then encodes the text between two of them on its own, exactly as
``encode_ordinary`` encodes that text alone; so the count of each text is the
number of tokens between two separators. That holds when tiktoken finds each
separator where it was put and nowhere else. So a special token is a separator
only when it cannot overlap itself, no other special token can match where it
starts (none is a prefix of it or begins with it), and its id is no ordinary
token's; and a chunk in which a text holds the separator, or whose tokens hold
another number of separators than were put, is encoded text by text. One call
per chunk instead of one per text: 10-18% less time, and the two threads hand
the GIL to each other once per chunk. Only a ``tiktoken.Encoding`` itself is
joined and copied (a subclass may encode otherwise); anything else with
``encode_ordinary`` is called once per text, by the caller.

The helper never makes the caller wait for it: it builds its copy (about
40 ms and 21 MB for cl100k_base, kept while the encoding lives) on its first
batch, while the caller encodes; a chunk the helper has not taken when the
caller runs out is the caller's, and the caller only waits for a chunk the
helper is encoding. A chunk the helper could not count (whatever it raised) is
counted again by the caller, so an error is raised in the caller's thread, as
the error of one of the items; when several fail, the one named may differ
from a count on one thread. When the caller raises, the helper takes no more
chunks of that batch. The helper thread ends after a second without a
batch, so a process that forks later has no thread of workingctx's (Python
3.12 warns when a process with threads forks), and starts again with the next
batch; a helper that died is replaced too. The copies are kept, except in the
child of ``os.fork``, which makes its own.
"""

from __future__ import annotations

import os
import queue
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

__all__ = ["counts", "two_threads"]

T = TypeVar("T")

Prepare = Callable[[T], tuple[str, int]]
"""The text of an item to encode, and the tokens counted beside it."""

_CHUNKS = 64
"""
A batch is cut in this many chunks: enough that the two threads end together,
and few enough that taking one costs nothing next to encoding it (counting
1,000 or 10,000 tool-heavy messages, 64 chunks ran 1.94x and 1.68x as fast as
one thread, 16 chunks 1.84x and 1.57x, 256 chunks 1.68x and 1.35x).
"""

_MIN_ITEMS = 1_000
"""
Fewer items than this are encoded by the caller alone. Waking the helper has
a cost that only a large batch pays back: measured on two virtual cores, a
batch counted after the machine sat idle for 50-500 ms ran 0.72-0.85x as fast
as one thread at 100 tool-heavy messages, 0.93-0.99x at 600 and 1.10-1.12x at
1,000 (1.5x and more at 10,000); counted back to back, 1.6-1.9x from 100 on.
"""

HELPER_NAME = "workingctx-tiktoken"


def two_threads() -> bool:
    """
    Whether this process may run on two cores or more.
    """
    try:
        return len(os.sched_getaffinity(0)) > 1
    except AttributeError:  # not on Linux
        return (os.cpu_count() or 1) > 1


def _plain_tiktoken(encoding: Any) -> bool:
    """
    Whether *encoding* is a ``tiktoken.Encoding`` itself, not a subclass.
    """
    kind = type(encoding)
    return kind.__name__ == "Encoding" and kind.__module__ == "tiktoken.core"


def _copy(encoding: Any) -> Any:
    """
    A new encoding with the same ranks as *encoding*, sharing no state with
    it; None when *encoding* is not a ``tiktoken.Encoding`` that says how it was made.
    """
    if not _plain_tiktoken(encoding):
        return None
    try:
        return type(encoding)(
            name=encoding.name,
            pat_str=encoding._pat_str,  # noqa: SLF001  # what tiktoken pickles an Encoding by
            mergeable_ranks=encoding._mergeable_ranks,  # noqa: SLF001
            special_tokens=encoding._special_tokens,  # noqa: SLF001
        )
    except Exception:  # noqa: BLE001  # an encoding that says less: the caller encodes alone
        return None


class _Separator(NamedTuple):
    """
    The special token that joins the texts of a chunk.
    """

    text: str
    token: int
    allowed: set[str]


_PREFERRED = "<|endoftext|>"


def _overlaps_itself(text: str) -> bool:
    return any(text[:size] == text[-size:] for size in range(1, len(text)))


def _separator(encoding: Any) -> _Separator | None:
    """
    The separator of *encoding*'s chunks, or None (texts are encoded one by one).
    """
    if not _plain_tiktoken(encoding):
        return None
    try:
        specials = sorted(encoding.special_tokens_set, key=lambda text: (text != _PREFERRED, text))
        ordinary = set(encoding._mergeable_ranks.values())  # noqa: SLF001  # the ids of ordinary tokens
        for text in specials:
            if not text or _overlaps_itself(text):
                continue
            if any(other != text and (other.startswith(text) or text.startswith(other)) for other in specials):
                continue  # another special token could match where it starts, and hide it
            token = encoding.encode_single_token(text)
            if token in ordinary:
                continue
            if encoding.encode(text, allowed_special={text}, disallowed_special=()) == [token]:
                return _Separator(text, token, {text})
    except Exception:  # noqa: BLE001  # an encoding that says less: one call per text
        return None
    return None


_separators: weakref.WeakKeyDictionary[Any, _Separator | None] = weakref.WeakKeyDictionary()


def _remembered(found: weakref.WeakKeyDictionary[Any, Any], encoding: Any, make: Callable[[Any], Any]) -> Any:
    """
    ``make(encoding)``, made once while *encoding* lives and kept in *found*
    (made each time for an encoding that cannot be weakly referred to).
    """
    try:
        return found[encoding]
    except KeyError:
        made = found[encoding] = make(encoding)
        return made
    except TypeError:  # not weakly referable
        return make(encoding)


def _separator_of(encoding: Any) -> _Separator | None:
    return _remembered(_separators, encoding, _separator)  # type: ignore[no-any-return]  # what _separator gives


def _joined(encoding: Any, separator: _Separator, texts: list[str], extras: list[int]) -> list[int] | None:
    """
    The counts of *texts* encoded in one call, or None when a text holds the
    separator or tiktoken did not find each separator where it was put.
    """
    joined = separator.text.join(texts)
    joins = len(texts) - 1
    if joined.count(separator.text) != joins:  # a text holds the separator
        return None
    tokens = encoding.encode(joined, allowed_special=separator.allowed, disallowed_special=())
    token = separator.token
    if tokens.count(token) != joins:
        return None
    find = tokens.index
    out: list[int] = []
    start = 0
    for extra in extras[:-1]:
        end = find(token, start)
        out.append(end - start + extra)
        start = end + 1
    out.append(len(tokens) - start + extras[-1])
    return out


def _count(encoding: Any, separator: _Separator | None, prepare: Prepare[T], chunk: Sequence[T]) -> list[int]:
    """
    The count of each item of *chunk*.
    """
    texts: list[str] = []
    extras: list[int] = []
    for item in chunk:
        text, extra = prepare(item)
        texts.append(text)
        extras.append(extra)
    if separator is not None and len(texts) > 1:
        found = _joined(encoding, separator, texts, extras)
        if found is not None:
            return found
    encode = encoding.encode_ordinary
    return [len(encode(text)) + extra for text, extra in zip(texts, extras, strict=True)]


class _Batch(Generic[T]):
    """
    One batch: its chunks, who took which, and their counts.
    """

    __slots__ = (
        "chunks",
        "done",
        "encoding",
        "failed",
        "helper_index",
        "lock",
        "next",
        "prepare",
        "results",
        "separator",
    )

    def __init__(
        self, encoding: Any, separator: _Separator | None, prepare: Prepare[T], chunks: list[Sequence[T]]
    ) -> None:
        self.encoding = encoding
        self.separator = separator
        self.prepare = prepare
        self.chunks = chunks
        self.results: list[list[int] | None] = [None] * len(chunks)
        self.failed: list[int] = []
        self.next = 0
        self.helper_index = -1  # the chunk the helper is counting, -1 for none
        self.lock = threading.Lock()
        self.done = threading.Condition(self.lock)

    def take(self, *, helper: bool) -> tuple[int, Sequence[T]] | None:
        """
        The next chunk not taken yet, and its index; None when there is none.
        """
        with self.lock:
            if self.next >= len(self.chunks):
                return None
            index = self.next
            self.next += 1
            if helper:
                self.helper_index = index
            return index, self.chunks[index]

    def close(self) -> None:
        """
        Leave the chunks not taken yet untaken, and let go of the items: the
        caller has its counts, or gave up. A batch still queued for the
        helper then holds nothing of them.
        """
        with self.lock:
            self.chunks = []

    def helper_finished(self, index: int, result: list[int] | None) -> None:
        with self.lock:
            if result is None:
                self.failed.append(index)
            else:
                self.results[index] = result
            self.helper_index = -1
            self.done.notify_all()

    def wait_for_helper(self, timeout: float) -> tuple[list[int], int]:
        """
        Wait at most *timeout* seconds for the helper to finish the chunk it
        holds; the chunks it could not count, and the index of the chunk it
        still holds (-1 for none), which the caller then counts itself.
        """
        with self.lock:
            self.done.wait_for(lambda: self.helper_index < 0, timeout)
            return list(self.failed), self.helper_index


_IDLE_SECONDS = 1.0
"""The helper thread ends after this long without a batch, and starts again with the next."""

_copies: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
"""The helper's copy of each encoding, by encoding; only a helper thread reads and writes it."""


class _Helper:
    """
    The helper thread and its queue of batches.
    """

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[_Batch[Any]] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name=HELPER_NAME, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                batch = self.jobs.get(timeout=_IDLE_SECONDS)
            except queue.Empty:
                return  # a batch queued from now on is counted by its caller; the next starts a helper
            self._help(batch)
            del batch  # holds nothing of a batch between batches

    def _help(self, batch: _Batch[Any]) -> None:
        copy = _remembered(_copies, batch.encoding, _copy)
        if copy is None:
            return
        while (taken := batch.take(helper=True)) is not None:
            index, chunk = taken
            result: list[int] | None = None
            try:
                result = _count(copy, batch.separator, batch.prepare, chunk)
            except BaseException:  # noqa: BLE001, S110  # the caller counts this chunk again, and raises
                pass
            finally:
                batch.helper_finished(index, result)


_helper: _Helper | None = None
_helper_lock = threading.Lock()


def _reset_after_fork() -> None:
    global _helper, _helper_lock, _copies  # noqa: PLW0603  # the child's own helper and copies, made when needed
    _helper = None
    _helper_lock = threading.Lock()
    _copies = weakref.WeakKeyDictionary()  # a copy the parent's helper was using may hold a lock


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _get_helper() -> _Helper:
    global _helper  # noqa: PLW0603  # one helper per process, made on first use
    with _helper_lock:
        if _helper is None or not _helper.thread.is_alive():
            _helper = _Helper()
        return _helper


def counts(encoding: Any, items: Sequence[T], prepare: Prepare[T], *, threads: bool = True) -> list[int]:
    """
    The count of each of *items*: the tokens of its text by
    ``encoding.encode_ordinary``, plus the tokens *prepare* counts beside it;
    on two threads when *threads* is true, there are enough items and two cores.
    """
    separator = _separator_of(encoding)
    size = -(-len(items) // _CHUNKS) or 1
    chunks = [items[start : start + size] for start in range(0, len(items), size)]
    if not threads or len(items) < _MIN_ITEMS or not _TWO_CORES:
        out: list[int] = []
        for chunk in chunks:
            out += _count(encoding, separator, prepare, chunk)
        return out
    batch = _Batch(encoding, separator, prepare, chunks)
    _get_helper().jobs.put(batch)
    try:
        started, done = time.perf_counter(), 0
        while (taken := batch.take(helper=False)) is not None:
            index, chunk = taken
            batch.results[index] = _count(encoding, separator, prepare, chunk)
            done += 1
        # Wait for the helper's last chunk as long as a chunk takes here, no
        # longer: a helper that is slow to run (a thread woken on a busy core,
        # a virtual CPU the host paused) never makes the count slower than one
        # thread by more than that.
        spent = (time.perf_counter() - started) / max(done, 1)
        failed, held = batch.wait_for_helper(spent)
        for index in (*failed, held) if held >= 0 else failed:  # raises what the helper met, from this thread
            batch.results[index] = _count(encoding, separator, prepare, chunks[index])
    finally:
        batch.close()
    out = []
    for result in batch.results:
        out += result  # type: ignore[arg-type]  # every chunk has its counts now
    return out


_TWO_CORES = two_threads()
