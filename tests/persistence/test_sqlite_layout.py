"""
The SQLite store's digest layouts: schema version 3 (digests as their 32
bytes) against random contexts, keys, deletion, damage, several writers and
read-only opening; schema version 2 (digests as text) opened and written by
this code.
"""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import sqlite_rows
from tests.stores import DIGEST_COLUMNS
from tests.strategies import working_contexts
from workingctx import Checkpoint, Message, SQLiteStore
from workingctx.context import WorkingContext
from workingctx.exceptions import CheckpointError
from workingctx.persistence import _codec
from workingctx.persistence.sqlite import _read_key, _stored_key
from workingctx.prefix import PrefixContext

EARLIER_PACKED = Path(__file__).parents[1] / "data" / "sqlite-store-v2-long.sql"
"""A store written with schema version 2 (digests as hexadecimal text), as SQL."""

_names = itertools.count()
_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def fresh_path(directory: Path) -> Path:
    return directory / f"layout-{next(_names)}.db"


def digest_kinds(path: Path) -> set[tuple[str, int]]:
    """
    The storage class and length of every digest the file holds (the keyed seal aside).
    """
    found: set[tuple[str, int]] = set()
    with contextlib.closing(sqlite3.connect(path)) as db:
        for table, columns in DIGEST_COLUMNS.items():
            for column in columns:
                query = f"SELECT typeof({column}), length({column}) FROM {table}"  # noqa: S608  # constants
                if column == "seal":
                    query += " WHERE seal NOT LIKE 'hmac-sha256:%'"
                found.update(db.execute(query).fetchall())
    return found


def marker(path: Path) -> str:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return str(db.execute("SELECT value FROM workingctx_store WHERE key = 'schema_version'").fetchone()[0])


def run_of(ctx: WorkingContext, turns: int = 3) -> list[Checkpoint]:
    """
    Checkpoints of one run growing from *ctx*, each the parent of the next.
    """
    run = [Checkpoint.capture(ctx, metadata={"n": 0})]
    for turn in range(1, turns):
        ctx.append(Message("user", f"turn {turn}"), Message("assistant", f"answer {turn}"))
        ctx.journal.record({"kind": "turn", "n": turn})
        run.append(Checkpoint.capture(ctx, parent=run[-1], metadata={"n": turn}))
    return run


def hexed(key: object) -> str:
    """
    A key as read from a file of either layout, as hexadecimal text.
    """
    return key.hex() if isinstance(key, bytes) else str(key)


def contents(path: Path) -> dict[str, set[str]]:
    """
    The keys of every item, link and blob table, as hexadecimal text.
    """
    with contextlib.closing(sqlite3.connect(path)) as db:
        return {
            table: {hexed(key) for (key,) in db.execute(f"SELECT {key} FROM {table}")}  # noqa: S608
            for table, key in (
                ("messages", "digest"),
                ("message_links", "chain"),
                ("journal_entries", "digest"),
                ("journal_links", "chain"),
                ("blobs", "digest"),
            )
        }


def used_by(checkpoints: list[Checkpoint]) -> dict[str, set[str]]:
    """
    The keys the store must keep for *checkpoints*, and no more: those of a
    new store holding only them.
    """
    with tempfile.TemporaryDirectory() as name:
        path = Path(name) / "only.db"
        with SQLiteStore(path) as store:
            for checkpoint in checkpoints:
                store.save(checkpoint)
        return contents(path)


class TestRoundTrips:
    @_SETTINGS
    @given(ctx=working_contexts(), key=st.sampled_from([None, b"k" * 32]))
    def test_random_runs_round_trip_through_a_new_store(self, scratch_dir, ctx, key):
        """
        Random runs, saved to a new store (keyed or not) and loaded by another
        opening of the file, load equal to what was saved, list and trace
        their lineage; every digest the file holds is 32 bytes.
        """
        path = fresh_path(scratch_dir)
        run = run_of(ctx)
        with SQLiteStore(path, key=key) as store:
            for checkpoint in run:
                store.save(checkpoint, thread="main")
            store.save(run[-1])  # again: a no-op
        with SQLiteStore(path, key=key) as store:
            assert run == [store.load(checkpoint.id) for checkpoint in run]
            assert [c.id for c in run] == [info.id for info in store.list()]
            assert [c.id for c in run] == [info.id for info in store.lineage(run[-1].id)]
            assert [c.snapshot.digest() for c in run] == [info.digest for info in store.list()]
            assert run[-1].id == store.head("main")
        assert "3" == marker(path)
        assert {("blob", 32)} == digest_kinds(path)

    @_SETTINGS
    @given(ctx=working_contexts())
    def test_random_runs_saved_into_an_earlier_store_keep_its_layout(self, scratch_dir, ctx):
        """
        A store of schema version 2 takes new checkpoints as version 2: its
        marker stays 2, every digest stays 64 characters of text, and both
        its own checkpoints and the new ones load.
        """
        path = fresh_path(scratch_dir)
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.executescript(EARLIER_PACKED.read_text(encoding="utf-8"))
        with SQLiteStore(path) as store:
            earlier = [store.load(info.id) for info in store.list()]
        run = run_of(ctx)
        with SQLiteStore(path) as store:
            for checkpoint in run:
                store.save(checkpoint)
            store.delete(run[1].id)
        with SQLiteStore(path) as store:
            assert earlier == [store.load(c.id) for c in earlier]
            assert [run[0], run[2]] == [store.load(c.id) for c in (run[0], run[2])]
        with SQLiteStore(path, read_only=True) as store:
            assert [*earlier, run[0], run[2]] == [store.load(info.id) for info in store.list()]
        assert "2" == marker(path)
        assert {("text", 64)} == digest_kinds(path)

    def test_a_version_2_store_and_a_new_one_side_by_side(self, scratch_dir):
        """
        One process holding a store of version 2 and a new one keeps each in
        its own layout: a checkpoint saved to both is text in one, bytes in
        the other, and loads from each.
        """
        old, new = fresh_path(scratch_dir), fresh_path(scratch_dir)
        with contextlib.closing(sqlite3.connect(old)) as db:
            db.executescript(EARLIER_PACKED.read_text(encoding="utf-8"))
        run = run_of(WorkingContext().append(Message("user", "hello")))
        with SQLiteStore(old) as first, SQLiteStore(new) as second:
            for checkpoint in run:
                first.save(checkpoint)
                second.save(checkpoint)
            assert run == [first.load(c.id) for c in run] == [second.load(c.id) for c in run]
        assert ("2", "3") == (marker(old), marker(new))
        assert {("text", 64)} == digest_kinds(old)
        assert {("blob", 32)} == digest_kinds(new)


class TestDeletion:
    @_SETTINGS
    @given(ctx=working_contexts(), data=st.data())
    def test_delete_keeps_exactly_what_the_others_use(self, scratch_dir, ctx, data):
        """
        After deleting any checkpoints of a run and a fork of it, the file
        holds exactly the items, links and blobs the remaining ones use (the
        same as a store holding only them), and each of them still loads.
        """
        path = fresh_path(scratch_dir)
        run = run_of(ctx)
        fork = Checkpoint.capture(
            WorkingContext.from_snapshot(run[1].snapshot).append(Message("user", "a fork")),
            parent=run[1],
            metadata={"fork": True},
        )
        every = [*run, fork]
        gone = data.draw(st.sets(st.sampled_from([c.id for c in every])))
        with SQLiteStore(path) as store:
            for checkpoint in every:
                store.save(checkpoint)
            for checkpoint_id in sorted(gone):
                store.delete(checkpoint_id)
            kept = [c for c in every if c.id not in gone]
            assert kept == [store.load(c.id) for c in kept]
        assert used_by(kept) == contents(path)

    @pytest.mark.parametrize("earlier", [False, True])
    def test_saving_another_under_an_id_collects_what_the_first_used(self, scratch_dir, earlier):
        """
        Saving a different checkpoint under an id already saved replaces it,
        in either layout: the file then holds exactly what the checkpoints
        now saved use, and each loads.
        """
        path = fresh_path(scratch_dir)
        if earlier:
            with contextlib.closing(sqlite3.connect(path)) as db:
                db.executescript(EARLIER_PACKED.read_text(encoding="utf-8"))
        with SQLiteStore(path) as store:
            kept_before = [store.load(info.id) for info in store.list()]
        run = run_of(WorkingContext().append(Message("user", "hello")))
        other = long_chain("replacement", 3)
        replacement = attrs.evolve(run[-1], snapshot=other.snapshot)
        with SQLiteStore(path) as store:
            for checkpoint in run:
                store.save(checkpoint)
            store.save(replacement)
            kept = [*kept_before, *run[:-1], replacement]
            assert kept == [store.load(c.id) for c in kept]
        assert used_by(kept) == contents(path)


def damaged_copies() -> Iterator[tuple[str, Any]]:
    """
    Ways to damage one digest of a store of version 3, as (label, new value) makers.
    """
    yield "truncated", lambda value: value[:31] if isinstance(value, bytes) else value[:-1]
    yield "grown", lambda value: value + b"\x00" if isinstance(value, bytes) else value + "0"
    yield "text", _read_key
    yield "upper text", lambda value: str(_read_key(value)).upper()
    yield "integer", lambda _value: 7
    yield "real", lambda _value: 1.5
    yield "empty", lambda _value: b""
    yield "not UTF-8 text", lambda _value: _AsText(b"\xff" * 32)
    yield "NULL", lambda _value: None


class _AsText(bytes):
    """
    Bytes to store as TEXT (SQLite keeps them as they are, UTF-8 or not).
    """


def without_not_null(db: sqlite3.Connection) -> None:
    """
    Drop the NOT NULL constraints of every table, as a damaged file may lack them.
    """
    db.execute("PRAGMA writable_schema = ON")
    db.execute("UPDATE sqlite_master SET sql = replace(sql, ' NOT NULL', '') WHERE type = 'table'")
    db.execute("PRAGMA writable_schema = OFF")
    db.commit()


def damage_each(source: Path, scratch_dir: Path, *, reseal: bool) -> Iterator[tuple[str, Path]]:
    """
    Copies of the store at *source*, each with one digest of one row changed;
    with *reseal*, a changed checkpoint row is sealed again (a forger's row).
    """
    with contextlib.closing(sqlite3.connect(source)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    image = source.read_bytes()
    source = fresh_path(scratch_dir)
    source.write_bytes(image)
    with contextlib.closing(sqlite3.connect(source)) as db:
        without_not_null(db)
    image = source.read_bytes()
    for table, columns in DIGEST_COLUMNS.items():
        for column in columns:
            for label, change in damaged_copies():
                path = fresh_path(scratch_dir)
                path.write_bytes(image)
                with contextlib.closing(sqlite3.connect(path)) as db, db:
                    rowid = "seq" if table == "checkpoints" else "rowid"
                    if table.endswith("_links"):
                        rowid = "chain"
                    found = db.execute(
                        f"SELECT {rowid}, {column} FROM {table} ORDER BY {rowid} DESC LIMIT 1"  # noqa: S608
                    ).fetchone()
                    if found is None:
                        continue
                    where, value = found
                    new = change(value)
                    if new is None and table.endswith("_links") and column == "chain":
                        continue  # the key of a WITHOUT ROWID table is NOT NULL whatever its declaration
                    place = "CAST(? AS TEXT)" if isinstance(new, _AsText) else "?"
                    db.execute(f"UPDATE {table} SET {column} = {place} WHERE {rowid} = ?", (new, where))  # noqa: S608
                    if reseal and table == "checkpoints" and column != "seal" and not isinstance(new, _AsText):
                        row = db.execute(
                            "SELECT id, parent, created_at, metadata, digest, prefix, scratchpad, messages_head,"
                            " message_count, journal_head, journal_count FROM checkpoints WHERE seq = ?",
                            (where,),
                        ).fetchone()
                        shown = [
                            _read_key(field) if index in (4, 5, 6, 7, 9) else field for index, field in enumerate(row)
                        ]
                        db.execute(
                            "UPDATE checkpoints SET seal = ? WHERE seq = ?",
                            (_stored_key(_codec.seal(shown)), where),
                        )
                yield f"{table}.{column} {label}", path


def every_read(store: SQLiteStore, ids: list[str]) -> None:
    """
    Every reading call of *store*; each may refuse with CheckpointError only.
    """
    for call in (store.list, lambda: store.lineage(ids[-1]), lambda: len(store), lambda: store.head("main")):
        with contextlib.suppress(CheckpointError):
            call()
    for checkpoint_id in ids:
        with contextlib.suppress(CheckpointError):
            store.load(checkpoint_id)


class TestDamage:
    @pytest.mark.parametrize("reseal", [False, True])
    @pytest.mark.parametrize("spread", [False, True])
    def test_a_damaged_digest_raises_checkpoint_error_and_changes_nothing(self, scratch_dir, reseal, spread):
        """
        A digest of a store of version 3 truncated, grown, turned into text,
        a number or empty, in any column (in a checkpoint row sealed again or
        not; in a chain that is most of its table or a small part of it):
        every read either succeeds with what was saved or raises
        CheckpointError, and the file is left byte for byte as it was.
        """
        source = fresh_path(scratch_dir)
        run = run_of(WorkingContext().append(Message("user", "hello")), turns=4)
        others = [  # many other chains: the load walks links by a recursive query
            Checkpoint.capture(WorkingContext().append(Message("user", f"other {n}" * 3))) for n in range(12 * spread)
        ]
        with SQLiteStore(source) as store:
            for checkpoint in others:
                store.save(checkpoint)
            for checkpoint in run:
                store.save(checkpoint, thread="main")
        ids = [c.id for c in run]
        builtin: list[str] = []
        for label, path in damage_each(source, scratch_dir, reseal=reseal):
            before = sqlite_rows.file_state(path)
            try:
                with SQLiteStore(path, read_only=True) as store:
                    every_read(store, ids)
                    for checkpoint in run:
                        with contextlib.suppress(CheckpointError):
                            assert checkpoint == store.load(checkpoint.id), label
            except CheckpointError:
                pass
            except Exception as exc:  # collected: every case is reported at once
                builtin.append(f"{label}: {type(exc).__name__}: {exc}")
            assert before == sqlite_rows.file_state(path), label
        assert [] == builtin

    def test_a_link_naming_itself_and_a_huge_count(self, scratch_dir):
        """
        A head link whose prev is its own chain, and a row claiming 2**62
        messages (both sealed again), refuse to load with CheckpointError.
        """
        path = fresh_path(scratch_dir)
        run = run_of(WorkingContext().append(Message("user", "hello")), turns=3)
        with SQLiteStore(path) as store:
            for checkpoint in run:
                store.save(checkpoint)
        head = _stored_key(run[-1].snapshot.chain_digest(len(run[-1].snapshot.messages)))
        with contextlib.closing(sqlite3.connect(path)) as db, db:
            db.execute("UPDATE message_links SET prev = chain, position = 0 WHERE chain = ?", (head,))
            db.execute("UPDATE checkpoints SET message_count = ? WHERE id = ?", (2**62, run[0].id))
            for checkpoint in (run[0],):
                row = db.execute(
                    "SELECT id, parent, created_at, metadata, digest, prefix, scratchpad, messages_head,"
                    " message_count, journal_head, journal_count FROM checkpoints WHERE id = ?",
                    (checkpoint.id,),
                ).fetchone()
                shown = [_read_key(field) if index in (4, 5, 6, 7, 9) else field for index, field in enumerate(row)]
                db.execute(
                    "UPDATE checkpoints SET seal = ? WHERE id = ?", (_stored_key(_codec.seal(shown)), checkpoint.id)
                )
        before = sqlite_rows.file_state(path)
        with SQLiteStore(path) as store:
            with pytest.raises(CheckpointError, match="head link"):
                store.load(run[-1].id)
            with pytest.raises(CheckpointError, match="4611686018427387904"):
                store.load(run[0].id)
            assert run[1] == store.load(run[1].id)
        assert before == sqlite_rows.file_state(path)


class TestWriters:
    def test_threads_saving_into_one_file(self, scratch_dir):
        """
        Four threads, each with its own store on one new file, save their
        own runs at once: every checkpoint loads afterwards, and the file
        holds digests only as 32 bytes.
        """
        path = fresh_path(scratch_dir)
        SQLiteStore(path).close()
        runs = [run_of(WorkingContext().append(Message("user", f"writer {n}")), turns=5) for n in range(4)]
        errors: list[BaseException] = []

        def write(run: list[Checkpoint], thread: str) -> None:
            try:
                with SQLiteStore(path) as store:
                    for checkpoint in run:
                        store.save(checkpoint, thread=thread)
            except BaseException as exc:  # reported below
                errors.append(exc)

        workers = [threading.Thread(target=write, args=(run, f"t{n}")) for n, run in enumerate(runs)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert [] == errors
        with SQLiteStore(path, read_only=True) as store:
            for n, run in enumerate(runs):
                assert run == [store.load(c.id) for c in run]
                assert run[-1].id == store.head(f"t{n}")
        assert {("blob", 32)} == digest_kinds(path)


def long_chain(name: str, count: int) -> Checkpoint:
    """
    One checkpoint of *count* distinct messages (and as many journal entries).
    """
    ctx = WorkingContext()
    for n in range(count):
        ctx.append(Message("user", f"{name} {n}"))
        ctx.journal.record({"name": name, "n": n})
    return Checkpoint.capture(ctx)


class TestReads:
    @pytest.mark.parametrize("earlier", [False, True])
    def test_a_long_chain_that_is_a_small_part_of_its_table(self, scratch_dir, earlier):
        """
        A chain of 600 items in tables of 2,600 is walked by the recursive
        query and its items read by chunked IN queries (500 keys at most):
        it loads equal to what was saved, from a fresh store of either layout.
        """
        path = fresh_path(scratch_dir)
        if earlier:
            with contextlib.closing(sqlite3.connect(path)) as db:
                db.executescript(EARLIER_PACKED.read_text(encoding="utf-8"))
        big, wanted = long_chain("other", 2000), long_chain("wanted", 600)
        with SQLiteStore(path) as store:
            store.save(big)
            store.save(wanted)
        with SQLiteStore(path) as store:
            assert wanted == store.load(wanted.id)
            assert big == store.load(big.id)
            assert wanted == store.load(wanted.id)  # again, from its caches
        assert ("2" if earlier else "3") == marker(path)

    @pytest.mark.parametrize("earlier", [False, True])
    def test_recorded_contexts_share_the_file(self, scratch_dir, earlier):
        """
        A recorded context saved into a store of either layout, next to its
        checkpoints, loads back; deleting checkpoints leaves it, and deleting
        it leaves the checkpoints.
        """
        path = fresh_path(scratch_dir)
        if earlier:
            with contextlib.closing(sqlite3.connect(path)) as db:
                db.executescript(EARLIER_PACKED.read_text(encoding="utf-8"))
        ctx = WorkingContext(record=True, id="run")
        for turn in range(3):
            ctx.append(Message.user(f"question {turn}"), Message.assistant(f"answer {turn}"))
            ctx.note("turn", turn)
        run = run_of(WorkingContext().append(Message("user", "hello")))
        with SQLiteStore(path) as store:
            for checkpoint in run:
                store.save(checkpoint)
            assert "run" == store.save_context(ctx)
            store.delete(run[0].id)
            assert ctx.history == store.load_context("run").history
            store.delete_context("run")
            assert run[1:] == [store.load(c.id) for c in run[1:]]
            assert [] == list(store.list_contexts())
        assert ("2" if earlier else "3") == marker(path)

    def test_read_only_beside_a_writer(self, scratch_dir):
        """
        A store of version 3 opened read-only while a writer holds it open
        (its checkpoints in the write-ahead log) sees every checkpoint, loads
        each, refuses to save, and leaves the file as it was.
        """
        path = fresh_path(scratch_dir)
        run = run_of(WorkingContext().append(Message("user", "hello")), turns=4)
        with SQLiteStore(path) as writer:
            for checkpoint in run:
                writer.save(checkpoint)
            before = sqlite_rows.file_state(path)
            with SQLiteStore(path, read_only=True) as reader:
                assert run == [reader.load(info.id) for info in reader.list()]
                assert [c.id for c in run] == [info.id for info in reader.lineage(run[-1].id)]
                with pytest.raises(CheckpointError, match="read-only"):
                    reader.save(long_chain("new", 2))
            assert before == sqlite_rows.file_state(path)


class TestTextDigests:
    @pytest.mark.parametrize(
        ("table", "column"),
        [
            ("checkpoints", "prefix"),
            ("checkpoints", "messages_head"),
            ("message_links", "chain"),
            ("message_links", "message"),
            ("messages", "digest"),
        ],
    )
    def test_a_digest_kept_as_text_in_a_new_store_is_damage(self, scratch_dir, table, column):
        """
        A store of schema version 3 keeps every digest as 32 bytes: one kept
        as its hexadecimal text instead (which the row's seal does not tell
        apart) is damage, refused with CheckpointError, rather than read as
        the digest it spells while deleting and collecting compare bytes with
        text and would drop what that row uses. The file is left as it was.
        """
        path = fresh_path(scratch_dir)
        alone = Checkpoint.capture(
            WorkingContext(prefix=PrefixContext(system_prompt="its own prompt")).append(Message("user", "only here")),
            metadata={"n": 1},
        )
        other = run_of(WorkingContext().append(Message("user", "hello")), turns=2)
        with SQLiteStore(path) as store:
            for checkpoint in [alone, *other]:
                store.save(checkpoint)
        with contextlib.closing(sqlite3.connect(path)) as db, db:
            if table == "checkpoints":
                db.execute(f"UPDATE checkpoints SET {column} = lower(hex({column})) WHERE id = ?", (alone.id,))  # noqa: S608
            else:
                key = (
                    alone.snapshot.chain_digest(1) if table == "message_links" else alone.snapshot.messages[0].digest()
                )
                where = "chain" if table == "message_links" else "digest"
                db.execute(
                    f"UPDATE {table} SET {column} = lower(hex({column})) WHERE {where} = ?",  # noqa: S608
                    (bytes.fromhex(key),),
                )
        before = sqlite_rows.file_state(path)
        with SQLiteStore(path) as store:
            with pytest.raises(CheckpointError, match=f"{alone.id}"):
                store.load(alone.id)
            assert other == [store.load(c.id) for c in other]
        assert before == sqlite_rows.file_state(path)
