"""
Usage readers: SDK objects and dicts from every provider, LangChain's
usage_metadata, and a clear error on shapes they do not know.
"""

from __future__ import annotations

import pytest
from anthropic.types import Usage as AnthropicUsage
from google.genai import types as gtypes
from langchain_core.messages import AIMessage
from openai.types import CompletionUsage
from openai.types.responses import ResponseUsage

from workingctx import Usage


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
