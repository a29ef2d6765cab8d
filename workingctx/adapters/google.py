"""
Google Gen AI (Gemini): ``{"system_instruction": ..., "contents": [...]}`` in and out.

The plain-data form is the one the SDK writes with
``model_dump(mode="json", exclude_none=True)``: snake_case keys, binary data and
thought signatures as base64 text. camelCase (REST) input is read as well, and
dumps that keep unset fields as null (``model_dump(mode="json")``, ``model_dump()``).

>>> from workingctx.adapters import google
>>> body = {"system_instruction": {"parts": [{"text": "Be brief."}]}, "contents": [
...     {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
...     {"role": "model", "parts": [{"function_call": {"id": "c1", "name": "weather", "args": {"city": "Paris"}},
...                                 "thought_signature": "CiQB0e2Kb"}]},
...     {"role": "user", "parts": [{"function_response": {"id": "c1", "name": "weather", "response": {"t": 18}}}]},
... ]}
>>> google.write(google.read(body)) == body
True
"""

from __future__ import annotations

import base64
import hashlib
import json
import mimetypes
import re
from collections.abc import Container, Iterable, Mapping, Sequence
from enum import Enum
from typing import Any

from workingctx._canonical import canonical_json
from workingctx.adapters import _engine as engine
from workingctx.adapters._common import (
    STAND_IN,
    Problem,
    ProviderError,
    check_messages,
    context_from,
    expect_list,
    expect_mapping,
    lost_blocks,
    media_problems,
    messages_of,
    original_ids,
    parse_data_url,
    plain,
    sends_nothing,
    split_system,
    store_ref_error,
    unique_call_ids,
    wire_errors,
)
from workingctx.adapters._engine import Where, unknown
from workingctx.callids import fresh_call_id
from workingctx.exceptions import ArgumentTypeError, ArgumentValueError
from workingctx.frozen import thaw
from workingctx.messages import (
    AudioBlock,
    ContentBlock,
    DataBlock,
    DocumentBlock,
    ImageBlock,
    MediaRef,
    Message,
    ProviderBlock,
    ReasoningBlock,
    RemoteToolCallBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
    VideoBlock,
)

__all__ = ["BYPASS_SIGNATURE", "Problem", "ProviderError", "check", "read", "read_response", "request_key", "write"]

PROVIDER = "google"
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_OPAQUE = frozenset({"args", "response"})  # user data inside a part: keys are never renamed


def _snake(key: Any) -> Any:
    return _CAMEL.sub("_", key).lower() if isinstance(key, str) else key


def _json_value(value: Any) -> Any:
    """
    *value* as the SDK's JSON dump has it: bytes as URL-safe base64 text, an enum as its value.
    """
    if isinstance(value, bytes):
        return base64.urlsafe_b64encode(value).decode("ascii")
    return value.value if isinstance(value, Enum) else value


def _fields(raw: Mapping[str, Any]) -> dict[str, Any]:
    """
    The fields of a Gemini object as the SDK's JSON dump names them, one level
    deep: snake_case keys, and no null field (a null is an unset field, which
    ``model_dump(mode="json")`` writes and ``exclude_none=True`` leaves out).
    The values stay the payload's own, so an error further down names its field.
    """
    return {_snake(key): _json_value(value) for key, value in raw.items() if value is not None}


def _object(value: Any) -> dict[str, Any] | None:
    """
    The :func:`_fields` of *value* if it is a Gemini object (a mapping or an SDK object), else None.
    """
    value = plain(value)
    return _fields(value) if isinstance(value, Mapping) else None


def sdk_form(data: Any) -> Any:
    """
    *data* in the SDK's ``model_dump(mode="json", exclude_none=True)`` form:
    camelCase (REST) keys in snake_case, null fields left out, bytes as
    URL-safe base64, leaving call arguments and function responses (user data) as they are.

    >>> sdk_form({"inlineData": {"mimeType": "image/png", "data": None}, "functionCall": {"args": {"aB": None}}})
    {'inline_data': {'mime_type': 'image/png'}, 'function_call': {'args': {'aB': None}}}
    """
    data = plain(data)
    if isinstance(data, list):
        return [sdk_form(item) for item in data]
    if not isinstance(data, Mapping):
        return _json_value(data)
    return {key: value if key in _OPAQUE else sdk_form(value) for key, value in _fields(data).items()}


# -- reading ---------------------------------------------------------------------------


def _media_block(media: MediaRef, extra: dict[str, Any]) -> ContentBlock | None:
    mime = media.mime_type or ""
    data = {PROVIDER: extra} if extra else {}
    if mime.startswith("image/"):
        return ImageBlock(media, provider_data=data)
    if extra:
        return None
    if mime.startswith("audio/"):
        return AudioBlock(media)
    if mime.startswith("video/"):
        return VideoBlock(media)
    return DocumentBlock(media)


class _Reader:
    """
    Reads parts, giving id-less calls an id and linking id-less responses to them by name.

    An id-less call is named ``gemini-call-<n>``, the first *n* from 1 whose
    name is not in *taken* (a payload numbers its calls in order; a response
    read with its context goes on from the context's calls). With a *seed*
    (a response read without its context) the name is ``gemini-call-<seed>``,
    the seed drawn from the response's content, and the reply's further calls
    take :func:`~workingctx.callids.fresh_call_id` names after it.
    """

    def __init__(self, taken: Container[str] = (), seed: str | None = None) -> None:
        self.count = 0
        self.taken = taken
        self.seed = seed
        self.named: set[str] = set()
        self.pending: dict[str, list[str]] = {}

    def _new_id(self) -> str:
        if self.seed is not None:
            base = f"gemini-call-{self.seed}"
            name = base if base not in self.named else fresh_call_id(base, self.named)
        else:
            self.count += 1
            while f"gemini-call-{self.count}" in self.taken or f"gemini-call-{self.count}" in self.named:
                self.count += 1
            name = f"gemini-call-{self.count}"
        self.named.add(name)
        return name

    def part(self, raw: Any) -> ContentBlock:
        part = _fields(expect_mapping(raw, "a part"))
        keys = set(part)
        extra = {k: v for k, v in part.items() if k == "thought_signature"}
        if "text" in part and keys <= {"text", "thought", "thought_signature"}:
            if part.get("thought") is True:
                return ReasoningBlock(part["text"], signature=part.get("thought_signature"), provider=PROVIDER)
            if "thought" in part:
                extra["thought"] = part["thought"]
            return TextBlock(part["text"], provider_data={PROVIDER: extra} if extra else {})
        if "function_call" in part and keys <= {"function_call", "thought_signature"}:
            return self.call(part["function_call"], extra) or ProviderBlock(PROVIDER, sdk_form(part))
        if "function_response" in part and keys == {"function_response"}:
            return self.response(part["function_response"]) or ProviderBlock(PROVIDER, sdk_form(part))
        if "inline_data" in part and keys <= {"inline_data", "thought_signature"}:
            blob = _object(part["inline_data"])
            if blob is not None and set(blob) <= {"data", "mime_type", "display_name"} and "data" in blob:
                data = blob["data"]
                if not isinstance(data, str):
                    msg = f"inline_data.data must be base64 text, got {data!r} of type {type(data).__name__}"
                    raise ArgumentTypeError(msg, argument="inline_data.data", value=data, expected="base64 text")
                media = MediaRef(
                    kind="data",
                    # the SDK writes URL-safe base64; workingctx keeps the standard alphabet other formats send
                    # (text mixing both is no base64: kept as it came, for check to name)
                    data_base64=data if _mixed(data) else data.replace("-", "+").replace("_", "/"),
                    mime_type=blob.get("mime_type"),
                    filename=blob.get("display_name"),
                )
                block = _media_block(media, extra)
                if block is not None and (media.mime_type is not None or not isinstance(block, DocumentBlock)):
                    return block
        if "file_data" in part and keys <= {"file_data", "thought_signature"}:
            file = _object(part["file_data"])
            if file is not None and set(file) <= {"file_uri", "mime_type", "display_name"} and "file_uri" in file:
                media = MediaRef(
                    kind="url", url=file["file_uri"], mime_type=file.get("mime_type"), filename=file.get("display_name")
                )
                block = _media_block(media, extra)
                if block is not None and media.mime_type is not None:
                    return block
        return ProviderBlock(PROVIDER, sdk_form(part))

    def call(self, value: Any, extra: dict[str, Any]) -> ContentBlock | None:
        raw = _object(value)
        if raw is None or not set(raw) <= {"id", "name", "args"} or not isinstance(raw.get("name"), str):
            return None
        args = raw.get("args", {})
        if not isinstance(args, Mapping):
            msg = f"function_call.args must be a JSON object of the call's arguments, got {args!r}"
            raise ArgumentTypeError(msg, argument="function_call.args", value=args, expected="a JSON object")
        data = dict(extra)
        if "thought_signature" not in data:
            data["_unsigned"] = True  # Gemini made it without a signature: it goes back without one
        if "args" not in raw:
            data["_no_args"] = True
        call_id = raw.get("id")
        if not call_id:
            call_id = self._new_id()
            data["_no_id"] = True
        self.pending.setdefault(raw["name"], []).append(call_id)
        return ToolCallBlock(call_id, raw["name"], args, provider_data={PROVIDER: data} if data else {})

    def response(self, value: Any) -> ContentBlock | None:
        raw = _object(value)
        if raw is None or not set(raw) <= {"id", "name", "response", "parts"} or not isinstance(raw.get("name"), str):
            return None
        blocks: list[ContentBlock] = []
        for item in raw.get("parts") or ():
            part = _object(item)
            block = self.part(part) if part is not None and set(part) in ({"inline_data"}, {"file_data"}) else None
            if not isinstance(block, ImageBlock | AudioBlock | VideoBlock | DocumentBlock):
                return None
            blocks.append(block)
        data: dict[str, Any] = {"name": raw["name"]}
        if raw.get("parts") == []:
            data["_parts"] = True
        call_id = raw.get("id")
        waiting = self.pending.get(raw["name"], [])
        if call_id:
            if call_id in waiting:
                waiting.remove(call_id)
        elif waiting:
            call_id = waiting.pop(0)
            data["_no_id"] = True
        else:
            return None
        if "response" not in raw:
            data["_no_response"] = True
        return ToolResultBlock(call_id, raw.get("response", {}), content=tuple(blocks), provider_data={PROVIDER: data})


_PART_FIELDS = frozenset(
    {
        "text",
        "inline_data",
        "file_data",
        "function_call",
        "function_response",
        "executable_code",
        "code_execution_result",
    }
)
"""The fields one of which a part holds (and a content does not)."""


def _system(raw: Any) -> Message:
    if isinstance(raw, str):
        return Message("system", raw, provider_data={PROVIDER: {"_str": True}})
    value = plain(raw)
    if isinstance(value, list):  # the SDK's list of parts (``system_instruction=["Be brief.", part]``)
        content: dict[str, Any] = {"parts": [{"text": p} if isinstance(p, str) else p for p in value]}
    else:
        content = _fields(expect_mapping(raw, "system_instruction"))
        if "parts" not in content and content.keys() & _PART_FIELDS:  # one part (``system_instruction=Part(...)``)
            content = {"parts": [raw]}
    reader = _Reader()
    parts = tuple(map(reader.part, expect_list(content.get("parts", []), "parts")))
    extra: dict[str, Any] = sdk_form(unknown(content, ("parts",)))
    return Message("system", parts, provider_data={PROVIDER: extra} if extra else {})


@wire_errors("Gemini", "contents")
def read_messages(payload: Any) -> list[Message]:
    """
    The messages of a body (``system_instruction`` first) or of a bare list of contents.
    """
    data = plain(payload)
    messages: list[Message] = []
    contents: Any = data
    if isinstance(data, Mapping):
        data = _fields(data)
        if "contents" not in data:
            msg = "a Gemini body needs 'contents'; pass the body or the list of contents itself"
            raise ArgumentValueError(msg, argument="payload", value=payload)
        system = data.get("system_instruction")
        if system is None:
            system = (_object(data.get("config")) or {}).get("system_instruction")
        if system is not None:
            messages.append(_system(system))
        contents = data["contents"]
    reader = _Reader()
    for position, raw in enumerate(_as_contents(contents)):
        content = _fields(expect_mapping(raw, f"contents[{position}]"))
        role = content.get("role")
        if role not in ("user", "model", None):
            msg = f"contents[{position}] has role {role!r}; Gemini roles are 'user' and 'model'"
            raise ArgumentValueError(msg, argument=f"contents[{position}].role", value=role)
        extra: dict[str, Any] = sdk_form(unknown(content, {"role", "parts"}))
        if role is None:
            extra["_no_role"] = True
        parts = tuple(map(reader.part, expect_list(content.get("parts", []), "parts")))
        messages.append(
            Message("assistant" if role == "model" else "user", parts, provider_data={PROVIDER: extra} if extra else {})
        )
    return messages


_PART_FIELDS = frozenset(
    {
        "audio_metadata",
        "audio_transcription",
        "code_execution_result",
        "document_metadata",
        "executable_code",
        "file_data",
        "function_call",
        "function_response",
        "inline_data",
        "media_processing",
        "media_resolution",
        "part_metadata",
        "speech_metadata",
        "spreadsheet_metadata",
        "text",
        "thought",
        "thought_signature",
        "tool_call",
        "tool_response",
        "video_metadata",
    }
)
"""The fields of a part (``types.Part``): a mapping of only these, and at least one, is a part, not a content."""


def _as_contents(contents: Any) -> list[Any]:
    """
    *contents* as a list of contents, as the SDK takes them: a string or a part
    alone is a content of it; in a list, each run of strings and parts between
    contents is one content (a user's, or the model's for parts that call a
    function, a run split where that changes), and a list in it a user content
    of its parts.
    """
    contents = plain(contents)
    if isinstance(contents, str) or _is_part(contents):
        return [_content_of([_as_part(contents)])]
    if isinstance(contents, Mapping):
        return [contents]
    out: list[Any] = []
    run: list[Any] = []
    for item in expect_list(contents, "contents"):
        if isinstance(item, str) or _is_part(item):
            part = _as_part(item)
            if run and _calls(run[-1]) != _calls(part):
                out.append(_content_of(run))
                run = []
            run.append(part)
            continue
        if run:
            out.append(_content_of(run))
            run = []
        out.append({"role": "user", "parts": item} if isinstance(item, list) else item)
    if run:
        out.append(_content_of(run))
    return out


def _calls(part: Any) -> bool:
    fields = _object(part)
    return fields is not None and fields.get("function_call") is not None


def _content_of(parts: list[Any]) -> dict[str, Any]:
    """The content of a run of parts (all calling a function, or none)."""
    return {"role": "model" if _calls(parts[0]) else "user", "parts": parts}


def _is_part(item: Any) -> bool:
    if isinstance(item, Mapping) and ("parts" in item or "role" in item):
        return False  # a content, the usual item: not taken apart twice
    fields = _object(item)
    return fields is not None and bool(fields) and fields.keys() <= _PART_FIELDS


def _as_part(item: Any) -> Any:
    return {"text": item} if isinstance(item, str) else item


@wire_errors("Gemini", "contents")
def read(payload: Any) -> Any:
    """
    A WorkingContext from a Gemini body (``{"system_instruction": ..., "contents": [...]}``),
    a list of contents, or SDK objects; ``system_instruction`` becomes the prefix.
    """
    return context_from(*split_system(read_messages(payload)))


# -- writing ---------------------------------------------------------------------------


def _mime(block: ImageBlock | AudioBlock | VideoBlock | DocumentBlock) -> str | None:
    """
    The MIME type Gemini needs for a media block: its own, its ``data:`` URL's,
    one guessed from its URL or file name, PDF for a document; None when unknown.
    """
    media = block.media
    if media.mime_type:
        return media.mime_type
    inline = parse_data_url(media.data_base64 or "") if media.kind == "data" else None
    if inline is not None and inline[0]:
        return inline[0]
    for name in (media.url, media.filename):
        if name:
            guessed = mimetypes.guess_type(name.split("?", 1)[0])[0]
            if guessed is not None and guessed.split("/", 1)[0] in {"image", "audio", "video", "application", "text"}:
                return guessed
    return "application/pdf" if isinstance(block, DocumentBlock) else None


def _media(media: MediaRef, extra: Mapping[str, Any], mime: str | None = None) -> dict[str, Any] | None:
    if media.kind == "store":
        raise store_ref_error(media)
    mime = mime or media.mime_type
    if media.kind == "data":
        data = media.data_base64 or ""
        inline = parse_data_url(data)
        if inline is not None:
            mime, data = inline[0] or mime, inline[1]
        # the SDK's JSON form: URL-safe base64 (the same bytes as the standard alphabet)
        blob: dict[str, Any] = {"data": data if _mixed(data) else data.replace("+", "-").replace("/", "_")}
        if mime is not None:
            blob["mime_type"] = mime
        if media.filename is not None:
            blob["display_name"] = media.filename
        return {"inline_data": blob, **extra}
    if media.kind in {"url", "file_id"}:
        file: dict[str, Any] = {"file_uri": media.url if media.kind == "url" else media.file_id}
        if mime is not None:
            file["mime_type"] = mime
        if media.filename is not None:
            file["display_name"] = media.filename
        return {"file_data": file, **extra}
    return None


class _Writer:
    """
    Writes parts; knows each call's name so a result can name its function.
    """

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.without_id: set[str] = set()  # calls the model made without an id: their results name none either

    def call(self, call_id: str, name: str, args: Any, data: Mapping[str, Any]) -> dict[str, Any]:
        self.names[call_id] = name
        if data.get("_no_id"):
            self.without_id.add(call_id)
        call: dict[str, Any] = {} if data.get("_no_id") else {"id": call_id}
        call["name"] = name
        if not data.get("_no_args"):
            call["args"] = thaw(args)
        out: dict[str, Any] = {"function_call": call}
        if "thought_signature" in data:
            out["thought_signature"] = data["thought_signature"]
        elif not data.get("_unsigned"):
            out[_FOREIGN] = True  # made by another provider (or by hand): see _sign
        return out

    def result(
        self, call_id: str, output: Any, data: Mapping[str, Any], blocks: Sequence[ContentBlock] = ()
    ) -> dict[str, Any]:
        """
        A ``function_response`` part; media among *blocks* go in its ``parts``
        (Gemini's multimodal function responses), their text joins the output.
        """
        response: dict[str, Any] = {} if data.get("_no_id") or call_id in self.without_id else {"id": call_id}
        response["name"] = data.get("name") or self.names.get(call_id, "tool")
        texts = [b.text for b in blocks if isinstance(b, TextBlock)]
        if texts:
            head = output if isinstance(output, str) else "" if output is None else json.dumps(thaw(output))
            output = head + "".join(texts)
        if not data.get("_no_response"):
            response["response"] = dict(thaw(output)) if isinstance(output, Mapping) else {"result": thaw(output)}
        media = [
            _media(b.media, {}, _mime(b))
            for b in blocks
            if isinstance(b, ImageBlock | AudioBlock | VideoBlock | DocumentBlock) and b.media.kind != "store"
        ]
        if media:
            response["parts"] = media
        elif "_parts" in data:
            response["parts"] = []
        for b in blocks:
            if isinstance(b, ImageBlock | AudioBlock | VideoBlock | DocumentBlock) and b.media.kind == "store":
                raise store_ref_error(b.media)
        return {"function_response": response}

    def part(self, block: ContentBlock) -> dict[str, Any] | None:
        data = getattr(block, "provider_data", {}).get(PROVIDER, {})
        if isinstance(block, TextBlock):
            return {"text": block.text, **thaw(data)} if block.text or data else None
        if isinstance(block, ImageBlock | AudioBlock | VideoBlock | DocumentBlock):
            return _media(block.media, thaw(data), _mime(block))
        if isinstance(block, ToolCallBlock | RemoteToolCallBlock):
            return self.call(block.id, block.name, block.args, data)
        if isinstance(block, ToolResultBlock):
            return self.result(block.call_id, block.output, data, block.content)
        if isinstance(block, ReasoningBlock):
            if block.provider != PROVIDER:
                return None
            out: dict[str, Any] = {"text": block.summary, "thought": True}
            if block.signature is not None:
                out["thought_signature"] = block.signature
            return out
        if isinstance(block, ProviderBlock):
            return dict(thaw(block.data)) if block.provider == PROVIDER else None
        return None

    def parts(self, message: Message) -> list[dict[str, Any]]:
        content = message.content
        blocks: Sequence[ContentBlock] = (TextBlock(content),) if isinstance(content, str) else content
        out = [p for p in map(self.part, blocks) if p is not None]
        out += [self.call(c.id, c.name, c.arguments, c.provider_data.get(PROVIDER, {})) for c in message.tool_calls]
        if message.role == "tool" and message.tool_call_id is not None:
            data = message.provider_data.get(PROVIDER, {})
            if isinstance(message.content, str):
                out = [self.result(message.tool_call_id, message.content, data)]
            else:  # its result blocks are written as they are; the other blocks are the result of its call
                results = [b for b in message.content if isinstance(b, ToolResultBlock)]
                rest = [b for b in message.content if not isinstance(b, ToolResultBlock)]
                own = [self.part(b) for b in results]
                if not any(b.call_id == message.tool_call_id for b in results):
                    own.insert(0, self.result(message.tool_call_id, "", data, rest))
                out = [p for p in own if p is not None]
        return out


BYPASS_SIGNATURE = "skip_thought_signature_validator"
"""The ``thought_signature`` Google documents for function calls Gemini did not
make (a transcript from another model, calls written by hand): Gemini 3
refuses a call turn without a signature, and skips its check for this value."""

_FOREIGN = "_foreign"


def _sign(contents: list[dict[str, Any]], *, bypass: bool) -> None:
    """
    Give each model turn whose calls were made elsewhere, and carry no
    signature, :data:`BYPASS_SIGNATURE` on its first call (with *bypass*).
    """
    for content in contents:
        calls = [p for p in content["parts"] if "function_call" in p]
        foreign = [p.pop(_FOREIGN) for p in calls if _FOREIGN in p]
        if bypass and foreign and content.get("role") == "model" and not any("thought_signature" in p for p in calls):
            calls[0]["thought_signature"] = BYPASS_SIGNATURE


def write_contents(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """
    Gemini contents for workingctx messages (no system), without checks.
    """
    return _write_turns(messages)[0]


def _write_turns(messages: Sequence[Message], *, bypass: bool = True) -> tuple[list[dict[str, Any]], list[list[int]]]:
    """
    The Gemini contents, and for each the positions (in *messages*) of the
    messages written into it; a content without parts, which Gemini refuses, is left out.
    """
    writer = _Writer()

    def turn(_position: int, message: Message) -> engine.Turn | None:
        if sends_nothing(message, _drops):
            return None
        native = message.role in {"user", "assistant"} and not message.tool_calls
        parts = [{"text": f"<system>{message.text()}</system>"}] if message.role == "system" else writer.parts(message)
        role = "model" if message.role == "assistant" else "user"
        extra = dict(thaw(message.provider_data.get(PROVIDER, {})))
        no_role = extra.pop("_no_role", False)
        return role, {"parts": parts, **({} if no_role else {"role": role}), **extra} if parts else None, native

    out, origins = engine.grouped(
        messages, turn, lambda last, turn: last["parts"].extend(turn["parts"]), after_empty=False
    )
    out, origins = _joined(out, origins)
    _sign(out, bypass=bypass)
    return out, origins


def _role(content: Mapping[str, Any]) -> Any:
    return content.get("role", "user")


def _count(content: Mapping[str, Any], kind: str) -> int:
    """
    How many parts of *content* are *kind* parts (``function_call``, ``function_response``).
    """
    parts = content.get("parts")
    if not isinstance(parts, Sequence) or isinstance(parts, str):
        return 0
    return sum(1 for part in parts if isinstance(part, Mapping) and kind in part)


def _joins(last: Mapping[str, Any], content: Mapping[str, Any]) -> bool:
    """
    Whether Gemini refuses *content* right after *last* when they stay apart:
    a call turn must follow a user turn or a function response turn, and the
    responses to a call turn must all be in the one content after it.
    """
    role = _role(content)
    if role != _role(last):
        return False
    if role == "model":
        return _count(content, "function_call") > 0
    return _count(content, "function_response") > 0 and _count(last, "function_response") > 0


def _joined(contents: list[dict[str, Any]], origins: list[list[int]]) -> tuple[list[dict[str, Any]], list[list[int]]]:
    """
    *contents* with each content Gemini refuses after the one before it (see
    :func:`_joins`; a transcript read from Gemini may hold such, split as
    they were sent) joined to it, its parts after that content's, until
    Gemini takes the content before.
    """
    out: list[dict[str, Any]] = []
    where: list[list[int]] = []
    for content, origin in zip(contents, origins, strict=True):
        out.append(content)
        where.append(origin)
        while len(out) > 1 and _joins(out[-2], out[-1]):  # a call turn takes in every model turn before it
            joined, more = out.pop(), where.pop()
            out[-1]["parts"].extend(joined["parts"])
            for key, value in joined.items():
                out[-1].setdefault(key, value)
            where[-1].extend(more)
    return out, where


def lost(messages: Sequence[Message]) -> tuple[Problem, ...]:
    """
    The blocks of *messages* Gemini cannot take (data blocks; media whose
    MIME type is unknown, which Gemini requires), each an ``unsendable``
    problem: writing never drops them in silence.
    """
    return lost_blocks(messages, _lost)


def _lost(block: Any, _message: Message, _in_result: bool) -> tuple[str, str] | None:
    if isinstance(block, DataBlock):
        return "Gemini has no part for a data block", "send it as a media block with its MIME type"
    if isinstance(block, ImageBlock | AudioBlock | VideoBlock | DocumentBlock) and _mime(block) is None:
        return "Gemini needs the MIME type of every file and inline blob", "set the MediaRef's mime_type"
    return None


def wire_problems(
    contents: Sequence[Mapping[str, Any]], *, origins: Sequence[Sequence[int]] | None = None
) -> tuple[Problem, ...]:
    """
    Rules of the Gemini wire format itself: at least one content, a user turn
    first, no content without parts, a call turn only after a user turn or a
    function response turn, every response to a call turn in the one
    content after it, and no empty text.

    Problem indexes are positions in *contents*, or with *origins* (for each
    content, the positions of the messages written into it) the first of those.
    """

    def where(position: int) -> tuple[int, Where]:
        return Where.of(position, origins, "contents", "Gemini content")

    problems: list[Problem] = []
    if not contents:
        problems.append(Problem(None, "empty", "there is no Gemini content to send; add a user message"))
    elif contents[0].get("role", "user") != "user":
        index, at = where(0)
        problems.append(
            Problem(
                index,
                "first-not-user",
                f"{at} is a {contents[0].get('role')!r} turn, and Gemini wants a user turn first (a call turn "
                "must follow a user turn): keep the user message that comes before it, or start with one",
            )
        )
    for position, content in enumerate(contents):
        calls = _count(content, "function_call") if _role(content) == "model" else 0
        if calls and position and _role(contents[position - 1]) == "model":
            index, at = where(position)
            problems.append(
                Problem(
                    index,
                    "call-after-model",
                    f"{at} calls functions right after another model turn, and Gemini takes a call turn "
                    "only after a user turn or a function response turn: join the two model turns into "
                    "one (write does)",
                )
            )
        if calls and position + 2 < len(contents):
            answer, then = contents[position + 1], contents[position + 2]
            answered = _count(answer, "function_response")
            if 0 < answered < calls and _role(then) == "user" and _count(then, "function_response"):
                index, at = where(position + 1)
                problems.append(
                    Problem(
                        index,
                        "split-responses",
                        f"{at} answers {answered} of the {calls} calls of the turn before it, the others "
                        "coming in the contents after it, and Gemini wants every response to a call turn "
                        "in the one content after it: join those contents into one (write does)",
                    )
                )
        parts = content.get("parts")
        if isinstance(parts, Sequence) and not isinstance(parts, str):
            for number, part in enumerate(parts):
                if isinstance(part, Mapping) and part.get("text") == "" and "thought_signature" not in part:
                    index, at = where(position)
                    problems.append(
                        Problem(
                            index,
                            "blank-text",
                            f"{at}: parts[{number}] is an empty text, which Gemini refuses (an empty text "
                            "parameter): leave it out (write does)",
                        )
                    )
        if not content.get("parts"):
            index, at = where(position)
            problems.append(
                Problem(
                    index, "empty-content", f"{at} has no parts, which Gemini refuses; give it text or leave it out"
                )
            )
        for path, data in _inline_data(content.get("parts"), "parts"):
            if not _is_base64(data) and not data.startswith(STAND_IN):  # a stand-in: its unresolved-media problem
                index, at = where(position)
                shown = data if len(data) <= 40 else data[:40] + "..."
                problems.append(
                    Problem(
                        index,
                        "invalid-base64",
                        f"{at}: {path}.inline_data.data is {shown!r}, not base64 text, which Gemini refuses; "
                        "give the bytes base64-encoded (or a file_data URI)",
                    )
                )
    return tuple(problems)


def _inline_data(parts: Any, path: str) -> Iterable[tuple[str, str]]:
    """
    (path, data) of every ``inline_data`` blob with text data in *parts*,
    those of function responses' parts too.
    """
    if not isinstance(parts, Sequence) or isinstance(parts, str):
        return
    for position, part in enumerate(parts):
        if not isinstance(part, Mapping):
            continue
        here = f"{path}[{position}]"
        blob = part.get("inline_data")
        if isinstance(blob, Mapping) and isinstance(blob.get("data"), str):
            yield here, blob["data"]
        response = part.get("function_response")
        if isinstance(response, Mapping):
            yield from _inline_data(response.get("parts"), f"{here}.function_response.parts")


def _mixed(data: str) -> bool:
    """
    Whether *data* holds symbols of both base64 alphabets (URL-safe ``-_``, standard ``+/``).
    """
    return ("-" in data or "_" in data) and ("+" in data or "/" in data)


def _is_base64(data: str) -> bool:
    """
    Whether Gemini decodes *data* as base64: the URL-safe or the standard
    alphabet (not both at once), padded or not, with no bits past the last
    byte (as the SDK's ``Blob`` takes it).
    """
    if _mixed(data):
        return False  # the SDK refuses "99_+": one alphabet or the other
    bare = data.rstrip("=")
    if len(data) - len(bare) > -len(bare) % 4:
        return False  # padding past the last group's need ("YWI==", "YWJj="), which the SDK refuses
    text = data.replace("-", "+").replace("_", "/")
    try:
        decoded = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except ValueError:
        return False
    # the SDK refuses a last symbol with bits past the last byte set ("99"), which Python decodes
    return base64.b64encode(decoded).decode("ascii").rstrip("=") == text.rstrip("=")


def _body(sent: list[Message], *, bypass: bool = True) -> tuple[dict[str, Any], tuple[Problem, ...]]:
    system, tail = split_system(sent)
    body: dict[str, Any] = {}
    if system:
        body["system_instruction"] = _write_system(system)
    body["contents"], origins = _write_turns(tail, bypass=bypass)
    return body, wire_problems(body["contents"], origins=engine.shifted(origins, len(system)))


# Gemini matches a response to its call by a unique id: reused ids are re-keyed
def _drops(block: ContentBlock, _role: str) -> bool:
    """
    Whether this format leaves out *block* (another provider's reasoning or items).
    """
    return isinstance(block, ReasoningBlock | ProviderBlock) and block.provider != PROVIDER


FORMAT = engine.Format("gemini", _body, lost, unique_ids=True, drops=_drops)
_UNSIGNED = engine.Format("gemini", lambda sent: _body(sent, bypass=False), lost, unique_ids=True, drops=_drops)


@wire_errors("Gemini", "contents")
def write(
    source: Any,
    *,
    repair: bool = False,
    store: Any = None,
    upload: Any = None,
    signature_bypass: bool = True,
) -> dict[str, Any]:
    """
    The ``system_instruction`` and ``contents`` fields of a Gemini request.

    Tool messages become ``function_response`` parts (named after their call)
    merged into one user turn; results that are not a JSON object are sent as
    ``{"result": ...}``, media in results as the response's ``parts``; other
    providers' reasoning is left out.

    Calls Gemini made keep their ``thought_signature`` (or its absence). A
    model turn whose calls were made by another provider gets Google's
    documented :data:`BYPASS_SIGNATURE` on its first call, which Gemini 3
    needs to accept it; ``signature_bypass=False`` sends such calls unsigned.

    Raises:
        ProviderError: the request would be refused (an unanswered call, a
            model turn first, a content without parts, ...); it lists every problem.
    """
    fmt = FORMAT if signature_bypass else _UNSIGNED
    return engine.write(fmt, messages_of(source), repair=repair, store=store, upload=upload)


def _write_system(system: Sequence[Message]) -> Any:
    if (
        len(system) == 1
        and system[0].provider_data.get(PROVIDER, {}).get("_str")
        and isinstance(system[0].content, str)
    ):
        return system[0].content
    writer = _Writer()
    extra = thaw(system[0].provider_data.get(PROVIDER, {})) if len(system) == 1 else {}
    parts = [p for m in system for p in writer.parts(m)]
    return {"parts": parts, **extra}


@wire_errors("Gemini", "contents")
def check(source: Any) -> tuple[Problem, ...]:
    """
    The problems ``write`` would raise for a context, or for a wire payload
    (its own contents checked as they are, and what reading it gives).
    """
    return engine.check(FORMAT, source, _payload_problems)


def _payload_problems(payload: Any) -> tuple[Problem, ...]:
    messages = read_messages(payload)
    data = sdk_form(payload)
    raw = data["contents"] if isinstance(data, Mapping) else data
    wire = engine.at_context(wire_problems(raw), len(messages) - len(raw))
    return (*check_messages(messages, provider="gemini"), *media_problems(messages), *wire)


@wire_errors("Gemini", "contents")
def request_key(source: Any, **fields: Any) -> str:
    """
    A key for exactly what ``write`` sends plus *fields* (model, tools, ...).
    """
    return engine.request_key(FORMAT, write, source, fields)


@wire_errors("Gemini")
def read_response(response: Any, *, context: Any = None) -> Message:
    """
    The model message of a GenerateContentResponse (SDK object or dict, snake or
    camel case): the first candidate's parts, with usage, the model version and
    the finish reason (``metadata["finish_reason"]``, e.g. ``"MAX_TOKENS"`` for
    a reply cut with no parts: an empty message, which ``write`` leaves out).

    Gemini may send calls without ids. Pass *context* (the context, snapshot
    or messages the request was written from) and each such call is named
    ``gemini-call-<n>``, the first free *n* in the context, so a tool loop never
    gives two calls one id; an id in the reply that ``write`` gave a reused call
    is the context's own id again. Without *context*, an id-less call is named
    after the reply's content (``gemini-call-<sha256 prefix>``), so different
    replies give different ids.

    >>> from workingctx import Message, WorkingContext
    >>> reply = {"candidates": [{"content": {"role": "model", "parts": [
    ...     {"function_call": {"name": "weather", "args": {"city": "Oslo"}}}]}}]}
    >>> ctx = WorkingContext(messages=[Message.user("Weather in Oslo, twice?")])
    >>> ctx = ctx.append(read_response(reply, context=ctx)).append(Message.tool("4C", call_id="gemini-call-1"))
    >>> read_response(reply, context=ctx).call_ids
    ('gemini-call-2',)
    """
    data = _object(response)
    if data is None or not data.get("candidates"):
        msg = "not a Gemini response with candidates; pass the result of models.generate_content"
        raise ArgumentValueError(msg, argument="response", value=response)
    candidate = _fields(expect_mapping(expect_list(data["candidates"], "candidates")[0], "candidates[0]"))
    content = _fields(expect_mapping(candidate.get("content") or {}, "candidates[0].content"))
    if context is None:
        seed = hashlib.sha256(canonical_json(sdk_form(content)).encode("utf-8", "surrogatepass")).hexdigest()[:12]
        reader = _Reader(seed=seed)
        renamed: dict[str, str] = {}
    else:
        messages = messages_of(context)
        reader = _Reader(taken={i for m in messages for i in (*m.call_ids, *m.result_ids)})
        renamed = unique_call_ids(messages)[1]
    parts = tuple(map(reader.part, expect_list(content.get("parts") or [], "parts")))
    reason = candidate.get("finish_reason")
    metadata = {"finish_reason": reason} if isinstance(reason, str) else {}
    message = engine.reply(
        data, parts, usage=Usage.from_google, usage_key="usage_metadata", model_key="model_version", metadata=metadata
    )
    return original_ids(message, renamed)
