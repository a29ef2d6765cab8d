"""
What every wire format must be able to send as data: a tool call whose
arguments text is not a JSON object keeps that text (``unparsable-arguments``
where a format takes arguments as an object), and an inline image of a type
OpenAI and Anthropic do not take is named for them (``unsendable``).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputItemParam
from pydantic import TypeAdapter

from tests.strategies import unparsable_arguments
from workingctx import Message
from workingctx.adapters import ProviderError, anthropic, google, langchain, openai_chat, openai_responses
from workingctx.messages import ImageBlock, MediaRef, ReasoningBlock, TextBlock
from workingctx.validity import RULES

OBJECT_ARGUMENTS = (anthropic, google, langchain)  # formats that send arguments as an object (langchain: every rule)
CUT = '{"path": "/tmp/a'

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


# -- images of a type a provider does not take -------------------------------------------------


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
