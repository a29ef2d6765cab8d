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
    from workingctx.messages import Message
    from workingctx.prefix import PrefixContext

__all__ = ["EMPTY_CHAIN", "canonical", "canonical_json", "chain_step", "message_digest", "prefix_digest"]

EMPTY_CHAIN = hashlib.sha256(b"workingctx/chain/v1").hexdigest()
"""The chain digest of an empty transcript."""


def canonical(value: Any) -> Any:
    """
    Turn *value* into plain JSON data: attrs values become objects of their
    public fields (plus ``type`` for content blocks), sets become sorted lists.
    """
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, dict):
        return {str(key): canonical(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [canonical(item) for item in value]
    if isinstance(value, set | frozenset):
        return sorted((canonical(item) for item in value), key=_sort_key)
    if attrs.has(type(value)):
        out = {
            field.name: canonical(getattr(value, field.name))
            for field in attrs.fields(type(value))
            if not field.name.startswith("_")
        }
        tag = getattr(type(value), "type", None)
        if isinstance(tag, str):
            out["type"] = tag
        return out
    # A user object inside a payload: its repr is the only stable thing we know.
    return {"__repr__": repr(value)}


def _sort_key(item: Any) -> str:
    return json.dumps(item, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _default(value: Any) -> Any:
    # json.dumps calls this for what it cannot encode: sets, attrs values, user objects.
    return canonical(value)


_encode = json.JSONEncoder(
    sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_default, check_circular=False
).encode


def canonical_json(value: Any) -> str:
    """
    Compact, key-sorted JSON text of ``canonical(value)``.

    Plain JSON data is encoded in one C-level ``json`` call; only what it
    cannot encode (sets, attrs values, user objects, mixed key types) takes
    the slower path through :func:`canonical`.
    """
    try:
        return _encode(value)
    except (TypeError, ValueError):
        return _encode(canonical(value))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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
        data["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls]
    if message.id is not None:
        data["id"] = message.id
    if message.metadata:
        data["metadata"] = message.metadata
    if message.usage is not None:
        data["usage"] = canonical(message.usage)
    if message.delta:
        data["delta"] = True
    return _sha256("message:" + _encode(data))


def prefix_digest(prefix: PrefixContext) -> str:
    """
    The stable digest of a prefix.
    """
    return _sha256("prefix:" + canonical_json(prefix))


def chain_step(previous: str, message: Message) -> str:
    """
    Extend a transcript's chain digest by one message.

    The chain digest after n messages identifies those n messages in order,
    so two transcripts share their first k messages exactly when their chain
    digests at k agree.
    """
    return hashlib.sha256(f"{previous}:{message.digest()}".encode("ascii")).hexdigest()
