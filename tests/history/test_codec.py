"""
The JSON form of history entries: every kind round-trips, data that is no entry is refused
with its path, and text with no UTF-8 form is written escaped.
"""

from __future__ import annotations

import pytest

from tests.history.programs import call, recorded
from workingctx import LastNTurns, Message, PrefixContext, Usage
from workingctx.history import entry_from_data, entry_to_data


class TestEntries:
    def test_entries_round_trip_as_json(self):
        """
        Every entry kind writes to JSON data and reads back equal.
        """
        ctx = recorded(prefix=PrefixContext("sys"), messages=[Message("user", "q")], scratchpad={"a": [1]})
        ctx.append(Message("user", "q2"), call("c1", usage=Usage(3, 4)), Message.tool("r", call_id="c1"))
        child = ctx.fork()
        child.append(Message.assistant("done", usage=Usage(1, 1)))
        ctx.merge(child, mode="delta")
        ctx.slice(LastNTurns(1))
        with ctx.edit_notes() as notes:
            notes["b"] = {"c": None}
            del notes["a"]
        ctx.record_error("bad")
        ctx.finish({"answer": [1, 2]})
        ctx.restore(1)
        for entry in [*ctx.history, *child.history]:
            assert entry == entry_from_data(entry_to_data(entry))
        assert {e.kind for e in [*ctx.history, *child.history]} >= {
            "start", "user", "reply", "tool_result", "merge", "fork", "notes", "error", "finish", "context_change"
        }  # fmt: skip


class TestChecks:
    def test_a_tool_result_entry_needs_an_outcome(self):
        """
        A tool result entry read without its outcome, or with one that is no
        outcome, is refused naming the field and the outcomes to use.
        """
        from workingctx.exceptions import SerializationError  # noqa: PLC0415

        ctx = recorded()
        ctx.append(call("c"), Message.tool("r", call_id="c"))
        data = entry_to_data(ctx.history[-1])
        assert "done" == data["outcome"]
        for outcome, match in ((None, "needs an outcome, one of done, error"), ("weird", "unknown outcome 'weird'")):
            with pytest.raises(SerializationError, match=match) as caught:
                entry_from_data({**data, "outcome": outcome})
            assert "$.outcome" == caught.value.path

    def test_reading_bad_entry_data(self):
        """
        Data that is not an entry raises SerializationError with a path.
        """
        from workingctx.exceptions import SerializationError  # noqa: PLC0415

        good = entry_to_data(recorded().history[0])
        with pytest.raises(SerializationError, match="kind 'nope' is not one of"):
            entry_from_data({**good, "kind": "nope"})
        with pytest.raises(SerializationError, match="kind None"):
            entry_from_data([1])
        with pytest.raises(SerializationError, match="no field 'extra'"):
            entry_from_data({**good, "extra": 1})
        with pytest.raises(SerializationError, match="holds a 'user' message"):
            entry_from_data({**good, "kind": "user", "content": {"role": "assistant", "content": "x"}})
        with pytest.raises(SerializationError):
            entry_from_data({**good, "kind": "context_change", "content": {"change": "trim", "tail": [[1]]}})
        for field, value, path in [
            ("turn", True, "$.turn"),
            ("turn", 1.5, "$.turn"),
            ("at", "garbage", "$.at"),
            ("content", {**good["content"], "prefix": []}, "$.content.prefix"),
            ("turn", -1, "$.turn"),
            ("outcome", "done", "$.outcome"),
        ]:
            with pytest.raises(SerializationError, match=rf"at \{path}$") as caught:
                entry_from_data({**good, field: value})
            assert path == caught.value.path

    def test_lone_surrogates_are_stored_escaped(self):
        """
        Text cut in the middle of an emoji still saves and loads.
        """
        from workingctx import SQLiteStore  # noqa: PLC0415
        from workingctx.history import entry_text  # noqa: PLC0415

        ctx = recorded(id="s")
        ctx.append(Message("user", "half \ud83d"))
        assert "\\ud83d" in entry_text(ctx.history[-1])
        with SQLiteStore(":memory:") as store:
            store.save_context(ctx)
            assert ctx.digest() == store.load_context("s").digest()
            assert "half ?" == store.list_contexts()[0].first_message
