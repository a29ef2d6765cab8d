"""
Plain SQL on a ``SQLiteStore``'s file, to read or damage it as an operator
would, with digests as hexadecimal text whichever form the file keeps them in.

A store of schema version 3 keeps every digest as its 32 bytes; older ones as
64 hexadecimal characters. :func:`connect` translates on the way in (a
parameter that is a lowercase hexadecimal sha256 becomes its bytes) and on the
way out (a digest column's 32 bytes become their hexadecimal text), so a test
names rows by the digests the library shows, on either layout.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from workingctx.persistence.sqlite import _stored_key

DIGEST_COLUMNS = frozenset(
    {"digest", "checksum", "chain", "prev", "message", "entry", "prefix", "scratchpad", "messages_head"}
    | {"journal_head", "seal"}
)
"""The columns of a store's tables that hold digests."""


def binary(db: sqlite3.Connection) -> bool:
    """
    Whether the store in *db* keeps its digests as bytes (schema version 3 or newer).
    """
    try:
        found = db.execute("SELECT value FROM workingctx_store WHERE key = 'schema_version'").fetchone()
    except sqlite3.Error:  # not a store (yet)
        return False
    version = found[0] if found is not None else None
    # a damaged version (a word, thousands of digits) is the store's to refuse
    return isinstance(version, str) and version in {str(number) for number in range(3, 100)}


def _shown(value: Any) -> Any:
    """
    A digest column's value as the file holds it, but 32 bytes as their hexadecimal text.
    """
    return value.hex() if type(value) is bytes and len(value) == 32 else value


def _hexed(cursor: sqlite3.Cursor, row: Sequence[Any]) -> tuple[Any, ...]:
    names = [column[0] for column in cursor.description]
    return tuple(_shown(value) if name in DIGEST_COLUMNS else value for name, value in zip(names, row, strict=True))


class _Translating(sqlite3.Connection):
    translate = False

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if self.translate and isinstance(parameters, Iterable) and not isinstance(parameters, dict | str):
            parameters = tuple(_stored_key(value) for value in parameters)
        return super().execute(sql, parameters)


def connect(path: str | Path, **options: Any) -> sqlite3.Connection:
    """
    A connection to the store at *path* that speaks hexadecimal digests (see the module).
    """
    db = sqlite3.connect(path, factory=_Translating, **options)
    assert isinstance(db, _Translating)
    if binary(db):
        db.translate = True
        db.row_factory = _hexed
    return db


def file_state(path: Path) -> bytes:
    """
    Every byte of the database and its write-ahead log, to show nothing changed.
    """
    wal = Path(f"{path}-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
