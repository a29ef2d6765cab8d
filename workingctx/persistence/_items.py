"""
How a store writes messages and journal entries so that reading one back needs one sha256.

A message is keyed by its digest, the sha256 of :data:`~workingctx._canonical.MESSAGE_TAG`
and its canonical text (:func:`~workingctx._canonical.message_text`: compact
JSON, keys sorted); a journal entry by the sha256 of
:data:`~workingctx._canonical.ENTRY_TAG` and its canonical JSON. A store writes
exactly that text, so that a reader checks an item by hashing what it read and
comparing with the key, instead of building the item and encoding it again.

Sorting the keys loses the order of a payload's keys (tool arguments,
metadata, provider data, an entry's own keys), which is part of what a message
sends (an adapter writes arguments in their order). When an object's keys are
not in sorted order, the text is followed by a newline (which compact JSON
never holds) and the *layout*: a JSON array of ``[path, keys]`` pairs, each
giving the order of the keys of the object at *path* (keys and indexes from
the item's canonical data). The layout is not part of the digest (the order
never was), so it is bound to the item by the item's checksum, checked
whenever a layout is read.

A message whose canonical text has no UTF-8 form (a lone surrogate) or whose
digest hashes its other canonical form, and an entry whose canonical text
holds a tagged form, are written as ``to_json`` instead, as every item was
before: readers tell the two apart by the hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import attrs

from workingctx._canonical import canonical_json, message_data, message_text
from workingctx.frozen import (
    _INT_BOUND,
    _INT_LOW,
    EMPTY_JSON_OBJECT,
    FrozenDict,
    freeze_json,
    is_json_payload,
    seal_tree,
)
from workingctx.messages import ROLES, Message, ToolCall

SEPARATOR = "\n"
"""What separates an item's canonical text from its layout; compact JSON never holds it."""


def canonical_item(text: str, tag: str, key: str) -> bool:
    """
    Whether *text* (an item's text without its layout) is the canonical text
    its *key* hashes after *tag*: then it is exactly the text the key was made
    from, and nothing else needs encoding again to check it.
    """
    return hashlib.sha256((tag + text).encode("utf-8", "surrogatepass")).hexdigest() == key


def message_item(message: Message) -> str | None:
    """
    The text a store writes for *message*: its canonical text, and its layout
    when a payload's keys are not in sorted order; None when the message has
    no canonical text a database can hold (it is then written as ``to_json``).
    """
    data = message_data(message)
    text = message_text(message, data)
    if text is None or not holds_utf8(text):
        return None
    return _laid_out(text, layout(data, _is_payload))


def entry_item(entry: Any) -> str | None:
    """
    The text a store writes for a journal entry: its canonical text (and
    layout), when the entry is checked JSON data whose canonical text holds
    no tagged form (no key of :data:`~workingctx._canonical.MARKERS`, so that
    the text reads back as the entry itself); None otherwise (it is then
    written as ``to_json``, which also refuses an entry that is not JSON data).
    """
    if not is_json_payload(entry):
        return None
    text = canonical_json(entry)
    if TAGGED in text or not holds_utf8(text):
        return None
    return _laid_out(text, layout(entry, _any))


def _laid_out(text: str, found: list[list[Any]]) -> str:
    """
    *text*, followed by its layout *found* when there is one.
    """
    if not found:
        return text
    return text + SEPARATOR + json.dumps(found, ensure_ascii=False, separators=(",", ":"))


TAGGED = '"__'
"""
What canonical text holds wherever it has a tagged form (every marker starts
so); plain data may hold it too, and is then written and read the slow way.
"""


def build_entry(data: Any, _digest: str) -> Any:
    """
    The journal entry of parsed canonical text: the data, checked and frozen
    as :meth:`~workingctx.journal.MutationJournal.record` does.

    Raises:
        PayloadError: The data is not JSON data an entry can hold.
    """
    return freeze_parsed(data, "journal entry")


def _any(_node: dict[Any, Any]) -> bool:
    return True


def holds_utf8(text: str) -> bool:
    """
    Whether *text* has a UTF-8 form (no lone surrogate), which a database needs.
    """
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_payload(node: dict[Any, Any]) -> bool:
    # In a message's canonical data, the objects a message holds are frozen;
    # the data and the records of its blocks and calls are plain dicts made
    # from fields, whose order nothing keeps.
    return type(node) is FrozenDict


def layout(data: Any, payload: Callable[[dict[Any, Any]], bool]) -> list[list[Any]]:
    """
    ``[path, keys]`` for every object in *data* for which *payload* holds and
    whose keys are not in sorted order (the order canonical text gives them).
    """
    found: list[list[Any]] = []

    def walk(node: Any, path: list[Any]) -> None:
        if isinstance(node, dict):
            if payload(node):
                keys = list(node)
                if keys != sorted(keys):
                    found.append([path, keys])
            for key, item in node.items():
                if isinstance(item, dict | list | tuple):
                    walk(item, [*path, key])
        elif isinstance(node, list | tuple):
            for index, item in enumerate(node):
                if isinstance(item, dict | list | tuple):
                    walk(item, [*path, index])

    walk(data, [])
    return found


class LayoutError(ValueError):
    """
    A layout that does not describe the data it was read with.
    """


def apply_layout(data: Any, found: Any) -> Any:
    """
    *data* (parsed canonical text) with the objects *found* names put back in
    their order: only the order changes, never a key or a value.

    Raises:
        LayoutError: *found* is not a layout of *data*.
    """
    if type(found) is not list:
        raise LayoutError
    try:
        for entry in found:
            path, keys = entry
            parent: Any = None
            node = data
            for step in path:
                if not (type(step) is str if type(node) is dict else type(step) is int and step >= 0):
                    raise LayoutError
                parent, node = node, node[step]
            if type(node) is not dict or type(keys) is not list or len(keys) != len(node):
                raise LayoutError
            ordered = {key: node[key] for key in keys if type(key) is str}
            if len(ordered) != len(node):
                raise LayoutError
            if parent is None:
                data = ordered
            else:
                parent[path[-1]] = ordered
    except (KeyError, IndexError, TypeError, ValueError):
        raise LayoutError from None
    return data


def root_order(found: Any) -> tuple[str, ...] | None:
    """
    The key order a layout gives when it orders the item's own keys only
    (``[[[], keys]]``, keys distinct strs), for :func:`apply_order`; None for
    any other layout.
    """
    if type(found) is not list or len(found) != 1:
        return None
    entry = found[0]
    if type(entry) is not list or len(entry) != 2 or entry[0] != [] or type(entry[1]) is not list:
        return None
    keys = entry[1]
    if not all(type(key) is str for key in keys) or len(set(keys)) != len(keys):
        return None
    return tuple(keys)


def apply_order(data: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    """
    ``apply_layout(data, [[[], list(keys)]])`` for the keys :func:`root_order` gives.

    Raises:
        LayoutError: *keys* are not the keys of *data*.
    """
    if type(data) is not dict or len(data) != len(keys):
        raise LayoutError
    try:
        return {key: data[key] for key in keys}
    except KeyError:
        raise LayoutError from None


# -- building values ---------------------------------------------------------------------


def freeze_parsed(data: Any, where: str) -> Any:
    """
    ``freeze_json(data, where)`` for data ``json.loads`` made: the same frozen
    value, made by :func:`~workingctx.frozen.seal_tree` in the one walk that
    checks it when it is a dict or a list. Anything else goes to
    ``freeze_json``, which also says what is wrong.

    Raises:
        PayloadError: As :func:`~workingctx.frozen.freeze_json`.
    """
    kind = type(data)
    if kind is dict or kind is list:
        sealed = seal_tree(data, where)
        if sealed is not None:
            return sealed
    return freeze_json(data, where)


# -- building messages -------------------------------------------------------------------

_new = object.__new__

_MESSAGE_FIELDS = (
    "role",
    "content",
    "name",
    "tool_call_id",
    "tool_calls",
    "id",
    "metadata",
    "usage",
    "delta",
    "provider_data",
    "_digest",
    "_token_counts",
    "_cache_shape",
)
_CALL_FIELDS = ("id", "name", "arguments", "arguments_json", "provider_data")

KNOWN = (
    tuple(field.name for field in attrs.fields(Message)) == _MESSAGE_FIELDS
    and tuple(field.name for field in attrs.fields(ToolCall)) == _CALL_FIELDS
)
"""Whether :func:`build_message` knows every field of a message and a call; when not, it builds nothing."""


def build_message(data: Any, digest: str) -> Message | None:
    """
    The message of parsed canonical data in the common shape (text content;
    any of name, tool call id, id, metadata, delta; tool calls of an id, a
    name and arguments; no provider data or usage), with its digest set to
    *digest*; None for any other shape, which the converter then builds.

    The checks are the constructor's for these fields: the role, the types,
    which roles may carry a call id or calls, and every payload through
    :func:`~workingctx.frozen.freeze_json`; a key the canonical text would not
    hold (a default written out, a key of no field) makes it None.

    Raises:
        PayloadError: A payload is not JSON data a message can hold.
    """
    if type(data) is not dict or not _MESSAGE_SLOTS or not _CALL_SLOTS:
        return None
    role = data.get("role")
    content = data.get("content")
    provider_data = data.get("provider_data")
    if type(role) is not str or role not in ROLES or type(content) is not str or type(provider_data) is not dict:
        return None
    if provider_data:
        return None
    size = len(data)
    if size == 3:  # role, content and no provider data: nothing else to read
        return _message(role, content, None, None, (), None, EMPTY_JSON_OBJECT, False, digest)  # noqa: FBT003  # delta
    if size < 6:
        usual = _usual(data, role, content, size, digest)
        if usual is not None:
            return usual
    count = 3
    name = data.get("name")
    if name is not None:
        if type(name) is not str:
            return None
        count += 1
    call_id = data.get("tool_call_id")
    if call_id is not None:
        if type(call_id) is not str or role != "tool":
            return None
        count += 1
    ident = data.get("id")
    if ident is not None:
        if not (type(ident) is str or (type(ident) is int and _INT_LOW < ident < _INT_BOUND)):
            return None
        count += 1
    metadata = data.get("metadata")
    if metadata is None:
        metadata = EMPTY_JSON_OBJECT
    elif type(metadata) is dict and metadata:
        metadata = freeze_parsed(metadata, "metadata")
        count += 1
    else:
        return None
    delta = False
    if "delta" in data:
        if data["delta"] is not True:
            return None
        delta = True
        count += 1
    calls: tuple[ToolCall, ...] = ()
    found = data.get("tool_calls")
    if found is not None:
        if role != "assistant" or type(found) is not list or not found:
            return None
        made = _calls(found)
        if made is None:
            return None
        calls = made
        count += 1
    if size != count:
        return None
    return _message(role, content, name, call_id, calls, ident, metadata, delta, digest)


def _usual(data: dict[str, Any], role: str, content: str, size: int, digest: str) -> Message | None:
    """
    :func:`build_message` for the two other common shapes, whose keys their
    size and two reads tell: a tool result with a name, and an assistant turn
    of tool calls; None for any other data, which the general path then reads.
    """
    if size == 5 and role == "tool":
        name = data.get("name")
        call_id = data.get("tool_call_id")
        if type(name) is str and type(call_id) is str:
            return _message(role, content, name, call_id, (), None, EMPTY_JSON_OBJECT, False, digest)  # noqa: FBT003
    elif size == 4 and role == "assistant":
        found = data.get("tool_calls")
        calls = _calls(found) if type(found) is list and found else None
        if calls is not None:
            return _message(role, content, None, None, calls, None, EMPTY_JSON_OBJECT, False, digest)  # noqa: FBT003
    return None


def _slot_setters(cls: type[Any], names: tuple[str, ...]) -> tuple[Callable[[Any, Any], None], ...]:
    """
    The setters of *cls*'s slots *names* (its member descriptors', which a
    frozen class's own ``__setattr__`` refuses to use); empty when one is not a slot.
    """
    descriptors = [cls.__dict__.get(name) for name in names]
    if not KNOWN or not all(type(found).__name__ == "member_descriptor" for found in descriptors):
        return ()
    return tuple(found.__set__ for found in descriptors)  # type: ignore[union-attr]  # member descriptors


_MESSAGE_SLOTS = _slot_setters(Message, (*_MESSAGE_FIELDS, "_attrs_cached_hash"))
_CALL_SLOTS = _slot_setters(ToolCall, (*_CALL_FIELDS, "_attrs_cached_hash"))


def _message(
    role: str,
    content: str,
    name: str | None,
    call_id: str | None,
    calls: tuple[ToolCall, ...],
    ident: str | int | None,
    metadata: FrozenDict,
    delta: bool,
    digest: str,
) -> Message:
    (
        set_role,
        set_content,
        set_name,
        set_call_id,
        set_calls,
        set_id,
        set_metadata,
        set_usage,
        set_delta,
        set_provider_data,
        set_digest,
        set_counts,
        set_shape,
        set_hash,
    ) = _MESSAGE_SLOTS
    message = _new(Message)
    set_role(message, role)
    set_content(message, content)
    set_name(message, name)
    set_call_id(message, call_id)
    set_calls(message, calls)
    set_id(message, ident)
    set_metadata(message, metadata)
    set_usage(message, None)
    set_delta(message, delta)
    set_provider_data(message, EMPTY_JSON_OBJECT)
    set_digest(message, digest)
    set_counts(message, None)
    set_shape(message, None)
    set_hash(message, None)
    return message


def _calls(found: list[Any]) -> tuple[ToolCall, ...] | None:
    set_id, set_name, set_arguments, set_arguments_json, set_provider_data, set_hash = _CALL_SLOTS
    calls: list[ToolCall] = []
    for data in found:
        if type(data) is not dict or len(data) != 3:
            return None
        call_id = data.get("id")
        name = data.get("name")
        arguments = data.get("arguments")
        if type(call_id) is not str or not call_id or type(name) is not str or not name or type(arguments) is not dict:
            return None
        call = _new(ToolCall)
        set_id(call, call_id)
        set_name(call, name)
        set_arguments(call, freeze_parsed(arguments, "arguments"))
        set_arguments_json(call, None)
        set_provider_data(call, EMPTY_JSON_OBJECT)
        set_hash(call, None)
        calls.append(call)
    return tuple(calls)
