"""
Token-counting benchmarks on tool-heavy transcripts (``benchmarks._data.tool_heavy``).

Rows, each against a peer measured in the same run:

* ``estimate_message_tokens``, cold (fresh message objects, nothing cached) and
  warm (every count cached on its message), against LangChain's
  ``count_tokens_approximately`` on the same transcript as LangChain messages
  (it keeps no cache, so its cold and warm times are the same measurement);
* the cold count again in CPU time of the counting thread (wall time on a
  loaded machine counts the time other processes held the core), beside the
  part of it the documented count cannot skip: ``json.dumps`` of every tool
  call's arguments. The peer's time divided by that part bounds the cold
  ratio whatever the rest costs;
* ``TiktokenCounter.count``, cold and warm, against a hand-written loop that
  encodes every message's text and tool calls with the same encoding, uncached;
  the cold count also on the calling thread only (``threads=False``), and
  after the process sat idle for 0.2 s, against the loop after the same pause;
* tiktoken's encoder on two threads against one, with one shared encoding and
  with an encoding per thread (what ``TiktokenCounter`` does), beside a
  control (sha256 of the same texts, which also releases the GIL) showing
  whether the machine's cores scale at all;
* bytes per message of a 100,000-message context once counted, beside the
  bytes of the messages themselves;
* the total after one append at the largest size: a ``RunningCount`` counts the
  new message and adds it to its prefix sums; compared with a cold count of the
  whole transcript (the target is at least 100x), with a re-sum of the cached
  counts, and with LangChain counting the grown transcript again.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import statistics
import time
import tracemalloc
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import attrs

from benchmarks._data import to_langchain, tool_heavy
from benchmarks._harness import Table, measure
from workingctx import Message, TiktokenCounter, WorkingContext
from workingctx.tokens import RunningCount, _encode, estimate_message_tokens, wire_json

GROUP = "tokens"
PEER = "langchain count_tokens_approximately"
HAND = "hand-written tiktoken loop, no cache"


def _hand_tiktoken(encoding: Any, messages: list[Message]) -> int:
    """
    What one writes without a counter: encode each message's text and tool calls, every time.
    """
    total = 0
    for message in messages:
        text = message.text() + (message.name or "") + (message.tool_call_id or "")
        text += "".join(call.id + call.name + json.dumps(call.arguments) for call in message.tool_calls)
        total += len(encoding.encode_ordinary(text)) + 4 + 4 * len(message.tool_calls)
    return total


def _warm_helper(counter: TiktokenCounter, encoding: Any) -> None:
    """
    Count one batch large enough to wake the helper thread, and wait for its
    copy of the encoding: made once per process (about 40 ms, holding the GIL
    part of the time), like loading the encoding, which no row times either.
    On one core no helper runs, and there is nothing to wait for.
    """
    if not _encode._TWO_CORES:  # noqa: SLF001
        return
    counter.count(tool_heavy(_encode._MIN_ITEMS))  # noqa: SLF001  # a smaller batch is counted by the caller alone
    deadline = time.monotonic() + 5
    while _encode._copies.get(encoding) is None:  # noqa: SLF001
        if time.monotonic() > deadline:
            msg = "the helper thread made no copy of the encoding in 5 s: the rows would time it being made"
            raise RuntimeError(msg)
        time.sleep(0.01)


def _after_idle(table: Table, n: int, counter: TiktokenCounter, encoding: Any) -> None:
    """
    The cold count again, each round after the process sat idle for 0.2 s
    (as an agent counts a transcript it has just loaded), against the hand
    loop after the same pause: waking the helper thread costs most then.
    """
    holder: list[list[Message]] = []

    def pause(n: int = n) -> None:
        holder[:] = [tool_heavy(n)]
        time.sleep(0.2)

    ours = measure(lambda: counter.count(holder[0]), repeat=_rounds(n), setup=pause)
    hand = measure(lambda: _hand_tiktoken(encoding, holder[0]), repeat=_rounds(n), setup=pause)
    table.add(
        GROUP,
        "TiktokenCounter.count, cold, after 0.2 s idle",
        n,
        ours,
        baseline=HAND + ", after the same pause",
        baseline_seconds=hand,
        note="one thread below 1,000 messages: waking the helper would cost more than it saves",
    )


def _rounds(n: int) -> int:
    return 3 if n >= 10_000 else 5


def _cpu(fn: Callable[[], Any], *, repeat: int, number: int = 1, setup: Callable[[], Any] | None = None) -> float:
    """
    Median CPU seconds of this thread per call of *fn* over *repeat* rounds of
    *number* calls (*setup* before each round, untimed); for single-threaded
    work on a machine other processes load.
    """
    samples: list[float] = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        gc.collect()
        gc.disable()
        try:
            start = time.thread_time()
            for _ in range(number):
                fn()
            samples.append((time.thread_time() - start) / number)
        finally:
            gc.enable()
    return statistics.median(samples)


def _arguments_json(arguments: list[Any]) -> int:
    """
    The characters of ``json.dumps`` of each tool call's *arguments*, as the approximate count writes them.
    """
    return sum(map(len, map(wire_json, arguments)))


def run(table: Table, quick: bool) -> None:
    from langchain_core.messages.utils import count_tokens_approximately  # noqa: PLC0415  # a peer, bench extra

    sizes = [100, 1_000] if quick else [100, 1_000, 10_000]
    tiktoken_counter = TiktokenCounter()
    single_counter = TiktokenCounter(threads=False)
    encoding = tiktoken_counter.encoding
    cold_by_size: dict[int, float] = {}
    if encoding is not None:
        _warm_helper(tiktoken_counter, encoding)

    for n in sizes:
        warm_messages = tool_heavy(n)
        langchain_messages = to_langchain(warm_messages)
        number = max(1, 1_000 // n)
        holder: list[list[Message]] = []

        def rebuild(n: int = n, holder: list[list[Message]] = holder, number: int = number) -> None:
            holder[:] = [tool_heavy(n) for _ in range(number)]  # new message objects: nothing cached

        def cold(holder: list[list[Message]] = holder) -> int:
            return estimate_message_tokens(holder.pop())

        def cold_tiktoken(holder: list[list[Message]] = holder) -> int:
            return tiktoken_counter.count(holder.pop())

        def cold_one_thread(holder: list[list[Message]] = holder) -> int:
            return single_counter.count(holder.pop())

        def by_hand(messages: list[Message] = warm_messages) -> int:
            return _hand_tiktoken(encoding, messages)

        peer = measure(partial(count_tokens_approximately, langchain_messages), repeat=_rounds(n), number=number)
        cold_s = measure(cold, repeat=_rounds(n), number=number, setup=rebuild)
        cold_by_size[n] = cold_s
        estimate_message_tokens(warm_messages)
        warm_s = measure(partial(estimate_message_tokens, warm_messages), repeat=7, number=number * 10)
        table.add(
            GROUP, "estimate_message_tokens, cold", n, cold_s, baseline=PEER, baseline_seconds=peer, note="target >= 3x"
        )
        _cold_cpu(table, n, number, rebuild, holder, partial(count_tokens_approximately, langchain_messages))
        table.add(
            GROUP,
            "estimate_message_tokens, warm (cached)",
            n,
            warm_s,
            baseline=PEER,
            baseline_seconds=peer,
            note="the peer keeps no cache",
        )

        if encoding is not None:
            hand = measure(by_hand, repeat=_rounds(n), number=number)
            tik_cold = measure(cold_tiktoken, repeat=_rounds(n), number=number, setup=rebuild)
            tik_single = measure(cold_one_thread, repeat=_rounds(n), number=number, setup=rebuild)
            tiktoken_counter.count(warm_messages)
            tik_warm = measure(partial(tiktoken_counter.count, warm_messages), repeat=7, number=number * 10)
            load = os.getloadavg()[0]
            for label, seconds, note in (
                (
                    "cold",
                    tik_cold,
                    f"target >= 1.5x; exact cl100k, two threads, the helper's copy made (load {load:.1f})",
                ),
                ("cold, threads=False", tik_single, "the same on the calling thread only"),
                ("warm (cached)", tik_warm, "exact cl100k"),
            ):
                table.add(
                    GROUP,
                    f"TiktokenCounter.count, {label}",
                    n,
                    seconds,
                    baseline=HAND,
                    baseline_seconds=hand,
                    note=note,
                )
            _after_idle(table, n, tiktoken_counter, encoding)
            if n == max(sizes):
                _threads(table, n, encoding, [m.text() for m in warm_messages])

    _after_one_append(table, max(sizes), cold_by_size[max(sizes)], count_tokens_approximately)
    _memory(table, 10_000 if quick else 100_000)


def _cold_cpu(
    table: Table,
    n: int,
    number: int,
    rebuild: Callable[[], None],
    holder: list[list[Message]],
    peer_count: Callable[[], int],
) -> None:
    """
    The cold count and the peer in CPU time, and the JSON of the tool-call arguments alone.
    """
    peer = _cpu(peer_count, repeat=_rounds(n), number=number)
    cold = _cpu(lambda: estimate_message_tokens(holder.pop()), repeat=_rounds(n), number=number, setup=rebuild)
    fresh: list[list[Any]] = []

    def rebuild_arguments() -> None:  # the arguments of fresh transcripts, collected untimed
        rebuild()
        fresh[:] = [[call.arguments for message in messages for call in message.tool_calls] for messages in holder]

    arguments = _cpu(lambda: _arguments_json(fresh.pop()), repeat=_rounds(n), number=number, setup=rebuild_arguments)
    load = os.getloadavg()[0]
    table.add(
        GROUP,
        "estimate_message_tokens, cold (CPU time)",
        n,
        cold,
        baseline=PEER,
        baseline_seconds=peer,
        note=f"target >= 3x; CPU time of the counting thread, both (load {load:.1f})",
    )
    table.add(
        GROUP,
        "of which json.dumps(arguments) of the tool calls (CPU time)",
        n,
        arguments,
        baseline=PEER,
        baseline_seconds=peer,
        note=f"the documented count writes it: this ratio bounds the cold one ({arguments / cold:.0%} of it)",
    )


BYTES_BEFORE = 200
"""Bytes per message a counted context kept beside its messages before counts became one flat tuple per message."""


def _threads(table: Table, n: int, encoding: Any, texts: list[str]) -> None:
    """
    Whether tiktoken encodes faster on two threads: the texts encoded by one
    thread, against the same texts split between two, sharing one encoding,
    then each with its own (as ``TiktokenCounter`` does).
    """
    copy = _encode._copy(encoding)  # noqa: SLF001  # the copy TiktokenCounter's helper thread makes
    assert copy is not None

    def encode(part: list[str], encoding: Any = encoding) -> int:
        return sum(len(encoding.encode_ordinary(text)) for text in part)

    half = len(texts) // 2
    with ThreadPoolExecutor(1) as pool:

        def two(other_encoding: Any) -> int:
            other = pool.submit(encode, texts[half:], other_encoding)
            return encode(texts[:half]) + other.result()

        one_s = measure(lambda: encode(texts), repeat=5, number=1)
        shared_s = measure(partial(two, encoding), repeat=5, number=1)
        own_s = measure(partial(two, copy), repeat=5, number=1)
    for label, seconds in (("one shared encoding", shared_s), ("an encoding each", own_s)):
        table.add(
            GROUP,
            f"tiktoken encode_ordinary on two threads, {label}",
            n,
            seconds,
            baseline="the same texts on one thread",
            baseline_seconds=one_s,
            note=f"the texts of the transcript; load {os.getloadavg()[0]:.1f}",
        )
    _cores(table, n, texts)


def _cores(table: Table, n: int, texts: list[str]) -> None:
    """
    The control for the row above: whether two threads run twice as fast on
    this machine at all. sha256 also releases the GIL; the same texts, joined
    in two halves and hashed 20 times each, on one thread and on two.
    """
    half = len(texts) // 2
    parts = ["".join(texts[:half]).encode(), "".join(texts[half:]).encode()]

    def digest(part: bytes) -> None:
        for _ in range(20):
            hashlib.sha256(part).digest()

    with ThreadPoolExecutor(1) as pool:

        def two() -> None:
            other = pool.submit(digest, parts[1])
            digest(parts[0])
            other.result()

        def one() -> None:
            for part in parts:
                digest(part)

        one_s = measure(one, repeat=5, number=1)
        two_s = measure(two, repeat=5, number=1)
    table.add(
        GROUP,
        "control: sha256 of the same texts on two threads",
        n,
        two_s,
        baseline="the same on one thread",
        baseline_seconds=one_s,
        note=f"what two threads can gain on this machine now (load {os.getloadavg()[0]:.1f})",
    )


def _memory(table: Table, n: int) -> None:
    """
    Bytes per message of an n-message context: its own structures once counted
    (the running sums and the count cached on each message), and the messages.
    """
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        messages = tool_heavy(n)
        built = tracemalloc.get_traced_memory()[0]
        ctx = WorkingContext(messages=messages)
        ctx.count_tokens()
        gc.collect()
        counted = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    own = (counted - built) / n
    table.add(
        GROUP,
        "bytes per message: a counted context beside its messages",
        n,
        None,
        note=(
            f"{own:.0f} B per message (running sums and cached counts; {BYTES_BEFORE} B before); "
            f"the messages themselves {(built - start) / n:.0f} B each"
        ),
    )


def _after_one_append(table: Table, n: int, cold_s: float, peer_count: Callable[[Any], int]) -> None:
    """
    The total after one append to an n-message transcript whose counts are cached.
    """
    messages = tool_heavy(n + 1)
    base, extra = messages[:n], messages[n]
    running = RunningCount()
    running.extend(base)
    appends = 200
    pending: list[Message] = []

    def prepare() -> None:
        running.truncate(n)
        # a fresh copy per call: each append counts a message never counted before
        pending[:] = [attrs.evolve(extra) for _ in range(appends)]

    def append_one() -> int:
        return running.extend((pending.pop(),))

    recount = measure(append_one, repeat=7, number=appends, setup=prepare)
    table.add(
        GROUP,
        "re-count after one append (RunningCount)",
        n,
        recount,
        baseline="estimate_message_tokens, cold",
        baseline_seconds=cold_s,
        note="target: >= 100x",
    )

    grown = [*base, extra]
    estimate_message_tokens(grown)
    resum = measure(lambda: estimate_message_tokens(grown), repeat=7, number=5)
    table.add(
        GROUP,
        "re-sum of cached counts after one append",
        n,
        resum,
        baseline="estimate_message_tokens, cold",
        baseline_seconds=cold_s,
        note="no prefix sums",
    )

    langchain_grown = to_langchain(grown)
    peer = measure(lambda: peer_count(langchain_grown), repeat=_rounds(n))
    table.add(
        GROUP,
        "re-count after one append (RunningCount)",
        n,
        recount,
        baseline=PEER,
        baseline_seconds=peer,
        note="the peer counts the whole transcript again",
    )
