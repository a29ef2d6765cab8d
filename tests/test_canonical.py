"""
Tests for the canonical encoding and the stable digests: injective over the
JSON value space, markers escaped, built-in forms for common objects, nothing
that depends on the process.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import (
    assert_identical,
    json_scalars,
    json_values,
    messages,
    texts,
)
from workingctx import Checkpoint, Message, SQLiteStore, ToolCall, WorkingContext
from workingctx._canonical import MARKERS, canonical, canonical_json
from workingctx.exceptions import PayloadError, PayloadTypeError
from workingctx.frozen import deep_freeze, freeze_json, thaw
from workingctx.serialization import from_json, to_json


def _exact_key(value: Any) -> Any:
    """
    A key that tells values apart exactly as the digests must: types included
    at every depth, containers by kind (a set is not a list).
    """
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _exact_key(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("list", tuple(_exact_key(v) for v in value))
    if isinstance(value, set | frozenset):
        return ("set", tuple(sorted(repr(_exact_key(v)) for v in value)))
    if isinstance(value, float):
        return ("float", value.hex())
    return (type(value).__name__, value)


payloads = st.recursive(
    json_scalars | st.frozensets(st.integers(-3, 3), max_size=3),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(texts | st.sampled_from(sorted(MARKERS)), children, max_size=3)
        | st.sets(st.integers(-3, 3), max_size=3)
    ),
    max_leaves=10,
)
"""JSON data and sets, with dict keys that are the encoding's own markers."""


class TestInjective:
    @given(payloads, payloads)
    def test_equal_encodings_mean_identical_values(self, one, two):
        """
        Two payloads get the same canonical JSON exactly when they are the
        same value with the same types: 1, 1.0 and True differ, a set differs
        from a dict {"__set__": ...}, -0.0 differs from 0.0.
        """
        assert (canonical_json(one) == canonical_json(two)) == (_exact_key(one) == _exact_key(two))

    @pytest.mark.parametrize(
        ("one", "two"),
        [
            (1, 1.0),
            (1, True),
            (1.0, True),
            (0, False),
            (0.0, -0.0),
            ({"n": 1}, {"n": True}),
            ({1, 2}, {"__set__": [1, 2]}),
            ({1: "a"}, {"__mapping__": [[1, "a"]]}),
            ({"__mapping__": [["a", 1]]}, {"a": 1}),
            (float("nan"), {"__float__": "nan"}),
            (10**5000, {"__int__": hex(10**5000)}),
            (dt.date(2026, 1, 1), {"__date__": "2026-01-01"}),
            ("1", 1),
        ],
        ids=lambda value: type(value).__name__,
    )
    def test_values_python_may_confuse_encode_apart(self, one, two):
        """
        Values Python counts as equal, and plain dicts shaped like the encoding's
        tagged forms, never share an encoding.
        """
        assert canonical_json(one) != canonical_json(two)

    @given(messages(), messages())
    def test_message_digests_identify_exact_messages(self, one, two):
        """
        Two messages have the same digest exactly when their JSON text is the
        same (every field, with its type).
        """
        same_text = to_json(one) == to_json(two)
        assert (one.digest() == two.digest()) == same_text

    @pytest.mark.parametrize("other", [1.0, True], ids=["float", "bool"])
    def test_python_equal_messages_digest_apart(self, other):
        """
        Messages Python counts as equal (1 == 1.0 == True in their arguments)
        have different digests; == and hash() stay as Python has them.
        """
        one = Message.assistant(tool_calls=[ToolCall("c1", "scale", {"replicas": 1})])
        two = Message.assistant(tool_calls=[ToolCall("c1", "scale", {"replicas": other})])
        assert one == two
        assert hash(one) == hash(two)
        assert one.digest() != two.digest()

    def test_store_gives_back_what_was_saved(self, tmp_path: Path):
        """
        The SQLite store keys messages and scratchpads by digest: a value saved
        after a Python-equal one of another type still loads as itself.
        """
        path = tmp_path / "store.db"
        saved = []
        with SQLiteStore(path) as store:
            for replicas, note in ((True, False), (1, 0), (1.0, 0.0)):
                message = Message.assistant(tool_calls=[ToolCall("c1", "scale", {"replicas": replicas})])
                ctx = WorkingContext().append(message).note("n", note)
                saved.append(store.save(Checkpoint.capture(ctx)))
        with SQLiteStore(path) as store:
            for checkpoint_id, (replicas, note) in zip(saved, ((True, False), (1, 0), (1.0, 0.0)), strict=True):
                loaded = store.load(checkpoint_id).snapshot
                assert_identical(replicas, loaded.messages[0].tool_calls[0].arguments["replicas"])
                assert_identical(note, dict(loaded.scratchpad)["n"])

    @given(payloads)
    def test_frozen_and_plain_encode_alike(self, value):
        """
        A payload and its deep-frozen form encode the same (a live context's
        digest equals its snapshot's), and so does the thawed copy.
        """
        assert canonical_json(value) == canonical_json(deep_freeze(value)) == canonical_json(thaw(deep_freeze(value)))

    @given(json_values())
    def test_json_data_encodes_as_itself(self, value):
        """
        JSON data is its own canonical form, except for dicts using a marker
        key, which are escaped.
        """
        if _has_marker(value):
            assert "__mapping__" in canonical_json(value)
        else:
            assert json.loads(canonical_json(value)) == value


def _has_marker(value: Any) -> bool:
    if isinstance(value, dict):
        return not MARKERS.isdisjoint(value) or any(_has_marker(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_marker(item) for item in value)
    return False


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@attrs.frozen
class Point:
    x: int
    y: int


@dataclasses.dataclass
class Box:
    label: str
    points: list[Point]


class Model:
    """
    Anything with a model_dump() method, as pydantic models have.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def model_dump(self) -> dict[str, Any]:
        return {"name": self.name}


class Opaque:
    """
    An object with no canonical form.
    """


OBJECTS: list[Any] = [
    Colour.RED,
    Point(1, 2),
    Box("b", [Point(0, 0)]),
    Model("m"),
    dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC),
    dt.datetime(2026, 12, 1, 12, 0),  # noqa: DTZ001  # naive on purpose: differs from the aware one
    dt.date(2026, 12, 1),
    dt.time(12, 0),
    dt.timedelta(days=1, seconds=2),
    uuid.UUID(int=7),
    decimal.Decimal("1.10"),
    decimal.Decimal("1.1"),
    b"bytes",
    frozenset({1, 2}),
]


class TestObjects:
    def test_builtin_forms_are_distinct(self):
        """
        Enums, attrs classes, dataclasses, models, datetimes, UUIDs, Decimals and
        bytes each have a canonical form, and no two of these values share one.
        """
        encoded = [canonical_json(value) for value in OBJECTS]
        assert len(set(encoded)) == len(OBJECTS)
        assert "0x" not in "".join(encoded)  # no id() or repr() addresses

    def test_unencodable_note_names_its_key_and_the_fix(self):
        """
        A note holding an object with no canonical form: digest() raises a
        TypeError naming the note's key and how to make it encodable, never repr().
        """
        ctx = WorkingContext().note("handle", {"inner": [Opaque()]})
        snapshot = ctx.freeze()
        for digest in (snapshot.digest, ctx.digest):
            with pytest.raises(PayloadTypeError, match=r"note 'handle'\['inner'\]\[0\] is .*Opaque.*attrs class"):
                digest()
        with pytest.raises(TypeError):
            Checkpoint.capture(ctx)

    def test_object_notes_digest(self):
        """
        Notes holding the objects with built-in forms digest, live and frozen alike.
        """
        ctx = WorkingContext()
        for position, value in enumerate(OBJECTS):
            ctx.note(f"n{position}", value)
        assert ctx.digest() == ctx.freeze().digest()


SCRIPT = """
import dataclasses, decimal, enum, uuid
import datetime as dt
import attrs
from workingctx import Checkpoint, Message, PrefixContext, ToolCall, WorkingContext

class Colour(enum.Enum):
    RED = "red"

@attrs.frozen
class Point:
    x: int
    y: int

@dataclasses.dataclass
class Box:
    label: str
    tags: set[str]

ctx = WorkingContext(prefix=PrefixContext(system_prompt="s", cache_hint=True))
ctx.append(Message.assistant(tool_calls=[ToolCall("c", "f", {"b": [1, 1.0, True], "a": {"x": None}})]))
ctx.note("objects", {
    "set": {3, 1, 2, "a", "b", "c"},
    "frozen": frozenset({"x", "y", "z"}),
    "keys": {1: "one", "two": 2, (3, 4): "tuple"},
    "enum": Colour.RED,
    "point": Point(1, 2),
    "box": Box("b", {"x", "y", "z", "w", "v"}),
    "when": dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
    "id": uuid.UUID(int=7),
    "price": decimal.Decimal("1.10"),
})
ctx.journal.record({"kind": "step", "n": 1})
print(ctx.digest(), ctx.freeze().digest(), ctx.journal.digest())
"""


class TestProcessIndependence:
    def test_same_digests_under_every_hash_seed(self):
        """
        A snapshot whose notes hold sets (iteration order varies with the
        seed, also inside a dataclass), non-str keys, enums, attrs classes, dataclasses, datetimes, UUIDs
        and Decimals has the same digests in interpreters with different
        PYTHONHASHSEED values.
        """
        root = Path(__file__).resolve().parent.parent
        outputs = {
            subprocess.run(
                [sys.executable, "-c", SCRIPT],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root)},
            ).stdout
            for seed in ("0", "1", "4242", "random")
        }
        assert 1 == len(outputs)
        assert 3 == len(outputs.pop().split())


class TestDepth:
    def test_deep_and_cyclic_values_refused_clearly(self):
        """
        canonical() of a value nested 10,000 levels deep or containing itself
        raises PayloadError naming where, never RecursionError.
        """
        deep: Any = []
        for _ in range(10_000):
            deep = [deep]
        with pytest.raises(PayloadError, match=r"note 'x'\[0\]\[0\].*nested more than 100 levels"):
            canonical(deep, "note 'x'")
        cyclic: dict[str, Any] = {}
        cyclic["self"] = [cyclic]
        with pytest.raises(PayloadError, match="cycle"):
            canonical(cyclic)

    @given(json_values())
    def test_digest_of_what_from_json_accepted(self, value):
        """
        Whatever from_json accepts as a message's metadata digests.
        """
        message = from_json(to_json(Message("user", "x", metadata={"v": freeze_json(value)})), Message)
        assert 64 == len(message.digest())
