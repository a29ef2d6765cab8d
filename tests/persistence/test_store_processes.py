"""
Every store under processes: eight writers sharing threads, and a writer
killed mid-save. Servers stopped and restarted mid-run are in test_store_restarts.py.
"""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.stores import PERSISTENT, Stores, kind_params
from workingctx import (
    InMemoryStore,
)

WRITERS = 8
SAVES = 200
THREADS = 4


# The writer, as source: run in writer processes (which import workingctx as
# installed, never the checkout) and executed here for in-process writers.
WRITER_LIB = textwrap.dedent(
    """
    from workingctx import Checkpoint, Message, PrefixContext, SQLiteStore, WorkingContext
    from workingctx.exceptions import HeadConflictError
    from workingctx.persistence import PostgresStore, RedisStore, rehydrate


    def open_spec(kind, address, name):
        if kind == "sqlite":
            return SQLiteStore(address)
        if kind == "postgres":
            return PostgresStore(address, schema=name, pool_size=1)
        return RedisStore(address, namespace=name)


    def write(store, name, thread, count, report=None):
        # Save count checkpoints (forever if negative) to thread, each continuing
        # the thread's head: after a lost race, load the new head and try again.
        lost = 0
        mine = None
        saved = 0
        while count < 0 or saved < count:
            head = store.head(thread)
            if head is None:
                ctx = WorkingContext(prefix=PrefixContext("You share this thread."))
            elif mine is not None and mine[0] == head:
                ctx = mine[1]
            else:
                ctx = rehydrate(store.load(head))
            ctx.append(Message("user", f"{name} {saved} " + "x" * 200), Message("assistant", "ok"))
            ctx.journal.record({"writer": name, "n": saved})
            checkpoint = Checkpoint.capture(ctx, parent=head, metadata={"writer": name, "n": saved})
            try:
                store.save(checkpoint, thread=thread)
            except HeadConflictError:
                lost += 1
                continue
            mine = (checkpoint.id, ctx)
            if report is not None:
                report(checkpoint.id, saved)
            saved += 1
        return lost
    """
)
_lib: dict[str, Any] = {}
exec(WRITER_LIB, _lib)  # noqa: S102  # the test's own source, above
write: Callable[..., int] = _lib["write"]

WRITER = WRITER_LIB + textwrap.dedent(
    """
        import sys

        kind, address, name, writer, thread, count = sys.argv[1:7]
        store = open_spec(kind, address, name)
        lost = write(store, writer, thread, int(count), lambda cid, n: print(cid, n, flush=True))
        print("lost", lost, flush=True)
        """
)


def start_writer(spec: list[str], writer: str, thread: str, count: int) -> subprocess.Popen[str]:
    """
    A writer process, importing workingctx as this interpreter has it installed
    (outside the checkout, with nothing of it on the path).
    """
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.Popen(
        [sys.executable, "-I", "-c", WRITER, *spec, writer, thread, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tempfile.gettempdir(),
        env=env,
    )


def check_threads(store: Any, fresh: Any, expected: dict[str, list[str]]) -> None:
    """
    Each thread's lineage holds every save of its writers, once and in order
    per writer; its head holds every writer's messages; every row is sealed.
    """
    infos = store.list()
    assert WRITERS * SAVES == len(infos)
    assert len(infos) == len({info.id for info in infos})
    for thread, writers in expected.items():
        head = store.head(thread)
        lineage = store.lineage(head)
        assert len(writers) * SAVES == len(lineage), thread
        numbers = collections.defaultdict(list)
        for info in lineage:
            numbers[info.metadata["writer"]].append(info.metadata["n"])
        assert {writer: list(range(SAVES)) for writer in writers} == dict(numbers)
        last = fresh.load(head)
        questions = [m.text().split()[:2] for m in last.snapshot.messages if m.role == "user"]
        assert sorted([writer, str(n)] for writer in writers for n in range(SAVES)) == sorted(questions)
        assert len(lineage) == len(last.snapshot.journal)
    for info in random.Random(0).sample(infos, 30):
        assert info.digest == fresh.load(info.id).snapshot.digest()


class TestConcurrentWriters:
    @pytest.mark.parametrize("kind", kind_params(PERSISTENT))
    def test_eight_processes_share_threads_and_lose_nothing(self, kind, scratch_dir):
        """
        Eight writer processes, two per thread, 200 saves each: every save is
        in its thread's lineage and its head's transcript; nothing is lost or damaged.
        """
        stores = Stores(kind, scratch_dir)
        try:
            store = stores.new()
            expected: dict[str, list[str]] = collections.defaultdict(list)
            writers = []
            for number in range(WRITERS):
                thread, writer = f"thread-{number % THREADS}", f"w{number}"
                expected[thread].append(writer)
                writers.append(start_writer(stores.spec(store), writer, thread, SAVES))
            lost = 0
            for writer in writers:
                out, errors = writer.communicate(timeout=600)
                assert 0 == writer.returncode, errors
                lost += int(out.splitlines()[-1].split()[1])
            check_threads(store, stores.again(store), expected)
            assert lost > 0  # the writers did race (each race lost was retried)
        finally:
            stores.close()

    def test_eight_threads_share_an_in_memory_store(self):
        """
        The in-memory store under eight writer threads: the same guarantees.
        """
        store = InMemoryStore()
        expected: dict[str, list[str]] = collections.defaultdict(list)
        workers = []
        for number in range(WRITERS):
            thread, writer = f"thread-{number % THREADS}", f"w{number}"
            expected[thread].append(writer)
            workers.append(threading.Thread(target=write, args=(store, writer, thread, SAVES)))
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        check_threads(store, store, expected)


class TestKilledWriter:
    @pytest.mark.parametrize("kind", kind_params(PERSISTENT))
    @pytest.mark.parametrize("seed", range(2))
    def test_sigkill_mid_save_loses_nothing(self, kind, seed, scratch_dir):
        """
        A writer killed with SIGKILL while saving leaves a store that loads
        every checkpoint it reported saved and holds no half-saved one; the
        next writer goes on from the head.
        """
        rng = random.Random(seed)
        stores = Stores(kind, scratch_dir)
        try:
            store = stores.new()
            writer = start_writer(stores.spec(store), "k", "t", -1)
            assert writer.stdout is not None
            lines = [writer.stdout.readline() for _ in range(5 + rng.randrange(10))]
            time.sleep(rng.uniform(0, 0.02))
            writer.send_signal(signal.SIGKILL)
            writer.wait(timeout=30)
            rest = writer.stdout.read()
            writer.stdout.close()
            assert writer.stderr is not None
            writer.stderr.close()
            reported = [line.split() for line in [*lines, *rest.splitlines()] if line.strip()]
            fresh = stores.again(store)
            infos = fresh.list()
            assert len(infos) in {len(reported), len(reported) + 1}  # the last save may have committed unreported
            for info in infos:
                assert info.digest == fresh.load(info.id).snapshot.digest()
            head = fresh.head("t")
            assert [info.id for info in infos] == [info.id for info in fresh.lineage(head)]
            assert reported[-1][0] in {info.id for info in infos}
            write(fresh, "after", "t", 3)
            assert len(infos) + 3 == len(fresh.lineage(fresh.head("t")))
        finally:
            stores.close()
