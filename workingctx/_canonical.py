"""
Canonical encoding and stable digests.

A digest is the hex sha256 of compact JSON with sorted keys, built only from a
value's fields (never from ``hash()`` or ``repr()``), so it is the same in every
process, on every machine and under every ``PYTHONHASHSEED``.

The encoding identifies a value exactly: two values with one encoding are the
same value, with the same types (``1``, ``1.0`` and ``True`` encode three ways).
Digest equality is therefore stricter than Python equality, which counts
``1 == 1.0 == True``.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import enum
import hashlib
import json
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from workingctx.exceptions import PayloadTypeError
from workingctx.frozen import (
    _INT_BOUND,
    _INT_LOW,
    MAX_DEPTH,
    FrozenDict,
    FrozenList,
    _Refused,
    _too_deep,
)

if TYPE_CHECKING:
    from workingctx.messages import Message
    from workingctx.prefix import PrefixContext

__all__ = [
    "EMPTY_CHAIN",
    "EMPTY_ENTRIES",
    "ENTRY_TAG",
    "MARKERS",
    "MESSAGE_TAG",
    "canonical",
    "canonical_json",
    "chain_step",
    "entries_digest",
    "entry_digest",
    "json_str",
    "message_data",
    "message_digest",
    "message_text",
    "note_json",
    "notes_json",
    "prefix_digest",
]

EMPTY_CHAIN = hashlib.sha256(b"workingctx/chain/v1").hexdigest()
"""The chain digest of an empty transcript."""

MARKERS: frozenset[str] = frozenset(
    {
        "__attrs__",
        "__bytes__",
        "__dataclass__",
        "__date__",
        "__datetime__",
        "__decimal__",
        "__enum__",
        "__float__",
        "__int__",
        "__mapping__",
        "__model__",
        "__set__",
        "__time__",
        "__timedelta__",
        "__uuid__",
    }
)
"""The keys of the canonical encoding's tagged forms; a dict of yours using one is escaped."""


def canonical(value: Any, where: str = "the value") -> Any:
    """
    Turn *value* into plain JSON data that identifies it exactly.

    Different values encode differently, even where Python counts them equal:

    * JSON data stays as it is: ``1``, ``1.0`` and ``True`` are three encodings;
      lists and tuples are arrays (payloads hold no tuples: they freeze to lists);
    * a dict with str keys is an object, unless a key is one of :data:`MARKERS`:
      such a dict, and any dict with a key that is not a str, becomes
      ``{"__mapping__": [[key, value], ...]}``, sorted;
    * sets and frozensets become ``{"__set__": [...]}``, sorted;
    * a float that is not finite and an int too long for ``str()`` are tagged
      (``__float__``, ``__int__``);
    * enums, datetimes, dates, times, timedeltas, UUIDs, Decimals and bytes are
      tagged with their exact text; attrs classes, dataclasses and objects
      with ``model_dump()`` are tagged with their class's import path and
      their fields (or the dump).

    Nothing depends on the process: no ``repr()``, no ``hash()``, no ids.

    Raises:
        PayloadTypeError: Something in *value* has none of these forms (an
            object of your own); the message names its path from *where* and
            how to make it encodable.
        PayloadError: *value* nests deeper than :data:`~workingctx.frozen.MAX_DEPTH`
            levels, or contains itself.
    """
    try:
        return _canon(value, MAX_DEPTH)
    except _Refused as exc:
        raise exc.error(where) from None


def _class_path(cls: type[Any]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _canon(value: Any, room: int) -> Any:
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return value
    if kind is int:
        return value if _INT_LOW < value < _INT_BOUND else {"__int__": hex(value)}
    if kind is float:
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if kind is dict or kind is FrozenDict:
        return _canon_mapping(value, room)
    if kind is list or kind is FrozenList or kind is tuple:
        return _canon_items(value, room)
    if isinstance(value, Mapping):
        return _canon_mapping(value, room)
    if isinstance(value, list | tuple):
        return _canon_items(value, room)
    if isinstance(value, set | frozenset):
        if room < 1:
            raise _too_deep(value)
        members = []
        for item in value:
            try:
                members.append(_canon(item, room - 1))
            except _Refused as exc:
                raise exc.step(value, f"{{{item!r}}}") from None
        return {"__set__": sorted(members, key=_sort_key)}
    return _canon_object(value, room)


_SIMPLE: frozenset[type[Any]] = frozenset({str, bool, type(None)})
"""Leaves that are their own canonical form, taken without a call."""


def _canon_mapping(value: Mapping[Any, Any], room: int) -> Any:
    if room < 1:
        raise _too_deep(value)
    inner = room - 1
    simple = _SIMPLE
    bound = _INT_BOUND
    floor = _INT_LOW
    if MARKERS.isdisjoint(value):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                break  # written as pairs, below
            kind = type(item)
            if kind in simple or (kind is int and floor < item < bound):
                out[key] = item
                continue
            try:
                out[key] = _canon(item, inner)
            except _Refused as exc:
                raise exc.step(value, f"[{key!r}]") from None
        else:
            return out
    pairs = []
    for key, item in value.items():
        try:
            pairs.append([_canon(key, inner), _canon(item, inner)])
        except _Refused as exc:
            raise exc.step(value, f"[{key!r}]") from None
    return {"__mapping__": sorted(pairs, key=_sort_key)}


def _canon_items(value: Sequence[Any], room: int) -> list[Any]:
    if room < 1:
        raise _too_deep(value)
    inner = room - 1
    simple = _SIMPLE
    bound = _INT_BOUND
    floor = _INT_LOW
    items: list[Any] = []
    append = items.append
    for item in value:
        kind = type(item)
        if kind in simple or (kind is int and floor < item < bound):
            append(item)
            continue
        try:
            append(_canon(item, inner))
        except _Refused as exc:
            raise exc.step(value, f"[{len(items)}]") from None
    return items


def _canon_object(value: Any, room: int) -> Any:
    kind = type(value)
    if isinstance(value, enum.Enum):
        return {"__enum__": [_class_path(kind), value.name]}
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return _canon(int(value), room)
    if isinstance(value, float):
        return _canon(float(value), room)
    if isinstance(value, dt.datetime):
        return {"__datetime__": value.isoformat()}
    if isinstance(value, dt.date):
        return {"__date__": value.isoformat()}
    if isinstance(value, dt.time):
        return {"__time__": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {"__timedelta__": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, uuid.UUID):
        return {"__uuid__": str(value)}
    if isinstance(value, decimal.Decimal):
        return {"__decimal__": str(value)}
    if isinstance(value, bytes | bytearray):
        return {"__bytes__": base64.b64encode(value).decode("ascii")}
    if room < 1:
        raise _too_deep(value)
    if attrs.has(kind):
        names = [field.name for field in attrs.fields(kind) if not field.name.startswith("_")]
        return {"__attrs__": [_class_path(kind), _canon_fields(value, names, room)]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = [field.name for field in dataclasses.fields(value)]
        return {"__dataclass__": [_class_path(kind), _canon_fields(value, names, room)]}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return {"__model__": [_class_path(kind), _canon(dump(), room - 1)]}
        except _Refused as exc:
            raise exc.step(value, ".model_dump()") from None
    msg = (
        f"is {_show(value)}, which has no canonical form, so nothing process-independent identifies it; "
        "make it an attrs class, a dataclass or an enum, give it a model_dump() method, "
        "or store a plain-data projection of it (a dict of its fields)"
    )
    raise _Refused(msg, kind=PayloadTypeError)


def _canon_fields(value: Any, names: list[str], room: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        try:
            out[name] = _canon(getattr(value, name), room - 1)
        except _Refused as exc:
            raise exc.step(value, f".{name}") from None
    return out


def _show(value: object) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} of type {type(value).__name__}"


def _sort_key(item: Any) -> str:
    return json.dumps(item, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


json_str: Callable[[str], str] = json.encoder.encode_basestring  # the C function, as JSONEncoder uses it
"""A str as JSON, exactly as the encoder below writes it (``ensure_ascii=False``)."""

_encode = json.JSONEncoder(
    sort_keys=True, ensure_ascii=False, separators=(",", ":"), check_circular=False, allow_nan=False
).encode


def canonical_json(value: Any, where: str = "the value") -> str:
    """
    Compact, key-sorted JSON text of ``canonical(value)``.
    """
    return _encode(canonical(value, where))


def note_json(key: str, value: Any) -> str:
    """
    The canonical JSON of one note's value, as :func:`notes_json` writes it under *key*.

    Raises:
        PayloadTypeError: The value has no canonical form; the message names the note's key.
    """
    try:
        return _encode(_canon(value, MAX_DEPTH))
    except _Refused as exc:
        where = f"note {key!r}"
        raise exc.error(where) from None


def notes_json(notes: Mapping[str, Any]) -> str:
    """
    The canonical JSON of a scratchpad: an object of each note's canonical form.

    Raises:
        PayloadTypeError: A note has no canonical form; the message names its key.
    """
    out: dict[str, Any] = {}
    for key, value in notes.items():
        try:
            out[key] = _canon(value, MAX_DEPTH)
        except _Refused as exc:
            where = f"note {key!r}"
            raise exc.error(where) from None
    return _encode(out)


def _sha256(text: str) -> str:
    # surrogatepass: a lone surrogate (a streamed emoji cut in half) is still hashable text
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


_FIELD_NAMES: dict[type[Any], tuple[str, ...]] = {}


def _field_names(cls: type[Any]) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = tuple(field.name for field in attrs.fields(cls) if not field.name.startswith("_"))
        _FIELD_NAMES[cls] = names
    return names


def _record(value: Any) -> dict[str, Any]:
    """
    A value inside a message (a block, a media or annotation reference, usage)
    as an object of its public fields, plus ``type`` for a tagged block.
    Payload fields are JSON data already (checked when the value was built).
    """
    cls = type(value)
    out = {name: _field(getattr(value, name)) for name in _field_names(cls)}
    tag = getattr(cls, "type", None)
    if type(tag) is str:
        out["type"] = tag
    return out


_PLAIN: frozenset[type[Any]] = frozenset({str, int, float, bool, type(None)})
"""The types of the field values a digest encodes as they are, told without a call."""

_RECORDS: dict[type[Any], bool] = {}
"""Whether each type met in a field is an attrs class, encoded by its fields (``attrs.has``, asked once per type)."""


def _field(value: Any) -> Any:
    cls = type(value)
    if cls in _PLAIN:
        return value
    if cls is tuple:
        return [_field(item) for item in value]
    record = _RECORDS.get(cls)
    if record is None:
        record = _RECORDS[cls] = attrs.has(cls)
    return _record(value) if record else value


_MESSAGE_FIELDS = frozenset(
    {"role", "content", "name", "tool_call_id", "tool_calls", "id", "metadata", "usage", "delta"}
)


def message_data(message: Message) -> dict[str, Any]:
    """
    The data :func:`message_digest` encodes: every field a message is compared
    by, defaults left out, blocks and other values inside it as objects of
    their public fields. Payloads stay the message's own frozen values.
    """
    data: dict[str, Any] = {"role": message.role}
    content = message.content
    data["content"] = content if isinstance(content, str) else [_record(block) for block in content]
    if message.name is not None:
        data["name"] = message.name
    if message.tool_call_id is not None:
        data["tool_call_id"] = message.tool_call_id
    if message.tool_calls:
        data["tool_calls"] = [_call_data(c) for c in message.tool_calls]
    if message.id is not None:
        data["id"] = message.id  # an id is a str or an int, never a bool or a float
    if message.metadata:
        data["metadata"] = message.metadata
    if message.usage is not None:
        data["usage"] = _record(message.usage)
    if message.delta:
        data["delta"] = True
    names = _field_names(type(message))
    if len(names) != len(_MESSAGE_FIELDS):
        for name in names:  # fields added later: each by its own form
            if name not in _MESSAGE_FIELDS:
                data[name] = _field(getattr(message, name))
    return data


MESSAGE_TAG = "message:"
"""What :func:`message_digest` hashes before a message's :func:`message_text`."""


def message_text(message: Message, data: dict[str, Any] | None = None) -> str | None:
    """
    The canonical JSON text of a message (of its :func:`message_data`, or of
    *data* when given), the text its digest hashes after :data:`MESSAGE_TAG`;
    None when a field holds something beyond JSON data, whose digest then
    hashes its canonical form instead.
    """
    try:
        return _encode(message_data(message) if data is None else data)
    except (TypeError, ValueError):
        return None


def message_digest(message: Message) -> str:
    """
    The stable digest of one message, over every field it is compared by.

    Every field of a message is checked when it is built (payloads are JSON
    data, floats finite, nesting bounded), so the message is encoded in one
    ``json`` call (:func:`message_text`), in which ``1``, ``1.0`` and ``True``
    differ; defaults are left out.
    """
    data = message_data(message)
    try:
        return _sha256(MESSAGE_TAG + _encode(data))
    except (TypeError, ValueError):
        # A field holds something beyond JSON data (a value built around the checks):
        # its canonical form, under another tag so that the two encodings never meet.
        return _sha256("message/canonical:" + canonical_json({name: getattr(message, name) for name in data}))


def _call_data(call: Any) -> dict[str, Any]:
    # arguments and provider data are JSON data, checked when the call was built
    data = {"id": call.id, "name": call.name, "arguments": call.arguments}
    if call.arguments_json is not None:
        data["arguments_json"] = call.arguments_json
    if call.provider_data:
        data["provider_data"] = call.provider_data
    return data


def prefix_digest(prefix: PrefixContext) -> str:
    """
    The stable digest of a prefix: its fields, grounding messages by their digests.
    """
    data: dict[str, Any] = {}
    for name in _field_names(type(prefix)):
        value = getattr(prefix, name)
        if name == "grounding":
            data[name] = [message.digest() for message in value]
        else:
            data[name] = canonical(value, name)
    return _sha256("prefix/v2:" + _encode(data))


EMPTY_ENTRIES = hashlib.sha256(b"workingctx/journal-chain/v1").hexdigest()
"""The digest of an empty journal (the root of every journal's chain)."""


ENTRY_TAG = "journal-entry:"
"""What :func:`entry_digest` hashes before an entry's canonical JSON."""


def entry_digest(entry: Any, where: str = "journal entry") -> str:
    """
    The stable digest of one journal entry: stores keep each entry under it.
    """
    return _sha256(ENTRY_TAG + canonical_json(entry, where))


def entries_digest(entries: Sequence[Any], known: list[str] | None = None) -> str:
    """
    The stable digest of journal entries: a chain over each entry's digest
    (after n entries, the sha256 of the chain after n - 1, a colon and the
    entry's :func:`entry_digest`), the same chain stores link entries by.

    *known* holds the chain digests already computed for the first entries
    (entries are never rewritten); it is extended in place.
    """
    chain = [] if known is None else known
    previous = chain[-1] if chain else EMPTY_ENTRIES
    for entry in entries[len(chain) :]:
        previous = _sha256(f"{previous}:{entry_digest(entry, f'journal entry {len(chain)}')}")
        chain.append(previous)
    return chain[len(entries) - 1] if entries else EMPTY_ENTRIES


def chain_step(previous: str, message: Message) -> str:
    """
    Extend a transcript's chain digest by one message.

    The chain digest after n messages identifies those n messages in order,
    so two transcripts share their first k messages exactly when their chain
    digests at k agree.
    """
    return hashlib.sha256(f"{previous}:{message.digest()}".encode("ascii")).hexdigest()
