"""
The one engine every wire format runs on. A :class:`Format` names a format,
the provider whose rules its requests obey, and the hooks that know its
shapes (how its body is written from checked messages, which blocks it has no
place for); :func:`build`, :func:`write`, :func:`check` and
:func:`request_key` do the rest the same way for every provider: ids re-keyed
where a provider needs each once, media-store references resolved or stood in
for, every rule checked before anything is sent. The helpers below read and
write what the formats share: content lists, unknown fields kept for a
lossless round trip, media as URLs, call arguments, results' text, grouped
turns and replies.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from workingctx.adapters._common import (
    Drops,
    Problem,
    answers_left_out,
    check_messages,
    expect_list,
    expect_mapping,
    is_workingctx,
    keyed_messages,
    media_problems,
    messages_of,
    ordered,
    original_ids,
    parse_data_url,
    prepare,
    refuse,
    request_key_of,
    store_ref_error,
    unique_call_ids,
    without_provider_calls,
)
from workingctx.frozen import thaw
from workingctx.messages import ContentBlock, MediaRef, Message, ToolCall, ToolResultBlock, Usage
from workingctx.validity import Provider

Body = Callable[[list[Message]], "tuple[dict[str, Any], Sequence[Problem]]"]
"""A format's body for checked messages, and the problems of its own wire rules (positions those of the messages)."""


@attrs.frozen
class Format:
    """
    What the engine needs to know of a wire format.
    """

    provider: Provider  # whose rules its requests obey; also the provider a refusal names
    body: Body
    lost: Callable[[Sequence[Message]], tuple[Problem, ...]]  # the blocks it has no place for
    unique_ids: bool = False  # a provider that needs each call id once per request: reused ids are re-keyed
    skipped: frozenset[str] = frozenset()  # rules of the provider this format does not apply
    messages: Callable[[Any], list[Message]] = messages_of  # the messages a source sends
    drops: Drops | None = None  # the reasoning and provider blocks it leaves out (the provider's own calls too)


def build(fmt: Format, messages: list[Message]) -> tuple[dict[str, Any], tuple[Problem, ...]]:
    """
    The body for *messages*, and every problem the provider would reject in it
    (positions are those of *messages*): the rules of the provider, unresolved
    media, blocks the format has no place for, then its own wire rules.
    Store references stand in for their bytes in the body and are never sent.
    """
    if fmt.unique_ids:
        messages = unique_call_ids(messages)[0]
    if fmt.drops is not None:
        messages = answers_left_out(messages, fmt.drops)
    unresolved = media_problems(messages)
    checked = without_provider_calls(messages, fmt.drops)
    found = check_messages(checked, provider=fmt.provider, drops=fmt.drops)
    rules = (p for p in found if p.rule not in fmt.skipped) if fmt.skipped else found
    body, wire = fmt.body(keyed_messages(messages) if unresolved else messages)
    return body, (*rules, *unresolved, *fmt.lost(messages), *wire)


def write(fmt: Format, messages: list[Message], *, repair: bool, store: Any, upload: Any) -> dict[str, Any]:
    """
    The body for *messages* (store references resolved through *store*,
    repaired if asked) if the provider would accept it; else ProviderError
    listing every problem.
    """
    body, problems = build(fmt, prepare(messages, store=store, upload=upload, repair=repair))
    if problems:
        raise refuse(problems, fmt.provider)
    return body


def check(fmt: Format, source: Any, payload: Callable[[Any], Iterable[Problem]]) -> tuple[Problem, ...]:
    """
    The problems ``write`` would raise for a context, or *payload*'s for a wire payload, by position.
    """
    if is_workingctx(source):
        return ordered(build(fmt, fmt.messages(source))[1])
    return ordered(payload(source))


def request_key(fmt: Format, write: Callable[[Any], Any], source: Any, fields: Mapping[str, Any]) -> str:
    """
    A key for exactly what *write* sends for *source* plus *fields*; media-store
    references stand as their sha256.
    """
    return request_key_of(write(keyed_messages(fmt.messages(source))), fields)


def reply(
    data: Mapping[str, Any],
    content: Any,
    *,
    usage: Callable[[Any], Usage],
    usage_key: str = "usage",
    model_key: str = "model",
    context: Any = None,
    metadata: Mapping[str, Any] | None = None,
    **fields: Any,
) -> Message:
    """
    The assistant message of a provider's reply *data*, with its usage and the
    model in ``metadata``. With *context* (what the request was written from),
    each id a writer gave a reused call is the context's own again. *metadata*
    adds to ``metadata``; *fields* are the message's (``role``, ``tool_calls``, ...).
    """
    used = usage(data[usage_key]) if data.get(usage_key) is not None else None
    about = {"model": data[model_key]} if model_key in data else {}
    fields.setdefault("role", "assistant")
    message = Message(fields.pop("role"), content, usage=used, metadata={**about, **(metadata or {})}, **fields)
    return message if context is None else original_ids(message, unique_call_ids(messages_of(context))[1])


# -- reading ---------------------------------------------------------------------------


def unknown(raw: Mapping[str, Any], known: Iterable[str]) -> dict[str, Any]:
    """
    The fields of *raw* workingctx does not model, kept so that writing gives them back.
    """
    return {k: v for k, v in raw.items() if k not in known}


def content_of(
    raw: Any, part: Callable[[Mapping[str, Any]], ContentBlock], what: str = "a content part"
) -> str | tuple[ContentBlock, ...]:
    """
    A message's content: text as it is, a list as the blocks *part* reads from its items.
    """
    if isinstance(raw, str):
        return raw
    return tuple(part(expect_mapping(item, what)) for item in expect_list(raw, "content"))


def media_of_url(url: str) -> MediaRef:
    """
    The media of an image URL: its inline bytes for a ``data:`` URL, else the URL.
    """
    data = parse_data_url(url)
    return (
        MediaRef(kind="url", url=url) if data is None else MediaRef(kind="data", data_base64=data[1], mime_type=data[0])
    )


# -- writing ---------------------------------------------------------------------------


def sendable(block: Any) -> None:
    """
    Raise the error of a media-store reference that reached a writer unresolved.
    """
    ref = getattr(block, "media", None)
    if ref is not None and ref.kind == "store":
        raise store_ref_error(ref)


def data_url(media: MediaRef, default_mime: str) -> str:
    """
    Inline bytes as a ``data:`` URL (of *default_mime* when the media names no type).
    """
    return f"data:{media.mime_type or default_mime};base64,{media.data_base64}"


def arguments_text(arguments: Any) -> str:
    """
    Call arguments as the compact JSON text OpenAI sends.
    """
    return json.dumps(thaw(arguments), ensure_ascii=False, separators=(",", ":"))


def call_text(call: ToolCall) -> str:
    """
    A call's arguments text: as it came, else its arguments as compact JSON.
    """
    return call.arguments_json if call.arguments_json is not None else arguments_text(call.arguments)


def result_text(block: ToolResultBlock) -> str:
    """
    A result's text for a format with no error flag: an error says so.
    """
    text = block.output_text()
    return f"error: {text}" if block.is_error and not text.startswith("error") else text


Turn = tuple[str, "dict[str, Any] | None", bool]
"""(role, wire turn or None when it sends nothing, native): native turns are sent
as they are; the others (results, system notes, calls) join a neighbour of their role."""


def grouped(
    messages: Sequence[Message],
    turn: Callable[[int, Message], Turn | None],
    join: Callable[[dict[str, Any], dict[str, Any]], None],
    *,
    after_empty: bool,
) -> tuple[list[dict[str, Any]], list[list[int]]]:
    """
    The wire turns of *messages* for a format that wants roles to alternate,
    and for each the positions of the messages written into it: a turn that is
    not native, or follows one, is *join*-ed into the one before when the role
    is the same. A message that sends nothing is left out, and the next joins
    its neighbour (always, with *after_empty*; else when it was native). A
    message whose turn is None (one the format writes nothing of, see
    :func:`sends_nothing`) is passed over as if it were not there.
    """
    out: list[dict[str, Any]] = []
    roles: list[str] = []
    origins: list[list[int]] = []
    merge_next = False
    for position, message in enumerate(messages):
        made = turn(position, message)
        if made is None:
            continue
        role, wire, native = made
        if wire is None:
            merge_next = after_empty or merge_next or native
            continue
        if out and roles[-1] == role and (not native or merge_next):
            join(out[-1], wire)
            origins[-1].append(position)
        else:
            out.append(wire)
            roles.append(role)
            origins.append([position])
        merge_next = not native
    return out, origins


class Where:
    """
    The "where" text of a wire turn, written only when a problem quotes it.
    """

    __slots__ = ("index", "kind", "name", "origins")

    def __init__(self, index: int, origins: Sequence[Sequence[int]] | None, name: str, kind: str) -> None:
        self.index = index
        self.origins = origins
        self.name = name
        self.kind = kind

    def __str__(self) -> str:
        if self.origins is None:
            return f"{self.name}[{self.index}]"
        named = ", ".join(map(str, self.origins[self.index]))
        return f"the {self.kind} {self.name}[{self.index}] (written from message(s) {named})"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    @classmethod
    def of(cls, index: int, origins: Sequence[Sequence[int]] | None, name: str, kind: str) -> tuple[int, Where]:
        """
        (problem index, "where" text) for the wire turn at *index*: with
        *origins*, the first context message written into it.
        """
        return (index if origins is None else origins[index][0]), cls(index, origins, name, kind)


def at_context(problems: Iterable[Problem], by: int) -> tuple[Problem, ...]:
    """
    The problems of a payload's wire turns at the positions of the context
    read from it: *by* positions on (its system messages, sent outside the turns).
    """
    return tuple(p if p.index is None else attrs.evolve(p, index=p.index + by) for p in problems)


def shifted(origins: Sequence[Sequence[int]], by: int) -> list[list[int]]:
    """
    *origins* moved by *by* positions (the system messages written elsewhere).
    """
    return [[by + i for i in turn] for turn in origins]
