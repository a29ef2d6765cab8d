"""
PrefixContext: the system prompt, grounding and schema block rendered before the messages,
compared by value, frozen, and refusing grounding that is not messages.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given

from tests.strategies import prefixes
from workingctx import Message, PrefixContext


class TestPrefix:
    def test_as_messages_order_and_freshness(self):
        """
        System prompt, grounding in order, then the schema block named
        'schema'; each call returns a new list.
        """
        prefix = PrefixContext(
            system_prompt="sys",
            grounding=(Message("system", "g1"), Message("user", "g2")),
            schema_block='{"type": "object"}',
        )
        rendered = prefix.as_messages()
        assert ["sys", "g1", "g2", '{"type": "object"}'] == [m.content for m in rendered]
        assert "schema" == rendered[-1].name
        assert "system" == rendered[-1].role
        rendered.clear()
        assert 4 == len(prefix.as_messages())
        assert prefix.as_messages() is not prefix.as_messages()

    @given(prefixes)
    def test_structural_equality_and_hash(self, prefix):
        """
        A prefix rebuilt from the same parts is equal, hashes equal and has the same digest.
        """
        twin = PrefixContext(
            system_prompt=prefix.system_prompt,
            grounding=list(prefix.grounding),
            schema_block=prefix.schema_block,
            cache_hint=prefix.cache_hint,
        )
        assert prefix == twin
        assert hash(prefix) == hash(twin)
        assert prefix.digest() == twin.digest()

    def test_frozen(self):
        """
        Assigning a field raises attrs' FrozenInstanceError.
        """
        prefix = PrefixContext(system_prompt="You are a careful research assistant.")
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            prefix.system_prompt = "something else"  # type: ignore[misc]

    def test_bad_grounding(self):
        """
        Grounding must be messages; a bare message or text is refused with a hint.
        """
        with pytest.raises(TypeError, match="wrap a single message"):
            PrefixContext(grounding=Message("system", "g"))  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"grounding\[0\] must be a Message"):
            PrefixContext(grounding=["text"])  # type: ignore[list-item]
