"""
The message-model fields that carry what providers send: signatures, encrypted
reasoning, cache breakpoints, image detail, blocks inside tool results,
argument text and provider data.
"""

from __future__ import annotations

import base64

import pytest
from hypothesis import given

from tests.strategies import blocks, messages
from workingctx import Message, ToolCall
from workingctx.exceptions import InvalidMessageError, WorkingCtxError
from workingctx.messages import (
    CacheBreakpoint,
    ImageBlock,
    MediaRef,
    ProviderBlock,
    ReasoningBlock,
    TextBlock,
    ToolResultBlock,
)
from workingctx.serialization import structure, unstructure
from workingctx.tokens import estimate_message_tokens

SCREENSHOT = base64.b64encode(bytes(range(256)) * 400).decode("ascii")


def test_screenshot_in_a_tool_result_counts_as_an_image():
    """
    A screenshot returned inside a tool result counts as one image, not as its base64 text.
    """
    image = ImageBlock(MediaRef(kind="data", data_base64=SCREENSHOT, mime_type="image/png"))
    as_blocks = Message("user", [ToolResultBlock("c1", content=[TextBlock("done"), image])])
    as_text = Message("user", [ToolResultBlock("c1", output=SCREENSHOT)])
    blocks_tokens = estimate_message_tokens([as_blocks])
    assert blocks_tokens < 1_000
    assert estimate_message_tokens([as_text]) > 20 * blocks_tokens


def test_low_detail_image_counts_85():
    """
    An image sent with detail="low" counts as the 85-token base, whatever its size.
    """
    high = ImageBlock(MediaRef(url="https://example.com/a.png", width=2048, height=2048))
    low = ImageBlock(MediaRef(url="https://example.com/a.png", width=2048, height=2048), detail="low")
    assert estimate_message_tokens([Message("user", [low])]) < estimate_message_tokens([Message("user", [high])])


def test_tool_result_content_refuses_calls():
    """
    A tool result's blocks are content, not further calls or results.
    """
    with pytest.raises(InvalidMessageError, match="not calls or results"):
        ToolResultBlock("c1", content=[ToolResultBlock("c2")])


def test_arguments_json_must_agree():
    """
    The exact argument text decodes to the arguments, or the call is refused naming both.
    """
    call = ToolCall("c1", "f", arguments_json='{"a": 1}')
    assert call.arguments == {"a": 1}
    assert ToolCall("c1", "f", {"a": 1}, arguments_json='{"a":1}').arguments_json == '{"a":1}'
    with pytest.raises(InvalidMessageError, match="does not decode"):
        ToolCall("c1", "f", {"a": 2}, arguments_json='{"a": 1}')
    with pytest.raises(InvalidMessageError, match="must stay empty"):
        ToolCall("c1", "f", {"a": 1}, arguments_json="[1]")
    with pytest.raises(TypeError):
        ToolCall("c1", "f", arguments_json=b"{}")  # type: ignore[arg-type]


def test_cache_breakpoint_ttl_checked():
    """
    A cache breakpoint's ttl is 5m, 1h or unstated.
    """
    assert CacheBreakpoint().ttl is None
    with pytest.raises(InvalidMessageError, match="'5m', '1h' or None"):
        CacheBreakpoint("2h")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TextBlock("x", cache="5m")  # type: ignore[arg-type]


def test_provider_data_frozen_and_keyed_by_provider():
    """
    provider_data is deep-frozen, keyed by provider names, and part of equality and the digest.
    """
    plain = Message("system", "rules")
    developer = Message("system", "rules", provider_data={"openai": {"role": "developer"}})
    assert plain != developer
    assert plain.digest() != developer.digest()
    with pytest.raises(WorkingCtxError):
        developer.provider_data["openai"]["role"] = "system"
    with pytest.raises(TypeError, match="provider names"):
        Message("user", "x", provider_data={1: {}})
    with pytest.raises(TypeError, match="must be a mapping"):
        Message("user", "x", provider_data=["openai"])


def test_reasoning_fields_in_digest_and_repr():
    """
    A signature or encrypted reasoning changes the block; the repr shows only what is set.
    """
    bare = ReasoningBlock("plan")
    signed = ReasoningBlock("plan", signature="sig", provider="anthropic")
    assert bare != signed
    assert Message("assistant", [bare]).digest() != Message("assistant", [signed]).digest()
    assert repr(bare) == "ReasoningBlock(summary='plan', details=None)"
    assert "signature='sig'" in repr(signed)
    assert ProviderBlock("anthropic", {"type": "x"}) != ProviderBlock("openai", {"type": "x"})


@given(blocks)
def test_blocks_round_trip_through_the_converter(block):
    """
    Every block, new fields included, comes back equal from plain data.
    """
    assert structure(unstructure(block), type(block)) == block


@given(messages())
def test_messages_round_trip_through_the_converter(message):
    """
    Every message, provider data and argument text included, comes back equal with an equal digest.
    """
    back = structure(unstructure(message), Message)
    assert back == message
    assert back.digest() == message.digest()
