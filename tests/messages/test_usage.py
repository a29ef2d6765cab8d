"""
Usage: token counts are non-negative, one-hour cache writes are part of the total, provider usage
shapes map to the same value, and usages add field by field; the readers of every provider's
usage (SDK objects, dicts, LangChain's usage_metadata) and their error on shapes they do not know.
"""

from __future__ import annotations

import pytest
from anthropic.types import Usage as AnthropicUsage
from google.genai import types as gtypes
from hypothesis import given
from langchain_core.messages import AIMessage
from openai.types import CompletionUsage
from openai.types.responses import ResponseUsage

from tests.strategies import usages
from workingctx import Usage
from workingctx.exceptions import InvalidMessageError


class TestValidation:
    def test_usage_is_non_negative(self):
        """
        Negative token counts are refused.
        """
        with pytest.raises(ValueError, match="input_tokens"):
            Usage(input_tokens=-1)
        with pytest.raises(ValueError, match="cache_write_5m_tokens"):
            Usage.from_cache_writes(cache_write_5m_tokens=-1)

    def test_usage_one_hour_writes_are_part_of_the_total(self):
        """
        One-hour cache writes above the total are refused with the fix; the
        five-minute share is the rest of the total.
        """
        with pytest.raises(InvalidMessageError, match=r"cache_write_1h_tokens=5 exceeds cache_write_tokens=3.*=8"):
            Usage(cache_write_tokens=3, cache_write_1h_tokens=5)
        usage = Usage(cache_write_tokens=8, cache_write_1h_tokens=5)
        assert (3, 5) == (usage.cache_write_5m_tokens, usage.cache_write_1h_tokens)
        assert usage == Usage.from_cache_writes(cache_write_5m_tokens=3, cache_write_1h_tokens=5)
        assert 8 == Usage(cache_write_tokens=8).cache_write_5m_tokens


class TestConstructors:
    def test_usage_maps_provider_shapes(self):
        """
        OpenAI and Anthropic usage shapes map to the same Usage.
        """
        openai = Usage.from_openai(
            {"prompt_tokens": 120, "completion_tokens": 8, "prompt_tokens_details": {"cached_tokens": 100}}
        )
        anthropic = Usage.from_anthropic({"input_tokens": 20, "output_tokens": 8, "cache_read_input_tokens": 100})
        assert openai == anthropic
        assert 128 == openai.total_tokens

    @given(usages, usages)
    def test_usage_adds_fieldwise(self, one, two):
        """
        Adding usages adds every field.
        """
        total = one + two
        assert one.total_tokens + two.total_tokens == total.total_tokens
        assert one.reasoning_tokens + two.reasoning_tokens == total.reasoning_tokens
        assert one.cache_write_1h_tokens + two.cache_write_1h_tokens == total.cache_write_1h_tokens
        assert one.cache_write_5m_tokens + two.cache_write_5m_tokens == total.cache_write_5m_tokens


def test_openai_sdk_objects():
    """
    Chat and Responses usage objects read the same as their dicts, cache writes included.
    """
    chat = CompletionUsage(
        prompt_tokens=120,
        completion_tokens=8,
        total_tokens=128,
        prompt_tokens_details={"cached_tokens": 100},
        completion_tokens_details={"reasoning_tokens": 3},
    )
    assert Usage.from_openai(chat) == Usage(20, 8, 100, 0, 3)
    responses = ResponseUsage(
        input_tokens=50,
        output_tokens=5,
        total_tokens=55,
        input_tokens_details={"cached_tokens": 40, "cache_write_tokens": 0},
        output_tokens_details={"reasoning_tokens": 2},
    )
    assert Usage.from_openai(responses) == Usage(10, 5, 40, 0, 2)
    written = {"prompt_tokens": 100, "completion_tokens": 1, "prompt_tokens_details": {"cache_write_tokens": 60}}
    assert Usage.from_openai(written).cache_write_tokens == 60
    assert Usage.from_openai(written).input_tokens == 40


def test_anthropic_sdk_object_with_the_hour_split():
    """
    The Anthropic usage object gives the 5-minute and 1-hour cache writes apart.
    """
    usage = AnthropicUsage(
        input_tokens=10,
        output_tokens=2,
        cache_read_input_tokens=7,
        cache_creation_input_tokens=30,
        cache_creation={"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 20},
    )
    read = Usage.from_anthropic(usage)
    assert (read.cache_write_tokens, read.cache_write_1h_tokens, read.cache_write_5m_tokens) == (30, 20, 10)


def test_google_usage_metadata():
    """
    Gemini's usage metadata, object or camelCase dict: cached content apart, thoughts as reasoning.
    """
    meta = gtypes.GenerateContentResponseUsageMetadata(
        prompt_token_count=100, candidates_token_count=10, cached_content_token_count=60, thoughts_token_count=4
    )
    assert Usage.from_google(meta) == Usage(40, 14, 60, 0, 4)
    assert Usage.from_google({"promptTokenCount": 100, "candidatesTokenCount": 10}) == Usage(100, 10)


def test_langchain_usage_metadata():
    """
    LangChain's usage_metadata (input includes cache reads and writes) reads apart, from a message too.
    """
    meta = {
        "input_tokens": 350,
        "output_tokens": 240,
        "total_tokens": 590,
        "input_token_details": {"cache_read": 100, "cache_creation": 200, "ephemeral_1h_input_tokens": 50},
        "output_token_details": {"reasoning": 200},
    }
    usage = Usage.from_langchain(meta)
    assert usage == Usage(50, 240, 100, 200, 200, cache_write_1h_tokens=50)
    assert Usage.from_langchain(AIMessage("x", usage_metadata=meta)) == usage


@pytest.mark.parametrize("reader", [Usage.from_openai, Usage.from_anthropic, Usage.from_google, Usage.from_langchain])
def test_unknown_shapes_raise(reader):
    """
    A shape a reader does not know raises, naming it, never reads as zeros.
    """
    with pytest.raises(ValueError, match="is not a"):
        reader({"tokens": 5})
    with pytest.raises(TypeError, match="must be a mapping"):
        reader(5)
    with pytest.raises(ValueError, match="non-negative int"):
        reader({"input_tokens": -1, "output_tokens": 1, "prompt_token_count": -1})
