"""
Media kept in the SQLite file of a checkpoint store, so a run's checkpoints and
media travel as one file.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from typing import Any, Self

from workingctx.exceptions import MediaError
from workingctx.media import checked_media, media_key, missing_media, stored_media
from workingctx.messages import MediaRef
from workingctx.persistence.sqlite import SQLiteStore

__all__ = ["SQLiteMediaStore"]


_MEDIA_TABLE = "CREATE TABLE IF NOT EXISTS workingctx_media (sha256 TEXT PRIMARY KEY, data BLOB NOT NULL) WITHOUT ROWID"


class SQLiteMediaStore:
    """
    A media store in a table (``workingctx_media``) of a SQLite file, such as
    the file of a :class:`~workingctx.SQLiteStore`, so checkpoints and their
    media travel as one file.

    The file is opened as a checkpoint store first (created when missing, and
    refused when it is not a workingctx database), then the media table is
    added. Deleting checkpoints never deletes media: call :meth:`delete`.
    Every method raises :class:`~workingctx.exceptions.MediaError` with the
    reason ``"unavailable"`` when the database cannot be used (the store is
    closed, or another writer holds the file past *timeout*).

    Args:
        path: The database file, or ``":memory:"``.
        timeout: Seconds to wait for another writer.

    Raises:
        CheckpointError: The file is not a workingctx database.

    >>> store = SQLiteMediaStore(":memory:")
    >>> store.get(store.put(b"abc", "application/octet-stream"))
    b'abc'
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0) -> None:
        self.path = os.fspath(path)
        if self.path != ":memory:":
            SQLiteStore(self.path, timeout=timeout).close()  # creates the file, or checks it is ours
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None, check_same_thread=False)
        try:
            self._db.execute(_MEDIA_TABLE)
        except sqlite3.Error:
            self._db.close()
            raise

    def put(self, data: bytes, mime_type: str, *, filename: str | None = None) -> MediaRef:
        """
        Keep *data* and return its reference (a damaged row is replaced).

        Raises:
            TypeError: *data* is not bytes, or *mime_type* is not a str.
            ValueError: *mime_type* is not of the form ``type/subtype``.
        """
        ref, data = stored_media(data, mime_type, filename)
        self._execute(
            ref,
            "INSERT INTO workingctx_media (sha256, data) VALUES (?, ?)"
            " ON CONFLICT (sha256) DO UPDATE SET data = excluded.data WHERE data != excluded.data",
            (ref.sha256, data),
        )
        return ref

    def _execute(self, ref: MediaRef, sql: str, parameters: tuple[Any, ...]) -> Any:
        """
        The first row *sql* gives, or None; a database error is a MediaError naming the store.
        """
        with self._lock:
            try:
                return self._db.execute(sql, parameters).fetchone()
            except sqlite3.Error as exc:
                msg = (
                    f"cannot use the SQLiteMediaStore {self.path!r} for {ref.url}: {exc}; nothing was changed "
                    "(a closed store: open a new one; a locked file: try again, or give a longer timeout)"
                )
                raise MediaError(msg, ref=ref, reason="unavailable") from exc

    def get(self, ref: MediaRef) -> bytes:
        """
        The bytes *ref* names, checked against its sha256.

        Raises:
            TypeError: *ref* is not a :class:`~workingctx.messages.MediaRef`.
            MediaError: They are missing or damaged, or *ref* is not of kind ``"store"``.
        """
        key = media_key(ref, self)
        row = self._execute(ref, "SELECT data FROM workingctx_media WHERE sha256 = ?", (key,))
        where = f"the SQLiteMediaStore {self.path!r}"
        if row is None:
            raise missing_media(ref, where)
        return checked_media(ref, bytes(row[0]), where)

    def has(self, ref: MediaRef) -> bool:
        """
        Whether a row is kept for *ref*.
        """
        key = media_key(ref, self)
        return self._execute(ref, "SELECT 1 FROM workingctx_media WHERE sha256 = ?", (key,)) is not None

    def delete(self, ref: MediaRef) -> None:
        """
        Remove the row kept for *ref* (nothing happens when there is none).
        """
        key = media_key(ref, self)
        self._execute(ref, "DELETE FROM workingctx_media WHERE sha256 = ?", (key,))

    def close(self) -> None:
        """
        Close the database.
        """
        with self._lock:
            self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<SQLiteMediaStore path={self.path!r}>"
