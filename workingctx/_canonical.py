"""
Canonical encoding and stable digests.

A digest is the hex sha256 of compact JSON with sorted keys, built only from a
value's fields (never from ``hash()``), so it is the same in every process, on
every machine and under every ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from collections.abc import Sequence

    from workingctx.messages import Message
    from workingctx.prefix import PrefixContext

__all__ = [
    "EMPTY_CHAIN",
    "EMPTY_ENTRIES",
    "canonical",
    "canonical_json",
    "chain_step",
    "entries_digest",
    "message_digest",
    "prefix_digest",
]

EMPTY_CHAIN = hashlib.sha256(b"workingctx/chain/v1").hexdigest()
"""The chain digest of an empty transcript."""


def canonical(value: Any) -> Any:
    """
    Turn *value* into plain JSON data in which values Python counts as equal
    encode the same, and values it counts as different do not.

    * ``True``/``False`` and integral floats become ints (``1 == 1.0 == True``);
    * lists and tuples become arrays (payloads hold no tuples: they freeze to lists);
    * sets become ``{"__set__": [...]}``, sorted;
    * a mapping with a key that is not a str becomes ``{"__mapping__": [[key, value], ...]}``, sorted;
    * attrs values become objects of their public fields, plus ``type`` for content blocks;
    * anything else (your own objects) becomes ``{"__repr__": repr(value)}``.
    """
    kind = type(value)
    if kind is str or kind is int or value is None:
        return value
    if kind is bool:
        return int(value)
    if kind is float:
        return int(value) if value.is_integer() else value
    if isinstance(value, dict):
        if all(type(key) is str for key in value):
            return {key: canonical(item) for key, item in value.items()}
        pairs = [[canonical(key), canonical(item)] for key, item in value.items()]
        return {"__mapping__": sorted(pairs, key=_sort_key)}
    if isinstance(value, list | tuple):
        return [canonical(item) for item in value]
    if isinstance(value, set | frozenset):
        return {"__set__": sorted((canonical(item) for item in value), key=_sort_key)}
    if isinstance(value, str):  # subclasses of the scalars, such as enums
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return canonical(float(value))
    if attrs.has(kind):
        out = {
            field.name: canonical(getattr(value, field.name))
            for field in attrs.fields(kind)
            if not field.name.startswith("_")
        }
        tag = getattr(kind, "type", None)
        if isinstance(tag, str):
            out["type"] = tag
        return out
    return {"__repr__": repr(value)}


def _sort_key(item: Any) -> str:
    return json.dumps(item, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


_encode = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), check_circular=False).encode


def canonical_json(value: Any) -> str:
    """
    Compact, key-sorted JSON text of ``canonical(value)``.
    """
    return _encode(canonical(value))


def _sha256(text: str) -> str:
    # surrogatepass: a lone surrogate (a streamed emoji cut in half) is still hashable text
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def message_digest(message: Message) -> str:
    """
    The stable digest of one message, over every field it is compared by.

    Payloads (tool arguments, metadata) are dicts and lists already, so the
    message is encoded in one ``json`` call; defaults are left out.
    """
    data: dict[str, Any] = {"role": message.role}
    content = message.content
    data["content"] = content if isinstance(content, str) else [canonical(block) for block in content]
    if message.name is not None:
        data["name"] = message.name
    if message.tool_call_id is not None:
        data["tool_call_id"] = message.tool_call_id
    if message.tool_calls:
        data["tool_calls"] = [_call_data(c) for c in message.tool_calls]
    if message.id is not None:
        data["id"] = message.id  # an id is a str or an int, never a bool or a float
    if message.metadata:
        data["metadata"] = canonical(message.metadata)
    if message.usage is not None:
        data["usage"] = canonical(message.usage)
    if message.delta:
        data["delta"] = True
    if message.provider_data:
        data["provider_data"] = canonical(message.provider_data)
    return _sha256("message:" + _encode(data))


def _call_data(call: Any) -> dict[str, Any]:
    data = {"id": call.id, "name": call.name, "arguments": canonical(call.arguments)}
    if call.arguments_json is not None:
        data["arguments_json"] = call.arguments_json
    if call.provider_data:
        data["provider_data"] = canonical(call.provider_data)
    return data


def prefix_digest(prefix: PrefixContext) -> str:
    """
    The stable digest of a prefix.
    """
    return _sha256("prefix:" + canonical_json(prefix))


EMPTY_ENTRIES = hashlib.sha256(b"workingctx/journal/v1").hexdigest()
"""The digest of an empty journal."""


def entries_digest(entries: Sequence[Any], known: list[str] | None = None) -> str:
    """
    The stable digest of journal entries, a chain over each entry's canonical JSON.

    *known* holds the chain digests already computed for the first entries
    (entries are never rewritten); it is extended in place.
    """
    chain = [] if known is None else known
    previous = chain[-1] if chain else EMPTY_ENTRIES
    for entry in entries[len(chain) :]:
        previous = _sha256(f"{previous}:{canonical_json(entry)}")
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
