"""
The scratchpad's shared table: forks share their parent's notes and copy only
what they change, so these properties check that no write leaks between forks
(parent, children, siblings), that a scratchpad equals a plain dict put
through the same operations (order included), and that long chains of forks
neither drift nor keep the notes their ancestors dropped.
"""

from __future__ import annotations

import copy
import gc
import json
import threading
import weakref
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.strategies import json_values, short_names
from workingctx import WorkingContext
from workingctx._notes import Notes, NotesMark
from workingctx._notes_table import Table
from workingctx.snapshot import freeze_scratchpad, notes_digest

# a few names, so that operations meet the same keys often, and bulk names, so that tables grow
_names = st.sampled_from(["plan", "stage", "ticket", "owner", "steps", "box"]) | short_names
_values = json_values(4) | st.tuples(st.integers(0, 9), st.text(max_size=3))  # tuples: open notes


def _table_of(ctx: WorkingContext) -> Table:
    return ctx._scratchpad._table  # noqa: SLF001  # the structure under test


def _filled(ctx: WorkingContext) -> bool:
    return ctx._scratchpad._live  # noqa: SLF001  # whether the dict's storage was filled


def _same(notes: Notes, model: dict[str, Any]) -> None:
    """
    *notes* holds *model*, in order, read without filling the dict's storage.
    """
    assert len(notes) == len(model)
    assert notes == model
    assert model == notes
    plain = notes.plain()
    assert list(plain) == list(model)
    assert plain == model
    assert list(notes.raw()) == list(model)
    for key in model:
        assert key in notes
    assert notes.frozen() == freeze_scratchpad(model)
    assert notes.digest() == notes_digest(model)


class NotesMachine(RuleBasedStateMachine):
    """
    Scratchpads forked from one another, each paired with a plain dict that
    goes through the same operations; after every step each scratchpad must
    equal its own dict, whatever its parent, children or siblings did.
    """

    def __init__(self) -> None:
        super().__init__()
        self.notes: list[Notes] = []
        self.models: list[dict[str, Any]] = []
        self.marks: list[tuple[int, NotesMark, dict[str, Any]]] = []

    @initialize(first=st.dictionaries(_names, _values, max_size=6))
    def start(self, first: dict[str, Any]) -> None:
        self.notes.append(Notes(copy.deepcopy(first), writable=True))
        self.models.append(copy.deepcopy(first))

    def _pick(self, data: st.DataObject) -> int:
        return data.draw(st.integers(0, len(self.notes) - 1), label="scratchpad")

    def _key_of(self, data: st.DataObject, i: int) -> str:
        return data.draw(st.sampled_from(list(self.models[i])), label="key")

    @rule(data=st.data(), key=_names, value=_values)
    def set_note(self, data: st.DataObject, key: str, value: Any) -> None:
        i = self._pick(data)
        self.notes[i][key] = copy.deepcopy(value)
        self.models[i][key] = copy.deepcopy(value)

    @rule(data=st.data(), count=st.integers(1, 400), start=st.integers(0, 1000), value=st.integers())
    def bulk(self, data: st.DataObject, count: int, start: int, value: int) -> None:
        """Many keys at once: the table grows (and its levels with it)."""
        i = self._pick(data)
        many = {f"k{start + n}": {"n": n, "v": value} for n in range(count)}
        self.notes[i].update(copy.deepcopy(many))
        self.models[i].update(many)

    @rule(data=st.data(), count=st.integers(1, 300))
    def drop_many(self, data: st.DataObject, count: int) -> None:
        i = self._pick(data)
        for key in list(self.models[i])[:count]:
            del self.notes[i][key]
            del self.models[i][key]

    @precondition(lambda self: any(self.models))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        i = data.draw(st.sampled_from([i for i, model in enumerate(self.models) if model]))
        key = self._key_of(data, i)
        if data.draw(st.booleans(), label="pop"):
            assert self.notes[i].pop(key) == self.models[i].pop(key)
        else:
            del self.notes[i][key]
            del self.models[i][key]

    @rule(data=st.data(), key=_names)
    def pop_missing_or_not(self, data: st.DataObject, key: str) -> None:
        i = self._pick(data)
        assert self.notes[i].pop(key, "none") == self.models[i].pop(key, "none")

    @precondition(lambda self: any(self.models))
    @rule(data=st.data())
    def popitem(self, data: st.DataObject) -> None:
        i = data.draw(st.sampled_from([i for i, model in enumerate(self.models) if model]))
        assert self.notes[i].popitem() == self.models[i].popitem()

    @rule(data=st.data(), key=_names, value=_values)
    def setdefault(self, data: st.DataObject, key: str, value: Any) -> None:
        i = self._pick(data)
        assert self.notes[i].setdefault(key, copy.deepcopy(value)) == self.models[i].setdefault(
            key, copy.deepcopy(value)
        )

    @precondition(lambda self: any(self.models))
    @rule(data=st.data(), value=st.integers())
    def write_in_place(self, data: st.DataObject, value: int) -> None:
        """Read a note out and change it in place: the next freeze and digest see it."""
        i = data.draw(st.sampled_from([i for i, model in enumerate(self.models) if model]))
        key = self._key_of(data, i)
        mine, model = self.notes[i][key], self.models[i][key]
        if isinstance(model, dict):
            mine["touched"] = value
            model["touched"] = value
        elif isinstance(model, list):
            mine.append(value)
            model.append(value)

    @rule(data=st.data())
    def clear(self, data: st.DataObject) -> None:
        i = self._pick(data)
        self.notes[i].clear()
        self.models[i].clear()

    @precondition(lambda self: len(self.notes) < 12)
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        i = self._pick(data)
        child, base = self.notes[i].fork()
        assert dict(base) == self.models[i]
        self.notes.append(child)
        self.models.append(copy.deepcopy(self.models[i]))

    @rule(data=st.data())
    def fill_storage(self, data: st.DataObject) -> None:
        """Hand the notes out as a dict: what code reading a dict's storage sees."""
        i = self._pick(data)
        shown = self.notes[i].as_dict()
        assert list(shown) == list(self.models[i])
        assert json.dumps(shown) == json.dumps(self.models[i])
        assert len(dict.keys(shown)) == len(self.models[i])

    @rule(data=st.data())
    def mark(self, data: st.DataObject) -> None:
        i = self._pick(data)
        self.marks.append((i, self.notes[i].mark(), copy.deepcopy(self.models[i])))

    @precondition(lambda self: bool(self.marks))
    @rule(data=st.data())
    def restore(self, data: st.DataObject) -> None:
        i, mark, model = self.marks.pop(data.draw(st.integers(0, len(self.marks) - 1)))
        self.notes[i].restore(mark)
        self.models[i] = model

    @invariant()
    def each_holds_its_own(self) -> None:
        for notes, model in zip(self.notes, self.models, strict=True):
            _same(notes, model)


NotesMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestNotesMachine = NotesMachine.TestCase


class TableModel(RuleBasedStateMachine):
    """
    The table alone: shared tables and plain dicts under random writes.
    """

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[Table] = [Table()]
        self.models: list[dict[str, int]] = [{}]

    @rule(data=st.data(), key=st.integers(0, 3000).map(str), value=st.integers())
    def put(self, data: st.DataObject, key: str, value: int) -> None:
        i = data.draw(st.integers(0, len(self.tables) - 1))
        new = self.tables[i].put(key, value, ours=False)
        assert new == (key not in self.models[i])
        self.models[i][key] = value

    @rule(data=st.data(), start=st.integers(0, 3000), count=st.integers(1, 600))
    def put_many(self, data: st.DataObject, start: int, count: int) -> None:
        i = data.draw(st.integers(0, len(self.tables) - 1))
        for n in range(start, start + count):
            self.tables[i].put(str(n), -n, ours=False)
            self.models[i][str(n)] = -n

    @precondition(lambda self: any(self.models))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        i = data.draw(st.sampled_from([i for i, model in enumerate(self.models) if model]))
        key = data.draw(st.sampled_from(sorted(self.models[i])))
        self.tables[i].delete(key)
        del self.models[i][key]

    @precondition(lambda self: len(self.tables) < 10)
    @rule(data=st.data())
    def share(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.tables) - 1))
        self.tables.append(self.tables[i].share())
        self.models.append(dict(self.models[i]))

    @invariant()
    def same(self) -> None:
        for table, model in zip(self.tables, self.models, strict=True):
            assert len(table) == len(model)
            assert {key: note[0] for key, note in table.items()} == model
            for key, value in model.items():
                note = table.get(key)
                assert note is not None
                assert note[0] == value
            assert table.get("missing") is None


TableModel.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
TestTableModel = TableModel.TestCase


class TestForkIndependence:
    @given(
        first=st.dictionaries(_names, json_values(3), max_size=40),
        writes=st.lists(st.tuples(st.integers(0, 3), _names, json_values(3)), max_size=30),
    )
    def test_writes_in_one_fork_never_show_in_its_parent_or_siblings(
        self, first: dict[str, Any], writes: list[tuple[int, str, Any]]
    ) -> None:
        parent = WorkingContext(scratchpad=first)
        children = [parent.fork() for _ in range(3)]
        family = [parent, *children]
        models = [copy.deepcopy(first) for _ in family]
        for who, key, value in writes:
            family[who].note(key, copy.deepcopy(value))
            models[who][key] = value
        for ctx, model in zip(family, models, strict=True):
            assert ctx.scratchpad == model
            assert list(ctx.scratchpad) == list(model)
            assert json.dumps(ctx.scratchpad) == json.dumps(model)
            assert ctx.freeze().scratchpad == freeze_scratchpad(model)

    def test_a_write_inside_a_note_of_a_fork_stays_in_that_fork(self) -> None:
        parent = WorkingContext(scratchpad={"plan": {"steps": ["a"]}, "n": 1})
        child = parent.fork()
        sibling = parent.fork()
        child.scratchpad["plan"]["steps"].append("b")
        assert parent.get("plan") == {"steps": ["a"]}
        assert sibling.get("plan") == {"steps": ["a"]}
        assert child.get("plan") == {"steps": ["a", "b"]}
        assert child.digest() != parent.digest() == sibling.digest()

    @settings(max_examples=20)
    @given(keys=st.integers(1, 3000), data=st.data())
    def test_a_write_in_a_fork_copies_one_bucket(self, keys: int, data: st.DataObject) -> None:
        chosen = data.draw(st.integers(0, keys - 1))
        parent = WorkingContext(scratchpad={f"k{n}": {"n": n} for n in range(keys)})
        child = parent.fork()
        child.note(f"k{chosen}", "changed")
        ours, theirs = _table_of(child), _table_of(parent)
        shared = {id(bucket) for page in theirs.pages for bucket in page}
        copied = [bucket for page in ours.pages for bucket in page if id(bucket) not in shared]
        assert len(copied) == 1
        assert len(ours.pages) == len(theirs.pages)
        assert sum(page is not theirs.pages[at] for at, page in enumerate(ours.pages)) == 1
        assert parent.get(f"k{chosen}") == {"n": chosen}
        assert child.get(f"k{chosen}") == "changed"


class TestLongChains:
    @settings(max_examples=15)
    @given(
        first=st.dictionaries(_names, json_values(2), max_size=20),
        steps=st.lists(st.tuples(_names, st.integers(), st.booleans()), min_size=50, max_size=200),
    )
    def test_every_link_of_a_chain_keeps_its_own_notes(
        self, first: dict[str, Any], steps: list[tuple[str, int, bool]]
    ) -> None:
        chain = [WorkingContext(scratchpad=first)]
        models = [copy.deepcopy(first)]
        for key, value, drop in steps:
            child = chain[-1].fork()
            model = copy.deepcopy(models[-1])
            if drop and model:
                gone = next(iter(model))
                del child.scratchpad[gone]
                del model[gone]
            child.note(key, value)
            model[key] = value
            chain.append(child)
            models.append(model)
        for ctx, model in zip(chain, models, strict=True):
            assert ctx.scratchpad == model
            assert list(ctx.scratchpad) == list(model)
            assert ctx.digest() == WorkingContext(scratchpad=model).digest()

    def test_a_chain_keeps_no_note_its_ancestors_replaced(self) -> None:
        class Payload:
            """A note of your own, kept by reference, that can be watched."""

        ctx = WorkingContext(scratchpad={f"k{n}": n for n in range(500)})
        watched: list[weakref.ref[Payload]] = []
        for step in range(300):
            payload = Payload()
            watched.append(weakref.ref(payload))
            ctx = ctx.fork()
            ctx.note("payload", payload)  # replaces the one the parent held
            ctx.note(f"k{step}", -step)
            del payload
        gc.collect()
        alive = [ref for ref in watched if ref() is not None]
        assert len(alive) == 1  # only the newest context's own note: no ancestor is kept
        assert ctx.get("k299") == -299
        assert ctx.get("k300") == 300
        assert len(ctx.scratchpad) == 501

    def test_a_chain_shares_the_buckets_it_did_not_change(self) -> None:
        ctx = WorkingContext(scratchpad={f"k{n}": n for n in range(5000)})
        first = _table_of(ctx)
        for step in range(100):
            ctx = ctx.fork()
            ctx.note(f"k{step}", -step)
        last = _table_of(ctx)
        before = {id(bucket) for page in first.pages for bucket in page}
        after = [bucket for page in last.pages for bucket in page]
        # at most one bucket per write was copied: the rest are the first table's own
        assert len([bucket for bucket in after if id(bucket) not in before]) <= 100
        assert sum(map(len, after)) == 5000


class TestDictBehaviour:
    def test_a_fork_is_filled_when_handed_out(self) -> None:
        parent = WorkingContext(scratchpad={"a": {"b": [1]}, "c": 2})
        child = parent.fork()
        assert not _filled(child)
        pad = child.scratchpad
        assert isinstance(pad, dict)
        assert json.dumps(pad) == '{"a": {"b": [1]}, "c": 2}'
        assert repr(pad) == "{'a': {'b': [1]}, 'c': 2}"
        child.note("d", 3)
        del pad["c"]
        assert json.dumps(pad) == '{"a": {"b": [1]}, "d": 3}'
        assert dict.__len__(pad) == 2  # the storage follows every write
        assert json.dumps(parent.scratchpad) == '{"a": {"b": [1]}, "c": 2}'

    def test_equality_and_order_follow_a_dict(self) -> None:
        notes = Notes({"b": 1, "a": [1, 2]})
        assert notes == {"a": [1, 2], "b": 1}
        assert notes != {"a": [1, 2]}
        assert {"a": [1, 2], "b": 1} == notes
        assert notes == Notes({"a": [1, 2], "b": 1})
        assert (notes == 3) is False
        notes["b"] = 5  # a key set again keeps its place
        notes["c"] = 0
        assert list(notes) == ["b", "a", "c"]
        assert list(reversed(notes)) == ["c", "a", "b"]
        assert notes.popitem() == ("c", 0)
        del notes["b"]
        notes["b"] = 1
        assert list(notes.keys()) == ["a", "b"]

    def test_missing_keys_raise_as_a_dict_does(self) -> None:
        notes = Notes({"a": 1})
        with pytest.raises(KeyError):
            notes["b"]
        with pytest.raises(KeyError):
            del notes["b"]
        with pytest.raises(KeyError):
            notes.pop("b")
        with pytest.raises(TypeError):
            notes[["unhashable"]]  # type: ignore[index]
        notes.clear()
        with pytest.raises(KeyError, match="empty"):
            notes.popitem()

    def test_threads_writing_forks_of_one_parent_stay_apart(self) -> None:
        parent = WorkingContext(scratchpad={f"k{n}": n for n in range(2000)})
        children = [parent.fork() for _ in range(4)]

        def work(who: int) -> None:
            for n in range(500):
                children[who].note(f"k{n}", who)
                children[who].note(f"new{who}-{n}", n)

        threads = [threading.Thread(target=work, args=(who,)) for who in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert parent.scratchpad == {f"k{n}": n for n in range(2000)}
        for who, child in enumerate(children):
            assert len(child.scratchpad) == 2500
            assert all(child.get(f"k{n}") == who for n in range(500))
            assert all(child.get(f"new{who}-{n}") == n for n in range(500))
