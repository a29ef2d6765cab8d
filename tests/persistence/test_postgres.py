"""
The PostgreSQL store's schema versions.

A new store (schema version 3) keeps every digest as its 32 bytes and every
payload as bytes, long ones compressed, and makes the tables of journals and
recorded contexts when it first needs them; damage to that layout (a digest
cut short or too long, a compressed payload that no longer inflates, a
journal table gone) raises CheckpointError naming where, and changes nothing.
A store of schema version 1 (every column text) or 2 (every table made with
the store) is read and written as it is, so that an older workingctx still reads it.
"""

from __future__ import annotations

import contextlib
import uuid
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.stores import DIGEST_COLUMNS, Raw, Stores, server_address
from workingctx import Checkpoint, Message, PrefixContext, ToolCall, WorkingContext
from workingctx.exceptions import CheckpointError
from workingctx.persistence import PostgresStore
from workingctx.persistence._codec import PACK_FROM, PACKED

pytestmark = pytest.mark.server

VERSION_1_TABLES = (
    "CREATE TABLE @.workingctx_store (key text PRIMARY KEY, value text NOT NULL)",
    "CREATE TABLE @.messages (digest text PRIMARY KEY, data text NOT NULL, checksum text NOT NULL)",
    (
        "CREATE TABLE @.message_links (chain text PRIMARY KEY, prev text NOT NULL, message text NOT NULL,"
        " position integer NOT NULL)"
    ),
    "CREATE TABLE @.journal_entries (digest text PRIMARY KEY, data text NOT NULL, checksum text NOT NULL)",
    (
        "CREATE TABLE @.journal_links (chain text PRIMARY KEY, prev text NOT NULL, entry text NOT NULL,"
        " position integer NOT NULL)"
    ),
    "CREATE TABLE @.blobs (digest text PRIMARY KEY, data text NOT NULL)",
    (
        "CREATE TABLE @.checkpoints (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id text NOT NULL UNIQUE,"
        " parent text, created_at text NOT NULL, created_ts double precision NOT NULL, metadata text NOT NULL,"
        " digest text NOT NULL, prefix text NOT NULL, scratchpad text NOT NULL, messages_head text NOT NULL,"
        " message_count integer NOT NULL, journal_head text NOT NULL, journal_count integer NOT NULL,"
        " seal text NOT NULL)"
    ),
    "CREATE TABLE @.heads (thread text PRIMARY KEY, checkpoint text NOT NULL)",
    "INSERT INTO @.workingctx_store (key, value) VALUES ('format', 'workingctx.checkpoints'), ('schema_version', '1')",
)
"""The tables workingctx made for a PostgreSQL store of schema version 1, and its marker."""

PAYLOAD_TABLES = ("messages", "journal_entries", "blobs")
"""The tables whose ``data`` holds a payload (bytea, long ones compressed, from schema version 2 on)."""

KEYS = {"message_links": "chain", "journal_links": "chain", "checkpoints": "id"}
"""The column a test names a row by, where it is not ``digest``."""


@pytest.fixture
def made(scratch_dir: Path) -> Iterator[Stores]:
    stores = Stores("postgres", scratch_dir)
    yield stores
    stores.close()


def sql(store: PostgresStore, statement: str, args: tuple[Any, ...] = ()) -> list[Any]:
    """
    Run *statement* on *store*'s schema (``@.`` names it) on a connection of the test's own.
    """
    with psycopg.connect(server_address("postgres"), autocommit=True) as conn:
        cursor = conn.execute(statement.replace("@.", f'"{store.schema}".'), args)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


def column_types(store: PostgresStore) -> dict[str, str]:
    """
    The type of every column of *store*'s tables, as ``table.column``.
    """
    rows = sql(
        store,
        "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = %s",
        (store.schema,),
    )
    return {f"{table}.{column}": kind for table, column, kind in rows}


def version_1_store(made: Stores) -> PostgresStore:
    """
    A new, empty store laid out as workingctx made one with schema version 1.
    """
    schema = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(made.address, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')  # type: ignore[arg-type]
        for statement in VERSION_1_TABLES:
            conn.execute(statement.replace("@.", f'"{schema}".'))  # type: ignore[arg-type]
    store = PostgresStore(made.address, schema=schema, pool_size=2)
    made.made.append(store)
    return store


def long_run() -> list[Checkpoint]:
    """
    Three checkpoints of a run with long messages (~1.3 KB each, compressible),
    short ones, tool calls, a journal, a scratchpad and a prefix.
    """
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo"]
    ctx = WorkingContext(prefix=PrefixContext("You are careful. " * 40))
    checkpoints: list[Checkpoint] = []
    parent = None
    for turn in range(3):
        ctx.append(
            Message("user", " ".join(words[(turn + i) % len(words)] for i in range(230))),
            Message.assistant(tool_calls=[ToolCall(f"c{turn}", "lookup", {"q": turn})]),
            Message.tool(f"result {turn}", call_id=f"c{turn}"),
            Message("assistant", " ".join(words[(turn * 5 + i * 3) % len(words)] for i in range(250))),
        )
        ctx.note("turn", turn)
        ctx.journal.record({"kind": "turn", "n": turn, "summary": "words " * 150})
        ctx.journal.record({"kind": "mark", "n": turn})
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


def refusals(store: PostgresStore, run: list[Checkpoint]) -> list[CheckpointError]:
    """
    Load every checkpoint of *run* from *store*: each must be the one saved,
    or raise CheckpointError naming a path. Returns the errors raised.
    """
    refused: list[CheckpointError] = []
    for checkpoint in run:
        try:
            loaded = store.load(checkpoint.id)
        except CheckpointError as exc:
            refused.append(exc)
        else:
            assert checkpoint == loaded
    assert all(exc.path.startswith("$") for exc in refused), refused
    return refused


def saved_run(made: Stores, store: PostgresStore | None = None) -> tuple[PostgresStore, list[Checkpoint]]:
    """
    :func:`long_run` saved to *store* (a new one when None) on thread ``main``.
    """
    store = made.new() if store is None else store
    run = long_run()
    for checkpoint in run:
        store.save(checkpoint, thread="main")
    return store, run


class TestVersion3:
    def test_a_new_store_keeps_digests_as_bytes_and_long_payloads_compressed(self, made):
        """
        A new store records schema version 3; every digest column is bytea
        holding 32 bytes, every payload is bytea (long ones compressed, the
        rest their UTF-8 text); ids, metadata and the recorded contexts'
        tables stay text; every checkpoint loads equal, here and from a fresh store.
        """
        store, run = saved_run(made)
        store.save_context(WorkingContext(record=True, id="run").append(Message("user", "hi")))
        assert [("3",)] == sql(store, "SELECT value FROM @.workingctx_store WHERE key = 'schema_version'")
        types = column_types(store)
        for table, columns in DIGEST_COLUMNS.items():
            for column in columns:
                assert "bytea" == types[f"{table}.{column}"], f"{table}.{column}"
                lengths = sql(store, f"SELECT DISTINCT octet_length({column}) FROM @.{table}")  # noqa: S608
                assert [(32,)] == lengths, f"{table}.{column}"
        for table in PAYLOAD_TABLES:
            assert "bytea" == types[f"{table}.data"]
        for name in ("checkpoints.id", "checkpoints.parent", "checkpoints.metadata", "checkpoints.created_at"):
            assert "text" == types[name]
        assert {"heads.thread": "text", "heads.checkpoint": "text"} == {k: v for k, v in types.items() if "heads." in k}
        assert {"text"} == {
            v for k, v in types.items() if k.startswith(("history_entries.", "contexts.")) and v != "integer"
        }
        for table in PAYLOAD_TABLES:
            kinds = {bytes(data[:1]) == PACKED for (data,) in sql(store, f"SELECT data FROM @.{table}")}  # noqa: S608
            assert {True, False} == kinds, table  # long texts compressed, short ones as they are
        assert run == [store.load(checkpoint.id) for checkpoint in run]
        fresh = made.again(store)
        assert run == [fresh.load(checkpoint.id) for checkpoint in run]
        assert [c.id for c in run] == [info.id for info in fresh.lineage(run[-1].id)]
        assert run[-1].id == fresh.head("main")

    def test_takes_fewer_bytes_than_version_1(self, made):
        """
        The same run's digests take 33 bytes each in a new store against 65
        in a store of version 1 (a byte of header each), and its payloads
        less than half the bytes.
        """
        sizes = []
        for store in (made.new(), version_1_store(made)):
            saved_run(made, store)
            digests = 0
            for table, columns in DIGEST_COLUMNS.items():
                total = " + ".join(f"sum(pg_column_size({column}))" for column in columns)
                digests += int(sql(store, f"SELECT {total} FROM @.{table}")[0][0])  # noqa: S608
            data = sum(int(sql(store, f"SELECT sum(pg_column_size(data)) FROM @.{t}")[0][0]) for t in PAYLOAD_TABLES)  # noqa: S608
            sizes.append((digests, data))
        (new_digests, new_data), (old_digests, old_data) = sizes
        assert 33 * old_digests == 65 * new_digests  # 32 bytes and a header byte, against 64 and one
        assert 2 * new_data < old_data

    def test_deleting_collects_the_binary_rows(self, made):
        """
        Deleting every checkpoint removes every message, link and blob (the
        garbage collector compares bytea with bytea).
        """
        store, run = saved_run(made)
        for checkpoint in run:
            store.delete(checkpoint.id)
        for table in ("messages", "message_links", "journal_entries", "journal_links", "blobs", "heads"):
            assert [(0,)] == sql(store, f"SELECT count(*) FROM @.{table}"), table  # noqa: S608


def tables(store: PostgresStore) -> set[str]:
    """
    The tables *store*'s schema holds.
    """
    found = sql(store, "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (store.schema,))
    return {name for (name,) in found}


CORE = {"workingctx_store", "messages", "message_links", "blobs", "checkpoints", "heads"}
"""The tables a store of schema version 3 makes with itself."""


def version_2_store(made: Stores) -> PostgresStore:
    """
    A new, empty store laid out as workingctx made one with schema version 2:
    the tables of version 3, all made at once, and its marker.
    """
    store = made.new()
    ctx = WorkingContext().append(Message("user", "x"))
    ctx.journal.record({"k": 1})
    store.save(Checkpoint.capture(ctx))
    store.save_context(WorkingContext(record=True, id="made").append(Message("user", "hi")))
    sql(
        store,
        "TRUNCATE @.messages, @.message_links, @.blobs, @.checkpoints, @.heads, @.journal_entries,"
        " @.journal_links, @.history_entries, @.contexts",
    )
    sql(store, "UPDATE @.workingctx_store SET value = '2' WHERE key = 'schema_version'")
    return made.again(store)


class TestTablesOnFirstUse:
    def test_a_store_makes_the_journal_and_context_tables_when_first_needed(self, made):
        """
        A new store holds six tables; a checkpoint with no journal adds none,
        the first with one adds the journal's two, the first recorded context
        the contexts' two; until then, listing contexts gives none, loading or
        deleting one says it is not there, and deleting checkpoints collects
        garbage without the journal's tables.
        """
        store = made.new()
        assert CORE == tables(store)
        plain = Checkpoint.capture(WorkingContext().append(Message("user", "hello")))
        store.save(plain)
        assert CORE == tables(store)
        assert [] == list(store.list_contexts())
        for missing in (store.load_context, store.delete_context):
            with pytest.raises(CheckpointError, match="ghost"):
                missing("ghost")
        assert CORE == tables(store)
        store.delete(plain.id)
        assert [(0,)] == sql(store, "SELECT count(*) FROM @.messages")
        store, run = saved_run(made, store)
        assert {*CORE, "journal_entries", "journal_links"} == tables(store)
        fresh = made.again(store)
        assert run == [fresh.load(checkpoint.id) for checkpoint in run]
        ctx = WorkingContext(record=True, id="run").append(Message("user", "hi"))
        fresh.save_context(ctx)
        assert {*CORE, "journal_entries", "journal_links", "history_entries", "contexts"} == tables(store)
        assert ["run"] == [info.id for info in store.list_contexts()]
        assert ctx.messages == store.load_context("run").messages

    def test_two_handles_making_the_journal_tables_at_once_lose_nothing(self, made):
        """
        Two handles on a new store saving their first journals side by side
        each make the tables or find them made; every checkpoint loads.
        """
        import threading  # noqa: PLC0415

        store = made.new()
        other = made.again(store)
        run = long_run()
        errors: list[BaseException] = []

        def save(handle: PostgresStore, checkpoint: Checkpoint) -> None:
            try:
                handle.save(attrs.evolve(checkpoint, parent=None))
            except BaseException as exc:  # reported below
                errors.append(exc)

        workers = [threading.Thread(target=save, args=pair) for pair in ((store, run[0]), (other, run[1]))]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert [] == errors
        assert {"journal_entries", "journal_links"} <= tables(store)
        fresh = made.again(store)
        assert [attrs.evolve(c, parent=None) for c in run[:2]] == [fresh.load(c.id) for c in run[:2]]

    def test_a_journal_table_gone_is_damage_named(self, made):
        """
        A checkpoint that holds journal entries whose table is gone raises
        CheckpointError naming the table and the journal's path; the
        checkpoints without a journal still load, and nothing changes.
        """
        store = made.new()
        plain = Checkpoint.capture(WorkingContext().append(Message("user", "hello")))
        store.save(plain)
        store, run = saved_run(made, store)
        sql(store, "DROP TABLE @.journal_links")
        raw = Raw("postgres", store)
        before = raw.state()
        fresh = made.again(store)
        with pytest.raises(CheckpointError, match="table journal_links is missing") as info:
            fresh.load(run[0].id)
        assert info.value.path.startswith("$.snapshot.journal")
        assert plain == fresh.load(plain.id)
        assert before == raw.state()


class TestVersion2:
    def test_a_version_2_store_loads_saves_and_stays_version_2(self, made):
        """
        A store of schema version 2 (every table made with it) saves and
        loads every checkpoint and context, and stays version 2, as an older
        workingctx reads it; deleting collects its journal's rows.
        """
        store = version_2_store(made)
        store, run = saved_run(made, store)
        fresh = made.again(store)
        assert run == [fresh.load(checkpoint.id) for checkpoint in run]
        ctx = WorkingContext(record=True, id="run").append(Message("user", "hi"))
        fresh.save_context(ctx)
        assert ctx.messages == made.again(store).load_context("run").messages
        assert [("2",)] == sql(store, "SELECT value FROM @.workingctx_store WHERE key = 'schema_version'")
        for checkpoint in run:
            fresh.delete(checkpoint.id)
        assert [(0,)] == sql(store, "SELECT count(*) FROM @.journal_entries")


@pytest.fixture(scope="module")
def shared(scratch_dir: Path) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    """
    One store of schema version 3, and a second handle on it, for many examples.
    """
    stores = Stores("postgres", scratch_dir)
    store = stores.new()
    yield store, stores.again(store)
    stores.close()


sizes_near_the_threshold = st.integers(PACK_FROM - 40, PACK_FROM + 40)


@settings(max_examples=40, deadline=None)
@given(
    content=st.one_of(
        st.text(max_size=1500),
        st.builds(lambda size, letter: letter * size, sizes_near_the_threshold, st.sampled_from("a\u00e9\u4e2d")),
        st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=PACK_FROM - 40, max_size=PACK_FROM + 40),
    )
)
def test_any_payload_round_trips_stored_as_pack_would(shared, content):
    """
    A message of any text (short, at the compression threshold, not
    compressible, not ASCII) loads equal from another handle, and is stored
    compressed exactly when that is shorter than its UTF-8 text of
    ``PACK_FROM`` bytes or more.
    """
    store, other = shared
    ctx = WorkingContext().append(Message("user", content))
    checkpoint = Checkpoint.capture(ctx, metadata={"case": uuid.uuid4().hex})
    store.save(checkpoint)
    assert checkpoint == other.load(checkpoint.id)
    digest = bytes.fromhex(ctx.freeze().messages[0].digest())
    ((data,),) = sql(store, "SELECT data FROM @.messages WHERE digest = %s", (digest,))
    data = bytes(data)
    if data[:1] == PACKED:
        text = zlib.decompress(data[1:])
        assert len(text) >= PACK_FROM
        assert len(data) < len(text)
    else:
        assert data.decode("utf-8").startswith("{")
        assert len(data) < PACK_FROM or len(PACKED + zlib.compress(data, 6)) >= len(data)


# -- damage to the binary layout ---------------------------------------------------------------


def key_column(table: str) -> str:
    return KEYS.get(table, "digest")


def some_row(store: PostgresStore, table: str, checkpoint_id: str) -> Any:
    """
    The key of one row of *table*: the checkpoint *checkpoint_id*'s row, or the row of the smallest key.
    """
    if table == "checkpoints":
        return checkpoint_id
    key = key_column(table)
    found = sql(store, f"SELECT {key} FROM @.{table} ORDER BY {key} LIMIT 1")  # noqa: S608
    return found[0][0]


CHANGES: dict[str, Callable[[bytes], bytes]] = {
    "cut short": lambda value: value[:-1],
    "too long": lambda value: value + b"\x00",
    "empty": lambda _value: b"",
    "hex text": lambda value: value.hex().encode("ascii"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize(
    ("table", "column"), [(table, column) for table, columns in DIGEST_COLUMNS.items() for column in columns]
)
def test_a_digest_of_the_wrong_length_is_named_and_nothing_changes(made, table, column, change):
    """
    A digest column holding other than 32 bytes (cut short, too long,
    empty, its hex as text) never crashes a read: load raises CheckpointError
    naming a path, or gives the checkpoint saved; listing raises nothing but
    names a damaged row; nothing stored changes.
    """
    store, run = saved_run(made)
    key = key_column(table)
    row = some_row(store, table, run[-1].id)
    ((value,),) = sql(store, f"SELECT {column} FROM @.{table} WHERE {key} = %s", (row,))  # noqa: S608
    sql(store, f"UPDATE @.{table} SET {column} = %s WHERE {key} = %s", (CHANGES[change](bytes(value)), row))  # noqa: S608
    raw = Raw("postgres", store)
    before = raw.state()
    fresh = made.again(store)
    failures = refusals(fresh, run)
    listing = fresh.list()
    assert {c.id for c in run} == {info.id for info in listing} | set(listing.damaged)
    if table == "checkpoints":
        assert ["long-2"] == list(listing.damaged)
        assert "does not match its seal" in str(listing.damaged["long-2"])
    if column != "checksum":  # a checksum is read only when its item fails
        assert failures, f"{table}.{column} {change}: every checkpoint loaded"
    assert before == raw.state()


@pytest.mark.parametrize("table", PAYLOAD_TABLES)
@pytest.mark.parametrize(
    "damaged",
    [
        pytest.param(lambda _data: PACKED + b"not a zlib stream", id="not zlib"),
        pytest.param(lambda data: data[:-9], id="stream cut short"),
        pytest.param(lambda data: data[:-9] + b"\x01" * 9, id="stream's end changed"),
        pytest.param(lambda _data: PACKED, id="marker alone"),
        pytest.param(lambda _data: PACKED + zlib.compress(b"\xff\xfe not UTF-8"), id="inflates to bytes not UTF-8"),
        pytest.param(
            lambda _data: PACKED + zlib.compress(b'{"role":"user","content":"bye"}'), id="inflates to another text"
        ),
    ],
)
def test_compressed_data_that_does_not_inflate_is_named(made, table, damaged):
    """
    A compressed payload that no longer inflates, or inflates to another
    text or to bytes that are not UTF-8, is damage: load raises
    CheckpointError naming the path; nothing changes; the list is whole.
    """
    store, run = saved_run(made)
    rows = sql(store, f"SELECT digest, data FROM @.{table}")  # noqa: S608
    key, data = next((key, bytes(data)) for key, data in rows if bytes(data[:1]) == PACKED)
    sql(store, f"UPDATE @.{table} SET data = %s WHERE digest = %s", (damaged(data), key))  # noqa: S608
    raw = Raw("postgres", store)
    before = raw.state()
    fresh = made.again(store)
    failed = refusals(fresh, run)
    assert failed, f"{table}: every checkpoint loaded"
    expected = {"messages": "$.snapshot.messages", "journal_entries": "$.snapshot.journal", "blobs": "$.snapshot"}
    for exc in failed:
        assert exc.path.startswith(expected[table]), exc
        assert "cannot load checkpoint" in str(exc)
    if table != "blobs":
        assert all(key.hex() in str(exc) for exc in failed)
    assert [c.id for c in run] == [info.id for info in fresh.list()]
    assert before == raw.state()


@settings(max_examples=30, deadline=None)
@given(
    where=st.sampled_from(
        [
            (table, column)
            for table, columns in DIGEST_COLUMNS.items()
            for column in [*columns, "data"]
            if column != "data" or table in PAYLOAD_TABLES
        ]
    ),
    value=st.binary(max_size=48),
)
def test_any_bytes_in_a_binary_column_give_the_checkpoint_or_checkpoint_error(scratch_dir, where, value):
    """
    Any bytes written over a digest or payload of a new store: each load
    gives the checkpoint saved or raises CheckpointError, and list and
    lineage raise nothing else.
    """
    table, column = where
    made = Stores("postgres", scratch_dir)
    try:
        store = made.new()
        run = long_run()[:2]
        for checkpoint in run:
            store.save(checkpoint)
        key = key_column(table)
        row = some_row(store, table, run[-1].id)
        sql(store, f"UPDATE @.{table} SET {column} = %s WHERE {key} = %s", (value, row))  # noqa: S608
        fresh = made.again(store)
        refusals(fresh, run)
        fresh.list()
        with contextlib.suppress(CheckpointError):
            fresh.lineage(run[-1].id)
    finally:
        made.close()


# -- schema version 1 ------------------------------------------------------------------------------


class TestVersion1:
    def test_a_version_1_store_loads_saves_and_stays_text(self, made):
        """
        A store of schema version 1 (every column text) saves and loads
        every checkpoint equal, and stays version 1: its marker, its column
        types, hex digests and uncompressed JSON text in every row, as an
        older workingctx reads it.
        """
        store = version_1_store(made)
        before = column_types(store)
        store, run = saved_run(made, store)
        assert run == [store.load(checkpoint.id) for checkpoint in run]
        fresh = made.again(store)
        assert run == [fresh.load(checkpoint.id) for checkpoint in run]
        assert run[-1].id == fresh.head("main")
        more = Checkpoint.capture(
            WorkingContext().extend(list(run[-1].snapshot.messages)).append(Message("user", "again " * 200)),
            parent=run[-1].id,
        )
        fresh.save(more, thread="main")
        assert [*run, more] == [made.again(store).load(checkpoint.id) for checkpoint in [*run, more]]
        assert before == column_types(store)
        assert {"text"} == {kind for name, kind in before.items() if name.split(".")[1] in {"digest", "data", "seal"}}
        assert [("1",)] == sql(store, "SELECT value FROM @.workingctx_store WHERE key = 'schema_version'")
        for table, columns in DIGEST_COLUMNS.items():
            for column in columns:
                values = [value for (value,) in sql(store, f"SELECT {column} FROM @.{table}")]  # noqa: S608
                assert values, f"{table}.{column}"
                assert all(isinstance(v, str) and len(v) == 64 and int(v, 16) >= 0 for v in values), f"{table}.{column}"
        for table in PAYLOAD_TABLES:
            texts = [data for (data,) in sql(store, f"SELECT data FROM @.{table}")]  # noqa: S608
            assert all(isinstance(text, str) and text.startswith("{") for text in texts), table

    def test_damage_to_a_version_1_store_is_named(self, made):
        """
        The checks of a version-1 store work as they did: a rewritten message,
        a repointed link and a truncated digest raise CheckpointError naming the path.
        """
        store, run = saved_run(made, version_1_store(made))
        raw = Raw("postgres", store)
        last = run[-1].snapshot
        raw.rewrite_message(last.messages[0].digest(), '{"role":"user","content":"bye"}')
        with pytest.raises(CheckpointError, match="does not match its checksum") as info:
            made.again(store).load(run[-1].id)
        assert "$.snapshot.messages[0]" == info.value.path
        raw.repoint_link(last.chain_digest(2), last.messages[3].digest())
        with pytest.raises(CheckpointError, match="link does not match") as info:
            made.again(store).load(run[1].id)
        sql(store, "UPDATE @.checkpoints SET prefix = left(prefix, 63) WHERE id = %s", (run[0].id,))
        with pytest.raises(CheckpointError, match="does not match its seal"):
            made.again(store).load(run[0].id)
