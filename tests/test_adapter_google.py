"""
The Gemini adapter: lossless round trips in the SDK's dump form, camelCase
input, thought signatures, id-less calls, cross-format writes and responses.
"""

from __future__ import annotations

from anthropic.types import MessageParam
from google.genai import types as gtypes
from hypothesis import given
from pydantic import TypeAdapter

from tests.wire_strategies import anthropic_bodies, chat_messages, google_bodies, responses_bodies
from workingctx import Message
from workingctx.adapters import anthropic, google, openai_chat, openai_responses
from workingctx.messages import ReasoningBlock

CONTENTS = TypeAdapter(list[gtypes.Content])


def valid(body):
    """
    Validate a body with the SDK's own types; the dump of what it read equals the body.
    """
    contents = CONTENTS.validate_python(body["contents"])
    assert [c.model_dump(mode="json", exclude_none=True) for c in contents] == body["contents"]
    if isinstance(body.get("system_instruction"), dict):
        gtypes.Content.model_validate(body["system_instruction"])
    return body


@given(google_bodies())
def test_round_trip_is_exact(body):
    """
    write(read(p)) == p: thought signatures, id-less calls and media untouched.
    """
    assert google.write(google.read(valid(body))) == body


@given(google_bodies())
def test_camel_case_reads_the_same(body):
    """
    The REST camelCase form of a body reads to the same context.
    """
    camel = {
        "contents": [
            c.model_dump(mode="json", by_alias=True, exclude_none=True)
            for c in CONTENTS.validate_python(body["contents"])
        ]
    }
    if "system_instruction" in body:
        camel["systemInstruction"] = gtypes.Content.model_validate(body["system_instruction"]).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
    assert google.write(google.read(camel)) == body


@given(chat_messages(portable=True))
def test_chat_transcripts_write_valid_gemini(messages):
    """
    A Chat Completions transcript written for Gemini validates and passes the checks.
    """
    body = valid(google.write(openai_chat.read(messages)))
    assert google.check(body) == ()


@given(anthropic_bodies())
def test_anthropic_transcripts_write_valid_gemini(body):
    """
    An Anthropic transcript written for Gemini validates; the thinking is left out.
    """
    out = valid(google.write(anthropic.read(body)))
    assert not any(p.get("thought") for c in out["contents"] for p in c["parts"])


@given(responses_bodies(portable=True))
def test_responses_transcripts_write_valid_gemini(body):
    """
    A Responses transcript written for Gemini validates.
    """
    valid(google.write(openai_responses.read(body)))


@given(google_bodies(portable=True))
def test_gemini_transcripts_write_valid_elsewhere(body):
    """
    A Gemini transcript written for Anthropic and Chat validates, signatures left out.
    """
    out = anthropic.write(google.read(body))
    TypeAdapter(list[MessageParam]).validate_python(out["messages"])
    assert anthropic.check(out) == ()
    assert openai_chat.check(openai_chat.write(google.read(body))) == ()


def test_read_response_with_thought_signature():
    """
    A response's thought and call keep their signatures; usage counts thoughts as reasoning.
    """
    response = gtypes.GenerateContentResponse(
        model_version="gemini-3-pro",
        candidates=[
            gtypes.Candidate(
                content=gtypes.Content(
                    role="model",
                    parts=[
                        gtypes.Part(text="plan", thought=True, thought_signature=b"\x01\x02"),
                        gtypes.Part(
                            function_call=gtypes.FunctionCall(name="f", args={"a": 1}), thought_signature=b"\x03"
                        ),
                    ],
                )
            )
        ],
        usage_metadata=gtypes.GenerateContentResponseUsageMetadata(
            prompt_token_count=10, candidates_token_count=3, thoughts_token_count=2
        ),
    )
    message = google.read_response(response)
    assert message.content[0] == ReasoningBlock("plan", signature="AQI=", provider="google")
    assert message.usage is not None
    assert message.usage.reasoning_tokens == 2
    assert message.metadata["model"] == "gemini-3-pro"
    follow = google.write([Message.user("q"), message, Message.tool("ok", call_id=message.call_ids[0])])
    assert follow["contents"][1]["parts"][1] == {
        "function_call": {"name": "f", "args": {"a": 1}},
        "thought_signature": "Aw==",
    }
    assert follow["contents"][2]["parts"] == [{"function_response": {"name": "f", "response": {"result": "ok"}}}]
    valid(follow)
