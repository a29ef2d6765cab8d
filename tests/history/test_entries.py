"""
History entries: the closed set of kinds, the checks of each entry's content and values, matching
and pickling, and notes and answers kept as plain JSON (enums as their values; cycles refused).
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from tests.history.programs import call, recorded
from workingctx import Message, Usage
from workingctx.history import ENTRY_KINDS, ContextChange, Entry, Forked, Kept, NotesChange, Started


class TestEntries:
    def test_kinds_are_a_closed_set(self):
        """
        The kinds are the documented twelve; another kind is refused, naming them.
        """
        assert (
            "start",
            "user",
            "notice",
            "system",
            "reply",
            "tool_result",
            "context_change",
            "notes",
            "merge",
            "fork",
            "finish",
            "error",
        ) == ENTRY_KINDS
        with pytest.raises(ValueError, match="unknown entry kind 'thought'"):
            Entry("thought", Message("user", "x"), 0, recorded().history[0].at)  # type: ignore[arg-type]

    def test_content_must_fit_the_kind(self):
        """
        A user entry holds a user message; a tool result has an outcome, others have none.
        """
        at = recorded().history[0].at
        with pytest.raises(ValueError, match="holds a 'user' message"):
            Entry("user", Message("assistant", "x"), 0, at)
        with pytest.raises(TypeError, match="holds a NotesChange"):
            Entry("notes", Message("user", "x"), 0, at)
        with pytest.raises(ValueError, match="a 'tool_result' entry needs an outcome, one of done"):
            Entry("tool_result", Message.tool("x", call_id="c1"), 0, at)
        with pytest.raises(ValueError, match="outcome is set on tool_result entries only"):
            Entry("user", Message("user", "x"), 0, at, "done")

    def test_match_on_entries(self):
        """
        Entries and their contents work with match.
        """
        ctx = recorded()
        ctx.append(call("c1"))
        ctx.append_result(Message.tool("denied by policy", call_id="c1"), outcome="denied")
        seen = []
        for entry in ctx.history:
            match entry:
                case Entry("reply", Message(tool_calls=calls)):
                    seen.append(("reply", calls[0].name))
                case Entry("tool_result", Message(tool_call_id=call_id), outcome=outcome):
                    seen.append((call_id, outcome, entry.is_error))
        assert [("reply", "search"), ("c1", "denied", True)] == seen

    def test_entries_pickle(self):
        """
        A history pickles to an equal history.
        """
        ctx = recorded()
        ctx.append(Message("user", "x")).note("a", {"b": 1}).finish("ok")
        assert ctx.history == pickle.loads(pickle.dumps(ctx.history))


class TestChecks:
    def test_content_values_are_checked(self):
        """
        Bad counts, ids, runs, tails and times are refused with the value named.
        """
        at = recorded().history[0].at
        with pytest.raises(ValueError, match="turn must be 0 or more, got -1"):
            Entry("user", Message("user", "x"), -1, at)
        with pytest.raises(ValueError, match="timezone-aware"):
            Entry("user", Message("user", "x"), 0, at.replace(tzinfo=None))
        with pytest.raises(ValueError, match="unknown outcome 'maybe'"):
            Entry("tool_result", Message.tool("x", call_id="c"), 0, at, "maybe")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="stop must not be before start"):
            Kept(3, 1)
        with pytest.raises(TypeError, match=r"tail\[0\] must be Kept or a Message, got 'x'"):
            ContextChange("trim", ["x"])  # type: ignore[list-item]
        with pytest.raises(TypeError, match=r"messages\[0\] must be a Message"):
            Started("a", messages=["x"])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="expected a mapping of JSON data"):
            NotesChange([1])  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="parent must be 1 to 128"):
            Forked(3, "b")  # type: ignore[arg-type]
        assert Forked("a", "b", None) == Forked("a", "b")

    def test_json_checks(self):
        """
        Non-finite floats and non-str keys are refused; attrs instances become dicts.
        """
        ctx = recorded()
        with pytest.raises(ValueError, match=r"'x'\[0\] is nan"):
            ctx.note("x", [float("nan")])
        with pytest.raises(TypeError, match="has the key 1 of type int"):
            ctx.note("x", {1: "a"})
        assert {"input_tokens": 1} == {k: v for k, v in ctx.finish(Usage(1)).answer.items() if v}
        with pytest.raises(TypeError, match="metadata"):
            ctx.restore(0).append(Message("user", "x", metadata={"o": object()}))
        with pytest.raises(TypeError, match="note keys must be str, got 1"), ctx.edit_notes() as notes:
            notes[1] = "x"  # type: ignore[index]

    def test_cyclic_deep_and_long_values_are_refused(self):
        """
        A note or an answer that contains itself, nests deeper than payloads may,
        or holds an int too long to write is refused with ValueError naming the
        key, and the context is left as it was (a store could write none of them).
        """
        cyclic: dict[str, Any] = {}
        cyclic["self"] = cyclic
        looped: list[Any] = []
        looped.append({"in": looped})
        deep: dict[str, Any] = {}
        inner = deep
        for _ in range(3000):
            inner["a"] = {}
            inner = inner["a"]
        ctx = recorded()
        before = (ctx.history, dict(ctx.scratchpad))
        for value, match in [
            (cyclic, r"'c'\['self'\] contains itself"),
            (looped, r"'c'\[0\]\['in'\] contains itself"),
            (deep, "nested more than 100 levels"),
            (10**5000, "longer than 4300 decimal digits"),
        ]:
            with pytest.raises(ValueError, match=match):
                ctx.note("c", value)
            with pytest.raises(ValueError, match=match), ctx.edit_notes() as notes:
                notes["c"] = value
            with pytest.raises(ValueError, match=match.replace("'c'", "'answer'")):
                ctx.fork().finish(value)
            assert before == (ctx.history, dict(ctx.scratchpad))
        shared = {"x": 1}
        ctx.note("twice", [shared, shared])  # the same value twice is no cycle
        assert [{"x": 1}, {"x": 1}] == ctx.scratchpad["twice"]

    def test_enum_values_are_recorded_as_plain_json(self):
        """
        Notes and answers holding enums and other subclasses of str, int and
        float are recorded as the plain values a store gives back, so a saved
        and loaded context has the same notes, types and digest.
        """
        import enum  # noqa: PLC0415

        from workingctx import SQLiteStore  # noqa: PLC0415

        class Level(enum.IntEnum):
            HIGH = 3

        class Name(enum.StrEnum):
            A = "a"

        class Ratio(float):
            pass

        class Old(str, enum.Enum):  # noqa: UP042  # str() of it is 'Old.B', its value 'b'
            B = "b"

        ctx = recorded(id="enums")
        ctx.note("level", Level.HIGH).note("deep", {"x": [Name.A, Ratio(0.5), Old.B], Name.A: 1})
        with ctx.edit_notes() as notes:
            notes["name"] = Name.A
        ctx.finish(Level.HIGH)
        with SQLiteStore(":memory:") as store:
            store.save_context(ctx)
            loaded = store.load_context("enums")
        assert ctx.digest() == loaded.digest()
        assert dict(loaded.scratchpad) == dict(ctx.scratchpad)
        assert [int, str] == [type(ctx.scratchpad[key]) for key in ("level", "name")]
        assert [str, float, str] == [type(item) for item in ctx.scratchpad["deep"]["x"]]
        assert ["x", "a"] == [type(key).__name__ == "str" and key for key in ctx.scratchpad["deep"]]
        assert "b" == ctx.scratchpad["deep"]["x"][2]
        assert int is type(ctx.answer)
