"""
Adapters at the edges: shapes they keep whole, shapes they refuse (with the
value and the fix named), and blocks that one format cannot carry for another.
"""

from __future__ import annotations

import attrs
import pytest
from langchain_core.messages import AIMessage, HumanMessage

from tests.adapters.sdk import ANTHROPIC, CHAT, GEMINI, RESPONSES
from workingctx import Message, ToolCall, WorkingContext
from workingctx.adapters import ProviderError, anthropic, google, langchain, openai_chat, openai_responses
from workingctx.messages import (
    DocumentBlock,
    ImageBlock,
    MediaRef,
    ProviderBlock,
    ReasoningBlock,
    TextBlock,
    ToolResultBlock,
)

MEDIA = [
    ImageBlock(MediaRef(kind="url", url="https://example.com/a.png"), "diagram"),
    ImageBlock(MediaRef(kind="data", data_base64="iVBORw0KGgo=", mime_type="image/png"), detail="low"),
    DocumentBlock(MediaRef(kind="url", url="https://example.com/a.pdf")),
    DocumentBlock(MediaRef(kind="url", url="https://example.com/b.pdf"), text="the text"),
    DocumentBlock(MediaRef(kind="data", data_base64="data:application/pdf;base64,JVBERi0=", filename="a.pdf")),
    DocumentBlock(MediaRef(kind="file_id", file_id="file-2", filename="b.pdf")),
]


def mixed_context() -> WorkingContext:
    """
    A context mixing every kind of block, as several formats would leave it.
    """
    return WorkingContext(
        messages=[
            Message.system("rules"),
            Message("user", [TextBlock("look"), *MEDIA, ProviderBlock("openai_chat", {"type": "text", "text": "raw"})]),
            Message(
                "assistant",
                [
                    ReasoningBlock("mine", signature="s", provider="anthropic"),
                    ReasoningBlock("", encrypted="enc", redacted=True, provider="anthropic"),
                    ReasoningBlock("theirs", encrypted="gAAA", provider="openai"),
                    ReasoningBlock("g", signature="AQ==", provider="google"),
                    TextBlock("calling"),
                    ProviderBlock(
                        "anthropic", {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
                    ),
                ],
                tool_calls=[ToolCall("call.1", "f", {"a": 1}), ToolCall("call_2", "g")],
            ),
            Message("tool", [TextBlock("result with a screenshot")], tool_call_id="call.1"),
            Message(
                "user",
                [
                    ToolResultBlock(
                        "call_2",
                        content=[TextBlock("shot"), MEDIA[1]],
                        is_error=True,
                        provider_data={"google": {"name": "g"}},
                    ),
                    TextBlock("and?"),
                ],
            ),
            Message.system("late rule"),
            Message("assistant", "ok"),
        ]
    )


def test_mixed_context_writes_valid_everywhere():
    """
    Every format writes the mixed context as a request its SDK types accept, with only its own reasoning.
    """
    ctx = mixed_context()
    chat = openai_chat.write(ctx)["messages"]
    CHAT.validate_python(chat)
    assert "gAAA" not in str(chat)
    assert any(
        m["role"] == "user" and isinstance(m["content"], list) and m["content"][0]["type"] == "image_url"
        for m in chat[4:]
    )
    body = anthropic.write(ctx)
    ANTHROPIC.validate_python(body["messages"])
    assert anthropic.check(body) == ()
    assert [b["type"] for b in body["messages"][1]["content"]][:2] == ["thinking", "redacted_thinking"]
    assert "<system>late rule</system>" in str(body["messages"])
    responses = openai_responses.write(ctx)
    RESPONSES.validate_python(responses["input"])
    gemini = google.write(ctx)
    GEMINI.validate_python(gemini["contents"])
    assert [p for p in gemini["contents"][1]["parts"] if p.get("thought")] == [
        {"text": "g", "thought": True, "thought_signature": "AQ=="}
    ]
    messages = langchain.write(ctx)
    assert isinstance(messages[2], AIMessage)
    assert messages[2].content[0] == {"type": "thinking", "thinking": "mine", "signature": "s"}


def test_request_keys_differ_by_format_and_content():
    """
    Each format's key follows what it sends: a change in the tail changes every key.
    """
    ctx = mixed_context()
    changed = ctx.fork().append(Message.user("more"))
    for module in (openai_chat, anthropic, openai_responses, google, langchain):
        assert module.request_key(ctx) != module.request_key(changed)
        assert module.request_key(ctx) == module.request_key(ctx.fork())


@pytest.mark.parametrize(
    ("module", "payload", "match"),
    [
        (openai_chat, {"model": "x"}, "needs a 'messages' list"),
        (openai_chat, [{"role": "function", "content": "x", "name": "f"}], "deprecated 'function' role"),
        (anthropic, {"system": "x"}, "needs a 'messages' list"),
        (anthropic, [{"role": "tool", "content": "x"}], "'user', 'assistant' or 'system'"),
        (openai_responses, {"instructions": "x"}, "needs 'input'"),
        (openai_responses, [{"role": "critic", "content": "x"}], "is not a Responses item"),
        (google, {"system_instruction": "x"}, "needs 'contents'"),
        (google, [{"role": "system", "parts": []}], "Gemini roles are 'user' and 'model'"),
    ],
)
def test_read_refuses_what_it_cannot_read(module, payload, match):
    """
    A body without its list, or an unknown role, raises ValueError naming it.
    """
    with pytest.raises(ValueError, match=match):
        module.read(payload)


@pytest.mark.parametrize(
    ("module", "response"),
    [
        (openai_chat, {"choices": []}),
        (anthropic, {"type": "error", "error": {}}),
        (openai_responses, {"id": "resp_1"}),
        (google, {"candidates": []}),
    ],
)
def test_read_response_refuses_other_shapes(module, response):
    """
    A response without what the format returns raises ValueError.
    """
    with pytest.raises(ValueError, match=r"pass|needs"):
        module.read_response(response)


def test_openai_chat_keeps_odd_shapes_whole():
    """
    Refusals, non-object argument text, custom calls and null content round-trip.
    """
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "q"},
                {"type": "input_audio", "input_audio": {"data": "AA==", "format": "wav"}},
            ],
        },
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "not json"}},
                {
                    "id": "b",
                    "type": "custom",
                    "custom": {"name": "g", "input": "x"},
                    "function": {"name": "g", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "assistant", "content": ""},
    ]
    assert openai_chat.write(openai_chat.read(messages)) == {"messages": messages}
    # OpenAI refuses an assistant message with neither content nor calls: read, named, never written
    silent = [*messages, {"role": "assistant", "content": None}, {"role": "assistant"}]
    ctx = openai_chat.read(silent)
    with pytest.raises(ProviderError) as info:
        openai_chat.write(ctx)
    assert [(p.index, p.rule) for p in info.value.problems] == [(6, "empty-content"), (7, "empty-content")]
    assert "neither content nor tool_calls" in str(info.value)
    assert "repair=True" not in str(info.value)
    assert [(p.index, p.rule) for p in openai_chat.check(silent)] == [(6, "empty-content"), (7, "empty-content")]
    assert openai_chat.check(ctx) == info.value.problems


def test_anthropic_keeps_odd_shapes_whole():
    """
    Unknown cache_control, text-source documents, results holding a thinking block, and encoded ids round-trip.
    """
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a", "cache_control": {"type": "persistent"}},
                {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc"}},
                {"type": "search_result", "source": "s", "title": "t", "content": [{"type": "text", "text": "x"}]},
            ],
        },
        {"role": "assistant", "content": [{"type": "tool_use", "id": "wcx_!!", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "wcx_!!", "content": []}]},
    ]
    assert anthropic.write(anthropic.read(messages[:1])) == {"messages": messages[:1]}
    assert [type(b).__name__ for b in anthropic.read(messages).messages[0].content] == ["ProviderBlock"] * 3
    ctx = anthropic.read(messages)
    assert ctx.messages[1].call_ids == ("wcx_!!",)
    assert anthropic.check(messages)[0].rule == "id-format"
    wrong_order = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "tool_result", "tool_use_id": "t1"}]},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "end"},
    ]
    assert {p.rule for p in anthropic.check(wrong_order)} == {"result-not-first", "empty-content"}


def test_anthropic_cache_plan_errors():
    """
    A plan without breakpoints, or a breakpoint on a block that cannot hold one, is refused.
    """
    ctx = WorkingContext(
        messages=[Message.user("q"), Message("assistant", [ReasoningBlock("x", signature="s", provider="anthropic")])]
    )
    with pytest.raises(TypeError, match=r"must have \.breakpoints"):
        anthropic.write(ctx, cache=object())

    @attrs.frozen
    class Point:
        """A breakpoint."""

        index: int
        ttl: str | None = None

    @attrs.frozen
    class Plan:
        """A plan."""

        breakpoints: tuple[Point, ...]

    with pytest.raises(ValueError, match="cannot hold a cache breakpoint"):
        anthropic.write(ctx, cache=Plan((Point(1),)))


def test_responses_keeps_odd_items_whole():
    """
    Item references, web search calls, refusals and file parts round-trip; a tool message of blocks writes outputs.
    """
    items = [
        {"type": "item_reference", "id": "msg_0"},
        {
            "role": "user",
            "content": [
                {"type": "input_image", "image_url": "https://e/a.png", "file_id": "f"},
                {"type": "input_audio", "input_audio": {}},
            ],
        },
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "oops"},
        {"type": "function_call_output", "call_id": "c", "output": "error: the arguments were not JSON"},
        {
            "type": "message",
            "id": "m",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "refusal", "refusal": "no"}],
        },
        {"type": "message", "id": "m2", "role": "assistant", "status": "completed", "content": []},
    ]
    assert openai_responses.write(openai_responses.read(items)) == {"input": items}
    ctx = WorkingContext(
        messages=[
            Message.assistant(tool_calls=[ToolCall("c1", "f")]),
            Message("tool", [ToolResultBlock("c1", "done")]),
            Message(
                "assistant",
                [
                    ReasoningBlock(
                        "edited",
                        provider="openai",
                        provider_data={
                            "openai_responses": {"item": {"type": "reasoning", "id": "rs_9", "summary": []}}
                        },
                    )
                ],
            ),
        ]
    )
    out = openai_responses.write(ctx)["input"]
    assert out[1] == {"type": "function_call_output", "call_id": "c1", "output": "done"}
    assert out[2]["summary"] == [{"type": "summary_text", "text": "edited"}]
    RESPONSES.validate_python(out)


def test_google_keeps_odd_parts_whole():
    """
    Code parts, id-less responses with no pending call, non-image media with signatures and string system instructions.
    """
    body = {
        "system_instruction": "be brief",
        "contents": [
            {"parts": [{"text": "q", "thought": False}]},
            {
                "role": "model",
                "parts": [
                    {"executable_code": {"code": "print(1)", "language": "PYTHON"}},
                    {"function_call": {"name": "f"}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"function_response": {"name": "f"}},
                    {"function_response": {"name": "ghost", "response": {}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"inline_data": {"data": "AA==", "mime_type": "audio/wav"}, "thought_signature": "AQ=="},
                    {"file_data": {"file_uri": "gs://b/x"}},
                ],
            },
        ],
    }
    assert google.write(google.read(body)) == body
    assert google.read(body).prefix.grounding[0].content == "be brief"


def test_langchain_keeps_odd_shapes_whole():
    """
    LangChain content shapes: images, unknown blocks and non-dict items; a state dict; calls without ids kept whole.
    """
    messages = [
        HumanMessage(
            [
                {"type": "image_url", "image_url": {"url": "https://e/a.png", "detail": "low"}},
                {"type": "image", "url": "https://e/b.png"},
            ]
        ),
        AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": None}]),
    ]
    ctx = langchain.read({"messages": messages})
    assert isinstance(ctx.messages[0].content[0], ImageBlock)
    assert langchain.write(ctx) == messages

    class Odd:
        """A message-like object whose content holds a number."""

        def model_dump(self):
            """Its data."""
            return {"type": "human", "content": [1]}

    with pytest.raises(TypeError, match="must be a str or a dict"):
        langchain.read([Odd()])
    with pytest.raises(TypeError, match="expected a LangChain message"):
        langchain.read_response({"type": "ai"})
    written = langchain.write(
        [Message.user("q"), Message.assistant("a", usage=__import__("workingctx").Usage(5, 1, 2))]
    )
    assert written[1].usage_metadata == {"input_tokens": 7, "output_tokens": 1, "total_tokens": 8}
    assert langchain.check([HumanMessage("x")]) == ()


@pytest.mark.parametrize("module", [openai_chat, anthropic, openai_responses, google, langchain])
def test_store_references_are_resolved_or_refused(module):
    """
    A media-store reference is never sent as is: write names it as a problem, or sends the bytes given store=.
    """
    from workingctx.media import InMemoryMediaStore  # noqa: PLC0415

    store = InMemoryMediaStore()
    ref = store.put(b"\x89PNG\r\n\x1a\n", "image/png")
    ctx = WorkingContext(messages=[Message("user", [TextBlock("see"), ImageBlock(ref)]), Message.assistant("ok")])
    with pytest.raises(ProviderError) as info:
        module.write(ctx)
    assert [p.rule for p in info.value.problems] == ["unresolved-media"]
    assert module.check(ctx)[0].rule == "unresolved-media"
    sent = str(module.write(ctx, store=store))
    assert "iVBORw0KGgo" in sent
    assert "workingctx://media" not in sent
