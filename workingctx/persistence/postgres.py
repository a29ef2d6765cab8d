"""
The PostgreSQL store: checkpoints shared by processes on many machines, on psycopg 3.

It keeps the SQLite store's layout (see :mod:`workingctx.persistence.sqlite`),
in one PostgreSQL schema: messages and journal entries once by digest, each
transcript as a chain of links, prefixes and scratchpads as blobs, a sealed row
per checkpoint, and ``heads``, one row per thread. Every save is one
transaction. Saves run side by side (each takes a shared advisory lock; rows
are inserted in key order with ``ON CONFLICT DO NOTHING``, so two writers of the
same message neither fail nor deadlock); a delete, which collects garbage,
takes the lock alone so it never removes what a running save relies on. A
thread's head row is locked while a save moves it.

Schema version 2 keeps every digest (item keys, checksums, chain links, the
keys and seal of a checkpoint row) as its 32 bytes in a ``bytea`` column, and
every message, journal entry and blob as ``bytea`` too: its UTF-8 text, or, from
512 bytes on, that text compressed with zlib when that is shorter. Ids, parent
ids, threads, metadata, times and the recorded contexts' tables stay text.
Schema version 3 keeps that layout, and makes the tables of journals and of
recorded contexts when it first needs them, not with the store: PostgreSQL
gives every table pages of its own even empty (16 KB each). A store of schema
version 1 (every column text, every payload as it is) or 2 (every table made
with the store) is read, and written, as it is, so that an older workingctx
still reads it.

Needs the ``postgres`` extra: ``pip install 'workingctx[postgres]'``.
"""

from __future__ import annotations

import builtins
import contextlib
import operator
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from workingctx import _checks
from workingctx.checkpoint import Checkpoint
from workingctx.exceptions import CheckpointError, StoreUnavailableError
from workingctx.messages import Message
from workingctx.persistence import _codec, histories
from workingctx.persistence._codec import FORMAT, JOURNAL, MESSAGES, Damage, Kind, checksum, damage
from workingctx.persistence._engine import StoreEngine, head_allows, head_conflict
from workingctx.persistence.histories import _COLUMNS as _CONTEXT_COLUMNS
from workingctx.persistence.histories import ContextInfo
from workingctx.persistence.listing import Listing, listed_rows, shown
from workingctx.persistence.stores import CheckpointInfo
from workingctx.prefix import PrefixContext

if TYPE_CHECKING:
    import psycopg

    from workingctx.context import WorkingContext

__all__ = ["SCHEMA_VERSION", "PostgresStore"]

SCHEMA_VERSION = 3
"""The schema version this workingctx writes in PostgreSQL, and the newest it reads.

Version 2 stores digests as their raw bytes and payloads as bytes, long ones
compressed (:func:`~workingctx.persistence._codec.pack`); version 3 makes the
journal and recorded-context tables when first needed. A store of version 1
(all text) or 2 is read and written as it is, so that an older workingctx still reads it."""

_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_ATTEMPTS = 20

_TABLES = (
    "CREATE TABLE @.workingctx_store (key text PRIMARY KEY, value text NOT NULL)",
    "CREATE TABLE @.messages (digest bytea PRIMARY KEY, data bytea NOT NULL, checksum bytea NOT NULL)",
    (
        "CREATE TABLE @.message_links (chain bytea PRIMARY KEY, prev bytea NOT NULL, message bytea NOT NULL,"
        " position integer NOT NULL)"
    ),
    "CREATE TABLE @.blobs (digest bytea PRIMARY KEY, data bytea NOT NULL)",
    (
        "CREATE TABLE @.checkpoints (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id text NOT NULL UNIQUE,"
        " parent text, created_at text NOT NULL, created_ts double precision NOT NULL, metadata text NOT NULL,"
        " digest bytea NOT NULL, prefix bytea NOT NULL, scratchpad bytea NOT NULL, messages_head bytea NOT NULL,"
        " message_count integer NOT NULL, journal_head bytea NOT NULL, journal_count integer NOT NULL,"
        " seal bytea NOT NULL)"
    ),
    "CREATE TABLE @.heads (thread text PRIMARY KEY, checkpoint text NOT NULL)",
)
"""The tables of a new store (schema version 3), made when it is. Version 1
made the same tables with every ``bytea`` column ``text``: hex digests and
payloads as they are. Such a store is read, and written, as it is (see
:class:`_Text`)."""

_LATER = {
    "journal_entries": (
        "CREATE TABLE IF NOT EXISTS @.journal_entries (digest bytea PRIMARY KEY, data bytea NOT NULL,"
        " checksum bytea NOT NULL)"
    ),
    "journal_links": (
        "CREATE TABLE IF NOT EXISTS @.journal_links (chain bytea PRIMARY KEY, prev bytea NOT NULL,"
        " entry bytea NOT NULL, position integer NOT NULL)"
    ),
    # Recorded contexts (see workingctx.persistence.histories): one row per
    # distinct history prefix, and one row per saved context.
    "history_entries": (
        "CREATE TABLE IF NOT EXISTS @.history_entries (chain text PRIMARY KEY, prev text NOT NULL,"
        " position integer NOT NULL, data text NOT NULL)"
    ),
    "contexts": (
        "CREATE TABLE IF NOT EXISTS @.contexts (id text PRIMARY KEY, head text NOT NULL, entries integer NOT NULL,"
        " first_message text, created_at text NOT NULL, updated_at text NOT NULL, turn integer NOT NULL,"
        " finished integer NOT NULL, parent_id text, seal text NOT NULL)"
    ),
}
"""The tables a store of schema version 3 makes when it first needs them: a
table PostgreSQL holds takes pages (its free-space map, its indexes, its
TOAST index) even empty, and most stores never hold a journal or a recorded
context. A store of schema version 1 or 2 has them all from the start (its
journal tables made with the others, the recorded contexts' when it is opened)."""

_JOURNAL_TABLES = ("journal_entries", "journal_links")
_HISTORY_TABLES = ("history_entries", "contexts")

_ROW = ", ".join(_codec.ROW_FIELDS)

_first = operator.itemgetter(0)

_CHAINS = {
    MESSAGES.noun: ("messages", "message_links", "message"),
    JOURNAL.noun: ("journal_entries", "journal_links", "entry"),
}
"""Each chain's tables: its items, its links, and the links' column naming the item."""


_Probe = tuple["psycopg.Cursor[Any] | None", dict[str, int], int]
"""A probe of which links of a chain are stored: the query sent (None when
the chain is empty), the chain digests it asked for by position, and the
chain's length."""


_DIGEST_FIELDS = (4, 5, 6, 7, 9, 11)
"""The fields of a checkpoint row (see :data:`~workingctx.persistence._codec.ROW_FIELDS`) that hold digests."""


def _raw(digest: object) -> object:
    """
    A hex digest as the 32 bytes a version-2 column holds it in. Text that is
    not hex (never written by a store) goes as its UTF-8 bytes, which match no
    stored digest.
    """
    if type(digest) is not str:
        return digest
    try:
        return bytes.fromhex(digest)
    except ValueError:
        return digest.encode("utf-8", "surrogatepass")


class _Text:
    """
    How a store of schema version 1 keeps digests and payloads: as text (hex
    digests, JSON as it is), so what goes in and comes out stays as it is.
    :class:`_Binary` is version 2. A store converts at its boundary only (the
    parameters it sends, the columns it selects): everything between (the
    codec, the checks) sees hex digests and text.
    """

    def __init__(self) -> None:
        self.row = ", ".join(
            self.hex(field) if index in _DIGEST_FIELDS else field for index, field in enumerate(_codec.ROW_FIELDS)
        )
        """The select list of a checkpoint row (:data:`~workingctx.persistence._codec.ROW_FIELDS`)."""

    def hex(self, column: str) -> str:
        """A select-list expression reading digest column *column* as hex text."""
        return column

    def key(self, digest: object) -> Any:
        """A digest as a query parameter."""
        return digest

    def keys(self, digests: Iterable[object]) -> list[Any]:
        """Digests as an array parameter."""
        return list(digests)

    def row_in(self, row: Sequence[Any]) -> Sequence[Any]:
        """A checkpoint row as written."""
        return row

    def payload(self, text: str) -> Any:
        """A message's, entry's or blob's text as its ``data`` column holds it."""
        return text

    def blob(self, data: object) -> object:
        """A blob's ``data`` as read, as text (anything else left for its reader to refuse)."""
        return data

    def items(self, rows: Sequence[_codec.Row]) -> Sequence[_codec.Row]:
        """Item rows ``(digest, data, checksum)`` as read, as the codec reads them."""
        return rows


class _Binary(_Text):
    """
    How a store of schema version 2 keeps digests and payloads: digests as
    their 32 bytes, payloads as their UTF-8 bytes or compressed
    (:func:`~workingctx.persistence._codec.pack`), all ``bytea``.

    Digests are read as the server's hex of the bytes held: 32 bytes give a
    digest; any other length (damage) gives hex text of another length than
    64, which no digest, seal or link equals, so the checks name it.
    """

    def hex(self, column: str) -> str:
        return f"encode({column}, 'hex')"

    def key(self, digest: object) -> Any:
        return _raw(digest)

    def keys(self, digests: Iterable[object]) -> list[Any]:
        return [_raw(digest) for digest in digests]

    def row_in(self, row: Sequence[Any]) -> Sequence[Any]:
        return [_raw(field) if index in _DIGEST_FIELDS else field for index, field in enumerate(row)]

    def payload(self, text: str) -> Any:
        packed = _codec.pack(text)
        return packed if type(packed) is bytes else text.encode("utf-8")

    def blob(self, data: object) -> object:
        return _codec.as_text(_codec.unpack(data))

    def items(self, rows: Sequence[_codec.Row]) -> Sequence[_codec.Row]:
        return _codec.unpacked(rows)


_TEXT = _Text()
_BINARY = _Binary()


class _Retry(Exception):  # noqa: N818  # internal: the transaction is run again
    """
    The transaction lost a deadlock or a serialization race, or needs the lock alone.
    """

    def __init__(self, *, exclusive: bool = False) -> None:
        super().__init__()
        self.exclusive = exclusive


class PostgresStore(StoreEngine):
    """
    A checkpoint store in a PostgreSQL database, shared by every process that
    opens it: content-addressed, transactional, and safe for concurrent writers.

    Messages are stored once by digest, shared by every checkpoint and thread,
    and transcripts as chains of links, so checkpointing every turn of a long
    run adds only the new messages. ``save(checkpoint, thread=name)`` moves a
    thread's head by compare-and-set in the same transaction. Each read sees
    one consistent snapshot of the database; a delete, and a save that
    replaces a checkpoint, run alone.

    Args:
        dsn: A libpq connection string or URL, such as
            ``"postgresql://user@127.0.0.1:5432/db"``.
        schema: The PostgreSQL schema that holds the store's tables (created
            when missing); several stores can share one database under
            different schemas.
        pool_size: The most connections the store's pool opens.
        timeout: Seconds to wait for a connection before giving up.

    Raises:
        ImportError: psycopg or psycopg_pool is not installed.
        ValueError: *schema* is not a plain lower-case name, or a setting is out of range.
        StoreUnavailableError: The server cannot be reached.
        CheckpointError: The schema holds tables that are not a workingctx
            store, or a store of a newer schema version. Nothing is changed.
    """

    def __init__(self, dsn: str, *, schema: str = "workingctx", pool_size: int = 4, timeout: float = 30.0) -> None:
        _checks.check_instance(dsn, "dsn", str, "a connection string")
        _checks.check_match(schema, "schema", _NAME, "a lower-case name of letters, digits and _ (at most 63)")
        if _checks.check_int(pool_size, "pool_size") < 1:
            raise _checks.wrong_value(pool_size, "pool_size", "must be a positive int")
        if _checks.check_number(timeout, "timeout") <= 0:
            raise _checks.wrong_value(timeout, "timeout", "must be a positive number of seconds")
        try:
            import psycopg  # noqa: PLC0415  # the postgres extra is optional
            import psycopg_pool  # noqa: PLC0415
        except ImportError as exc:
            msg = f"PostgresStore needs psycopg 3 and psycopg_pool ({exc}): pip install 'workingctx[postgres]'"
            raise ImportError(msg) from exc
        self._psycopg = psycopg
        self._pool_timeout = psycopg_pool.PoolTimeout
        self.schema = schema
        self._where = _describe(dsn, schema)
        self._place = f"the PostgreSQL store {self._where}"
        self._lock_key = f"workingctx:{schema}"
        self._messages: dict[str, Message] = {}
        self._entries: dict[str, Any] = {}
        self._prefixes: dict[str, PrefixContext] = {}
        self._layout: _Text = _BINARY  # how the store keeps digests and payloads: see _check_format
        self._version = SCHEMA_VERSION  # the schema version the store records: see _check_format
        self._made: set[str] = set()  # the tables of _LATER this handle knows are there
        self._local = threading.Lock()
        self._pool = psycopg_pool.ConnectionPool(
            dsn,
            min_size=1,
            max_size=pool_size,
            timeout=timeout,
            open=False,
            check=psycopg_pool.ConnectionPool.check_connection,
            kwargs={"autocommit": True},
            name=f"workingctx-{schema}",
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
        except self._pool_timeout:
            self._pool.close()
            msg = f"cannot reach the PostgreSQL server of {self._where} within {timeout} s; is it running?"
            raise StoreUnavailableError(msg) from None
        try:
            self._prepare()
        except BaseException:
            self._pool.close()
            raise

    def _q(self, text: str) -> str:
        return text.replace("@.", f'"{self.schema}".')

    # -- transactions -------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self, *, write: bool, pipelined: bool = False) -> Iterator[psycopg.Cursor[Any]]:
        """
        One transaction (``READ COMMITTED`` for a write, a ``REPEATABLE READ``
        snapshot for a read), rolled back on any error; *pipelined*, in
        psycopg's pipeline mode (statements sent without waiting, a round
        trip only where a result is read, and the commit with the last
        writes). A lost connection becomes StoreUnavailableError, a deadlock,
        a serialization failure or a lost race to insert a key _Retry, any
        other database error CheckpointError.
        """
        errors = self._psycopg.errors
        try:
            with self._pool.connection() as conn:
                if pipelined:
                    # BEGIN and COMMIT sent by hand: psycopg's transaction
                    # block would wait for each (a round trip apiece)
                    try:
                        with conn.pipeline(), conn.cursor() as cur:
                            cur.execute("BEGIN")
                            yield cur
                            cur.execute("COMMIT")
                    except BaseException:
                        with contextlib.suppress(self._psycopg.Error):  # the connection may be gone
                            conn.rollback()
                        raise
                    return
                with conn.transaction(), conn.cursor() as cur:
                    if not write:
                        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    yield cur
        except (errors.DeadlockDetected, errors.SerializationFailure, errors.LockNotAvailable, errors.UniqueViolation):
            raise _Retry from None
        except errors.UndefinedTable:
            raise self._gone() from None
        except self._pool_timeout:
            msg = f"no connection to the PostgreSQL server of {self._where}; is it running? Nothing was written"
            raise StoreUnavailableError(msg) from None
        except self._psycopg.OperationalError as exc:
            msg = (
                f"lost the connection to the PostgreSQL server of {self._where} ({_first_line(exc)}); "
                "a save commits whole or not at all, so saving again is safe"
            )
            raise StoreUnavailableError(msg) from None
        except self._psycopg.Error as exc:
            msg = f"the checkpoint store {self._where} failed ({_first_line(exc)}); it was left as it was"
            raise CheckpointError(msg) from None

    def _run(self, body: Callable[[psycopg.Cursor[Any], bool], Any], *, write: bool, pipelined: bool = False) -> Any:
        """
        Run *body* in a transaction, again after a lost race (with the lock
        alone when it asks for it).
        """
        exclusive = False
        for attempt in range(_ATTEMPTS):
            try:
                with self._transaction(write=write, pipelined=pipelined) as cur:
                    return body(cur, exclusive)
            except _Retry as retry:
                exclusive = exclusive or retry.exclusive
                time.sleep(random.uniform(0, 0.002 * (attempt + 1)))  # noqa: S311  # jitter, not cryptography
        msg = f"the checkpoint store {self._where} stayed busy after {_ATTEMPTS} attempts; nothing was written"
        raise CheckpointError(msg)

    def _enter(self, cur: psycopg.Cursor[Any], *, exclusive: bool | None) -> None:
        """
        Check the store's marker and take the store's lock (shared for a save,
        alone for a delete, none for a read).
        """
        if exclusive is not None:
            kind = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
            cur.execute(f"SELECT {kind}(hashtext(%s))", (self._lock_key,))
        cur.execute(self._q("SELECT key, value FROM @.workingctx_store"))
        self._check_marker(cur)

    def _check_marker(self, cur: psycopg.Cursor[Any]) -> None:
        """
        Check the marker *cur* selected (a table that is gone raises, in
        pipeline mode where the results are read: see :meth:`_transaction`).
        """
        self._check_format(dict(cur.fetchall()))

    def _gone(self) -> CheckpointError:
        msg = (
            f"{self._where} holds no workingctx checkpoint store (its workingctx_store table is gone). "
            "Nothing was changed"
        )
        return CheckpointError(msg, path="workingctx_store")

    def _check_format(self, found: dict[Any, Any]) -> None:
        """
        Refuse a store that is not ours or is newer; learn how it keeps
        digests and payloads from the schema version it records.
        """
        _codec.check_marker(found, self._where, SCHEMA_VERSION)
        self._version = int(found["schema_version"])
        self._layout = _BINARY if self._version >= 2 else _TEXT

    def _prepare(self) -> None:
        def body(cur: psycopg.Cursor[Any], _exclusive: bool) -> None:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self._lock_key,))
            cur.execute("SELECT to_regclass(%s)", (f'"{self.schema}".workingctx_store',))
            row = cur.fetchone()
            if row is None or row[0] is None:
                cur.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", (self.schema,))
                others = cur.fetchone()
                if others is not None and others[0]:
                    msg = (
                        f"{self._where} holds tables that are not a workingctx checkpoint store "
                        "(no workingctx_store table); use another schema=. Nothing was changed"
                    )
                    raise CheckpointError(msg, path="workingctx_store")
                cur.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                for statement in _TABLES:
                    cur.execute(self._q(statement))
                cur.execute(
                    self._q(
                        "INSERT INTO @.workingctx_store (key, value) VALUES ('format', %s), ('schema_version', %s)"
                    ),
                    (FORMAT, str(SCHEMA_VERSION)),
                )
            self._enter(cur, exclusive=None)
            if self._version < 3:  # an older store has every table, the recorded contexts' made when it is opened
                for name in _HISTORY_TABLES:
                    cur.execute(self._q(_LATER[name]))
                with self._local:
                    self._made.update(_LATER)
            else:
                self._existing(cur, _LATER)

        self._run(body, write=True)

    def _existing(self, cur: psycopg.Cursor[Any], names: Iterable[str]) -> set[str]:
        """
        Which of the tables *names* (of :data:`_LATER`) the store has, remembered.
        """
        cur.execute(
            "SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind = 'r' AND c.relname = ANY(%s)",
            (self.schema, builtins.list(names)),
        )
        found = {str(row[0]) for row in cur.fetchall()}
        with self._local:
            self._made.update(found)
        return found

    def _has(self, cur: psycopg.Cursor[Any], names: tuple[str, ...]) -> bool:
        """
        Whether the store has the tables *names* (of :data:`_LATER`): asked
        only until they are seen, as no table is ever removed.
        """
        with self._local:
            if self._made.issuperset(names):
                return True
        return self._existing(cur, names).issuperset(names)

    def _make(self, names: tuple[str, ...]) -> None:
        """
        Make the tables *names* (of :data:`_LATER`) unless this handle has
        seen them, in a transaction of their own (a writer making them at the
        same time makes this one run again, and find them).
        """
        with self._local:
            if self._made.issuperset(names):
                return

        def body(cur: psycopg.Cursor[Any], _exclusive: bool) -> None:
            self._enter(cur, exclusive=False)
            for name in names:
                cur.execute(self._q(_LATER[name]))

        self._run(body, write=True)
        with self._local:
            self._made.update(names)

    # -- saving -------------------------------------------------------------------

    def _save(self, checkpoint: Checkpoint, thread: str | None) -> None:
        encoded = _codec.encode(checkpoint)
        if checkpoint.snapshot.journal:
            self._make(_JOURNAL_TABLES)

        def body(cur: psycopg.Cursor[Any], exclusive: bool) -> None:
            # Pipelined: everything the save needs to know is asked at once,
            # read in one round trip, and the writes go with the commit.
            conn = cur.connection
            layout = self._layout
            lock = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
            cur.execute(f"SELECT {lock}(hashtext(%s))", (self._lock_key,))
            marker = conn.cursor()
            marker.execute(self._q("SELECT key, value FROM @.workingctx_store"))
            head = None
            if thread is not None:
                head = conn.cursor()
                head.execute(self._q("SELECT checkpoint FROM @.heads WHERE thread = %s FOR UPDATE"), (thread,))
            stored = conn.cursor()  # the seal of a checkpoint saved under this id, and whether the prefix is stored
            stored.execute(
                self._q(
                    f"SELECT (SELECT {layout.hex('seal')} FROM @.checkpoints WHERE id = %s),"  # noqa: S608
                    " EXISTS (SELECT 1 FROM @.blobs WHERE digest = %s)"
                ),
                (checkpoint.id, layout.key(encoded.prefix_key)),
            )
            probes = [(kind, self._probe(conn, layout, kind, checkpoint)) for kind in (MESSAGES, JOURNAL)]
            self._check_marker(marker)
            if self._layout is not layout:  # the marker changed since the store last read it
                raise _Retry
            # The writes go in one statement (the last one after WITH the others): every
            # statement sent through psycopg's pipeline costs the client its own CPU time.
            writes = [None if head is None or thread is None else _moved_head(head, thread, checkpoint)]
            seal, prefix_stored = stored.fetchone() or (None, False)
            if seal is not None and seal == encoded.seal:
                self._execute(cur, writes)
                return
            if seal is not None and not exclusive:
                raise _Retry(exclusive=True)  # replacing collects garbage: take the lock alone
            blobs = [(layout.key(encoded.notes_key), layout.payload(encoded.notes_text))]
            if not prefix_stored:
                prefix_text = _codec.payload(checkpoint.snapshot.prefix, "$.snapshot.prefix", checkpoint, typed=True)
                blobs.append((layout.key(encoded.prefix_key), layout.payload(prefix_text)))
            writes.append(_insert("blobs", "digest, data", blobs))
            for kind, probe in probes:
                writes += self._save_chain(cur, layout, kind, checkpoint, probe)
            if seal is not None:  # before the new row, whose id it holds
                cur.execute(self._q("DELETE FROM @.checkpoints WHERE id = %s"), (checkpoint.id,))
            writes.append(
                (
                    f"INSERT INTO @.checkpoints ({_ROW}, created_ts) VALUES ({', '.join(['%s'] * 13)})",  # noqa: S608  # constant columns
                    [*layout.row_in((*encoded.row, encoded.seal)), checkpoint.created_at.timestamp()],
                )
            )
            self._execute(cur, writes)
            if seal is not None:
                self._collect_garbage(cur)

        self._run(body, write=True, pipelined=True)
        with self._local:
            for message in checkpoint.snapshot.messages[-64:]:
                _codec.remember(self._messages, message.digest(), message)

    def _probe(self, conn: psycopg.Connection[Any], layout: _Text, kind: Kind, checkpoint: Checkpoint) -> _Probe:
        """
        Ask (without waiting) which links of the chain of *kind* are stored,
        at the positions most likely to tell how many: the last sixteen, then
        every power of two down.
        """
        count = len(kind.items(checkpoint.snapshot))
        positions = _codec.probes(count)
        if not positions:
            return None, {}, count
        chain_at = kind.chain(checkpoint)
        digests = {chain_at(position): position for position in positions}
        found = conn.cursor()
        _, links, _ = _CHAINS[kind.noun]
        query = self._q(f"SELECT {layout.hex('chain')} FROM @.{links} WHERE chain = ANY(%b)")  # noqa: S608
        found.execute(query, (layout.keys(digests),))
        return found, digests, count

    def _stored_length(
        self, cur: psycopg.Cursor[Any], layout: _Text, table: str, chain_at: Callable[[int], str], probe: _Probe
    ) -> int:
        """
        How many leading items of a chain are stored already, from the probe
        :meth:`_probe` sent, and more rounds of probes when it leaves a gap.
        """
        found, digests, count = probe
        query = self._q(f"SELECT {layout.hex('chain')} FROM @.{table} WHERE chain = ANY(%b)")  # noqa: S608

        def ask(positions: list[int]) -> list[int]:
            asked = {chain_at(position): position for position in positions}
            cur.execute(query, (layout.keys(asked),))
            return [asked[row[0]] for row in cur.fetchall()]

        first = None if found is None else [digests[row[0]] for row in found.fetchall()]
        return _codec.stored_length(count, ask, first)

    def _execute(self, cur: psycopg.Cursor[Any], statements: Sequence[_Statement | None]) -> None:
        """
        Run the data-modifying *statements* (None for nothing) as one: the
        last after ``WITH`` the others. They see one snapshot, and no table
        here has a foreign key, so their order does not matter.
        """
        found = [statement for statement in statements if statement is not None]
        if not found:
            return
        *first, (last, params) = found
        text = last
        if first:
            ctes = ", ".join(f"w{number} AS ({sql})" for number, (sql, _) in enumerate(first))
            text = f"WITH {ctes} {last}"
            params = [value for _, values in first for value in values] + params
        cur.execute(self._q(text), params)

    def _missing_items(self, cur: psycopg.Cursor[Any], layout: _Text, table: str, keys: set[str]) -> set[str]:
        if not keys:
            return set()
        query = self._q(f"SELECT {layout.hex('digest')} FROM @.{table} WHERE digest = ANY(%b)")  # noqa: S608
        cur.execute(query, (layout.keys(sorted(keys)),))
        return keys - {row[0] for row in cur.fetchall()}

    def _save_chain(
        self, cur: psycopg.Cursor[Any], layout: _Text, kind: Kind, checkpoint: Checkpoint, probe: _Probe
    ) -> list[_Statement | None]:
        """
        The statements storing the items and links of *kind* the store does
        not hold yet. The items of a few new links are sent whole (the insert
        keeps one stored already); for many, the store is asked first which it lacks.
        """
        items_table, links_table, column = _CHAINS[kind.noun]
        start = self._stored_length(cur, layout, links_table, kind.chain(checkpoint), probe)
        new = list(_codec.new_links(kind, checkpoint, start))
        wanted = {digest for _, _, _, digest, _ in new}
        missing = self._missing_items(cur, layout, items_table, wanted) if len(new) > 16 else wanted
        items: dict[str, tuple[Any, ...]] = {}
        links = []
        key = layout.key
        for position, link, previous, digest, item in new:
            if digest in missing and digest not in items:
                text = kind.text(item, position, checkpoint)
                items[digest] = (key(digest), layout.payload(text), key(checksum(digest, text)))
            links.append((key(link), key(previous), key(digest), position))
        return [
            _insert(items_table, "digest, data, checksum", list(items.values())),
            _insert(links_table, f"chain, prev, {column}, position", links),
        ]

    # -- loading ------------------------------------------------------------------

    def _load(self, checkpoint_id: str) -> Checkpoint:

        def body(cur: psycopg.Cursor[Any], _exclusive: bool) -> Checkpoint:
            self._enter(cur, exclusive=None)
            cur.execute(self._q(f"SELECT {self._layout.row} FROM @.checkpoints WHERE id = %s"), (checkpoint_id,))  # noqa: S608
            row = cur.fetchone()
            if row is None:
                raise self._missing(checkpoint_id)
            return self._built(checkpoint_id, lambda: self._build(cur, row))

        result: Checkpoint = self._run(body, write=False)
        return result

    def _build(self, cur: psycopg.Cursor[Any], row: Sequence[Any]) -> Checkpoint:
        info = _codec.read_info(row)
        (_, _, _, _, digest, prefix_key, notes_key, messages_head, _, journal_head, journal_count, _) = row
        with self._local:
            prefix = self._prefixes.get(prefix_key) if isinstance(prefix_key, str) else None
        if prefix is None:
            text = self._blob(cur, prefix_key, "$.snapshot.prefix")
            with self._local:
                prefix = _codec.decode_prefix(text, prefix_key, self._prefixes)
        notes = _codec.decode_notes(self._blob(cur, notes_key, "$.snapshot.scratchpad"), notes_key)
        chain, digests, link_rows = self._walk(cur, MESSAGES, messages_head, info.message_count)
        with self._local:
            wanted = set(digests).difference(self._messages)
        texts = self._items(cur, "messages", wanted, link_rows)
        _, entry_digests, journal_rows = self._walk(cur, JOURNAL, journal_head, journal_count)
        with self._local:
            wanted_entries = set(entry_digests).difference(self._entries)
        entry_texts = self._items(cur, "journal_entries", wanted_entries, journal_rows)
        with self._local:
            values = _codec.decode_items(MESSAGES, digests, texts, self._messages, items="table messages")
            journal = _codec.decode_items(
                JOURNAL, entry_digests, entry_texts, self._entries, items="table journal_entries"
            )
        messages = (values, chain)
        return _codec.assemble(info, digest, prefix, notes, messages, journal)

    def _blob(self, cur: psycopg.Cursor[Any], key: object, path: str) -> object:
        cur.execute(self._q("SELECT data FROM @.blobs WHERE digest = %s"), (self._layout.key(key),), binary=True)
        found = cur.fetchone()
        if found is None:
            damage(f"blob {key!r} is missing from table blobs", path)
        return self._layout.blob(found[0])

    def _walk(
        self, cur: psycopg.Cursor[Any], kind: Kind, head: object, count: object
    ) -> tuple[list[str], list[str], int | None]:
        """
        The chain of *kind* ending at *head*, checked: its chain digests and
        item digests, root first, and how many links the table holds when it
        was read whole (None when it was walked on the server).

        When the chain is most of its table (one run's checkpoints), the table
        is read in one pass and walked here, each link checked as the walk
        meets it (:func:`~workingctx.persistence._codec.follow`): that costs
        the server a scan instead of a lookup per link.
        """
        _, links, item = _CHAINS[kind.noun]
        root, path = kind.root, kind.path
        length = _codec.check_count(count, head, root, path, "table checkpoints")
        if length == 0:
            return [], [], None
        if kind is JOURNAL and not self._has(cur, _JOURNAL_TABLES):
            damage(f"the checkpoint holds {length} journal entries, and table {links} is missing", path)
        layout = self._layout
        if self._most_of(cur, links, length):
            hexed = f"{layout.hex('chain')}, {layout.hex('prev')}, {layout.hex(item)}"
            cur.execute(self._q(f"SELECT {hexed}, position FROM @.{links}"))  # noqa: S608  # constant names
            found = cur.fetchall()
            table = dict(zip(map(_first, found), found, strict=True))
            chain, digests = _codec.follow(kind, table, head, length, f"table {links}")
            return chain, digests, len(found)
        query = self._q(
            f"WITH RECURSIVE walk (chain, prev, item, position, depth) AS ("  # noqa: S608  # constant names only
            f" SELECT chain, prev, {item}, position, 0 FROM @.{links} WHERE chain = %s"
            f" UNION ALL"
            f" SELECT l.chain, l.prev, l.{item}, l.position, w.depth + 1"
            f" FROM @.{links} AS l JOIN walk AS w ON l.chain = w.prev"
            f" WHERE w.depth < %s AND l.position = w.position - 1"
            f") SELECT {layout.hex('chain')}, {layout.hex('prev')}, {layout.hex('item')}, position"
            f" FROM walk ORDER BY depth DESC"
        )
        cur.execute(query, (layout.key(head), length))
        checked = _codec.check_links(cur.fetchall(), length, root, path, f"table {links}")
        _codec.check_steps(kind, checked, f"table {links}")
        return [link for link, _ in checked], [digest for _, digest in checked], None

    def _most_of(self, cur: psycopg.Cursor[Any], table: str, wanted: int) -> bool:
        """
        Whether *wanted* rows are at least half of *table* (counting at most twice *wanted*).
        """
        cur.execute(self._q(f"SELECT count(*) FROM (SELECT 1 FROM @.{table} LIMIT %s) AS head"), (2 * wanted + 1,))  # noqa: S608
        found = cur.fetchone()
        return found is not None and int(found[0]) <= 2 * wanted

    def _items(self, cur: psycopg.Cursor[Any], table: str, keys: set[str], links: int | None) -> Sequence[_codec.Row]:
        """
        The stored items of *keys* that are there, unchecked: the table read
        whole when they are most of it (every item is named by a link, so a
        table of *links* links holds at most that many items), else by key.
        Read in binary format: a ``bytea`` payload comes as its bytes, not
        as the hex text that is twice as long.
        """
        if not keys:
            return []
        layout = self._layout
        columns = f"{layout.hex('digest')}, data, {layout.hex('checksum')}"
        if links is not None and 2 * len(keys) >= links:
            cur.execute(self._q(f"SELECT {columns} FROM @.{table}"), binary=True)  # noqa: S608  # constant names
            return layout.items([row for row in cur.fetchall() if row[0] in keys])
        query = self._q(f"SELECT {columns} FROM @.{table} WHERE digest = ANY(%b)")  # noqa: S608  # constant names
        cur.execute(query, (layout.keys(sorted(keys)),), binary=True)
        return layout.items(cur.fetchall())

    # -- listing, threads and deleting --------------------------------------------

    def _list(self) -> Listing[CheckpointInfo]:

        def body(cur: psycopg.Cursor[Any], _exclusive: bool) -> builtins.list[Any]:
            self._enter(cur, exclusive=None)
            cur.execute(self._q(f"SELECT {self._layout.row} FROM @.checkpoints ORDER BY created_ts, seq"))  # noqa: S608
            return cur.fetchall()

        rows: builtins.list[Any] = self._run(body, write=False)
        return listed_rows(rows, self._checked_info, "checkpoint row", self._place)

    def _checked_info(self, row: Sequence[Any]) -> CheckpointInfo:
        try:
            return _codec.read_info(row)
        except Damage as exc:
            raise self._error(shown(row[0]), exc.what, exc.path) from None

    def _lineage(self, checkpoint_id: str) -> Listing[CheckpointInfo]:

        def body(cur: psycopg.Cursor[Any], _exclusive: bool) -> dict[Any, Any]:
            self._enter(cur, exclusive=None)
            cur.execute(
                self._q(
                    "WITH RECURSIVE up (id) AS (SELECT %s::text UNION SELECT c.parent FROM @.checkpoints AS c"  # noqa: S608
                    " JOIN up ON c.id = up.id WHERE c.parent IS NOT NULL)"
                    f" SELECT {self._layout.row} FROM @.checkpoints WHERE id IN (SELECT id FROM up)"
                ),
                (checkpoint_id,),
            )
            return {row[0]: row for row in cur.fetchall()}

        rows: dict[Any, Any] = self._run(body, write=False)
        return self._lineage_of(rows.get, checkpoint_id, self._checked_info)

    def _head(self, thread: str) -> str | None:

        def body(cur: psycopg.Cursor[Any], _exclusive: bool) -> str | None:
            self._enter(cur, exclusive=None)
            cur.execute(self._q("SELECT checkpoint FROM @.heads WHERE thread = %s"), (thread,))
            found = cur.fetchone()
            return None if found is None else str(found[0])

        # one row read, which needs no snapshot of its own: pipelined, it takes two round trips, not five
        result: str | None = self._run(body, write=False, pipelined=True)
        return result

    def _delete(self, checkpoint_id: str) -> None:

        def body(cur: psycopg.Cursor[Any], _exclusive: bool) -> None:
            self._enter(cur, exclusive=True)
            cur.execute(self._q("DELETE FROM @.checkpoints WHERE id = %s RETURNING parent"), (checkpoint_id,))
            found = cur.fetchone()
            if found is None:
                raise self._missing(checkpoint_id)
            cur.execute(
                self._q(
                    "UPDATE @.heads SET checkpoint = %s WHERE checkpoint = %s"
                    " AND EXISTS (SELECT 1 FROM @.checkpoints WHERE id = %s)"
                ),
                (found[0], checkpoint_id, found[0]),
            )
            cur.execute(self._q("DELETE FROM @.heads WHERE checkpoint = %s"), (checkpoint_id,))
            self._collect_garbage(cur)

        self._run(body, write=True)

    def _collect_garbage(self, cur: psycopg.Cursor[Any]) -> None:
        chains = [("message_links", "messages", "message", "messages_head")]
        if self._has(cur, _JOURNAL_TABLES):
            chains.append(("journal_links", "journal_entries", "entry", "journal_head"))
        for links, items, item, head in chains:
            cur.execute(
                self._q(
                    f"WITH RECURSIVE live (chain) AS (SELECT {head} FROM @.checkpoints"  # noqa: S608  # constants
                    f" UNION SELECT l.prev FROM @.{links} AS l JOIN live ON l.chain = live.chain)"
                    f" DELETE FROM @.{links} WHERE chain NOT IN (SELECT chain FROM live)"
                )
            )
            cur.execute(
                self._q(
                    f"DELETE FROM @.{items} AS i WHERE NOT EXISTS"  # noqa: S608  # constant names
                    f" (SELECT 1 FROM @.{links} AS l WHERE l.{item} = i.digest)"
                )
            )
        cur.execute(
            self._q(
                "DELETE FROM @.blobs WHERE digest NOT IN"
                " (SELECT prefix FROM @.checkpoints UNION SELECT scratchpad FROM @.checkpoints)"
            )
        )

    # -- recorded contexts --------------------------------------------------------

    def _save_context(self, ctx: WorkingContext) -> str:
        context_id = ContextInfo.of(ctx).id
        self._make(_HISTORY_TABLES)

        def body(cur: psycopg.Cursor[Any], _exclusive: bool) -> str:
            self._enter(cur, exclusive=False)
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{self._lock_key}:context:{context_id}",))
            cur.execute(self._q("SELECT head, entries FROM @.contexts WHERE id = %s"), (context_id,))
            saved = cur.fetchone()

            def held(chains: list[str]) -> list[str]:
                cur.execute(self._q("SELECT chain FROM @.history_entries WHERE chain = ANY(%s)"), (chains,))
                return [found for (found,) in cur.fetchall()]

            stored = lambda chain: histories.stored_entries(chain, held)  # noqa: E731
            rows, row = histories.plan_save(ctx, None if saved is None else (saved[0], saved[1]), stored, self._where)
            self._execute(cur, [_insert("history_entries", "chain, prev, position, data", builtins.list(rows))])
            updates = ", ".join(f"{column} = EXCLUDED.{column}" for column in _CONTEXT_COLUMNS.split(", ")[1:])
            cur.execute(
                self._q(
                    f"INSERT INTO @.contexts ({_CONTEXT_COLUMNS}) VALUES ({', '.join(['%s'] * 10)})"  # noqa: S608  # constant columns
                    f" ON CONFLICT (id) DO UPDATE SET {updates}"
                ),
                row,
            )
            return context_id

        result: str = self._run(body, write=True)
        return result

    def _load_context(self, context_id: str) -> WorkingContext:

        def body(cur: psycopg.Cursor[Any], _exclusive: bool) -> WorkingContext:
            self._enter(cur, exclusive=None)
            if not self._has(cur, _HISTORY_TABLES):  # no context was ever saved
                raise histories.missing(context_id, self._where)
            cur.execute(self._q(f"SELECT {_CONTEXT_COLUMNS} FROM @.contexts WHERE id = %s"), (context_id,))  # noqa: S608
            row = cur.fetchone()
            if row is None:
                raise histories.missing(context_id, self._where)

            def walk(head: object, count: int) -> builtins.list[Any]:
                cur.execute(
                    self._q(
                        "WITH RECURSIVE walk (chain, prev, position, data, depth) AS ("
                        " SELECT chain, prev, position, data, 0 FROM @.history_entries WHERE chain = %s"
                        " UNION ALL"
                        " SELECT h.chain, h.prev, h.position, h.data, w.depth + 1"
                        " FROM @.history_entries AS h JOIN walk AS w ON h.chain = w.prev"
                        " WHERE w.depth < %s AND h.position = w.position - 1"
                        ") SELECT chain, prev, position, data FROM walk ORDER BY depth DESC"
                    ),
                    (head, count),
                )
                return cur.fetchall()

            return histories.read_context(row, walk, context_id, self._where)

        result: WorkingContext = self._run(body, write=False)
        return result

    def _list_contexts(self) -> Listing[ContextInfo]:

        def body(cur: psycopg.Cursor[Any], _exclusive: bool) -> builtins.list[Any]:
            self._enter(cur, exclusive=None)
            if not self._has(cur, _HISTORY_TABLES):  # no context was ever saved
                return []
            cur.execute(self._q(f"SELECT {_CONTEXT_COLUMNS} FROM @.contexts"))  # noqa: S608  # constant columns
            return cur.fetchall()

        rows: builtins.list[Any] = self._run(body, write=False)
        return histories.read_infos(rows, self._where)

    def _delete_context(self, context_id: str) -> None:

        def body(cur: psycopg.Cursor[Any], _exclusive: bool) -> None:
            self._enter(cur, exclusive=True)
            if not self._has(cur, _HISTORY_TABLES):  # no context was ever saved
                raise histories.missing(context_id, self._where)
            cur.execute(self._q("DELETE FROM @.contexts WHERE id = %s RETURNING 1"), (context_id,))
            if cur.fetchone() is None:
                raise histories.missing(context_id, self._where)
            cur.execute(
                self._q(
                    "WITH RECURSIVE live (chain) AS (SELECT head FROM @.contexts"
                    " UNION SELECT h.prev FROM @.history_entries AS h JOIN live ON h.chain = live.chain)"
                    " DELETE FROM @.history_entries WHERE chain NOT IN (SELECT chain FROM live)"
                )
            )

        self._run(body, write=True)

    # -- the rest -----------------------------------------------------------------

    def drop(self) -> None:
        """
        Remove the store's schema and everything in it, for good (tests, clean-ups).
        """

        def body(cur: psycopg.Cursor[Any], _exclusive: bool) -> None:
            self._enter(cur, exclusive=True)
            cur.execute(f'DROP SCHEMA "{self.schema}" CASCADE')

        self._run(body, write=True)

    def close(self) -> None:
        """
        Close the store's connections (the store cannot be used afterwards).
        """
        self._pool.close()

    def __len__(self) -> int:
        def body(cur: psycopg.Cursor[Any], _exclusive: bool) -> int:
            self._enter(cur, exclusive=None)
            cur.execute(self._q("SELECT count(*) FROM @.checkpoints"))
            found = cur.fetchone()
            return 0 if found is None else int(found[0])

        result: int = self._run(body, write=False)
        return result

    def _contains(self, checkpoint_id: str) -> bool:
        def body(cur: psycopg.Cursor[Any], _exclusive: bool) -> bool:
            self._enter(cur, exclusive=None)
            cur.execute(self._q("SELECT 1 FROM @.checkpoints WHERE id = %s"), (checkpoint_id,))
            return cur.fetchone() is not None

        result: bool = self._run(body, write=False)
        return result

    def __repr__(self) -> str:
        return f"<PostgresStore {self._where}>"


_Statement = tuple[str, list[Any]]
"""A statement (tables written ``@.name``) and its parameters."""


def _moved_head(found: psycopg.Cursor[Any], thread: str, checkpoint: Checkpoint) -> _Statement | None:
    """
    The statement moving *thread*'s head to *checkpoint*, from the head
    *found* selected (None when it is there already).

    Raises:
        HeadConflictError: the head is not the checkpoint's parent (nor the checkpoint).
    """
    row = found.fetchone()
    current = None if row is None else row[0]
    if not head_allows(current, checkpoint):
        raise head_conflict(thread, checkpoint, current)
    if row is None:  # a writer that inserts it first makes this one run again
        return "INSERT INTO @.heads (thread, checkpoint) VALUES (%s, %s)", [thread, checkpoint.id]
    if current != checkpoint.id:
        return "UPDATE @.heads SET checkpoint = %s WHERE thread = %s", [checkpoint.id, thread]
    return None


def _insert(table: str, columns: str, rows: list[tuple[Any, ...]]) -> _Statement | None:
    """
    The statement inserting *rows* into *table*, keeping any row whose key
    is there already (None for no rows): the columns sent as arrays, in binary.
    """
    if not rows:
        return None
    rows.sort()
    casts = ", ".join(f"%b::{_array_type(value)}" for value in rows[0])
    return (
        f"INSERT INTO @.{table} ({columns}) SELECT * FROM unnest({casts}) ORDER BY 1 ON CONFLICT DO NOTHING",  # noqa: S608  # constant names
        [list(column) for column in zip(*rows, strict=True)],
    )


def _array_type(value: object) -> str:
    """
    The PostgreSQL array type of a column whose first value is *value* (see :meth:`PostgresStore._insert`).
    """
    if isinstance(value, int):
        return "integer[]"
    return "bytea[]" if isinstance(value, bytes) else "text[]"


def _describe(dsn: str, schema: str) -> str:
    """
    The server, database and schema, without the password, for messages.
    """
    try:
        from psycopg.conninfo import conninfo_to_dict  # noqa: PLC0415  # the postgres extra is optional

        parts = conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001  # a DSN libpq cannot parse is reported when connecting
        return f"schema {schema!r} of a PostgreSQL database"
    host = parts.get("host", "localhost")
    port = parts.get("port", "5432")
    return f"schema {schema!r} of database {parts.get('dbname', '')!r} on {host}:{port}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
