"""
Serialization: every workingctx value to plain JSON data and back.

One preconfigured cattrs converter, :data:`converter`, handles every value of
the library (messages, tool calls, the thirteen content blocks, media and
annotation references, usage, prefixes, snapshots) and any other attrs class.
The functions here wrap it: :func:`unstructure` and :func:`structure` convert
to and from JSON-compatible data, :func:`to_json` and :func:`from_json` to and
from JSON text.

- Content blocks are written with a ``"type"`` tag (``"text"``, ``"image"``, ...)
  and read back through it.
- Fields left at their default value are omitted, so checkpoints stay compact.
- Private caches (a message's digest, its token counts) are never written.
- Frozen payloads (tool arguments, metadata, tool outputs, error data) are
  written as plain JSON objects and arrays and come back deep-frozen.
  A payload must be JSON data: str keys, and str, int, float, bool, None,
  lists and dicts as values. A tuple is written as an array and comes back as
  a (frozen) list.
- Reading data that is not a valid value raises
  :class:`~workingctx.exceptions.SerializationError`, and nothing else; its
  ``path`` names the first bad field and ``problems`` lists them all.

>>> from workingctx import Message, ToolCall
>>> from workingctx.serialization import from_json, to_json, unstructure
>>> message = Message.assistant(tool_calls=[ToolCall("c1", "lookup", {"q": "cert"})])
>>> unstructure(message)
{'role': 'assistant', 'tool_calls': [{'id': 'c1', 'name': 'lookup', 'arguments': {'q': 'cert'}}]}
>>> from_json(to_json(message), Message) == message
True
"""

from __future__ import annotations

import json
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Any, Literal, TypeVar, Union, cast, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import (
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from workingctx.exceptions import PayloadError, SerializationError, WorkingCtxError
from workingctx.frozen import _INT_BOUND, _INT_LOW, MAX_INT_DIGITS, FrozenDict, FrozenList, freeze_json
from workingctx.messages import BLOCK_TYPES, ContentBlock, Message

__all__ = ["converter", "from_json", "parse_json", "structure", "to_json", "unstructure"]

T = TypeVar("T")

_JSON_SCALARS = (str, int, float, bool, type(None))
_MAX_SHOWN = 60


class _Problem(Exception):  # noqa: N818  # internal: always turned into SerializationError
    """
    One problem found while structuring, with the path inside the value that
    raised it (``"[2]['a']"``), appended to the path where cattrs found it.
    """

    def __init__(self, description: str, suffix: str = "") -> None:
        super().__init__(description)
        self.description = description
        self.suffix = suffix


class _NotJSONError(Exception):
    """
    A leaf that JSON cannot hold was found while unstructuring.
    """


def _show(value: object) -> str:
    """
    A short ``repr`` of *value* with its type, for error messages.
    """
    text = repr(value)
    if len(text) > _MAX_SHOWN:
        text = text[: _MAX_SHOWN - 3] + "..."
    return f"{text} of type {type(value).__name__}"


def _type_name(kind: Any) -> str:
    return getattr(kind, "__name__", None) or repr(kind)


# -- payloads: JSON data, frozen on the way in ----------------------------------------


def _plain(value: Any) -> Any:
    """
    Unstructure a payload: frozen or plain JSON-like data to plain JSON data.
    """
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _NotJSONError
            out[key] = _plain(item)
        return out
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    raise _NotJSONError


def _not_json_reason(value: Any) -> str | None:
    """
    Why *value* (one level, not its children) cannot be a JSON payload, or None.
    """
    if value is None or isinstance(value, str | bool | int | float | dict | list | tuple):
        return None
    return (
        f"{_show(value)} is not JSON data; payloads (tool arguments, outputs, metadata, "
        "scratchpad values, journal entries) hold only str, int, float, bool, None, lists and "
        "dicts with str keys: store a plain-data projection of it instead"
    )


def _frozen_json(value: Any) -> Any:
    """
    Structure a payload: check it is JSON data and return it deep-frozen,
    with the same checks a value's constructor makes (:func:`~workingctx.frozen.freeze_json`).

    Raises:
        _Problem: with the path inside the payload of the first bad item.
    """
    try:
        return freeze_json(value, "")
    except PayloadError as exc:
        msg = f"the value {exc.problem}"
        raise _Problem(msg, exc.path) from None


def _structure_object(value: Any, _: Any) -> FrozenDict:
    if not isinstance(value, Mapping):
        msg = f"expected a JSON object, got {_show(value)}"
        raise _Problem(msg)
    return cast("FrozenDict", _frozen_json(value))


def _structure_array(value: Any, _: Any) -> FrozenList:
    if not isinstance(value, list | tuple):
        msg = f"expected a JSON array, got {_show(value)}"
        raise _Problem(msg)
    return cast("FrozenList", _frozen_json(value))


def _structure_any(value: Any, _: Any) -> Any:
    return _frozen_json(value)


# -- strict scalars -------------------------------------------------------------------


def _structure_str(value: Any, _: Any) -> str:
    if not isinstance(value, str):
        msg = f"expected a string, got {_show(value)}"
        raise _Problem(msg)
    return value


def _structure_int(value: Any, _: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        msg = f"expected an integer, got {_show(value)}"
        raise _Problem(msg)
    if not _INT_LOW < value < _INT_BOUND:
        msg = f"expected an integer of at most {MAX_INT_DIGITS} digits, got one of {value.bit_length()} bits"
        raise _Problem(msg)
    return value


def _structure_float(value: Any, _: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        msg = f"expected a number, got {_show(value)}"
        raise _Problem(msg)
    if isinstance(value, float) and not math.isfinite(value):
        msg = f"expected a finite number, got {value!r}; JSON has no NaN or infinity"
        raise _Problem(msg)
    if isinstance(value, int):
        return _structure_int(value, int)
    return value


def _structure_bool(value: Any, _: Any) -> bool:
    if not isinstance(value, bool):
        msg = f"expected true or false, got {_show(value)}"
        raise _Problem(msg)
    return value


def _structure_none(value: Any, _: Any) -> None:
    if value is not None:
        msg = f"expected null, got {_show(value)}"
        raise _Problem(msg)


_SCALAR_HOOKS: dict[Any, Callable[[Any, Any], Any]] = {
    str: _structure_str,
    int: _structure_int,
    float: _structure_float,
    bool: _structure_bool,
    type(None): _structure_none,
}


_SCALAR_NAMES: dict[Any, str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}


def _is_union(kind: Any) -> bool:
    return get_origin(kind) in {Union, types.UnionType}


def _is_scalar_union(kind: Any) -> bool:
    return _is_union(kind) and all(arg in _SCALAR_HOOKS for arg in get_args(kind))


def _scalar_union_hook(kind: Any) -> Callable[[Any, Any], Any]:
    allowed = get_args(kind)
    names = " or ".join(_SCALAR_NAMES[arg] for arg in allowed)

    def structure_scalar_union(value: Any, _: Any) -> Any:
        for arg in allowed:
            try:
                return _SCALAR_HOOKS[arg](value, arg)
            except _Problem:
                continue
        msg = f"expected {names}, got {_show(value)}"
        raise _Problem(msg)

    return structure_scalar_union


def _is_literal(kind: Any) -> bool:
    return get_origin(kind) is Literal


def _literal_hook(kind: Any) -> Callable[[Any, Any], Any]:
    allowed = get_args(kind)
    choices = ", ".join(repr(choice) for choice in allowed)

    def structure_literal(value: Any, _: Any) -> Any:
        for choice in allowed:
            if type(value) is type(choice) and value == choice:
                return choice
        msg = f"expected one of {choices}, got {_show(value)}"
        raise _Problem(msg)

    return structure_literal


# -- tuples ---------------------------------------------------------------------------


def _is_tuple(kind: Any) -> bool:
    return kind is tuple or get_origin(kind) is tuple


def _tuple_structure_hook(kind: Any) -> Callable[[Any, Any], Any]:
    args = get_args(kind)
    variadic = not args or (len(args) == 2 and args[1] is Ellipsis)
    if variadic:
        item_type = args[0] if args else Any
        item_hook = converter.get_structure_hook(item_type)

        def structure_tuple(value: Any, _: Any) -> tuple[Any, ...]:
            if not isinstance(value, list | tuple):
                msg = f"expected an array, got {_show(value)}"
                raise _Problem(msg)
            return _structure_items(kind, ((item_type, item_hook, item) for item in value))

        return structure_tuple

    hooks = [(arg, converter.get_structure_hook(arg)) for arg in args]

    def structure_fixed_tuple(value: Any, _: Any) -> tuple[Any, ...]:
        if not isinstance(value, list | tuple):
            msg = f"expected an array, got {_show(value)}"
            raise _Problem(msg)
        if len(value) != len(hooks):
            msg = f"expected an array of {len(hooks)} items, got {len(value)}: {_show(value)}"
            raise _Problem(msg)
        return _structure_items(kind, ((t, hook, item) for (t, hook), item in zip(hooks, value, strict=True)))

    return structure_fixed_tuple


def _structure_items(kind: Any, items: Iterable[tuple[Any, Callable[[Any, Any], Any], Any]]) -> tuple[Any, ...]:
    """
    Structure each ``(type, hook, value)`` of a tuple, collecting every failure
    with its index so all of them are reported, each with its path.
    """
    out: list[Any] = []
    errors: list[Exception] = []
    for index, (item_type, hook, item) in enumerate(items):
        try:
            out.append(hook(item, item_type))
        except Exception as exc:  # noqa: BLE001  # collected, reported with its index
            exc.add_note(IterableValidationNote(f"Structuring {kind} @ index {index}", index, item_type))
            errors.append(exc)
    if errors:
        msg = f"While structuring {_type_name(kind)}"
        raise IterableValidationError(msg, errors, kind)
    return tuple(out)


def _is_set(kind: Any) -> bool:
    return kind in {set, frozenset} or get_origin(kind) in {set, frozenset, AbstractSet}


def _set_structure_hook(kind: Any) -> Callable[[Any, Any], Any]:
    args = get_args(kind)
    variadic: Any = tuple
    items = _tuple_structure_hook(variadic[args[0], ...] if args else tuple)
    build = set if get_origin(kind) is set or kind is set else frozenset

    def structure_set(value: Any, _: Any) -> Any:
        return build(items(value, kind))

    return structure_set


def _set_unstructure_hook(kind: Any) -> Callable[[Any], Any]:
    args = get_args(kind)
    item_hook = converter.get_unstructure_hook(args[0]) if args else converter.unstructure

    def unstructure_set(value: Any) -> list[Any]:
        out = [item_hook(item) for item in value]
        try:
            return sorted(out)
        except TypeError:
            # Items of mixed types: order them by their JSON text, still deterministic.
            return sorted(out, key=lambda item: json.dumps(item, sort_keys=True, default=repr))

    return unstructure_set


def _tuple_unstructure_hook(kind: Any) -> Callable[[Any], Any]:
    args = get_args(kind)
    if not args:
        # A bare tuple (found at run time): each item by its own class.
        return lambda value: [converter.unstructure(item) for item in value]
    if len(args) == 2 and args[1] is Ellipsis:
        item_hook = converter.get_unstructure_hook(args[0])
        return lambda value: [item_hook(item) for item in value]
    hooks = [converter.get_unstructure_hook(arg) for arg in args]
    return lambda value: [hook(item) for hook, item in zip(hooks, value, strict=True)]


# -- attrs classes, tagged ------------------------------------------------------------


def _tag_of(cls: type[Any]) -> str | None:
    """
    The ``type`` tag of a class that carries one as a class variable (content blocks).
    """
    tag = getattr(cls, "type", None)
    if isinstance(tag, str) and "type" not in attrs.fields_dict(cls):
        return tag
    return None


def _private_fields(cls: type[Any]) -> dict[str, Any]:
    """
    Overrides that leave out every field whose name starts with ``_``: caches
    such as a message's digest are never written nor read.
    """
    return {field.name: override(omit=True) for field in attrs.fields(cls) if field.name.startswith("_")}


def _attrs_structure_hook(cls: type[Any]) -> Callable[[Any, Any], Any]:
    inner = make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=True, **_private_fields(cls))
    tag = _tag_of(cls)
    name = cls.__name__

    def structure_attrs(value: Any, _: Any) -> Any:
        if not isinstance(value, Mapping):
            msg = f"expected a JSON object for {name}, got {_show(value)}"
            raise _Problem(msg)
        if tag is not None and "type" in value:
            if value["type"] != tag:
                msg = f"expected type {tag!r} for {name}, got {_show(value['type'])}"
                raise _Problem(msg, ".type")
            value = {key: item for key, item in value.items() if key != "type"}
        return inner(value, cls)

    return structure_attrs


def _attrs_unstructure_hook(cls: type[Any]) -> Callable[[Any], Any]:
    inner = make_dict_unstructure_fn(cls, converter, _cattrs_omit_if_default=True, **_private_fields(cls))
    tag = _tag_of(cls)
    if tag is None:
        return inner

    def unstructure_tagged(value: Any) -> dict[str, Any]:
        return {"type": tag, **inner(value)}

    return unstructure_tagged


_BLOCKS_BY_TAG: dict[str, type[Any]] = {cast("str", _tag_of(cls)): cls for cls in BLOCK_TYPES}
_TAGS = ", ".join(repr(tag) for tag in _BLOCKS_BY_TAG)


def _structure_block(value: Any, _: Any) -> Any:
    if not isinstance(value, Mapping):
        msg = f"expected a content block (a JSON object with a 'type'), got {_show(value)}"
        raise _Problem(msg)
    if "type" not in value:
        msg = f"a content block needs a 'type', one of {_TAGS}"
        raise _Problem(msg, ".type")
    tag = value["type"]
    cls = _BLOCKS_BY_TAG.get(tag) if isinstance(tag, str) else None
    if cls is None:
        msg = f"unknown content block type {_show(tag)}; expected one of {_TAGS}"
        raise _Problem(msg, ".type")
    return converter.get_structure_hook(cls)(value, cls)


def _unstructure_block(value: Any) -> Any:
    return converter.unstructure(value)


def _structure_content(value: Any, _: Any) -> str | tuple[ContentBlock, ...]:
    if isinstance(value, str):
        return value
    if not isinstance(value, list | tuple):
        msg = f"expected a string or an array of content blocks, got {_show(value)}"
        raise _Problem(msg)
    return cast("tuple[ContentBlock, ...]", converter.get_structure_hook(tuple[ContentBlock, ...])(value, None))


def _unstructure_content(value: str | tuple[ContentBlock, ...]) -> Any:
    if isinstance(value, str):
        return value
    return [converter.unstructure(block) for block in value]


def _unstructure_datetime(value: datetime) -> str:
    return value.isoformat()


def _structure_datetime(value: Any, _: Any) -> datetime:
    if not isinstance(value, str):
        msg = f"expected an ISO 8601 date and time as a string, got {_show(value)}"
        raise _Problem(msg)
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        msg = f"expected an ISO 8601 date and time, got {_show(value)}"
        raise _Problem(msg) from None


def _make_converter() -> cattrs.Converter:
    made = cattrs.Converter(omit_if_default=True, forbid_extra_keys=True)
    for kind, hook in _SCALAR_HOOKS.items():
        made.register_structure_hook(kind, hook)
    made.register_structure_hook_func(lambda kind: kind is Any, _structure_any)
    made.register_unstructure_hook_func(lambda kind: kind is Any, _plain)
    made.register_structure_hook(datetime, _structure_datetime)
    made.register_unstructure_hook(datetime, _unstructure_datetime)
    made.register_structure_hook(FrozenDict, _structure_object)
    made.register_unstructure_hook(FrozenDict, _plain)
    made.register_structure_hook(FrozenList, _structure_array)
    made.register_unstructure_hook(FrozenList, _plain)
    made.register_structure_hook_factory(_is_scalar_union, _scalar_union_hook)
    made.register_structure_hook_factory(_is_literal, _literal_hook)
    made.register_structure_hook_factory(_is_tuple, _tuple_structure_hook)
    made.register_unstructure_hook_factory(_is_tuple, _tuple_unstructure_hook)
    made.register_structure_hook_factory(_is_set, _set_structure_hook)
    made.register_unstructure_hook_factory(_is_set, _set_unstructure_hook)
    made.register_structure_hook_factory(attrs.has, _attrs_structure_hook)
    made.register_unstructure_hook_factory(attrs.has, _attrs_unstructure_hook)
    block_union: Any = ContentBlock
    made.register_structure_hook_func(lambda kind: kind == block_union, _structure_block)
    made.register_unstructure_hook_func(lambda kind: kind == block_union, _unstructure_block)
    content = typing.get_type_hints(Message)["content"]
    made.register_structure_hook_func(lambda kind: kind == content, _structure_content)
    made.register_unstructure_hook_func(lambda kind: kind == content, _unstructure_content)
    return made


converter: cattrs.Converter = _make_converter()
"""
The one converter every workingctx value goes through.

Register hooks on it for types of your own; workingctx's stores use it too.
"""


# -- errors ---------------------------------------------------------------------------


def _describe(exc: BaseException, expected: Any) -> str:
    if isinstance(exc, _Problem):
        return exc.description
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, WorkingCtxError | TypeError | ValueError):
        return str(exc)
    if expected is not None:
        return f"expected {_type_name(expected)}: {type(exc).__name__}: {exc}"
    return f"{type(exc).__name__}: {exc}"


def _problems(exc: BaseException, path: str, expected: Any = None) -> list[tuple[str, str]]:
    """
    Flatten a cattrs validation error into ``(path, description)`` pairs, in field order.
    """
    if isinstance(exc, IterableValidationError):
        found: list[tuple[str, str]] = []
        with_notes, without = exc.group_exceptions()
        for sub, note in with_notes:
            found.extend(_problems(sub, f"{path}[{note.index!r}]", note.type))
        for sub in without:
            found.extend(_problems(sub, path))
        return found
    if isinstance(exc, ClassValidationError):
        found = []
        class_notes, others = exc.group_exceptions()
        for sub, attribute_note in class_notes:
            found.extend(_problems(sub, f"{path}.{attribute_note.name}", attribute_note.type))
        for sub in others:
            found.extend(_problems(sub, path))
        return found
    if isinstance(exc, ForbiddenExtraKeysError):
        fields = ", ".join(repr(name) for name in attrs.fields_dict(exc.cl) if not name.startswith("_"))
        return [
            (f"{path}.{key}", f"unknown field {key!r} for {exc.cl.__name__}; its fields are {fields}")
            for key in sorted(exc.extra_fields)
        ]
    if isinstance(exc, _Problem):
        return [(path + exc.suffix, exc.description)]
    return [(path, _describe(exc, expected))]


def _error(exc: BaseException, what: str) -> SerializationError:
    problems = tuple(_problems(exc, "$")) or (("$", _describe(exc, None)),)
    first_path, first = problems[0]
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    msg = f"cannot read {what}: {first} at {first_path}{more}"
    return SerializationError(msg, path=first_path, problems=problems)


def _leaf_path(value: Any, path: str, payload: bool, *, finite: bool = False) -> tuple[str, str] | None:
    """
    Find the first leaf of *value* that cannot be written as JSON (with
    *finite*, also the first NaN or infinite float, or int too long to write),
    as ``(path, reason)``.
    """
    if finite and isinstance(value, float) and not math.isfinite(value):
        return path, f"{value!r} is not a finite number; JSON has no NaN or infinity"
    if finite and isinstance(value, int) and not _INT_LOW < value < _INT_BOUND:
        return path, (
            f"an int of {value.bit_length()} bits is longer than {MAX_INT_DIGITS} decimal digits "
            "(Python's str() limit), so it cannot be written; store it as a string"
        )
    if payload:
        reason = _not_json_reason(value)
        if reason is not None:
            return path, reason
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path}[{key!r}]", f"key {_show(key)} is not a string; JSON object keys are strings"
            found = _leaf_path(item, f"{path}[{key!r}]", payload, finite=finite)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _leaf_path(item, f"{path}[{index}]", payload, finite=finite)
            if found is not None:
                return found
    elif attrs.has(type(value)):
        for field in attrs.fields(type(value)):
            if field.init:
                item = getattr(value, field.name)
                # a value or a tuple of them is structure; anything else in a field is a payload
                payload_field = not (attrs.has(type(item)) or type(item) is tuple)
                found = _leaf_path(item, f"{path}.{field.name}", payload=payload_field, finite=finite)
                if found is not None:
                    return found
    elif value is None or isinstance(value, str | bool | int | float):
        return None
    else:
        return path, _not_json_reason(value) or f"{_show(value)} is not JSON data"
    return None


# -- the functions ----------------------------------------------------------------------


def unstructure(value: Any, cls: Any = None) -> Any:
    """
    Turn a workingctx value into plain JSON-compatible data.

    Dicts have str keys; lists, strings, numbers, booleans and None are the
    only other values, so ``json.dumps`` takes the result as it is.

    Args:
        value: A message, block, prefix, snapshot, any attrs value, or a
            tuple or list of them.
        cls: Write *value* as this type instead of its own class; ``Any``
            writes it as a payload (JSON data only, nothing converted).

    Returns:
        Plain data: dicts, lists and scalars.

    Raises:
        SerializationError: A payload holds something JSON cannot (a set, a
            non-string key, an object of your own); ``path`` says where.

    >>> from workingctx import Message
    >>> from workingctx.messages import TextBlock
    >>> unstructure(Message("user", [TextBlock("hi")]))
    {'role': 'user', 'content': [{'type': 'text', 'text': 'hi'}]}
    """
    try:
        data = converter.unstructure(value) if cls is None else converter.unstructure(value, cls)
        return _plain(data)
    except _NotJSONError:
        found = _leaf_path(value, "$", payload=cls is Any) or ("$", f"{_show(value)} is not JSON data")
        msg = f"cannot write {type(value).__name__} as JSON: {found[1]} at {found[0]}"
        raise SerializationError(msg, path=found[0], problems=(found,)) from None


def structure(data: Any, cls: type[T]) -> T:
    """
    Build a value of type *cls* from plain data made by :func:`unstructure`.

    Args:
        data: Plain data, usually from ``json.loads``.
        cls: The type to build, such as ``Message`` or ``tuple[Message, ...]``.

    Returns:
        The value, equal to the one that was unstructured. Payloads come back
        deep-frozen.

    Raises:
        SerializationError: The data is not a valid *cls*: a missing required
            field, a wrong type, an unknown block ``type``, an unknown field.
            ``path`` is where the first problem is (``"$.content[1].media.url"``),
            ``problems`` lists every ``(path, description)`` found.

    >>> from workingctx import Message
    >>> structure({"role": "user", "content": "hi"}, Message)
    Message('user', 'hi')
    >>> structure({"role": "user", "content": 5}, Message)
    Traceback (most recent call last):
    ...
    workingctx.exceptions.SerializationError: cannot read Message: expected a string or an array ... at $.content
    """
    try:
        return converter.structure(data, cls)
    except SerializationError:
        raise
    except Exception as exc:  # noqa: BLE001  # every failure becomes the one documented error
        raise _error(exc, _type_name(cls)) from None


def to_json(value: Any, cls: Any = None, *, indent: int | None = None) -> str:
    """
    Write a workingctx value as JSON text.

    Args:
        value: Anything :func:`unstructure` takes.
        cls: Write *value* as this type, as in :func:`unstructure`.
        indent: Pretty-print with this indent; compact when None.

    Returns:
        JSON text (non-ASCII characters kept as they are).

    Raises:
        SerializationError: As :func:`unstructure`, or a float is NaN or
            infinite, or an int is longer than :data:`~workingctx.frozen.MAX_INT_DIGITS` digits.

    >>> from workingctx import Message
    >>> to_json(Message("user", "hi"))
    '{"role":"user","content":"hi"}'
    """
    data = unstructure(value, cls)
    separators = (",", ":") if indent is None else (",", ": ")
    try:
        return json.dumps(data, ensure_ascii=False, allow_nan=False, indent=indent, separators=separators)
    except ValueError:
        found = _leaf_path(value, "$", payload=False, finite=True) or (
            "$",
            "a number cannot be written (a NaN, an infinity, or an int too long)",
        )
        msg = f"cannot write {type(value).__name__} as JSON: {found[1]} at {found[0]}"
        raise SerializationError(msg, path=found[0], problems=(found,)) from None


def from_json(text: str | bytes, cls: type[T]) -> T:
    """
    Read a value of type *cls* from JSON text made by :func:`to_json`.

    Args:
        text: JSON text (str, or UTF-8 bytes).
        cls: The type to build.

    Returns:
        The value.

    Raises:
        SerializationError: The text is not JSON (``path`` is ``"$"`` and the
            message gives the line and column), nests too deep to parse, or
            is not a valid *cls* (a ``NaN`` or ``Infinity`` included: JSON
            has none, and no value holds one).

    >>> from workingctx import Message
    >>> from_json('{"role":"user","content":"hi"}', Message)
    Message('user', 'hi')
    """
    try:
        data = _loads(text)
    except SerializationError as exc:
        msg = f"cannot read {_type_name(cls)}: {exc}"
        raise SerializationError(msg, path=exc.path, problems=exc.problems) from None
    except _NumberError:
        path, problem = _number_problem(text)
        try:  # read as json.loads reads it, so that *cls* refuses the number naming where it is
            loose = json.loads(text, object_pairs_hook=_unique_pairs)
        except (ValueError, RecursionError):  # an int too long: the path in the text is all there is
            loose = _UNREAD
        if loose is not _UNREAD:
            structure(loose, cls)
        msg = f"cannot read {_type_name(cls)}: {problem}"
        raise SerializationError(msg, path=path) from None
    return structure(data, cls)


class _DuplicateKeyError(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(key)
            seen.add(key)
    return result


class _Pairs(list[tuple[str, Any]]):
    """An object read as its ``(key, value)`` pairs, to find where a key repeats."""


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]"


def _repeated(node: Any, path: str) -> str | None:
    """
    The path of the first key that repeats in an object of *node* (depth first).
    """
    stack: list[tuple[Any, str]] = [(node, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, _Pairs):
            seen: set[str] = set()
            for key, _ in item:
                if key in seen:
                    return _key_path(where, key)
                seen.add(key)
            stack.extend((value, _key_path(where, key)) for key, value in reversed(item))
        elif isinstance(item, list):
            stack.extend((value, f"{where}[{i}]") for i, value in reversed(list(enumerate(item))))
    return None


_UNREAD: Any = object()


class _NumberError(Exception):
    """
    A number in JSON text that no value can hold (found by the hooks below).
    """


def _no_constant(name: str) -> Any:
    raise _NumberError(name)


_INFINITIES = (math.inf, -math.inf)


def _finite_float(text: str) -> float:
    value = float(text)
    if value in _INFINITIES:
        raise _NumberError(text)
    return value


class _Number:
    """
    A number JSON text holds and no value can: stands in for it while its path is found.
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _mark_float(text: str) -> Any:
    value = float(text)
    return _Number(text) if value in _INFINITIES else value


def _mark_int(text: str) -> Any:
    try:
        return int(text)
    except ValueError:  # over Python's int-to-str limit
        return _Number(text)


def _number_problem(text: str | bytes) -> tuple[str, str]:
    """
    The path of the first number in *text* that no value can hold, and why.
    """
    data = json.loads(
        text, object_pairs_hook=_Pairs, parse_constant=_Number, parse_float=_mark_float, parse_int=_mark_int
    )
    stack: list[tuple[Any, str]] = [(data, "$")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, _Number):
            if item.text.lstrip("-").isdigit():
                digits = len(item.text.lstrip("-"))
                why = f"is an integer of {digits} digits, too long to read back and write; write it as a string"
            else:
                why = (
                    f"is {float(item.text)!r}, which JSON cannot hold (NaN, Infinity, or too large for a float); "
                    "write a finite number, a string or null"
                )
            return where, f"the number at {where} {why}"
        if isinstance(item, _Pairs):
            stack.extend((value, _key_path(where, key)) for key, value in reversed(item))
        elif isinstance(item, list):
            stack.extend((value, f"{where}[{i}]") for i, value in reversed(list(enumerate(item))))
    return "$", "the JSON text holds a number no value can hold"  # pragma: no cover  # the hooks found one


def parse_json(text: str | bytes) -> Any:
    """
    Parse JSON text to plain data, refusing an object that repeats a key
    (``json.loads`` would keep the last value silently) and a number no value
    can hold: ``NaN`` and ``Infinity`` (which are not JSON), a number too
    large for a float (``json.loads`` reads ``1e400`` as an infinity) and an
    int longer than :data:`~workingctx.frozen.MAX_INT_DIGITS` digits.

    Raises:
        SerializationError: The text is not JSON (the message gives the line
            and column), repeats a key or holds such a number (``path`` names
            where), or is nested deeper than Python's recursion limit.

    >>> parse_json('{"role": "user", "role": "system"}')
    Traceback (most recent call last):
    ...
    workingctx.exceptions.SerializationError: the JSON text repeats the key 'role' at $.role; ...
    >>> parse_json('{"score": NaN}')
    Traceback (most recent call last):
    ...
    workingctx.exceptions.SerializationError: the number at $.score is nan, which JSON cannot hold ...
    """
    try:
        return _loads(text)
    except _NumberError:
        path, msg = _number_problem(text)
        raise SerializationError(msg, path=path) from None


def _loads(text: str | bytes) -> Any:
    """
    :func:`parse_json`, with a number no value can hold raised as :class:`_NumberError`.
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=_no_constant, parse_float=_finite_float)
    except _DuplicateKeyError as exc:
        path = _repeated(json.loads(text, object_pairs_hook=_Pairs), "$") or "$"
        msg = f"the JSON text repeats the key {exc.key!r} at {path}; each key of an object may appear once"
        raise SerializationError(msg, path=path) from None
    except RecursionError:
        msg = "the JSON text is nested too deeply to read"
        raise SerializationError(msg, path="$") from None
    except _NumberError:
        raise
    except (ValueError, TypeError) as exc:
        if not isinstance(exc, json.JSONDecodeError) and "integer string conversion" in str(exc):
            raise _NumberError(str(exc)) from None
        msg = f"the text is not valid JSON ({exc})"
        raise SerializationError(msg, path="$") from None
