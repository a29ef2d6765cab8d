"""
Message: equality, hashes and digests, its repr, the checks of its role, content and
tool fields, its role constructors and readers, and its round trip through the converter.
"""

from __future__ import annotations

import os
import subprocess
import sys

import attrs
import pytest
from hypothesis import given

from tests.strategies import blocks, messages, tool_calls
from workingctx import Message, ToolCall
from workingctx.exceptions import FrozenPayloadError, InvalidMessageError
from workingctx.messages import TextBlock, ToolCallBlock, ToolResultBlock
from workingctx.serialization import structure, unstructure


class TestValueSemantics:
    @given(messages())
    def test_equal_messages_hash_equal(self, message):
        """
        A message rebuilt from its own fields is equal, hashes equal and has
        the same digest.
        """
        fields = {a.name: getattr(message, a.name) for a in attrs.fields(Message) if a.init}
        twin = Message(**fields)
        assert message == twin
        assert hash(message) == hash(twin)
        assert message.digest() == twin.digest()

    @given(blocks)
    def test_blocks_hash_and_compare_by_value(self, block):
        """
        A block equals and hashes like its rebuilt twin.
        """
        fields = {a.name: getattr(block, a.name) for a in attrs.fields(type(block))}
        twin = type(block)(**fields)
        assert block == twin
        assert hash(block) == hash(twin)

    @given(tool_calls)
    def test_tool_calls_hash_with_nested_arguments(self, call):
        """
        A tool call's arguments are frozen, so a message carrying it hashes.
        """
        message = Message("assistant", "", tool_calls=(call,))
        assert isinstance(hash(message), int)
        with pytest.raises(FrozenPayloadError):
            call.arguments["new"] = 1  # type: ignore[index]

    def test_no_random_ids(self):
        """
        Two messages built from the same data are equal: nothing is generated.
        """
        assert Message("user", "hi") == Message("user", "hi")
        assert Message("user", "hi").id is None

    def test_digest_is_stable_across_hash_seeds(self, tmp_path):
        """
        A message's digest printed by interpreters with different hash seeds agrees.
        """
        script = (
            "from workingctx import Message, ToolCall;"
            "call = ToolCall('c', 'f', {'b': [1, 1.0, True], 'a': [1]});"
            "print(Message('assistant', '', tool_calls=(call,)).digest())"
        )
        outs = {
            subprocess.run(
                [sys.executable, "-c", script],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "PYTHONHASHSEED": seed},
                cwd=tmp_path,
            ).stdout
            for seed in ("0", "99")
        }
        assert 1 == len(outs)

    def test_metadata_is_frozen_and_compared(self):
        """
        Metadata is deep-frozen and part of equality, but not of the hash.
        """
        one = Message("user", "hi", metadata={"source": ["api"]})
        two = Message("user", "hi", metadata={"source": ["cli"]})
        assert one != two
        with pytest.raises(FrozenPayloadError):
            one.metadata["source"].append("x")

    def test_repr_shows_what_is_set(self):
        """
        The repr names the role and content and only the fields that are set.
        """
        assert "Message('user', 'hi')" == repr(Message("user", "hi"))
        assert "Message('tool', 'r', tool_call_id='c1')" == repr(Message("tool", "r", tool_call_id="c1"))


class TestValidation:
    def test_unknown_role(self):
        """
        An unknown role is refused, with the valid roles named.
        """
        with pytest.raises(InvalidMessageError, match=r"unknown role 'System'.*'system', 'user'"):
            Message("System", "x")  # type: ignore[arg-type]

    def test_non_string_text(self):
        """
        Content that is neither text nor blocks is refused with a hint.
        """
        with pytest.raises(TypeError, match=r"content must be a str or a sequence of content blocks, got 42"):
            Message("user", 42)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"content\[1\] must be a"):
            Message("user", [TextBlock("a"), "b"])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="text must be a str"):
            TextBlock(3)  # type: ignore[arg-type]

    def test_tool_call_id_only_on_tool_messages(self):
        """
        tool_call_id on a user message and tool_calls on a tool message are refused.
        """
        with pytest.raises(InvalidMessageError, match="use role='tool'"):
            Message("user", "x", tool_call_id="c1")
        with pytest.raises(InvalidMessageError, match="only an 'assistant' message"):
            Message("tool", "x", tool_calls=(ToolCall("c1", "f", {}),))

    def test_tool_constructor_requires_a_call_id(self):
        """
        Message.tool needs the id of the call it answers.
        """
        with pytest.raises(InvalidMessageError, match="call_id=''"):
            Message.tool("out", call_id="")


class TestConstructors:
    def test_role_constructors(self):
        """
        The role constructors build the same values as Message(role, ...).
        """
        call = ToolCall("c1", "f", {"a": 1})
        assert Message("system", "s") == Message.system("s")
        assert Message("user", "u") == Message.user("u")
        assert Message("assistant", "", tool_calls=(call,)) == Message.assistant(tool_calls=[call])
        assert Message("tool", "r", tool_call_id="c1", name="f") == Message.tool("r", call_id="c1", name="f")
        assert Message("user", "[notice] tests ran") == Message.notice("tests ran")

    def test_tool_message_takes_its_call_id_from_the_block(self):
        """
        A tool message from one result block carries that block's call id.
        """
        message = Message.tool_message([ToolResultBlock(call_id="call_123", output="Sunny, 22C", status="completed")])
        assert "call_123" == message.tool_call_id
        assert ("call_123",) == message.result_ids
        assert "Sunny, 22C" == message.text()

    def test_multimodal_text_and_call_ids(self):
        """
        text() joins text blocks and tool outputs (JSON for data); call ids come
        from tool_calls and tool-call blocks.
        """
        message = Message(
            "assistant",
            (
                TextBlock("Checking the weather. "),
                ToolCallBlock(id="call_1", name="get_weather", args={"location": "London"}),
                ToolResultBlock(call_id="call_0", output={"temp": 22}),
            ),
        )
        assert 'Checking the weather. {"temp": 22}' == message.text()
        assert ("call_1",) == message.call_ids
        assert ("call_0",) == message.result_ids


@given(messages())
def test_messages_round_trip_through_the_converter(message):
    """
    Every message, provider data and argument text included, comes back equal with an equal digest.
    """
    back = structure(unstructure(message), Message)
    assert back == message
    assert back.digest() == message.digest()
