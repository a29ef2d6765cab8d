"""
Every checkpoint store kind the shared suite runs against, and how to reach
into each one's storage to damage it.

PostgreSQL and Redis come from ``WORKINGCTX_POSTGRES_DSN`` and
``WORKINGCTX_REDIS_URL`` (``scripts/servers start`` prints both; ``.ci/run``
sets them). Without them the tests of that kind are skipped with the reason,
and under ``CI=true`` a skipped server test fails the run (``tests/conftest.py``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sqlite3
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import sqlite_rows
from workingctx import InMemoryStore, SQLiteStore
from workingctx.persistence import PostgresStore, RedisStore

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("memory", "sqlite", "postgres", "redis")
PERSISTENT = ("sqlite", "postgres", "redis")
SERVERS = {"postgres": "WORKINGCTX_POSTGRES_DSN", "redis": "WORKINGCTX_REDIS_URL"}
_paths = itertools.count()


DIGEST_COLUMNS = {
    "messages": ("digest", "checksum"),
    "message_links": ("chain", "prev", "message"),
    "journal_entries": ("digest", "checksum"),
    "journal_links": ("chain", "prev", "entry"),
    "blobs": ("digest",),
    "checkpoints": ("digest", "prefix", "scratchpad", "messages_head", "journal_head", "seal"),
}
"""Every column of a SQL store's tables that holds a digest, by table (bytes
from SQLite's schema version 3 and PostgreSQL's version 2 on)."""


def server_address(kind: str) -> str:
    """
    The server of *kind* the tests use, or a skip saying how to give one.
    """
    variable = SERVERS[kind]
    address = os.environ.get(variable)
    if not address:
        pytest.skip(
            f'NO {kind.upper()} SERVER: set {variable} (eval "$(scripts/servers start)" starts one); '
            "under CI=true this skip fails the run"
        )
    return address


def schema_version(store: Any) -> str:
    """
    The schema version *store*'s backend writes, as its marker holds it.
    """
    return str(sys.modules[type(store).__module__].SCHEMA_VERSION)


def kind_params(kinds: tuple[str, ...] = KINDS) -> list[Any]:
    return [pytest.param(kind, marks=[pytest.mark.server] if kind in SERVERS else []) for kind in kinds]


class Stores:
    """
    Makes fresh, empty stores of one kind, opens second handles on them, and
    removes what they wrote when the test ends.
    """

    def __init__(self, kind: str, directory: Path) -> None:
        self.kind = kind
        self.directory = directory
        self.address = server_address(kind) if kind in SERVERS else ""
        self.made: list[Any] = []

    def new(self) -> Any:
        """
        A new, empty store.
        """
        name = f"t_{uuid.uuid4().hex[:16]}"
        if self.kind == "memory":
            store: Any = InMemoryStore()
        elif self.kind == "sqlite":
            store = SQLiteStore(self.directory / f"store-{next(_paths)}.db")
        elif self.kind == "postgres":
            store = PostgresStore(self.address, schema=name, pool_size=2)
        else:
            store = RedisStore(self.address, namespace=name)
        self.made.append(store)
        return store

    def again(self, store: Any) -> Any:
        """
        A second handle on *store*'s storage, with nothing cached (the store itself for memory).
        """
        if self.kind == "memory":
            return store
        if self.kind == "sqlite":
            other: Any = SQLiteStore(store.path)
        elif self.kind == "postgres":
            other = PostgresStore(self.address, schema=store.schema, pool_size=2)
        else:
            other = RedisStore(self.address, namespace=store.namespace)
        self.made.append(other)
        return other

    def spec(self, store: Any) -> list[str]:
        """
        What a writer process needs to open *store*: kind, address, name.
        """
        if self.kind == "sqlite":
            return ["sqlite", str(store.path), ""]
        if self.kind == "postgres":
            return ["postgres", self.address, store.schema]
        return ["redis", self.address, store.namespace]

    def close(self) -> None:
        dropped: set[str] = set()
        for store in reversed(self.made):
            name = getattr(store, "schema", None) or getattr(store, "namespace", None)
            if name and name not in dropped:
                dropped.add(name)
                with contextlib.suppress(Exception):  # a store left broken by its test: close it all the same
                    store.drop()
            if hasattr(store, "close"):
                store.close()


# -- reaching into storage --------------------------------------------------------------


class Raw:
    """
    Direct access to a store's storage, to damage it as a disk, an operator or
    a bug would: plain SQL for SQLite and PostgreSQL, plain commands for Redis.
    """

    def __init__(self, kind: str, store: Any) -> None:
        self.kind = kind
        self.store = store

    def _sql(self, statement: str, args: tuple[Any, ...] = ()) -> list[Any]:
        if self.kind == "sqlite":
            db = sqlite_rows.connect(self.store.path)
            try:
                with db:
                    return db.execute(statement.replace("@.", "").replace("%s", "?"), args).fetchall()
            finally:
                db.close()
        import psycopg  # noqa: PLC0415  # only with a PostgreSQL server

        with psycopg.connect(server_address("postgres"), autocommit=True) as conn:
            cursor = conn.execute(statement.replace("@.", f'"{self.store.schema}".'), args)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    def _binary(self) -> bool:
        """
        Whether the store keeps digests and payloads as bytes: a PostgreSQL
        store of schema version 2 or later (SQLite keeps digests as text).
        """
        if self.kind != "postgres":
            return False
        found = self._sql("SELECT value FROM @.workingctx_store WHERE key = 'schema_version'")
        return int(found[0][0]) >= 2

    def digest(self, digest: str) -> Any:
        """
        A hex digest as the store's digest columns hold it (its 32 bytes, in a binary store).
        """
        return bytes.fromhex(digest) if self._binary() else digest

    def payload(self, text: str) -> Any:
        """
        A JSON text as the store's ``data`` columns hold it uncompressed (its UTF-8 bytes, in a binary store).
        """
        return text.encode("utf-8") if self._binary() else text

    def _redis(self) -> Any:
        import redis  # noqa: PLC0415  # only with a Redis server

        return redis.Redis.from_url(server_address("redis"), decode_responses=True)

    def _key(self, suffix: str) -> str:
        return f"{self.store.namespace}:{suffix}"

    def message_count(self) -> int:
        """
        How many distinct messages the store holds.
        """
        if self.kind == "redis":
            with self._redis() as client:
                return len(list(client.scan_iter(match=self._key("m:*"))))
        return int(self._sql("SELECT count(*) FROM @.messages")[0][0])

    def rewrite_message(self, digest: str, text: str) -> None:
        """
        Replace a stored message's JSON, leaving its checksum as it was.
        """
        if self.kind == "redis":
            with self._redis() as client:
                old = client.get(self._key("m:" + digest))
                client.set(self._key("m:" + digest), old[:64] + text)
            return
        self._sql("UPDATE @.messages SET data = %s WHERE digest = %s", (self.payload(text), self.digest(digest)))

    def repoint_link(self, chain: str, digest: str) -> None:
        """
        Point a transcript link at another message.
        """
        if self.kind == "redis":
            with self._redis() as client:
                prev, _, position = client.get(self._key("ml:" + chain)).split(" ")
                client.set(self._key("ml:" + chain), f"{prev} {digest} {position}")
            return
        self._sql("UPDATE @.message_links SET message = %s WHERE chain = %s", (self.digest(digest), self.digest(chain)))

    def loop_link(self, chain: str) -> None:
        """
        Make a transcript link its own predecessor (a cycle).
        """
        if self.kind == "redis":
            with self._redis() as client:
                _, item, position = client.get(self._key("ml:" + chain)).split(" ")
                client.set(self._key("ml:" + chain), f"{chain} {item} {position}")
            return
        self._sql("UPDATE @.message_links SET prev = chain WHERE chain = %s", (self.digest(chain),))

    def drop_link(self, chain: str) -> None:
        if self.kind == "redis":
            with self._redis() as client:
                client.delete(self._key("ml:" + chain))
            return
        self._sql("DELETE FROM @.message_links WHERE chain = %s", (self.digest(chain),))

    def rewrite_metadata(self, checkpoint_id: str, text: str) -> None:
        """
        Change a checkpoint row's metadata without resealing it.
        """
        if self.kind == "redis":
            with self._redis() as client:
                row = json.loads(client.get(self._key("cp:" + checkpoint_id)))
                row[3] = text
                client.set(self._key("cp:" + checkpoint_id), json.dumps(row))
            return
        self._sql("UPDATE @.checkpoints SET metadata = %s WHERE id = %s", (text, checkpoint_id))

    def damage_row(self, checkpoint_id: str) -> None:
        """
        Make a checkpoint row unreadable: its metadata no longer JSON (SQL), the row no longer JSON (Redis).
        """
        if self.kind == "redis":
            with self._redis() as client:
                client.set(self._key("cp:" + checkpoint_id), '["not a row"')
            return
        self._sql("UPDATE @.checkpoints SET metadata = %s WHERE id = %s", ("{not json", checkpoint_id))

    def damage_context(self, context_id: str) -> None:
        """
        Make a saved context's row unreadable: a field changed without its seal (SQL), not JSON (Redis).
        """
        if self.kind == "redis":
            with self._redis() as client:
                client.set(self._key("ctx:" + context_id), "{not json")
            return
        self._sql("UPDATE @.contexts SET turn = 99 WHERE id = %s", (context_id,))

    def redis_bytes(self, command: str, suffix: bytes, *values: Any) -> None:
        """
        Run a Redis write *command* on the key ``<namespace>:<suffix>`` with raw byte values.
        """
        import redis  # noqa: PLC0415  # only with a Redis server

        with redis.Redis.from_url(server_address("redis")) as client:
            client.execute_command(command, self.store.namespace.encode() + b":" + suffix, *values)

    def state(self) -> Any:
        """
        Everything the store holds, byte for byte, to show an operation changed nothing.
        """
        if self.kind == "sqlite":
            with contextlib.closing(sqlite_rows.connect(self.store.path)) as db:
                return list(db.iterdump())
        if self.kind == "redis":
            import redis  # noqa: PLC0415  # only with a Redis server

            with redis.Redis.from_url(server_address("redis")) as client:
                prefix = self.store.namespace.encode() + b":"
                return {key: client.dump(key) for key in sorted(client.scan_iter(match=prefix + b"*"))}
        tables = self._sql(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1", (self.store.schema,)
        )
        return {table: sorted(map(repr, self._sql(f'SELECT * FROM @."{table}"'))) for (table,) in tables}  # noqa: S608

    def remove_marker(self) -> None:
        """
        Remove the store's marker (its format and schema version).
        """
        if self.kind == "redis":
            with self._redis() as client:
                client.delete(self._key("store"))
            return
        self._sql("DROP TABLE @.workingctx_store")

    def remove_all(self) -> None:
        """
        Remove everything the store holds, marker or not (a server store's clean-up).
        """
        if self.kind == "redis":
            with self._redis() as client:
                for key in list(client.scan_iter(match=self._key("*"))):
                    client.delete(key)
            return
        self._sql(f'DROP SCHEMA IF EXISTS "{self.store.schema}" CASCADE')

    def set_marker(self, key: str, value: str) -> None:
        """
        Change the store's format name or schema version.
        """
        if self.kind == "redis":
            with self._redis() as client:
                client.hset(self._key("store"), key, value)
            return
        self._sql("UPDATE @.workingctx_store SET value = %s WHERE key = %s", (value, key))

    def foreign(self) -> Callable[[], Any]:
        """
        Put someone else's data where a new store would go; return how to open a store there.
        """
        name = f"f_{uuid.uuid4().hex[:12]}"
        if self.kind == "sqlite":
            path = self.store.path + f".{name}.db"
            db = sqlite3.connect(path)
            with db:
                db.execute("CREATE TABLE users (name TEXT)")
            db.close()
            return lambda: SQLiteStore(path)
        if self.kind == "postgres":
            self._sql(f'CREATE SCHEMA "{name}"')
            self._sql(f'CREATE TABLE "{name}".users (name text)')
            return lambda: PostgresStore(server_address("postgres"), schema=name)
        with self._redis() as client:
            client.set(f"{name}:users", "ada")
        return lambda: RedisStore(server_address("redis"), namespace=name)


# -- random damage ------------------------------------------------------------------------

_PG_TABLES = {
    "checkpoints": (
        "seq",
        [
            "id",
            "parent",
            "created_at",
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
    ),
    "messages": ("digest", ["digest", "data", "checksum"]),
    "message_links": ("chain", ["chain", "prev", "message", "position"]),
    "journal_entries": ("digest", ["digest", "data", "checksum"]),
    "journal_links": ("chain", ["chain", "prev", "entry", "position"]),
    "blobs": ("digest", ["digest", "data"]),
    "heads": ("thread", ["checkpoint"]),
    "workingctx_store": ("key", ["value"]),
}


def _mutated_bytes(value: bytes, rng: Any, mutation: Callable[[Any, Any], Any]) -> bytes:
    """
    A change to a ``bytea`` value of a PostgreSQL store (schema version 2): to
    a digest's hex, to an uncompressed payload's text, or to a compressed
    payload's bytes (cut, or a byte changed), written back as bytes.
    """
    if value[:1] == b"\x00":  # compressed: zlib's stream after a NUL
        cut = rng.randrange(1, len(value))
        return rng.choice([value[:cut], value[:cut] + bytes([value[cut] ^ 0xFF]) + value[cut + 1 :], b"\x00"])
    text = value.hex() if len(value) == 32 else value.decode("utf-8", "replace")
    new = mutation(text, rng)
    if isinstance(new, bytes):
        return new
    if isinstance(new, str) and len(value) == 32:
        with contextlib.suppress(ValueError):
            return bytes.fromhex(new)
    return str(new).encode("utf-8")


def damage_at_random(kind: str, store: Any, rng: Any, mutation: Callable[[Any, Any], Any]) -> str:
    """
    One random change to what a PostgreSQL or Redis store holds: a value
    rewritten (by *mutation*) or a row or key removed. Returns what was done.
    """
    if kind == "postgres":
        import psycopg  # noqa: PLC0415

        with psycopg.connect(server_address("postgres"), autocommit=True) as conn:
            # a store makes its journal tables when it first needs them (schema version 3)
            present = conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (store.schema,)
            ).fetchall()
            table = rng.choice(sorted(set(_PG_TABLES) & {name for (name,) in present}))
            key, columns = _PG_TABLES[table]
            schema = f'"{store.schema}"'
            rows = conn.execute(f"SELECT {key}, {', '.join(columns)} FROM {schema}.{table}").fetchall()  # noqa: S608  # the test's own names
            if not rows:
                return f"{table}: empty"
            row_key, *values = rng.choice(rows)
            if rng.random() < 0.15:
                conn.execute(f"DELETE FROM {schema}.{table} WHERE {key} = %s", (row_key,))  # noqa: S608
                return f"{table}: row {row_key!r} deleted"
            index = rng.randrange(len(columns))
            if isinstance(values[index], bytes):  # a digest or payload of a binary store (schema version 2)
                new = _mutated_bytes(values[index], rng, mutation)
            else:
                new = mutation(values[index], rng)
                if isinstance(values[index], int) and not isinstance(values[index], bool):
                    new = new if isinstance(new, int) and not isinstance(new, bool) else rng.choice([-1, 0, 10**6])
                else:
                    new = None if new is None and columns[index] == "parent" else str(new).replace("\x00", "")
            try:
                conn.execute(
                    f"UPDATE {schema}.{table} SET {columns[index]} = %s WHERE {key} = %s",  # noqa: S608
                    (new, row_key),
                )
            except psycopg.Error as exc:
                return f"{table}.{columns[index]}: refused by the database ({type(exc).__name__})"
            return f"{table}.{columns[index]} of {row_key!r}: {values[index]!r:.50} -> {new!r:.50}"
    import redis  # noqa: PLC0415

    with redis.Redis.from_url(server_address("redis"), decode_responses=True) as client:
        keys = sorted(client.scan_iter(match=f"{store.namespace}:*"))
        chosen = rng.choice(keys)
        kind_of = client.type(chosen)
        if rng.random() < 0.15:
            client.delete(chosen)
            return f"{chosen}: deleted"
        if kind_of == "string":
            value = client.get(chosen)
            new = mutation(value, rng)
            client.set(chosen, new if isinstance(new, str) else json.dumps(new) if not isinstance(new, bytes) else "x")
            return f"{chosen}: {value!r:.50} -> {new!r:.50}"
        if kind_of == "hash":
            field = rng.choice(sorted(client.hkeys(chosen)))
            client.hset(chosen, field, str(mutation(client.hget(chosen, field), rng)))
            return f"{chosen}[{field}] changed"
        if kind_of == "zset":
            member = rng.choice(client.zrange(chosen, 0, -1))
            client.zadd(chosen, {member: rng.choice([-1.0, 0.0, 1e12])})
            return f"{chosen}: score of {member} changed"
        return f"{chosen}: a {kind_of}, left alone"
