"""
Tests for workingctx.serialization: round trips of every value, JSON-compatible
output, and one documented error type with a path for bad data.
"""

from __future__ import annotations

import copy
import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import (
    annotation_refs,
    assert_identical,
    blocks,
    json_objects,
    json_values,
    media_refs,
    messages,
    prefixes,
    scratchpads,
    tool_calls,
    transcripts,
    usages,
)
from workingctx import ApproxTokenCounter, Message, PrefixContext, ToolCall, Usage
from workingctx.context import WorkingContext
from workingctx.exceptions import CheckpointError, PayloadError, PayloadTypeError, SerializationError
from workingctx.frozen import MAX_DEPTH, FrozenDict, FrozenList
from workingctx.messages import BLOCK_TYPES, AnnotationRef, ContentBlock, MediaRef, TextBlock, ToolResultBlock
from workingctx.persistence import Checkpoint, SQLiteStore
from workingctx.serialization import converter, from_json, parse_json, structure, to_json, unstructure
from workingctx.snapshot import ContextDiff, FrozenContext


def assert_plain_json(data: Any) -> None:
    """
    Fail unless *data* is made only of dicts with str keys, lists and JSON scalars.
    """
    if isinstance(data, dict):
        assert type(data) is dict
        for key, item in data.items():
            assert type(key) is str
            assert_plain_json(item)
    elif isinstance(data, list):
        assert type(data) is list
        for item in data:
            assert_plain_json(item)
    else:
        assert data is None or type(data) in {str, int, float, bool}, data


def assert_frozen_json(value: Any) -> None:
    """
    Fail unless every container of a payload is a frozen one.
    """
    if isinstance(value, dict):
        assert type(value) is FrozenDict
        for item in value.values():
            assert_frozen_json(item)
    elif isinstance(value, list):
        assert type(value) is FrozenList
        for item in value:
            assert_frozen_json(item)


# value strategies with the type to structure them as
VALUES: list[tuple[st.SearchStrategy[Any], Any]] = [
    (messages(), Message),
    (blocks, ContentBlock),
    (tool_calls, ToolCall),
    (media_refs, MediaRef),
    (annotation_refs, AnnotationRef),
    (usages, Usage),
    (prefixes, PrefixContext),
    (st.lists(messages(), max_size=4).map(tuple), tuple[Message, ...]),
]
values_with_types = st.one_of(*(strategy.map(lambda v, t=t: (v, t)) for strategy, t in VALUES))


class TestRoundTrip:
    @given(values_with_types)
    def test_structure_unstructure(self, pair):
        """
        structure(unstructure(x)) == x for every value of the library.
        """
        value, kind = pair
        assert value == structure(unstructure(value), kind)

    @given(values_with_types)
    def test_through_json_text(self, pair):
        """
        from_json(to_json(x)) == x, through real JSON text.
        """
        value, kind = pair
        assert value == from_json(to_json(value), kind)

    @given(values_with_types)
    def test_output_is_plain_json(self, pair):
        """
        Unstructured data is plain JSON: json.dumps takes it without default=, and
        loading the text back gives the same data.
        """
        value, _ = pair
        data = unstructure(value)
        assert_plain_json(data)
        assert data == json.loads(json.dumps(data))

    @given(messages())
    def test_same_digest_after_round_trip(self, message):
        """
        A message read back has the same stable digest.
        """
        assert message.digest() == from_json(to_json(message), Message).digest()

    @given(st.lists(blocks, min_size=1, max_size=4).map(tuple))
    def test_blocks_as_message_content(self, content):
        """
        Content given as a tuple of blocks comes back as a tuple of the same blocks.
        """
        message = Message("user", content)
        back = structure(unstructure(message), Message)
        assert isinstance(back.content, tuple)
        assert [type(b) for b in content] == [type(b) for b in back.content]
        assert message == back

    def test_every_block_type_round_trips(self):
        """
        Each of the thirteen block classes is written with its tag and read back.
        """
        media = MediaRef(url="https://example.com/a.png")
        samples = {
            "text": {"text": "hi"},
            "image": {"media": media},
            "audio": {"media": media},
            "video": {"media": media},
            "document": {"media": media},
            "data": {"mime_type": "application/octet-stream"},
            "tool_call": {"id": "c1", "name": "lookup"},
            "remote_tool_call": {"id": "c1", "name": "lookup"},
            "tool_result": {"call_id": "c1"},
            "reasoning": {"summary": "think"},
            "annotation": {},
            "error": {"message": "boom"},
            "provider": {"provider": "anthropic", "data": {"type": "search_result"}},
        }
        assert len(BLOCK_TYPES) == 13
        for cls in BLOCK_TYPES:
            block = cls(**samples[cls.type])
            data = unstructure(block)
            assert cls.type == data["type"]
            assert block == structure(data, ContentBlock)
            assert block == structure(data, cls)


class TestBlocksTagged:
    @given(blocks)
    def test_tag_in_output(self, block):
        """
        Every unstructured block carries its "type" tag, first.
        """
        data = unstructure(block)
        assert type(block).type == data["type"]
        assert next(iter(data)) == "type"

    def test_block_without_tag_reads_as_its_class(self):
        """
        Structuring to a block class directly does not need the tag.
        """
        assert TextBlock("hi") == structure({"text": "hi"}, TextBlock)


def _unchecked(notes: dict[str, object]) -> FrozenContext:
    """
    A snapshot holding *notes* without the constructor's checks, as unpickling builds one.
    """
    snapshot = object.__new__(FrozenContext)
    snapshot.__setstate__((PrefixContext(), (), tuple(sorted(notes.items())), ()))
    return snapshot


class TestPayloads:
    @given(json_objects, json_values())
    def test_payloads_come_back_frozen(self, arguments, output):
        """
        Tool arguments, metadata and tool outputs come back deep-frozen and equal.
        """
        message = Message(
            "tool",
            (ToolResultBlock("c1", output),),
            tool_call_id="c1",
            metadata={"payload": arguments},
        )
        back = from_json(to_json(message), Message)
        assert message == back
        assert_frozen_json(back.metadata)
        assert_frozen_json(back.content[0].output)  # type: ignore[union-attr]
        call = ToolCall("c1", "lookup", arguments)
        back_call = structure(unstructure(call), ToolCall)
        assert call == back_call
        assert type(back_call.arguments) is FrozenDict

    def test_tuples_in_payloads_become_lists(self):
        """
        JSON has only arrays: a tuple inside a payload comes back as a frozen list.
        """
        call = ToolCall("c1", "lookup", {"span": (1, 2)})
        back = structure(unstructure(call), ToolCall)
        assert back.arguments["span"] == [1, 2]
        assert type(back.arguments["span"]) is FrozenList

    def test_non_json_payload_refused_with_path(self):
        """
        A set, a non-string key or an object of your own in a message payload is
        refused when the value is built, naming where it is; in a payload
        written as Any (a note), to_json refuses it with SerializationError.
        """
        with pytest.raises(PayloadTypeError) as info:
            Message("user", "x", metadata={"a": [1, {"s": {1, 2}}]})
        assert info.value.path == "metadata['a'][1]['s']"
        with pytest.raises(PayloadTypeError, match="key 1"):
            ToolCall("c1", "f", {"k": {1: "one"}})
        with pytest.raises(PayloadTypeError, match="output is <object"):
            ToolResultBlock("c1", object())
        with pytest.raises(SerializationError, match="not JSON data") as serialization:
            to_json({"a": [1, {"s": {1, 2}}]}, Any)
        assert serialization.value.path == "$['a'][1]['s']"

    def test_nan_refused_by_to_json(self):
        """
        JSON has no NaN: a message, a note and a snapshot refuse it when set,
        and to_json refuses one in a snapshot that skipped the checks (as an
        unpickled one does) and says where it is.
        """
        with pytest.raises(PayloadError, match=r"metadata\['score'\] is nan"):
            Message("user", "x", metadata={"score": float("nan")})
        with pytest.raises(PayloadError, match=r"note 'score' is nan"):
            WorkingContext().note("score", float("nan"))
        with pytest.raises(PayloadError, match=r"note 'score' is nan"):
            FrozenContext(scratchpad={"score": float("nan")})
        snapshot = _unchecked({"score": float("nan")})
        with pytest.raises(SerializationError, match="not a finite number") as info:
            to_json(snapshot)
        assert info.value.path == "$.scratchpad[0][1]"

    def test_an_int_too_long_is_named_as_such_by_to_json_and_a_store(self):
        """
        An int longer than MAX_INT_DIGITS digits in a snapshot that skipped the
        checks: to_json and a store's save name that int and where it is, not a float.
        """
        snapshot = _unchecked({"n": [1, 10**5000]})
        with pytest.raises(SerializationError, match=r"an int of 16610 bits.*store it as a string") as info:
            to_json(snapshot)
        assert "$.scratchpad[0][1][1]" == info.value.path
        assert "float" not in str(info.value)
        store = SQLiteStore(":memory:")
        with pytest.raises(CheckpointError, match=r"an int of 16610 bits.* at \$\.snapshot\.scratchpad\['n'\]\[1\]"):
            store.save(Checkpoint.capture(snapshot))
        assert [] == list(store.list())

    @pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
    @pytest.mark.parametrize(
        ("template", "kind", "path"),
        [
            ('{{"role": "user", "metadata": {{"a": [1, {}]}}}}', Message, "$.metadata['a'][1]"),
            (
                '{{"role": "user", "content": [{{"type": "image", "media": {{"url": "u"}}, "bbox": [{}]}}]}}',
                Message,
                "$.content[0].bbox[0]",
            ),
            ('{{"scratchpad": [["k", {{"x": {}}}]]}}', FrozenContext, "$.scratchpad[0][1]['x']"),
            ('{{"journal": [{}]}}', FrozenContext, "$.journal[0]"),
        ],
    )
    def test_from_json_refuses_nan_and_infinity(self, constant, template, kind, path):
        """
        Python's json reads NaN and Infinity; from_json refuses them with
        SerializationError and the path, as every constructor does.
        """
        with pytest.raises(SerializationError, match=r"finite|JSON cannot hold") as info:
            from_json(template.format(constant), kind)
        assert path == info.value.path

    @pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 2_000, 100_000])
    def test_from_json_of_deep_text(self, levels):
        """
        Text nested deeper than a payload may be (up to far beyond Python's
        recursion limit) raises SerializationError, never RecursionError.
        """
        text = '{"role": "user", "metadata": {"k": ' + "[" * levels + "]" * levels + "}}"
        with pytest.raises(SerializationError, match="deep"):
            from_json(text, Message)
        with pytest.raises(SerializationError):
            from_json("[" * levels + "]" * levels, tuple[Message, ...])

    @given(values_with_types)
    def test_round_trip_keeps_types(self, pair):
        """
        construct -> to_json -> from_json gives the same value with the same
        types at every depth (True stays True, 1 stays 1, 1.0 stays 1.0),
        edge values included, and the same digest where the value has one.
        """
        value, kind = pair
        back = from_json(to_json(value), kind)
        assert_identical(value, back)
        if hasattr(value, "digest"):
            assert value.digest() == back.digest()


class TestCompactOutput:
    def test_defaults_omitted(self):
        """
        Fields left at their defaults are not written.
        """
        assert unstructure(Message("user", "hi")) == {"role": "user", "content": "hi"}
        assert unstructure(Message("assistant")) == {"role": "assistant"}
        assert unstructure(Usage()) == {}
        assert unstructure(Usage(cache_write_tokens=9, cache_write_1h_tokens=4)) == {
            "cache_write_tokens": 9,
            "cache_write_1h_tokens": 4,
        }
        assert unstructure(PrefixContext()) == {}

    def test_private_caches_never_written(self):
        """
        A message's digest and token-count caches and a prefix's digest are never written.
        """
        message = Message("user", "hi")
        message.digest()
        ApproxTokenCounter().count_message(message)
        prefix = PrefixContext("sys")
        prefix.digest()
        text = to_json(message) + to_json(prefix)
        assert "digest" not in text
        assert "token" not in text

    def test_private_keys_refused_on_the_way_in(self):
        """
        A "_digest" key in the data is an unknown field, not a way to plant a cache.
        """
        with pytest.raises(SerializationError) as info:
            structure({"role": "user", "_digest": "0" * 64}, Message)
        assert info.value.path == "$._digest"


@attrs.frozen
class _Custom:
    name: str
    tags: frozenset[str] = frozenset()
    counts: dict[str, int] = attrs.Factory(dict)
    history: tuple[Message, ...] = ()
    extra: Any = None
    note: str | None = None


class TestGenericAttrs:
    @given(
        st.builds(
            _Custom,
            name=st.text(max_size=5),
            tags=st.frozensets(st.text(max_size=3), max_size=3),
            counts=st.dictionaries(st.text(max_size=3), st.integers(), max_size=3),
            history=st.lists(messages(), max_size=2).map(tuple),
            extra=json_values(4),
            note=st.none() | st.text(max_size=5),
        )
    )
    def test_any_attrs_class_round_trips(self, value):
        """
        An attrs class of the user's own round-trips through the same converter.
        """
        assert value == from_json(to_json(value), _Custom)

    def test_converter_is_the_one_used(self):
        """
        The functions go through workingctx.serialization.converter.
        """
        assert unstructure(Usage(1)) == converter.unstructure(Usage(1))


class TestSnapshots:
    @given(transcripts(max_turns=3), scratchpads, prefixes, st.lists(json_objects, max_size=3))
    def test_frozen_context_round_trips(self, tail, notes, prefix, entries):
        """
        A FrozenContext comes back equal, with the same digest.
        """
        ctx = WorkingContext(prefix=prefix)
        ctx.extend(tail)
        ctx.update_scratchpad(notes)
        for entry in entries:
            ctx.journal.record(entry)
        snap = ctx.freeze()
        back = from_json(to_json(snap), FrozenContext)
        assert snap == back
        assert snap.digest() == back.digest()
        assert hash(snap) == hash(back)

    @given(transcripts(max_turns=2), scratchpads, transcripts(max_turns=2), scratchpads)
    def test_context_diff_round_trips(self, tail_a, notes_a, tail_b, notes_b):
        """
        A ContextDiff comes back equal.
        """
        old = WorkingContext().extend(tail_a).update_scratchpad(notes_a)
        new = WorkingContext().extend(tail_b).update_scratchpad(notes_b)
        diff = new.diff(old)
        assert diff == from_json(to_json(diff), ContextDiff)


class TestErrors:
    @pytest.mark.parametrize(
        ("data", "path", "match"),
        [
            ("abc", "$", "expected a JSON object for Message"),
            ({}, "$.role", "required field missing"),
            ({"role": "bogus"}, "$.role", "expected one of 'system'"),
            ({"role": "user", "content": 5}, "$.content", "expected a string or an array"),
            (
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image", "media": {"url": 5}}]},
                "$.content[1].media.url",
                "expected a string or null, got 5",
            ),
            ({"role": "user", "content": [{"type": "zzz"}]}, "$.content[0].type", "unknown content block type"),
            ({"role": "user", "content": [{"text": "a"}]}, "$.content[0].type", "needs a 'type'"),
            (
                {"role": "assistant", "tool_calls": [{"id": "c", "name": "n", "arguments": [1]}]},
                "$.tool_calls[0].arguments",
                "expected a JSON object",
            ),
            ({"role": "user", "contnet": "typo"}, "$.contnet", "unknown field 'contnet' for Message"),
            ({"role": "user", "tool_call_id": "c1"}, "$", "only a 'tool' message answers a call"),
            ({"role": "user", "usage": {"input_tokens": True}}, "$.usage.input_tokens", "expected an integer"),
            ({"role": "user", "id": 1.5}, "$.id", "expected a string or an integer or null"),
            (
                {"role": "assistant", "usage": {"cache_write_1h_tokens": 5}},
                "$.usage",
                "cache_write_1h_tokens=5 exceeds cache_write_tokens=0",
            ),
        ],
    )
    def test_bad_message_data(self, data, path, match):
        """
        Bad data raises SerializationError whose path names the first bad field.
        """
        with pytest.raises(SerializationError, match=match) as info:
            structure(data, Message)
        assert path == info.value.path
        assert path == info.value.problems[0][0]
        assert path in str(info.value)

    def test_all_problems_listed(self):
        """
        Every problem is listed, in field order, each with its own path.
        """
        data = {"role": 1, "content": [{"type": "text"}], "name": 2}
        with pytest.raises(SerializationError, match=r"and 2 more") as info:
            structure(data, Message)
        assert [path for path, _ in info.value.problems] == ["$.role", "$.content[0].text", "$.name"]

    def test_not_json_text(self):
        """
        Text that is not JSON raises SerializationError at "$" with the position.
        """
        with pytest.raises(SerializationError, match=r"not valid JSON.*line 1 column 2") as info:
            from_json("{", Message)
        assert info.value.path == "$"

    def test_unsupported_type(self):
        """
        Asking for a type the converter cannot build is a SerializationError too.
        """

        class Opaque:
            pass

        with pytest.raises(SerializationError, match="Opaque"):
            structure({}, Opaque)

    def test_error_is_a_value_error(self):
        """
        Generic callers can catch the error as a ValueError.
        """
        with pytest.raises(ValueError, match="cannot read"):
            from_json("[]", Message)


# -- fuzzing -------------------------------------------------------------------------

GARBAGE = st.sampled_from(
    [None, 0, -1, 1.5, True, "", "x", [], [1, "a"], {}, {"type": "zzz"}, {"type": "text"}, {"": None}]
)


def _containers(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(data, dict):
        for key, item in data.items():
            found.extend(_containers(item, (*path, key)))
    elif isinstance(data, list):
        for index, item in enumerate(data):
            found.extend(_containers(item, (*path, index)))
    return found


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        data = data[step]
    return data


@st.composite
def mutated(draw: st.DrawFn) -> tuple[Any, Any]:
    """
    Valid unstructured data with one to three random mutations: a key dropped,
    a value replaced by one of the wrong type, an unknown key or tag added.
    """
    value, kind = draw(values_with_types)
    data = json.loads(json.dumps(unstructure(value)))
    for _ in range(draw(st.integers(1, 3))):
        paths = _containers(data)
        path = draw(st.sampled_from(paths))
        garbage = copy.deepcopy(draw(GARBAGE))  # never the same object twice: no cycles
        if not path:
            data = garbage
            continue
        parent = _get(data, path[:-1])
        action = draw(st.sampled_from(["replace", "drop", "extra", "tag"]))
        if action == "replace" or not isinstance(parent, dict):
            parent[path[-1]] = garbage
        elif action == "drop":
            del parent[path[-1]]
        elif action == "extra":
            parent[draw(st.sampled_from(["zzz", "type", "_digest"]))] = garbage
        else:
            parent["type"] = draw(st.sampled_from(["zzz", "text", "image", "", 3]))
    return data, kind


def check_error(exc: SerializationError) -> None:
    """
    Fail unless *exc* has a path from "$" and a described problem for each path.
    """
    assert exc.path.startswith("$")
    assert exc.problems
    assert exc.path == exc.problems[0][0]
    assert all(path.startswith("$") and description for path, description in exc.problems)


class TestFuzz:
    @given(mutated())
    def test_mutated_data_never_raises_anything_else(self, pair):
        """
        Damaged data either structures to a valid value (that round-trips) or
        raises SerializationError with a path starting at "$"; nothing else.
        """
        data, kind = pair
        try:
            value = structure(data, kind)
        except SerializationError as exc:
            check_error(exc)
        else:
            assert value == structure(unstructure(value), kind)

    @given(st.text(max_size=30) | st.binary(max_size=30))
    def test_random_text_never_raises_anything_else(self, text):
        """
        Random text fed to from_json raises SerializationError or gives a value.
        """
        try:
            from_json(text, Message)
        except SerializationError as exc:
            check_error(exc)


class TestWriteAs:
    def test_any_writes_payloads_strictly(self):
        """
        Written as Any, a value must be JSON data: an attrs value or a set inside
        is refused with its path instead of being converted.
        """
        assert {"a": [1, [2, 3]]} == unstructure({"a": [1, (2, 3)]}, Any)
        with pytest.raises(SerializationError, match="not JSON data") as info:
            unstructure({"usage": Usage(1)}, Any)
        assert info.value.path == "$['usage']"
        assert {"usage": {"input_tokens": 1}} == unstructure({"usage": Usage(1)})

    def test_datetimes_round_trip(self):
        """
        An aware datetime is written as ISO 8601 text and read back equal, zone included.
        """
        when = datetime(2026, 3, 1, 8, 30, 15, 123456, tzinfo=timezone(timedelta(hours=-3)))
        assert to_json(when) == '"2026-03-01T08:30:15.123456-03:00"'
        back = from_json(to_json(when), datetime)
        assert back == when
        assert back.utcoffset() == when.utcoffset()
        with pytest.raises(SerializationError, match="ISO 8601"):
            structure("yesterday", datetime)


class TestDuplicateKeys:
    @pytest.mark.parametrize(
        ("text", "path"),
        [
            ('{"role": "user", "content": "hi", "role": "system"}', "$.role"),
            ('{"role": "user", "content": [{"type": "text", "text": "a", "text": "b"}]}', "$.content[0].text"),
            ('{"role": "user", "content": "hi", "metadata": {"a b": 1, "a b": 2}}', "$.metadata['a b']"),
        ],
    )
    def test_a_repeated_key_is_refused_with_its_path(self, text, path):
        """
        An object that repeats a key is refused (json.loads would keep the
        last value: a user message would read as a system message), with the
        path of the repeated key.
        """
        with pytest.raises(SerializationError, match="repeats the key") as info:
            from_json(text, Message)
        assert path == info.value.path

    def test_distinct_keys_in_sibling_objects_are_fine(self):
        """
        The same key in two different objects is not a repetition.
        """
        text = '{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}'
        assert 2 == len(from_json(text, Message).content)


class TestNumbersJSONCannotHold:
    @pytest.mark.parametrize(
        ("text", "path", "shown"),
        [
            ('{"a": NaN}', "$.a", "is nan"),
            ('{"a": [1, {"b c": Infinity}]}', "$.a[1]['b c']", "is inf"),
            ("-Infinity", "$", "is -inf"),
            ('{"a": 1e400}', "$.a", "is inf"),
            ('[0.5, -1e999, "x"]', "$[1]", "is -inf"),
            ('{"n": ' + "9" * 5000 + "}", "$.n", "is an integer of 5000 digits"),
        ],
    )
    def test_parse_json_refuses_a_number_json_cannot_hold(self, text, path, shown):
        """
        parse_json refuses NaN and Infinity (not JSON), a number too large for
        a float (it would read as an infinity) and an int too long to write
        back, with SerializationError naming where and why, as the command
        line does.
        """
        with pytest.raises(SerializationError, match=rf"the number at {re.escape(path)} {shown}") as info:
            parse_json(text)
        assert path == info.value.path
        assert "write" in str(info.value)

    def test_parse_json_keeps_the_numbers_json_can_hold(self):
        """
        The largest and smallest floats, an int of 4300 digits and strings
        that spell NaN are read as they are.
        """
        text = '{"max": 1.7976931348623157e308, "tiny": 5e-324, "long": ' + "9" * 4300 + ', "s": "NaN 1e400"}'
        data = parse_json(text)
        assert 1.7976931348623157e308 == data["max"]
        assert 5e-324 == data["tiny"]
        assert 10**4300 - 1 == data["long"]
        assert "NaN 1e400" == data["s"]

    @pytest.mark.parametrize("cls", [Message, FrozenContext])
    def test_from_json_refuses_them_with_the_typed_path(self, cls):
        """
        from_json refuses them too, naming the path in the value read.
        """
        text = (
            '{"role": "user", "metadata": {"a": 1e400}}' if cls is Message else '{"scratchpad": [["k", {"x": 1e400}]]}'
        )
        with pytest.raises(SerializationError) as info:
            from_json(text, cls)
        assert ("$.metadata['a']" if cls is Message else "$.scratchpad[0][1]['x']") == info.value.path
