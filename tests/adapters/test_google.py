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
from workingctx import Message, ToolCall
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


@given(chat_messages(portable=True))
def test_calls_from_other_providers_carry_the_bypass_signature(messages):
    """
    Every model turn of calls another provider made gets Google's validator
    bypass on its first call (Gemini 3 refuses unsigned call turns), and only
    there; signature_bypass=False sends them unsigned.
    """
    ctx = openai_chat.read(messages)
    contents = valid(google.write(ctx))["contents"]
    for content in contents:
        calls = [p for p in content["parts"] if "function_call" in p]
        signed = [p.get("thought_signature") for p in calls]
        assert signed == ([google.BYPASS_SIGNATURE] + [None] * (len(calls) - 1) if calls else [])
    plain = google.write(ctx, signature_bypass=False)["contents"]
    assert not any("thought_signature" in p for c in plain for p in c["parts"])


def test_gemini_own_unsigned_calls_stay_unsigned():
    """
    A call Gemini made without a signature (Gemini 2.x) goes back without one; a signed one keeps its own.
    """
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "weather?"}]},
            {"role": "model", "parts": [{"function_call": {"id": "c1", "name": "w", "args": {}}}]},
            {"role": "user", "parts": [{"function_response": {"id": "c1", "name": "w", "response": {"t": 1}}}]},
        ]
    }
    assert google.write(google.read(body)) == body
    mixed = google.read(body).append(
        Message.assistant(tool_calls=[ToolCall("c2", "w")]), Message.tool('{"t": 2}', call_id="c2")
    )
    parts = google.write(mixed)["contents"][3]["parts"]
    assert parts[0]["thought_signature"] == google.BYPASS_SIGNATURE
