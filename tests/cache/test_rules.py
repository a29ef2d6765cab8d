"""
Tests for the providers' caching rules as data: rules built from bad numbers or lifetimes are refused.
"""

from __future__ import annotations

import pytest

from workingctx.cache import RULES, CacheRules
from workingctx.exceptions import CacheRuleError


class TestRuleValues:
    def test_bad_rules(self):
        """
        Rules built from bad numbers are refused, naming the field.
        """
        with pytest.raises(TypeError, match="minimum_tokens must be a mapping"):
            CacheRules(
                "p", explicit=True, max_breakpoints=4, lookback_blocks=20, minimum_tokens=[("a", 1)], default_minimum=0
            )  # type: ignore[arg-type]
        with pytest.raises(CacheRuleError, match=r"minimum_tokens\['a'\]"):
            CacheRules(
                "p", explicit=True, max_breakpoints=4, lookback_blocks=20, minimum_tokens={"a": -1}, default_minimum=0
            )
        with pytest.raises(CacheRuleError, match="max_breakpoints must be 0 or more"):
            CacheRules("p", explicit=True, max_breakpoints=-1, lookback_blocks=20, minimum_tokens={}, default_minimum=0)
        with pytest.raises(CacheRuleError, match="lookback_blocks must be a positive int"):
            CacheRules("p", explicit=True, max_breakpoints=4, lookback_blocks=0, minimum_tokens={}, default_minimum=0)


class TestExpiry:
    def test_rules_need_a_lifetime_per_ttl(self):
        """
        Rules that offer a TTL without a lifetime, or with a bad one, are refused.
        """
        with pytest.raises(CacheRuleError, match=r"no lifetime for \['1h'\]"):
            CacheRules(
                "p",
                explicit=True,
                max_breakpoints=4,
                lookback_blocks=20,
                minimum_tokens={},
                default_minimum=0,
                ttls=("1h", "5m"),
            )
        with pytest.raises(CacheRuleError, match=r"lifetimes\['2h'\]"):
            CacheRules(
                "p", explicit=False, max_breakpoints=0, lookback_blocks=1, minimum_tokens={}, default_minimum=0,
                lifetimes={"5m": 300, "2h": 7200},
            )  # fmt: skip
        with pytest.raises(CacheRuleError, match=r"lifetimes\['5m'\]"):
            CacheRules(
                "p", explicit=False, max_breakpoints=0, lookback_blocks=1, minimum_tokens={}, default_minimum=0,
                lifetimes={"5m": 0},
            )  # fmt: skip
        with pytest.raises(TypeError, match="lifetimes must be a mapping"):
            CacheRules(
                "p", explicit=False, max_breakpoints=0, lookback_blocks=1, minimum_tokens={}, default_minimum=0,
                lifetimes=300,  # type: ignore[arg-type]
            )  # fmt: skip
        assert {"5m": 300, "1h": 3_600} == dict(RULES["anthropic"].lifetimes)


def test_a_model_takes_the_minimum_of_its_longest_listed_name():
    """
    A model's minimum is that of the longest listed name it starts with,
    after any provider prefix (Gemini 2.5 Flash-Lite is not Flash); a model
    none starts with takes the highest, so no breakpoint is planned in vain.
    """
    gemini = RULES["gemini"]
    assert gemini.minimum_for("gemini-2.5-flash-001") == gemini.minimum_tokens["gemini-2.5-flash"]
    assert gemini.minimum_for("models/gemini-2.5-flash-lite-preview") == gemini.minimum_tokens["gemini-2.5-flash-lite"]
    assert gemini.minimum_tokens["gemini-2.5-flash-lite"] != gemini.minimum_tokens["gemini-2.5-flash"]
    assert gemini.minimum_for("gemini-9-ultra") == gemini.default_minimum == max(gemini.minimum_tokens.values())
