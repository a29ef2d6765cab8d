"""
The Chat Completions adapter: lossless round trips validated by the SDK's own
types, checks, repair, request keys and responses.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from pydantic import TypeAdapter

from tests.wire_strategies import chat_messages
from workingctx import Message, ToolCall, WorkingContext
from workingctx.adapters import ProviderError, openai_chat
from workingctx.serialization import from_json, to_json

MESSAGES = TypeAdapter(list[ChatCompletionMessageParam])


def valid(messages):
    """
    Validate *messages* with the SDK's own param types; return them.
    """
    MESSAGES.validate_python(messages)
    return messages


@given(chat_messages())
def test_round_trip_is_exact(messages):
    """
    write(read(p)) == p for every generated transcript the SDK accepts.
    """
    body = {"messages": valid(messages)}
    assert openai_chat.write(openai_chat.read(body)) == body


@given(chat_messages())
def test_round_trip_through_a_snapshot_and_json(messages):
    """
    A context read from the wire survives freezing and JSON and writes the same payload.
    """
    ctx = openai_chat.read(valid(messages))
    back = from_json(to_json(ctx.freeze()), type(ctx.freeze()))
    assert openai_chat.write(back) == {"messages": messages}


def test_developer_role_and_null_content():
    """
    A developer message lands in the prefix as a system message that is sent back as developer.
    """
    ctx = openai_chat.read([{"role": "developer", "content": "be brief"}, {"role": "user", "content": "hi"}])
    assert [m.role for m in ctx.prefix.grounding] == ["system"]
    assert openai_chat.write(ctx)["messages"][0] == {"role": "developer", "content": "be brief"}


def test_argument_text_byte_for_byte():
    """
    Argument strings are sent back exactly as the model wrote them.
    """
    raw = '{ "b" : 1,\n  "a": [1, 2] }'
    body = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": raw}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
    ]
    out = openai_chat.write(openai_chat.read(body))["messages"]
    assert out[1]["tool_calls"][0]["function"]["arguments"] == raw


def test_write_raises_every_problem_and_repair_fixes_them():
    """
    An orphan result and an unanswered call are both listed; repair=True drops and closes them.
    """
    messages = [
        Message.user("go"),
        Message("tool", "stray", tool_call_id="nowhere"),
        Message.assistant(tool_calls=[ToolCall("c1", "f")]),
        Message.user("next"),
    ]
    with pytest.raises(ProviderError) as info:
        openai_chat.write(WorkingContext(messages=messages))
    rules = sorted(p.rule for p in info.value.problems)
    assert rules == ["dangling-call", "orphan-result"]
    assert isinstance(info.value, ValueError)
    assert openai_chat.check(messages) == info.value.problems
    out = valid(openai_chat.write(WorkingContext(messages=messages), repair=True)["messages"])
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "user"]
    assert out[2]["tool_call_id"] == "c1"
    assert openai_chat.check(openai_chat.read(out)) == ()


def test_request_key_ignores_what_is_not_sent():
    """
    Ids, metadata, usage and notes never change the key; content and fields do.
    """
    a = WorkingContext(messages=[Message.user("hi", id="a1")]).note("k", 1)
    b = WorkingContext(messages=[Message("user", "hi", id="b2", metadata={"x": 1})])
    assert a.digest() != b.digest()
    assert openai_chat.request_key(a, model="gpt-5") == openai_chat.request_key(b, model="gpt-5")
    assert openai_chat.request_key(a, model="gpt-5") != openai_chat.request_key(a, model="gpt-5-mini")
    assert openai_chat.request_key(a) != openai_chat.request_key(WorkingContext(messages=[Message.user("hi!")]))


def test_read_response_from_sdk_object():
    """
    A ChatCompletion object gives the assistant message, its usage and the model.
    """
    completion = ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-5",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
                        ],
                    },
                }
            ],
            "usage": {
                "prompt_tokens": 120,
                "completion_tokens": 8,
                "total_tokens": 128,
                "prompt_tokens_details": {"cached_tokens": 100},
                "completion_tokens_details": {"reasoning_tokens": 5},
            },
        }
    )
    message = openai_chat.read_response(completion)
    assert message.tool_calls[0].arguments == {"a": 1}
    assert message.usage is not None
    assert (message.usage.input_tokens, message.usage.cache_read_tokens, message.usage.reasoning_tokens) == (20, 100, 5)
    assert message.metadata["model"] == "gpt-5"
