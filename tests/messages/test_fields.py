"""
The field checks shared by messages, blocks, tool calls and usage: what the converter would refuse
is refused when built, and payloads (metadata, arguments, provider data) are frozen JSON, bounded and acyclic.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import assert_identical, messages
from workingctx import Message, ToolCall, Usage, thaw
from workingctx.exceptions import (
    InvalidMessageError,
    PayloadError,
    PayloadTypeError,
    SerializationError,
    WorkingCtxError,
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
    ToolCallBlock,
    ToolResultBlock,
)
from workingctx.serialization import structure, unstructure

_MEDIA = MediaRef(url="https://example.com/a.png")
_BIG = 10**4300


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


@given(st.dictionaries(st.text(max_size=5), st.integers()))
def test_deep_freeze_roundtrip_on_arguments(arguments):
    """
    Tool arguments come back as plain data through thaw().
    """
    assert arguments == thaw(ToolCall("c", "f", arguments).arguments)
    assert deep_freeze(arguments) == ToolCall("c", "f", arguments).arguments


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
