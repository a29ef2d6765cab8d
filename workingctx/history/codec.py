"""
The JSON form of history entries, and the digest chain that links them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from workingctx.exceptions import (
    SerializationError,
)
from workingctx.history.entries import CONTENT_TYPES, ENTRY_KINDS, Entry, Kept, Piece
from workingctx.messages import Message
from workingctx.serialization import converter, structure, unstructure

__all__ = [
    "HISTORY_ROOT",
    "entry_from_data",
    "entry_text",
    "entry_to_data",
    "history_step",
]


def _unstructure_piece(value: Piece) -> Any:
    if isinstance(value, Kept):
        return [value.start, value.stop]
    return converter.unstructure(value, Message)


def _structure_piece(value: Any, _: Any) -> Piece:
    if isinstance(value, list):
        if len(value) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            msg = f"a run of the old tail is [start, stop], got {value!r}"
            raise ValueError(msg)
        return Kept(value[0], value[1])
    message: Message = converter.structure(value, Message)
    return message


_PIECE: Any = Piece
converter.register_structure_hook_func(lambda kind: kind == _PIECE, _structure_piece)
converter.register_unstructure_hook_func(lambda kind: kind == _PIECE, _unstructure_piece)


def entry_to_data(entry: Entry) -> dict[str, Any]:
    """
    An entry as plain JSON data: ``kind``, ``turn``, ``at``, ``content`` and, on
    tool results, ``outcome``.
    """
    data: dict[str, Any] = {
        "kind": entry.kind,
        "turn": entry.turn,
        "at": entry.at.isoformat(),
        "content": unstructure(entry.content, CONTENT_TYPES[entry.kind]),
    }
    if entry.outcome is not None:
        data["outcome"] = entry.outcome
    return data


def entry_from_data(data: Any) -> Entry:
    """
    The entry :func:`entry_to_data` wrote.

    Raises:
        SerializationError: *data* is not an entry (its ``path`` says where).
    """
    if not isinstance(data, Mapping) or data.get("kind") not in CONTENT_TYPES:
        kind = data.get("kind") if isinstance(data, Mapping) else None
        msg = f"not a history entry: kind {kind!r} is not one of {', '.join(ENTRY_KINDS)}"
        raise SerializationError(msg, path="$.kind")
    extra = set(data) - {"kind", "turn", "at", "content", "outcome"}
    if extra:
        name = min(extra)
        msg = f"a history entry has no field {name!r}"
        raise SerializationError(msg, path=f"$.{name}")
    content = _read_field(data, "content", CONTENT_TYPES[data["kind"]])
    at = _read_field(data, "at", datetime)
    turn = _read_field(data, "turn", int)
    outcome = data.get("outcome")
    try:
        return Entry(data["kind"], content, turn, at, outcome)
    except (TypeError, ValueError) as exc:
        field = getattr(exc, "argument", None)
        path = f"$.{field}" if field in {"kind", "turn", "at", "content", "outcome"} else "$"
        msg = f"{exc} at {path}"
        raise SerializationError(msg, path=path) from None


def _read_field(data: Mapping[str, Any], name: str, kind: Any) -> Any:
    """
    ``data[name]`` structured as *kind*; an error names its path in the whole entry.
    """
    try:
        return structure(data.get(name), kind)
    except SerializationError as exc:
        path = f"$.{name}{exc.path.removeprefix('$')}"
        problems = tuple((f"$.{name}{where.removeprefix('$')}", what) for where, what in exc.problems)
        text, marker = str(exc), f" at {exc.path}"
        cut = text.rfind(marker)
        if cut >= 0:
            text = f"{text[:cut]} at {path}{text[cut + len(marker) :]}"
        raise SerializationError(text, path=path, problems=problems) from None


HISTORY_ROOT = hashlib.sha256(b"workingctx/history/v1").hexdigest()
"""The chain digest of an empty history."""


def entry_text(entry: Entry) -> str:
    """
    The canonical JSON text of an entry (sorted keys, compact), as stores write it.

    Text that has no UTF-8 form (a lone surrogate) is written with ASCII escapes.
    """
    data = entry_to_data(entry)
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data, sort_keys=True, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text


def history_step(previous: str, text: str) -> str:
    """
    Extend a history's chain digest by one entry, given the entry's text.
    """
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return hashlib.sha256(f"{previous}:{digest}".encode("ascii")).hexdigest()


# -- JSON values -------------------------------------------------------------------------------
