"""
``RedisStore``'s load: one round trip, two for a chain long enough to have
segments (``ms:`` and ``es:`` keys, read whole in one ``MGET``), with chains
saved without segments read link by link.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.persistence.test_stores import run, turns
from tests.stores import Raw, Stores
from workingctx import Checkpoint, Message, WorkingContext
from workingctx.checkpoint import rehydrate
from workingctx.exceptions import CheckpointError
from workingctx.persistence.redis import _SEGMENT

pytestmark = pytest.mark.server

TURNS = 70
"""Turns of the run: 280 messages (four segments and 24 links) and 70 journal entries (one segment and 6 links)."""


@pytest.fixture(scope="module")
def scratch_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


@pytest.fixture
def made(scratch_dir: Path) -> Iterator[Stores]:
    stores = Stores("redis", scratch_dir)
    yield stores
    stores.close()


def keys(store: Any, space: str) -> list[str]:
    with Raw("redis", store)._redis() as client:  # noqa: SLF001  # the test's own connection
        return sorted(client.scan_iter(match=f"{store.namespace}:{space}*", count=1000))


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

    @pytest.mark.parametrize("how", ["item", "digest", "header", "garbage"])
    def test_a_damaged_segment_is_read_past(self, made, how):
        """
        A segment whose item, link or header is damaged, or that is not a
        segment at all: the load reads the links and items themselves and
        gives what was saved.
        """
        store = made.new()
        saved = run(store, TURNS, thread="t")
        key = keys(store, "ms:")[0]
        with Raw("redis", store)._redis() as client:  # noqa: SLF001
            value = client.get(key)
            header, *lines = value.split("\0")[0].split("\n")
            if how == "item":
                value = value.replace("\0", "\0x")
            elif how == "digest":
                value = value.replace(lines[3].split(" ")[1], "0" * 64, 1)
            elif how == "header":
                value = value.replace(header, header.split(" ")[0] + " 0 63", 1)
            else:
                value = "not a segment"
            client.set(key, value)
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
