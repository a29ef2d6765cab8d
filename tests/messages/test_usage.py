"""
Usage: token counts are non-negative, one-hour cache writes are part of the total, provider usage
shapes map to the same value, and usages add field by field.
"""

from __future__ import annotations

import pytest
from hypothesis import given

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
