"""
The Anthropic adapter: lossless round trips validated by the SDK's own types,
cross-format writes, ids, checks, responses and cache breakpoints.
"""

from __future__ import annotations

import base64
import itertools
import re
import struct
from pathlib import Path
from typing import Any

import attrs
import pytest
from anthropic.types import Message as SDKMessage
from anthropic.types import MessageParam, TextBlockParam, ThinkingConfigParam, ToolParam
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionMessageParam
from pydantic import TypeAdapter

from tests.wire_strategies import anthropic_bodies, chat_messages
from workingctx import Message, ToolCall, WorkingContext
from workingctx.adapters import ProviderError, anthropic, google, openai_chat
from workingctx.exceptions import ArgumentTypeError
from workingctx.messages import ImageBlock, MediaRef, ReasoningBlock, TextBlock, ToolResultBlock
from workingctx.pricing import context_window

MESSAGES = TypeAdapter(list[MessageParam])
SYSTEM = TypeAdapter(str | list[TextBlockParam])


def valid(body):
    """
    Validate a body's messages and system with the SDK's own param types; return it.
    """
    MESSAGES.validate_python(body["messages"])
    if "system" in body:
        SYSTEM.validate_python(body["system"])
    return body


@given(anthropic_bodies())
def test_round_trip_is_exact(body):
    """
    write(read(p)) == p: signatures, redacted thinking, cache_control, images in results, all untouched.
    """
    assert anthropic.write(anthropic.read(valid(body))) == body


@given(chat_messages(portable=True))
def test_openai_transcripts_write_valid_anthropic(messages):
    """
    Any Chat Completions transcript, read and written for Anthropic, passes the checks and the SDK types.
    """
    ctx = openai_chat.read(messages)
    body = valid(anthropic.write(ctx))
    assert anthropic.check(body) == ()
    roles = [m["role"] for m in body["messages"]]
    assert all(a != b or a == "user" for a, b in itertools.pairwise(roles))


@given(anthropic_bodies())
def test_anthropic_transcripts_write_valid_openai(body):
    """
    An Anthropic transcript written for Chat Completions drops the thinking and validates.
    """
    out = openai_chat.write(anthropic.read(body))
    TypeAdapter(list[ChatCompletionMessageParam]).validate_python(out["messages"])
    assert openai_chat.check(out) == ()


def test_ids_made_to_fit_and_read_back():
    """
    Ids outside ^[a-zA-Z0-9_-]+$ are encoded on the way out and decoded on the way in.
    """
    messages = [
        Message.user("go"),
        Message.assistant(tool_calls=[ToolCall("functions.read:0", "read", {"p": 1})]),
        Message.tool("ok", call_id="functions.read:0"),
    ]
    body = valid(anthropic.write(messages))
    wire = body["messages"][1]["content"][0]["id"]
    assert anthropic.ID_PATTERN.fullmatch(wire)
    assert anthropic.read(body).messages[1].call_ids == ("functions.read:0",)


def test_tail_system_message_leaves_the_cached_system_alone():
    """
    A system message in the tail is sent inside a user turn; the top-level system is unchanged.
    """
    base = [Message.system("rules"), Message.user("a"), Message.assistant("b")]
    later = [*base, Message.system("new rule"), Message.user("c")]
    first, second = anthropic.write(base), anthropic.write(later)
    assert first["system"] == second["system"] == "rules"
    assert second["messages"][2]["role"] == "user"
    assert "new rule" in str(second["messages"][2]["content"])


def test_other_providers_thinking_is_dropped():
    """
    Reasoning produced by OpenAI never reaches Anthropic; Anthropic's own is replayed.
    """
    theirs = ReasoningBlock("x", encrypted="gAAA", provider="openai")
    ours = ReasoningBlock("y", signature="sig", provider="anthropic")
    body = anthropic.write([Message.user("q"), Message("assistant", [theirs, ours])])
    assert body["messages"][1]["content"] == [{"type": "thinking", "thinking": "y", "signature": "sig"}]


def test_write_lists_every_problem():
    """
    An unanswered call and an orphan result both appear; repair closes and drops them.
    """
    messages = [
        Message.user("q"),
        Message.assistant(tool_calls=[ToolCall("a", "f")]),
        Message.user("next"),
        Message.tool("x", call_id="zz"),
    ]
    with pytest.raises(ProviderError) as info:
        anthropic.write(messages)
    assert {p.rule for p in info.value.problems} == {"dangling-call", "orphan-result"}
    body = valid(anthropic.write(messages, repair=True))
    assert body["messages"][2]["content"][0]["tool_use_id"] == "a"


def test_cache_plan_hook():
    """
    A plan's breakpoints land as cache_control on the last block of the messages named.
    """

    @attrs.frozen
    class Point:
        """A breakpoint."""

        index: int
        ttl: str | None

    @attrs.frozen
    class Plan:
        """A plan."""

        breakpoints: tuple[Point, ...]

    ctx = WorkingContext(messages=[Message.system("rules"), Message.user("long document")])
    body = valid(anthropic.write(ctx, cache=Plan((Point(0, "1h"), Point(1, None)))))
    assert body["system"] == [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}


def test_read_response_with_thinking_and_cache_split():
    """
    A response object gives thinking with its signature, the call, and 5m/1h cache writes apart.
    """
    response = SDKMessage.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [
                {"type": "thinking", "thinking": "plan", "signature": "sig=="},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 10,
                "output_tokens": 5,
                "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 300,
                "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
            },
        }
    )
    message = anthropic.read_response(response)
    assert message.content[0] == ReasoningBlock("plan", signature="sig==", provider="anthropic")
    assert message.call_ids == ("toolu_1",)
    assert message.usage is not None
    assert (
        message.usage.cache_write_tokens,
        message.usage.cache_write_1h_tokens,
        message.usage.cache_write_5m_tokens,
    ) == (300, 200, 100)
    assert message.metadata["model"] == "claude-sonnet-4-6"


def test_tool_message_with_result_blocks_keeps_their_output():
    """
    A tool message whose content is result blocks sends each result's output
    (it was written as an empty result); other blocks join the message's own result.
    """
    call = Message("assistant", "", tool_calls=(ToolCall("c1", "f", {}), ToolCall("c2", "g", {})))
    ctx = WorkingContext(
        messages=[
            Message("user", "q"),
            call,
            Message("tool", (ToolResultBlock("c1", "the output"), TextBlock("and a note")), tool_call_id="c1"),
            Message("tool", (ToolResultBlock("c2", "second"),), tool_call_id="c2"),
        ]
    )
    results = anthropic.write(ctx)["messages"][2]["content"]
    first = [{"type": "text", "text": "the output"}, {"type": "text", "text": "and a note"}]
    assert [
        {"type": "tool_result", "tool_use_id": "c1", "content": first},
        {"type": "tool_result", "tool_use_id": "c2", "content": "second"},
    ] == results


@pytest.mark.parametrize("tools", [0, 1, 2])
def test_breakpoints_on_tool_definitions_count_with_the_others(tools):
    """
    A tool definition carrying ``cache_control`` is one of the four blocks
    Anthropic takes (the request's prefix starts with the tools): three
    breakpoints in the messages and one on a tool are taken, a second tool's
    is a fifth, a ``cache-breakpoints`` problem naming it.
    """
    mark = {"cache_control": {"type": "ephemeral"}}
    tool = {"name": "search", "description": "search", "input_schema": {"type": "object"}}
    body = {
        "tools": [{**tool, "name": f"search_{n}", **(mark if n < tools else {})} for n in range(3)],
        "messages": [{"role": "user", "content": [{"type": "text", "text": f"t{n}", **mark} for n in range(3)]}],
    }
    TypeAdapter(list[ToolParam]).validate_python(body["tools"])
    problems = [p for p in anthropic.check(valid(body)) if p.rule == "cache-breakpoints"]
    if tools <= 1:
        assert problems == []
    else:
        assert len(problems) == 1
        assert problems[0].message.startswith("5 cache breakpoints (tools[0], tools[1], messages[0].content[0]")


@given(
    system=st.integers(0, 3),
    texts=st.integers(0, 4),
    results=st.integers(0, 3),
    inner=st.integers(0, 2),
    automatic=st.booleans(),
)
def test_more_than_four_cache_breakpoints_are_refused(system, texts, results, inner, automatic):
    """
    Anthropic takes at most four blocks with ``cache_control`` in a request,
    the automatic (top-level) one included, counting those in a tool result's
    content (``A maximum of 4 blocks with cache_control may be provided``):
    more is a ``cache-breakpoints`` problem of the payload, of the context
    read from it, and of ``write``, naming every marked block; four or fewer
    are written as they came.
    """
    mark = {"cache_control": {"type": "ephemeral"}}
    calls = [{"type": "tool_use", "id": f"toolu_{n}", "name": "f", "input": {}} for n in range(max(results, 1))]
    answers = [
        {
            "type": "tool_result",
            "tool_use_id": f"toolu_{n}",
            "content": [{"type": "text", "text": "r", **(mark if n < inner else {})}],
            **(mark if n < results else {}),
        }
        for n in range(len(calls))
    ]
    body = {
        "system": [{"type": "text", "text": f"s{n}", **mark} for n in range(system)] or "be brief",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": f"t{n}", **mark} for n in range(texts)] or "go"},
            {"role": "assistant", "content": calls},
            {"role": "user", "content": answers},
        ],
    }
    count = system + texts + results + min(inner, len(calls))
    over = count + automatic > anthropic.MAX_BREAKPOINTS
    payload = {**body, "cache_control": {"type": "ephemeral"}} if automatic else body
    assert [p.rule for p in anthropic.check(payload) if p.rule == "cache-breakpoints"] == (
        ["cache-breakpoints"] if over else []
    )
    ctx = anthropic.read(body)
    if over:
        with pytest.raises(ProviderError, match="cache-breakpoints") as raised:
            anthropic.write(ctx, cache="auto" if automatic else False)
        named = count if count > anthropic.MAX_BREAKPOINTS else count + automatic  # the blocks alone, or with it
        assert raised.value.problems[0].message.startswith(f"{named} cache breakpoints")
    else:
        written = anthropic.write(ctx, cache="auto" if automatic else False)
        assert written["messages"] == body["messages"]
        TypeAdapter(list[MessageParam]).validate_python(written["messages"])


def _turn_texts(body):
    """
    The text of each user and assistant turn of an Anthropic body, tool results left aside.
    """
    out = []
    for turn in body["messages"]:
        content = turn["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        out.extend((turn["role"], b["text"]) for b in blocks if b["type"] == "text")
    return out


def _chat_texts(messages):
    """
    The text of each user and assistant message of a Chat Completions body
    (a document known by URL alone, which Chat has no part for, is named in a text of its own: left aside).
    """
    out = []
    for message in messages:
        if message["role"] not in {"user", "assistant"}:
            continue
        content = message.get("content") or []
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        texts = (p["text"] for p in parts if p["type"] == "text")
        out.extend((message["role"], t) for t in texts if not t.startswith("[document: "))
    return out


@given(anthropic_bodies())
def test_text_with_citations_is_text_for_every_format(body):
    """
    A text block is text whatever citations it carries (none, ``None`` as the
    SDK's ``model_dump`` writes them unset, a document's or a web search's):
    written for Chat Completions every turn's text is there, in order, and
    for Anthropic the citations come back as they were.
    """
    ctx = anthropic.read(body)
    written = openai_chat.write(ctx)["messages"]
    assert _chat_texts(written) == _turn_texts(body)
    assert anthropic.write(ctx) == body


def test_a_cited_answer_from_the_sdk_is_sent_to_other_providers():
    """
    A reply as the SDK gives it (thinking, a web search with its results, a
    cited text, a call), its blocks dumped into the next request as
    ``model_dump`` writes them: the answer's text reaches every other format,
    and Anthropic gets the blocks back as they were.
    """
    from workingctx.adapters import google, langchain, openai_responses  # noqa: PLC0415

    reply = SDKMessage.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
            "content": [
                {"type": "thinking", "thinking": "search first", "signature": "c2ln"},
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "oslo"}},
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_1",
                    "content": [
                        {"type": "web_search_result", "encrypted_content": "RW5j", "title": "Oslo", "url": "https://a"}
                    ],
                },
                {
                    "type": "text",
                    "text": "It rains in Oslo.",
                    "citations": [
                        {
                            "type": "web_search_result_location",
                            "cited_text": "rain",
                            "encrypted_index": "RW5j",
                            "title": "Oslo",
                            "url": "https://a",
                        }
                    ],
                },
                {"type": "tool_use", "id": "toolu_1", "name": "umbrella", "input": {}},
            ],
        }
    )
    final = SDKMessage.model_validate(
        {**reply.model_dump(), "content": [{"type": "text", "text": "Take an umbrella."}], "stop_reason": "end_turn"}
    )
    body = {
        "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": [b.model_dump() for b in reply.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "yes"}]},
            {"role": "assistant", "content": [b.model_dump() for b in final.content]},
        ]
    }
    valid(body)
    ctx = anthropic.read(body)
    assert anthropic.write(ctx) == body
    assert _chat_texts(openai_chat.write(ctx)["messages"])[1:] == [
        ("assistant", "It rains in Oslo."),
        ("assistant", "Take an umbrella."),
    ]
    for module in (openai_responses, google, langchain):
        said = [m.text() for m in module.read(module.write(ctx)).messages if m.role == "assistant"]
        assert "It rains in Oslo." in said[0], module.__name__
        assert said[-1] == "Take an umbrella.", module.__name__
    assert anthropic.read_response(reply, context=ctx).text() == "It rains in Oslo."


def _image_bytes(kind, width, height, padding):
    """
    The header of an image of *kind* and size (a JPEG's frame after EXIF segments of *padding* bytes).
    """
    if kind == "png":
        return b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + struct.pack(">II", width, height) + b"\x08\x02\x00\x00\x00"
    if kind == "gif":
        return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00"
    if kind == "webp":
        sizes = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
        return b"RIFF\x16\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00" + sizes
    chunks = [min(65_000, padding - start) for start in range(0, padding, 65_000)]
    exif = b"".join(b"\xff\xe1" + struct.pack(">H", chunk + 2) + b"\x00" * chunk for chunk in chunks)
    return b"\xff\xd8" + exif + b"\xff\xc0\x00\x11\x08" + struct.pack(">HH", height, width) + b"\x03" + b"\x00" * 9


_SIGNED = {f"image/{kind}": _image_bytes(kind, 16, 9, 0) for kind in ("png", "jpeg", "gif", "webp")}
_images = st.builds(
    lambda kind, tail: (kind, base64.b64encode(_SIGNED[kind] + tail).decode("ascii")),
    st.sampled_from(sorted(_SIGNED)),
    st.binary(max_size=40),
)


@given(_images, st.sampled_from(sorted(_SIGNED)), st.booleans())
def test_an_image_labelled_with_another_type_than_its_bytes_is_sent_as_its_bytes_say(image, label, in_result):
    """
    Anthropic refuses an inline image whose ``media_type`` is not the type of
    its bytes ("The image was specified using the image/jpeg media type, but
    the image appears to be a image/png image"), in a user turn or in a tool
    result. ``check`` reports such a payload as ``media-type``, naming the
    block; ``write`` labels the image as its bytes say, and a context from
    another format (a data URL of the wrong type, or no type at all) is written so too.
    """
    kind, data = image
    block = {"type": "image", "source": {"type": "base64", "media_type": label, "data": data}}
    turns = [{"role": "user", "content": [block, {"type": "text", "text": "what is it?"}]}]
    path = "content[0]"
    if in_result:
        turns = [
            {"role": "user", "content": "take a screenshot"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [block]}]},
        ]
        path = "content[0].content[0]"
    body = {"messages": turns}
    problems = anthropic.check(valid(body))
    if label == kind:
        assert problems == ()
    else:
        assert [(p.rule, p.index) for p in problems] == [("media-type", len(turns) - 1)]
        assert f"{path} is an image labelled {label!r} whose bytes are {kind!r}" in problems[0].message
    written = valid(anthropic.write(anthropic.read(body)))
    sent = written["messages"][-1]["content"][0]
    assert (sent["content"][0] if in_result else sent)["source"] == {"type": "base64", "media_type": kind, "data": data}
    assert anthropic.check(written) == ()
    for url in (f"data:{label};base64,{data}", None):
        image_block = ImageBlock(
            MediaRef(kind="data", data_base64=data) if url is None else MediaRef(kind="data", data_base64=url)
        )
        out = anthropic.write([Message.user([image_block, TextBlock("what is it?")])])
        assert out["messages"][0]["content"][0]["source"]["media_type"] == kind


def test_an_image_of_a_type_anthropic_does_not_take_is_unsendable():
    """
    Anthropic takes JPEG, PNG, GIF and WebP images only: an inline image of
    another type (a BMP) is an ``unsendable`` problem naming its type, and
    write sends nothing.
    """
    chat = [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/bmp;base64,Qk0eAAAA"}}]}
    ]
    problems = anthropic.check(openai_chat.read(chat))
    assert [p.rule for p in problems] == ["unsendable"]
    assert "'image/bmp'" in problems[0].message
    with pytest.raises(ProviderError, match="unsendable"):
        anthropic.write(openai_chat.read(chat))


_sides = st.sampled_from([1, 640, 1999, 2000, 2001, 4000, 7999, 8000, 8001, 9000])
_sized_image = st.tuples(
    st.sampled_from(["png", "jpeg", "gif", "webp"]), _sides, _sides, st.sampled_from([0, 300, 60_000, 150_000])
)
# a few images, or about as many as make a request one of many images (more than 20)
_sized_images = (st.integers(1, 4) | st.integers(19, 23)).flatmap(
    lambda n: st.lists(_sized_image, min_size=n, max_size=n)
)


@given(_sized_images, st.booleans())
def test_images_larger_than_anthropic_takes_are_problems(images, in_results):
    """
    Anthropic refuses an image with a side over 8000 pixels, and over 2000
    in a request of more than 20 images ("At least one of the image
    dimensions exceed max allowed size for many-image requests: 2000
    pixels"), which a growing transcript of screenshots reaches. Each such
    image is an ``image-dimensions`` problem naming its size and the limit,
    read from its header (a JPEG's after a long EXIF segment too), in a user
    turn or a tool result; ``write`` refuses the request, and sends it when none is.
    """
    limit = 2000 if len(images) > 20 else 8000
    blocks = []
    for kind, width, height, padding in images:
        data = base64.b64encode(_image_bytes(kind, width, height, padding)).decode("ascii")
        blocks.append({"type": "image", "source": {"type": "base64", "media_type": f"image/{kind}", "data": data}})
    if in_results:
        turns = [
            {"role": "user", "content": "take the screenshots"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "shots", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": blocks}]},
        ]
    else:
        turns = [{"role": "user", "content": [*blocks, {"type": "text", "text": "compare them"}]}]
    body = {"messages": turns}
    too_large = [f"{w}x{h} pixels" for _, w, h, _ in images if max(w, h) > limit]
    problems = anthropic.check(valid(body))
    assert [p.rule for p in problems] == ["image-dimensions"] * len(too_large)
    assert [p.message.split(" is an image of ")[1].split(",")[0] for p in problems] == too_large
    assert all(f"takes {limit} pixels a side at most" in p.message for p in problems)
    if too_large:
        with pytest.raises(ProviderError, match="image-dimensions"):
            anthropic.write(anthropic.read(body))
    else:
        assert valid(anthropic.write(anthropic.read(body))) == body


@pytest.mark.parametrize(
    ("model", "limit"),
    [
        (None, 600),  # no model named: what no model refuses
        ("claude-opus-4-6", 600),  # a context window of 1M tokens
        ("claude-sonnet-4-5-20250929", 100),  # a context window of 200k tokens
        ("claude-haiku-4-5", 100),
        ("a-model-nobody-knows", 600),
    ],
)
@pytest.mark.parametrize("over", [0, 1])
def test_more_images_than_anthropic_takes_are_a_problem(model, limit, over):
    """
    Anthropic takes 600 images in a request at most, 100 on a model with a
    context window of 200k tokens ("Too much media: 0 document pages + 102
    images > 100"). In a payload naming its model, more than that model takes
    is a ``media-count`` problem naming the number, the limit and the first
    turn holding one; ``write``, which is not told the model, refuses only
    more than any model takes, and writes back what some model takes.
    """
    count = limit + over
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": "R0lGODlhAQABAAAAAA=="}}
    body: dict[str, Any] = {
        "messages": [
            {"role": "user", "content": "look"},
            {"role": "assistant", "content": "at what?"},
            {"role": "user", "content": [image] * count},
        ]
    }
    if model is not None:
        body["model"] = model
    problems = anthropic.check(body)
    if not over:
        assert problems == ()
    else:
        assert [(p.rule, p.index) for p in problems] == [("media-count", 2)]
        assert f"holds {count} images, from messages[2] on, and Anthropic takes {limit} at most" in problems[0].message
        assert (f"on {model}, a model with a context window of 200k tokens or less" in problems[0].message) == (
            limit == 100
        )
    ctx = anthropic.read(body)
    if count > 600:
        with pytest.raises(ProviderError, match="media-count"):
            anthropic.write(ctx)
    else:
        assert anthropic.write(ctx)["messages"] == body["messages"]


FIVE_PAGES = Path(__file__).parents[1] / "data" / "five-pages-chromium.pdf"
"""A PDF of five pages, as Chromium prints one."""


def _pdf_document(data: bytes | str) -> dict[str, Any]:
    """
    An Anthropic document block holding the PDF *data* inline (bytes, or their base64 text).
    """
    text = base64.b64encode(data).decode("ascii") if isinstance(data, bytes) else data
    return {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": text}}


@pytest.mark.parametrize("images", [95, 96])
def test_the_pages_of_pdf_documents_count_with_the_images(images):
    """
    Anthropic counts the pages of documents with the images ("Too much
    media: 0 document pages + 102 images > 100"): a five-page PDF, inline in
    a tool result, and 96 images are more than a model with a context window
    of 200k tokens takes, a ``media-count`` problem naming both; 95 are not.
    ``write`` (600) writes either back as it came.
    """
    document = _pdf_document(FIVE_PAGES.read_bytes())
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": "R0lGODlhAQABAAAAAA=="}}
    body = valid(
        {
            "model": "claude-haiku-4-5",
            "messages": [
                {"role": "user", "content": [*[image] * images, {"type": "text", "text": "read the report"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "fetch", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [document]}]},
            ],
        }
    )
    problems = anthropic.check(body)
    if images + 5 <= 100:
        assert problems == ()
    else:
        assert [(p.rule, p.index) for p in problems] == [("media-count", 0)]
        assert f"holds {images} images and 5 pages of PDF documents, from messages[0] on" in problems[0].message
        assert "takes 100 at most on claude-haiku-4-5" in problems[0].message
    assert anthropic.write(anthropic.read(body))["messages"] == body["messages"]


def test_a_paused_turn_sent_back_is_no_prefill():
    """
    A turn the model paused on a server tool (``pause_turn``) is sent back as
    it came so the model goes on with it: it ends the request, yet it is no
    prefill, on any model.
    """
    search = {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "news"}}
    found = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": []}
    for content in ([{"type": "text", "text": "I'll search."}, search], [search, found]):
        body = {
            "model": "claude-opus-4-6",
            "messages": [{"role": "user", "content": "find the news"}, {"role": "assistant", "content": content}],
        }
        assert [p.rule for p in anthropic.check(valid(body)) if p.rule == "prefill"] == []
    assert anthropic.takes_prefill("claude-opus-4-6") is False
    with pytest.raises(ArgumentTypeError, match="model must be a model name"):
        anthropic.takes_prefill(None)  # type: ignore[arg-type]


def test_the_media_count_names_what_the_request_holds():
    """
    The ``media-count`` problem names the images and the pages a request
    holds, leaving out a kind it holds none of; a model name no table knows,
    or a blank one, takes what no model refuses.
    """
    document = _pdf_document(FIVE_PAGES.read_bytes())
    body: dict[str, Any] = {"messages": [{"role": "user", "content": [document] * 21}]}
    for model, problems in (("claude-haiku-4-5", 1), ("   ", 0), ("not a model at all", 0)):
        found = anthropic.check(valid({**body, "model": model}))
        assert len(found) == problems
    (problem,) = anthropic.check(valid({**body, "model": "claude-haiku-4-5"}))
    assert "holds 105 pages of PDF documents, from messages[0] on" in problem.message
    assert "images" not in problem.message.split(", from")[0]


def test_inline_media_longer_than_a_request_body_anthropic_takes_is_a_problem():
    """
    Anthropic takes a request body of 32 MB at most ("request_too_large"):
    inline images and documents whose base64 alone is longer are a
    ``request-size`` problem naming the bytes and the first turn holding any,
    and ``write`` refuses them; as long as the body, they are sent.
    """
    head = base64.b64encode(_image_bytes("png", 100, 100, 0)).decode("ascii")
    image = head + "A" * (8 * 1024 * 1024 - len(head))  # 8 MiB of base64: under the 10 MB an image may take

    def body(extra: int) -> dict[str, Any]:
        pdf = base64.b64encode(b"%PDF-1.4 " + b"x" * extra).decode("ascii") if extra else ""
        blocks: list[dict[str, Any]] = [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": image}}
        ] * 4
        if pdf:
            source = {"type": "base64", "media_type": "application/pdf", "data": pdf}
            blocks.append({"type": "document", "source": source})
        return {
            "messages": [
                {"role": "user", "content": "look"},
                {"role": "assistant", "content": "at what?"},
                {"role": "user", "content": [*blocks, {"type": "text", "text": "these"}]},
            ]
        }

    assert [p.rule for p in anthropic.check(body(0))] == []  # exactly 32 MiB
    (problem,) = anthropic.check(body(30))
    assert (problem.rule, problem.index) == ("request-size", 2)
    total = 4 * len(image) + len(base64.b64encode(b"%PDF-1.4 " + b"x" * 30))
    assert f"from messages[2] on, hold {total:,} bytes of base64" in problem.message
    with pytest.raises(ProviderError, match="request-size"):
        anthropic.write(anthropic.read(body(30)))


def test_a_pdf_written_again_is_read_once(monkeypatch):
    """
    A request writes the same documents again and again: each is read for
    its pages once, and what is kept of it is its count, not its text.
    """
    read: list[int] = []

    def counted(data: bytes) -> int | None:
        read.append(len(data))
        return 5

    monkeypatch.setattr(anthropic, "pdf_pages", counted)
    pdf = base64.b64encode(b"%PDF-1.7 a document of its own " + bytes(range(256))).decode()
    document = _pdf_document(pdf)
    ctx = anthropic.read({"messages": [{"role": "user", "content": [document, {"type": "text", "text": "sum up"}]}]})
    for _ in range(3):
        anthropic.write(ctx)
    assert len(read) == 1
    kept = anthropic._PAGES_KNOWN.items()  # noqa: SLF001  # what the cache holds is under test
    assert all(type(part) is int for key, count in kept for part in (*key, count))


@pytest.mark.parametrize(
    ("model", "takes"),
    [
        ("claude-haiku-4-5", True),
        ("claude-sonnet-4-5-20250929", True),
        ("claude-sonnet-4-20250514", True),  # Sonnet 4, dated: the date is no minor version
        ("claude-3-7-sonnet-latest", True),
        ("claude-opus-4-6", False),
        ("claude-sonnet-4-6", False),
        ("anthropic/claude-opus-4-7-20260401", False),
        ("anthropic.claude-opus-4-8-v1:0", False),  # a Bedrock model id
        ("claude-opus-5", False),
        ("claude-mythos-5-2", False),
        ("anthropic/claude-opus-4.6", False),  # a dotted version, as OpenRouter names models
        ("CLAUDE-OPUS-4-6", False),
        ("claude-code/claude-sonnet-4-6", False),
        (None, True),  # no model named: not checked
    ],
)
@pytest.mark.parametrize("ends_with", ["assistant", "user"])
def test_a_prefill_on_a_model_that_takes_none_is_a_problem(model, takes, ends_with):
    """
    Claude Opus 4.6, Sonnet 4.6 and later models refuse a request ending in
    an assistant turn ("Prefilling assistant messages is not supported for
    this model"): in a payload naming such a model, a final assistant turn is
    a ``prefill`` problem naming the turn and the model, whatever comes
    before it (a system prompt); a request ending in a user turn, or on a
    model that takes a prefill, has none.
    """
    body: dict[str, Any] = {
        "system": "answer in JSON",
        "messages": [{"role": "user", "content": "three colours"}, {"role": "assistant", "content": "{"}],
    }
    if ends_with == "user":
        body["messages"].append({"role": "user", "content": "go on"})
    if model is not None:
        body["model"] = model
    found = [p for p in anthropic.check(valid(body)) if p.rule == "prefill"]
    if takes or ends_with == "user":
        assert found == []
    else:
        assert [(p.index, p.rule) for p in found] == [(2, "prefill")]  # the system prompt is message 0
        assert f"(messages[1], a prefill), and {model} takes none" in found[0].message


def test_the_image_limit_of_a_model_is_its_context_window_as_genai_prices_records_it():
    """
    A model takes 100 images when genai-prices records a context window of
    200k tokens or less for it, and 600 otherwise: with a larger window, none
    recorded, or a model genai-prices does not know.
    """
    assert anthropic.max_images() == anthropic.max_images("") == anthropic.max_images(7) == 600
    for model in ("claude-haiku-4-5", "claude-3-7-sonnet-latest", "claude-opus-4-1"):
        assert context_window(model) == 200_000
        assert anthropic.max_images(model) == 100
    assert context_window("claude-sonnet-4-6") == 1_000_000
    assert anthropic.max_images("claude-sonnet-4-6") == 600
    assert context_window("a-model-nobody-knows") is None


@pytest.mark.usefixtures("without_genai_prices")
def test_without_genai_prices_a_model_takes_what_no_model_refuses():
    """
    Without genai-prices no context window is known: every model takes 600 images.
    """
    assert context_window("claude-haiku-4-5") is None
    assert anthropic.max_images("claude-haiku-4-5") == 600


def test_an_image_longer_than_anthropic_takes_is_a_problem():
    """
    Anthropic's API takes an image of 10 MB of base64 at most (5 MB until
    mid-2026, as on Amazon Bedrock and Google Cloud still: "image exceeds 5
    MB maximum: 6275800 bytes > 5242880 bytes"): an image of 6 MB is sent,
    and a longer one than 10 MB is an ``image-size`` problem.
    """
    head = base64.b64encode(_image_bytes("png", 100, 100, 0)).decode("ascii")
    limit = 10 * 1024 * 1024
    for length, found in ((6_275_800, []), (limit, []), (limit + 4, ["image-size"])):
        data = head + "A" * (length - len(head))
        body = {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
                    ],
                }
            ]
        }
        assert [p.rule for p in anthropic.check(body)] == found


@given(
    st.text(min_size=1, max_size=70)
    | st.sampled_from(["mcp.server:tool", "Research Agent", "a" * 65, "get_weather", "x-1"])
)
def test_a_tool_name_anthropic_refuses_is_a_problem_naming_it(name):
    """
    Anthropic takes a ``tool_use`` name of 1 to 64 letters, digits, ``_``
    and ``-`` ("tool_use.name: String should match pattern
    '^[a-zA-Z0-9_-]{1,64}$'"); Gemini's names may hold dots and colons (an
    MCP tool's ``server:tool``). Any other name is a ``name-format`` problem
    naming it and a name Anthropic takes, in a payload and in a context from
    Gemini, and ``write`` refuses it.
    """
    takes = re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name) is not None
    body = {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": name, "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
        ]
    }
    call = {"function_call": {"id": "t1", "name": name, "args": {}}}
    gemini = {
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [call]},
            {"role": "user", "parts": [{"function_response": {"id": "t1", "name": name, "response": {"r": "ok"}}}]},
        ]
    }
    for source in (body, google.read(gemini)):
        found = [p for p in anthropic.check(source) if p.rule == "name-format"]
        assert [p.index for p in found] == ([] if takes else [1])
        if not takes:
            assert repr(name) in found[0].message
            suggested = found[0].message.split("e.g. ")[1].rstrip(")")
            assert re.fullmatch(r"'[a-zA-Z0-9_-]{1,64}'", suggested)
            with pytest.raises(ProviderError, match="name-format"):
                anthropic.write(source if source is not body else anthropic.read(body))


THINKING = TypeAdapter(ThinkingConfigParam)
_CONFIGS = {
    "enabled": {"type": "enabled", "budget_tokens": 2048},
    "adaptive": {"type": "adaptive"},
    "disabled": {"type": "disabled"},
    "between tools": {"type": "between_tools"},
}
_OPENINGS = {
    "thinking": {"type": "thinking", "thinking": "Look it up first.", "signature": "EqQBCgIYAhIM"},
    "redacted_thinking": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
    "text": {"type": "text", "text": "Let me look."},
    "tool_use": None,  # the turn starts with its call
}


@st.composite
def _tool_loops(draw, opening: str, config: str | None):
    """
    An Anthropic request whose last turn may be a tool-use loop still going
    on, its assistant turn opened by *opening*, with the thinking
    configuration *config*: (body, how the request ends, the index of the
    turn's first assistant message in the context read from it).
    """
    ids = (f"toolu_{n:02d}" for n in itertools.count())

    def call_turn(opening: str | None) -> tuple[dict, dict]:
        calls = [
            {"type": "tool_use", "id": next(ids), "name": "weather", "input": {"city": city}}
            for city in draw(st.lists(st.sampled_from(["Oslo", "Rome", "Lima"]), min_size=1, max_size=2))
        ]
        head = [] if opening is None or _OPENINGS[opening] is None else [dict(_OPENINGS[opening])]
        results = [{"type": "tool_result", "tool_use_id": c["id"], "content": "sunny"} for c in calls]
        return {"role": "assistant", "content": [*head, *calls]}, {"role": "user", "content": results}

    messages: list[dict] = []
    for _ in range(draw(st.integers(0, 2))):  # earlier turns, ended with an answer
        messages.append({"role": "user", "content": "What is the weather?"})
        for step in range(draw(st.integers(0, 2))):
            messages.extend(call_turn(draw(st.sampled_from(list(_OPENINGS))) if step == 0 else None))
        messages.append({"role": "assistant", "content": "It is sunny."})
    messages.append({"role": "user", "content": "And now?"})
    first = len(messages)
    for step in range(draw(st.integers(1, 3))):
        later = draw(st.sampled_from([None, "thinking", "text"]))  # interleaved thinking may come later too
        messages.extend(call_turn(opening if step == 0 else later))
    ending = draw(st.sampled_from(["loop", "answered", "user text"]))
    if ending == "answered":
        messages.append({"role": "assistant", "content": "Sunny everywhere."})
    elif ending == "user text":
        messages[-1]["content"].append({"type": "text", "text": "Also, which is warmest?"})
    body: dict = {"model": "claude-sonnet-4-5", "max_tokens": 4096, "messages": messages}
    system = draw(st.booleans())
    if system:
        body["system"] = "You report the weather."
    if config is not None:
        body["thinking"] = THINKING.validate_python(_CONFIGS[config])
    return valid(body), ending, first + system


@pytest.mark.parametrize("config", [None, *_CONFIGS])
@pytest.mark.parametrize("opening", list(_OPENINGS))
@given(data=st.data())
def test_a_tool_loop_sent_without_its_thinking_first_is_a_problem_while_thinking_is_enabled(opening, config, data):
    """
    With manual extended thinking, Anthropic refuses a request whose final
    tool results continue an assistant turn that does not start with its
    thinking ("Expected `thinking` or `redacted_thinking`, but found
    `tool_use`. When `thinking` is enabled, a final `assistant` message must
    start with a thinking block"; opencode #3077, mastra #7799): ``check``
    on the body reports it at the turn's first assistant message. Adaptive
    thinking may start a turn with a call, a turn answered is over, later
    steps of the loop need no thinking, and a user turn with text of its
    own beside the results is taken as a new turn (not reported).
    """
    body, ending, first = data.draw(_tool_loops(opening, config))
    found = [p for p in anthropic.check(body) if p.rule == "thinking-not-first"]
    refused = config == "enabled" and ending == "loop" and opening not in {"thinking", "redacted_thinking"}
    assert [p.index for p in found] == ([first] if refused else [])
    if refused:
        assert f"with a {opening!r} block" in found[0].message
        assert found[0].message.startswith(f"messages[{first - ('system' in body)}] ")
    assert [p.rule for p in anthropic.check(body) if p.rule != "thinking-not-first"] == []
