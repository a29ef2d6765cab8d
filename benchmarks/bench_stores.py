"""
Server store benchmarks: a checkpoint after every turn of a long tool-heavy run,
on PostgreSQL and on Redis, against the peers on the same servers.

The run is ``bench_persistence``'s: ``tool_heavy()`` cut into turns (a
question, one or two tool exchanges, an answer), a note and a journal entry per
turn, a checkpoint after each turn, each continuing the last (one thread).

PostgreSQL (one server, each store in a schema of its own):

* ``PostgresStore``: ``save(Checkpoint.capture(ctx), thread=...)`` per turn;
* LangGraph's ``PostgresSaver`` (``langgraph-checkpoint-postgres``): ``put()``
  per turn of the checkpoint a ``MessagesState`` graph writes, the same
  messages as LangChain messages in its ``messages`` channel, a new channel
  version each turn;
* bytes: ``pg_total_relation_size`` of every table of the schema (heap, TOAST,
  indexes) after the run; save: the median over every turn, and over the last 20;
* load: the last checkpoint from a freshly opened ``PostgresStore`` (nothing
  cached, every item checked), against the naive read of the same data: one
  row holding the checkpoint's whole JSON, ``SELECT`` + ``from_json``.

Redis (one server, each in a key prefix of its own):

* ``RedisStore``, the same saves; bytes: ``MEMORY USAGE`` of every key;
* the OpenAI Agents SDK's ``RedisSession`` when ``openai-agents`` is installed:
  each turn's messages added as Responses items (it keeps the latest
  conversation only, no checkpoint per turn); bytes: ``MEMORY USAGE``;
* a plain whole copy: ``SET`` of the checkpoint's whole JSON every turn; its
  bytes are the payloads' sum (without Redis's per-key overhead, so in its
  favour), its save time the median of the last 20 turns, written for real;
* load: the last checkpoint from a freshly opened ``RedisStore``, against the
  naive read of the same data: ``GET`` of its whole JSON + ``from_json``, the
  rounds of the two alternating; and
  the same at ten times the turns (10,000; 1,000 with ``--quick``), a run of
  its own saved only to a ``RedisStore``.

Servers: ``WORKINGCTX_POSTGRES_DSN`` and ``WORKINGCTX_REDIS_URL``, or, when
unset, throwaway ones from ``scripts/servers`` (stopped afterwards).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks._data import to_langchain
from benchmarks._harness import Table, measure
from benchmarks.bench_persistence import _NaiveSize, _turns
from workingctx import Checkpoint, Message, PrefixContext
from workingctx.context import WorkingContext
from workingctx.persistence import PostgresStore, RedisStore
from workingctx.serialization import from_json, to_json

GROUP = "stores"
ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def _servers() -> Iterator[dict[str, str]]:
    """
    The servers to use: from the environment, or started here and stopped after.
    """
    wanted = {"postgres": "WORKINGCTX_POSTGRES_DSN", "redis": "WORKINGCTX_REDIS_URL"}
    if all(os.environ.get(variable) for variable in wanted.values()):
        yield {kind: os.environ[variable] for kind, variable in wanted.items()}
        return
    directory = tempfile.mkdtemp(prefix="workingctx-servers.")
    env = {**os.environ, "WORKINGCTX_SERVERS_DIR": directory}
    script = str(ROOT / "scripts" / "servers")
    bash = shutil.which("bash") or "/bin/bash"
    out = subprocess.run([bash, script, "start"], env=env, capture_output=True, text=True, check=False).stdout  # noqa: S603  # the project's own script
    found = dict(line.removeprefix("export ").split("=", 1) for line in out.splitlines() if line.startswith("export "))
    try:
        yield {kind: found[variable] for kind, variable in wanted.items() if variable in found}
    finally:
        subprocess.run([bash, script, "stop"], env=env, check=False)  # noqa: S603  # the project's own script


def _checkpoints(system: str, turns: list[list[Message]]) -> Iterator[tuple[int, list[Message], WorkingContext]]:
    """
    The run: after each turn, its number, its messages and the live context.
    """
    ctx = WorkingContext(prefix=PrefixContext(system_prompt=system))
    for number, turn in enumerate(turns):
        ctx.extend(turn)
        ctx.note("turn", number)
        ctx.note("last_tool", next(call.name for m in turn for call in m.tool_calls))
        ctx.journal.record({"kind": "turn_done", "turn": number, "messages": len(turn)})
        yield number, turn, ctx


def _workingctx_run(store: Any, system: str, turns: list[list[Message]]) -> tuple[list[float], Checkpoint]:
    times: list[float] = []
    parent: str | None = None
    checkpoint: Checkpoint | None = None
    for number, _, ctx in _checkpoints(system, turns):
        start = time.perf_counter()
        checkpoint = Checkpoint.capture(ctx, parent=parent, metadata={"turn": number})
        parent = store.save(checkpoint, thread="bench")
        times.append(time.perf_counter() - start)
    assert checkpoint is not None
    return times, checkpoint


def _schema_bytes(dsn: str, schema: str) -> int:
    import psycopg  # noqa: PLC0415  # the postgres extra

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class AS c"
            " JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchone()
        return int(row[0]) if row else 0


def _langgraph_run(dsn: str, schema: str, system: str, turns: list[list[Message]]) -> tuple[list[float], int] | None:
    """
    LangGraph's Postgres checkpointer saving the same run: save times and bytes.
    """
    try:
        import psycopg  # noqa: PLC0415
        from langchain_core.messages import SystemMessage  # noqa: PLC0415
        from langgraph.checkpoint.base import empty_checkpoint  # noqa: PLC0415
        from langgraph.checkpoint.base.id import uuid6  # noqa: PLC0415
        from langgraph.checkpoint.postgres import PostgresSaver  # noqa: PLC0415
        from psycopg.conninfo import make_conninfo  # noqa: PLC0415
    except ImportError as exc:
        print(f"stores: LangGraph's Postgres checkpointer is not installed ({exc}); its rows are left out")
        return None
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    times: list[float] = []
    messages: list[Any] = [SystemMessage(system)]
    with PostgresSaver.from_conn_string(make_conninfo(dsn, options=f"-c search_path={schema}")) as saver:
        saver.setup()
        config: Any = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
        version: Any = None
        for number, turn, ctx in _checkpoints(system, turns):
            messages.extend(to_langchain(turn))
            version = saver.get_next_version(version, None)
            checkpoint = empty_checkpoint()
            checkpoint["id"] = str(uuid6(clock_seq=number))
            checkpoint["channel_values"] = {
                "messages": list(messages),
                "turn": number,
                "last_tool": ctx.get("last_tool"),
            }
            checkpoint["channel_versions"] = {"messages": version, "turn": version, "last_tool": version}
            metadata: Any = {"source": "loop", "step": number, "parents": {}}
            start = time.perf_counter()
            config = saver.put(
                config, checkpoint, metadata, {"messages": version, "turn": version, "last_tool": version}
            )
            times.append(time.perf_counter() - start)
        latest = saver.get_tuple({"configurable": {"thread_id": "bench", "checkpoint_ns": ""}})
        assert latest is not None
        assert len(latest.checkpoint["channel_values"]["messages"]) == len(messages)
    return times, _schema_bytes(dsn, schema)


def _redis_bytes(url: str, pattern: str) -> int:
    import redis  # noqa: PLC0415  # the redis extra

    with redis.Redis.from_url(url) as client:
        return sum(int(client.memory_usage(key, samples=0) or 0) for key in client.scan_iter(match=pattern, count=1000))


def _items(message: Message) -> list[dict[str, Any]]:
    """
    A message as OpenAI Responses input items (what an Agents SDK session stores).
    """
    if message.role == "tool":
        return [{"type": "function_call_output", "call_id": message.tool_call_id, "output": message.text()}]
    items: list[dict[str, Any]] = []
    if message.text() or not message.tool_calls:
        items.append({"role": message.role, "content": message.text()})
    items.extend(
        {"type": "function_call", "call_id": call.id, "name": call.name, "arguments": json.dumps(dict(call.arguments))}
        for call in message.tool_calls
    )
    return items


def _agents_session_run(
    url: str, prefix: str, system: str, turns: list[list[Message]]
) -> tuple[list[float], int] | None:
    try:
        from agents.extensions.memory import RedisSession  # noqa: PLC0415
    except ImportError as exc:
        print(f"stores: the OpenAI Agents SDK's RedisSession is not installed ({exc}); its rows are left out")
        return None

    async def go() -> list[float]:
        session = RedisSession.from_url("bench", url=url, key_prefix=prefix)
        times: list[float] = []
        try:
            await session.add_items([{"role": "system", "content": system}])
            for _, turn, _ in _checkpoints(system, turns):
                items = [item for message in turn for item in _items(message)]
                start = time.perf_counter()
                await session.add_items(items)  # type: ignore[arg-type]
                times.append(time.perf_counter() - start)
            assert len(await session.get_items()) == 1 + sum(len(_items(m)) for turn in turns for m in turn)
        finally:
            await session.close()
        return times

    times = asyncio.run(go())
    return times, _redis_bytes(url, prefix + "*")


def _whole_copy(url: str, prefix: str, system: str, turns: list[list[Message]]) -> tuple[float, int]:
    """
    A store that SETs the whole checkpoint's JSON every turn: its total payload
    bytes, and the median time of its last 20 saves (written for real, then removed).
    """
    import redis  # noqa: PLC0415

    naive = _NaiveSize()
    total = 0
    times: list[float] = []
    parent: str | None = None
    with redis.Redis.from_url(url) as client:
        for number, turn, ctx in _checkpoints(system, turns):
            naive.add(turn, {"kind": "turn_done", "turn": number, "messages": len(turn)})
            checkpoint = Checkpoint.capture(ctx, parent=parent, metadata={"turn": number})
            parent = checkpoint.id
            total += naive.of(checkpoint)
            if number >= len(turns) - 20:
                start = time.perf_counter()
                client.set(f"{prefix}{checkpoint.id}", to_json(checkpoint))
                times.append(time.perf_counter() - start)
        for key in client.scan_iter(match=prefix + "*"):
            client.delete(key)
    return statistics.median(times), total


def _cold_load(opener: Any, last: Checkpoint) -> float:
    """
    Median time to load *last* from a store opened afresh before each round (nothing cached).
    """
    opened: list[Any] = []

    def reopen() -> None:
        for old in opened:
            old.close()
        opened[:] = [opener()]

    try:
        return measure(lambda: opened[0].load(last.id), repeat=5, setup=reopen)
    finally:
        for old in opened:
            old.close()


def _postgres_naive_load(dsn: str, schema: str, last: Checkpoint) -> float:
    """
    Median time to read *last* back from one row holding its whole JSON (in *schema*).
    """
    import psycopg  # noqa: PLC0415

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE TABLE "{schema}".naive (id text PRIMARY KEY, data text NOT NULL)')
        conn.execute(f'INSERT INTO "{schema}".naive VALUES (%s, %s)', (last.id, to_json(last)))  # noqa: S608  # our schema

        def naive() -> Checkpoint:
            row = conn.execute(f'SELECT data FROM "{schema}".naive WHERE id = %s', (last.id,)).fetchone()  # noqa: S608
            assert row is not None
            return from_json(row[0], Checkpoint)

        assert naive() == last
        seconds = measure(naive, repeat=5)
        conn.execute(f'DROP TABLE "{schema}".naive')
    return seconds


def _redis_loads(url: str, namespace: str, key: str, last: Checkpoint) -> tuple[float, float]:
    """
    Median times to load *last* from a ``RedisStore`` on *namespace* opened
    afresh before each round (nothing cached), and to read it back naively
    from one key holding its whole JSON (``GET`` + ``from_json``; the key
    removed afterwards). The rounds alternate, so that both see the same
    load on a shared machine.
    """
    import redis  # noqa: PLC0415

    opened: list[RedisStore] = []

    def reopen() -> None:
        for old in opened:
            old.close()
        opened[:] = [RedisStore(url, namespace=namespace)]

    with redis.Redis.from_url(url) as client:
        client.set(key, to_json(last))

        def naive() -> Checkpoint:
            return from_json(client.get(key), Checkpoint)  # bytes: from_json reads them

        assert naive() == last
        ours: list[float] = []
        theirs: list[float] = []
        try:
            for _ in range(7):
                ours.append(measure(lambda: opened[0].load(last.id), repeat=1, setup=reopen))
                theirs.append(measure(naive, repeat=1))
        finally:
            for old in opened:
                old.close()
            client.delete(key)
    return statistics.median(ours), statistics.median(theirs)


def _redis_load_at(url: str, turn_count: int, tag: str) -> tuple[str, float, float]:
    """
    A run of *turn_count* turns saved to a ``RedisStore``, then its last
    checkpoint loaded from a fresh store and read naively: the size, and the
    median seconds of each (the keys removed afterwards).
    """
    system, turns = _turns(turn_count)
    store = RedisStore(url, namespace=f"bench-scale-{tag}")
    try:
        _, last = _workingctx_run(store, system, turns)
        cold, naive = _redis_loads(url, store.namespace, f"bench-scale-naive-{tag}", last)
    finally:
        store.drop()
        store.close()
    return f"{turn_count} turns, {sum(len(turn) for turn in turns)} msgs", cold, naive


def _ms(times: list[float]) -> str:
    return f"median {statistics.median(times) * 1e3:.2f} ms, last 20 {statistics.median(times[-20:]) * 1e3:.2f} ms"


def run(table: Table, quick: bool) -> None:
    turn_count = 100 if quick else 1000
    system, turns = _turns(turn_count)
    size = f"{turn_count} turns, {sum(len(turn) for turn in turns)} msgs"
    tag = uuid.uuid4().hex[:8]
    with _servers() as servers:
        dsn = servers.get("postgres")
        if dsn is None:
            print("stores: no PostgreSQL server (set WORKINGCTX_POSTGRES_DSN or install postgresql); rows left out")
        else:
            store = PostgresStore(dsn, schema=f"bench_wctx_{tag}")
            try:
                times, last = _workingctx_run(store, system, turns)
                assert store.load(last.id) == last
                ours = _schema_bytes(dsn, store.schema)
                cold = _cold_load(lambda: PostgresStore(dsn, schema=store.schema), last)
                naive = _postgres_naive_load(dsn, store.schema, last)
            finally:
                store.drop()
                store.close()
            peer = _langgraph_run(dsn, f"bench_lg_{tag}", system, turns)
            if peer is not None:
                import psycopg  # noqa: PLC0415

                with psycopg.connect(dsn, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA "bench_lg_{tag}" CASCADE')
            table.add(
                GROUP,
                "PostgreSQL bytes, a checkpoint every turn",
                size,
                None,
                baseline="LangGraph PostgresSaver" if peer else "",
                note=(
                    f"PostgresStore {ours / 1e6:.2f} MB"
                    + (
                        ""
                        if peer is None
                        else f" vs LangGraph {peer[1] / 1e6:,.1f} MB: {peer[1] / ours:,.0f}x fewer bytes"
                    )
                ),
            )
            table.add(
                GROUP,
                "PostgreSQL save, every turn (median)",
                size,
                statistics.median(times),
                baseline="LangGraph put()" if peer else "",
                baseline_seconds=None if peer is None else statistics.median(peer[0]),
                note=f"PostgresStore {_ms(times)}" + ("" if peer is None else f"; LangGraph {_ms(peer[0])}"),
            )
            table.add(
                GROUP,
                "PostgreSQL load() last checkpoint, fresh store",
                size,
                cold,
                baseline="naive: SELECT whole JSON + from_json",
                baseline_seconds=naive,
                note="every message and entry checked by its digest; the same server",
            )
        url = servers.get("redis")
        if url is None:
            print("stores: no Redis server (set WORKINGCTX_REDIS_URL or install redis-server); rows left out")
            return
        _redis_rows(table, url, (system, turns), tag)


def _redis_rows(table: Table, url: str, run_of: tuple[str, list[list[Message]]], tag: str) -> None:
    """
    The Redis rows: ``RedisStore`` against a whole copy per turn and the Agents SDK's session.
    """
    system, turns = run_of
    turn_count = len(turns)
    size = f"{turn_count} turns, {sum(len(turn) for turn in turns)} msgs"
    redis_store = RedisStore(url, namespace=f"bench-wctx-{tag}")
    try:
        times, last = _workingctx_run(redis_store, system, turns)
        assert redis_store.load(last.id) == last
        ours = _redis_bytes(url, f"bench-wctx-{tag}:*")
        cold, naive = _redis_loads(url, redis_store.namespace, f"bench-naive-{tag}", last)
    finally:
        redis_store.drop()
        redis_store.close()
    copy_seconds, copy_bytes = _whole_copy(url, f"bench-copy-{tag}:", system, turns)
    session = _agents_session_run(url, f"bench-agents-{tag}", system, turns)
    table.add(
        GROUP,
        "Redis bytes, a checkpoint every turn",
        size,
        None,
        baseline="whole copy per turn",
        note=(
            f"RedisStore {ours / 1e6:.2f} MB vs whole copies {copy_bytes / 1e6:,.1f} MB: "
            f"{copy_bytes / ours:,.0f}x fewer bytes"
            + (
                ""
                if session is None
                else f"; Agents SDK RedisSession (latest conversation only) {session[1] / 1e6:.2f} MB"
            )
        ),
    )
    table.add(
        GROUP,
        "Redis save, last 20 turns (median)",
        size,
        statistics.median(times[-20:]),
        baseline="whole copy: SET its JSON",
        baseline_seconds=copy_seconds,
        note=f"RedisStore {_ms(times)}",
    )
    load_note = "one round trip, two with segments; every message and entry checked by its digest; the same server"
    table.add(
        GROUP,
        "Redis load() last checkpoint, fresh store",
        size,
        cold,
        baseline="naive: GET whole JSON + from_json",
        baseline_seconds=naive,
        note=load_note,
    )
    scaled_size, scaled_cold, scaled_naive = _redis_load_at(url, 10 * turn_count, tag)
    table.add(
        GROUP,
        "Redis load() last checkpoint, fresh store",
        scaled_size,
        scaled_cold,
        baseline="naive: GET whole JSON + from_json",
        baseline_seconds=scaled_naive,
        note=f"ten times the turns; {load_note}",
    )
    if session is not None:
        table.add(
            GROUP,
            "Redis save, every turn (median)",
            size,
            statistics.median(times),
            baseline="Agents SDK RedisSession.add_items",
            baseline_seconds=statistics.median(session[0]),
            note=f"the session appends the turn's items and keeps no checkpoints; {_ms(session[0])}",
        )
