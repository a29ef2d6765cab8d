"""
What every wire format must be able to send as data: a tool call whose
arguments text is not a JSON object keeps that text (``unparsable-arguments``
where a format takes arguments as an object), and text holding a lone
surrogate is named by message and offset (``unencodable-text``), refused by
``write()`` and replaced by ``repair=True``.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic as anthropic_sdk
import httpx
import httpx2
import openai as openai_sdk
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputItemParam
from pydantic import TypeAdapter

from tests.strategies import unparsable_arguments
from workingctx import Message, PrefixContext, ToolCall, WorkingContext
from workingctx.adapters import ProviderError, anthropic, google, langchain, openai_chat, openai_responses
from workingctx.messages import ImageBlock, MediaRef, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock
from workingctx.validity import RULES

WRITERS = (openai_chat, openai_responses, anthropic, google, langchain)
OBJECT_ARGUMENTS = (anthropic, google, langchain)  # formats that send arguments as an object (langchain: every rule)
CUT = '{"path": "/tmp/a'


def encoded(body: Any) -> bytes:
    """
    The bytes an SDK sends for *body*: httpx's JSON encoding, as the OpenAI and
    Anthropic clients encode it through httpx2 (the Gemini client escapes the
    surrogate instead, handing the server an escape that is no character).
    """
    return httpx.Request("POST", "https://example.invalid", json=body).content


def wire(module: Any, source: Any, **options: Any) -> Any:
    """
    The payload *module* writes, as JSON data (LangChain messages through their dumps).
    """
    written = module.write(source, **options)
    if module is langchain:
        return [m.model_dump() for m in written]
    return written


# -- arguments are data ----------------------------------------------------------------------------


def cut_chat(text: str = CUT) -> list[dict[str, Any]]:
    """
    A Chat transcript whose call was cut off by max_tokens, answered by the agent with an error.
    """
    call = {"id": "call_1", "type": "function", "function": {"name": "delete_files", "arguments": text}}
    return [
        {"role": "user", "content": "clean /tmp"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "error: the arguments were cut off"},
    ]


class TestUnparsableArguments:
    @given(unparsable_arguments)
    def test_chat_keeps_the_text_and_writes_it_back_verbatim(self, text):
        """
        A Chat call whose arguments text is not a JSON object reads as a call
        keeping the text, with nothing parsed, and writes back byte for byte.
        """
        messages = cut_chat(text)
        TypeAdapter(list[ChatCompletionMessageParam]).validate_python(messages)

        ctx = openai_chat.read(messages)
        call = ctx.messages[1].tool_calls[0]

        assert (text, {}, False) == (call.arguments_json, call.arguments, call.arguments_parsed)
        assert {"messages": messages} == openai_chat.write(ctx)
        assert () == openai_chat.check(messages)

    @pytest.mark.parametrize("module", OBJECT_ARGUMENTS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
    @given(text=unparsable_arguments)
    def test_formats_of_object_arguments_refuse_it_by_name(self, module, text):
        """
        A format that sends arguments as an object never sends the cut call as
        ``{}``: check and write name the message, the call's id and the fix.
        """
        ctx = openai_chat.read(cut_chat(text))

        with pytest.raises(ProviderError) as info:
            module.write(ctx)

        assert [(1, "unparsable-arguments", ("call_1",))] == [(p.index, p.rule, p.ids) for p in info.value.problems]
        assert "ToolCall(id, name, arguments={...})" in str(info.value)
        assert "repair=True" not in str(info.value)
        assert info.value.problems == module.check(ctx)

    def test_the_rule_is_described(self):
        """
        The rule is one of RULES, for the formats that take arguments as an object.
        """
        description, providers = RULES["unparsable-arguments"]

        assert "not a JSON object" in description
        assert {"anthropic", "gemini"} == providers

    def test_responses_keeps_a_cut_function_call_a_call(self):
        """
        A Responses ``function_call`` whose arguments were cut off reads as a
        call (not text, not a provider block) keeping its text and item, and
        writes back in its place among the other output items.
        """
        items = [
            {"role": "user", "content": "clean /tmp"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"},
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "delete_files",
                "arguments": CUT,
                "status": "incomplete",
            },
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Deleting.", "annotations": []}],
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "error: the arguments were cut off"},
        ]
        TypeAdapter(list[ResponseInputItemParam]).validate_python(items)

        ctx = openai_responses.read(items)
        assistant = ctx.messages[1]

        assert [ReasoningBlock, TextBlock] == [type(b) for b in assistant.content]
        assert (CUT, False) == (assistant.tool_calls[0].arguments_json, assistant.tool_calls[0].arguments_parsed)
        assert {"input": items} == openai_responses.write(ctx)
        assert () == openai_responses.check(items)
        with pytest.raises(ProviderError, match="unparsable-arguments"):
            anthropic.write(ctx)

    def test_responses_read_response_keeps_a_cut_call(self):
        """
        A response cut off by max_output_tokens inside a call gives a call that
        keeps the text, and the next request sends the item as it came.
        """
        item = {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "write_file",
            "arguments": '{"path": "a.txt", "text": "Once upon',
            "status": "incomplete",
        }
        response = {"id": "resp_1", "model": "gpt-5", "status": "incomplete", "output": [item]}

        message = openai_responses.read_response(response)
        answer = Message("tool", "error: cut off", tool_call_id="call_1")
        body = openai_responses.write([Message("user", "write it"), message, answer])

        assert () == message.content
        assert item == body["input"][1]
        assert "call_1" == message.tool_calls[0].id

    def test_langchain_writes_it_as_an_invalid_tool_call(self):
        """
        LangChain's own shape for a call whose arguments are not JSON is an
        invalid tool call holding the text: the unchecked writer uses it, never ``{}``.
        """
        ctx = openai_chat.read(cut_chat())

        ai = langchain.write_messages(ctx.messages)[1]

        assert [] == ai.tool_calls
        assert [("call_1", "delete_files", CUT)] == [(c["id"], c["name"], c["args"]) for c in ai.invalid_tool_calls]

    def test_chat_arguments_given_as_data_are_read_as_data(self):
        """
        A server that sends arguments as a JSON object (not text) is read as
        those arguments and written back as it came.
        """
        messages = cut_chat()
        messages[1]["tool_calls"][0]["function"]["arguments"] = {"path": "/srv"}

        ctx = openai_chat.read(messages)

        assert {"path": "/srv"} == ctx.messages[1].tool_calls[0].arguments
        assert {"messages": messages} == openai_chat.write(ctx)
        assert {"path": "/srv"} == anthropic.write(ctx)["messages"][1]["content"][0]["input"]


# -- text that cannot be encoded -------------------------------------------------------------------

LONE = "\ud83d"  # the first half of an emoji such as U+1F600, cut in two


def surrogate_contexts() -> list[tuple[str, Any, int, str]]:
    """
    (where, context, message index, field) with a lone surrogate in each place a provider receives text.
    """
    user = Message("user", "hi")
    call = Message("assistant", tool_calls=[ToolCall("c1", "lookup", {"q": "ok"})])
    result = Message("tool", "done", tool_call_id="c1")
    return [
        ("text", [Message("user", f"cut {LONE}")], 0, "content"),
        (
            "system",
            WorkingContext(prefix=PrefixContext(grounding=(Message("system", f"Be {LONE}"),)), messages=[user]),
            0,
            "content",
        ),
        ("block", [Message("user", [TextBlock("a"), TextBlock(f"b{LONE}")])], 0, "content[1].text"),
        (
            "arguments",
            [user, Message("assistant", tool_calls=[ToolCall("c1", "lookup", {"q": f"x{LONE}"})]), result],
            1,
            "tool_calls[0].arguments['q']",
        ),
        (
            "call block",
            [user, Message("assistant", [ToolCallBlock("c1", "lookup", {"q": f"x{LONE}"})]), result],
            1,
            "content[0].args['q']",
        ),
        ("result", [user, call, Message("tool", f"rows: {LONE}", tool_call_id="c1")], 2, "content"),
        (
            "result block",
            [user, call, Message("user", [ToolResultBlock("c1", f"{LONE}!")])],
            2,
            "content[0].output",
        ),
        ("name", [Message("user", "hi", name=f"ann{LONE}")], 0, "name"),
        ("tool name", [user, Message("assistant", tool_calls=[ToolCall("c1", f"f{LONE}")]), result], 1, "tool_calls"),
    ]


PLACES = surrogate_contexts()


class TestUnencodableText:
    def test_the_sdk_fails_on_it_and_sends_the_repaired_request(self):
        """
        The provider SDKs really fail to send a lone surrogate (the request is
        never built), and send the repaired request (through a transport that
        answers as the provider would).
        """
        sent: list[bytes] = []

        def answer(reply: dict[str, Any]) -> httpx2.Client:
            def handle(request: httpx2.Request) -> httpx2.Response:
                sent.append(request.content)
                return httpx2.Response(200, json=reply)

            return httpx2.Client(transport=httpx2.MockTransport(handle))

        chat_reply = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
        }
        messages_reply = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        openai_client = openai_sdk.OpenAI(api_key="k", max_retries=0, http_client=answer(chat_reply))
        anthropic_client = anthropic_sdk.Anthropic(api_key="k", max_retries=0, http_client=answer(messages_reply))
        source = [Message("user", f"cut {LONE}")]
        raw = {"messages": [{"role": "user", "content": f"cut {LONE}"}]}

        with pytest.raises(UnicodeEncodeError, match="surrogates not allowed"):
            openai_client.chat.completions.create(model="gpt-4o", **raw)
        with pytest.raises(UnicodeEncodeError, match="surrogates not allowed"):
            anthropic_client.messages.create(model="claude-sonnet-4-5", max_tokens=8, **raw)
        assert [] == sent

        openai_client.chat.completions.create(model="gpt-4o", **openai_chat.write(source, repair=True))
        anthropic_client.messages.create(
            model="claude-sonnet-4-5", max_tokens=8, **anthropic.write(source, repair=True)
        )
        assert 2 == len(sent)
        assert all("cut \ufffd".encode() in body for body in sent)

    @pytest.mark.parametrize("module", WRITERS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
    @pytest.mark.parametrize(("where", "source", "index", "field"), PLACES, ids=[p[0] for p in PLACES])
    def test_check_names_it_write_refuses_and_repair_replaces_it(self, module, where, source, index, field):
        """
        Wherever a provider receives it, the surrogate is a problem naming the
        message, the field and the offset; write refuses it; repair=True puts
        U+FFFD in its place and the payload encodes.
        """
        problems = [p for p in module.check(source) if p.rule == "unencodable-text"]

        assert [index] == [p.index for p in problems], where
        assert problems[0].message.startswith(field), problems[0].message
        assert "at character" in problems[0].message
        assert "repair=True" in problems[0].message
        with pytest.raises(ProviderError, match="unencodable-text"):
            module.write(source)
        if (where in {"name", "tool name"} and module is openai_chat) or (where == "tool name" and module is anthropic):
            # U+FFFD is not in a name OpenAI or Anthropic takes either
            with pytest.raises(ProviderError, match="name-format"):
                wire(module, source, repair=True)
            return
        payload = wire(module, source, repair=True)
        if where != "name" or module is langchain:  # the formats that send a message's name
            assert "\ufffd" in json.dumps(payload, ensure_ascii=False)
        assert encoded(payload)

    @given(
        text=st.text(max_size=20),
        at=st.integers(0, 20),
        half=st.sampled_from(["\ud83d", "\ude00", "\udfff", "\ud800"]),
    )
    def test_the_offset_is_the_character_position(self, text, at, half):
        """
        The offset named is the surrogate's position in the text, and the
        repaired text is the text with U+FFFD at that position.
        """
        at = min(at, len(text))
        cut = text[:at] + half + text[at:]

        (problem,) = openai_chat.check([Message("user", cut)])
        body = openai_chat.write([Message("user", cut)], repair=True)

        assert f"at character {at} " in problem.message
        assert text[:at] + "\ufffd" + text[at:] == body["messages"][0]["content"]
        assert encoded(body)

    def test_a_wire_payload_is_checked_as_read(self):
        """
        check() of a wire payload names the surrogate too (a file as recorded).
        """
        messages = [{"role": "user", "content": "ok"}, {"role": "assistant", "content": f"cut {LONE}"}]

        assert [(1, "unencodable-text")] == [(p.index, p.rule) for p in openai_chat.check(messages)]
        assert [(1, "unencodable-text")] == [(p.index, p.rule) for p in anthropic.check({"messages": messages})]

    def test_repair_keeps_the_call_consistent(self):
        """
        A call whose exact text holds the surrogate is repaired in its text and
        its arguments alike; one whose text spelled it as an escape is sent
        from the repaired arguments.
        """
        literal = ToolCall("c1", "f", arguments_json=f'{{"q": "x{LONE}"}}')
        escaped = ToolCall("c2", "f", arguments_json='{"q": "y\\ud83d"}')
        source = [
            Message("user", "go"),
            Message("assistant", tool_calls=[literal, escaped]),
            Message("tool", "1", tool_call_id="c1"),
            Message("tool", "2", tool_call_id="c2"),
        ]

        calls = openai_chat.write(source, repair=True)["messages"][1]["tool_calls"]

        assert ['{"q": "x\ufffd"}', '{"q":"y\ufffd"}'] == [c["function"]["arguments"] for c in calls]

    def test_the_rule_is_described(self):
        """
        The rule is one of RULES, applied for every provider.
        """
        description, providers = RULES["unencodable-text"]

        assert "lone surrogate" in description
        assert {"openai", "anthropic", "gemini"} == providers


@pytest.mark.parametrize("module", WRITERS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_inline_media_is_searched_for_surrogates_too(module):
    """
    Inline media's text is checked like any other text (ASCII base64 is passed
    over without being copied): a lone surrogate in it is an ``unencodable-text`` problem naming it.
    """
    image = ImageBlock(MediaRef(kind="data", data_base64="iVBORw0K\ud83d", mime_type="image/png"))
    found = [p for p in module.check([Message.user([image, TextBlock("what is it?")])]) if p.rule == "unencodable-text"]
    assert [0] == [p.index for p in found]
    assert "media.data_base64 holds the lone surrogate '\\ud83d' at character 8" in found[0].message


@pytest.mark.parametrize("mime", ["image/bmp", "image/heic", "image/svg+xml", "image/tiff"])
def test_an_inline_image_of_a_type_openai_and_anthropic_do_not_take_is_unsendable(mime):
    """
    OpenAI and Anthropic take PNG, JPEG, GIF and WebP images only: an inline
    image of another type (a BMP, a phone's HEIC photo) is an ``unsendable``
    problem for them naming its type, unless its bytes are one of those
    (then it was only labelled wrong); Gemini takes HEIC.
    """
    odd = ImageBlock(MediaRef(kind="data", data_base64="AAAAGGZ0eXBoZWlj", mime_type=mime))
    png = ImageBlock(MediaRef(kind="data", data_base64="iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB", mime_type=mime))
    for module in (openai_chat, openai_responses, anthropic):
        found = [p for p in module.check([Message.user([odd, TextBlock("what is it?")])]) if p.rule == "unsendable"]
        assert len(found) == 1, module.__name__
        assert f"an image of type {mime!r}" in found[0].message
        assert "PNG, JPEG, GIF and WebP images only" in found[0].message
        assert not [p for p in module.check([Message.user([png, TextBlock("what is it?")])]) if p.rule == "unsendable"]
    if mime == "image/heic":
        assert google.check([Message.user([odd, TextBlock("what is it?")])]) == ()


@pytest.mark.parametrize("module", WRITERS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
@pytest.mark.parametrize("length", [10, 256, 257, 100_000])
def test_long_text_is_searched_for_surrogates_too(module, length):
    """
    Long text (a tool's log) is checked like short text (long ASCII text is
    passed over without being copied): a lone surrogate at its end is named at its offset.
    """
    text = "x" * length + "\ud83d"
    found = [p for p in module.check([Message.user([TextBlock(text)])]) if p.rule == "unencodable-text"]
    assert [0] == [p.index for p in found]
    assert f"at character {length}" in found[0].message
