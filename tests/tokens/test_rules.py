"""
The approximation's rules: what a message's text, tool calls and media cost,
and the OpenAI and Anthropic image rules.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import tool_calls
from tests.tokens.counts import openssl_transcript
from workingctx import ApproxTokenCounter, Message, PrefixContext, TiktokenCounter
from workingctx.messages import (
    AudioBlock,
    DataBlock,
    DocumentBlock,
    ErrorBlock,
    ImageBlock,
    MediaRef,
    ReasoningBlock,
    RemoteToolCallBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)
from workingctx.tokens import estimate_message_tokens, image_tokens, media_tokens


def url_media(**fields: object) -> MediaRef:
    return MediaRef(kind="url", url="https://example.com/file", **fields)  # type: ignore[arg-type]


class TestExactCounts:
    def test_prefix_plus_question_is_25(self):
        """
        A system prompt of "You are a careful research assistant." plus the
        question "What changed in the pricing table?" is 25 tokens.
        """
        prefix = PrefixContext(system_prompt="You are a careful research assistant.")
        assembled = [*prefix.as_messages(), Message("user", "What changed in the pricing table?")]

        assert 25 == estimate_message_tokens(assembled)

    def test_openssl_transcript_is_37(self):
        """
        The three-message tool transcript of the reference is 37 tokens, with
        every estimator agreeing.
        """
        transcript = openssl_transcript()

        assert 37 == estimate_message_tokens(transcript)
        assert 37 == ApproxTokenCounter().count(transcript)
        assert 37 == asyncio.run(ApproxTokenCounter().estimate(transcript))

    def test_assistant_tool_call_alone_is_19(self):
        """
        An assistant message with empty content but one tool call is not free: 19 tokens.
        """
        assert 19 == estimate_message_tokens([openssl_transcript()[1]])

    def test_empty_list_is_zero(self):
        """
        An empty transcript costs nothing.
        """
        assert 0 == estimate_message_tokens([])
        assert 0 == estimate_message_tokens(iter(()))

    def test_per_message_overhead(self):
        """
        Four tokens of structure per message: 500 empty messages are 2,000 tokens.
        """
        assert 2_000 == estimate_message_tokens([Message("user", "")] * 500)

    def test_tool_call_blocks_count_like_tool_calls(self):
        """
        A tool call carried as a block counts exactly as one in ``tool_calls``.
        """
        args = {"host": "example.com", "port": 443}
        as_block = Message("assistant", (ToolCallBlock("c1", "openssl", args),))
        as_remote = Message("assistant", (RemoteToolCallBlock("c1", "openssl", args),))

        assert 19 == estimate_message_tokens([as_block])
        assert 19 == estimate_message_tokens([as_remote])

    def test_text_of_blocks_is_counted(self):
        """
        Text, tool-result output, reasoning summary and details, and error
        messages count as characters, like string content.
        """
        assert 6 == estimate_message_tokens([Message("user", (TextBlock("abcd"), TextBlock("efgh")))])
        assert 7 == estimate_message_tokens([Message("tool", (ToolResultBlock("c1", "y" * 12),))])
        assert 6 == estimate_message_tokens([Message("assistant", (ReasoningBlock("abcd", details=("efgh",)),))])
        assert 6 == estimate_message_tokens([Message("assistant", (ErrorBlock("x" * 8),))])
        structured = ToolResultBlock("c1", {"rows": [1, 2]})
        expected = len(structured.output_text()) // 4 + 4
        assert expected == estimate_message_tokens([Message("tool", (structured,))])


class TestMediaEstimates:
    @pytest.mark.parametrize(
        ("width", "height", "expected"),
        [
            (512, 512, 255),  # one tile
            (1024, 1024, 765),  # short side to 768: 2 x 2 tiles
            (2048, 4096, 1105),  # fit in 2048, short side to 768: 768 x 1536, 2 x 3 tiles
            (100, 30, 255),
            (None, None, 765),  # unknown size: as a 1024 x 1024 image
            (0, 512, 765),
        ],
    )
    def test_image_tiles(self, width, height, expected):
        """
        An image costs 85 + 170 per 512-pixel tile after fitting, or 765 when its size is unknown.
        """
        assert expected == media_tokens(ImageBlock(url_media(width=width, height=height)))

    def test_audio_and_video_by_duration(self):
        """
        Audio costs 32 tokens a second and video 263; unknown durations count as 30 seconds.
        """
        assert 320 == media_tokens(AudioBlock(url_media(duration_ms=10_000)))
        assert 960 == media_tokens(AudioBlock(url_media()))
        assert 526 == media_tokens(VideoBlock(url_media(duration_ms=2_000)))
        assert 7_890 == media_tokens(VideoBlock(url_media()))

    def test_documents_by_pages_unless_they_carry_text(self):
        """
        A document without text costs 1,500 tokens a page; with text, the text is counted instead.
        """
        assert 4_500 == media_tokens(DocumentBlock(url_media(), pages=(1, 2, 3)))
        assert 1_500 == media_tokens(DocumentBlock(url_media()))
        with_text = DocumentBlock(url_media(), text="a" * 40, excerpt="b" * 8)
        assert 0 == media_tokens(with_text)
        assert 12 + 4 == estimate_message_tokens([Message("user", (with_text,))])

    def test_data_by_payload_size(self):
        """
        Data costs a token per three bytes of payload, or 85 when its size is unknown.
        """
        inline = base64.b64encode(bytes(300)).decode("ascii")
        assert 100 == media_tokens(DataBlock("application/octet-stream", data_base64=inline))
        assert 10 == media_tokens(DataBlock("application/octet-stream", media=url_media(size_bytes=30)))
        assert 85 == media_tokens(DataBlock("application/octet-stream", media=url_media()))

    def test_text_blocks_have_no_media(self):
        """
        Blocks without media add nothing beyond their text.
        """
        assert 0 == media_tokens(TextBlock("hello"))

    def test_media_in_a_message(self):
        """
        A message's count adds its media estimates to its text and overhead,
        and an audio transcript counts as text on top of the audio.
        """
        image = Message("user", (TextBlock("abcdefgh"), ImageBlock(url_media(width=1024, height=1024))))
        audio = Message("user", (AudioBlock(url_media(duration_ms=1_000), transcript="abcd"),))

        assert 2 + 4 + 765 == estimate_message_tokens([image])
        assert 1 + 4 + 32 == estimate_message_tokens([audio])


@given(st.lists(tool_calls, min_size=1, max_size=3))
def test_tool_calls_count_in_wire_form(calls):
    """
    A tool call counts its id, name and ``json.dumps(arguments)`` characters (the
    text itself when it is not a JSON object), plus 4 tokens.
    """
    chars = sum(
        len(c.id) + len(c.name) + len(json.dumps(c.arguments) if c.arguments_parsed else c.arguments_json)
        for c in calls
    )

    assert chars // 4 + 4 + 4 * len(calls) == estimate_message_tokens([Message("assistant", tool_calls=calls)])


class TestImageRules:
    @pytest.mark.parametrize(
        ("width", "height", "detail", "expected"),
        [
            (1024, 1024, None, 765),  # OpenAI's worked example: 768 x 768, 4 tiles
            (2048, 4096, "high", 1105),  # 1024 x 2048, then 768 x 1536: 6 tiles
            (2048, 4096, "auto", 1105),  # auto counts as high, the most it can cost
            (4096, 8192, "low", 85),  # low detail: a fixed 85
            (1, 1, None, 255),
            (None, None, "low", 85),
        ],
    )
    def test_openai(self, width, height, detail, expected):
        """
        OpenAI's rule: 85 + 170 per 512-pixel tile after fitting in 2048 and the short side in 768; low is 85.
        """
        assert expected == image_tokens(width, height, detail=detail)

    @pytest.mark.parametrize(
        ("width", "height", "expected"),
        [
            (200, 200, 54),  # Anthropic's table: ~54
            (1000, 1000, 1334),  # ~1334
            (1092, 1092, 1590),  # ~1590, just inside the limit
            (1568, 100, 210),  # the long edge at the limit: unchanged
            (3136, 200, 210),  # twice the limit: halved on both sides
            (None, None, 1399),  # unknown: as 1024 x 1024
        ],
    )
    def test_anthropic(self, width, height, expected):
        """
        Anthropic's rule: pixels / 750, rounded up, after scaling down to a 1568 edge and ~1,600 tokens.
        """
        assert expected == image_tokens(width, height, rule="anthropic", detail="low")

    @given(st.integers(1, 20_000), st.integers(1, 20_000))
    def test_bounds(self, width, height):
        """
        OpenAI's count lies between 85 and 85 + 8 tiles; Anthropic's between 1 and 1,600 tokens.
        """
        assert 85 <= image_tokens(width, height) <= 85 + 170 * 8
        assert 1 <= image_tokens(width, height, rule="anthropic") <= 1600

    @given(st.integers(1, 1_000), st.integers(1, 1_000), st.integers(0, 95))
    def test_anthropic_inside_the_limits(self, width, height, extra):
        """
        Inside Anthropic's limits an image costs its pixels / 750, rounded up, and a wider one never less.
        """
        assert -(-width * height // 750) == image_tokens(width, height, rule="anthropic")
        assert image_tokens(width, height, rule="anthropic") <= image_tokens(width + extra, height, rule="anthropic")

    @given(st.integers(1, 20_000), st.integers(1, 20_000))
    def test_openai_low_never_costs_more(self, width, height):
        """
        Under OpenAI's rule, low detail is 85 whatever the size, never more than high detail.
        """
        assert 85 == image_tokens(width, height, detail="low") <= image_tokens(width, height, detail="high")

    def test_unknown_rule(self):
        """
        A rule that does not exist is a ValueError naming the choices, for the function and both counters.
        """
        with pytest.raises(ValueError, match=r"one of \['openai', 'anthropic'\], got 'gemini'"):
            image_tokens(10, 10, rule="gemini")
        with pytest.raises(ValueError, match="got 'gemini'"):
            ApproxTokenCounter(images="gemini")
        with pytest.raises(ValueError, match="got 'gemini'"):
            TiktokenCounter(images="gemini")

    def test_detail_reaches_the_count(self):
        """
        An image block's detail decides OpenAI's count in a message.
        """
        ref = url_media(width=2048, height=2048)
        high = Message("user", (ImageBlock(ref, detail="high"),))
        low = Message("user", (ImageBlock(ref, detail="low"),))
        assert 765 + 4 == estimate_message_tokens([high])
        assert 85 + 4 == estimate_message_tokens([low])

    @pytest.mark.parametrize("make", [ApproxTokenCounter, TiktokenCounter])
    def test_both_counters_count_by_the_rule(self, make):
        """
        Both counters apply the rule they were given, keep the counts of each rule apart on a
        message, and agree on the media part.
        """
        message = Message("user", (TextBlock("look"), ImageBlock(url_media(width=1000, height=1000))))
        openai, anthropic = make(), make(images="anthropic")
        assert openai.name != anthropic.name
        assert anthropic.name.endswith("+anthropic-images")
        assert 1334 - 765 == anthropic.count_message(message) - openai.count_message(message)
        assert anthropic.count([message, message]) == 2 * anthropic.count_message(message)
        assert anthropic.count([message]) == asyncio.run(anthropic.estimate([message]))
        assert ("openai", "anthropic") == (openai.images, anthropic.images)

    def test_anthropic_counter_refuses_non_messages(self):
        """
        The Anthropic-rule approximation checks its input like the default one.
        """
        with pytest.raises(TypeError, match="at position 1"):
            ApproxTokenCounter(images="anthropic").count([Message.user("a"), "b"])

    def test_counters_are_values(self):
        """
        Counters with the same rule are equal; different rules are not.
        """
        assert ApproxTokenCounter() == ApproxTokenCounter(images="openai")
        assert ApproxTokenCounter() != ApproxTokenCounter(images="anthropic")

    def test_fallback_keeps_the_image_rule(self, monkeypatch):
        """
        A tiktoken counter for Anthropic images falls back to the Anthropic-rule approximation.
        """
        monkeypatch.setitem(sys.modules, "tiktoken", None)
        counter = TiktokenCounter(images="anthropic")
        message = Message("user", (ImageBlock(url_media(width=200, height=200)),))
        assert ("approx+anthropic-images", 54 + 4) == (counter.name, counter.count_message(message))
        assert 2 * (54 + 4) == counter.count([message, message])


def test_image_of_any_size_is_counted():
    """
    Images with edges far beyond what a float holds are counted like the
    largest edge every rule scales down from, never an OverflowError.
    """
    huge = 10**400
    assert image_tokens(1, 2**53, rule="anthropic") == image_tokens(1, huge, rule="anthropic")
    assert image_tokens(huge, huge) == image_tokens(2**53, 2**53)
    assert image_tokens(huge, 1, detail="high") >= 85
