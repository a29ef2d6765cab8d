"""
``RedisStore``'s load: one round trip, two for a chain long enough to have
segments (``ms:`` and ``es:`` keys, read whole in one ``MGET``, their bodies
compressed), with chains saved without segments read link by link. Keys and
values that are not UTF-8 text, and a foreign key among many, are named or refused.
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.persistence.runs import recorded, run, turns
from tests.stores import Raw, Stores, server_address
from workingctx import Checkpoint, Message, ToolCall, WorkingContext
from workingctx.checkpoint import rehydrate
from workingctx.exceptions import CheckpointError
from workingctx.persistence import RedisStore
from workingctx.persistence._codec import PACKED, checksum, step
from workingctx.persistence.redis import _SEGMENT, _inflated

pytestmark = pytest.mark.server

redis = pytest.importorskip("redis")  # the redis extra

TURNS = 70
"""Turns of the run: 280 messages (four segments and 24 links) and 70 journal entries (one segment and 6 links)."""


@pytest.fixture
def made(scratch_dir: Path) -> Iterator[Stores]:
    stores = Stores("redis", scratch_dir)
    yield stores
    stores.close()


def keys(store: Any, space: str) -> list[str]:
    with Raw("redis", store)._redis() as client:  # noqa: SLF001  # the test's own connection
        return sorted(client.scan_iter(match=f"{store.namespace}:{space}*", count=1000))


def inflated(value: bytes) -> tuple[str, str]:
    """
    A stored segment's header line and its body, inflated.
    """
    header, _, body = value.partition(b"\n")
    assert body[:1] == PACKED
    return header.decode(), zlib.decompress(body[1:]).decode()


def deflated(header: str, body: str) -> bytes:
    return f"{header}\n".encode() + PACKED + zlib.compress(body.encode())


def uncompressed(value: bytes) -> bytes:
    """
    A segment as a store saved it before segment bodies were compressed: its
    header line, then the values of its links, one a line, head first, then
    for each ``\\0``, its item's checksum, ``\\0`` and its item's text.
    """
    header, body = inflated(value)
    parts = body.split("\0")
    digests, texts = parts[0].split("\n"), parts[2::2]
    previous, low, _ = header.split(" ")
    lines = []
    for position, digest in enumerate(reversed(digests), int(low)):
        lines.append(f"{previous} {digest} {position}")
        previous = step(previous, digest)
    items = "".join(f"\0{checksum(digest, text)}\0{text}" for digest, text in zip(digests, texts, strict=True))
    return "\n".join([header, *lines[::-1]]).encode() + items.encode()


def rewrite_segments(store: Any, space: str, change: Callable[[bytes], bytes], *, first_only: bool = False) -> None:
    """
    Replace the value of *store*'s segments under *space* with what *change* makes of it.
    """
    found = keys(store, space)
    with redis.Redis.from_url(server_address("redis")) as client:
        for key in found[:1] if first_only else found:
            client.set(key, change(client.get(key)))


def commands(store: Any) -> list[tuple[Any, ...]]:
    """
    Record every command *store* sends to the server from now on.
    """
    sent: list[tuple[Any, ...]] = []
    client = store._client  # noqa: SLF001  # counting what the store sends
    send = client.execute_command

    def counted(*args: Any, **options: Any) -> Any:
        sent.append(args)
        return send(*args, **options)

    client.execute_command = counted
    return sent


class TestSegments:
    def test_a_long_run_is_loaded_in_two_round_trips(self, made):
        """
        Every 64th link of a chain also writes a segment; a fresh store loads
        the last checkpoint, and every earlier one, equal to what was saved:
        the script, then one MGET of the segments it names.
        """
        store = made.new()
        saved = run(store, TURNS, thread="t")
        messages = len(saved[-1].snapshot.messages)
        assert messages // _SEGMENT == len(keys(store, "ms:"))
        assert TURNS // _SEGMENT == len(keys(store, "es:"))
        made.again(store).load(saved[0].id)  # the server holds the script (a restarted one sends it again, once)
        fresh = made.again(store)
        sent = commands(fresh)
        assert saved[-1] == fresh.load(saved[-1].id)
        assert ["EVALSHA", "MGET"] == [command[0] for command in sent]
        for checkpoint in saved[::7]:
            assert checkpoint == made.again(store).load(checkpoint.id)

    @pytest.mark.parametrize("count", [0, 1, _SEGMENT - 1, _SEGMENT, _SEGMENT + 1, 2 * _SEGMENT])
    def test_chains_on_either_side_of_a_segment_load(self, made, count):
        """
        A transcript of no link, one, one less than a segment, a segment, one
        link more and two segments loads equal from a fresh store, in one
        round trip when it has no segment.
        """
        store = made.new()
        checkpoint = Checkpoint.capture(WorkingContext().extend(Message("user", f"m{n}") for n in range(count)))
        store.save(checkpoint)
        assert count // _SEGMENT == len(keys(store, "ms:"))
        made.again(store).load(checkpoint.id)  # the server holds the script (a restarted one sends it again, once)
        fresh = made.again(store)
        sent = commands(fresh)
        assert checkpoint == fresh.load(checkpoint.id)
        assert ["EVALSHA"] + (["MGET"] if count >= _SEGMENT else []) == [command[0] for command in sent]

    def test_a_run_saved_without_segments_loads_and_goes_on(self, made):
        """
        A store written before segments existed (the same keys, no ``ms:`` nor
        ``es:``) loads link by link; saving on from it writes the segments its
        new links end, and both old and new checkpoints load.
        """
        store = made.new()
        saved = run(store, TURNS, thread="t")
        with Raw("redis", store)._redis() as client:  # noqa: SLF001
            client.delete(*keys(store, "ms:"), *keys(store, "es:"))
        assert saved[-1] == made.again(store).load(saved[-1].id)
        ctx = turns(rehydrate(saved[-1]), TURNS, 40)
        later = Checkpoint.capture(ctx, parent=saved[-1])
        store.save(later, thread="t")
        ends = range(len(saved[-1].snapshot.messages), len(later.snapshot.messages))
        assert sum(1 for end in ends if end % _SEGMENT == _SEGMENT - 1) == len(keys(store, "ms:"))
        fresh = made.again(store)
        assert later == fresh.load(later.id)
        assert saved[-1] == fresh.load(saved[-1].id)

    @pytest.mark.parametrize(
        "how", ["item", "digest", "header", "positions", "garbage", "truncated", "stream", "uncompressed garbage"]
    )
    def test_a_damaged_segment_is_read_past(self, made, how):
        """
        A segment whose item, link or header is damaged, whose compressed
        body is cut short or does not inflate, or that is not a segment at
        all: the load reads the links and items themselves and gives what
        was saved (the script itself walks past one whose header does not
        name the positions it should hold, or that has no header).
        """
        store = made.new()
        saved = run(store, TURNS, thread="t")

        def damaged(value: bytes) -> bytes:
            header, body = inflated(value)
            lines = body.split("\0")[0].split("\n")
            if how == "item":
                return deflated(header, body.replace("\0", "\0x"))
            if how == "digest":
                return deflated(header, body.replace(lines[3], "0" * 64, 1))
            if how == "header":
                return deflated("0" * 64 + header[64:], body)
            if how == "positions":
                previous, low, high = header.split(" ")
                return deflated(f"{previous} {int(low) + 1} {high}", body)
            if how == "truncated":
                return value[: len(value) // 2]
            if how == "stream":
                cut = len(header) + 1 + len(PACKED) + 2  # past zlib's own header
                return value[:cut] + bytes(b ^ 0xFF for b in value[cut : cut + 64]) + value[cut + 64 :]
            if how == "uncompressed garbage":
                return f"{header}\nnot links\0nor items".encode()
            return b"not a segment"

        rewrite_segments(store, "ms:", damaged, first_only=True)
        fresh = made.again(store)
        sent = commands(fresh)
        assert saved[-1] == fresh.load(saved[-1].id)
        again = [] if how in ("positions", "garbage") else ["EVALSHA"]  # then link by link
        assert ["EVALSHA", "MGET", *again] == [command[0] for command in sent]

    def test_a_segment_body_is_compressed(self, made):
        """
        A segment is its header line in plain text (the load script reads
        it alone), then its body compressed: its links' item digests, head
        first, and their items, with a checksum only for a text with a
        layout; far fewer bytes than its links and items, and no message's
        text in the clear.
        """
        store = made.new()
        saved = run(store, TURNS, thread="t")
        messages = saved[-1].snapshot.messages
        with redis.Redis.from_url(server_address("redis")) as client:
            values = {key: client.get(key) for key in keys(store, "ms:")}
        assert len(values) == len(messages) // _SEGMENT
        for key, value in values.items():
            header, body = inflated(value)
            previous, low, high = header.split(" ")
            assert (int(high) - int(low) + 1, int(high) % _SEGMENT) == (_SEGMENT, _SEGMENT - 1)
            parts = body.split("\0")
            digests, checks, texts = parts[0].split("\n"), parts[1::2], parts[2::2]
            assert digests == [message.digest() for message in messages[int(low) : int(high) + 1]][::-1]
            laid = [checksum(d, t) if "\n" in t else "" for d, t in zip(digests, texts, strict=True)]
            assert checks == laid
            chain = previous
            for digest in reversed(digests):
                chain = step(chain, digest)
            assert key.endswith(f":ms:{chain}")
            assert len(value) * 2 < len(uncompressed(value))
            assert all(text.encode() not in value for text in texts)
            assert _inflated(value) == (header + "\n" + body).encode()

    def test_segments_saved_uncompressed_still_read(self, made):
        """
        A store whose segments were saved before their bodies were compressed
        (the same keys, each body as it is after the header) loads a segment
        at a time, as before, and saving on from it compresses the new ones.
        """
        store = made.new()
        saved = run(store, TURNS, thread="t")
        rewrite_segments(store, "ms:", uncompressed)
        rewrite_segments(store, "es:", uncompressed)
        fresh = made.again(store)
        sent = commands(fresh)
        assert saved[-1] == fresh.load(saved[-1].id)
        assert ["EVALSHA", "MGET"] == [command[0] for command in sent]  # no second, link by link read
        later = Checkpoint.capture(turns(rehydrate(saved[-1]), TURNS, 20), parent=saved[-1])
        store.save(later, thread="t")
        with redis.Redis.from_url(server_address("redis")) as client:
            bodies = [client.get(key).partition(b"\n")[2][:1] for key in keys(store, "ms:")]
        assert bodies.count(PACKED) == len(bodies) - len(saved[-1].snapshot.messages) // _SEGMENT > 0
        assert later == made.again(store).load(later.id)
        assert saved[-1] == made.again(store).load(saved[-1].id)

    def test_a_damaged_segment_and_link_is_a_checkpoint_error(self, made):
        """
        When the link under a damaged segment is damaged too, the load raises
        CheckpointError naming the checkpoint and the link.
        """
        store = made.new()
        saved = run(store, TURNS, thread="t")
        key = keys(store, "ms:")[0]
        chain = key.rsplit(":", 1)[1]
        with Raw("redis", store)._redis() as client:  # noqa: SLF001
            client.set(key, "not a segment")
        Raw("redis", store).repoint_link(chain, saved[0].snapshot.messages[0].digest())
        with pytest.raises(CheckpointError, match=f"cannot load checkpoint '{saved[-1].id}'.*ml:"):
            made.again(store).load(saved[-1].id)

    def test_segments_no_checkpoint_uses_are_collected(self, made):
        """
        Deleting the only checkpoint of a long transcript removes its
        segments with its links; another checkpoint's stay, and it loads.
        """
        store = made.new()
        other = run(store, 20)[-1]
        kept = keys(store, "ms:")
        long = Checkpoint.capture(WorkingContext().extend(Message("user", f"m{n}") for n in range(3 * _SEGMENT)))
        store.save(long)
        assert len(kept) + 3 == len(keys(store, "ms:"))
        store.delete(long.id)
        assert kept == keys(store, "ms:")
        assert other == made.again(store).load(other.id)


@settings(max_examples=12, deadline=None)
@given(
    turns=st.lists(
        st.tuples(st.text(max_size=300), st.none() | st.dictionaries(st.text(max_size=8), st.integers(), max_size=4)),
        min_size=_SEGMENT // 2 - 1,
        max_size=_SEGMENT + 2,
    ),
    repeat=st.integers(min_value=1, max_value=_SEGMENT),
)
def test_a_transcript_round_trips_through_compressed_segments(scratch_dir, turns, repeat):
    """
    Any texts, tool calls whose arguments are in any key order (saved with
    a layout), and a message repeated every *repeat* turns, across one or two
    segments, load from a fresh store equal to what was saved, through the
    segments alone.
    """
    messages: list[Message] = []
    for n, (text, arguments) in enumerate(turns):
        messages.append(Message("user", turns[0][0] if n % repeat == 0 else text))
        if arguments is not None:
            call = ToolCall(id=f"call_{n}", name="f", arguments=arguments)
            messages += [Message("assistant", text, tool_calls=[call]), Message("tool", text, tool_call_id=call.id)]
    made = Stores("redis", scratch_dir)
    try:
        store = made.new()
        checkpoint = Checkpoint.capture(WorkingContext().extend(messages))
        store.save(checkpoint)
        assert len(messages) // _SEGMENT == len(keys(store, "ms:"))
        fresh = made.again(store)
        sent = commands(fresh)
        assert checkpoint == fresh.load(checkpoint.id)
        assert len(sent) == 1 + (len(messages) >= _SEGMENT)
    finally:
        made.close()


@pytest.mark.server
class TestRedisBytes:
    """
    Keys and values that are not UTF-8 text in a Redis store's namespace.
    """

    @pytest.fixture
    def saved(self, scratch_dir: Path) -> Iterator[tuple[Any, list[Checkpoint], Raw, Stores]]:
        made = Stores("redis", scratch_dir)
        store = made.new()
        saved = run(store, 3, thread="t")
        store.save_context(recorded("a", "hello"))
        yield store, saved, Raw("redis", store), made
        made.close()

    def test_an_id_that_is_not_utf8_is_named_and_the_rest_listed(self, saved):
        """
        A checkpoint listed under an id that is not UTF-8 text: list() returns
        the others and names it (its invalid bytes escaped); delete() of
        another checkpoint still works.
        """
        store, checkpoints, raw, _ = saved
        raw.redis_bytes("ZADD", b"order", 0, b"\xff\xfe")
        raw.redis_bytes("SET", b"cp:\xff\xfe", b"x")
        listing = store.list()
        assert [c.id for c in checkpoints] == [info.id for info in listing]
        assert ["\\xff\\xfe"] == list(listing.damaged)
        store.delete(checkpoints[0].id)
        assert checkpoints[2] == store.load(checkpoints[2].id)

    def test_a_row_that_is_not_utf8_is_a_checkpoint_error(self, saved):
        """
        A checkpoint row that is not UTF-8 text: load() raises CheckpointError
        naming the id; list() names it and returns the others; lineage()
        stops there; nothing changes; delete() removes it.
        """
        store, checkpoints, raw, _ = saved
        raw.redis_bytes("SET", b"cp:" + checkpoints[1].id.encode(), b"\xff\xfe[")
        before = raw.state()
        with pytest.raises(CheckpointError, match=f"cannot load checkpoint '{checkpoints[1].id}'.*not UTF-8"):
            store.load(checkpoints[1].id)
        listing = store.list()
        assert [checkpoints[0].id, checkpoints[2].id] == [info.id for info in listing]
        assert [checkpoints[1].id] == list(listing.damaged)
        assert [checkpoints[1].id] == list(store.lineage(checkpoints[2].id).damaged)
        assert before == raw.state()
        store.delete(checkpoints[1].id)
        assert {} == store.list().damaged

    @pytest.mark.parametrize("space", [b"m:", b"ml:"])
    def test_an_item_or_link_that_is_not_utf8_fails_only_its_load(self, saved, space):
        """
        A message or a link that is not UTF-8 text: load() of a checkpoint
        that uses it raises CheckpointError naming that checkpoint; list()
        is untouched (it reads rows only); nothing changes.
        """
        store, checkpoints, raw, made = saved
        snapshot = checkpoints[2].snapshot
        key = snapshot.messages[-4].digest() if space == b"m:" else snapshot.chain_digest()  # only its own
        raw.redis_bytes("SET", space + key.encode(), b"\xff\xfe")
        before = raw.state()
        what = "not UTF-8" if space == b"m:" else "expected 12 links, found 0"
        with pytest.raises(CheckpointError, match=f"cannot load checkpoint '{checkpoints[2].id}'.*{what}"):
            made.again(store).load(checkpoints[2].id)
        assert checkpoints[0] == made.again(store).load(checkpoints[0].id)
        assert [c.id for c in checkpoints] == [info.id for info in store.list()]
        assert before == raw.state()

    def test_a_context_id_or_row_that_is_not_utf8_is_named(self, saved):
        """
        A saved context listed under an id that is not UTF-8 text, or whose
        row is not: list_contexts() names both and returns the others.
        """
        store, _, raw, _ = saved
        store.save_context(recorded("b", "hi"))
        raw.redis_bytes("SADD", b"contexts", b"\xff")
        raw.redis_bytes("SET", b"ctx:\xff", b"[]")
        raw.redis_bytes("SET", b"ctx:b", b"\xff\xfe")
        listing = store.list_contexts()
        assert ["a"] == [info.id for info in listing]
        assert {"\\xff", "b"} == set(listing.damaged)
        with pytest.raises(CheckpointError, match="'b'"):
            store.load_context("b")

    @pytest.mark.parametrize("space", [b"m:", b"ml:", b"b:", b"h:", b"x"])
    def test_a_stray_key_that_is_not_utf8_is_collected_or_ignored(self, saved, space):
        """
        A key that is not UTF-8 text beside the store's own: load, list and
        delete work; delete collects it when it is under a space the store
        collects (no checkpoint can use it).
        """
        store, checkpoints, raw, _ = saved
        raw.redis_bytes("SET", space + b"\xff\xfe", b"\xff")
        assert checkpoints[2] == store.load(checkpoints[2].id)
        assert [c.id for c in checkpoints] == [info.id for info in store.list()]
        store.delete(checkpoints[0].id)
        stray = store.namespace.encode() + b":" + space + b"\xff\xfe"
        assert (space == b"x") == (stray in raw.state())

    def test_a_head_or_marker_that_is_not_utf8_is_a_checkpoint_error(self, saved):
        """
        A thread head that is not UTF-8 text makes head() raise CheckpointError
        naming the thread; a schema version that is not makes every operation
        raise CheckpointError naming the marker; nothing changes.
        """
        store, checkpoints, raw, made = saved
        raw.redis_bytes("SET", b"head:t", b"\xff")
        with pytest.raises(CheckpointError, match=r"thread 't'.*not UTF-8"):
            store.head("t")
        raw.redis_bytes("HSET", b"store", b"schema_version", b"\xff")
        before = raw.state()
        for operation in (lambda: store.load(checkpoints[0].id), store.list, lambda: store.delete(checkpoints[0].id)):
            with pytest.raises(CheckpointError, match="damaged schema version"):
                operation()
        with pytest.raises(CheckpointError, match="damaged schema version"):
            made.again(store)
        assert before == raw.state()


@pytest.mark.server
def test_redis_foreign_key_found_among_many(scratch_dir):
    """
    A namespace holding a foreign key is refused even when the database holds
    so many other keys that one SCAN call does not reach it.
    """
    made = Stores("redis", scratch_dir)
    try:
        client = Raw("redis", made.new())._redis()  # noqa: SLF001  # the test's own connection
        crowd = f"crowd_{uuid.uuid4().hex[:12]}"
        name = f"f_{uuid.uuid4().hex[:12]}"
        with client.pipeline(transaction=False) as pipe:
            for i in range(20_000):
                pipe.set(f"{crowd}:{i}", "x")
            pipe.set(f"{name}:users", "ada")
            pipe.execute()
        try:
            with pytest.raises(CheckpointError, match=f"such as '{name}:users'"):
                RedisStore(server_address("redis"), namespace=name)
            assert not client.exists(f"{name}:store")
        finally:
            for start in range(0, 20_000, 5_000):
                client.delete(*(f"{crowd}:{i}" for i in range(start, start + 5_000)))
            client.delete(f"{name}:users")
            client.close()
    finally:
        made.close()
