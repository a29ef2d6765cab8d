"""
Persistence: checkpoints of a working context, and the stores that keep them.

A :class:`Checkpoint` is a snapshot made durable (an id, the snapshot, when it
was taken, its parent, your metadata); :func:`rehydrate` turns one back into a
live, writable context. Stores share one small protocol,
:class:`CheckpointStore`: :class:`InMemoryStore` for tests and short runs,
:class:`SQLiteStore` for everything that must survive the process,
:class:`PostgresStore` and :class:`RedisStore` for checkpoints shared by
processes on many machines.

>>> from workingctx import Checkpoint, InMemoryStore, Message, WorkingContext
>>> from workingctx.persistence import rehydrate
>>> store = InMemoryStore()
>>> ctx = WorkingContext().append(Message("user", "hello")).note("plan", {"steps": ["a"]})
>>> saved = store.save(Checkpoint.capture(ctx))
>>> resumed = rehydrate(store.load(saved))
>>> resumed.get("plan")["steps"].append("b")
>>> resumed.freeze() == ctx.freeze()
False
"""

from workingctx.checkpoint import Checkpoint, checkpoint_id, rehydrate
from workingctx.persistence.histories import ContextInfo, ContextStore
from workingctx.persistence.listing import Listing
from workingctx.persistence.media import SQLiteMediaStore
from workingctx.persistence.memory import InMemoryStore
from workingctx.persistence.postgres import PostgresStore
from workingctx.persistence.redis import RedisStore
from workingctx.persistence.sqlite import SQLiteStore
from workingctx.persistence.stores import CheckpointInfo, CheckpointStore

__all__ = [
    "Checkpoint",
    "CheckpointInfo",
    "CheckpointStore",
    "ContextInfo",
    "ContextStore",
    "InMemoryStore",
    "Listing",
    "PostgresStore",
    "RedisStore",
    "SQLiteMediaStore",
    "SQLiteStore",
    "checkpoint_id",
    "rehydrate",
]
