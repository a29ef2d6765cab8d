"""
SQLite store files for the persistence tests: fresh paths, two checkpoints
saved, rows read and resealed by hand, texts hashed as stores hash them, and
stored values mutated for fuzzing.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests import sqlite_rows
from workingctx import Checkpoint, Message, SQLiteStore
from workingctx.context import WorkingContext

_names = itertools.count()
_paths = itertools.count()


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def fresh_path(directory: Path) -> Path:
    return directory / f"db-{next(_names)}.db"


def sqlite_factory(directory: Path) -> Callable[[], SQLiteStore]:
    return lambda: SQLiteStore(directory / f"store-{next(_paths)}.db")


def saved_pair(path: Path, ctx: WorkingContext) -> tuple[Checkpoint, Checkpoint]:
    """
    Two checkpoints of one run (the second continues the first), saved and closed.
    """
    first = Checkpoint.capture(ctx, metadata={"n": 1})
    ctx.append(Message("user", "and then?"), Message("assistant", "then this."))
    ctx.journal.record({"kind": "step", "n": 2})
    second = Checkpoint.capture(ctx, parent=first, metadata={"n": 2})
    with SQLiteStore(path) as store:
        store.save(first)
        store.save(second)
    return first, second


def rows(path: Path, table: str) -> dict[str, tuple[str, str]]:
    with contextlib.closing(sqlite_rows.connect(path)) as db:
        return {key: (data, check) for key, data, check in db.execute(f"SELECT digest, data, checksum FROM {table}")}  # noqa: S608  # test's own names


def reseal(path: Path, checkpoint_id: str, **changes: Any) -> None:
    """
    Rewrite fields of a checkpoint row and seal it again without a key, as
    anyone who can write the file can.
    """
    from workingctx.persistence import _codec  # noqa: PLC0415  # the codec's own seal, as a forger would

    query = f"SELECT {', '.join(_codec.ROW_FIELDS)} FROM checkpoints WHERE id = ?"  # noqa: S608  # constant names
    with sqlite_rows.connect(path) as db:
        row = dict(zip(_codec.ROW_FIELDS, db.execute(query, (checkpoint_id,)).fetchone(), strict=True))
        row.update(changes)
        row["seal"] = _codec.seal([row[name] for name in _codec.ROW_FIELDS])
        assignments = ", ".join(f"{name} = ?" for name in row)
        db.execute(f"UPDATE checkpoints SET {assignments} WHERE id = ?", (*row.values(), checkpoint_id))  # noqa: S608
    db.close()


def mutate_json(text: str, rng: random.Random) -> str:
    """
    Valid JSON text with one change deep inside: a key dropped or renamed, a
    value replaced by one of another type.
    """
    data = json.loads(text)
    holders: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict | list) and node:
            holders.append(node)
            for child in node.values() if isinstance(node, dict) else node:
                walk(child)

    walk(data)
    if not holders:
        return json.dumps(rng.choice([None, 0, "x", [], {"type": "zzz"}]))
    node = rng.choice(holders)
    key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
    action = rng.choice(["drop", "rename", "replace"])
    if isinstance(node, dict) and action == "drop":
        del node[key]
    elif isinstance(node, dict) and action == "rename":
        node[f"{key}_"] = node.pop(key)
    else:
        node[key] = rng.choice([None, 0, -1, 2.5, True, "", "zzz", [], {}, {"type": "zzz"}])
    return json.dumps(data)


def mutation(value: Any, rng: random.Random) -> Any:
    choices: list[Any] = [None, 0, -5, 1.5, "", "garbage", b"\x00\x01", "{", "[]", "{}"]
    if isinstance(value, str) and value:
        cut = rng.randrange(len(value))
        choices += [value[:cut], value[:cut] + "Z" + value[cut + 1 :], value + " "]
        with contextlib.suppress(ValueError):  # not JSON text: no JSON mutation
            choices.append(mutate_json(value, rng))
    if isinstance(value, int):
        choices += [value + 1, value - 1, str(value)]
    return rng.choice(choices)
