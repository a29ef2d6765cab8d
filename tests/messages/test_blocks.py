"""
Content blocks and tool calls: the thirteen block types, their fields and reprs, a tool result's
blocks, and a tool call's arguments and their exact text, kept even when it is no JSON object.
"""

from __future__ import annotations

import pytest
from hypothesis import given

from tests.strategies import blocks, unparsable_arguments
from workingctx import Message, ToolCall
from workingctx.exceptions import InvalidMessageError
from workingctx.messages import BLOCK_TYPES, ProviderBlock, ReasoningBlock, ToolResultBlock
from workingctx.serialization import structure, unstructure


def test_thirteen_block_types():
    """
    There are thirteen content block types, each with a distinct type tag.
    """
    assert 13 == len(BLOCK_TYPES)
    assert 13 == len({cls.type for cls in BLOCK_TYPES})


class TestValidation:
    def test_arguments_must_be_a_mapping(self):
        """
        Tool arguments that are not a mapping are refused with a hint to parse JSON.
        """
        with pytest.raises(TypeError, match=r"json\.loads"):
            ToolCall("c1", "f", '{"a": 1}')  # type: ignore[arg-type]
        with pytest.raises(InvalidMessageError, match="must not be empty"):
            ToolCall("", "f", {})


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


class TestUnparsableArguments:
    """
    A call whose arguments text is not a JSON object keeps the text verbatim, as data.
    """

    @pytest.mark.parametrize("text", ['{"path": "/tmp/a', "[1,2]", "null", "", '"text"'])
    def test_the_text_is_kept_and_the_arguments_stay_empty(self, text):
        """
        The text is kept as it came, ``arguments`` stays empty and ``arguments_parsed`` says so.
        """
        call = ToolCall("c1", "read", arguments_json=text)

        assert text == call.arguments_json
        assert {} == call.arguments
        assert call.arguments_parsed is False
        assert ToolCall("c1", "read", arguments_json='{"path": "/tmp/a"}').arguments_parsed is True
        assert ToolCall("c1", "read").arguments_parsed is True
        assert ToolCall("c1", "read", arguments_json="{}").arguments_parsed is True

    def test_arguments_beside_text_that_is_not_an_object_are_refused(self):
        """
        Arguments given with text that does not decode to them are refused, naming the text.
        """
        with pytest.raises(InvalidMessageError, match=r"'\[1,2\]' is not the text of a JSON object") as info:
            ToolCall("c1", "read", {"path": "/srv/a"}, arguments_json="[1,2]")
        assert "arguments_json" == info.value.argument

    @given(unparsable_arguments)
    def test_every_value_path_keeps_the_text(self, text):
        """
        Equality, digest, repr, serialization and the stored canonical text all
        keep the text: a cut call never becomes the call with no arguments.
        """
        call = ToolCall("c1", "read", arguments_json=text)
        message = Message("assistant", tool_calls=[call])
        empty = Message("assistant", tool_calls=[ToolCall("c1", "read")])

        assert message != empty
        assert message.digest() != empty.digest()
        assert call == eval(repr(call), {"ToolCall": ToolCall})  # noqa: S307  # the repr of a value
        assert message == structure(unstructure(message), Message)
        assert text == structure(unstructure(message), Message).tool_calls[0].arguments_json

    def test_a_store_keeps_the_text(self, tmp_path):
        """
        A context saved with a cut call loads back with the same text, unparsed.
        """
        from workingctx import SQLiteStore, WorkingContext  # noqa: PLC0415  # stores only here

        cut = Message("assistant", tool_calls=[ToolCall("c1", "read", arguments_json='{"path": "/tmp/a')])
        ctx = WorkingContext(messages=[Message("user", "read it"), cut], record=True)
        with SQLiteStore(tmp_path / "s.db") as store:
            loaded = store.load_context(store.save_context(ctx))

        assert ctx.messages == loaded.messages
        assert loaded.messages[1].tool_calls[0].arguments_parsed is False
