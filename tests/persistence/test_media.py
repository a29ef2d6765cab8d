"""
SQLiteMediaStore: media bytes kept in a SQLite file, damaged, written from
many threads, closed or locked, and sharing its file with checkpoints.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.test_media import encode
from workingctx import Checkpoint, Message, SQLiteStore, WorkingContext
from workingctx.exceptions import MediaError, WorkingCtxError
from workingctx.media import store_ref
from workingctx.messages import MediaRef
from workingctx.persistence import SQLiteMediaStore


class TestSQLiteMediaStore:
    def test_damaged_row(self, tmp_path: Path) -> None:
        """
        A row whose bytes changed raises MediaError (reason "damaged"); putting again repairs it.
        """
        path = tmp_path / "media.db"
        with SQLiteMediaStore(path) as store:
            ref = store.put(b"abcdef", "text/plain")
            with sqlite3.connect(path) as db:
                db.execute("UPDATE workingctx_media SET data = ?", (b"abcdeX",))
            with pytest.raises(MediaError, match="damaged") as caught:
                store.get(ref)
            assert "damaged" == caught.value.reason
            store.put(b"abcdef", "text/plain")
            assert b"abcdef" == store.get(ref)

    def test_concurrent_writers(self, tmp_path: Path) -> None:
        """
        Two stores on one file, written from eight threads at once, keep one intact row per content.
        """
        path = tmp_path / "media.db"
        stores = [SQLiteMediaStore(path), SQLiteMediaStore(path)]
        blobs = [bytes([n]) * 50_000 for n in range(4)]
        start = threading.Barrier(8)

        def put(worker: int) -> list[MediaRef]:
            start.wait()
            return [stores[worker % 2].put(data, "application/octet-stream") for data in blobs * 3]

        with ThreadPoolExecutor(8) as pool:
            refs = {ref for batch in pool.map(put, range(8)) for ref in batch}
        assert 4 == len(refs)
        assert all(stores[0].get(ref) == stores[1].get(ref) for ref in refs)
        with sqlite3.connect(path) as db:
            assert 4 == db.execute("SELECT count(*) FROM workingctx_media").fetchone()[0]
        for store in stores:
            store.close()

    def test_a_closed_or_locked_store_raises_media_error(self, tmp_path: Path) -> None:
        """
        A closed store, and a file another writer keeps locked past the
        timeout, raise MediaError (reason ``"unavailable"``) naming the store,
        not a bare ``sqlite3`` error, and nothing is written.
        """
        path = tmp_path / "media.db"
        store = SQLiteMediaStore(path, timeout=0.05)
        ref = store.put(b"kept", "text/plain")
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(MediaError, match=rf"cannot use the SQLiteMediaStore {str(path)!r}.*locked") as caught:
                store.put(b"new", "text/plain")
            assert "unavailable" == caught.value.reason
        finally:
            other.execute("ROLLBACK")
            other.close()
        store.close()
        for call in (lambda: store.put(b"x", "text/plain"), lambda: store.get(ref), lambda: store.has(ref)):
            with pytest.raises(MediaError, match="closed") as caught:
                call()
            assert "unavailable" == caught.value.reason
        with SQLiteMediaStore(path) as reopened:
            assert b"kept" == reopened.get(ref)
            assert not reopened.has(store_ref(b"new", "text/plain"))

    def test_shares_a_file_with_checkpoints(self, tmp_path: Path) -> None:
        """
        Media and checkpoints live in one file; deleting a checkpoint keeps its media.
        """
        path = tmp_path / "run.db"
        media = SQLiteMediaStore(path)
        message = asyncio.run(Message.with_image(encode(8, 8, "PNG"), "image/png", media))
        checkpoints = SQLiteStore(path)
        saved = checkpoints.save(Checkpoint.capture(WorkingContext().append(message)))
        assert message == checkpoints.load(saved).snapshot.messages[0]
        checkpoints.delete(saved)
        checkpoints.close()
        media.close()
        with SQLiteStore(path) as reopened, SQLiteMediaStore(path) as media_again:
            assert 0 == len(reopened)
            assert media_again.has(message.content[0].media)  # type: ignore[union-attr]

    def test_refuses_a_foreign_database(self, tmp_path: Path) -> None:
        """
        A SQLite file that is not a workingctx database is refused and left unchanged.
        """
        path = tmp_path / "other.db"
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE people (name TEXT)")
        with pytest.raises(WorkingCtxError, match="not a workingctx checkpoint store"):
            SQLiteMediaStore(path)
        with sqlite3.connect(path) as db:
            assert [("people",)] == db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
