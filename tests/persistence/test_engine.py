"""
The store protocol implemented once: every store is the engine over its driver,
checks and names things alike, and puts lineages together by one law.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.persistence.runs import run
from tests.stores import Raw
from workingctx import Checkpoint, InMemoryStore, Message, WorkingContext
from workingctx.exceptions import CheckpointError, SerializationError
from workingctx.persistence import PostgresStore, RedisStore, SQLiteStore
from workingctx.persistence._codec import Damage
from workingctx.persistence._engine import StoreEngine
from workingctx.persistence.stores import CheckpointInfo

PROTOCOL = (
    "save",
    "load",
    "list",
    "lineage",
    "head",
    "delete",
    "save_context",
    "load_context",
    "list_contexts",
    "delete_context",
    "__contains__",
    "__enter__",
    "__exit__",
)


@pytest.mark.parametrize("kind", [InMemoryStore, SQLiteStore, PostgresStore, RedisStore])
def test_every_store_is_the_engine_over_its_driver(kind):
    """
    No store implements a method of the protocol itself: each gives every driver method, and only those.
    """
    assert issubclass(kind, StoreEngine)
    assert not kind.__abstractmethods__
    assert [name for name in PROTOCOL if name in vars(kind)] == []


class TestNamedAlike:
    def test_a_missing_checkpoint_is_named_alike_by_every_operation(self, stores):
        store = stores.new()
        run(store, 2)
        said = set()
        for operation in (store.load, store.lineage, store.delete):
            with pytest.raises(CheckpointError) as caught:
                operation("nope")
            said.add(str(caught.value))
            assert caught.value.path == "$.id"
        assert {f"no checkpoint 'nope' in {store._place}; list() shows the ids it holds"} == said
        assert store._place.startswith(
            (
                "the SQLite store '",
                "the PostgreSQL store schema 't_",
                "the Redis store namespace 't_",
                "this InMemoryStore",
            )
        )
        assert 2 == len(store)

    def test_a_record_that_cannot_be_read_is_named_with_its_store_and_where_it_broke(self, persistent):
        store = persistent.new()
        saved = run(store, 2)
        digest = saved[-1].snapshot.messages[0].digest()
        Raw(persistent.kind, store).rewrite_message(digest, '{"role":"user","content":"bye"}')
        fresh = persistent.again(store)
        with pytest.raises(CheckpointError) as caught:
            fresh.load(saved[-1].id)
        said = str(caught.value)
        assert said.startswith(f"cannot load checkpoint {saved[-1].id!r} from {fresh._place}: ")
        assert said.endswith(" at $.snapshot.messages[0]; nothing was changed")
        assert "$.snapshot.messages[0]" == caught.value.path

    def test_saving_a_checkpoint_again_keeps_its_place_in_the_listing(self, stores):
        store = stores.new()
        at = datetime(2026, 1, 1, tzinfo=UTC)
        ctx = WorkingContext().append(Message("user", "hi"))
        first = Checkpoint.capture(ctx, created_at=at)
        second = Checkpoint.capture(ctx.append(Message("user", "more")), created_at=at)
        for checkpoint in (first, second, first):
            store.save(checkpoint)
        assert [first.id, second.id] == [info.id for info in store.list()]

    def test_what_no_store_can_hold_is_not_in_it(self, stores):
        with stores.new() as store:
            ids = [checkpoint.id for checkpoint in run(store, 1)]
            assert ids[0] in store
            for value in (5, None, ["a"], {"a": 1}, "\ud800", ""):
                assert value not in store


@pytest.mark.parametrize(
    ("failure", "what", "path"),
    [
        (Damage("the link is gone", "$.snapshot.messages"), "the link is gone", "$.snapshot.messages"),
        (SerializationError("not JSON", path="$.x"), "not JSON", "$.x"),
        (ValueError("bad count"), "ValueError: bad count", "$"),
        (RecursionError("too deep"), "RecursionError: too deep", "$"),
        (KeyError("k"), "KeyError: 'k'", "$"),
    ],
)
def test_what_reading_a_checkpoint_raises_is_named_where_it_was(failure, what, path):
    store = InMemoryStore()

    def build():
        raise failure

    with pytest.raises(CheckpointError) as caught:
        store._built("cp-1", build)
    assert (
        str(caught.value)
        == f"cannot load checkpoint 'cp-1' from this InMemoryStore: {what} at {path}; nothing was changed"
    )
    assert caught.value.path == path


def test_a_failure_that_is_not_about_the_record_goes_through():
    def build():
        msg = "a bug, not damage"
        raise RuntimeError(msg)

    with pytest.raises(RuntimeError, match="a bug, not damage"):
        InMemoryStore()._built("cp-1", build)


# -- lineage ---------------------------------------------------------------------------------

IDS = st.sampled_from("abcdefg")


@st.composite
def stored_rows(draw):
    """
    Rows by id, each naming a parent (None, another row, or an id not stored, cycles
    allowed), some damaged; and the id whose lineage is asked.
    """
    ids = draw(st.sets(IDS, min_size=1))
    rows = {name: (draw(st.none() | IDS), draw(st.booleans())) for name in ids}
    return rows, draw(st.sampled_from(sorted(ids)) | IDS)


def _read(row: tuple[str, str | None, bool]) -> CheckpointInfo:
    name, parent, damaged = row
    if damaged:
        msg = f"row {name} is damaged"
        raise CheckpointError(msg)
    return CheckpointInfo(
        id=name, parent=parent, created_at=datetime(2026, 1, 1, tzinfo=UTC), message_count=0, digest=""
    )


@given(stored_rows())
def test_a_lineage_follows_parents_from_the_root_and_stops_where_the_record_does(drawn):
    rows, wanted = drawn
    table = {name: (name, parent, damaged) for name, (parent, damaged) in rows.items()}
    store = InMemoryStore()
    if wanted not in rows or rows[wanted][1]:
        with pytest.raises(CheckpointError) as caught:
            store._lineage_of(table.get, wanted, _read)
        assert ("no checkpoint" in str(caught.value)) == (wanted not in rows)
        return
    lineage = store._lineage_of(table.get, wanted, _read)
    ids = [info.id for info in lineage]
    assert ids[-1] == wanted
    assert len(set(ids)) == len(ids)
    for child, parent in zip(lineage[1:], lineage[:-1], strict=True):
        assert child.parent == parent.id
    first = lineage[0].parent
    # the walk stops at the root, at a parent not stored, at a damaged one (named), or where it came round
    assert first is None or first not in rows or first in lineage.damaged or first in ids
    assert set(lineage.damaged) == ({first} if first in rows and rows[first][1] and first not in ids else set())
