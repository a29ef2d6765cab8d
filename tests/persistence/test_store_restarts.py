"""
The server stores when their server goes away: stopped, then back; restarted
while a writer saves. The servers are the test's own (scripts/servers), so
stopping them disturbs no other test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.persistence.test_store_processes import write
from tests.stores import ROOT, SERVERS, kind_params
from workingctx import Checkpoint, Message, WorkingContext
from workingctx.exceptions import StoreUnavailableError
from workingctx.persistence import PostgresStore, RedisStore, rehydrate

BASH = shutil.which("bash") or "/bin/bash"


@pytest.fixture(scope="module")
def own_servers() -> Iterator[dict[str, str]]:
    """
    Servers of this module's own (scripts/servers in a new directory), free to
    stop and restart without disturbing other tests.
    """
    directory = tempfile.mkdtemp(prefix="workingctx-servers.")
    env = {**os.environ, "WORKINGCTX_SERVERS_DIR": directory}
    started = subprocess.run(
        [BASH, str(ROOT / "scripts" / "servers"), "start"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    found = dict(
        line.removeprefix("export ").split("=", 1) for line in started.stdout.splitlines() if line.startswith("export ")
    )
    found["stderr"] = started.stderr
    yield found
    subprocess.run([BASH, str(ROOT / "scripts" / "servers"), "stop"], env=env, check=False, timeout=120)


def servers(own: dict[str, str], kind: str, *command: str) -> None:
    env = {**os.environ, "WORKINGCTX_SERVERS_DIR": own["WORKINGCTX_SERVERS_DIR"]}
    subprocess.run([BASH, str(ROOT / "scripts" / "servers"), *command], env=env, check=True, timeout=120)
    del kind


def open_own(own: dict[str, str], kind: str) -> Any:
    address = own.get(SERVERS[kind])
    if not address:
        pytest.skip(f"NO {kind.upper()} SERVER of the test's own could be started: {own['stderr']}")
    if kind == "postgres":
        return PostgresStore(address, schema="restarts", timeout=5)
    return RedisStore(address, namespace="restarts", timeout=5)


class TestServerRestarts:
    @pytest.mark.parametrize("kind", kind_params(("postgres", "redis")))
    def test_server_down_then_back(self, kind, own_servers):
        """
        With the server stopped, a save raises StoreUnavailableError saying
        saving again is safe, and writes nothing; once it is back the same
        store object goes on, and every checkpoint loads.
        """
        store = open_own(own_servers, kind)
        try:
            store.drop()
            store = open_own(own_servers, kind)
            write(store, "before", "t", 3)
            head = store.head("t")
            ctx = rehydrate(store.load(head)).append(Message("user", "lost?"))
            servers(own_servers, kind, "stop", kind)
            with pytest.raises(StoreUnavailableError, match=r"PostgreSQL|Redis") as info:
                store.save(Checkpoint.capture(ctx, parent=head), thread="t")
            assert "safe" in str(info.value) or "running" in str(info.value)
            servers(own_servers, kind, "start", kind)
            write(store, "after", "t", 3)
            lineage = store.lineage(store.head("t"))
            assert ["before"] * 3 + ["after"] * 3 == [info.metadata["writer"] for info in lineage]
            for item in lineage:
                assert item.digest == store.load(item.id).snapshot.digest()
        finally:
            store.close()

    @pytest.mark.parametrize("kind", kind_params(("postgres", "redis")))
    def test_restart_mid_run(self, kind, own_servers):
        """
        A server restarted while a writer saves: the writer retries each save
        that failed with StoreUnavailableError, and at the end every save is
        in the thread, once, and loads.
        """
        store = open_own(own_servers, kind)
        store.drop()
        store = open_own(own_servers, kind)
        failures = 0
        saved: list[str] = []
        restarter = threading.Thread(target=servers, args=(own_servers, kind, "restart", kind))
        try:
            ctx = WorkingContext()
            parent = None
            while len(saved) < 60:
                if len(saved) == 10 and not restarter.is_alive() and failures == 0:
                    restarter.start()
                checkpoint = Checkpoint.capture(ctx.append(Message("user", f"turn {len(saved)}")), parent=parent)
                while True:
                    try:
                        store.save(checkpoint, thread="t")
                        break
                    except StoreUnavailableError:
                        failures += 1
                        time.sleep(0.05)
                saved.append(checkpoint.id)
                parent = checkpoint.id
            restarter.join()
            assert saved == [info.id for info in store.lineage(store.head("t"))]
            assert len(saved) == len(store.load(saved[-1]).snapshot.messages)
        finally:
            store.close()
