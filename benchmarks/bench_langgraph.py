"""
LangGraph checkpointers: the same graph run checkpointed by ``ContextSaver``
and by LangGraph's own saver on the same backend.

The graph is a ``StateGraph(MessagesState)`` with one node that asks LangChain's
``GenericFakeChatModel``; each turn is one ``invoke`` with a ~1 KB question and
a ~1 KB reply (~2 KB of transcript per turn, words drawn from a seeded random
vocabulary, so a message compresses about as prose does: zlib keeps about 60%
of its bytes), on one thread.
LangGraph writes three checkpoints per turn (the input, the step that applies
it, the reply), each with pending writes.

* SQLite: ``ContextSaver(SQLiteStore(path))`` against ``SqliteSaver``
  (``langgraph-checkpoint-sqlite``), each in a file of its own; bytes: the
  database file (and its WAL) once the connection is closed.
* PostgreSQL: ``ContextSaver(PostgresStore(dsn, schema=...))`` against
  ``PostgresSaver`` (``langgraph-checkpoint-postgres``), each in a schema of its
  own on one server; bytes: ``pg_total_relation_size`` of every table of the schema.
* time per step: the run's wall time (the graph and its saver) divided by the
  checkpoints written; beside it the process's CPU time per step (all its
  threads; a server's own work is not in it) and the time spent inside the
  saver's ``get_tuple``, ``put`` and ``put_writes`` (LangGraph runs puts on a
  background thread, so this can exceed the wall time). The 120-turn runs
  alternate three rounds of each saver and report the medians.

What ``ContextSaver`` stores per turn: three messages (the question as the
graph received it, the question as the reducer gave it an id, the reply), each
once with one transcript link; three checkpoint rows and two pending-writes
records (a record's transcript continues its checkpoint's, so it adds no
link), each with its note; and a head row per checkpoint that has writes.

The 1,000-turn run of LangGraph's savers writes the whole transcript into two
checkpoints per turn (about 2 GB on SQLite); ``--quick`` runs 120 turns only.
Servers: ``WORKINGCTX_POSTGRES_DSN``, or throwaway ones from ``scripts/servers``.
"""

from __future__ import annotations

import contextlib
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks._harness import Table
from benchmarks.bench_stores import _schema_bytes, _servers

GROUP = "langgraph"


def _vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(2000)]


def _text(rng: random.Random, words: list[str], size: int) -> str:
    out: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(words)
        out.append(word)
        length += len(word) + 1
    return " ".join(out)


def _script(turns: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """
    The run's questions and replies, ~1 KB each.
    """
    rng = random.Random(seed)
    words = _vocabulary(rng)
    return [_text(rng, words, 1000) for _ in range(turns)], [_text(rng, words, 1000) for _ in range(turns)]


class _Timed:
    """
    Accumulates the time spent inside a saver's get_tuple, put and put_writes.
    """

    def __init__(self, saver: Any) -> None:
        self.seconds = 0.0
        self.puts = 0
        self.cpu = 0.0  # the process's CPU seconds over the run (every thread; a server's work is not in it)
        for name in ("get_tuple", "put", "put_writes"):
            setattr(saver, name, self._wrap(name, getattr(saver, name)))

    def _wrap(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
                self.puts += name == "put"

        return timed


def _run(saver: Any, turns: int) -> tuple[float, float, int, float]:
    """
    Drive the graph *turns* times: wall seconds, the saver's seconds, checkpoints written, CPU seconds.
    """
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: PLC0415
    from langchain_core.messages import HumanMessage  # noqa: PLC0415
    from langgraph.graph import START, MessagesState, StateGraph  # noqa: PLC0415

    questions, replies = _script(turns)
    model = GenericFakeChatModel(messages=iter(replies))

    def chat(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("chat", chat)
    builder.add_edge(START, "chat")
    timer = _Timed(saver)
    graph = builder.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "bench"}}
    start, cpu = time.perf_counter(), time.process_time()
    for question in questions:
        graph.invoke({"messages": [HumanMessage(question)]}, config)
    wall = time.perf_counter() - start
    timer.cpu = time.process_time() - cpu
    state = graph.get_state(config)
    assert len(state.values["messages"]) == 2 * turns
    assert len(list(saver.list({"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}, limit=3))) == 3
    return wall, timer.seconds, timer.puts, timer.cpu


def _file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


@contextlib.contextmanager
def _sqlite_ours(directory: Path) -> Iterator[tuple[Any, Callable[[], int]]]:
    from workingctx import SQLiteStore  # noqa: PLC0415
    from workingctx.integrations.langgraph import ContextSaver  # noqa: PLC0415

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "ours.db"
    store = SQLiteStore(path)
    closed = False

    def size() -> int:
        nonlocal closed
        store.close()
        closed = True
        return _file_bytes(path)

    try:
        yield ContextSaver(store), size
    finally:
        if not closed:
            store.close()


@contextlib.contextmanager
def _sqlite_peer(directory: Path) -> Iterator[tuple[Any, Callable[[], int]]]:
    import sqlite3  # noqa: PLC0415

    from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: PLC0415

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "peer.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    closed = False

    def size() -> int:
        nonlocal closed
        conn.close()
        closed = True
        return _file_bytes(path)

    try:
        yield SqliteSaver(conn), size
    finally:
        if not closed:
            conn.close()


@contextlib.contextmanager
def _postgres_ours(dsn: str, schema: str) -> Iterator[tuple[Any, Callable[[], int]]]:
    from workingctx.integrations.langgraph import ContextSaver  # noqa: PLC0415
    from workingctx.persistence import PostgresStore  # noqa: PLC0415

    store = PostgresStore(dsn, schema=schema)
    try:
        yield ContextSaver(store), lambda: _schema_bytes(dsn, schema)
    finally:
        store.drop()
        store.close()


@contextlib.contextmanager
def _postgres_peer(dsn: str, schema: str) -> Iterator[tuple[Any, Callable[[], int]]]:
    import psycopg  # noqa: PLC0415
    from langgraph.checkpoint.postgres import PostgresSaver  # noqa: PLC0415
    from psycopg.conninfo import make_conninfo  # noqa: PLC0415

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        with PostgresSaver.from_conn_string(make_conninfo(dsn, options=f"-c search_path={schema}")) as saver:
            saver.setup()
            yield saver, lambda: _schema_bytes(dsn, schema)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _measure(make: Any, turns: int) -> tuple[float, float, int, int, float]:
    with make as (saver, size):
        wall, saver_seconds, steps, cpu = _run(saver, turns)
        return wall / steps, saver_seconds / steps, steps, size(), cpu / steps


def _pair(ours: Callable[[int], Any], peer: Callable[[int], Any], turns: int, rounds: int) -> tuple[Any, Any]:
    """
    Both savers measured *rounds* times, alternately (so a busy machine slows
    both alike): the median step times and the median bytes (PostgreSQL
    grows a table by several pages at once when two connections insert into
    it together, so one round's bytes can stand out).
    """
    runs: list[tuple[Any, Any]] = [(_measure(ours(n), turns), _measure(peer(n), turns)) for n in range(rounds)]

    def median(side: int) -> Any:
        first = runs[0][side]
        return (
            statistics.median(r[side][0] for r in runs),
            statistics.median(r[side][1] for r in runs),
            first[2],
            statistics.median(r[side][3] for r in runs),
            statistics.median(r[side][4] for r in runs),
        )

    return median(0), median(1)


def _rows(table: Table, backend: str, peer_name: str, turns: int, ours: Any, peer: Any) -> None:
    size = f"{turns} turns, ~2 KB each"
    step, saver_step, steps, ours_bytes, cpu = ours
    peer_step, peer_saver_step, _, peer_bytes, peer_cpu = peer
    table.add(
        GROUP,
        f"{backend} bytes stored",
        size,
        None,
        baseline=f"LangGraph {peer_name}",
        note=(
            f"ContextSaver {ours_bytes / 1e6:,.2f} MB vs {peer_name} {peer_bytes / 1e6:,.1f} MB: "
            f"{peer_bytes / ours_bytes:,.0f}x fewer bytes ({steps} checkpoints)"
        ),
    )
    table.add(
        GROUP,
        f"{backend} time per graph step",
        size,
        step,
        baseline=f"LangGraph {peer_name}",
        baseline_seconds=peer_step,
        note=(
            f"CPU per step: ContextSaver {cpu * 1e3:.2f} ms, {peer_name} {peer_cpu * 1e3:.2f} ms; "
            f"time inside the saver: ContextSaver {saver_step * 1e3:.2f} ms, {peer_name} {peer_saver_step * 1e3:.2f} ms"
        ),
    )


def run(table: Table, quick: bool) -> None:
    sizes = [(120, 3)] if quick else [(120, 3), (1000, 1)]  # (turns, rounds)
    tag = uuid.uuid4().hex[:8]
    for turns, rounds in sizes:
        with tempfile.TemporaryDirectory(prefix="workingctx-bench-langgraph.") as name:
            directory = Path(name)
            ours, peer = _pair(
                lambda n, d=directory: _sqlite_ours(d / f"ours-{n}"),
                lambda n, d=directory: _sqlite_peer(d / f"peer-{n}"),
                turns,
                rounds,
            )
        _rows(table, "SQLite", "SqliteSaver", turns, ours, peer)
    with _servers() as servers:
        dsn = servers.get("postgres") or os.environ.get("WORKINGCTX_POSTGRES_DSN")
        if not dsn:
            print("langgraph: no PostgreSQL server (set WORKINGCTX_POSTGRES_DSN or install postgresql); rows left out")
            return
        for turns, rounds in sizes:
            ours, peer = _pair(
                lambda n, t=turns: _postgres_ours(dsn, f"bench_lgctx_{tag}_{t}_{n}"),
                lambda n, t=turns: _postgres_peer(dsn, f"bench_lgpeer_{tag}_{t}_{n}"),
                turns,
                rounds,
            )
            _rows(table, "PostgreSQL", "PostgresSaver", turns, ours, peer)
