"""
One suite for every checkpoint store: in memory, SQLite, PostgreSQL and Redis.

Round trips, listing, deleting and lineage, threads and their compare-and-set
heads, and damaged storage. Writer processes (concurrent, killed) and server
restarts are in test_store_processes.py.
"""

from __future__ import annotations

import contextlib
import logging
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.persistence.runs import T0, recorded, run, turns
from tests.persistence.stored import mutation
from tests.stores import KINDS, Raw, Stores, damage_at_random, kind_params, schema_version
from tests.strategies import json_objects, working_contexts
from workingctx import Checkpoint, Message, ToolCall, WorkingContext
from workingctx.exceptions import ArgumentValueError, CheckpointError, HeadConflictError, StoreUnavailableError
from workingctx.persistence import CheckpointStore, Listing, PostgresStore, RedisStore
from workingctx.serialization import to_json


class TestRoundTrip:
    @settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(ctx=working_contexts(max_turns=3), metadata=json_objects)
    def test_load_gives_what_was_saved(self, stores, ctx, metadata):
        """
        A checkpoint saved to any store loads back equal, with the same digest,
        from the same handle and from a fresh one with nothing cached.
        """
        if not stores.made:
            stores.new()
        store = stores.made[0]
        checkpoint = Checkpoint.capture(ctx, metadata=metadata)
        assert checkpoint.id == store.save(checkpoint)
        for handle in (store, stores.again(store)):
            loaded = handle.load(checkpoint.id)
            assert checkpoint == loaded
            assert checkpoint.snapshot.digest() == loaded.snapshot.digest()
            assert list(checkpoint.snapshot.journal) == list(loaded.snapshot.journal)

    def test_stores_follow_the_protocol(self, stores):
        """
        Every store is a CheckpointStore.
        """
        assert isinstance(stores.new(), CheckpointStore)

    def test_lone_surrogates_and_unicode(self, stores):
        """
        Text no UTF-8 codec can encode (half an emoji) and text in any script
        round-trips through every store.
        """
        store = stores.new()
        ctx = WorkingContext().append(Message("user", "half \ud83d an emoji"), Message("assistant", "日本語 ✓ \x00"))
        ctx.note("odd", "\udfff")
        checkpoint = Checkpoint.capture(ctx)
        store.save(checkpoint)
        assert checkpoint == stores.again(store).load(checkpoint.id)

    def test_non_json_payload_refused_and_nothing_written(self, persistent):
        """
        A scratchpad value JSON cannot hold is refused, with its path, and
        the store stays empty.
        """
        store = persistent.new()
        with pytest.raises(CheckpointError) as info:
            store.save(Checkpoint.capture(WorkingContext().note("seen", {"a", "b"})))
        assert "$.snapshot.scratchpad['seen']" == info.value.path
        assert [] == store.list()

    def test_bad_arguments(self, stores):
        """
        Wrong types are TypeErrors naming the value; an unknown id is a CheckpointError.
        """
        store = stores.new()
        with pytest.raises(TypeError, match="save takes a Checkpoint"):
            store.save("not a checkpoint")
        with pytest.raises(TypeError, match="thread is named by a non-empty str"):
            store.save(Checkpoint.capture(WorkingContext()), thread=3)
        with pytest.raises(TypeError, match="thread is named by a non-empty str"):
            store.head(None)
        with pytest.raises(TypeError, match="checkpoint id is a str"):
            store.load(5)
        with pytest.raises(CheckpointError, match="no checkpoint 'nope'"):
            store.load("nope")
        with pytest.raises(CheckpointError, match="no checkpoint 'nope'"):
            store.delete("nope")
        with pytest.raises(CheckpointError, match="no checkpoint 'nope'"):
            store.lineage("nope")

    @pytest.mark.parametrize(("bad", "problem"), [("a\x00b", "holds NUL"), ("half \ud83d", "lone surrogate")])
    def test_names_no_store_can_hold_are_refused_by_every_store(self, stores, bad, problem):
        """
        A checkpoint id, parent or thread holding NUL (PostgreSQL's text refuses
        it) or a lone surrogate (no UTF-8 form) is refused with the value and
        the fix, the same by every store and by the checkpoint itself; nothing
        is written, and no such checkpoint is in a store.
        """
        store = stores.new()
        snapshot = WorkingContext().append(Message("user", "hi")).freeze()
        now = datetime.now(UTC)
        for fields in ({"id": bad}, {"id": "ok", "parent": bad}):
            with pytest.raises(ArgumentValueError, match=problem) as info:
                Checkpoint(snapshot=snapshot, created_at=now, **fields)
            assert repr(bad) in str(info.value)
        checkpoint = Checkpoint.capture(WorkingContext.from_snapshot(snapshot))
        for call in (
            lambda: store.save(checkpoint, thread=bad),
            lambda: store.head(bad),
            lambda: store.load(bad),
            lambda: store.delete(bad),
            lambda: store.lineage(bad),
        ):
            with pytest.raises(ArgumentValueError, match=problem):
                call()
        assert bad not in store
        assert [] == store.list()


class TestListDeleteLineage:
    def test_run_listed_in_order_with_lineage(self, stores):
        """
        A run checkpointed every turn lists oldest first; lineage walks back to the root.
        """
        store = stores.new()
        saved = run(store, 6)
        infos = store.list()
        assert [c.id for c in saved] == [info.id for info in infos]
        assert [4 * (n + 1) for n in range(6)] == [info.message_count for info in infos]
        assert [{"turn": n} for n in range(6)] == [dict(info.metadata) for info in infos]
        assert [c.snapshot.digest() for c in saved] == [info.digest for info in infos]
        assert [c.id for c in saved[:4]] == [info.id for info in store.lineage(saved[3].id)]
        assert len(saved) == len(store)
        assert saved[2].id in store
        assert "nope" not in store

    def test_branch_and_delete(self, stores):
        """
        A branch from an earlier checkpoint has its own lineage; deleting a
        checkpoint keeps its children, whose lineage then starts after it.
        """
        store = stores.new()
        saved = run(store, 4)
        branch = WorkingContext.from_snapshot(saved[1].snapshot).append(Message("user", "what if?"))
        fork = Checkpoint.capture(branch, parent=saved[1], created_at=T0 + timedelta(minutes=5))
        store.save(fork)
        assert [saved[0].id, saved[1].id, fork.id] == [info.id for info in store.lineage(fork.id)]
        store.delete(saved[1].id)
        assert [fork.id] == [info.id for info in store.lineage(fork.id)]
        assert [saved[2].id, saved[3].id] == [info.id for info in store.lineage(saved[3].id)]
        assert saved[3] == stores.again(store).load(saved[3].id)
        assert fork == stores.again(store).load(fork.id)
        with pytest.raises(CheckpointError, match="no checkpoint"):
            store.load(saved[1].id)

    def test_saving_twice_and_replacing(self, stores):
        """
        Saving the same checkpoint twice keeps one; another checkpoint under
        the same id replaces it.
        """
        store = stores.new()
        ctx = turns(WorkingContext(), 0, 2)
        first = Checkpoint.capture(ctx, created_at=T0)
        store.save(first)
        store.save(first)
        assert 1 == len(store.list())
        other = Checkpoint(id=first.id, snapshot=turns(ctx, 2, 1).freeze(), created_at=T0)
        store.save(other)
        assert [12] == [info.message_count for info in store.list()]
        assert other == stores.again(store).load(first.id)

    def test_a_short_chain_beside_a_long_run_loads(self, persistent):
        """
        A checkpoint whose chain is a small part of the store (read link by
        link) and one whose chain is most of it (read in one pass) both load
        from a fresh handle equal to what was saved, payload keys in order.
        """
        store = persistent.new()
        long = run(store, 12)[-1]
        ctx = WorkingContext().append(
            Message("user", "other"),
            Message.assistant(tool_calls=[ToolCall("x1", "lookup", {"zeta": 1, "alpha": {"y": 2, "b": 3}})]),
        )
        ctx.journal.record({"kind": "other", "at": 1})
        short = Checkpoint.capture(ctx, created_at=T0)
        store.save(short)
        fresh = persistent.again(store)
        assert short == fresh.load(short.id)
        assert long == fresh.load(long.id)
        loaded = persistent.again(store).load(short.id)
        assert to_json(loaded) == to_json(short)

    def test_messages_stored_once_and_collected(self, persistent):
        """
        Checkpointing every turn stores each distinct message once; deleting
        every checkpoint removes every message.
        """
        store = persistent.new()
        saved = run(store, 10)
        raw = Raw(persistent.kind, store)
        assert 3 * 10 + 1 == raw.message_count()  # per turn a question, a call, a result; one shared answer
        for checkpoint in saved[:-1]:
            store.delete(checkpoint.id)
        assert saved[-1] == persistent.again(store).load(saved[-1].id)
        assert 31 == raw.message_count()
        store.delete(saved[-1].id)
        assert 0 == raw.message_count()
        assert [] == store.list()

    def test_lineage_survives_a_parent_cycle(self, stores):
        """
        Checkpoints whose parents form a cycle (ids of your own) give a finite lineage.
        """
        store = stores.new()
        snapshot = WorkingContext().append(Message("user", "hi")).freeze()
        store.save(Checkpoint(id="a", snapshot=snapshot, created_at=T0, parent="b"))
        store.save(Checkpoint(id="b", snapshot=snapshot, created_at=T0, parent="a"))
        assert ["b", "a"] == [info.id for info in store.lineage("a")]


class TestThreads:
    def test_head_follows_the_thread(self, stores):
        """
        Saving to a thread moves its head; another thread and a plain save leave it.
        """
        store = stores.new()
        assert store.head("t") is None
        saved = run(store, 3, thread="t")
        assert saved[-1].id == store.head("t")
        other = run(store, 2, thread="u")
        store.save(Checkpoint.capture(WorkingContext().append(Message("user", "loose"))))
        assert saved[-1].id == store.head("t")
        assert other[-1].id == store.head("u")

    def test_stale_parent_is_refused_and_nothing_written(self, stores):
        """
        A save whose parent is not the thread's head raises HeadConflictError
        naming both, and writes nothing; saving the head again is a no-op.
        """
        store = stores.new()
        saved = run(store, 2, thread="t")
        late = Checkpoint.capture(turns(WorkingContext(), 9, 1), parent=saved[0], created_at=T0)
        with pytest.raises(HeadConflictError, match="another writer saved first") as info:
            store.save(late, thread="t")
        assert (info.value.thread, info.value.expected, info.value.actual) == ("t", saved[0].id, saved[1].id)
        assert late.id not in store
        assert saved[1].id == store.head("t")
        store.save(saved[1], thread="t")
        assert saved[1].id == store.head("t")
        fresh = Checkpoint.capture(WorkingContext(), created_at=T0)
        with pytest.raises(HeadConflictError):
            store.save(fresh, thread="t")

    def test_delete_moves_the_head_back(self, stores):
        """
        Deleting a thread's head moves the head to its parent; deleting the
        last one ends the thread.
        """
        store = stores.new()
        saved = run(store, 2, thread="t")
        store.delete(saved[1].id)
        assert saved[0].id == store.head("t")
        store.delete(saved[0].id)
        assert store.head("t") is None
        assert saved[0].id == store.save(saved[0], thread="t")


class TestDamagedStorage:
    def saved(self, persistent: Stores) -> tuple[Any, list[Checkpoint], Raw]:
        store = persistent.new()
        return store, run(store, 3), Raw(persistent.kind, store)

    def test_rewritten_message_caught_by_its_checksum(self, persistent):
        """
        A stored message edited into another valid message does not load
        silently: CheckpointError names the path, and nothing changes.
        """
        store, saved, raw = self.saved(persistent)
        digest = saved[-1].snapshot.messages[0].digest()
        raw.rewrite_message(digest, '{"role":"user","content":"bye"}')
        fresh = persistent.again(store)
        with pytest.raises(CheckpointError, match="does not match its checksum") as info:
            fresh.load(saved[-1].id)
        assert "$.snapshot.messages[0]" == info.value.path
        assert digest in str(info.value)

    def test_repointed_link_caught_by_the_chain(self, persistent):
        """
        A link pointed at another stored message breaks the chain and is reported.
        """
        store, saved, raw = self.saved(persistent)
        snapshot = saved[-1].snapshot
        raw.repoint_link(snapshot.chain_digest(1), snapshot.messages[4].digest())
        with pytest.raises(CheckpointError, match="link does not match") as info:
            persistent.again(store).load(saved[-1].id)
        assert "$.snapshot.messages[0]" == info.value.path

    def test_missing_link_reported_as_truncated(self, persistent):
        """
        A chain with a link gone is reported, not half-loaded.
        """
        store, saved, raw = self.saved(persistent)
        raw.drop_link(saved[-1].snapshot.chain_digest(5))
        with pytest.raises(CheckpointError, match="expected 12 links, found 7"):
            persistent.again(store).load(saved[-1].id)
        assert saved[0] == persistent.again(store).load(saved[0].id)

    def test_a_cycle_of_links_is_reported(self, persistent):
        """
        A link made its own predecessor is reported, not walked round and round.
        """
        store, saved, raw = self.saved(persistent)
        raw.loop_link(saved[-1].snapshot.chain_digest(12))
        with pytest.raises(CheckpointError, match=r"expected 12 links, found 1 "):
            persistent.again(store).load(saved[-1].id)
        assert saved[1] == persistent.again(store).load(saved[1].id)

    def test_unsealed_row_refused_by_load_and_named_by_list_and_lineage(self, persistent):
        """
        A checkpoint row changed behind the store's back fails its seal: load
        raises, list and lineage leave it out and name it with that error;
        other checkpoints still load.
        """
        store, saved, raw = self.saved(persistent)
        raw.rewrite_metadata(saved[1].id, '{"turn": 99}')
        fresh = persistent.again(store)
        with pytest.raises(CheckpointError, match="does not match its seal"):
            fresh.load(saved[1].id)
        for listing in (fresh.list(), fresh.lineage(saved[2].id)):
            assert [saved[1].id] == list(listing.damaged)
            assert "does not match its seal" in str(listing.damaged[saved[1].id])
        assert saved[2] == fresh.load(saved[2].id)

    @pytest.mark.parametrize(
        ("key", "value", "match"),
        [
            ("schema_version", "99", r"newer workingctx \(schema version 99"),
            ("schema_version", "one", "damaged schema version"),
            ("format", "someone.else", "its format is 'someone.else'"),
        ],
    )
    def test_newer_or_foreign_marker(self, persistent, key, value, match):
        """
        A newer schema version or another format is refused when opened and
        by every operation, and nothing is written.
        """
        store, saved, raw = self.saved(persistent)
        raw.set_marker(key, value)
        with pytest.raises(CheckpointError, match=match):
            store.load(saved[0].id)
        with pytest.raises(CheckpointError, match=match):
            store.save(Checkpoint.capture(turns(WorkingContext(), 7, 1)))
        with pytest.raises(CheckpointError, match=match):
            persistent.again(store)
        raw.set_marker(key, {"schema_version": schema_version(store), "format": "workingctx.checkpoints"}[key])
        assert [c.id for c in saved] == [info.id for info in store.list()]

    def test_foreign_data_refused(self, persistent):
        """
        A place holding someone else's data (a table, a key) is not turned into a store.
        """
        opener = Raw(persistent.kind, persistent.new()).foreign()
        with pytest.raises(CheckpointError, match="not a workingctx checkpoint store") as info:
            opener()
        assert "workingctx_store" == info.value.path


class TestDamagedRows:
    """
    Issue 26, point 7: a damaged row never hides the intact ones.
    """

    def test_every_listing_is_a_listing_naming_what_it_could_not_read(self, stores):
        """
        list(), lineage() and list_contexts() of every store return a Listing:
        a list equal to the plain list of descriptors, with nothing damaged.
        """
        store = stores.new()
        saved = run(store, 2)
        store.save_context(recorded("a", "hello"))
        for listing in (store.list(), store.lineage(saved[-1].id), store.list_contexts()):
            assert isinstance(listing, Listing)
            assert {} == listing.damaged
            assert list(listing) == listing
        assert [c.id for c in saved] == [info.id for info in store.list()]

    def test_a_damaged_row_never_hides_the_intact_ones(self, persistent, caplog):
        """
        One unreadable checkpoint row: list() returns every other checkpoint
        in order and names the damaged id with the very error load() raises;
        lineage() past it starts after it and names it; a warning names it;
        nothing stored changes; deleting it clears it.
        """
        store = persistent.new()
        saved = run(store, 4)
        raw = Raw(persistent.kind, store)
        raw.damage_row(saved[1].id)
        before = raw.state()
        fresh = persistent.again(store)
        with caplog.at_level(logging.WARNING, logger="workingctx.persistence"):
            listing = fresh.list()
        assert [saved[0].id, saved[2].id, saved[3].id] == [info.id for info in listing]
        assert [saved[1].id] == list(listing.damaged)
        assert saved[1].id in caplog.text
        with pytest.raises(CheckpointError) as loaded:
            fresh.load(saved[1].id)
        assert saved[1].id in str(loaded.value)
        assert str(loaded.value) == str(listing.damaged[saved[1].id])
        lineage = fresh.lineage(saved[3].id)
        assert [saved[2].id, saved[3].id] == [info.id for info in lineage]
        assert [saved[1].id] == list(lineage.damaged)
        with pytest.raises(CheckpointError, match=saved[1].id):
            fresh.lineage(saved[1].id)
        assert saved[3] == fresh.load(saved[3].id)
        assert before == raw.state()
        fresh.delete(saved[1].id)
        assert {} == fresh.list().damaged
        assert saved[3] == persistent.again(store).load(saved[3].id)

    def test_a_damaged_context_row_never_hides_the_others(self, persistent):
        """
        One unreadable saved-context row: list_contexts() returns the others
        and names it with the error load_context() raises; nothing changes.
        """
        store = persistent.new()
        for context_id in ("first", "second", "third"):
            store.save_context(recorded(context_id, f"hello {context_id}"))
        raw = Raw(persistent.kind, store)
        raw.damage_context("second")
        before = raw.state()
        fresh = persistent.again(store)
        listing = fresh.list_contexts()
        assert {"first", "third"} == {info.id for info in listing}
        assert ["second"] == list(listing.damaged)
        with pytest.raises(CheckpointError, match="cannot load context 'second'"):
            fresh.load_context("second")
        assert "cannot load context 'second'" in str(listing.damaged["second"])
        assert "hello third" == fresh.load_context("third").freeze().messages[0].content
        assert before == raw.state()


UNREADABLE_VERSIONS = ["9" * 5000, "one", "-1", "1.0", "\u00b2", "", " 1", "0x1"]


class TestUnreadableSchemaVersion:
    @pytest.mark.parametrize("version", UNREADABLE_VERSIONS, ids=lambda v: f"{v[:8]!r}")
    def test_every_operation_raises_checkpoint_error_and_changes_nothing(self, persistent, version):
        """
        A schema version that is not a whole number (5,000 digits, a word, a
        negative, a float, a superscript digit) is a CheckpointError naming
        the marker, from opening, load, list, lineage, head, delete and
        save alike, never a builtin ValueError; nothing stored changes.
        """
        store = persistent.new()
        saved = run(store, 2, thread="t")
        store.save_context(recorded("a", "hello"))
        raw = Raw(persistent.kind, store)
        raw.set_marker("schema_version", version)
        before = raw.state()
        operations = [
            lambda: store.load(saved[0].id),
            store.list,
            lambda: store.lineage(saved[1].id),
            lambda: store.head("t"),
            lambda: store.delete(saved[0].id),
            lambda: store.save(Checkpoint.capture(turns(WorkingContext(), 7, 1))),
            store.list_contexts,
            lambda: store.load_context("a"),
            lambda: store.delete_context("a"),
            lambda: persistent.again(store),
        ]
        for operation in operations:
            with pytest.raises(CheckpointError, match="damaged schema version") as info:
                operation()
            assert "workingctx_store.schema_version" == info.value.path
        assert before == raw.state()
        raw.set_marker("schema_version", schema_version(store))
        assert [c.id for c in saved] == [info.id for info in store.list()]


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_in_the_suite(kind):
    """
    The suite's kinds are the four stores workingctx ships.
    """
    assert kind in {"memory", "sqlite", "postgres", "redis"}


@given(count=st.integers(0, 3))
def test_turns_helper_counts(count):
    """
    The helper appends four messages per turn (the suite's counts rely on it).
    """
    assert 4 * count == len(turns(WorkingContext(), 0, count).freeze().messages)


class TestFuzzedServerStorage:
    @pytest.mark.parametrize("kind", kind_params(("postgres", "redis")))
    @settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 3))
    def test_random_damage_raises_only_checkpoint_error(self, kind, scratch_dir, seed, rounds):
        """
        After random damage to a server store, load, list, lineage and head
        either give exactly what was saved or raise CheckpointError.
        """
        made = Stores(kind, scratch_dir)
        try:
            store = made.new()
            saved = run(store, 3, thread="t")
            rng = random.Random(seed)
            notes = [damage_at_random(kind, store, rng, mutation) for _ in range(rounds)]
            try:
                fresh = made.again(store)
            except CheckpointError as exc:
                refused = exc
            else:
                refused = None
            if refused is not None:
                assert refused.path, notes
                return
            for checkpoint in saved:
                try:
                    loaded = fresh.load(checkpoint.id)
                except CheckpointError:
                    continue
                assert checkpoint == loaded, notes
            for operation in (fresh.list, lambda: fresh.lineage(saved[-1].id), lambda: fresh.head("t")):
                with contextlib.suppress(CheckpointError):
                    operation()
        finally:
            made.close()


class TestServerStoreSettings:
    @pytest.mark.parametrize(
        ("make", "error", "match"),
        [
            (lambda: PostgresStore(5), TypeError, "dsn must be a connection string"),
            (lambda: PostgresStore("postgresql://h/db", schema="Bad Name"), ValueError, "schema must be a lower-case"),
            (lambda: PostgresStore("postgresql://h/db", pool_size=0), ValueError, "pool_size must be a positive"),
            (lambda: PostgresStore("postgresql://h/db", timeout=0), ValueError, "timeout must be a positive"),
            (lambda: RedisStore(b"redis://h"), TypeError, "url must be a Redis URL"),
            (lambda: RedisStore("redis://h", namespace="a b"), ValueError, "namespace must be 1 to 100"),
            (lambda: RedisStore("redis://h", timeout=True), TypeError, "timeout must be a number"),
            (lambda: RedisStore("http://h"), ValueError, "url must be a Redis URL such as"),
        ],
    )
    def test_bad_settings_refused_before_connecting(self, make, error, match):
        """
        Settings of the wrong type or value are refused, naming the value, before any connection.
        """
        with pytest.raises(error, match=match):
            make()

    def test_unreachable_servers_raise_store_unavailable(self):
        """
        A server nobody listens for gives StoreUnavailableError, naming where
        (never the password) and what to check.
        """
        with pytest.raises(StoreUnavailableError, match="is it running") as info:
            PostgresStore("postgresql://me:s3cret@127.0.0.1:1/db", timeout=1)
        assert "s3cret" not in str(info.value)
        assert "127.0.0.1:1" in str(info.value)
        with pytest.raises(StoreUnavailableError, match="lost the connection to the Redis server"):
            RedisStore("redis://127.0.0.1:1/0", timeout=1)

    @pytest.mark.parametrize("kind", kind_params(("postgres", "redis")))
    def test_store_removed_behind_its_back(self, kind, scratch_dir):
        """
        A server store whose marker was removed (a table dropped, a key
        deleted) refuses every operation with CheckpointError.
        """
        made = Stores(kind, scratch_dir)
        try:
            store = made.new()
            run(store, 1)
            raw = Raw(kind, store)
            raw.remove_marker()
            for operation in (
                store.list,
                lambda: store.head("t"),
                lambda: store.save(Checkpoint.capture(WorkingContext())),
            ):
                with pytest.raises(CheckpointError, match="holds no workingctx checkpoint store"):
                    operation()
            raw.remove_all()
        finally:
            made.close()

    def test_context_manager_len_and_repr(self, persistent):
        """
        Stores close as context managers, count their checkpoints, and show where they are.
        """
        with persistent.new() as store:
            run(store, 2)
            assert 2 == len(store)
            assert type(store).__name__ in repr(store)
            assert 5 not in store
