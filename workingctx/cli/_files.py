"""
Reading and writing transcript files for the command line: any adapter format
or workingctx's own JSON, detected; ``.jsonl`` files are logs of requests.

Every failure is an :class:`InputError` (or, writing, an :class:`OutputError`)
that names the file, the line and, where it can, the JSON path, so the command
line reports it in one line.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import attrs

from workingctx.adapters import anthropic, google, langchain, openai_chat, openai_responses
from workingctx.cli._output import STDIN, shown_path
from workingctx.context import WorkingContext
from workingctx.exceptions import SerializationError, WorkingCtxError
from workingctx.messages import Message
from workingctx.prefix import PrefixContext
from workingctx.serialization import structure, unstructure

__all__ = [
    "ADAPTERS",
    "FORMATS",
    "LOG_SUFFIXES",
    "PROVIDERS",
    "Document",
    "InputError",
    "OutputError",
    "UsageError",
    "call_item",
    "detect",
    "is_log",
    "load_context",
    "model_of",
    "places",
    "position",
    "read_file",
    "read_text",
    "readable",
    "require_messages",
    "to_context",
    "write_context",
    "write_text",
]

FORMATS: Final = ("workingctx", "openai_chat", "openai_responses", "anthropic", "google", "langchain")
"""
The file formats the command line reads: workingctx's own JSON, the adapters'
request bodies, and LangChain messages serialized (each message's
``model_dump()``, ``langchain_core.load.dumpd`` or ``messages_to_dict``).
"""

PROVIDERS: Final = {"openai_chat": "openai", "openai_responses": "openai", "anthropic": "anthropic", "google": "gemini"}
"""The provider whose rules a format's requests follow."""

ADAPTERS: Final[dict[str, ModuleType]] = {
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "anthropic": anthropic,
    "google": google,
    "langchain": langchain,
}
"""The adapter that reads, writes and checks each format's requests."""

MAX_FILE_BYTES: Final = 256 * 1024 * 1024
"""The largest transcript file the command line reads (256 MiB)."""


class InputError(WorkingCtxError, ValueError):
    """
    A transcript file that cannot be read: missing, not UTF-8, not JSON, or not a transcript.

    Attributes:
        path: The file.
        line: The line the problem is on (1 for a whole JSON document), or None.
        where: The JSON path of the offending value, or None.
        reason: What was wrong, and the fix when there is one.
    """

    def __init__(self, path: str, reason: str, *, line: int | None = None, where: str | None = None) -> None:
        self.path = path
        self.line = line
        self.where = where
        self.reason = reason
        place = shown_path(path) if line is None else f"{shown_path(path)}:{line}"
        super().__init__(f"{place}: {reason}" if where is None else f"{place}: {where}: {reason}")


class UsageError(Exception):
    """
    A command line that asks for something impossible (exit status 2).
    """


class OutputError(WorkingCtxError, OSError):
    """
    A file the command line cannot write (``-o``): a directory, a missing
    directory, no room or no permission. Nothing was changed.

    Attributes:
        path: The file.
        reason: What was wrong, and the fix when there is one.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{shown_path(path)}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.reason))


@attrs.frozen
class Document:
    """
    A transcript file read: its format and the requests it holds.

    Attributes:
        path: The file.
        format: One of :data:`FORMATS`.
        requests: One context for a JSON file; one per line for a ``.jsonl`` log.
        lines: The line each request starts on.
        payloads: The parsed JSON of each request, as the file holds it.
        models: The model each request names (see :func:`model_of`), or None.
        formats: The format of each request.
    """

    path: str
    format: str
    requests: tuple[WorkingContext, ...]
    lines: tuple[int, ...]
    payloads: tuple[Any, ...] = attrs.field(eq=False, repr=False)
    models: tuple[str | None, ...] = attrs.field(default=(), eq=False, repr=False)
    formats: tuple[str, ...] = attrs.field(default=(), eq=False, repr=False)

    @property
    def model(self) -> str | None:
        """
        The model the last request names, or None when it names none.
        """
        return self.models[-1] if self.models else None

    @property
    def provider(self) -> str | None:
        """
        The provider whose rules the file's requests follow, or None for workingctx JSON and LangChain messages.
        """
        return PROVIDERS.get(self.format)

    @property
    def last(self) -> WorkingContext:
        """
        The last request of the file (the only one of a JSON file).
        """
        return self.requests[-1]


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):  # a key came twice: name the first that did
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                msg = f"the key {key!r} appears twice in one object; keep one"
                raise ValueError(msg)
            seen.add(key)
    return out


def _no_constant(name: str) -> Any:
    msg = f"{name} is not JSON; write a number or null"
    raise ValueError(msg)


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        msg = (
            f"the number {text} is too large for a float (JSON readers give infinity); write a smaller one, or a string"
        )
        raise ValueError(msg)
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # over Python's int-to-str limit: it could not be written back either
        msg = f"an integer of {len(text.lstrip('-'))} digits is too long to read back and write; write it as a string"
        raise ValueError(msg) from None


def _parse(path: str, text: str, first_line: int) -> Any:
    try:
        return json.loads(
            text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant, parse_float=_float, parse_int=_int
        )
    except json.JSONDecodeError as exc:
        reason = f"not valid JSON: {exc.msg} (column {exc.colno})"
        if exc.msg == "Extra data" and exc.colno == 1 and not is_log(path):  # a second value starts a line
            reason += (
                "; the file holds one JSON value after another, as a log of requests does: "
                "name it .jsonl to read it as one, one request body per line"
            )
        raise InputError(path, reason, line=first_line + exc.lineno - 1) from None
    except RecursionError:
        msg = "JSON nested too deeply to be a transcript; no request nests that far"
        raise InputError(path, msg, line=first_line) from None
    except ValueError as exc:
        raise InputError(path, str(exc), line=first_line) from None


LOG_SUFFIXES: Final = (".jsonl", ".ndjson")
"""The names of the files that are logs of requests, one request body per line (JSON Lines, NDJSON), in any case."""


def is_log(path: str) -> bool:
    """
    Whether the file at *path* is a log of requests by its name (see :data:`LOG_SUFFIXES`).

    >>> is_log("requests.jsonl"), is_log("REQUESTS.NDJSON"), is_log("request.json")
    (True, True, False)
    """
    return path.lower().endswith(LOG_SUFFIXES)


def read_text(path: str) -> str:
    """
    The text of the transcript file at *path*, without a leading byte order
    mark: the one reader of the command line's files.

    *path* ``-`` reads standard input, named ``<stdin>`` in errors.

    Raises:
        InputError: The file is missing, not a regular file, over
            :data:`MAX_FILE_BYTES`, unreadable, not UTF-8 (naming the line
            and the byte), or standard input holds nothing.
    """
    raw = _stdin() if path == STDIN else _file_bytes(path)
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")  # a byte order mark: RFC 8259 lets readers ignore it
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        msg = f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start}; save the file as UTF-8"
        raise InputError(path, msg, line=line) from None


def _stdin() -> bytes:
    """
    The bytes of standard input, up to :data:`MAX_FILE_BYTES`.
    """
    try:
        raw = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
    except (AttributeError, OSError, ValueError) as exc:  # closed, or no byte stream behind it
        raise InputError(STDIN, f"cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise InputError(STDIN, f"over the {MAX_FILE_BYTES}-byte limit for a transcript file")
    if not raw.strip():
        msg = (
            "empty: pipe a request body into standard input (cat request.json | workingctx check -), "
            "or give the path of the file instead of -"
        )
        raise InputError(STDIN, msg)
    return raw


def _file_bytes(path: str) -> bytes:
    """
    The bytes of the file at *path*, up to :data:`MAX_FILE_BYTES`.
    """
    file = Path(path)
    try:
        if not file.is_file():
            reason = "no such file" if not file.exists() else "not a regular file"
            raise InputError(path, reason)
        size = file.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InputError(path, f"{size} bytes, over the {MAX_FILE_BYTES}-byte limit for a transcript file")
        return file.read_bytes()
    except OSError as exc:
        raise InputError(path, f"cannot be read: {exc.strerror or exc}") from None


def write_text(path: str, text: str) -> int:
    """
    Write *text* to the file at *path* as UTF-8, whole or not at all: the
    command line's one writer (``-o``). Returns the number of bytes written.

    A lone surrogate (which has no UTF-8 form) is written as its escape, such
    as ``\\ud800``: in JSON text that is the same string. A regular file is
    written to a temporary file beside it, synced, then renamed over it (so a
    failure or a killed process leaves the old file whole, with its
    permissions); a device or a pipe is written in place.

    Raises:
        OutputError: *path* is a directory, its directory is missing, or the
            file cannot be written (no room, no permission); nothing changed.
    """
    data = text.encode("utf-8", "backslashreplace")
    target = Path(os.path.realpath(path))
    try:
        found = target.stat()
    except FileNotFoundError:
        found = None
    except OSError as exc:
        raise OutputError(path, f"cannot be written: {exc.strerror or exc}") from None
    if found is not None and stat.S_ISDIR(found.st_mode):
        raise OutputError(path, "is a directory; give -o a file path")
    if found is not None and not stat.S_ISREG(found.st_mode):  # a device or a pipe: nothing to replace
        try:
            with target.open("wb") as out:
                out.write(data)
        except OSError as exc:
            raise OutputError(path, f"cannot be written: {exc.strerror or exc}") from None
        return len(data)
    if not target.parent.is_dir():
        raise OutputError(path, f"cannot be written: the directory {Path(path).parent} does not exist")
    temporary = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
    try:
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
    except OSError as exc:
        reason = f"cannot be written: {exc.strerror or exc}"
        if found is not None and isinstance(exc, PermissionError):
            reason += (
                f" (in its directory {target.parent}, where the new file is written before it replaces the old "
                "one whole); make the directory writable, or write to another"
            )
        raise OutputError(path, reason) from None
    try:
        try:
            if found is not None:
                os.fchmod(handle, stat.S_IMODE(found.st_mode))
            view = memoryview(data)
            while view:
                view = view[os.write(handle, view) :]
            os.fsync(handle)
        finally:
            os.close(handle)
        temporary.replace(target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        if isinstance(exc, OSError):
            raise OutputError(path, f"cannot be written: {exc.strerror or exc}") from None
        raise
    return len(data)


def _text(value: Any) -> str:
    """
    *value* if it is a string, else the empty string: what a ``type`` or a
    ``role`` names, compared with names without failing on a list or an
    object where a name belongs (the reader then names it, at its path).
    """
    return value if isinstance(value, str) else ""


def _anthropic_blocks(messages: Sequence[Any]) -> bool:
    return any(
        isinstance(block, Mapping) and _text(block.get("type")) in {"tool_use", "tool_result", "thinking"}
        for message in messages
        if isinstance(message, Mapping) and isinstance(message.get("content"), list)
        for block in message["content"]
    )


def _workingctx_calls(messages: Sequence[Any]) -> bool:
    return any(
        isinstance(call, Mapping) and "name" in call and "function" not in call
        for message in messages
        if isinstance(message, Mapping) and isinstance(message.get("tool_calls"), list)
        for call in message["tool_calls"]
    )


_LANGCHAIN_TYPES: Final = frozenset({"human", "ai", "system", "tool", "chat", "function", "remove"})
"""The ``type`` of each kind of LangChain message (a streaming chunk's is its class name, ``AIMessageChunk``)."""


def _langchain_form(item: Any) -> str | None:
    """
    How *item* serializes a LangChain message: ``"dumpd"`` (``langchain_core.load.dumpd``),
    ``"messages_to_dict"`` (an item of its list), ``"model_dump"`` (the message's own), or None.
    """
    if not isinstance(item, Mapping):
        return None
    if item.get("lc") == 1 and item.get("type") == "constructor" and isinstance(item.get("kwargs"), Mapping):
        return "dumpd"
    if set(item) == {"type", "data"} and isinstance(item["data"], Mapping):
        return "messages_to_dict"
    kind = _text(item.get("type"))
    if "role" not in item and (kind in _LANGCHAIN_TYPES or kind.endswith("MessageChunk")):
        return "model_dump"
    return None


def detect(payload: Any) -> str | None:
    """
    The format of a parsed request body or message list, or None when it is none of :data:`FORMATS`.

    The fields of a body tell its format first: ``contents`` is Gemini's,
    ``input`` Responses', ``system`` Anthropic's. A body of ``messages`` that
    names its ``model`` is a provider's request, even with no message (workingctx
    JSON names none): Anthropic's for a Claude model when its messages read
    alike in both formats, Chat Completions' otherwise; ``messages`` alone, with
    none, is workingctx JSON.

    >>> detect({"messages": [{"role": "user", "content": "hi"}]})
    'openai_chat'
    >>> detect({"system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]})
    'anthropic'
    >>> detect({"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]})
    'anthropic'
    >>> detect({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    'google'
    >>> detect({"input": [{"role": "user", "content": "hi"}]})
    'openai_responses'
    >>> detect({"model": "gpt-4.1", "messages": []})
    'openai_chat'
    >>> detect({"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": []})
    'anthropic'
    >>> detect({"prefix": {"system_prompt": "Be brief."}, "messages": []})
    'workingctx'
    >>> detect({"messages": []})
    'workingctx'
    >>> detect([{"type": "human", "data": {"type": "human", "content": "hi"}}])
    'langchain'
    """
    if isinstance(payload, list):
        if any(_langchain_form(item) for item in payload):
            return "langchain"
        if all(isinstance(item, Mapping) and "parts" in item for item in payload) and payload:
            return "google"
        if any(isinstance(item, Mapping) and "type" in item and "role" not in item for item in payload):
            return "openai_responses"
        return detect({"messages": payload})
    if not isinstance(payload, Mapping):
        return None
    if "prefix" in payload or "scratchpad" in payload:
        return "workingctx"
    if "contents" in payload or "system_instruction" in payload or "systemInstruction" in payload:
        return "google"
    if "input" in payload or "instructions" in payload:
        return "openai_responses"
    messages = payload.get("messages")
    if not isinstance(messages, list):
        return None
    if any(_langchain_form(item) for item in messages):
        return "langchain"
    if "system" in payload or _anthropic_blocks(messages):
        return "anthropic"
    if _workingctx_calls(messages):
        return "workingctx"
    if _claude(payload) and all(_plain_turn(m) for m in messages):
        return "anthropic"  # both formats read it alike: the model says whose request it is
    # a request names its model; workingctx JSON ("prefix", "messages", "scratchpad") never does
    return "openai_chat" if messages or "model" in payload else "workingctx"


def require_messages(doc: Document, command: str) -> None:
    """
    Refuse a file whose requests hold no message at all (no system prompt, no
    turn): *command* (``trim``, ``replay``) has nothing to work on.

    Raises:
        InputError: every request of *doc* is empty, naming the array to fill.
    """
    if any(ctx.size() or ctx.prefix.as_messages() for ctx in doc.requests):
        return
    array = _ARRAYS[doc.format]
    body = isinstance(doc.payloads[-1], Mapping)
    what = "the request holds" if len(doc.requests) == 1 else f"each of its {len(doc.requests)} requests holds"
    reason = (
        f"{what} no message, so there is nothing to {command}; "
        f"write the conversation (a user message at least) into {f'its {array!r}' if body else 'the list'}"
    )
    raise InputError(doc.path, reason, line=doc.lines[-1], where=f"$.{array}" if body else "$")


def _claude(payload: Mapping[str, Any]) -> bool:
    """
    Whether a body names one of Anthropic's own models (``claude-...``; a
    router's ``anthropic/claude-...`` is a Chat Completions request).
    """
    model = payload.get("model")
    return isinstance(model, str) and model.startswith("claude")


def _plain_turn(message: object) -> bool:
    """
    Whether *message* reads alike in Chat Completions and Anthropic: a user or
    assistant turn of text, with nothing else.
    """
    return (
        isinstance(message, Mapping)
        and set(message) <= {"role", "content"}
        and _text(message.get("role")) in {"user", "assistant"}
        and isinstance(message.get("content"), str)
    )


_MODEL_KEYS: Final = ("model", "model_version", "modelVersion")
"""Where a request body (or a logged request or response) names its model."""


def model_of(payload: Any) -> str | None:
    """
    The model a request body names, or None: ``model`` in an OpenAI or
    Anthropic body, the model path or ``model_version`` of a Gemini request or
    response (``models/gemini-2.5-flash`` and ``.../models/gemini-2.5-flash:generateContent``
    are both ``gemini-2.5-flash``).

    >>> model_of({"model": "gpt-4.1", "messages": []})
    'gpt-4.1'
    >>> model_of({"model": "projects/p/locations/us/publishers/google/models/gemini-2.5-pro:generateContent"})
    'gemini-2.5-pro'
    >>> model_of({"modelVersion": "gemini-2.5-flash", "candidates": []})
    'gemini-2.5-flash'
    >>> model_of({"messages": []}) is None
    True
    """
    if not isinstance(payload, Mapping):
        return None
    for key in _MODEL_KEYS:
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            name = value.strip()
            if "models/" in name:  # a Gemini model path: the name after the last "models/", without the method
                name = name.rpartition("models/")[2].partition(":")[0]
            return name or None
    return None


_ARRAYS: Final = {
    "workingctx": "messages",
    "langchain": "messages",
    "openai_chat": "messages",
    "openai_responses": "input",
    "anthropic": "messages",
    "google": "contents",
}
"""The array of a request body that holds its messages, in each format."""


def places(payload: Any, fmt: str, ctx: WorkingContext) -> tuple[str, ...]:
    """
    Where each message of ``ctx.assembled()`` stands in the file it was read
    from (*payload*, in format *fmt*), as a JSON path: the item of the body's own
    array it was read from (``$.messages[2]``, ``$.contents[0]``, ``$.input[3]``;
    for a Responses message of several output items, the first), or the field
    holding it outside that array (``$.system``, ``$.instructions``, ``$.prefix``).

    >>> body = {"system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}
    >>> places(body, "anthropic", anthropic.read(body))
    ('$.system', '$.messages[0]')
    """
    if fmt == "workingctx":
        return ("$.prefix",) * len(ctx.prefix.as_messages()) + tuple(f"$.messages[{i}]" for i in range(ctx.size()))
    array = _ARRAYS[fmt]
    body = isinstance(payload, Mapping)
    items = payload[array] if body else payload
    base = f"$.{array}" if body else "$"
    head = _outside(payload, fmt) if body else ()
    if isinstance(items, str):  # a Responses input of one text
        return (*head, base)
    starts = openai_responses.message_starts(items) if fmt == "openai_responses" else range(len(items))
    return (*head, *(f"{base}[{i}]" for i in starts))


def call_item(payload: Any, fmt: str, path: str | None, ids: Sequence[str]) -> str | None:
    """
    Where a problem of the calls *ids* points in the file: for a Responses
    message of several output items (numbered by its first, at *path*), the
    item holding the first of those calls; *path* itself otherwise.

    >>> items = [{"type": "reasoning", "summary": []}, {"type": "function_call", "call_id": "c1"}]
    >>> call_item({"input": items}, "openai_responses", "$.input[0]", ["c1"])
    '$.input[1]'
    """
    index = position(path)
    if fmt != "openai_responses" or path is None or path == "$.input" or index is None or not ids:
        return path
    items = payload["input"] if isinstance(payload, Mapping) else payload
    base = path[: path.rindex("[")]
    end = next((start for start in openai_responses.message_starts(items) if start > index), len(items))
    return next((f"{base}[{at}]" for at in range(index, end) if items[at].get("call_id") in ids), path)


_OUTSIDE: Final = {
    "anthropic": ("system",),
    "openai_responses": ("instructions",),
    "google": ("system_instruction", "systemInstruction", "config.system_instruction", "config.systemInstruction"),
}
"""Where a body of each format holds its system prompt outside its array of messages, first first."""


def _outside(body: Mapping[str, Any], fmt: str) -> tuple[str, ...]:
    """
    The JSON path of the field holding *body*'s system prompt outside its array of messages, if it has one.
    """
    for path in _OUTSIDE.get(fmt, ()):
        value: Any = body
        for key in path.split("."):
            value = value.get(key) if isinstance(value, Mapping) else None
        if value is not None:
            return (f"$.{path}",)
    return ()


def position(path: str | None) -> int | None:
    """
    The index into the body's array that the JSON *path* ends on (0 for a
    Responses ``input`` of one text, its one message), or None (``$.system``).

    >>> position("$.messages[2]"), position("$.input"), position("$.system")
    (2, 0, None)
    """
    if path == "$.input":
        return 0
    if path is None or not path.endswith("]"):
        return None
    return int(path[path.rindex("[") + 1 : -1])


def load_context(data: dict[str, Any]) -> WorkingContext:
    """
    Build a context from workingctx JSON: ``{"prefix": ..., "messages": [...], "scratchpad": {...}}``.

    Raises:
        SerializationError: the data does not describe a context.
    """
    if not isinstance(data, dict):
        msg = f"a transcript file holds a JSON object, got {_json_kind(data)} at $"
        raise SerializationError(msg, path="$")
    prefix = _part(data, "prefix", {}, PrefixContext)
    messages = _part(data, "messages", [], tuple[Message, ...])
    notes = data.get("scratchpad")
    if notes is None:
        notes = {}
    if not isinstance(notes, dict):
        msg = f"the scratchpad is a JSON object of notes, got {_json_kind(notes)} at $.scratchpad"
        raise SerializationError(msg, path="$.scratchpad")
    return WorkingContext(prefix=prefix, messages=messages, scratchpad=notes)


def _part(data: dict[str, Any], key: str, default: Any, kind: Any) -> Any:
    """
    Structure ``data[key]``, reporting errors at their path in the whole file.
    """
    try:
        return structure(data.get(key, default), kind)
    except SerializationError as exc:
        path = f"$.{key}{exc.path.removeprefix('$')}"
        problems = tuple((f"$.{key}{where.removeprefix('$')}", what) for where, what in exc.problems)
        msg = f"{problems[0][1] if problems else exc} at {path}"
        raise SerializationError(msg, path=path, problems=problems) from exc


def _langchain_messages(payload: Any) -> list[Any]:
    """
    The LangChain messages a file of serialized ones holds (a list, or a
    mapping with ``messages``, in any form :func:`_langchain_form` knows).

    Raises:
        SerializationError: an item that is no serialized LangChain message,
            or one LangChain cannot build, at its JSON path (``$[3]``, ``$.messages[3]``).
    """
    from langchain_core.messages import messages_from_dict  # noqa: PLC0415  # the [langchain] extra, when used

    items = payload.get("messages") if isinstance(payload, Mapping) else payload
    base = "$.messages" if isinstance(payload, Mapping) else "$"
    if not isinstance(items, list):
        msg = "LangChain messages are a list of serialized messages, or a state's 'messages' list; found none"
        raise SerializationError(msg, path=base)
    messages = []
    for position, item in enumerate(items):
        form = _langchain_form(item)
        data = item["kwargs"] if form == "dumpd" else item["data"] if form == "messages_to_dict" else item
        if form is None or not isinstance(data.get("type"), str):
            msg = (
                f"item {position} is no LangChain message serialized with model_dump(), langchain_core.load.dumpd "
                "or messages_to_dict (each names its 'type'); write every message of the list in one of these"
            )
            raise SerializationError(msg, path=f"{base}[{position}]")
        try:
            messages += messages_from_dict([{"type": data["type"], "data": data}])
        except (ValueError, TypeError, KeyError) as exc:
            msg = f"item {position} is no LangChain {data['type']!r} message: {_one_line(exc)}"
            raise SerializationError(msg, path=f"{base}[{position}]") from None
    return messages


def _one_line(exc: BaseException) -> str:
    """
    What *exc* says, on one line: a pydantic validation error as each field at fault and why.
    """
    errors = getattr(exc, "errors", None)
    if callable(errors):
        with contextlib.suppress(Exception):
            return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'the message'}: {e['msg']}" for e in errors())
    return " ".join(str(exc).split()) or type(exc).__name__


def _langchain_written(ctx: WorkingContext, original: Any) -> list[Any]:
    """
    *ctx* as LangChain messages serialized in the form the file *original* holds them.
    """
    from langchain_core.load import dumpd  # noqa: PLC0415  # the [langchain] extra, when used
    from langchain_core.messages import messages_to_dict  # noqa: PLC0415

    items = original["messages"] if isinstance(original, Mapping) else original
    form = next((_langchain_form(item) for item in items), "model_dump")
    written = langchain.write(ctx)
    if form == "dumpd":
        return [dumpd(message) for message in written]
    if form == "messages_to_dict":
        return list(messages_to_dict(written))
    return [message.model_dump() for message in written]


def readable(payload: Any, fmt: str) -> Any:
    """
    What the adapter of *fmt* reads of a request of the file: the LangChain
    messages of a LangChain file, the payload itself for a request body.
    """
    return _langchain_messages(payload) if fmt == "langchain" else payload


def to_context(payload: Any, fmt: str) -> WorkingContext:
    """
    Read one request body in format *fmt* into a context.

    Raises:
        WorkingCtxError, ValueError, TypeError: the payload is not a request of that format.
    """
    if fmt == "workingctx":
        return load_context(payload)
    return ADAPTERS[fmt].read(readable(payload, fmt))  # type: ignore[no-any-return]


_MESSAGE_FIELDS: Final = {
    "workingctx": {"prefix", "messages", "scratchpad"},
    "openai_chat": {"messages"},
    "openai_responses": {"input", "instructions"},
    "anthropic": {"system", "messages"},
    "google": {"contents", "system_instruction", "systemInstruction"},
    "langchain": {"messages"},
}
"""The fields of a request that hold its context: what :func:`write_context` writes anew; the others are kept."""


def _system_in_place(written: dict[str, Any], original: Mapping[str, Any], fmt: str) -> dict[str, Any]:
    """
    The Gemini body *written* with its system instruction where *original*
    holds it (the SDK's ``config.system_instruction``, REST's
    ``systemInstruction``), not beside it; any other body as it is.
    """
    field = "system_instruction"
    where = _outside(original, fmt)
    if fmt != "google" or field not in written or not where:
        return written
    path = where[0].removeprefix("$.")
    out = {key: value for key, value in written.items() if key != field}
    if path.startswith("config."):
        out["config"] = {**original["config"], path.removeprefix("config."): written[field]}
    else:
        out[path] = written[field]
    return out


def write_context(doc: Document, ctx: WorkingContext, path: str) -> None:
    """
    Write *ctx* to the file at *path* as a request in the format of *doc*,
    keeping the other fields (model, tools, ...) of its last request where they were.

    Raises:
        OutputError: the file cannot be written (see :func:`write_text`); nothing changed.
    """
    if doc.format == "workingctx":
        payload: Any = {
            "prefix": unstructure(ctx.prefix),
            "messages": [unstructure(m) for m in ctx.messages],
            "scratchpad": dict(ctx.scratchpad),
        }
    elif doc.format == "langchain":
        written = _langchain_written(ctx, doc.payloads[-1])
        payload = {"messages": written} if isinstance(doc.payloads[-1], dict) else written
    else:
        payload = ADAPTERS[doc.format].write(ctx)
    original = doc.payloads[-1]
    if isinstance(original, dict):
        payload = _system_in_place(payload, original, doc.format)
        owned = _MESSAGE_FIELDS[doc.format]
        kept = {key: payload.get(key, value) for key, value in original.items() if key in payload or key not in owned}
        payload = kept | payload
    # a .jsonl path is a log: the request on one line, so the command reads it back
    indent = None if is_log(path) else 2
    write_text(path, json.dumps(payload, indent=indent, ensure_ascii=False) + "\n")


def _where(exc: BaseException) -> str | None:
    path = getattr(exc, "path", None)
    return path if isinstance(path, str) and path.startswith("$") else None


def _json_kind(value: Any) -> str:
    """
    What kind of JSON value *value* is, as JSON names it: ``an object``, ``a number``, ``null``.

    >>> _json_kind({}), _json_kind(42), _json_kind(None), _json_kind(True)
    ('an object', 'a number', 'null', 'a boolean')
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, Mapping):
        return "an object"
    return "an array" if isinstance(value, list) else "a string"


_ENVELOPES: Final = (
    ("body", "a line of an OpenAI Batch API file"),
    ("params", "a request of an Anthropic message batch"),
    ("request", "a line of a Gemini batch file"),
)
"""The field of each batch API's line that holds the request body, and what the line is."""


def _wrapped(payload: Any) -> str | None:
    """
    Why *payload* is refused when it is a batch API's line holding a request
    body under a field (``body``, ``params``, ``request``), with the fix; None otherwise.
    """
    if not isinstance(payload, Mapping):
        return None
    for key, what in _ENVELOPES:
        if isinstance(payload.get(key), Mapping) and detect(payload[key]) is not None:
            return (
                f"{what}, whose request body is under {key!r}: give the bodies themselves, "
                f"one per line (such as jq -c .{key} FILE)"
            )
    return None


def _one_value_a_line(text: str) -> bool:
    """
    Whether *text* holds one JSON value after another, the next starting a
    line: a log of requests, as standard input (which has no name to say so) holds one.

    >>> _one_value_a_line('{"messages": []}\\n{"messages": []}\\n'), _one_value_a_line('{"messages": []}\\n')
    (True, False)
    """
    first, _, rest = text.lstrip().partition("\n")
    if not rest.strip():
        return False  # one line: a document
    try:  # its first line a whole value (a document over several lines has none), without parsing it all
        json.loads(first)
    except (ValueError, RecursionError):
        return False
    return True


def read_file(path: str, fmt: str | None = None) -> Document:
    """
    Read a transcript file: a JSON request body in any of :data:`FORMATS`, or a
    ``.jsonl`` log with one request body per line.

    Args:
        path: The file; ``-`` reads standard input, a log when it holds one
            request body after another, one per line.
        fmt: The format to read it as; None to detect it per request.

    Raises:
        InputError: the file cannot be read or a request in it is not a transcript.
    """
    if fmt is not None and fmt not in FORMATS:
        msg = f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}"
        raise InputError(path, msg)
    text = read_text(path)
    if is_log(path) or (path == STDIN and _one_value_a_line(text)):
        # Lines end at "\n" only: str.splitlines() also splits at U+2028, U+0085 and form feeds (valid in JSON strings).
        lines = enumerate((line.removesuffix("\r") for line in text.split("\n")), start=1)
        chunks = [(number, line) for number, line in lines if line.strip()]
        if not chunks:
            raise InputError(path, "an empty log: a log file holds one request body per line")
    else:
        chunks = [(1, text)]
    formats: list[str] = []
    requests: list[WorkingContext] = []
    payloads: list[Any] = []
    for number, chunk in chunks:
        payload = _parse(path, chunk, number)
        found = fmt or detect(payload)
        if found is None:
            msg = _wrapped(payload) or (
                f"{_json_kind(payload)} that is no known transcript format; a request body of "
                f"{', '.join(FORMATS[1:])} or workingctx JSON was expected (force one with --format)"
            )
            raise InputError(path, msg, line=number)
        try:
            requests.append(to_context(payload, found))
        except (WorkingCtxError, ValueError, TypeError, KeyError, AttributeError) as exc:
            reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
            where = _where(exc)
            if where is not None:  # named before the reason: not again after it
                reason = reason.removesuffix(f" at {where}")
            article = "an" if found.startswith(("a", "o")) else "a"  # an openai_chat, an anthropic request
            raise InputError(path, f"not {article} {found} request: {reason}", line=number, where=where) from None
        except RecursionError:
            raise InputError(path, "nested too deeply to be a transcript", line=number) from None
        except ImportError:
            msg = f"reading {found} messages needs langchain-core: pip install 'workingctx[langchain]'"
            raise InputError(path, msg, line=number) from None
        formats.append(found)
        payloads.append(payload)
    kinds = sorted(set(formats))
    return Document(
        path=path,
        format=kinds[0] if len(kinds) == 1 else formats[-1],
        requests=tuple(requests),
        lines=tuple(number for number, _ in chunks),
        payloads=tuple(payloads),
        models=tuple(model_of(payload) for payload in payloads),
        formats=tuple(formats),
    )
