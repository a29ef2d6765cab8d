"""
Tests for workingctx._notes, the scratchpad of a live context: every writer refuses a note
that cannot be kept, notes cost what changed, forks share their parent's notes and copy only
what they change (no write leaks between parent, children and siblings, long chains of forks
neither drift nor keep the notes their ancestors dropped), and a scratchpad equals a plain
dict put through the same operations, order included.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import json
import pickle
import threading
import weakref
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.strategies import (
    json_values,
    short_names,
)
from workingctx import FrozenContext, Message, WorkingContext
from workingctx._notes import Notes, NotesMark
from workingctx._notes_table import Table
from workingctx.exceptions import PayloadError, WorkingCtxError
from workingctx.frozen import MAX_DEPTH
from workingctx.serialization import to_json
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


def _cycle() -> dict[str, object]:
    loop: dict[str, object] = {}
    loop["me"] = loop
    return loop


def _tuple_around_a_cycle() -> tuple[int, list[object]]:
    inner: list[object] = []
    inner.append(inner)
    return (0, inner)


def _nested(levels: int) -> object:
    deep: object = 1
    for _ in range(levels):
        deep = [deep]
    return deep


_UNKEEPABLE = {
    "a dict that contains itself": (_cycle, r"note 'bad'\['me'\] is note 'bad' again: the payload contains itself"),
    "nan": (lambda: float("nan"), r"note 'bad' is nan, which JSON cannot hold; store None or a string"),
    "inf": (lambda: float("inf"), r"note 'bad' is inf, which JSON cannot hold"),
    "-inf deep in data": (lambda: {"a": [1, {"b": -float("inf")}]}, r"note 'bad'\['a'\]\[1\]\['b'\] is -inf"),
    "a long int": (lambda: 10**5000, r"note 'bad' is an int of 16610 bits, longer than 4300 decimal digits"),
    "a long int in a tuple": (lambda: (1, 10**5000), r"note 'bad'\[1\] is an int .* store it as a string"),
    "inf in a set": (lambda: {1.0, float("inf")}, r"note 'bad'.* is inf"),
    "one level too deep": (lambda: _nested(MAX_DEPTH + 1), rf"note 'bad'\[0\].* nested more than {MAX_DEPTH} levels"),
    "10,000 levels deep": (lambda: _nested(10_000), rf"note 'bad'\[0\].* nested more than {MAX_DEPTH} levels"),
    "a list in a tuple that contains itself": (
        _tuple_around_a_cycle,
        r"note 'bad'\[1\]\[0\] is note 'bad'\[1\] again",
    ),
}


def _state(ctx: WorkingContext) -> tuple[Any, ...]:
    """
    Everything a refused write must leave as it was.
    """
    return ctx.digest(), dict(ctx.freeze().scratchpad), len(ctx.journal), ctx.messages[:]


class TestNotesThatCannotBeKept:
    @pytest.mark.parametrize("writer", ["note", "update_scratchpad", "setitem", "constructor", "merge", "edit_notes"])
    @pytest.mark.parametrize("kind", sorted(_UNKEEPABLE))
    def test_every_writer_refuses_a_note_that_cannot_be_kept(self, writer, kind):
        """
        A note that contains itself, nests deeper than MAX_DEPTH, or holds a
        NaN, an infinity or an int too long to write is refused by every
        writer of notes with a PayloadError naming the note, and nothing
        changes: not the notes, the journal, the messages nor the digest.
        """
        make, message = _UNKEEPABLE[kind]
        ctx = WorkingContext(scratchpad={"plan": {"steps": ["a"]}, "stage": "act"})
        ctx.append(Message("user", "hi"))
        ctx.journal.record("started")
        child = ctx.fork().append(Message("assistant", "hello"))
        child.journal.record("child")
        before = _state(ctx)
        error: type[Exception] = WorkingCtxError if writer == "edit_notes" else PayloadError  # edit_notes: JSON only

        def edit() -> None:
            with ctx.edit_notes() as notes:
                notes["stage"] = "verify"
                notes["bad"] = make()

        writers = {
            "note": lambda: ctx.note("bad", make()),
            "update_scratchpad": lambda: ctx.update_scratchpad({"aaa": 1, "stage": "verify", "bad": make(), "zzz": 2}),
            "setitem": lambda: ctx.scratchpad.__setitem__("bad", make()),
            "constructor": lambda: WorkingContext(scratchpad={"stage": "act", "bad": make()}),
            "merge": lambda: ctx.merge(
                child.note("stage", "done"), mode="delta", scratchpad={"stage": lambda _old, _new: make()}
            ),
            "edit_notes": edit,
        }
        if writer == "merge":  # the reducer of the note 'stage' makes the value
            message = message.replace("'bad'", "'stage'")
        with pytest.raises(error, match=message if writer != "edit_notes" else "'bad'"):
            writers[writer]()
        assert before == _state(ctx)
        assert "bad" not in ctx.scratchpad

    @pytest.mark.parametrize("kind", sorted(_UNKEEPABLE))
    def test_damage_in_place_is_refused_by_freeze_and_digest_as_a_write_is(self, kind):
        """
        A note changed in place after it was set (the scratchpad stays live)
        can only be checked when it is read: freeze() and digest() refuse it
        with the error the write would have raised; fork() still copies it.
        """
        make, _ = _UNKEEPABLE[kind]
        with pytest.raises(PayloadError) as refused:
            WorkingContext().note("bad", {"slot": make()})
        ctx = WorkingContext().note("bad", {"slot": None})
        ctx.scratchpad["bad"]["slot"] = make()
        for operation in (ctx.freeze, ctx.digest, ctx.freeze):
            with pytest.raises(PayloadError) as caught:
                operation()
            assert str(refused.value) == str(caught.value)
        if kind == "a dict that contains itself":  # a fork still copies it, cycle and all
            loop = ctx.fork().get("bad")["slot"]
            assert loop["me"] is loop is not ctx.get("bad")["slot"]
        del ctx.scratchpad["bad"]["slot"]
        assert WorkingContext().note("bad", {}).digest() == ctx.digest()

    @given(
        st.recursive(
            st.none()
            | st.text(max_size=3)
            | st.floats()
            | st.integers()
            | st.sampled_from([4299, 4300, -5000]).map(lambda d: (10 ** abs(d)) * (-1 if d < 0 else 1)),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(short_names, inner, max_size=3),
            max_leaves=8,
        )
    )
    def test_a_note_is_kept_exactly_when_json_can_write_it(self, value):
        """
        Law: note() keeps a JSON-like value exactly when json.dumps(...,
        allow_nan=False) can write it; a kept note freezes, digests and is
        written by to_json, and a refused one changes nothing.
        """
        try:
            json.dumps(value, allow_nan=False)
        except ValueError:
            writable = False
        else:
            writable = True
        ctx = WorkingContext().note("stage", "act")
        before = ctx.digest()
        try:
            ctx.note("v", value)
        except PayloadError:
            assert not writable
            assert before == ctx.digest()
            assert ["stage"] == list(ctx.scratchpad)
        else:
            assert writable
            assert value == json.loads(to_json(ctx.freeze()))["scratchpad"][1][1]
            assert ctx.digest() == ctx.freeze().digest()

    def test_what_can_be_kept_still_is(self):
        """
        The limits themselves are kept: MAX_DEPTH levels, the largest float,
        an int of 4300 digits, and data that is not JSON (a set, a tuple, an
        object of your own, a list shared twice) as before.
        """
        shared = [1]

        @attrs.define
        class Box:
            value: float

        keep = {
            "deep": _nested(MAX_DEPTH),
            "big": 1.7976931348623157e308,
            "long": 10**4299,
            "set": {1, 2},
            "pair": (1, 2.5),
            "box": Box(float("inf")),  # an object of your own is kept as it is
            "twice": [shared, shared],
        }
        ctx = WorkingContext().update_scratchpad(keep)
        assert keep == ctx.scratchpad
        assert ctx.freeze() == WorkingContext(scratchpad=keep).freeze()
        assert ctx.digest() == ctx.fork().digest()


class TestNotesCostWhatChanged:
    def test_a_note_read_out_is_the_live_note(self):
        """
        A note read through the scratchpad or get() is the note itself: a
        change in place, made before or after a freeze, is in the next
        snapshot and digest (the reference's live-dict example).
        """
        ctx = WorkingContext().note("plan", {"steps": ["a"]})
        before = ctx.digest()
        ctx.scratchpad["plan"]["steps"].append("b")
        steps = ctx.get("plan")["steps"]
        assert {"plan": {"steps": ["a", "b"]}} == dict(ctx.freeze().scratchpad)
        steps.append("c")
        assert {"plan": {"steps": ["a", "b", "c"]}} == dict(ctx.freeze().scratchpad)
        assert ctx.get("plan") is ctx.scratchpad["plan"]
        assert before != ctx.digest() == WorkingContext().note("plan", {"steps": ["a", "b", "c"]}).digest()

    def test_a_value_set_as_a_note_is_copied(self):
        """
        Plain data given to note(), update_scratchpad() or scratchpad[key] is
        copied: changing your own object afterwards does not change the note.
        """
        plan, seen, tags = {"steps": ["a"]}, [1], {"t": ["x"]}
        ctx = WorkingContext().note("plan", plan).update_scratchpad({"seen": seen})
        ctx.scratchpad["tags"] = tags
        plan["steps"].append("b")
        seen.append(2)
        tags["t"].clear()
        assert {"plan": {"steps": ["a"]}, "seen": [1], "tags": {"t": ["x"]}} == ctx.scratchpad

    def test_objects_of_your_own_stay_by_reference(self):
        """
        A note holding something other than plain data (here a tuple and an
        object of your own) is kept as it is, and read again at every freeze.
        """

        @attrs.define
        class Box:
            items: list[int]

        box = Box([1])
        ctx = WorkingContext().note("box", box).note("pair", (1, 2))
        first = ctx.digest()
        box.items.append(2)
        assert ctx.get("box") is box
        assert (1, 2) == ctx.get("pair")
        assert first != ctx.digest() == WorkingContext().note("box", Box([1, 2])).note("pair", (1, 2)).digest()

    def test_unchanged_notes_are_shared_not_copied(self):
        """
        A note that did not change is the same frozen object in every later
        snapshot and in a fork's snapshots: freezing and forking copy nothing.
        """
        ctx = WorkingContext(scratchpad={"plan": {"steps": ["a"]}, "stage": "act"})
        first = dict(ctx.freeze().scratchpad)["plan"]
        child = ctx.fork().note("stage", "verify")
        assert first is dict(ctx.freeze().scratchpad)["plan"] is dict(child.freeze().scratchpad)["plan"]
        assert {"plan": {"steps": ["a"]}, "stage": "verify"} == dict(child.freeze().scratchpad)
        child.get("plan")["steps"].append("b")
        assert {"steps": ["a"]} == ctx.get("plan")
        assert {"steps": ["a", "b"]} == child.get("plan")

    def test_the_scratchpad_is_a_dict_to_every_reader(self):
        """
        dict(), {**...}, json, pickle, copies and | give plain dicts of the
        notes; a dict copy shares the live notes, as dict.copy() does.
        """
        ctx = WorkingContext(scratchpad={"plan": {"steps": ["a"]}})
        notes = ctx.scratchpad
        assert isinstance(notes, dict)
        assert '{"plan": {"steps": ["a"]}}' == json.dumps(notes)
        for made in (pickle.loads(pickle.dumps(notes)), copy.deepcopy(notes)):
            assert type(made) is dict
            assert {"plan": {"steps": ["a"]}} == made
        shallow = notes.copy()
        assert type(shallow) is dict
        shallow["plan"]["steps"].append("b")
        assert {"plan": {"steps": ["a", "b"]}, "x": 1} == notes | {"x": 1} == {**notes, "x": 1}
        notes |= {"y": [2]}
        assert ["plan", "y"] == sorted(notes)
        assert ("y", [2]) == notes.popitem()
        assert {"steps": ["a", "b"]} == notes.pop("plan")
        assert "missing" == notes.pop("plan", "missing")
        assert {} == notes == dict(ctx.freeze().scratchpad)


def _containers(value: Any) -> list[Any]:
    """
    Every dict and list inside *value*, itself included, outermost first.
    """
    found: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop(0)
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            found.append(item)
            stack.extend(item)
    return found


def _poke(container: Any, token: int) -> None:
    """
    Change *container* in place, the same way for a note and for its model.
    """
    if isinstance(container, dict):
        container[f"k{token % 3}"] = token
    elif token % 2 and container:
        container.pop()
    else:
        container.append(token)


_KEYS = st.sampled_from(["plan", "seen", "stage", "tools"])


class NotesCachingMachine(RuleBasedStateMachine):
    """
    A context's notes beside a plain dict model, through note sets, in-place
    changes (through the scratchpad, get(), values(), a dict copy, and
    references held across freezes), deletes, forks and rolled-back edits.
    After every step the digest, the snapshot and its hash are those computed
    from scratch from the model: the caches are invisible.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ctx = WorkingContext(messages=[Message("user", "hi")], scratchpad={"plan": {"steps": ["a"]}})
        self.model: dict[str, Any] = {"plan": {"steps": ["a"]}}
        # (a container read out of the context, its counterpart in the model)
        self.held: list[tuple[Any, Any]] = []

    def _hold(self, key: str, value: Any, pick: int) -> bool:
        ours, theirs = _containers(value), _containers(self.model[key])
        if ours:
            self.held.append((ours[pick % len(ours)], theirs[pick % len(theirs)]))
        return bool(ours)

    @rule(key=_KEYS, value=json_values(6), later=st.booleans())
    def note(self, key: str, value: Any, later: bool) -> None:
        self.ctx.note(key, value)
        self.model[key] = copy.deepcopy(value)
        if later:  # the caller's own object, changed after the note was set: a copy was kept
            for container in _containers(value):
                _poke(container, 7)

    @rule(notes=st.dictionaries(_KEYS, json_values(4), max_size=3))
    def update(self, notes: dict[str, Any]) -> None:
        self.ctx.update_scratchpad(notes)
        self.model.update(copy.deepcopy(notes))

    @rule(key=_KEYS, value=json_values(4))
    def item_write(self, key: str, value: Any) -> None:
        self.ctx.scratchpad[key] = value
        self.model[key] = copy.deepcopy(value)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), pick=st.integers(0, 5), token=st.integers(0, 9), how=st.sampled_from(["[]", "get", "values"]))
    def change_in_place(self, data: st.DataObject, pick: int, token: int, how: str) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        notes = self.ctx.scratchpad
        if how == "[]":
            value = notes[key]
        elif how == "get":
            value = self.ctx.get(key)
        else:
            value = dict(zip(notes.keys(), notes.values(), strict=True))[key]
        if self._hold(key, value, pick):
            ours, theirs = self.held[-1]
            _poke(ours, token)
            _poke(theirs, token)

    @precondition(lambda self: self.held)
    @rule(data=st.data(), token=st.integers(0, 9))
    def change_held(self, data: st.DataObject, token: int) -> None:
        """A reference read out earlier, changed after freezes and digests."""
        ours, theirs = data.draw(st.sampled_from(self.held))
        _poke(ours, token)
        _poke(theirs, token)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), how=st.sampled_from(["del", "pop"]))
    def remove(self, data: st.DataObject, how: str) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        if how == "del":
            del self.ctx.scratchpad[key]
        else:
            assert self.model[key] == self.ctx.scratchpad.pop(key)
        del self.model[key]

    @rule(key=_KEYS, value=json_values(4))
    def setdefault(self, key: str, value: Any) -> None:
        assert self.model.setdefault(key, copy.deepcopy(value)) == self.ctx.scratchpad.setdefault(key, value)

    @rule()
    def fork(self) -> None:
        """The child goes on; what was read out of the parent no longer reaches it."""
        parent, self.ctx = self.ctx, self.ctx.fork()
        self.model = copy.deepcopy(self.model)
        self.held = []
        parent.note("stage", "parent only")
        for container in _containers(parent.get("plan")):
            _poke(container, 3)

    @rule(key=_KEYS, token=st.integers(0, 9))
    def rolled_back(self, key: str, token: int) -> None:
        """
        An apply_locked edit that raises changes nothing (notes come back by
        value: what was read out before no longer reaches the context).
        """

        def edit(ctx: WorkingContext) -> None:
            ctx.note("stage", "rolled back")
            if key in ctx.scratchpad:
                for container in _containers(ctx.scratchpad[key]):
                    _poke(container, token)
            raise RuntimeError

        with pytest.raises(RuntimeError):
            asyncio.run(self.ctx.apply_locked(edit))
        self.held = []

    @rule()
    def message(self) -> None:
        self.ctx.append(Message("assistant", "ok"))

    @invariant()
    def caches_are_invisible(self) -> None:
        snap = self.ctx.freeze()
        scratch = FrozenContext(prefix=self.ctx.prefix, messages=self.ctx.messages, scratchpad=self.model)
        assert scratch == snap
        assert hash(scratch) == hash(snap)
        assert scratch.digest() == self.ctx.digest() == snap.digest()
        assert self.model == dict(snap.scratchpad)


TestNotesCaching = NotesCachingMachine.TestCase
