"""
Recorded contexts in stores: saved as their history, loaded by replaying it.

A store keeps a recorded context under its :attr:`~workingctx.WorkingContext.id`
as the chain of its history's entries. Entries are never rewritten, so saving
again after a step writes only the entries added since; a fork shares every
entry it inherited with its parent. :class:`ContextInfo` describes a saved
context without replaying it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import attrs

from workingctx import _checks
from workingctx.context import WorkingContext
from workingctx.exceptions import ArgumentTypeError, CheckpointError, SerializationError, WorkingCtxError
from workingctx.history import HISTORY_ROOT, Entry, entry_from_data, entry_text, history_step
from workingctx.persistence._codec import Damage, damage, galloped_length, stored_length
from workingctx.persistence.listing import Listing, listed, shown

__all__ = ["ContextInfo", "ContextStore"]


@attrs.frozen
class ContextInfo:
    """
    What a store's ``list_contexts()`` says of each saved context, without replaying it.

    Attributes:
        id: The context's id; ``load_context(id)`` replays it.
        first_message: The text of its first user message ("?" for NUL or a lone surrogate), or None.
        created_at: When its first entry was recorded.
        updated_at: When its newest entry was recorded.
        turn: How many model replies it received.
        finished: Whether it was finished when saved.
        parent_id: The id of the context it was forked from, or None.
        entries: How many entries its history holds.
    """

    id: str
    first_message: str | None
    created_at: datetime
    updated_at: datetime
    turn: int
    finished: bool
    parent_id: str | None
    entries: int

    @classmethod
    def of(cls, ctx: WorkingContext) -> ContextInfo:
        """
        The descriptor of a recorded context at hand.
        """
        history = check_recorded(ctx)
        start = history[0].content
        first = next((m for m in getattr(start, "messages", ()) if m.role == "user"), None)
        if first is None:
            first = next((e.content for e in history if e.kind == "user"), None)
        return cls(
            id=str(ctx.id),
            first_message=None if first is None else _shown_text(first.text()),  # type: ignore[union-attr]  # a Message
            created_at=history[0].at,
            updated_at=history[-1].at,
            turn=ctx.turn,
            finished=ctx.finished,
            parent_id=ctx.parent_id,
            entries=len(history),
        )


def _shown_text(text: str) -> str:
    """
    *text* as a descriptor shows it, which every store's database holds: "?"
    for a lone surrogate (text cut inside an emoji has no UTF-8 form) and for
    NUL (which PostgreSQL's text cannot hold).
    """
    return text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "?")


@runtime_checkable
class ContextStore(Protocol):
    """
    A store of recorded contexts (:class:`~workingctx.InMemoryStore` and
    :class:`~workingctx.SQLiteStore` are both), beside the checkpoint methods.

    Every method raises :class:`~workingctx.exceptions.CheckpointError` when it
    cannot do its job, and then leaves the store as it was.
    """

    def save_context(self, ctx: WorkingContext) -> str:
        """
        Save a recorded context as its history, under its id (only what the store lacks).
        """
        ...

    def load_context(self, context_id: str) -> WorkingContext:
        """
        Replay the history saved under *context_id*.
        """
        ...

    def list_contexts(self) -> list[ContextInfo]:
        """
        A descriptor of every saved context, oldest first, without replaying any
        (the stores workingctx ships return a :class:`~workingctx.persistence.Listing`,
        which names a damaged one in ``damaged`` instead of failing).
        """
        ...

    def delete_context(self, context_id: str) -> None:
        """
        Remove a saved context.
        """
        ...


def check_recorded(ctx: object) -> tuple[Entry, ...]:
    """
    The history of *ctx*, which must be a recorded context.

    Raises:
        TypeError: *ctx* is not a recorded :class:`~workingctx.WorkingContext`.
    """
    ctx = _checks.check_instance(
        ctx, "ctx", WorkingContext, "a recorded WorkingContext", label="save_context()", verb="takes"
    )
    if not ctx.recorded:
        msg = (
            "save_context() saves a recorded context as its history; build it with WorkingContext(record=True), "
            "or save a Checkpoint.capture(ctx) with save()"
        )
        # a plain context is the wrong kind of context for a history store: a type error
        raise ArgumentTypeError(msg, argument="ctx", value=ctx, expected="a recorded WorkingContext")
    return ctx.history


def check_context_id(context_id: object) -> str:
    """
    Refuse an id that is not a str.
    """
    return _checks.check_instance(context_id, "context_id", str, "a str", label="a context id", verb="is")


def missing(context_id: str, where: str) -> CheckpointError:
    """
    The error for an id the store does not hold.
    """
    msg = f"no recorded context {context_id!r} in {where}; list_contexts() shows the ids it holds"
    return CheckpointError(msg, path="$.id")


def diverged(context_id: str, where: str) -> CheckpointError:
    """
    The error for a save whose history does not continue the saved one.
    """
    msg = (
        f"cannot save context {context_id!r} to {where}: the saved history is not the start of this one "
        "(another copy of the context saved entries this one lacks); fork() it to save it under a new id. "
        "Nothing was written"
    )
    return CheckpointError(msg, path="$.history")


# -- SQLite --------------------------------------------------------------------------------------

SCHEMA = (
    (
        "CREATE TABLE IF NOT EXISTS history_entries ("
        " chain TEXT PRIMARY KEY, prev TEXT NOT NULL, position INTEGER NOT NULL, data TEXT NOT NULL"
        ") WITHOUT ROWID"
    ),
    (
        "CREATE TABLE IF NOT EXISTS contexts ("
        " id TEXT PRIMARY KEY, head TEXT NOT NULL, entries INTEGER NOT NULL, first_message TEXT,"
        " created_at TEXT NOT NULL, updated_at TEXT NOT NULL, turn INTEGER NOT NULL, finished INTEGER NOT NULL,"
        " parent_id TEXT, seal TEXT NOT NULL) WITHOUT ROWID"
    ),
)
"""The two tables of recorded contexts, made on the first save of one.

``history_entries`` holds one row per distinct history prefix, keyed by its
chain digest: the previous prefix's digest, the position, and the entry's JSON
text (the chain digest covers the text, so it checks it). ``contexts`` holds one
row per saved context: the head of its chain and its descriptor, sealed."""

_COLUMNS = "id, head, entries, first_message, created_at, updated_at, turn, finished, parent_id, seal"


def _seal(row: Sequence[Any]) -> str:
    body = json.dumps([None if field is None else str(field) for field in row[:9]], ensure_ascii=False)
    return hashlib.sha256(("context-row/v1:" + body).encode("utf-8", "surrogatepass")).hexdigest()


def _has_tables(db: sqlite3.Connection) -> bool:
    found = db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'contexts'").fetchone()
    return bool(found[0])


def plan_save(
    ctx: WorkingContext, saved: tuple[object, object] | None, stored: Callable[[list[str]], int], where: str
) -> tuple[list[tuple[str, str, int, str]], tuple[Any, ...]]:
    """
    What a store writes to save *ctx*: the entry rows it lacks, ``(chain, prev,
    position, data)``, and the sealed context row (the fields of ``_COLUMNS``).

    *saved* is the ``(head, entries)`` of the context saved under the same id,
    if any; ``stored(chain)`` gives how many leading entries of *chain* (their
    chain digests, in order) the store holds: :func:`stored_entries` on a
    server, :func:`~workingctx.persistence._codec.galloped_length` in this process.

    Raises:
        CheckpointError: The saved history is not the start of this one.
    """
    info = ContextInfo.of(ctx)
    recorder = ctx._history
    assert recorder is not None  # noqa: S101  # ContextInfo.of checked it
    chain = recorder.chain()
    entries = recorder.history[: len(chain)]
    if saved is not None:
        head, count = saved
        if not isinstance(count, int) or not 0 < count <= len(chain) or chain[count - 1] != head:
            raise diverged(info.id, where)
        start = count
    else:
        start = stored(chain)
    previous = chain[start - 1] if start else HISTORY_ROOT
    rows = []
    for position in range(start, len(chain)):
        rows.append((chain[position], previous, position, entry_text(entries[position])))
        previous = chain[position]
    row = (
        info.id,
        chain[-1],
        len(chain),
        info.first_message,
        info.created_at.isoformat(),
        info.updated_at.isoformat(),
        info.turn,
        int(info.finished),
        info.parent_id,
    )
    return rows, (*row, _seal(row))


def sqlite_save(db: sqlite3.Connection, ctx: WorkingContext, where: str) -> str:
    """
    Write the entries of *ctx*'s history the database does not hold, and its row.
    """
    for statement in SCHEMA:
        db.execute(statement)
    context_id = ContextInfo.of(ctx).id
    saved = db.execute("SELECT head, entries FROM contexts WHERE id = ?", (context_id,)).fetchone()

    def stored(chain: list[str]) -> int:
        query = "SELECT 1 FROM history_entries WHERE chain = ?"
        return galloped_length(len(chain), lambda n: db.execute(query, (chain[n - 1],)).fetchone() is not None)

    rows, row = plan_save(ctx, None if saved is None else (saved[0], saved[1]), stored, where)
    db.executemany(
        "INSERT OR IGNORE INTO history_entries (chain, prev, position, data) VALUES (?, ?, ?, ?)",
        rows,
    )
    db.execute(
        f"INSERT OR REPLACE INTO contexts ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608  # constant columns
        row,
    )
    return context_id


def _info(row: Sequence[Any], table: str = "table") -> ContextInfo:
    if len(row) != 10 or not isinstance(row[9], str) or _seal(row) != row[9]:
        damage(f"the context row does not match its seal ({table} contexts, damaged)")
    try:
        return ContextInfo(
            id=row[0],
            first_message=row[3],
            created_at=datetime.fromisoformat(row[4]),
            updated_at=datetime.fromisoformat(row[5]),
            turn=int(row[6]),
            finished=bool(row[7]),
            parent_id=row[8],
            entries=int(row[2]),
        )
    except (TypeError, ValueError) as exc:
        damage(f"the context row is not readable ({exc}) ({table} contexts)")


def sqlite_load(db: sqlite3.Connection, context_id: str, where: str) -> WorkingContext:
    """
    Walk, check and replay the history saved under *context_id*.
    """
    row = None
    if _has_tables(db):
        row = db.execute(f"SELECT {_COLUMNS} FROM contexts WHERE id = ?", (context_id,)).fetchone()  # noqa: S608  # constant columns
    if row is None:
        raise missing(context_id, where)

    def walk(head: object, count: int) -> Sequence[Sequence[Any]]:
        query = (
            "WITH RECURSIVE walk (chain, prev, position, data, depth) AS ("
            " SELECT chain, prev, position, data, 0 FROM history_entries WHERE chain = ?"
            " UNION ALL"
            " SELECT h.chain, h.prev, h.position, h.data, w.depth + 1"
            " FROM history_entries AS h JOIN walk AS w ON h.chain = w.prev WHERE w.depth < ?"
            ") SELECT chain, prev, position, data FROM walk ORDER BY depth DESC"
        )
        return db.execute(query, (head, count)).fetchall()

    return read_context(row, walk, context_id, where)


def read_context(
    row: Sequence[Any],
    walk: Callable[[object, int], Sequence[Sequence[Any]]],
    context_id: str,
    where: str,
    table: str = "table",
) -> WorkingContext:
    """
    Check a context row, walk its history with *walk(head, count)* (rows of
    ``(chain, prev, position, data)``, root first), check every entry and replay them.

    Raises:
        CheckpointError: Something read is damaged; it names what and where.
    """
    try:
        info = _info(row, table)
        if info.entries <= 0:
            damage(f"entry count {info.entries!r} is not a count ({table} contexts)")
        entries = _check(walk(row[1], info.entries), info.entries, table)
        ctx = WorkingContext.replay(entries)
        if ctx.id != context_id:
            damage(f"the history replays to context {ctx.id!r}, not {context_id!r}")
    except Damage as exc:
        msg = f"cannot load context {context_id!r} from {where}: {exc.what} at {exc.path}; nothing was changed"
        raise CheckpointError(msg, path=exc.path) from None
    except (SerializationError, WorkingCtxError, TypeError, ValueError) as exc:
        msg = f"cannot load context {context_id!r} from {where}: {exc}; nothing was changed"
        raise CheckpointError(msg, path="$.history") from None
    return ctx


def _check(rows: Sequence[Sequence[Any]], count: int, table: str) -> list[Entry]:
    if len(rows) != count:
        damage(f"expected {count} entries, found {len(rows)} ({table} history_entries, truncated or damaged)")
    entries: list[Entry] = []
    previous = HISTORY_ROOT
    for position, (chain, prev, stored_position, data) in enumerate(rows):
        path = f"$.history[{position}]"
        if prev != previous or stored_position != position or not isinstance(data, str):
            damage(f"entry {chain!r} is out of place ({table} history_entries, damaged)", path)
        if history_step(previous, data) != chain:
            damage(f"entry {chain!r} does not match its digest ({table} history_entries, damaged)", path)
        try:
            entries.append(entry_from_data(json.loads(data)))
        except (ValueError, SerializationError) as exc:
            damage(f"entry {chain!r} is not an entry: {exc} ({table} history_entries)", path)
        previous = chain
    return entries


def sqlite_list(db: sqlite3.Connection, where: str) -> Listing[ContextInfo]:
    """
    The descriptor of every saved context, oldest first.
    """
    if not _has_tables(db):
        return Listing()
    return read_infos(db.execute(f"SELECT {_COLUMNS} FROM contexts").fetchall(), where)  # noqa: S608  # constant columns


def read_infos(rows: Sequence[Sequence[Any]], where: str, table: str = "table") -> Listing[ContextInfo]:
    """
    The descriptors of context rows, checked, oldest first; a row that does
    not read is left out and named in the listing's ``damaged``, with the
    error loading it raises.
    """
    infos = []
    unreadable: dict[str, CheckpointError] = {}
    for row in rows:
        name = shown(row[0]) if row else "?"
        try:
            infos.append(_info(row, table))
        except Damage as exc:
            msg = f"cannot load context {name!r} from {where}: {exc.what} at {exc.path}; nothing was changed"
            unreadable[name] = CheckpointError(msg, path=exc.path)
    infos.sort(key=lambda info: (info.created_at.timestamp(), info.id))  # naive and aware times both order
    return listed(infos, unreadable, "context row", where)


def sqlite_delete(db: sqlite3.Connection, context_id: str, where: str) -> None:
    """
    Remove a saved context, and every entry no other saved context shares.
    """
    if not _has_tables(db) or db.execute("DELETE FROM contexts WHERE id = ?", (context_id,)).rowcount == 0:
        raise missing(context_id, where)
    db.execute(
        "WITH RECURSIVE live (chain) AS (SELECT head FROM contexts"
        " UNION SELECT h.prev FROM history_entries AS h JOIN live ON h.chain = live.chain)"
        " DELETE FROM history_entries WHERE chain NOT IN (SELECT chain FROM live)"
    )


def stored_entries(chain: list[str], held: Callable[[list[str]], Iterable[str]], *, last: int = 16) -> int:
    """
    How many leading entries of *chain* a store on a server holds, where
    ``held(chains)`` gives those of *chains* it holds, in one round trip
    (:func:`~workingctx.persistence._codec.stored_length`).
    """

    def ask(positions: list[int]) -> list[int]:
        digests = {chain[position - 1]: position for position in positions}
        return [digests[digest] for digest in held(list(digests))]

    return stored_length(len(chain), ask, last=last)
