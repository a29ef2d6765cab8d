"""
Tests for workingctx.messages and workingctx.prefix.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import assert_identical, blocks, messages, prefixes, tool_calls, unparsable_arguments, usages
from workingctx import Message, PrefixContext, ToolCall, Usage, thaw
from workingctx.exceptions import (
    FrozenPayloadError,
    InvalidMessageError,
    PayloadError,
    PayloadTypeError,
    SerializationError,
)
from workingctx.frozen import MAX_DEPTH, deep_freeze
from workingctx.messages import (
    BLOCK_TYPES,
    AnnotationBlock,
    AnnotationRef,
    AudioBlock,
    DocumentBlock,
    ErrorBlock,
    ImageBlock,
    MediaRef,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from workingctx.serialization import structure, unstructure

_MEDIA = MediaRef(url="https://example.com/a.png")
_BIG = 10**4300

# (constructor, the field or path the error must name): each is refused today by
# the converter (from_json, load), so the constructor refuses it too.
REFUSED = [
    (lambda: Message("user", delta=1), TypeError, "delta"),
    (lambda: Message("user", delta="yes"), TypeError, "delta"),
    (lambda: Message(role=type("Role", (str,), {})("user")), InvalidMessageError, "role"),
    (lambda: Message("user", id=_BIG), ValueError, "id"),
    (lambda: ToolResultBlock("c1", is_error="no"), TypeError, "is_error"),
    (lambda: ToolResultBlock("c1", is_error=0), TypeError, "is_error"),
    (lambda: ToolResultBlock("c1", status="done"), InvalidMessageError, "status"),
    (lambda: ToolResultBlock("c1", status=1), TypeError, "status"),
    (lambda: AnnotationBlock(kind="footnote"), InvalidMessageError, "kind"),
    (lambda: MediaRef(kind="link", url="u"), InvalidMessageError, "kind"),
    (lambda: MediaRef(url="u", width=True), TypeError, "width"),
    (lambda: MediaRef(url="u", size_bytes=_BIG), ValueError, "size_bytes"),
    (lambda: AnnotationRef(page=_BIG), ValueError, "page"),
    (lambda: ImageBlock(_MEDIA, bbox=[True, 0]), TypeError, r"bbox\[0\]"),
    (lambda: ImageBlock(_MEDIA, bbox=[0, float("nan")]), ValueError, r"bbox\[1\]"),
    (lambda: ImageBlock(_MEDIA, bbox=[float("inf")]), ValueError, r"bbox\[0\]"),
    (lambda: ImageBlock(_MEDIA, bbox=[_BIG]), ValueError, r"bbox\[0\]"),
    (lambda: DocumentBlock(_MEDIA, pages=[1, False]), TypeError, "pages"),
    (lambda: AudioBlock(_MEDIA, sample_rate=_BIG), ValueError, "sample_rate"),
    (lambda: AnnotationBlock(spans=[(True, 2)]), TypeError, r"spans\[0\]"),
    (lambda: AnnotationBlock(spans=[(0, _BIG)]), ValueError, r"spans\[0\]"),
    (lambda: Usage(input_tokens=_BIG), ValueError, "input_tokens"),
    (lambda: Message("user", metadata={"score": float("nan")}), PayloadError, r"metadata\['score'\] is nan"),
    (lambda: Message("user", metadata={"a": [float("-inf")]}), PayloadError, r"metadata\['a'\]\[0\]"),
    (lambda: Message("user", metadata={"n": _BIG}), PayloadError, r"metadata\['n'\] is an int"),
    (lambda: Message("user", metadata={"s": {1, 2}}), PayloadTypeError, r"metadata\['s'\] is \{1, 2\}"),
    (lambda: Message("user", metadata={"k": {1: "one"}}), PayloadTypeError, r"metadata\['k'\] has the key 1"),
    (lambda: ToolCall("c1", "f", {"o": object()}), PayloadTypeError, r"arguments\['o'\] is <object"),
    (lambda: ToolCallBlock("c1", "f", {"x": float("nan")}), PayloadError, r"args\['x'\]"),
    (lambda: ToolResultBlock("c1", [float("inf")]), PayloadError, r"output\[0\]"),
    (lambda: ToolResultBlock("c1", object()), PayloadTypeError, "output is"),
    (lambda: ErrorBlock("boom", data={"d": {1}}), PayloadTypeError, r"data\['d'\]"),
]


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


class TestOneContract:
    @pytest.mark.parametrize(("build", "error", "names"), REFUSED)
    def test_constructor_refuses_what_no_reader_accepts(self, build, error, names):
        """
        A field the converter would refuse when reading it back (a literal
        outside its choices, a non-bool flag, a bool where an int belongs, a
        NaN, an int str() cannot write, a payload that is not JSON data) is
        refused when the value is built, with an error naming the field.
        """
        with pytest.raises(error, match=names):
            build()

    @given(messages())
    def test_whatever_constructs_reads_back_identical(self, message):
        """
        Every message the constructor accepts (edge values included) is read
        back by the converter with the same types at every depth.
        """
        assert_identical(message, structure(unstructure(message), Message))

    @pytest.mark.parametrize(
        "data",
        [
            {"role": "user", "delta": 1},
            {"role": "user", "metadata": {"a": float("nan")}},
            {"role": "tool", "content": [{"type": "tool_result", "call_id": "c", "status": "done"}]},
            {"role": "tool", "content": [{"type": "tool_result", "call_id": "c", "is_error": "no"}]},
            {"role": "user", "content": [{"type": "annotation", "kind": "footnote"}]},
            {"role": "user", "content": [{"type": "image", "media": {"url": "u"}, "bbox": [True]}]},
        ],
    )
    def test_what_readers_refuse_constructors_refuse(self, data):
        """
        Data the converter refuses is exactly data the constructor refuses:
        building the same value by hand fails too.
        """
        with pytest.raises(SerializationError):
            structure(data, Message)
        kwargs = {key: value for key, value in data.items() if key != "content"}
        with pytest.raises((TypeError, ValueError)):  # noqa: PT012  # the blocks or the message refuse
            content = [_block(block) for block in data.get("content", [])]
            Message(**kwargs, content=content or "")

    def test_enum_and_subclass_scalars_become_plain(self):
        """
        A str or int subclass (an enum) in a payload is kept as the plain value,
        so what is read back has the same types as what was built.
        """
        import enum  # noqa: PLC0415

        class Level(enum.IntEnum):
            HIGH = 3

        class Tag(str, enum.Enum):  # noqa: UP042  # the mixin form, as older code writes it
            A = "a"

        message = Message("user", metadata={"level": Level.HIGH, Tag.A: [Tag.A]})
        assert_identical({"level": 3, "a": ["a"]}, thaw(message.metadata))


class TestDepthAndCycles:
    @pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 10_000])
    def test_deep_payloads_refused_clearly(self, levels):
        """
        Metadata and tool arguments nested deeper than MAX_DEPTH levels (10,000
        included) are refused when built with PayloadError naming where, never
        RecursionError.
        """
        deep: object = "leaf"
        for _ in range(levels):
            deep = {"k": deep}
        with pytest.raises(PayloadError, match=r"metadata\['k'\]\['k'\].*nested more than 100 levels"):
            Message("user", metadata={"k": deep})
        with pytest.raises(PayloadError, match=r"arguments\['k'\].*nested more than 100 levels"):
            ToolCall("c1", "f", {"k": deep})

    def test_deepest_allowed_payload_works_everywhere(self):
        """
        A payload exactly MAX_DEPTH levels deep is accepted, and digests,
        pickles, copies and round-trips.
        """
        import copy  # noqa: PLC0415
        import pickle  # noqa: PLC0415

        from workingctx.serialization import from_json, to_json  # noqa: PLC0415

        deep: object = 1
        for _ in range(MAX_DEPTH - 1):
            deep = [deep]
        message = Message("user", metadata={"k": deep})
        assert 64 == len(message.digest())
        assert message == pickle.loads(pickle.dumps(message)) == copy.deepcopy(message)
        assert_identical(message, from_json(to_json(message), Message))
        assert message == Message("user", metadata=message.metadata)

    def test_cyclic_payloads_refused_clearly(self):
        """
        Metadata or tool arguments that contain themselves are refused with
        PayloadError saying where the cycle closes.
        """
        cyclic: dict[str, object] = {"a": 1}
        cyclic["me"] = [cyclic]
        with pytest.raises(PayloadError, match=r"metadata\['me'\]\[0\] is metadata again.*cycle"):
            Message("user", metadata=cyclic)
        args: list[object] = []
        args.append(args)
        with pytest.raises(PayloadError, match="cycle"):
            ToolCall("c1", "f", {"args": args})

    def test_frozen_payloads_nested_by_hand_are_bounded(self):
        """
        Frozen payloads wrapped in one another by hand, each within the limit,
        are refused once together they are too deep.
        """
        inner = Message("user", metadata={"k": _nested(MAX_DEPTH - 1)}).metadata
        with pytest.raises(PayloadError, match="nested more than"):
            Message("user", metadata={"outer": inner})


def _nested(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


def _block(data: dict[str, object]) -> object:
    from workingctx.serialization import converter  # noqa: PLC0415

    cls = {cls.type: cls for cls in BLOCK_TYPES}[data["type"]]  # type: ignore[index]
    fields = {key: value for key, value in data.items() if key != "type"}
    if "media" in fields:
        fields["media"] = converter.structure(fields["media"], MediaRef)
    return cls(**fields)


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

    def test_arguments_must_be_a_mapping(self):
        """
        Tool arguments that are not a mapping are refused with a hint to parse JSON.
        """
        with pytest.raises(TypeError, match=r"json\.loads"):
            ToolCall("c1", "f", '{"a": 1}')  # type: ignore[arg-type]
        with pytest.raises(InvalidMessageError, match="must not be empty"):
            ToolCall("", "f", {})

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

    def test_media_ref_needs_its_field(self):
        """
        A MediaRef whose kind's field is missing is refused.
        """
        with pytest.raises(InvalidMessageError, match=r"needs url="):
            MediaRef(kind="url")
        with pytest.raises(InvalidMessageError, match="kind must be"):
            MediaRef(kind="ftp", url="x")  # type: ignore[arg-type]

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

    def test_image_message(self):
        """
        image_message builds a text block and an image block; without an image it refuses.
        """
        message = Message.image_message(image_url="https://example.com/a.png", text="What is this?")
        assert "What is this?" == message.text()
        assert isinstance(message.content[1], ImageBlock)
        with pytest.raises(InvalidMessageError, match="image_url"):
            Message.image_message(text="no image")

    def test_from_file(self, tmp_path):
        """
        from_file picks the block type from the MIME type and embeds the bytes.
        """
        path = tmp_path / "report.pdf"
        path.write_bytes(b"%PDF-1.4")
        message = Message.from_file(path, text="Summarise")
        block = message.content[1]
        assert "document" == block.type
        assert b"%PDF-1.4" == base64.b64decode(block.media.data_base64)
        assert "application/pdf" == block.media.mime_type
        with pytest.raises(FileNotFoundError):
            Message.from_file(tmp_path / "missing.png")

    def test_from_file_refuses_what_is_not_a_regular_file(self, tmp_path):
        """
        A directory or a FIFO is refused at once (reading a FIFO with no writer
        would wait forever), with an error naming the path and what it is.
        """
        with pytest.raises(InvalidMessageError, match=r"reads regular files only; .* is a directory"):
            Message.from_file(tmp_path)
        fifo = tmp_path / "pipe"
        os.mkfifo(fifo)
        with pytest.raises(InvalidMessageError, match=r"reads regular files only; .* is a FIFO"):
            Message.from_file(fifo, mime_type="image/png")

    def test_from_file_refuses_a_file_over_the_limit(self, tmp_path):
        """
        A file over the limit (MAX_INLINE_FILE_BYTES by default, or max_bytes)
        is refused before it is read whole; one at the limit is read.
        """
        from workingctx.messages import MAX_INLINE_FILE_BYTES  # noqa: PLC0415

        path = tmp_path / "scan.png"
        path.write_bytes(b"\x89PNG" + b"\0" * 96)
        with pytest.raises(InvalidMessageError, match="holds more than 99 bytes, the limit of an inline file"):
            Message.from_file(path, max_bytes=99)
        assert 100 == Message.from_file(path, max_bytes=100).content[0].media.size_bytes
        big = tmp_path / "big.bin"
        with big.open("wb") as handle:
            handle.truncate(MAX_INLINE_FILE_BYTES + 1)  # sparse: no disk used
        with pytest.raises(InvalidMessageError, match=r"max_bytes=\.\.\."):
            Message.from_file(big)
        with pytest.raises(TypeError, match="max_bytes must be an int"):
            Message.from_file(path, max_bytes="100")  # type: ignore[arg-type]

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


def test_thirteen_block_types():
    """
    There are thirteen content block types, each with a distinct type tag.
    """
    assert 13 == len(BLOCK_TYPES)
    assert 13 == len({cls.type for cls in BLOCK_TYPES})


@given(st.dictionaries(st.text(max_size=5), st.integers()))
def test_deep_freeze_roundtrip_on_arguments(arguments):
    """
    Tool arguments come back as plain data through thaw().
    """
    assert arguments == thaw(ToolCall("c", "f", arguments).arguments)
    assert deep_freeze(arguments) == ToolCall("c", "f", arguments).arguments


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
