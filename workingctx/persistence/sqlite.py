"""
The SQLite store: the embedded default, on the standard library's ``sqlite3``.

Layout (schema version 1):

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
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, NoReturn, Self, cast

from workingctx._canonical import EMPTY_CHAIN, canonical_json, chain_step
from workingctx.exceptions import CheckpointError, SerializationError
from workingctx.frozen import FrozenDict
from workingctx.messages import Message
from workingctx.persistence.checkpoint import Checkpoint
from workingctx.persistence.stores import CheckpointInfo, _check_checkpoint, _check_id, _missing
from workingctx.prefix import PrefixContext
from workingctx.serialization import converter, from_json, to_json
from workingctx.snapshot import Chain, FrozenContext

__all__ = ["FORMAT", "SCHEMA_VERSION", "SQLiteStore"]

FORMAT = "workingctx.checkpoints"
"""The format name a workingctx database carries in its ``workingctx_store`` table."""

SCHEMA_VERSION = 1
"""The schema version this workingctx writes, and the newest it reads."""

JOURNAL_ROOT = hashlib.sha256(b"workingctx/journal-chain/v1").hexdigest()
"""The chain digest of an empty journal."""

_SCHEMA = (
    "CREATE TABLE workingctx_store (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
    "CREATE TABLE messages (digest TEXT PRIMARY KEY, data TEXT NOT NULL, checksum TEXT NOT NULL) WITHOUT ROWID",
    (
        "CREATE TABLE message_links ("
        " chain TEXT PRIMARY KEY, prev TEXT NOT NULL, message TEXT NOT NULL, position INTEGER NOT NULL"
        ") WITHOUT ROWID"
    ),
    "CREATE TABLE journal_entries (digest TEXT PRIMARY KEY, data TEXT NOT NULL, checksum TEXT NOT NULL) WITHOUT ROWID",
    (
        "CREATE TABLE journal_links ("
        " chain TEXT PRIMARY KEY, prev TEXT NOT NULL, entry TEXT NOT NULL, position INTEGER NOT NULL"
        ") WITHOUT ROWID"
    ),
    "CREATE TABLE blobs (digest TEXT PRIMARY KEY, data TEXT NOT NULL) WITHOUT ROWID",
    (
        "CREATE TABLE checkpoints ("
        " seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, parent TEXT, created_at TEXT NOT NULL,"
        " created_ts REAL NOT NULL, metadata TEXT NOT NULL, digest TEXT NOT NULL, prefix TEXT NOT NULL,"
        " scratchpad TEXT NOT NULL, messages_head TEXT NOT NULL, message_count INTEGER NOT NULL,"
        " journal_head TEXT NOT NULL, journal_count INTEGER NOT NULL, seal TEXT NOT NULL)"
    ),
    "CREATE INDEX checkpoints_parent ON checkpoints (parent)",
    "CREATE INDEX checkpoints_order ON checkpoints (created_ts, seq)",
)

_ROW = (
    "id, parent, created_at, metadata, digest, prefix, scratchpad, "
    "messages_head, message_count, journal_head, journal_count, seal"
)

_SYNCHRONOUS = frozenset({"OFF", "NORMAL", "FULL", "EXTRA"})
_CACHE_LIMIT = 200_000


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _storable(text: str) -> str:
    """
    JSON text SQLite can store: a lone surrogate (a streamed emoji cut in half)
    has no UTF-8 form, so such text is written with ASCII escapes instead.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(json.loads(text), ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text


def _entry_digest(entry: Any) -> str:
    return _sha256("journal-entry:" + canonical_json(entry))


def _checksum(key: str, data: str) -> str:
    """
    Binds a stored item's text to its key: any change to either shows on load,
    without recomputing the item's own digest.
    """
    return _sha256(f"{key}\n{data}")


def _journal_step(previous: str, entry_digest: str) -> str:
    return hashlib.sha256(f"{previous}:{entry_digest}".encode("ascii")).hexdigest()


def _scratchpad_digest(notes: dict[str, Any]) -> str:
    return _sha256("scratchpad:" + canonical_json(notes))


def _parse_all(texts: dict[str, str | None]) -> dict[str, Any]:
    """
    Parse many JSON texts in one call; a text that does not parse is left out
    (its reader reports it, with a path).

    Only texts that passed their checksum come here: each was written by
    ``to_json`` as one JSON value, so joining them cannot shift values between keys.
    """
    keys = [key for key, text in texts.items() if text is not None]
    try:
        values = json.loads("[" + ",".join(cast("str", texts[key]) for key in keys) + "]")
    except ValueError:
        values = None
    if isinstance(values, list) and len(values) == len(keys):
        return dict(zip(keys, values, strict=True))
    parsed: dict[str, Any] = {}
    for key in keys:
        with contextlib.suppress(ValueError):
            parsed[key] = json.loads(cast("str", texts[key]))
    return parsed


def _seal(row: Sequence[Any]) -> str:
    """
    The digest over a checkpoint row's fields (every column of ``_ROW`` but the seal).
    """
    return _sha256("checkpoint-row/v1:" + json.dumps([str(field) for field in row[:11]], ensure_ascii=False))


class _Damage(Exception):  # noqa: N818  # internal: always turned into CheckpointError
    """
    Something read back is wrong: what, and where in the checkpoint.
    """

    def __init__(self, what: str, path: str = "$") -> None:
        super().__init__(what)
        self.what = what
        self.path = path


def _damage(what: str, path: str = "$") -> NoReturn:
    raise _Damage(what, path)


class SQLiteStore:
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

    Raises:
        CheckpointError: The file is not a SQLite database, is damaged, holds
            tables that are not a workingctx store, or was written by a newer
            schema version. The file is left untouched.

    >>> from workingctx import Checkpoint, Message, SQLiteStore, WorkingContext
    >>> store = SQLiteStore(":memory:")
    >>> ctx = WorkingContext().append(Message("user", "hello"))
    >>> saved = store.save(Checkpoint.capture(ctx))
    >>> store.load(saved).snapshot == ctx.freeze()
    True
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0, synchronous: str = "NORMAL") -> None:
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout < 0:
            msg = f"timeout must be a non-negative number of seconds, got {timeout!r}"
            raise ValueError(msg)
        if synchronous not in _SYNCHRONOUS:
            msg = f"synchronous must be one of {sorted(_SYNCHRONOUS)}, got {synchronous!r}"
            raise ValueError(msg)
        self.path = os.fspath(path)
        self._lock = threading.RLock()
        # Items read or written once, by digest: values, so sharing them is safe.
        self._messages: dict[str, Message] = {}
        self._entries: dict[str, Any] = {}
        self._prefixes: dict[str, PrefixContext] = {}
        # The journal last saved, to reuse the digests of entries a journal never rewrites.
        self._journal_seen: tuple[list[Any], list[str]] = ([], [])
        try:
            self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            msg = f"cannot open the checkpoint store {self.path!r}: {exc}"
            raise CheckpointError(msg) from None
        try:
            self._prepare(synchronous)
        except BaseException:
            self._db.close()
            raise

    # -- opening ------------------------------------------------------------------

    def _prepare(self, synchronous: str) -> None:
        try:
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
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous}")
        except sqlite3.Error as exc:
            msg = f"{self.path!r} is not a readable SQLite database ({exc}); nothing was changed"
            raise CheckpointError(msg) from None

    def _tables(self) -> set[str]:
        return {name for (name,) in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def _check_format(self) -> None:
        """
        Refuse a database that is not a workingctx store, or is of a newer schema.
        """
        try:
            found = dict(self._db.execute("SELECT key, value FROM workingctx_store").fetchall())
        except sqlite3.OperationalError:
            msg = (
                f"{self.path!r} is a SQLite database but not a workingctx checkpoint store "
                "(no workingctx_store table); open a new file for checkpoints. Nothing was changed"
            )
            raise CheckpointError(msg, path="workingctx_store") from None
        if found.get("format") != FORMAT:
            msg = (
                f"{self.path!r} is not a workingctx checkpoint store: its format is {found.get('format')!r}, "
                f"expected {FORMAT!r}. Nothing was changed"
            )
            raise CheckpointError(msg, path="workingctx_store.format")
        version = found.get("schema_version")
        if not isinstance(version, str) or not version.isdigit():
            msg = f"{self.path!r} has a damaged schema version {version!r}; expected {SCHEMA_VERSION}"
            raise CheckpointError(msg, path="workingctx_store.schema_version")
        if int(version) > SCHEMA_VERSION:
            msg = (
                f"{self.path!r} was written by a newer workingctx (schema version {version}; this one reads "
                f"up to {SCHEMA_VERSION}): upgrade workingctx to read it. Nothing was changed"
            )
            raise CheckpointError(msg, path="workingctx_store.schema_version")

    # -- transactions -------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """
        One transaction (a consistent read, or ``BEGIN IMMEDIATE`` for a write),
        rolled back on any error; sqlite errors become CheckpointError.
        """
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

    def save(self, checkpoint: Checkpoint) -> str:
        """
        Save *checkpoint* in one transaction and return its id.

        Only what the store does not hold yet is written: new messages, new
        links, a changed prefix or scratchpad. Saving a checkpoint again is a
        no-op; saving another under the same id replaces it.

        Raises:
            TypeError: *checkpoint* is not a :class:`Checkpoint`.
            CheckpointError: A payload (scratchpad value, journal entry,
                metadata) is not JSON data, or the database failed; nothing
                was written.
        """
        _check_checkpoint(checkpoint)
        snapshot = checkpoint.snapshot
        notes = dict(snapshot.scratchpad)
        notes_text = self._payload(notes, "$.snapshot.scratchpad", checkpoint)
        notes_digest = _scratchpad_digest(notes)
        metadata_text = self._payload(checkpoint.metadata, "$.metadata", checkpoint)
        entry_digests, journal_chain = self._journal_digests(snapshot.journal)
        prefix = snapshot.prefix
        row = (
            checkpoint.id,
            checkpoint.parent,
            checkpoint.created_at.isoformat(),
            metadata_text,
            snapshot.digest(),
            prefix.digest(),
            notes_digest,
            snapshot.chain_digest(),
            len(snapshot.messages),
            journal_chain[-1] if journal_chain else JOURNAL_ROOT,
            len(snapshot.journal),
        )
        seal = _seal(row)
        with self._transaction(write=True) as db:
            existing = db.execute("SELECT seal FROM checkpoints WHERE id = ?", (checkpoint.id,)).fetchone()
            if existing is not None and existing[0] == seal:
                return checkpoint.id
            if db.execute("SELECT 1 FROM blobs WHERE digest = ?", (prefix.digest(),)).fetchone() is None:
                prefix_text = self._payload(prefix, "$.snapshot.prefix", checkpoint, typed=True)
                db.execute("INSERT INTO blobs (digest, data) VALUES (?, ?)", (prefix.digest(), prefix_text))
            db.execute("INSERT OR IGNORE INTO blobs (digest, data) VALUES (?, ?)", (notes_digest, notes_text))
            self._save_messages(db, snapshot, checkpoint)
            self._save_journal(db, snapshot.journal, entry_digests, journal_chain, checkpoint)
            db.execute("DELETE FROM checkpoints WHERE id = ?", (checkpoint.id,))
            db.execute(
                f"INSERT INTO checkpoints ({_ROW}, created_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608  # column names are constants
                (*row, seal, checkpoint.created_at.timestamp()),
            )
            if existing is not None:
                self._collect_garbage(db)
        for message in snapshot.messages[-64:]:
            self._remember(message)
        return checkpoint.id

    def _payload(self, value: Any, path: str, checkpoint: Checkpoint, *, typed: bool = False) -> str:
        try:
            return _storable(to_json(value) if typed else to_json(value, Any))
        except SerializationError as exc:
            where = path + exc.path[1:]
            msg = f"cannot save checkpoint {checkpoint.id!r}: {exc.problems[0][1]} at {where}; nothing was written"
            raise CheckpointError(msg, path=where) from None

    def _journal_digests(self, journal: tuple[Any, ...]) -> tuple[list[str], list[str]]:
        """
        Each entry's digest and the journal's chain digests, reusing those of
        the entries the last saved journal shared (a journal never rewrites one).
        """
        seen_entries, seen_chain = self._journal_seen
        reuse = 0
        for mine, theirs in zip(journal, seen_entries, strict=False):
            if mine is not theirs:
                break
            reuse += 1
        chain = seen_chain[:reuse]
        digests: list[str] = []
        previous = chain[-1] if chain else JOURNAL_ROOT
        for position, entry in enumerate(journal):
            if position < reuse:
                digests.append("")  # stored already: never written again below
                continue
            digest = _entry_digest(entry)
            digests.append(digest)
            previous = _journal_step(previous, digest)
            chain.append(previous)
        self._journal_seen = (list(journal), chain)
        return digests, chain

    @staticmethod
    def _stored_length(db: sqlite3.Connection, table: str, chain_at: Callable[[int], str], count: int) -> int:
        """
        How many leading items of a chain are stored already (links are only ever
        stored with all their ancestors, so presence is monotone: binary search).
        """
        query = f"SELECT 1 FROM {table} WHERE chain = ?"  # noqa: S608  # table is a constant of this module
        if count == 0 or db.execute(query, (chain_at(count),)).fetchone() is not None:
            return count
        low, high = 0, count - 1
        while low < high:
            middle = (low + high + 1) // 2
            if db.execute(query, (chain_at(middle),)).fetchone() is not None:
                low = middle
            else:
                high = middle - 1
        return low

    def _save_messages(self, db: sqlite3.Connection, snapshot: FrozenContext, checkpoint: Checkpoint) -> None:
        messages = snapshot.messages
        start = self._stored_length(db, "message_links", snapshot.chain_digest, len(messages))
        previous = snapshot.chain_digest(start)
        for position in range(start, len(messages)):
            message = messages[position]
            digest = message.digest()
            if db.execute("SELECT 1 FROM messages WHERE digest = ?", (digest,)).fetchone() is None:
                text = self._payload(message, f"$.snapshot.messages[{position}]", checkpoint, typed=True)
                db.execute(
                    "INSERT INTO messages (digest, data, checksum) VALUES (?, ?, ?)",
                    (digest, text, _checksum(digest, text)),
                )
            chain = snapshot.chain_digest(position + 1)
            db.execute(
                "INSERT OR IGNORE INTO message_links (chain, prev, message, position) VALUES (?, ?, ?, ?)",
                (chain, previous, digest, position),
            )
            previous = chain

    def _save_journal(
        self,
        db: sqlite3.Connection,
        journal: tuple[Any, ...],
        digests: list[str],
        chain: list[str],
        checkpoint: Checkpoint,
    ) -> None:
        start = self._stored_length(db, "journal_links", lambda n: chain[n - 1] if n else JOURNAL_ROOT, len(journal))
        previous = chain[start - 1] if start else JOURNAL_ROOT
        for position in range(start, len(journal)):
            digest = digests[position] or _entry_digest(journal[position])
            if db.execute("SELECT 1 FROM journal_entries WHERE digest = ?", (digest,)).fetchone() is None:
                text = self._payload(journal[position], f"$.snapshot.journal[{position}]", checkpoint)
                db.execute(
                    "INSERT INTO journal_entries (digest, data, checksum) VALUES (?, ?, ?)",
                    (digest, text, _checksum(digest, text)),
                )
            db.execute(
                "INSERT OR IGNORE INTO journal_links (chain, prev, entry, position) VALUES (?, ?, ?, ?)",
                (chain[position], previous, digest, position),
            )
            previous = chain[position]

    def _remember(self, message: Message) -> None:
        if len(self._messages) >= _CACHE_LIMIT:
            self._messages.clear()
        self._messages[message.digest()] = message

    # -- loading ------------------------------------------------------------------

    def load(self, checkpoint_id: str) -> Checkpoint:
        """
        The checkpoint saved under *checkpoint_id*, equal to the one saved.

        Every part is checked against its digest on the way in.

        Raises:
            CheckpointError: No checkpoint has that id, or what is stored is
                damaged, truncated or not ours; the message names the table,
                the key and the path inside the checkpoint. Nothing is changed.
        """
        _check_id(checkpoint_id)
        with self._transaction(write=False) as db:
            row = db.execute(f"SELECT {_ROW} FROM checkpoints WHERE id = ?", (checkpoint_id,)).fetchone()  # noqa: S608  # constant columns
            if row is None:
                raise _missing(checkpoint_id, f"the SQLite store {self.path!r}")
            try:
                return self._build(db, row)
            except _Damage as exc:
                raise self._error(checkpoint_id, exc.what, exc.path) from None
            except SerializationError as exc:
                raise self._error(checkpoint_id, exc.problems[0][1], exc.path) from None
            except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as exc:
                raise self._error(checkpoint_id, f"{type(exc).__name__}: {exc}", "$") from None

    def _error(self, checkpoint_id: str, what: str, path: str) -> CheckpointError:
        msg = f"cannot load checkpoint {checkpoint_id!r} from {self.path!r}: {what} at {path}; nothing was changed"
        return CheckpointError(msg, path=path)

    def _info(self, row: Sequence[Any]) -> CheckpointInfo:
        """
        The descriptor of a checkpoint row, after checking its seal.
        """
        (checkpoint_id, parent, created_at, metadata, digest, _, _, _, message_count, _, _, seal) = row
        if not isinstance(seal, str) or _seal(row) != seal:
            _damage("the checkpoint row does not match its seal (table checkpoints, damaged)", "$")
        if not isinstance(checkpoint_id, str) or (parent is not None and not isinstance(parent, str)):
            _damage("the checkpoint row holds ids that are not text (table checkpoints)", "$.id")
        if not isinstance(message_count, int) or message_count < 0:
            _damage(f"message count {message_count!r} is not a count (table checkpoints)", "$.snapshot.messages")
        try:
            when = datetime.fromisoformat(created_at)
        except (TypeError, ValueError):
            _damage(f"creation time {created_at!r} is not an ISO 8601 time (table checkpoints)", "$.created_at")
        if when.tzinfo is None:
            _damage(f"creation time {created_at!r} has no time zone (table checkpoints)", "$.created_at")
        return CheckpointInfo(
            id=checkpoint_id,
            parent=parent,
            created_at=when,
            message_count=message_count,
            digest=str(digest),
            metadata=self._json(metadata, FrozenDict, "$.metadata", "checkpoints"),
        )

    @staticmethod
    def _json(text: object, kind: Any, path: str, table: str, key: str | None = None) -> Any:
        where = f"table {table}" + ("" if key is None else f", key {key!r}")
        if not isinstance(text, str):
            _damage(f"expected JSON text, found {type(text).__name__} ({where})", path)
        try:
            return from_json(text, kind)
        except SerializationError as exc:
            inner = "" if exc.path == "$" else exc.path[1:]
            _damage(f"{exc.problems[0][1]} ({where})", path + inner)

    def _build(self, db: sqlite3.Connection, row: Sequence[Any]) -> Checkpoint:
        info = self._info(row)
        (_, _, _, _, digest, prefix_key, notes_key, messages_head, _, journal_head, journal_count, _) = row
        prefix = self._load_prefix(db, prefix_key)
        notes = self._load_notes(db, notes_key)
        messages, chain = self._load_messages(db, messages_head, info.message_count)
        journal = self._load_journal(db, journal_head, journal_count)
        snapshot = FrozenContext(prefix, messages, notes, journal, _chain=Chain(chain))
        if snapshot.digest() != digest:
            _damage("the snapshot does not match its digest (table checkpoints, damaged)", "$.snapshot")
        return Checkpoint(
            id=info.id, snapshot=snapshot, created_at=info.created_at, parent=info.parent, metadata=info.metadata
        )

    def _blob(self, db: sqlite3.Connection, key: object, path: str) -> str:
        found = db.execute("SELECT data FROM blobs WHERE digest = ?", (key,)).fetchone()
        if found is None:
            _damage(f"blob {key!r} is missing from table blobs", path)
        return found[0]  # type: ignore[no-any-return]  # sqlite rows are untyped

    def _load_prefix(self, db: sqlite3.Connection, key: object) -> PrefixContext:
        cached = self._prefixes.get(key) if isinstance(key, str) else None
        if cached is not None:
            return cached
        prefix = self._json(
            self._blob(db, key, "$.snapshot.prefix"), PrefixContext, "$.snapshot.prefix", "blobs", str(key)
        )
        if prefix.digest() != key:
            _damage(f"the prefix does not match its digest (table blobs, key {key!r})", "$.snapshot.prefix")
        self._prefixes[prefix.digest()] = prefix
        return prefix  # type: ignore[no-any-return]  # from_json is typed Any here

    def _load_notes(self, db: sqlite3.Connection, key: object) -> FrozenDict:
        notes: FrozenDict = self._json(
            self._blob(db, key, "$.snapshot.scratchpad"), FrozenDict, "$.snapshot.scratchpad", "blobs", str(key)
        )
        if _scratchpad_digest(dict(notes)) != key:
            _damage(f"the scratchpad does not match its digest (table blobs, key {key!r})", "$.snapshot.scratchpad")
        return notes

    @staticmethod
    def _walk(
        db: sqlite3.Connection, links: str, item: str, head: object, count: object, root: str, path: str
    ) -> list[Any]:
        """
        The links of a chain from its root to *head*, checked for order and
        length: ``(chain digest, item digest)`` pairs.
        """
        if not isinstance(count, int) or count < 0:
            _damage(f"count {count!r} is not a count (table checkpoints)", path)
        if count == 0:
            if head != root:
                _damage(f"an empty chain has head {head!r} (table checkpoints)", path)
            return []
        query = (
            f"WITH RECURSIVE walk (chain, prev, item, position, depth) AS ("  # noqa: S608  # constant names only
            f" SELECT chain, prev, {item}, position, 0 FROM {links} WHERE chain = ?"
            f" UNION ALL"
            f" SELECT l.chain, l.prev, l.{item}, l.position, w.depth + 1"
            f" FROM {links} AS l JOIN walk AS w ON l.chain = w.prev WHERE w.depth < ?"
            f") SELECT chain, prev, item, position FROM walk ORDER BY depth DESC"
        )
        rows = db.execute(query, (head, count)).fetchall()
        if len(rows) != count:
            _damage(f"expected {count} links, found {len(rows)} (table {links}, truncated or damaged)", path)
        previous = root
        for position, (link, prev, digest, stored_position) in enumerate(rows):
            if prev != previous or stored_position != position or not isinstance(link, str):
                _damage(f"link {link!r} is out of place (table {links}, damaged)", f"{path}[{position}]")
            if not isinstance(digest, str):
                _damage(f"link {link!r} names no item (table {links}, damaged)", f"{path}[{position}]")
            previous = link
        return [(link, digest) for link, _, digest, _ in rows]

    @staticmethod
    def _items(db: sqlite3.Connection, table: str, keys: set[str]) -> dict[str, str | None]:
        """
        The stored texts of *keys*; None for a text that fails its checksum.
        """
        found: dict[str, str | None] = {}
        ordered = sorted(keys)
        for start in range(0, len(ordered), 500):
            chunk = ordered[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            query = f"SELECT digest, data, checksum FROM {table} WHERE digest IN ({marks})"  # noqa: S608  # constants
            for key, data, checksum in db.execute(query, chunk):
                intact = isinstance(data, str) and isinstance(checksum, str) and _checksum(key, data) == checksum
                found[key] = data if intact else None
        return found

    def _load_messages(self, db: sqlite3.Connection, head: object, count: object) -> tuple[list[Message], list[str]]:
        links = self._walk(db, "message_links", "message", head, count, EMPTY_CHAIN, "$.snapshot.messages")
        cache = self._messages
        texts = self._items(db, "messages", {digest for _, digest in links if digest not in cache})
        parsed = _parse_all(texts)
        hook = converter.get_structure_hook(Message)
        messages: list[Message] = []
        chain: list[str] = []
        previous = EMPTY_CHAIN
        for position, (link, digest) in enumerate(links):
            message = cache.get(digest)
            if message is None:
                path = f"$.snapshot.messages[{position}]"
                text = texts.get(digest)
                if text is None:
                    what = "does not match its checksum" if digest in texts else "is missing"
                    _damage(f"message {digest!r} {what} (table messages)", path)
                try:
                    message = hook(parsed[digest], Message)
                except Exception:  # noqa: BLE001  # read it again the slow way, for an error with a path
                    message = self._json(text, Message, path, "messages", digest)
                # The text is intact (its checksum held) and was written from a
                # message with this digest: keep it rather than hash it again.
                object.__setattr__(message, "_digest", digest)
                self._remember(message)
            if chain_step(previous, message) != link:
                _damage(
                    f"the link does not match its message (table message_links, key {link!r})",
                    f"$.snapshot.messages[{position}]",
                )
            messages.append(message)
            chain.append(link)
            previous = link
        return messages, chain

    def _load_journal(self, db: sqlite3.Connection, head: object, count: object) -> list[Any]:
        links = self._walk(db, "journal_links", "entry", head, count, JOURNAL_ROOT, "$.snapshot.journal")
        cache = self._entries
        texts = self._items(db, "journal_entries", {digest for _, digest in links if digest not in cache})
        entries: list[Any] = []
        previous = JOURNAL_ROOT
        for position, (link, digest) in enumerate(links):
            path = f"$.snapshot.journal[{position}]"
            if digest in cache:
                entry = cache[digest]
            else:
                text = texts.get(digest)
                if text is None:
                    what = "does not match its checksum" if digest in texts else "is missing"
                    _damage(f"journal entry {digest!r} {what} (table journal_entries)", path)
                entry = self._json(text, Any, path, "journal_entries", digest)
                if len(cache) >= _CACHE_LIMIT:
                    cache.clear()
                cache[digest] = entry
            if _journal_step(previous, digest) != link:
                _damage(f"the link does not match its entry (table journal_links, key {link!r})", path)
            entries.append(entry)
            previous = link
        return entries

    # -- listing and deleting -----------------------------------------------------------

    def list(self) -> list[CheckpointInfo]:
        """
        A descriptor of every checkpoint, oldest first (by creation time, then
        by the order they were saved in), read without loading any snapshot.

        Raises:
            CheckpointError: A checkpoint row is damaged (it names which).
        """
        with self._transaction(write=False) as db:
            rows = db.execute(f"SELECT {_ROW} FROM checkpoints ORDER BY created_ts, seq").fetchall()  # noqa: S608  # constant columns
            return [self._checked_info(row) for row in rows]

    def _checked_info(self, row: Sequence[Any]) -> CheckpointInfo:
        try:
            return self._info(row)
        except _Damage as exc:
            raise self._error(str(row[0]), exc.what, exc.path) from None

    def lineage(self, checkpoint_id: str) -> builtins.list[CheckpointInfo]:
        """
        The checkpoints from the root to *checkpoint_id*, itself included,
        oldest first, following parent ids while the parent is in the store.

        Raises:
            CheckpointError: No checkpoint has that id, or a row is damaged.
        """
        _check_id(checkpoint_id)
        with self._transaction(write=False) as db:
            query = (
                "WITH RECURSIVE up (id) AS (SELECT ? UNION SELECT c.parent FROM checkpoints AS c"  # noqa: S608  # constant columns
                " JOIN up ON c.id = up.id WHERE c.parent IS NOT NULL)"
                f" SELECT {_ROW} FROM checkpoints WHERE id IN (SELECT id FROM up)"
            )
            rows = {row[0]: row for row in db.execute(query, (checkpoint_id,)).fetchall()}
            if checkpoint_id not in rows:
                raise _missing(checkpoint_id, f"the SQLite store {self.path!r}")
            chain: list[CheckpointInfo] = []
            current: str | None = checkpoint_id
            while current is not None and current in rows:
                info = self._checked_info(rows.pop(current))
                chain.append(info)
                current = info.parent
            return chain[::-1]

    def delete(self, checkpoint_id: str) -> None:
        """
        Remove a checkpoint, and every message, link and blob no other
        checkpoint uses, in one transaction. Its children stay; their lineage
        then starts after it.

        Raises:
            CheckpointError: No checkpoint has that id.
        """
        _check_id(checkpoint_id)
        with self._transaction(write=True) as db:
            if db.execute("DELETE FROM checkpoints WHERE id = ?", (checkpoint_id,)).rowcount == 0:
                raise _missing(checkpoint_id, f"the SQLite store {self.path!r}")
            self._collect_garbage(db)

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

    # -- the rest -----------------------------------------------------------------

    def close(self) -> None:
        """
        Close the database (the store cannot be used afterwards).
        """
        with self._lock:
            self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        with self._transaction(write=False) as db:
            return int(db.execute("SELECT count(*) FROM checkpoints").fetchone()[0])

    def __contains__(self, checkpoint_id: object) -> bool:
        with self._transaction(write=False) as db:
            return db.execute("SELECT 1 FROM checkpoints WHERE id = ?", (checkpoint_id,)).fetchone() is not None

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"
