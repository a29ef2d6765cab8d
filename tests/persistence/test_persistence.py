"""
Tests for the checkpoint store protocol as the in-memory and SQLite stores keep
it, and the content a checkpoint's id must cover in every store.

The SQLite store's own tables, settings, crashes and writer processes are in
test_sqlite.py; the suite every store runs, in test_stores.py.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given

from tests.persistence.runs import run_context
from tests.persistence.stored import sqlite_factory
from tests.strategies import assert_identical, json_objects, working_contexts
from workingctx import Checkpoint, InMemoryStore, Message, SQLiteStore
from workingctx._canonical import message_digest
from workingctx.context import WorkingContext
from workingctx.exceptions import CheckpointError, FrozenPayloadError
from workingctx.frozen import FrozenDict
from workingctx.persistence import CheckpointInfo, CheckpointStore, rehydrate
from workingctx.serialization import to_json

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _twin(value: Any) -> Any:
    """
    *value* with each scalar swapped for a Python-equal one of another type
    where there is one (True <-> 1, False <-> 0, integral floats -> int, small ints -> float).
    """
    if isinstance(value, dict):
        return {key: _twin(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_twin(item) for item in value]
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, int) and abs(value) < 2**53:
        return float(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _twin_context(ctx: WorkingContext) -> WorkingContext:
    """
    A context equal (==) to *ctx* whose payloads hold twins of its scalars.
    """
    messages = [
        attrs.evolve(
            message,
            metadata=_twin(message.metadata),
            tool_calls=[attrs.evolve(call, arguments=_twin(call.arguments)) for call in message.tool_calls],
        )
        for message in ctx.messages
    ]
    twin = WorkingContext(prefix=ctx.prefix, messages=messages, scratchpad=_twin(dict(ctx.scratchpad)))
    for entry in tuple(ctx.journal):
        twin.journal.record(_twin(entry))
    return twin


@pytest.fixture(scope="module", params=["memory", "sqlite"])
def make_store(request: pytest.FixtureRequest, scratch_dir: Path) -> Callable[[], CheckpointStore]:
    """
    A factory of fresh, empty stores of each kind.
    """
    if request.param == "memory":
        return InMemoryStore
    return sqlite_factory(scratch_dir)


# -- Checkpoint ---------------------------------------------------------------------


# -- every store --------------------------------------------------------------------


class TestStoreProtocol:
    def test_stores_implement_the_protocol(self, make_store):
        """
        Both stores are CheckpointStores.
        """
        assert isinstance(make_store(), CheckpointStore)

    @given(ctx=working_contexts(), metadata=json_objects)
    def test_round_trip(self, make_store, ctx, metadata):
        """
        context -> checkpoint -> store -> load gives the checkpoint back, and
        rehydrating it freezes to the original snapshot, digest included.
        """
        store = make_store()
        snapshot = ctx.freeze()
        checkpoint = Checkpoint.capture(ctx, metadata=metadata)
        assert store.save(checkpoint) == checkpoint.id
        if isinstance(store, SQLiteStore):
            store.close()
            store = SQLiteStore(store.path)  # a fresh process's view: nothing cached
        loaded = store.load(checkpoint.id)
        assert checkpoint == loaded
        assert_identical(checkpoint, loaded)
        for message in loaded.snapshot.messages:  # a digest kept from the store is the real one
            assert message_digest(message) == message.digest()
        again = rehydrate(loaded).freeze()
        assert snapshot == again
        assert snapshot.digest() == again.digest()

    @given(ctx=working_contexts(), metadata=json_objects)
    def test_python_equal_twins_load_as_themselves(self, make_store, ctx, metadata):
        """
        A context and its twin whose payloads hold Python-equal values of other
        types (True for 1, 1 for 1.0, 0 for False) are saved to one store; a
        new store object loads each back with its own types.
        """
        store = make_store()
        at = datetime(2026, 1, 1, tzinfo=UTC)
        saved = [
            Checkpoint.capture(ctx, metadata=metadata, created_at=at),
            Checkpoint.capture(_twin_context(ctx), metadata=_twin(metadata), created_at=at + timedelta(seconds=1)),
        ]
        for checkpoint in saved:
            store.save(checkpoint)
        if isinstance(store, SQLiteStore):
            store.close()
            store = SQLiteStore(store.path)
        for checkpoint in saved:
            assert_identical(checkpoint, store.load(checkpoint.id))

    def test_checkpoint_is_a_value(self, make_store):
        """
        A journal entry cannot be changed in place after it is recorded, so a
        checkpoint cannot change after capture: load(cp) == cp in the same
        store object, and an in-memory checkpoint keeps its content.
        """
        store = make_store()
        ctx = WorkingContext()
        entry = {"kind": "step", "tags": ["a"]}
        ctx.journal.record(entry)
        first = Checkpoint.capture(ctx)
        text = to_json(first)
        store.save(first)
        entry["tags"].append("b")  # the caller's own dict: never the recorded entry
        with pytest.raises(FrozenPayloadError):
            next(iter(ctx.journal))["tags"].append("b")
        with pytest.raises(FrozenPayloadError):
            first.snapshot.journal[0]["kind"] = "changed"
        ctx.journal.record({"kind": "step", "tags": ["c"]})
        second = Checkpoint.capture(ctx, parent=first)
        store.save(second)
        assert text == to_json(store.load(first.id)) == to_json(first)
        assert first == store.load(first.id)
        assert second == store.load(second.id)

    def test_empty_store(self, make_store):
        """
        An empty store lists nothing and knows no id.
        """
        store = make_store()
        assert store.list() == []
        for operation in (store.load, store.delete, store.lineage):
            with pytest.raises(CheckpointError, match="no checkpoint 'nope'"):
                operation("nope")

    def test_one_checkpoint(self, make_store):
        """
        One checkpoint: listed, its own lineage, then deleted.
        """
        store = make_store()
        checkpoint = Checkpoint.capture(run_context(2), metadata={"label": "only"})
        store.save(checkpoint)
        info = CheckpointInfo(
            id=checkpoint.id,
            parent=None,
            created_at=checkpoint.created_at,
            message_count=8,
            digest=checkpoint.snapshot.digest(),
            metadata=FrozenDict({"label": "only"}),
        )
        assert store.list() == [info]
        assert store.lineage(checkpoint.id) == [info]
        store.delete(checkpoint.id)
        assert store.list() == []
        with pytest.raises(CheckpointError):
            store.load(checkpoint.id)

    def test_many_checkpoints(self, make_store):
        """
        A run checkpointed every turn, with a branch: list is oldest first,
        lineage follows parents from the root, delete keeps the children.
        """
        store = make_store()
        ctx = WorkingContext()
        ids: list[str] = []
        for turn in range(6):
            ctx.append(Message("user", f"q{turn}"), Message("assistant", f"a{turn}"))
            checkpoint = Checkpoint.capture(ctx, parent=ids[-1] if ids else None, created_at=T0 + timedelta(turn))
            ids.append(store.save(checkpoint))
        branch = rehydrate(store.load(ids[2])).append(Message("user", "what if?"))
        branch_id = store.save(Checkpoint.capture(branch, parent=ids[2], created_at=T0 + timedelta(10)))
        assert [info.id for info in store.list()] == [*ids, branch_id]
        assert [info.id for info in store.lineage(ids[5])] == ids
        assert [info.id for info in store.lineage(branch_id)] == [*ids[:3], branch_id]
        assert [info.message_count for info in store.lineage(branch_id)] == [2, 4, 6, 7]
        store.delete(ids[1])
        assert [info.id for info in store.lineage(ids[5])] == ids[2:]
        assert store.load(ids[5]).snapshot == ctx.freeze()
        assert store.load(branch_id).snapshot == branch.freeze()
        assert len(store.list()) == 6

    def test_list_orders_by_creation_time(self, make_store):
        """
        list() is oldest first by creation time, whatever the order of saving.
        """
        store = make_store()
        late = Checkpoint.capture(run_context(1), created_at=T0 + timedelta(hours=1))
        early = Checkpoint.capture(run_context(2), created_at=T0)
        store.save(late)
        store.save(early)
        assert [info.id for info in store.list()] == [early.id, late.id]

    def test_saving_twice_and_replacing(self, make_store):
        """
        Saving a checkpoint again keeps one copy; another checkpoint under the
        same id replaces it.
        """
        store = make_store()
        checkpoint = Checkpoint.capture(run_context(2))
        store.save(checkpoint)
        store.save(checkpoint)
        assert len(store.list()) == 1
        other = Checkpoint(id=checkpoint.id, snapshot=run_context(3).freeze(), created_at=T0)
        store.save(other)
        assert store.load(checkpoint.id) == other
        assert len(store.list()) == 1

    def test_bad_arguments(self, make_store):
        """
        save takes a Checkpoint; ids are str.
        """
        store = make_store()
        with pytest.raises(TypeError, match="save takes a Checkpoint"):
            store.save(run_context(1).freeze())  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="a checkpoint id is a str"):
            store.load(5)  # type: ignore[arg-type]

    def test_lineage_survives_a_parent_cycle(self, make_store):
        """
        Hand-made ids can form a cycle; lineage stops instead of looping.
        """
        store = make_store()
        snapshot = run_context(1).freeze()
        store.save(Checkpoint(id="a", snapshot=snapshot, created_at=T0, parent="b"))
        store.save(Checkpoint(id="b", snapshot=snapshot, created_at=T0, parent="a"))
        assert [info.id for info in store.lineage("a")] == ["b", "a"]


class TestContentTheIdMustCover:
    def test_journal_content_changes_the_id(self):
        """
        Two contexts alike but for what their journals hold get different
        ids, so a store never replaces one with the other.
        """
        at = datetime(2025, 1, 1, tzinfo=UTC)
        one, two = WorkingContext(), WorkingContext()
        one.journal.record({"kind": "row_written", "id": 1})
        two.journal.record({"kind": "row_written", "id": 2})
        first, second = Checkpoint.capture(one, created_at=at), Checkpoint.capture(two, created_at=at)
        assert first.id != second.id

    def test_lone_surrogates_round_trip(self, make_store):
        """
        Text holding half of a surrogate pair is saved and loaded back equal,
        in every store (SQLite writes it with ASCII escapes).
        """
        ctx = WorkingContext().append(Message("assistant", "cut \ud83d")).note("n", "\udc00")
        checkpoint = Checkpoint.capture(ctx)
        store = make_store()
        assert checkpoint.snapshot == store.load(store.save(checkpoint)).snapshot

    @given(working_contexts())
    def test_live_and_frozen_captures_share_an_id(self, ctx):
        """
        Capturing a live context (journal digest kept incrementally) and its
        snapshot (journal hashed whole) at one instant give one id.
        """
        at = datetime(2025, 1, 1, tzinfo=UTC)
        assert Checkpoint.capture(ctx, created_at=at).id == Checkpoint.capture(ctx.freeze(), created_at=at).id
