"""
The SQLite store: its tables, settings and text encodings, keyed seals,
read-only storage and earlier schema versions; and the store under damage
(foreign, newer, truncated and fuzzed databases, a writer killed mid-save,
two writer processes at once).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import sqlite_rows
from tests.persistence.runs import arguments_run, run_context
from tests.persistence.stored import fresh_path, mutation, reseal, rows, saved_pair, sqlite_factory
from tests.stores import DIGEST_COLUMNS
from tests.strategies import working_contexts
from workingctx import Checkpoint, Message, SQLiteStore
from workingctx.context import WorkingContext
from workingctx.exceptions import CheckpointError, PayloadTypeError
from workingctx.persistence import CheckpointInfo
from workingctx.persistence.sqlite import _checksum


def dump(path: Path) -> list[str]:
    with sqlite_rows.connect(path) as db:
        return list(db.iterdump())


class TestRefusedDatabases:
    def test_not_a_database(self, scratch_dir):
        """
        A file that is not SQLite is refused, and left as it was.
        """
        path = fresh_path(scratch_dir)
        path.write_bytes(b"this is a text file, not a database\n" * 100)
        before = sqlite_rows.file_state(path)
        with pytest.raises(CheckpointError, match="not a readable SQLite database"):
            SQLiteStore(path)
        assert before == sqlite_rows.file_state(path)

    def test_foreign_database(self, scratch_dir):
        """
        A SQLite database of someone else's is refused, and left as it was.
        """
        path = fresh_path(scratch_dir)
        with sqlite_rows.connect(path) as db:
            db.execute("CREATE TABLE users (name TEXT)")
            db.execute("INSERT INTO users VALUES ('ada')")
        db.close()
        before = sqlite_rows.file_state(path)
        with pytest.raises(CheckpointError, match="not a workingctx checkpoint store") as info:
            SQLiteStore(path)
        assert info.value.path == "workingctx_store"
        assert before == sqlite_rows.file_state(path)

    @pytest.mark.parametrize(
        ("key", "value", "match"),
        [
            ("schema_version", "99", "newer workingctx .schema version 99"),
            ("schema_version", "one", "damaged schema version"),
            ("format", "someone.else", "its format is 'someone.else'"),
        ],
    )
    def test_newer_or_foreign_marker(self, scratch_dir, key, value, match):
        """
        A newer schema version or another format is refused on open and on
        every later operation; the file is not changed.
        """
        path = fresh_path(scratch_dir)
        checkpoint = Checkpoint.capture(WorkingContext().append(Message("user", "hi")))
        store = SQLiteStore(path)
        store.save(checkpoint)
        with sqlite_rows.connect(path) as db:
            db.execute("UPDATE workingctx_store SET value = ? WHERE key = ?", (value, key))
        db.close()
        with pytest.raises(CheckpointError, match=match):
            store.load(checkpoint.id)
        with pytest.raises(CheckpointError, match=match):
            store.save(Checkpoint.capture(WorkingContext()))
        store.close()
        before = sqlite_rows.file_state(path)
        with pytest.raises(CheckpointError, match=match):
            SQLiteStore(path)
        assert before == sqlite_rows.file_state(path)

    def test_truncated_file(self, scratch_dir):
        """
        A database cut short raises CheckpointError when it is opened or read.
        """
        path = fresh_path(scratch_dir)
        ctx = WorkingContext()
        for turn in range(60):
            ctx.append(Message("user", f"question {turn} " + "x" * 300), Message("assistant", "y" * 300))
        checkpoint = Checkpoint.capture(ctx)
        with SQLiteStore(path) as store:
            store.save(checkpoint)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        with pytest.raises(CheckpointError):  # noqa: PT012  # either step may be the one to notice
            store = SQLiteStore(path)
            store.load(checkpoint.id)


# -- fuzzing the stored payloads ---------------------------------------------------------

TABLES = {
    "checkpoints": [
        "id",
        "parent",
        "created_at",
        "created_ts",
        "metadata",
        "digest",
        "prefix",
        "scratchpad",
        "messages_head",
        "message_count",
        "journal_head",
        "journal_count",
        "seal",
    ],
    "messages": ["digest", "data", "checksum"],
    "message_links": ["chain", "prev", "message", "position"],
    "journal_entries": ["digest", "data", "checksum"],
    "journal_links": ["chain", "prev", "entry", "position"],
    "blobs": ["digest", "data"],
    "workingctx_store": ["key", "value"],
}


KEYS = {"checkpoints": "seq", "workingctx_store": "key"}


def damage(path: Path, rng: random.Random) -> str:
    """
    One random change to one stored row: a column rewritten, or the row deleted.
    """
    table = rng.choice(sorted(TABLES))
    key = KEYS.get(table, TABLES[table][0])
    columns = TABLES[table]
    db = sqlite_rows.connect(path)
    try:
        with db:
            rows = db.execute(f"SELECT {key}, {', '.join(columns)} FROM {table}").fetchall()  # noqa: S608  # test's own names
            if not rows:
                return f"{table}: empty"
            row_key, *values = rng.choice(rows)
            if rng.random() < 0.15:
                db.execute(f"DELETE FROM {table} WHERE {key} = ?", (row_key,))  # noqa: S608
                return f"{table}: row {row_key!r} deleted"
            index = rng.randrange(len(columns))
            new = mutation(values[index], rng)
            db.execute(f"UPDATE OR IGNORE {table} SET {columns[index]} = ? WHERE {key} = ?", (new, row_key))  # noqa: S608
            return f"{table}.{columns[index]} of row {row_key!r}: {values[index]!r:.60} -> {new!r:.60}"
    finally:
        db.close()


def check_refusal(exc: CheckpointError, before: list[str], path: Path, notes: list[str]) -> None:
    """
    Fail unless a refused database carries a path and was not changed.
    """
    assert exc.path, notes
    assert before == dump(path), notes


class TestFuzzedPayloads:
    @pytest.mark.parametrize("beside", [0, 30], ids=["alone", "beside-a-long-run"])
    @given(ctx=working_contexts(max_turns=2), seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 3))
    def test_damaged_rows_raise_only_checkpoint_error(self, scratch_dir, beside, ctx, seed, rounds):
        """
        After random damage to stored rows, loading, listing and lineage either
        give exactly what was saved or raise CheckpointError, and leave the
        database as it was; whether the checkpoints are the whole file (read
        table by table) or a small part of it (read link by link).
        """
        path = fresh_path(scratch_dir)
        others: set[str] = set()
        if beside:
            long = WorkingContext()
            for turn in range(beside):
                long.append(Message("user", f"question {turn}"), Message("assistant", f"answer {turn}"))
                long.journal.record({"turn": turn})
            with SQLiteStore(path) as store:
                others.add(store.save(Checkpoint.capture(long)))
        saved = saved_pair(path, ctx)
        rng = random.Random(seed)
        notes = [damage(path, rng) for _ in range(rounds)]
        before = dump(path)
        try:
            store = SQLiteStore(path)
        except CheckpointError as exc:
            check_refusal(exc, before, path, notes)
            return
        with store:
            for checkpoint in saved:
                try:
                    loaded = store.load(checkpoint.id)
                except CheckpointError:
                    continue
                assert checkpoint == loaded, notes
                assert checkpoint.snapshot.digest() == loaded.snapshot.digest(), notes
            for operation in (store.list, lambda: store.lineage(saved[1].id)):
                try:
                    infos = operation()
                except CheckpointError:
                    continue
                assert {info.id for info in infos} <= {checkpoint.id for checkpoint in saved} | others, notes
        assert before == dump(path), notes

    def test_damaged_message_named(self, scratch_dir):
        """
        A stored message that no longer reads as a message (its checksum
        rewritten to match) is reported with its table, key and path.
        """
        path = fresh_path(scratch_dir)
        _, second = saved_pair(path, WorkingContext().append(Message("user", "hello")))
        digest = second.snapshot.messages[2].digest()
        text = '{"role": "user", "content": 5}'
        with sqlite_rows.connect(path) as db:
            db.execute(
                "UPDATE messages SET data = ?, checksum = ? WHERE digest = ?", (text, _checksum(digest, text), digest)
            )
        db.close()
        with SQLiteStore(path) as store, pytest.raises(CheckpointError) as info:
            store.load(second.id)
        assert info.value.path == "$.snapshot.messages[2].content"
        assert f"table messages, key {digest!r}" in str(info.value)

    def test_edited_message_caught_by_its_checksum(self, scratch_dir):
        """
        A message edited into another valid message does not load silently.
        """
        path = fresh_path(scratch_dir)
        _, second = saved_pair(path, WorkingContext().append(Message("user", "hello")))
        digest = second.snapshot.messages[0].digest()
        with sqlite_rows.connect(path) as db:
            db.execute("UPDATE messages SET data = ? WHERE digest = ?", ('{"role":"user","content":"bye"}', digest))
        db.close()
        with SQLiteStore(path) as store, pytest.raises(CheckpointError, match="does not match its checksum") as info:
            store.load(second.id)
        assert info.value.path == "$.snapshot.messages[0]"

    def test_swapped_link_caught_by_the_chain(self, scratch_dir):
        """
        A link pointed at another stored message breaks the chain and is reported.
        """
        path = fresh_path(scratch_dir)
        _, second = saved_pair(path, WorkingContext().append(Message("user", "hello")))
        other = second.snapshot.messages[1].digest()
        chain = second.snapshot.chain_digest(1)
        with sqlite_rows.connect(path) as db:
            db.execute("UPDATE message_links SET message = ? WHERE chain = ?", (other, chain))
        db.close()
        with SQLiteStore(path) as store, pytest.raises(CheckpointError, match="link does not match") as info:
            store.load(second.id)
        assert info.value.path == "$.snapshot.messages[0]"


# -- processes --------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys
    from workingctx import Checkpoint, Message, PrefixContext, SQLiteStore, ToolCall
    from workingctx.context import WorkingContext

    path, name, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = SQLiteStore(path)
    ctx = WorkingContext(prefix=PrefixContext("You are careful."))
    parent = None
    turn = 0
    while limit < 0 or turn < limit:
        ctx.append(
            Message("user", f"{name} question {turn} " + "x" * 3000),
            Message.assistant(tool_calls=[ToolCall(f"{name}-{turn}", "lookup", {"q": "y" * 2000})]),
            Message.tool("shared tool output " + "z" * 3000, call_id=f"{name}-{turn}"),
            Message("assistant", "the same answer every time"),
        )
        ctx.note("turn", turn)
        ctx.journal.record({"writer": name, "turn": turn})
        checkpoint = Checkpoint.capture(ctx, parent=parent, metadata={"writer": name, "turn": turn})
        store.save(checkpoint)
        print(checkpoint.id, turn, flush=True)
        parent = checkpoint.id
        turn += 1
    """
)


def start_writer(path: Path, name: str, limit: int) -> subprocess.Popen[str]:
    # Run from the store's directory, not the checkout: the writer imports the
    # workingctx the tests run against (the installed wheel under scripts/test).
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), name, str(limit)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=path.parent,
    )


class TestProcesses:
    @pytest.mark.parametrize("seed", range(3))
    def test_sigkill_mid_save_loses_nothing(self, scratch_dir, seed):
        """
        A writer killed with SIGKILL while saving leaves a database that passes
        integrity_check, still loads every checkpoint it reported saved, and
        holds no half-saved checkpoint.
        """
        rng = random.Random(seed)
        path = fresh_path(scratch_dir)
        writer = start_writer(path, "w", -1)
        assert writer.stdout is not None
        lines = [writer.stdout.readline() for _ in range(3 + rng.randrange(5))]
        time.sleep(rng.uniform(0, 0.05))
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
        rest = writer.stdout.read()  # the same buffered reader: lines it read ahead are kept
        assert writer.stderr is not None
        errors = writer.stderr.read()
        writer.stdout.close()
        writer.stderr.close()
        assert writer.returncode == -signal.SIGKILL, errors
        # a line the kill cut short (no newline yet) was never fully reported
        written = "".join(lines) + rest
        reported = [line.split() for line in written.splitlines(keepends=True) if line.endswith("\n") and line.strip()]
        with sqlite_rows.connect(path) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        db.close()
        with SQLiteStore(path) as store:
            last_id, last_turn = reported[-1]
            last = store.load(last_id)
            assert last.metadata == {"writer": "w", "turn": int(last_turn)}
            assert len(last.snapshot.messages) == 4 * (int(last_turn) + 1)
            infos = store.list()
            assert len(infos) in {len(reported), len(reported) + 1}  # the last save may have committed unreported
            for info in infos:
                assert store.load(info.id).snapshot.digest() == info.digest
            assert len(store.lineage(infos[-1].id)) == len(infos)

    def test_a_new_file_another_connection_is_creating_is_waited_for(self, scratch_dir):
        """
        A store opened on a new file while another connection holds its write
        lock, as when two processes open one new store together, waits for
        the lock within its timeout: SQLite refuses at once, without waiting,
        to turn the file to WAL meanwhile.
        """
        path = fresh_path(scratch_dir)
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")
        release = threading.Timer(0.3, holder.execute, ("ROLLBACK",))
        release.start()
        try:
            with SQLiteStore(path, timeout=30) as store:
                saved = store.save(Checkpoint.capture(run_context(2)))
                assert store.load(saved).snapshot == run_context(2).freeze()
        finally:
            release.join()
            holder.close()

    def test_a_lock_held_past_the_timeout_is_named_and_leaves_the_file_as_it_was(self, scratch_dir):
        """
        Past its timeout the store gives up, naming the lock, and writes nothing: the file opens afterwards.
        """
        path = fresh_path(scratch_dir)
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(CheckpointError, match="database is locked"):
                SQLiteStore(path, timeout=0.2)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        with contextlib.closing(sqlite3.connect(path)) as db:
            assert db.execute("SELECT name FROM sqlite_master").fetchall() == []
        with SQLiteStore(path) as store:
            assert store.list() == []

    def test_two_writers_lose_nothing(self, scratch_dir):
        """
        Two processes saving to one new database at once: every checkpoint of
        both is there and loads, and shared messages are stored once.
        """
        path = fresh_path(scratch_dir)
        writers = [start_writer(path, name, 25) for name in ("a", "b")]
        outputs = [writer.communicate(timeout=120) for writer in writers]
        for writer, (_, errors) in zip(writers, outputs, strict=True):
            assert writer.returncode == 0, errors
        with SQLiteStore(path) as store:
            infos = store.list()
            assert len(infos) == 50
            for (out, _), name in zip(outputs, ("a", "b"), strict=True):
                ids = [line.split()[0] for line in out.splitlines()]
                assert [info.id for info in store.lineage(ids[-1])] == ids
                last = store.load(ids[-1])
                assert last.metadata == {"writer": name, "turn": 24}
                assert len(last.snapshot.messages) == 100
        with sqlite_rows.connect(path) as db:
            distinct = db.execute("SELECT count(*) FROM messages").fetchone()[0]
        db.close()
        # per writer and turn: a question, a call and its result; shared by every turn of both: the answer
        assert distinct == 2 * 25 * 3 + 1


# -- crafted stores, keyed seals, read-only storage -----------------------------------------


class VMSteps:
    """
    Counts SQLite virtual-machine steps (in thousands) on a store's connection,
    and interrupts the statement past *limit*: work measured without a clock.
    """

    def __init__(self, store: SQLiteStore, limit: int) -> None:
        self.thousands = 0
        self.limit = limit
        store._db.set_progress_handler(self._tick, 1000)

    def _tick(self) -> int:
        self.thousands += 1
        return int(self.thousands > self.limit)


class TestCraftedStores:
    @pytest.mark.parametrize("count", [1_000_000, 2**62])
    def test_a_huge_count_over_a_self_looping_link_costs_what_the_file_holds(self, scratch_dir, count):
        """
        A row resealed with a huge message count whose head link names itself
        is refused from what the file holds: the walk does not build `count`
        rows first (it stays within a few thousand VM steps, where it used to
        run through millions).
        """
        path = fresh_path(scratch_dir)
        _, second = saved_pair(path, WorkingContext().append(Message("user", "hello")))
        head = second.snapshot.chain_digest()
        with sqlite_rows.connect(path) as db:
            db.execute("UPDATE message_links SET prev = chain WHERE chain = ?", (head,))
        db.close()
        reseal(path, second.id, message_count=count)
        with SQLiteStore(path) as store:
            steps = VMSteps(store, limit=200)
            with pytest.raises(CheckpointError, match=r"head link .* is at position 2") as info:
                store.load(second.id)
            assert steps.thousands < 200
        assert info.value.path == "$.snapshot.messages"

    def test_a_looping_journal_chain_is_refused_as_cheaply(self, scratch_dir):
        """
        The journal's chain is walked the same way: a huge count over a
        self-looping link is refused without walking it.
        """
        path = fresh_path(scratch_dir)
        _, second = saved_pair(path, WorkingContext().append(Message("user", "hello")))
        with sqlite_rows.connect(path) as db:
            (head,) = db.execute("SELECT journal_head FROM checkpoints WHERE id = ?", (second.id,)).fetchone()
            db.execute("UPDATE journal_links SET prev = chain WHERE chain = ?", (head,))
        db.close()
        reseal(path, second.id, journal_count=10**6)
        with SQLiteStore(path) as store:
            steps = VMSteps(store, limit=200)
            with pytest.raises(CheckpointError, match="head link") as info:
                store.load(second.id)
            assert steps.thousands < 200
        assert info.value.path == "$.snapshot.journal"

    def test_a_forged_message_under_a_real_digest_is_refused(self, scratch_dir):
        """
        A stored message replaced by another one, with its checksum recomputed,
        is refused: each message's digest is computed again on load, not taken
        from the row's key.
        """
        path = fresh_path(scratch_dir)
        _, second = saved_pair(path, WorkingContext().append(Message("user", "Transfer $10 to Bob.")))
        digest = second.snapshot.messages[0].digest()
        forged = '{"role":"user","content":"Transfer $10000 to Mallory."}'
        with sqlite_rows.connect(path) as db:
            db.execute(
                "UPDATE messages SET data = ?, checksum = ? WHERE digest = ?",
                (forged, _checksum(digest, forged), digest),
            )
        db.close()
        with SQLiteStore(path) as store, pytest.raises(CheckpointError, match="does not match its digest") as info:
            store.load(second.id)
        assert info.value.path == "$.snapshot.messages[0]"

    def test_a_forged_journal_entry_is_refused(self, scratch_dir):
        """
        A journal entry replaced by another one with a recomputed checksum is
        refused: its digest is computed again on load.
        """
        path = fresh_path(scratch_dir)
        ctx = WorkingContext().append(Message("user", "hello"))
        ctx.journal.record({"kind": "approved", "by": "alice"})
        _, second = saved_pair(path, ctx)
        with sqlite_rows.connect(path) as db:
            digest, _ = db.execute("SELECT digest, data FROM journal_entries WHERE data LIKE '%alice%'").fetchone()
            forged = '{"kind":"approved","by":"mallory"}'
            db.execute(
                "UPDATE journal_entries SET data = ?, checksum = ? WHERE digest = ?",
                (forged, _checksum(digest, forged), digest),
            )
        db.close()
        with SQLiteStore(path) as store, pytest.raises(CheckpointError, match="does not match its digest") as info:
            store.load(second.id)
        assert info.value.path == "$.snapshot.journal[0]"


class TestKeyedSeal:
    KEY = b"0123456789abcdef-run-archive-key"

    def test_a_keyed_store_reads_what_it_wrote(self, scratch_dir):
        """
        Rows written with a key load, list and trace lineage with the same key.
        """
        path = fresh_path(scratch_dir)
        ctx = WorkingContext().append(Message("user", "hello"))
        first = Checkpoint.capture(ctx)
        second = Checkpoint.capture(ctx.append(Message("assistant", "hi")), parent=first)
        with SQLiteStore(path, key=self.KEY) as store:
            store.save(first)
            store.save(second)
        with SQLiteStore(path, key=self.KEY.decode()) as store:
            assert second == store.load(second.id)
            assert [first.id, second.id] == [info.id for info in store.lineage(second.id)]
            assert 2 == len(store.list())

    def test_a_row_forged_without_the_key_is_refused(self, scratch_dir):
        """
        Whoever can write the file but lacks the key can reseal a row, or add a
        whole checkpoint of their own: a keyed store refuses both on load, and
        list() leaves both out and names them.
        """
        path = fresh_path(scratch_dir)
        ctx = WorkingContext().append(Message("user", "hello"))
        genuine = Checkpoint.capture(ctx)
        with SQLiteStore(path, key=self.KEY) as store:
            store.save(genuine)
        reseal(path, genuine.id, metadata='{"approved":true}')
        planted = Checkpoint.capture(WorkingContext().append(Message("user", "planted")))
        with SQLiteStore(path) as unkeyed:
            unkeyed.save(planted)
        with SQLiteStore(path, key=self.KEY) as store:
            for checkpoint_id in (genuine.id, planted.id):
                with pytest.raises(CheckpointError, match="not sealed with this store's key"):
                    store.load(checkpoint_id)
            listing = store.list()
            assert [] == listing
            assert {genuine.id, planted.id} == set(listing.damaged)
            assert all("not sealed with this store's key" in str(error) for error in listing.damaged.values())

    def test_a_wrong_key_or_no_key_is_refused_clearly(self, scratch_dir):
        """
        A keyed row read with another key does not match its seal; read with
        no key, the error says to pass one.
        """
        path = fresh_path(scratch_dir)
        checkpoint = Checkpoint.capture(WorkingContext().append(Message("user", "hello")))
        with SQLiteStore(path, key=self.KEY) as store:
            store.save(checkpoint)
        with (
            SQLiteStore(path, key=b"another key of 16+ bytes") as store,
            pytest.raises(CheckpointError, match="does not match its seal"),
        ):
            store.load(checkpoint.id)
        with SQLiteStore(path) as store, pytest.raises(CheckpointError, match=r"open the store with key=\.\.\."):
            store.load(checkpoint.id)

    @pytest.mark.parametrize(
        ("key", "error", "match"),
        [(12345, TypeError, "key must be bytes or str"), (b"short", ValueError, "at least 16 bytes")],
    )
    def test_bad_keys_are_refused(self, scratch_dir, key, error, match):
        """
        A key that is not bytes or text, or too short to be secret, is refused before the file is opened.
        """
        path = fresh_path(scratch_dir)
        with pytest.raises(error, match=match):
            SQLiteStore(path, key=key)
        assert not path.exists()

    def test_the_key_never_shows_in_the_repr(self, scratch_dir):
        """
        The repr says a key is set, not what it is.
        """
        with SQLiteStore(fresh_path(scratch_dir), key=self.KEY) as store:
            assert "keyed=True" in repr(store)
            assert self.KEY.decode() not in repr(store)


READ_ONLY_SCRIPT = """
import sys
from workingctx import Checkpoint, SQLiteStore, WorkingContext
from workingctx.exceptions import CheckpointError
store = SQLiteStore(sys.argv[1])
print(store.read_only, [info.id for info in store.list()], store.load(sys.argv[2]).snapshot.messages[0].content)
for attempt in (lambda: store.save(Checkpoint.capture(WorkingContext())), lambda: store.delete(sys.argv[2])):
    try:
        attempt()
    except CheckpointError as exc:
        print("refused:", exc)
"""


class TestReadOnlyStorage:
    def test_read_only_true_reads_and_refuses_writes(self, scratch_dir):
        """
        A store opened with read_only=True lists and loads; save() and delete()
        raise CheckpointError saying why, and the file is not changed.
        """
        path = fresh_path(scratch_dir)
        first, second = saved_pair(path, WorkingContext().append(Message("user", "hello")))
        before = sqlite_rows.file_state(path)
        with SQLiteStore(path, read_only=True) as store:
            assert store.read_only
            assert [first.id, second.id] == [info.id for info in store.list()]
            assert second == store.load(second.id)
            with pytest.raises(CheckpointError, match=r"is read-only .*read_only=True.*save\(\) and delete\(\)"):
                store.save(Checkpoint.capture(WorkingContext()))
            with pytest.raises(CheckpointError, match="is read-only"):
                store.delete(first.id)
            assert "read_only=True" in repr(store)
        assert before == sqlite_rows.file_state(path)

    def test_read_only_of_a_missing_file_is_refused(self, scratch_dir):
        """
        read_only=True never creates a file.
        """
        path = fresh_path(scratch_dir)
        with pytest.raises(CheckpointError, match="no such file"):
            SQLiteStore(path, read_only=True)
        assert not path.exists()

    def test_an_archived_run_on_unwritable_storage_can_be_read(self, tmp_path):
        """
        A store on a read-only file system (an archived run) opens read-only by
        itself: list() and load() work, save() and delete() fail clearly.
        The file system is made read-only in a mount namespace of its own
        (root writes through file modes); without one, by file modes.
        """
        directory = tmp_path / "archive"
        directory.mkdir()
        path = directory / "run.db"
        _, second = saved_pair(path, WorkingContext().append(Message("user", "hello")))
        before = sqlite_rows.file_state(path)
        command = [sys.executable, "-c", READ_ONLY_SCRIPT, str(path), second.id]
        unshare = shutil.which("unshare")
        if unshare is not None and 0 == subprocess.run([unshare, "-rm", "true"], check=False).returncode:
            remount = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" && exec "$@"'
            command = [unshare, "-rm", "sh", "-c", remount, str(directory), *command]
        elif os.geteuid() == 0:
            pytest.skip("running as root without user namespaces: cannot make storage unwritable")
        path.chmod(0o444)
        directory.chmod(0o555)
        try:
            result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=tmp_path)
        finally:
            directory.chmod(0o755)
        assert 0 == result.returncode, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0].startswith("True [")
        assert second.id in lines[0]
        assert lines[0].endswith("hello")
        assert 2 == sum("refused: the checkpoint store" in line and "is read-only" in line for line in lines)
        assert before == sqlite_rows.file_state(path)


KILLED_WRITER = """
import os, signal, sys
from workingctx import Checkpoint, Message, SQLiteStore, WorkingContext
ctx, parent = WorkingContext(), None
def turns(store, count):
    global parent
    for _ in range(count):
        ctx.append(Message("user", f"question {len(ctx.freeze().messages)}"), Message("assistant", "answer"))
        parent = Checkpoint.capture(ctx, parent=parent)
        store.save(parent, thread="run")
        print(parent.id, flush=True)
with SQLiteStore(sys.argv[1]) as store:  # closed: these three are in the file itself
    turns(store, 3)
turns(SQLiteStore(sys.argv[1]), 3)  # these three only in its write-ahead log
os.kill(os.getpid(), signal.SIGKILL)
"""

WAL_READER = """
import json, sys
from workingctx import SQLiteStore
from workingctx.exceptions import CheckpointError
try:
    with SQLiteStore(sys.argv[1], **json.loads(sys.argv[2])) as store:
        infos = store.list()
        last = store.load(infos[-1].id)
        print(json.dumps({"read_only": store.read_only, "ids": [info.id for info in infos],
                          "head": store.head("run"), "messages": len(last.snapshot.messages)}))
except CheckpointError as exc:
    print(json.dumps({"refused": str(exc), "path": exc.path}))
"""


def python(script: str, *args: str, cwd: Path, wrap: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """
    Run *script* in a new Python process (inside *wrap*, a command that runs
    what follows it), with this checkout importable.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]), *sys.path])}
    command = [*(wrap or []), sys.executable, "-c", script, *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, cwd=cwd, env=env, timeout=120)


def killed_writers_archive(tmp_path: Path, shm: str = "none") -> tuple[Path, list[str]]:
    """
    A writer that saved six checkpoints (three checkpointed into the file,
    three only in its write-ahead log) and was killed with SIGKILL; its file
    and its ``-wal`` (not its ``-shm``) copied to an archive directory, as a
    backup of a crashed run is; with *shm* ``"copied"`` its ``-shm`` too, with
    ``"zeroed"`` an ``-shm`` of zeros in its place (a stale or damaged index).
    Returns the copy and the ids, in order.
    """
    live = tmp_path / "live"
    live.mkdir()
    result = python(KILLED_WRITER, str(live / "run.db"), cwd=tmp_path)
    assert -signal.SIGKILL == result.returncode, result.stderr
    ids = result.stdout.split()
    assert 6 == len(ids)
    archive = tmp_path / "archive"
    archive.mkdir()
    for name in ("run.db", "run.db-wal"):
        shutil.copyfile(live / name, archive / name)
    if shm == "copied":
        shutil.copyfile(live / "run.db-shm", archive / "run.db-shm")
    elif shm == "zeroed":
        (archive / "run.db-shm").write_bytes(bytes((live / "run.db-shm").stat().st_size))
    assert (archive / "run.db-wal").stat().st_size > 0
    # the file alone (what opening it as immutable shows) holds the first three only
    uri = (archive / "run.db").absolute().as_uri() + "?mode=ro&immutable=1"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
        assert 3 == db.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
    return archive / "run.db", ids


def read_only_mount() -> list[str] | None:
    """
    A command that runs what follows it with ``$0`` remounted read-only in a
    mount namespace of its own (root writes through file modes), or None.
    """
    unshare = shutil.which("unshare")
    if unshare is None or 0 != subprocess.run([unshare, "-rm", "true"], check=False).returncode:
        return None
    remount = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" && exec "$@"'
    return [unshare, "-rm", "sh", "-c", remount]


class TestReadOnlyWriteAheadLog:
    """
    Issue 26, point 7: a read-only store with a ``-wal`` beside it shows
    everything the log holds, or is refused saying why, never an older head.
    """

    @pytest.mark.parametrize("shm", ["none", "copied", "zeroed"])
    def test_read_only_storage_shows_every_checkpoint_the_log_holds(self, tmp_path, shm):
        """
        A killed writer's file and -wal on read-only storage (with no -shm, and
        none can be made; with its -shm copied too; with an -shm of zeros): the
        store opens read-only by itself and with read_only=True, lists all six
        checkpoints with the newest head, loads the newest, and creates or
        changes no file; read_only=False is refused, saying why.
        """
        path, ids = killed_writers_archive(tmp_path, shm)
        names = sorted(item.name for item in path.parent.iterdir())
        before = sqlite_rows.file_state(path)
        mount = read_only_mount()
        if mount is None:
            if os.geteuid() == 0:
                pytest.skip("running as root without user namespaces: cannot make storage unwritable")
            path.chmod(0o444)
            Path(f"{path}-wal").chmod(0o444)
            path.parent.chmod(0o555)
        try:
            for options in ("{}", '{"read_only": true}'):
                wrap = None if mount is None else [*mount, str(path.parent)]
                result = python(WAL_READER, str(path), options, cwd=tmp_path, wrap=wrap)
                assert 0 == result.returncode, result.stderr
                shown = json.loads(result.stdout)
                assert {"read_only": True, "ids": ids, "head": ids[-1], "messages": 12} == shown
            refused = python(WAL_READER, str(path), '{"read_only": false}', cwd=tmp_path, wrap=wrap)
            assert "cannot open the checkpoint store" in json.loads(refused.stdout)["refused"]
            assert "for writing" in json.loads(refused.stdout)["refused"]
        finally:
            path.parent.chmod(0o755)
        assert names == sorted(item.name for item in path.parent.iterdir())
        assert before == sqlite_rows.file_state(path)

    def test_read_only_true_beside_a_log_shows_every_checkpoint(self, tmp_path):
        """
        The same copy on writable storage, opened with read_only=True: all six
        checkpoints and the newest head; the file and its log are not changed.
        """
        path, ids = killed_writers_archive(tmp_path)
        before = sqlite_rows.file_state(path)
        with SQLiteStore(path, read_only=True) as store:
            assert ids == [info.id for info in store.list()]
            assert ids[-1] == store.head("run")
            assert 12 == len(store.load(ids[-1]).snapshot.messages)
        assert before == sqlite_rows.file_state(path)

    def test_a_log_that_cannot_be_read_is_refused_saying_why(self, tmp_path):
        """
        A -wal SQLite cannot read (here a directory in its place) is not
        skipped: opening read-only raises CheckpointError naming the log and
        saying to copy both files to writable storage; nothing is created.
        """
        path, _ = killed_writers_archive(tmp_path)
        wal = Path(f"{path}-wal")
        wal.unlink()
        wal.mkdir()
        (wal / "x").write_text("not a log")
        before = path.read_bytes()
        with pytest.raises(CheckpointError, match=r"write-ahead log .*run\.db-wal.* older head\. Copy") as info:
            SQLiteStore(path, read_only=True)
        assert "-wal" == info.value.path
        assert before == path.read_bytes()
        assert not Path(f"{path}-shm").is_file()

    def test_an_empty_log_is_nothing_to_miss(self, tmp_path):
        """
        A store closed cleanly beside an empty -wal on read-only storage reads as it is.
        """
        path = tmp_path / "archive" / "run.db"
        path.parent.mkdir()
        first, second = saved_pair(path, WorkingContext().append(Message("user", "hello")))
        Path(f"{path}-wal").write_bytes(b"")
        mount = read_only_mount()
        if mount is None:
            pytest.skip("needs a mount namespace to make storage unwritable")
        result = python(WAL_READER, str(path), "{}", cwd=tmp_path, wrap=[*mount, str(path.parent)])
        assert 0 == result.returncode, result.stderr
        shown = json.loads(result.stdout)
        assert [first.id, second.id] == shown["ids"]
        assert shown["read_only"]


def raw_rows(path: Path) -> dict[str, list[str]]:
    """
    Every row of every table, read as bytes (text that is not UTF-8 included).
    """
    with contextlib.closing(sqlite_rows.connect(path)) as db:
        tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        db.text_factory = bytes
        return {table: sorted(map(repr, db.execute(f'SELECT * FROM "{table}"'))) for table in tables}  # noqa: S608


class TestRowsDamagedByHand:
    """
    Issue 26, point 7: one row damaged by hand never hides the others.
    """

    @pytest.mark.parametrize(
        ("statement", "match"),
        [
            ("UPDATE checkpoints SET metadata = '{bad json' WHERE id = ?", "does not match its seal"),
            ("UPDATE checkpoints SET message_count = 'many' WHERE id = ?", "does not match its seal"),
            ("UPDATE checkpoints SET digest = '0000' WHERE id = ?", "does not match its seal"),
            ("UPDATE checkpoints SET created_at = 5 WHERE id = ?", "does not match its seal"),
            ("UPDATE checkpoints SET id = X'FF' || id WHERE id = ?", "does not match its seal"),
        ],
        ids=["bad-json", "wrong-type", "bad-digest", "number-for-time", "id-not-text"],
    )
    def test_list_returns_the_intact_rows_and_names_the_damaged_one(self, scratch_dir, statement, match):
        """
        A row edited by hand (bad JSON, a wrong type, a bad digest, an id that
        is not text) is left out of list() and named with the error that says
        what is wrong; the other row lists and loads; nothing changes.
        """
        path = fresh_path(scratch_dir)
        first, second = saved_pair(path, WorkingContext().append(Message("user", "hi")))
        with contextlib.closing(sqlite_rows.connect(path)) as db, db:
            db.execute(statement, (first.id,))
        before = raw_rows(path)
        with SQLiteStore(path) as store:
            listing = store.list()
            assert [second.id] == [info.id for info in listing]
            [(name, error)] = listing.damaged.items()
            assert first.id in name
            assert re.search(match, str(error))
            assert name in str(error)
            assert second == store.load(second.id)
            assert [second.id] == [info.id for info in store.lineage(second.id)]
        assert before == raw_rows(path)

    @pytest.mark.parametrize("value", ["CAST(X'FF31' AS TEXT)", "X'31'", "'9' || printf('%.5000c', '9')", "'1e0'"])
    def test_an_unreadable_schema_version_is_a_checkpoint_error(self, scratch_dir, value):
        """
        A schema version that is not UTF-8 text, not text at all, 5,001
        digits long or a float is refused on opening with CheckpointError
        naming the marker, and the file is not changed.
        """
        path = fresh_path(scratch_dir)
        saved_pair(path, WorkingContext().append(Message("user", "hi")))
        with contextlib.closing(sqlite_rows.connect(path)) as db, db:
            db.execute(f"UPDATE workingctx_store SET value = {value} WHERE key = 'schema_version'")  # noqa: S608
        before = raw_rows(path)
        for read_only in (None, True):
            with pytest.raises(CheckpointError, match="damaged schema version") as info:
                SQLiteStore(path, read_only=read_only)
            assert "workingctx_store.schema_version" == info.value.path
        assert before == raw_rows(path)

    def test_a_resealed_bad_digest_lists_and_fails_to_load(self, scratch_dir):
        """
        A digest rewritten and resealed (as anyone who can write the file can)
        reads as a descriptor, since list() reads no snapshot; load() raises
        CheckpointError naming the checkpoint and the digest.
        """
        path = fresh_path(scratch_dir)
        first, second = saved_pair(path, WorkingContext().append(Message("user", "hi")))
        reseal(path, first.id, digest="0" * 64)
        with SQLiteStore(path) as store:
            assert [first.id, second.id] == [info.id for info in store.list()]
            with pytest.raises(CheckpointError, match=f"'{first.id}'.*snapshot does not match its digest"):
                store.load(first.id)

    def test_a_damaged_context_row_is_named_by_list_contexts(self, tmp_path):
        """
        A saved context's row edited by hand is left out of list_contexts()
        and named; the other context lists and loads.
        """
        path = tmp_path / "contexts.db"
        with SQLiteStore(path) as store:
            for context_id in ("a", "b"):
                store.save_context(WorkingContext(record=True, id=context_id).append(Message("user", context_id)))
        with contextlib.closing(sqlite_rows.connect(path)) as db, db:
            db.execute("UPDATE contexts SET created_at = 'yesterday' WHERE id = 'a'")
        with SQLiteStore(path) as store:
            listing = store.list_contexts()
            assert ["b"] == [info.id for info in listing]
            assert ["a"] == list(listing.damaged)
            with pytest.raises(CheckpointError, match="cannot load context 'a'"):
                store.load_context("a")
            assert "b" == store.load_context("b").freeze().messages[0].content


DEEP_TEXT = '{"k": ' + "[" * 10_000 + "]" * 10_000 + "}"


class TestCraftedRows:
    @pytest.mark.parametrize(
        ("columns", "match"),
        [
            ({"metadata": DEEP_TEXT}, "deep"),
            ({"metadata": '{"score": NaN}'}, "JSON cannot hold"),
            ({"metadata": '{"n": Infinity}'}, "JSON cannot hold"),
            ({"metadata": "[1, 2]"}, "JSON object"),
            ({"created_at": "yesterday"}, "ISO 8601"),
            ({"message_count": "many"}, "not a count"),
            ({"metadata": '{"a": 1e999}'}, "JSON cannot hold"),
        ],
        ids=["deep", "nan", "infinity", "array", "time", "count", "overflow"],
    )
    def test_list_and_lineage_name_the_row_and_keep_the_rest(self, scratch_dir, columns, match):
        """
        list() and lineage() on a row whose seal holds but whose content is
        damaged (nested 10,000 levels deep, NaN, wrong types) leave it out and
        name it with a CheckpointError saying what is wrong (never a
        RecursionError); load() raises that error; nothing changes.
        """
        path = fresh_path(scratch_dir)
        first, second = saved_pair(path, WorkingContext().append(Message("user", "hi")))
        reseal(path, first.id, **columns)
        before = dump(path)
        with SQLiteStore(path) as store:
            for listing in (store.list(), store.lineage(second.id)):
                assert [second.id] == [info.id for info in listing]
                assert [first.id] == list(listing.damaged)
                assert re.search(match, str(listing.damaged[first.id]))
                assert first.id in str(listing.damaged[first.id])
            with pytest.raises(CheckpointError, match=match):
                store.load(first.id)
            with pytest.raises(CheckpointError, match=match):
                store.lineage(first.id)
            assert second == store.load(second.id)
        assert before == dump(path)


EARLIER = Path(__file__).parents[1] / "data" / "sqlite-store-v1.sql"
"""A store written by workingctx before the journal had one digest (schema version 1), as SQL."""


def earlier_store(path: Path) -> None:
    with contextlib.closing(sqlite_rows.connect(path)) as db:
        db.executescript(EARLIER.read_text(encoding="utf-8"))


def earlier_run() -> tuple[WorkingContext, Checkpoint, Checkpoint]:
    """
    The run that wrote the earlier store, again: its context after the second
    checkpoint, and both checkpoints (their ids as they are in the file).
    """
    from datetime import UTC, datetime  # noqa: PLC0415  # only these tests need times

    from workingctx import PrefixContext, ToolCall  # noqa: PLC0415

    ctx = WorkingContext(prefix=PrefixContext(system_prompt="You answer with tools."))
    ctx.append(Message("user", "What is the weather in Oslo?"))
    ctx.append(Message.assistant(tool_calls=[ToolCall("call_1", "weather", {"city": "Oslo", "days": [1, 2.5, True]})]))
    ctx.append(Message.tool("rain, 4 °C", call_id="call_1", name="weather"))
    ctx.note("plan", {"steps": ["look up", "answer"], "done": False})
    ctx.journal.record({"kind": "tool_called", "name": "weather", "n": 1})
    ctx.journal.record({"kind": "noted", "key": "plan"})
    first = Checkpoint(
        id="5bcc2ca7a71e90116da30bdcd3c77b31",
        snapshot=ctx.freeze(),
        created_at=datetime(2026, 12, 1, 12, 0, tzinfo=UTC),
        metadata={"turn": 1},
    )
    ctx.append(Message("assistant", "Rain in Oslo, 4 °C."))
    ctx.journal.record({"kind": "answered", "ok": True, "score": 0.5})
    second = Checkpoint(
        id="d9e9ee1419f9359408686fc96f2e7dc0",
        snapshot=ctx.freeze(),
        created_at=datetime(2026, 12, 1, 12, 5, tzinfo=UTC),
        parent=first.id,
        metadata={"turn": 2},
    )
    return ctx, first, second


def journal_rows(path: Path) -> tuple[int, int]:
    with contextlib.closing(sqlite_rows.connect(path)) as db:
        links = db.execute("SELECT count(*) FROM journal_links").fetchone()[0]
        entries = db.execute("SELECT count(*) FROM journal_entries").fetchone()[0]
    return int(links), int(entries)


class TestEarlierStores:
    def test_a_store_written_before_loads_as_it_was_saved(self, scratch_dir):
        """
        A store written before the journal's digest became the one the stores
        link entries by loads every checkpoint equal to the run that wrote it,
        with its thread's head and lineage.
        """
        path = fresh_path(scratch_dir)
        earlier_store(path)
        _, first, second = earlier_run()
        with SQLiteStore(path) as store:
            assert first == store.load(first.id)
            assert second == store.load(second.id)
            assert [first.id, second.id] == [info.id for info in store.lineage(second.id)]
            assert second.id == store.head("main")

    def test_continuing_an_earlier_store_shares_its_journal(self, scratch_dir):
        """
        A run resumed from an earlier store and saved there again adds only
        its new journal entry and link: the journal's own digest is the chain
        the file links entries by, and the new row's journal head is it.
        """
        path = fresh_path(scratch_dir)
        earlier_store(path)
        before = journal_rows(path)
        with SQLiteStore(path) as store:
            ctx = WorkingContext.from_snapshot(store.load("d9e9ee1419f9359408686fc96f2e7dc0").snapshot)
            ctx.journal.record({"kind": "resumed"})
            third = Checkpoint.capture(ctx, parent="d9e9ee1419f9359408686fc96f2e7dc0")
            store.save(third, thread="main")
            assert third == store.load(third.id)
        assert (before[0] + 1, before[1] + 1) == journal_rows(path)
        with contextlib.closing(sqlite_rows.connect(path)) as db:
            head = db.execute("SELECT journal_head FROM checkpoints WHERE id = ?", (third.id,)).fetchone()[0]
        assert ctx.journal.digest() == head


class TestChainsReadEitherWay:
    def test_a_short_chain_in_a_large_file_is_walked_link_by_link(self, scratch_dir):
        """
        A checkpoint whose chain is a small part of the file (another long run
        beside it) loads equal to the one saved, from a fresh store and from
        one that loaded it before; a damaged link of it is reported the same way.
        """
        path = fresh_path(scratch_dir)
        long = WorkingContext()
        for turn in range(40):
            long.append(Message("user", f"question {turn}"), Message("assistant", f"answer {turn}"))
            long.journal.record({"turn": turn})
        short = WorkingContext().append(Message("user", "hello"), Message("assistant", "hi"))
        short.journal.record({"kind": "greeted"})
        saved = Checkpoint.capture(short)
        with SQLiteStore(path) as store:
            store.save(Checkpoint.capture(long))
            store.save(saved)
        for _ in range(2):
            with SQLiteStore(path) as store:
                assert saved == store.load(saved.id)
                assert saved == store.load(saved.id)
        with contextlib.closing(sqlite_rows.connect(path)) as db, db:
            db.execute("UPDATE message_links SET position = 7 WHERE chain = ?", (saved.snapshot.chain_digest(1),))
        with SQLiteStore(path) as store, pytest.raises(CheckpointError, match="expected 2 links, found 1") as info:
            store.load(saved.id)
        assert "$.snapshot.messages" == info.value.path

    def test_a_damaged_checksum_over_an_intact_text_still_loads(self, scratch_dir):
        """
        Items are checked by their own digests, recomputed on load; a checksum
        is read only to say why an item failed, so one damaged over an intact
        text does not stop the checkpoint loading, equal to the one saved.
        """
        path = fresh_path(scratch_dir)
        _, second = saved_pair(path, WorkingContext().append(Message("user", "hello")))
        digest = second.snapshot.messages[0].digest()
        with contextlib.closing(sqlite_rows.connect(path)) as db, db:
            db.execute("UPDATE messages SET checksum = ? WHERE digest = ?", ("0" * 64, digest))
        with SQLiteStore(path) as store:
            assert second == store.load(second.id)


EARLIER_LONG = Path(__file__).parents[1] / "data" / "sqlite-store-v1-long.sql"
"""A store of long messages written by workingctx with schema version 1 (uncompressed, WITHOUT ROWID), as SQL."""

EARLIER_PACKED = Path(__file__).parents[1] / "data" / "sqlite-store-v2-long.sql"
"""The same run written with schema version 2 (compressed, digests as hexadecimal text), as SQL."""


def long_run() -> list[Checkpoint]:
    """
    The run that wrote the earlier store of long messages, again: three
    checkpoints of two messages of ~1.2 KB each per turn.
    """
    from datetime import UTC, datetime  # noqa: PLC0415  # only these tests need times

    words = [
        "alpha",
        "bravo",
        "charlie",
        "delta",
        "echo",
        "foxtrot",
        "golf",
        "hotel",
        "india",
        "juliet",
        "kilo",
        "lima",
        "mike",
    ]
    ctx = WorkingContext()
    checkpoints: list[Checkpoint] = []
    parent = None
    for turn in range(3):
        ctx.append(Message("user", " ".join(words[(turn + i) % len(words)] for i in range(220))))
        ctx.append(Message("assistant", " ".join(words[(turn * 5 + i * 3) % len(words)] for i in range(240))))
        ctx.note("turn", turn)
        checkpoint = Checkpoint(
            id=f"long-{turn}",
            snapshot=ctx.freeze(),
            created_at=datetime(2026, 12, 1, 12, turn, tzinfo=UTC),
            parent=parent,
            metadata={"turn": turn},
        )
        checkpoints.append(checkpoint)
        parent = checkpoint.id
    return checkpoints


def layout(path: Path) -> dict[str, Any]:
    """
    What a store's file holds: its schema version, the tables made WITHOUT
    ROWID, and the storage type of every message and blob text.
    """
    with contextlib.closing(sqlite3.connect(path)) as db:
        version = db.execute("SELECT value FROM workingctx_store WHERE key = 'schema_version'").fetchone()[0]
        tables = db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
        kinds = {
            table: sorted({kind for (kind,) in db.execute(f"SELECT typeof(data) FROM {table}")})  # noqa: S608
            for table in ("messages", "blobs")
        }
        digests = {
            f"{table}.{column}": sorted(set(db.execute(f"SELECT typeof({column}), length({column}) FROM {table}")))  # noqa: S608
            for table, columns in DIGEST_COLUMNS.items()
            for column in columns
        }
    return {
        "version": version,
        "without_rowid": sorted(name for name, sql in tables if "WITHOUT ROWID" in sql),
        "kinds": kinds,
        "digests": {name: found for name, found in digests.items() if found},
    }


class TestSchemaVersions:
    def test_a_new_store_compresses_long_texts_and_reads_them_back(self, scratch_dir):
        """
        A new store (schema version 3) keeps messages and blobs in rowid
        tables, long texts compressed and every digest as its 32 bytes; every
        checkpoint loads equal to the one saved, from this store and from a
        fresh one.
        """
        path = fresh_path(scratch_dir)
        run = long_run()
        with SQLiteStore(path) as store:
            for checkpoint in run:
                store.save(checkpoint, thread="main")
            assert run == [store.load(checkpoint.id) for checkpoint in run]
        found = layout(path)
        assert "3" == found["version"]
        assert {name: [("blob", 32)] for name in found["digests"]} == found["digests"]
        assert {"messages.digest", "message_links.chain", "blobs.digest", "checkpoints.seal"} <= set(found["digests"])
        assert "messages" not in found["without_rowid"]
        assert "blobs" not in found["without_rowid"]
        assert "blob" in found["kinds"]["messages"]
        with SQLiteStore(path) as store:
            assert run == [store.load(checkpoint.id) for checkpoint in run]
            assert [c.id for c in run] == [info.id for info in store.lineage(run[-1].id)]

    def test_long_messages_take_no_overflow_pages(self, scratch_dir):
        """
        Messages of ~1.2 KB each fit in the table's own pages: none spills
        into an overflow page (a whole page for a few hundred bytes).
        """
        path = fresh_path(scratch_dir)
        with SQLiteStore(path) as store:
            for checkpoint in long_run():
                store.save(checkpoint)
        with contextlib.closing(sqlite_rows.connect(path)) as db:
            try:
                found = db.execute("SELECT count(*) FROM dbstat WHERE name = 'messages' AND pagetype = 'overflow'")
            except sqlite3.OperationalError:
                pytest.skip("this SQLite has no dbstat table")
            assert 0 == found.fetchone()[0]

    def test_a_damaged_compressed_message_is_named(self, scratch_dir):
        """
        A compressed text that no longer inflates, or inflates to another
        text, is damage the load names; the other checkpoints still list.
        """
        path = fresh_path(scratch_dir)
        run = long_run()
        with SQLiteStore(path) as store:
            for checkpoint in run:
                store.save(checkpoint)
        digest = run[-1].snapshot.messages[-1].digest()
        with contextlib.closing(sqlite_rows.connect(path)) as db, db:
            (data,) = db.execute("SELECT data FROM messages WHERE digest = ?", (digest,)).fetchone()
            assert isinstance(data, bytes)
            db.execute("UPDATE messages SET data = ? WHERE digest = ?", (data[:-9] + b"\x01" * 9, digest))
        with SQLiteStore(path) as store:
            with pytest.raises(CheckpointError, match=f"message '{digest}' does not match its checksum"):
                store.load(run[-1].id)
            assert run[0] == store.load(run[0].id)
            assert [c.id for c in run] == [info.id for info in store.list()]

    @pytest.mark.parametrize(
        "statement",
        [
            "UPDATE message_links SET prev = substr(prev, 1, 31) WHERE position = 3",
            "UPDATE message_links SET message = X'00' || message WHERE position = 2",
            "UPDATE message_links SET chain = lower(hex(chain)) WHERE position = 5",
            "UPDATE messages SET digest = substr(digest, 2) WHERE rowid = 2",
            "UPDATE messages SET digest = zeroblob(32) WHERE rowid = 1",
            "UPDATE blobs SET digest = CAST(lower(hex(digest)) AS TEXT) WHERE data LIKE '%turn%'",
            "UPDATE checkpoints SET messages_head = substr(messages_head, 1, 16)",
        ],
    )
    def test_a_damaged_binary_digest_is_a_checkpoint_error(self, scratch_dir, statement):
        """
        A digest cut short, grown, zeroed or turned to text in a store of
        schema version 3 is damage: loading the last checkpoint raises
        CheckpointError (never a builtin error), and nothing is changed.
        """
        path = fresh_path(scratch_dir)
        run = long_run()
        with SQLiteStore(path) as store:
            for checkpoint in run:
                store.save(checkpoint)
        with contextlib.closing(sqlite3.connect(path)) as db, db:
            assert db.execute(statement).rowcount >= 1
        before = sqlite_rows.file_state(path)
        with SQLiteStore(path) as store, pytest.raises(CheckpointError, match=r"nothing was changed|left as it was"):
            store.load(run[-1].id)
        assert before == sqlite_rows.file_state(path)

    def test_a_keyed_seal_stays_text_and_reads_back(self, scratch_dir):
        """
        A seal made with a key is no bare sha256: it is kept as the text it
        is, beside digests kept as bytes, and the row loads and lists.
        """
        path = fresh_path(scratch_dir)
        run = long_run()
        with SQLiteStore(path, key=b"k" * 32) as store:
            for checkpoint in run:
                store.save(checkpoint)
        found = layout(path)
        assert [("blob", 32)] == found["digests"]["checkpoints.digest"]
        assert {kind for kind, _ in found["digests"]["checkpoints.seal"]} == {"text"}
        with SQLiteStore(path, key=b"k" * 32) as store:
            assert run == [store.load(checkpoint.id) for checkpoint in run]
        with SQLiteStore(path) as store, pytest.raises(CheckpointError, match="sealed with a key"):
            store.load(run[0].id)

    def test_a_version_2_store_loads_and_stays_version_2(self, scratch_dir):
        """
        A store written with schema version 2 (digests as hexadecimal text)
        loads every checkpoint equal to the run that wrote it; saving to it
        again keeps its digests as text and its marker, so workingctx of that
        version still reads it, and compresses long texts as before.
        """
        path = fresh_path(scratch_dir)
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.executescript(EARLIER_PACKED.read_text(encoding="utf-8"))
        run = long_run()
        before = layout(path)
        assert "2" == before["version"]
        with SQLiteStore(path) as store:
            assert run == [store.load(checkpoint.id) for checkpoint in run]
            assert run[-1].id == store.head("main")
            more = Checkpoint.capture(
                WorkingContext().extend(list(run[-1].snapshot.messages)).append(Message("user", "again " * 200)),
                parent=run[-1].id,
            )
            store.save(more, thread="main")
        after = layout(path)
        assert "2" == after["version"]
        assert {name: [("text", 64)] for name in after["digests"]} == after["digests"]
        assert "blob" in after["kinds"]["messages"]
        with SQLiteStore(path) as store:
            assert [*run, more] == [store.load(checkpoint.id) for checkpoint in [*run, more]]
            store.delete(more.id)
            assert run == [store.load(checkpoint.id) for checkpoint in run]

    def test_a_version_1_store_loads_and_stays_version_1(self, scratch_dir):
        """
        A store written with schema version 1 (long messages uncompressed, in
        WITHOUT ROWID tables) loads every checkpoint equal to the run that
        wrote it; saving to it again writes as version 1 did (uncompressed,
        the marker unchanged), so an older workingctx still reads it.
        """
        path = fresh_path(scratch_dir)
        with contextlib.closing(sqlite_rows.connect(path)) as db:
            db.executescript(EARLIER_LONG.read_text(encoding="utf-8"))
        run = long_run()
        before = layout(path)
        assert "1" == before["version"]
        assert {"messages", "blobs"} <= set(before["without_rowid"])
        with SQLiteStore(path) as store:
            assert run == [store.load(checkpoint.id) for checkpoint in run]
            assert run[-1].id == store.head("main")
            more = Checkpoint.capture(
                WorkingContext().extend(list(run[-1].snapshot.messages)).append(Message("user", "again " * 200)),
                parent=run[-1].id,
            )
            store.save(more, thread="main")
        after = layout(path)
        assert before["version"] == after["version"]
        assert before["without_rowid"] == after["without_rowid"]
        assert {"messages": ["text"], "blobs": ["text"]} == after["kinds"]
        with SQLiteStore(path) as store:
            assert [*run, more] == [store.load(checkpoint.id) for checkpoint in [*run, more]]


# -- the SQLite store's own behaviour ------------------------------------------------------


def table_counts(store: SQLiteStore) -> dict[str, int]:
    import sqlite3  # noqa: PLC0415  # only these tests look inside

    with sqlite3.connect(store.path) as db:
        tables = [
            "messages",
            "message_links",
            "journal_entries",
            "journal_links",
            "blobs",
            "checkpoints",
        ]
        return {table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in tables}  # noqa: S608


class TestSQLiteStorage:
    def test_each_message_stored_once(self, scratch_dir):
        """
        Checkpointing every turn stores each message, link and journal entry
        once, and an unchanged prefix once.
        """
        store = sqlite_factory(scratch_dir)()
        ctx = run_context(0)
        parent = None
        for turn in range(20):
            ctx.append(Message("user", f"q{turn}"), Message("assistant", "same answer"))
            ctx.journal.record({"turn": turn})
            parent = store.save(Checkpoint.capture(ctx, parent=parent))
        counts = table_counts(store)
        assert counts["checkpoints"] == 20
        assert counts["messages"] == 21  # 20 questions and one answer, repeated
        assert counts["message_links"] == 40
        assert counts["journal_entries"] == 20
        assert counts["journal_links"] == 20
        assert counts["blobs"] == 2  # the prefix, and the one (empty) scratchpad

    def test_delete_collects_garbage(self, scratch_dir):
        """
        Deleting every checkpoint leaves every table empty; deleting one keeps
        what the others use.
        """
        store = sqlite_factory(scratch_dir)()
        first = Checkpoint.capture(run_context(2))
        second = Checkpoint.capture(run_context(3), parent=first)
        store.save(first)
        store.save(second)
        store.delete(second.id)
        assert store.load(first.id) == first
        assert table_counts(store)["message_links"] == 8
        store.delete(first.id)
        assert set(table_counts(store).values()) == {0}

    def test_reopen(self, scratch_dir):
        """
        A closed store reopens with everything in it.
        """
        path = scratch_dir / "reopen.db"
        checkpoint = Checkpoint.capture(run_context(3))
        with SQLiteStore(path) as store:
            store.save(checkpoint)
        with SQLiteStore(path) as store:
            assert store.load(checkpoint.id) == checkpoint
            assert checkpoint.id in store
            assert len(store) == 1

    def test_memory_database(self):
        """
        ":memory:" gives a private store for one process.
        """
        store = SQLiteStore(":memory:")
        checkpoint = Checkpoint.capture(run_context(2))
        store.save(checkpoint)
        assert store.load(checkpoint.id) == checkpoint

    def test_non_json_payload_refused_and_nothing_written(self, scratch_dir):
        """
        A scratchpad value JSON cannot hold is refused with its path; the store
        is unchanged.
        """
        store = sqlite_factory(scratch_dir)()
        good = Checkpoint.capture(run_context(1))
        store.save(good)
        before = table_counts(store)
        bad = Checkpoint.capture(run_context(2).note("seen", {1, 2}))
        with pytest.raises(CheckpointError, match=r"not JSON data.* at \$\.snapshot\.scratchpad\['seen'\]") as info:
            store.save(bad)
        assert info.value.path == "$.snapshot.scratchpad['seen']"
        assert table_counts(store) == before
        entry = run_context(1)
        with pytest.raises(PayloadTypeError, match=r"journal entry 1\['when'\] is datetime"):
            entry.journal.record({"when": datetime.now(UTC)})
        assert 1 == len(entry.journal)  # nothing was recorded
        assert table_counts(store) == before
        assert store.list() == [CheckpointInfo.of(good)]

    def test_bad_settings(self, scratch_dir):
        """
        A negative timeout or an unknown synchronous mode is refused.
        """
        with pytest.raises(ValueError, match="timeout"):
            SQLiteStore(scratch_dir / "x.db", timeout=-1)
        with pytest.raises(ValueError, match="synchronous"):
            SQLiteStore(scratch_dir / "x.db", synchronous="SOMETIMES")


class TestTextEncoding:
    def test_a_utf16_database_loads(self, scratch_dir):
        """
        A store in a database made with another text encoding than UTF-8
        reads item texts as text, and loads what it saved.
        """
        path = fresh_path(scratch_dir)
        with contextlib.closing(sqlite_rows.connect(path)) as db:
            db.execute("PRAGMA encoding = 'UTF-16le'")
            db.execute("CREATE TABLE made_first (x)")
            db.execute("DROP TABLE made_first")
        ctx = arguments_run().append(Message("user", "Ærø, 15°, 東京 ✈"))
        first, second = saved_pair(path, ctx)
        with contextlib.closing(sqlite_rows.connect(path)) as db:
            assert db.execute("PRAGMA encoding").fetchone()[0] == "UTF-16le"
        with SQLiteStore(path) as store:
            assert store.load(first.id) == first
            assert store.load(second.id) == second

    def test_an_item_whose_bytes_are_not_utf8_is_damaged(self, scratch_dir):
        """
        A stored text changed into bytes that are not UTF-8 is refused as
        damaged, naming the message and where it is.
        """
        path = fresh_path(scratch_dir)
        _, second = saved_pair(path, arguments_run())
        digest = second.snapshot.messages[0].digest()
        text = rows(path, "messages")[digest][0]
        with contextlib.closing(sqlite_rows.connect(path)) as db, db:
            db.execute("UPDATE messages SET data = ? WHERE digest = ?", (text.encode() + b"\xff", digest))
        with SQLiteStore(path) as store, pytest.raises(CheckpointError, match="does not match its checksum") as info:
            store.load(second.id)
        assert info.value.path == "$.snapshot.messages[0]"
        assert digest in str(info.value)
