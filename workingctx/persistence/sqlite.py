"""
The SQLite store: the embedded default, on the standard library's ``sqlite3``.

Layout (schema version 3):

- ``messages``: one row per distinct message, keyed by :meth:`Message.digest`,
  holding its JSON.
- ``message_links``: one row per distinct transcript prefix, keyed by its chain
  digest (see :meth:`FrozenContext.chain_digest`): the previous prefix's chain
  digest and the message that extends it. A checkpoint names the head of its
  tail's chain, so a run checkpointed after every turn stores each message, and
  each link, once.
- ``journal_entries`` and ``journal_links``: the same for journal entries.
- ``blobs``: prefixes and scratchpads, keyed by digest (stored once while unchanged).
- ``checkpoints``: one row per checkpoint: id, parent, creation time, metadata,
  the keys above, counts, and a seal (a digest over the row) checked on every read.
- ``workingctx_store``: the format name and the schema version.

Messages, journal entries and blobs of 512 bytes or more are stored compressed
(zlib, when that is shorter), in rowid tables, so that a long message takes its
bytes and not an overflow page. Every digest (keys, links, checksums, the
seal) is kept as its 32 bytes. A file of schema version 2 (digests as 64
hexadecimal characters) or 1 (also every text as it is, in ``WITHOUT ROWID``
tables) is read, and written, as that version.

Every save is one ``BEGIN IMMEDIATE`` transaction; the database runs in WAL
mode with a busy timeout, so several processes can save to one file and a
crash mid-save leaves the previous state intact. Everything read back is
checked against its digest: a damaged, truncated, foreign or newer database
raises :class:`~workingctx.exceptions.CheckpointError` and is never changed.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import operator
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from workingctx import _checks
from workingctx.checkpoint import Checkpoint
from workingctx.exceptions import ArgumentTypeError, ArgumentValueError, CheckpointError
from workingctx.messages import Message
from workingctx.persistence import _codec, histories
from workingctx.persistence._codec import FORMAT, JOURNAL, MESSAGES, Damage, Kind, checksum, damage
from workingctx.persistence._engine import StoreEngine, head_allows, head_conflict
from workingctx.persistence.histories import ContextInfo
from workingctx.persistence.listing import Listing, listed_rows, shown
from workingctx.persistence.stores import CheckpointInfo
from workingctx.prefix import PrefixContext

if TYPE_CHECKING:
    from workingctx.context import WorkingContext

__all__ = ["FORMAT", "SCHEMA_VERSION", "SQLiteStore"]

SCHEMA_VERSION = 3
"""The schema version this workingctx writes, and the newest it reads.

Version 3 stores every digest as its 32 bytes rather than 64 hexadecimal
characters; version 2 stores a long message, journal entry or blob compressed
(:func:`~workingctx.persistence._codec.pack`). A store of an older version is
read and written as that version, so that an older workingctx still reads it."""

_checksum = checksum  # the name the damage tests use

_first = operator.itemgetter(0)

_T = TypeVar("_T")

_HEADS = "CREATE TABLE heads (thread TEXT PRIMARY KEY, checkpoint TEXT NOT NULL) WITHOUT ROWID"

_SCHEMA = (
    "CREATE TABLE workingctx_store (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
    # Items and blobs are rowid tables: a row of a WITHOUT ROWID table longer
    # than about a quarter of a page spills into overflow pages, a whole page
    # each, and a message is often that long. Digests are 32-byte BLOBs.
    "CREATE TABLE messages (digest BLOB PRIMARY KEY, data BLOB NOT NULL, checksum BLOB NOT NULL)",
    (
        "CREATE TABLE message_links ("
        " chain BLOB PRIMARY KEY, prev BLOB NOT NULL, message BLOB NOT NULL, position INTEGER NOT NULL"
        ") WITHOUT ROWID"
    ),
    "CREATE TABLE journal_entries (digest BLOB PRIMARY KEY, data BLOB NOT NULL, checksum BLOB NOT NULL)",
    (
        "CREATE TABLE journal_links ("
        " chain BLOB PRIMARY KEY, prev BLOB NOT NULL, entry BLOB NOT NULL, position INTEGER NOT NULL"
        ") WITHOUT ROWID"
    ),
    "CREATE TABLE blobs (digest BLOB PRIMARY KEY, data BLOB NOT NULL)",
    (
        "CREATE TABLE checkpoints ("
        " seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, parent TEXT, created_at TEXT NOT NULL,"
        " created_ts REAL NOT NULL, metadata TEXT NOT NULL, digest BLOB NOT NULL, prefix BLOB NOT NULL,"
        " scratchpad BLOB NOT NULL, messages_head BLOB NOT NULL, message_count INTEGER NOT NULL,"
        " journal_head BLOB NOT NULL, journal_count INTEGER NOT NULL, seal BLOB NOT NULL)"
    ),
    _HEADS,
)
"""The tables of a new store (schema version 3). Version 2 declared every
digest TEXT and stored it as 64 hexadecimal characters; version 1 also made
the tables WITHOUT ROWID, with two indexes on checkpoints, and stored every
text uncompressed. Such a file is read, and written, as it is."""

_ROW = (
    "id, parent, created_at, metadata, digest, prefix, scratchpad, "
    "messages_head, message_count, journal_head, journal_count, seal"
)

_CHAINS = {
    MESSAGES.noun: ("messages", "message_links", "message"),
    JOURNAL.noun: ("journal_entries", "journal_links", "entry"),
}
"""Each chain's tables: its items, its links, and the links' column naming the item."""

_SYNCHRONOUS = frozenset({"OFF", "NORMAL", "FULL", "EXTRA"})

_NO_LOCKS = "win32-none" if os.name == "nt" else "unix-none"
"""SQLite's VFS that takes no file locks; with ``locking_mode=EXCLUSIVE`` it reads a log without ``-shm``."""

# SQLite's primary result codes for "this file or directory cannot be written"
# (the extended codes add bits above the low byte).
_SQLITE_READONLY = 8
_SQLITE_CANTOPEN = 14
_SQLITE_BUSY = 5

_PAUSE = 0.01
"""Seconds between two tries to set up a file another connection has locked (see :meth:`SQLiteStore._prepare`)."""


class _CannotWrite(Exception):  # noqa: N818  # internal: the store falls back to reading
    """
    The database exists but cannot be opened for writing.
    """


def _cannot_write(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (_SQLITE_READONLY, _SQLITE_CANTOPEN)


def _busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF == _SQLITE_BUSY


def _escaped(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")


def _leniently(db: sqlite3.Connection, read: Callable[[sqlite3.Connection], _T]) -> _T:
    """
    ``read(db)``; when text it reads is not UTF-8 (a damaged row: SQLite
    keeps whatever bytes it is given), ``read(db)`` again with such text's
    invalid bytes escaped as ``\\x..``, so that the row is named as damaged
    instead of failing the whole query. Intact text is read the fast way.
    """
    try:
        return read(db)
    except sqlite3.OperationalError:
        db.text_factory = _escaped
        try:
            return read(db)
        finally:
            db.text_factory = str


def _stored_key(value: object) -> object:
    """
    A digest as a store of schema version 3 keeps it: the 32 bytes of a
    lowercase hexadecimal sha256; anything else (a keyed seal) as it is.
    """
    if type(value) is str and len(value) == 64:  # a sha256 in hexadecimal
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            return value
        if raw.hex() == value:
            return raw
    return value


def _read_key(value: object) -> object:
    """
    A digest as read from a store of schema version 3: 32 bytes as their
    hexadecimal text; text but a keyed seal as its UTF-8 bytes, which no
    check takes for a digest; anything else (damage, which the checks then
    name) as it is.

    Such a store writes every digest as bytes, and its SQL (the link walk,
    deleting, collecting garbage) compares them as bytes: a digest kept as
    text there, even one spelling the right sha256 (the seal, made over
    digests as text, does not tell them apart), is damage. Read as the
    digest it spells, the checkpoint would load while a later ``delete()``
    of any other one collected the links and blobs it names.
    """
    if type(value) is bytes and len(value) == 32:  # a sha256
        return value.hex()
    if isinstance(value, str) and not value.startswith(_codec.KEYED):
        return value.encode("utf-8", "surrogateescape")
    return value


def _walk_binary(
    kind: Kind, links: dict[Any, Sequence[Any]], head: object, count: int
) -> tuple[list[str], list[str]] | None:
    """
    :func:`~workingctx.persistence._codec.follow` over the link rows of a
    store of schema version 3 as read (digests as bytes, by chain): the chain
    digests and item digests as hexadecimal text, root first, each link
    checked as ``follow`` checks it; None when any check fails, for ``follow``
    to say what is wrong over the rows as text.
    """
    if type(head) is not str:
        return None
    raw = _stored_key(head)
    chains: list[str] = []
    digests: list[str] = []
    expected = count - 1
    link = head
    row = links.get(raw)
    new_hash = hashlib.sha256
    while row is not None and expected >= 0:
        chain, prev, digest, position = row
        if position != expected or type(prev) is not bytes or type(digest) is not bytes:
            return None
        previous, item = prev.hex(), digest.hex()
        if (
            len(previous) != 64 or len(item) != 64 or new_hash(f"{previous}:{item}".encode()).digest() != chain
        ):  # a sha256 in hexadecimal
            return None
        chains.append(link)
        digests.append(item)
        expected -= 1
        link = previous
        row = links.get(prev)
    if expected != -1 or link != kind.root:
        return None
    chains.reverse()
    digests.reverse()
    return chains, digests


def _same(value: _T) -> _T:
    return value


_ROW_KEYS = (4, 5, 6, 7, 9, 11)
"""The fields of a checkpoint row (:data:`_ROW`) that hold digests: digest,
prefix, scratchpad, messages_head, journal_head, seal."""


def _check_key(key: object) -> bytes | None:
    if key is None:
        return None
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, bytes):
        msg = f"key must be bytes or str, got a value of type {type(key).__name__}; pass e.g. os.environ['CKPT_KEY']"
        # the key is a secret: named, never kept on the error (its repr reaches logs)
        raise ArgumentTypeError(msg, argument="key", expected="bytes or str")
    if len(key) < 16:  # the floor below which an HMAC key is guessable
        msg = f"key must be at least 16 bytes, got {len(key)}; use secrets.token_bytes(32) to make one"
        raise ArgumentValueError(msg, argument="key")
    return key


class SQLiteStore(StoreEngine):
    """
    A checkpoint store in one SQLite file: durable, shared by processes, compact.

    Messages are stored content-addressed by their digest, and transcripts as
    chains of links, so checkpointing every turn of a long run stores each
    message once. Each save is one transaction; a crash mid-save loses nothing
    saved before. Several processes may save to one file at once: a writer
    waits up to *timeout* seconds for another's transaction to finish.

    Args:
        path: The database file (created when missing), or ``":memory:"``.
        timeout: Seconds to wait for another writer before giving up.
        synchronous: SQLite's ``synchronous`` setting. ``"NORMAL"`` (the
            default) survives a crash of the process; ``"FULL"`` also
            survives a power cut, at a cost per save.
        key: A secret (bytes, or text encoded as UTF-8; 16 bytes or more) that
            seals every row it writes with an HMAC-SHA256 and refuses, on every
            read, a row not sealed with it: tamper evidence against whoever can
            write the file but does not hold the key. Without a key, the seal
            and checksums catch accidents only (see the persistence docs).
        read_only: ``None`` (the default) opens the file for writing when
            possible and read-only when it cannot be written (read-only storage,
            an archived run); ``True`` always opens it read-only. A read-only
            store lists and loads; ``save()`` and ``delete()`` raise.

    Raises:
        CheckpointError: The file is not a SQLite database, is damaged, holds
            tables that are not a workingctx store, or was written by a newer
            schema version. The file is left untouched.
        TypeError: *key* is not bytes or str.
        ValueError: *key* is shorter than 16 bytes.

    >>> from workingctx import Checkpoint, Message, SQLiteStore, WorkingContext
    >>> store = SQLiteStore(":memory:")
    >>> ctx = WorkingContext().append(Message("user", "hello"))
    >>> saved = store.save(Checkpoint.capture(ctx))
    >>> store.load(saved).snapshot == ctx.freeze()
    True
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 30.0,
        synchronous: str = "NORMAL",
        key: bytes | str | None = None,
        read_only: bool | None = None,
    ) -> None:
        _checks.check_number(timeout, "timeout", minimum=0, fix="pass a number of seconds")
        _checks.check_one_of(synchronous, "synchronous", sorted(_SYNCHRONOUS))
        if read_only is not None:
            _checks.check_flag(read_only, "read_only")
        self._key = _check_key(key)
        self.path = os.fspath(path)
        self._place = f"the SQLite store {self.path!r}"
        self._lock = threading.RLock()
        # Items read or written once, by digest: values, so sharing them is safe.
        self._messages: dict[str, Message] = {}
        self._entries: dict[str, Any] = {}
        self._prefixes: dict[str, PrefixContext] = {}
        self._data: str | None = None  # how a load selects an item's text (see _data_column)
        self._packs = False  # whether the store compresses long texts (schema version 2 and newer)
        # How digests go in and come out: as bytes in schema version 3 and newer, else as text.
        self._in: Callable[[object], object] = _same
        self._out: Callable[[object], object] = _same
        self.read_only: bool = False
        """Whether the store was opened read-only (``save()`` and ``delete()`` then raise)."""
        self._why_read_only = "it was opened with read_only=True"
        if read_only:
            self._open_read_only(timeout)
            return
        if self.path != ":memory:" and Path(self.path).is_file() and not os.access(self.path, os.W_OK):
            # SQLite may open a file on read-only storage for writing (when its -shm
            # is there to read) and fail only at the first write: look first
            if read_only is False:
                msg = (
                    f"cannot open the checkpoint store {self.path!r} for writing: the file cannot be written "
                    "(read-only storage or its mode); nothing was changed"
                )
                raise CheckpointError(msg)
            self._why_read_only = "the file cannot be written: read-only storage or its mode"
            self._open_read_only(timeout)
            return
        try:
            self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            if read_only is None and _cannot_write(exc) and Path(self.path).exists():
                self._why_read_only = f"the file cannot be written: {exc}"
                self._open_read_only(timeout)
                return
            msg = f"cannot open the checkpoint store {self.path!r}: {exc}"
            raise CheckpointError(msg) from None
        try:
            self._prepare(synchronous, timeout)
        except _CannotWrite as exc:
            self._db.close()
            if read_only is False:
                msg = f"cannot open the checkpoint store {self.path!r} for writing: {exc}; nothing was changed"
                raise CheckpointError(msg) from None
            self._why_read_only = f"the file cannot be written: {exc}"
            self._open_read_only(timeout)
        except BaseException:
            self._db.close()
            raise

    # -- opening ------------------------------------------------------------------

    def _open_read_only(self, timeout: float) -> None:
        """
        Open the file for reading only, seeing every checkpoint its write-ahead
        log (``-wal``) holds, or refuse it saying why; never an older head in silence.

        1. ``mode=ro``: as a file others may still write. SQLite reads the log
           through its index, the ``-shm`` file, which it creates beside the
           file when missing (or reads, when it may not write it).
        2. When ``-shm`` can be neither created nor read (read-only storage
           holding a ``-wal`` and no ``-shm``: a killed writer's files copied to
           an archive): with no file locks and the log's index in this
           process's memory (the ``-none`` VFS and ``locking_mode=EXCLUSIVE``),
           which reads the log as SQLite's recovery does and creates no file.
        3. When there is no ``-wal`` beside the file, so nothing to miss: as an
           immutable file.

        With a ``-wal`` that none of these can read, reading the file alone
        would show the checkpoints of before the log: the store is refused.
        """
        self.read_only = True
        if self.path == ":memory:" or not Path(self.path).exists():
            msg = f"cannot open the checkpoint store {self.path!r} read-only: there is no such file"
            raise CheckpointError(msg)
        uri = Path(self.path).absolute().as_uri()
        wal = Path(f"{self.path}-wal")
        logged = wal.exists() and not (wal.is_file() and wal.stat().st_size == 0)  # an empty log holds nothing
        attempts = [(f"{uri}?mode=ro", False), (f"{uri}?mode=ro&vfs={_NO_LOCKS}", True)]
        if not logged:
            attempts.append((f"{uri}?mode=ro&immutable=1", False))
        failure: sqlite3.Error | None = None
        for address, exclusive in attempts:
            try:
                self._db = sqlite3.connect(
                    address, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False
                )
            except sqlite3.Error as exc:
                failure = exc
                continue
            try:
                if exclusive:  # before the first read: the log's index is then kept in memory, not in -shm
                    self._db.execute("PRAGMA locking_mode=EXCLUSIVE").fetchall()
                self._tables()
            except sqlite3.Error as exc:
                self._db.close()
                failure = exc
                continue
            try:
                self._check_format()
            except BaseException:
                self._db.close()
                raise
            return
        if logged:
            msg = (
                f"cannot read the checkpoint store {self.path!r} read-only: its write-ahead log {str(wal)!r} "
                f"may hold checkpoints the file does not, and SQLite cannot read it here ({failure}); "
                f"the file alone would show an older head. Copy {Path(self.path).name!r} and "
                f"{wal.name!r} together to writable storage and open the copy. Nothing was changed"
            )
            raise CheckpointError(msg, path="-wal")
        msg = f"{self.path!r} is not a readable SQLite database ({failure}); nothing was changed"
        raise CheckpointError(msg)

    def _prepare(self, synchronous: str, timeout: float) -> None:
        """
        Make the tables of a new file, or check those of an existing one, and
        set the journal up; tried again until *timeout* while another
        connection holds the file: SQLite refuses to turn a new file to WAL
        at once, without waiting, while another connection writes to it (two
        processes opening one new store together).
        """
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    self._set_up(synchronous)
                except sqlite3.OperationalError as exc:
                    if not _busy(exc) or time.monotonic() >= deadline:
                        raise
                else:
                    return
                time.sleep(_PAUSE)
        except sqlite3.Error as exc:
            if _cannot_write(exc) and Path(self.path).exists() and self.path != ":memory:":
                raise _CannotWrite(str(exc)) from None
            msg = f"{self.path!r} is not a readable SQLite database ({exc}); nothing was changed"
            raise CheckpointError(msg) from None

    def _set_up(self, synchronous: str) -> None:
        tables = self._tables()
        if not tables:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if not self._tables():
                    for statement in _SCHEMA:
                        self._db.execute(statement)
                    self._db.executemany(
                        "INSERT INTO workingctx_store (key, value) VALUES (?, ?)",
                        [("format", FORMAT), ("schema_version", str(SCHEMA_VERSION))],
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        self._check_format()
        if "heads" not in self._tables():  # written before threads existed: add their table
            with self._transaction(write=True) as db:
                if "heads" not in self._tables():
                    db.execute(_HEADS)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous}")

    def _tables(self) -> set[str]:
        return {name for (name,) in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def _check_format(self) -> None:
        """
        Refuse a database that is not a workingctx store, or is of a newer schema.
        """
        try:
            # a version that is not UTF-8 text is a damaged one
            found = dict(
                _leniently(self._db, lambda db: db.execute("SELECT key, value FROM workingctx_store").fetchall())
            )
        except sqlite3.OperationalError:
            msg = (
                f"{self.path!r} is a SQLite database but not a workingctx checkpoint store "
                "(no workingctx_store table); open a new file for checkpoints. Nothing was changed"
            )
            raise CheckpointError(msg, path="workingctx_store") from None
        _codec.check_marker(found, repr(self.path), SCHEMA_VERSION)
        version = int(found["schema_version"])
        self._packs = version >= 2  # the version that compresses
        binary = version >= 3  # the version that keeps digests as bytes
        self._in = _stored_key if binary else _same
        self._out = _read_key if binary else _same

    def _row(self, row: Sequence[Any]) -> Sequence[Any]:
        """
        A checkpoint row as read, its digests as hexadecimal text.
        """
        if self._out is _same or len(row) != len(_codec.ROW_FIELDS):
            return row
        out = list(row)
        for index in _ROW_KEYS:
            out[index] = _read_key(out[index])
        return out

    # -- transactions -------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """
        One transaction (a consistent read, or ``BEGIN IMMEDIATE`` for a write),
        rolled back on any error; sqlite errors become CheckpointError.
        """
        if write and self.read_only:
            msg = (
                f"the checkpoint store {self.path!r} is read-only ({self._why_read_only}): "
                "save() and delete() cannot change it; copy the file somewhere writable to change it. "
                "Nothing was changed"
            )
            raise CheckpointError(msg)
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.Error as exc:
                msg = f"cannot use the checkpoint store {self.path!r}: {exc}"
                raise CheckpointError(msg) from None
            try:
                self._check_format()
                yield self._db
            except BaseException as exc:
                self._rollback()
                if isinstance(exc, sqlite3.Error | UnicodeError):
                    msg = f"the checkpoint store {self.path!r} failed ({exc}); it was left as it was"
                    raise CheckpointError(msg) from None
                raise
            else:
                try:
                    self._db.execute("COMMIT")
                except sqlite3.Error as exc:
                    self._rollback()
                    msg = f"cannot commit to the checkpoint store {self.path!r} ({exc}); it was left as it was"
                    raise CheckpointError(msg) from None

    def _rollback(self) -> None:
        if self._db.in_transaction:
            with contextlib.suppress(sqlite3.Error):  # the transaction is gone already; nothing was committed
                self._db.execute("ROLLBACK")

    # -- saving -------------------------------------------------------------------

    def _save(self, checkpoint: Checkpoint, thread: str | None) -> None:
        snapshot = checkpoint.snapshot
        encoded = _codec.encode(checkpoint, self._key)
        prefix = snapshot.prefix
        with self._transaction(write=True) as db:
            if thread is not None:
                found = db.execute("SELECT checkpoint FROM heads WHERE thread = ?", (thread,)).fetchone()
                current = None if found is None else found[0]
                if not head_allows(current, checkpoint):
                    raise head_conflict(thread, checkpoint, current)
                db.execute(
                    "INSERT INTO heads (thread, checkpoint) VALUES (?, ?)"
                    " ON CONFLICT (thread) DO UPDATE SET checkpoint = excluded.checkpoint",
                    (thread, checkpoint.id),
                )
            existing = db.execute("SELECT seal FROM checkpoints WHERE id = ?", (checkpoint.id,)).fetchone()
            if existing is not None and self._out(existing[0]) == encoded.seal:
                return
            prefix_key = self._in(encoded.prefix_key)
            if db.execute("SELECT 1 FROM blobs WHERE digest = ?", (prefix_key,)).fetchone() is None:
                prefix_text = _codec.payload(prefix, "$.snapshot.prefix", checkpoint, typed=True)
                db.execute("INSERT INTO blobs (digest, data) VALUES (?, ?)", (prefix_key, self._pack(prefix_text)))
            db.execute(
                "INSERT OR IGNORE INTO blobs (digest, data) VALUES (?, ?)",
                (self._in(encoded.notes_key), self._pack(encoded.notes_text)),
            )
            self._save_chain(db, MESSAGES, checkpoint)
            self._save_chain(db, JOURNAL, checkpoint)
            db.execute("DELETE FROM checkpoints WHERE id = ?", (checkpoint.id,))
            db.execute(
                f"INSERT INTO checkpoints ({_ROW}, created_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608  # column names are constants
                (*self._stored_row(encoded.row), self._in(encoded.seal), checkpoint.created_at.timestamp()),
            )
            if existing is not None:
                self._collect_garbage(db)
        for message in snapshot.messages[-64:]:
            _codec.remember(self._messages, message.digest(), message)

    def _pack(self, text: str) -> str | bytes:
        return _codec.pack(text) if self._packs else text

    def _stored_row(self, row: Sequence[Any]) -> Sequence[Any]:
        """
        The fields of a checkpoint row but its seal, as this store keeps them.
        """
        if self._in is _same:
            return row
        return [self._in(field) if index in _ROW_KEYS else field for index, field in enumerate(row)]

    def _stored_length(self, db: sqlite3.Connection, table: str, chain_at: Callable[[int], str], count: int) -> int:
        """
        How many leading items of a chain are stored already.
        """
        query = f"SELECT 1 FROM {table} WHERE chain = ?"  # noqa: S608  # table is a constant of this module
        holds = lambda n: db.execute(query, (self._in(chain_at(n)),)).fetchone() is not None  # noqa: E731
        return _codec.galloped_length(count, holds)

    def _save_chain(self, db: sqlite3.Connection, kind: Kind, checkpoint: Checkpoint) -> None:
        """
        Store the items and links of *kind* the store does not hold yet.
        """
        items, links, column = _CHAINS[kind.noun]
        count = len(kind.items(checkpoint.snapshot))
        start = self._stored_length(db, links, kind.chain(checkpoint), count)
        key = self._in
        for position, link, previous, digest, item in _codec.new_links(kind, checkpoint, start):
            stored = key(digest)
            if db.execute(f"SELECT 1 FROM {items} WHERE digest = ?", (stored,)).fetchone() is None:  # noqa: S608  # constant names
                text = kind.text(item, position, checkpoint)
                db.execute(
                    f"INSERT INTO {items} (digest, data, checksum) VALUES (?, ?, ?)",  # noqa: S608  # constant names
                    (stored, self._pack(text), key(checksum(digest, text))),
                )
            db.execute(
                f"INSERT OR IGNORE INTO {links} (chain, prev, {column}, position) VALUES (?, ?, ?, ?)",  # noqa: S608  # constant names
                (key(link), key(previous), stored, position),
            )

    # -- loading ------------------------------------------------------------------

    def _load(self, checkpoint_id: str) -> Checkpoint:
        query = f"SELECT {_ROW} FROM checkpoints WHERE id = ?"  # noqa: S608  # constant columns
        with self._transaction(write=False) as db:
            row = _leniently(db, lambda db: db.execute(query, (checkpoint_id,)).fetchone())
            if row is None:
                raise self._missing(checkpoint_id)
            return self._built(checkpoint_id, lambda: self._build(db, self._row(row)))

    def _build(self, db: sqlite3.Connection, row: Sequence[Any]) -> Checkpoint:
        info = _codec.read_info(row, key=self._key)
        (_, _, _, _, digest, prefix_key, notes_key, messages_head, _, journal_head, journal_count, _) = row
        prefix = self._prefixes.get(prefix_key) if isinstance(prefix_key, str) else None
        if prefix is None:
            prefix = _codec.decode_prefix(self._blob(db, prefix_key, "$.snapshot.prefix"), prefix_key, self._prefixes)
        notes = _codec.decode_notes(self._blob(db, notes_key, "$.snapshot.scratchpad"), notes_key)
        data = self._data_column(db)
        messages = self._chain(db, MESSAGES, messages_head, info.message_count, self._messages, data)
        journal = self._chain(db, JOURNAL, journal_head, journal_count, self._entries, data)
        return _codec.assemble(info, digest, prefix, notes, messages, journal[0])

    def _blob(self, db: sqlite3.Connection, key: object, path: str) -> object:
        found = db.execute("SELECT data FROM blobs WHERE digest = ?", (self._in(key),)).fetchone()
        if found is None:
            damage(f"blob {key!r} is missing from table blobs", path)
        return _codec.as_text(_codec.unpack(found[0]))

    def _data_column(self, db: sqlite3.Connection) -> str:
        """
        How a load selects an item's text: as its UTF-8 bytes (hashed as read,
        never decoded and encoded again) in a UTF-8 database, which is what
        SQLite makes unless told otherwise; as text in any other.
        """
        if self._data is None:
            found = db.execute("PRAGMA encoding").fetchone()
            self._data = "CAST(data AS BLOB)" if found is not None and found[0] == "UTF-8" else "data"
        return self._data

    def _chain(
        self, db: sqlite3.Connection, kind: Kind, head: object, count: object, cache: dict[str, Any], data: str
    ) -> tuple[list[Any], list[str]]:
        """
        The items of the chain of *kind* ending at *head*, and its chain digests, all checked.

        The links are walked from *head* down, and the items the cache
        lacks are read: each table in one pass when the chain is most of it,
        or else link by link and item by item. The row's count is checked
        against the head link's position first, and each step of the walk
        must go one position down, so a damaged or crafted row (a huge count,
        a link naming itself) costs only the links the file holds.
        """
        items, links, column = _CHAINS[kind.noun]
        length = _codec.check_count(count, head, kind.root, kind.path, "table checkpoints")
        if length == 0:
            return [], []
        found = db.execute(f"SELECT position FROM {links} WHERE chain = ?", (self._in(head),)).fetchone()  # noqa: S608  # constant names
        if found is None:
            damage(f"the head link {head!r} is missing (table {links}, truncated or damaged)", kind.path)
        if found[0] != length - 1:
            damage(
                f"the checkpoint counts {length} items but its head link {head!r} is at position {found[0]!r} "
                f"(table {links}, damaged)",
                kind.path,
            )
        whole = SQLiteStore._most_of(db, links, length)
        if whole:
            # The chain is most of the table (one run's checkpoints): read the
            # table in one pass and walk it here, rather than look up each link.
            found_rows = db.execute(f"SELECT chain, prev, {column}, position FROM {links}").fetchall()  # noqa: S608  # constant names
            table = dict(zip(map(_first, found_rows), found_rows, strict=True))
            walked = None if self._out is _same else _walk_binary(kind, table, head, length)
            if walked is None:
                if self._out is not _same:  # damage, or an older layout: the checks say what and where
                    found_rows = self._links(found_rows)
                    table = dict(zip(map(_first, found_rows), found_rows, strict=True))
                walked = _codec.follow(kind, table, head, length, f"table {links}")
            chain, digests = walked
        else:
            query = (
                f"WITH RECURSIVE walk (chain, prev, item, position) AS ("  # noqa: S608  # constant names only
                f" SELECT chain, prev, {column}, position FROM {links} WHERE chain = ?"
                f" UNION ALL"
                f" SELECT l.chain, l.prev, l.{column}, l.position"
                f" FROM {links} AS l JOIN walk AS w ON l.chain = w.prev AND l.position = w.position - 1"
                f" WHERE w.position > 0"
                f") SELECT chain, prev, item, position FROM walk"
            )
            rows = self._links(db.execute(query, (self._in(head),)).fetchall())
            rows.sort(key=_codec.by_position)
            checked = _codec.check_links(rows, length, kind.root, kind.path, f"table {links}")
            _codec.check_steps(kind, checked, f"table {links}")
            chain, digests = [link for link, _ in checked], [digest for _, digest in checked]
        # Every item is named by a link, so a table holds at most as many items as links.
        if not cache and whole:
            # Nothing is cached (a fresh store) and the links are most of their
            # table: so are the items, and every one of the chain is read.
            found = self._stored_items(db.execute(f"SELECT digest, {data}, checksum FROM {items}").fetchall())  # noqa: S608  # constant names
            if len(found) > len(digests):
                wanted = set(digests)
                found = [row for row in found if row[0] in wanted]
        else:
            wanted = set(digests).difference(cache)
            found = []
            if wanted and ((whole and 2 * len(wanted) >= len(table)) or SQLiteStore._most_of(db, items, len(wanted))):
                found = self._stored_items(db.execute(f"SELECT digest, {data}, checksum FROM {items}").fetchall())  # noqa: S608  # constant names
                if len(found) > len(wanted):
                    found = [row for row in found if row[0] in wanted]
            elif wanted:
                found = self._items(db, items, wanted, data)
        return _codec.decode_items(kind, digests, _codec.unpacked(found), cache, items=f"table {items}"), chain

    @staticmethod
    def _most_of(db: sqlite3.Connection, table: str, wanted: int) -> bool:
        """
        Whether *wanted* rows are at least half of *table* (counting at most twice *wanted*).
        """
        query = f"SELECT count(*) FROM (SELECT 1 FROM {table} LIMIT ?)"  # noqa: S608  # constant names
        return int(db.execute(query, (2 * wanted + 1,)).fetchone()[0]) <= 2 * wanted

    def _links(self, rows: builtins.list[Any]) -> builtins.list[Any]:
        """
        Link rows ``(chain, prev, item, position)`` as read, their digests as hexadecimal text.
        """
        out = self._out
        if out is _same:
            return rows
        return [(out(chain), out(prev), out(item), position) for chain, prev, item, position in rows]

    def _stored_items(self, rows: builtins.list[Any]) -> builtins.list[Any]:
        """
        Item rows ``(digest, data, checksum)`` as read, their digests as hexadecimal text.
        """
        out = self._out
        if out is _same:
            return rows
        return [(out(digest), data, out(check)) for digest, data, check in rows]

    def _items(self, db: sqlite3.Connection, table: str, keys: set[str], data: str) -> builtins.list[_codec.Row]:
        """
        The stored items of *keys* that are there, unchecked.
        """
        found: builtins.list[_codec.Row] = []
        ordered = [self._in(key) for key in sorted(keys)]
        for start in range(0, len(ordered), 500):
            chunk = ordered[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            query = f"SELECT digest, {data}, checksum FROM {table} WHERE digest IN ({marks})"  # noqa: S608  # constants
            found.extend(db.execute(query, chunk).fetchall())
        return self._stored_items(found)

    # -- listing and deleting -----------------------------------------------------------

    def _list(self) -> Listing[CheckpointInfo]:
        query = f"SELECT {_ROW} FROM checkpoints ORDER BY created_ts, seq"  # noqa: S608  # constant columns
        with self._transaction(write=False) as db:
            rows = _leniently(db, lambda db: db.execute(query).fetchall())
        return listed_rows(rows, self._checked_info, "checkpoint row", self._place)

    def _checked_info(self, row: Sequence[Any]) -> CheckpointInfo:
        try:
            return _codec.read_info(self._row(row), key=self._key)
        except Damage as exc:
            raise self._error(shown(row[0]), exc.what, exc.path) from None

    def _lineage(self, checkpoint_id: str) -> Listing[CheckpointInfo]:
        query = (
            "WITH RECURSIVE up (id) AS (SELECT ? UNION SELECT c.parent FROM checkpoints AS c"  # noqa: S608  # constant columns
            " JOIN up ON c.id = up.id WHERE c.parent IS NOT NULL)"
            f" SELECT {_ROW} FROM checkpoints WHERE id IN (SELECT id FROM up)"
        )
        with self._transaction(write=False) as db:
            rows = {row[0]: row for row in _leniently(db, lambda db: db.execute(query, (checkpoint_id,)).fetchall())}
        return self._lineage_of(rows.get, checkpoint_id, self._checked_info)

    def _delete(self, checkpoint_id: str) -> None:
        with self._transaction(write=True) as db:
            found = db.execute("SELECT parent FROM checkpoints WHERE id = ?", (checkpoint_id,)).fetchone()
            if found is None:
                raise self._missing(checkpoint_id)
            db.execute("DELETE FROM checkpoints WHERE id = ?", (checkpoint_id,))
            # A thread whose head it was goes back to its parent, or ends.
            db.execute(
                "UPDATE heads SET checkpoint = ? WHERE checkpoint = ?"
                " AND EXISTS (SELECT 1 FROM checkpoints WHERE id = ?)",
                (found[0], checkpoint_id, found[0]),
            )
            db.execute("DELETE FROM heads WHERE checkpoint = ?", (checkpoint_id,))
            self._collect_garbage(db)

    def _head(self, thread: str) -> str | None:
        with self._transaction(write=False) as db:
            found = db.execute("SELECT checkpoint FROM heads WHERE thread = ?", (thread,)).fetchone()
            return None if found is None else str(found[0])

    @staticmethod
    def _collect_garbage(db: sqlite3.Connection) -> None:
        for links, items, item, head in (
            ("message_links", "messages", "message", "messages_head"),
            ("journal_links", "journal_entries", "entry", "journal_head"),
        ):
            db.execute(
                f"WITH RECURSIVE live (chain) AS (SELECT {head} FROM checkpoints"  # noqa: S608  # constants
                f" UNION SELECT l.prev FROM {links} AS l JOIN live ON l.chain = live.chain)"
                f" DELETE FROM {links} WHERE chain NOT IN (SELECT chain FROM live)"
            )
            db.execute(f"DELETE FROM {items} WHERE digest NOT IN (SELECT {item} FROM {links})")  # noqa: S608  # constants
        db.execute(
            "DELETE FROM blobs WHERE digest NOT IN"
            " (SELECT prefix FROM checkpoints UNION SELECT scratchpad FROM checkpoints)"
        )

    # -- recorded contexts -----------------------------------------------------------

    def _save_context(self, ctx: WorkingContext) -> str:
        with self._transaction(write=True) as db:
            return histories.sqlite_save(db, ctx, self._place)

    def _load_context(self, context_id: str) -> WorkingContext:
        with self._transaction(write=False) as db:
            return _leniently(db, lambda db: histories.sqlite_load(db, context_id, self._place))

    def _list_contexts(self) -> Listing[ContextInfo]:
        with self._transaction(write=False) as db:
            return _leniently(db, lambda db: histories.sqlite_list(db, self._place))

    def _delete_context(self, context_id: str) -> None:
        with self._transaction(write=True) as db:
            histories.sqlite_delete(db, context_id, self._place)

    # -- the rest -----------------------------------------------------------------

    def close(self) -> None:
        """
        Close the database (the store cannot be used afterwards).
        """
        with self._lock:
            self._db.close()

    def __len__(self) -> int:
        with self._transaction(write=False) as db:
            return int(db.execute("SELECT count(*) FROM checkpoints").fetchone()[0])

    def _contains(self, checkpoint_id: str) -> bool:
        with self._transaction(write=False) as db:
            return db.execute("SELECT 1 FROM checkpoints WHERE id = ?", (checkpoint_id,)).fetchone() is not None

    def __repr__(self) -> str:
        extras = (" read_only=True" if self.read_only else "") + (" keyed=True" if self._key is not None else "")
        return f"<SQLiteStore path={self.path!r}{extras}>"
