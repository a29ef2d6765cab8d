"""
Tests for workingctx.journal.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import assert_identical, json_values
from workingctx import MutationJournal, WorkingContext
from workingctx.exceptions import FrozenPayloadError, PayloadError, PayloadTypeError
from workingctx.frozen import FrozenDict, deep_freeze


class TestWatermark:
    def test_watermark_streams_only_new_entries(self):
        """
        Two records are uncommitted; after the parent absorbs them only a new
        record ships, and the history stays whole.
        """
        ctx = WorkingContext()
        ctx.journal.record({"kind": "row_written", "id": 1, "agent_id": "enricher-a"})
        ctx.journal.record({"kind": "row_written", "id": 2, "agent_id": "enricher-a"})

        assert (True, 2) == (ctx.journal.has_uncommitted(), len(ctx.journal))
        assert 2 == len(ctx.journal.diff())

        ctx.journal.mark_committed()
        assert ctx.journal.has_uncommitted() is False

        ctx.journal.record({"kind": "row_written", "id": 3, "agent_id": "enricher-a"})
        assert 1 == len(ctx.journal.diff())
        assert 3 == len(tuple(ctx.journal))

    def test_seed_entries_start_committed(self):
        """
        A journal rebuilt from seed entries has nothing uncommitted.
        """
        seeded: MutationJournal[dict[str, str]] = MutationJournal([{"kind": "restored"}])
        assert seeded.has_uncommitted() is False
        assert () == seeded.diff()
        assert 1 == len(seeded)


entries = st.lists(st.integers(), max_size=20)


class TestLaws:
    @given(seed=entries, before=entries, after=entries)
    def test_diff_is_what_came_after_the_watermark(self, seed, before, after):
        """
        diff() holds exactly the entries recorded since the last commit, and
        view() every entry in order.
        """
        journal: MutationJournal[int] = MutationJournal(seed)
        for entry in before:
            journal.record(entry)
        journal.mark_committed()
        journal.apply(after)

        assert tuple(after) == journal.diff()
        assert tuple(seed + before + after) == tuple(journal)
        assert bool(after) == journal.has_uncommitted()
        assert len(seed) + len(before) == journal.committed

    @given(entries, entries)
    def test_apply_never_rewrites(self, first, second):
        """
        apply() appends the given entries as they are, after what was there.
        """
        journal: MutationJournal[int] = MutationJournal(first)
        journal.apply(second)
        assert tuple(first + second) == tuple(journal)

    def test_view_is_a_copy(self):
        """
        A view taken earlier does not show later records.
        """
        journal: MutationJournal[str] = MutationJournal()
        journal.record("a")
        view = tuple(journal)
        journal.record("b")
        assert ("a",) == view
        assert ["a", "b"] == list(journal)


class TestDigest:
    @given(entries, entries)
    def test_incremental_digest_equals_a_fresh_one(self, first, second):
        """
        A journal's digest after more records equals the digest of a journal
        seeded with all of them; different entries give different digests.
        """
        journal: MutationJournal[int] = MutationJournal(first)
        before = journal.digest()
        journal.apply(second)
        assert MutationJournal(first + second).digest() == journal.digest()
        assert (before == journal.digest()) == (not second)


class TestFrozenEntries:
    @given(json_values())
    def test_recorded_entries_are_frozen_json(self, entry):
        """
        An entry is frozen when recorded: equal to what was recorded, with the
        same types, and a later change to the caller's object never reaches it.
        """
        journal: MutationJournal[object] = MutationJournal()
        journal.record(entry)
        assert_identical(deep_freeze(entry), next(iter(journal)))
        if isinstance(entry, list):
            entry.append("later")
            assert "later" not in next(iter(journal))

    def test_entries_cannot_change_in_place(self):
        """
        A recorded entry refuses in-place changes, so every snapshot and
        checkpoint holding it keeps what was recorded; seeds and applied
        entries are frozen too.
        """
        entry = {"kind": "step", "tags": ["a"]}
        journal: MutationJournal[dict[str, object]] = MutationJournal([{"seed": [1]}])
        journal.record(entry)
        journal.apply([{"applied": {"x": 1}}])
        entry["tags"].append("b")  # type: ignore[attr-defined]
        assert {"kind": "step", "tags": ["a"]} == tuple(journal)[1]
        for recorded in tuple(journal):
            assert isinstance(recorded, FrozenDict)
            with pytest.raises(FrozenPayloadError):
                recorded["new"] = 1

    def test_non_json_entries_refused(self):
        """
        An entry that is not JSON data is refused with its position and path;
        nothing is recorded.
        """
        journal: MutationJournal[object] = MutationJournal()
        journal.record("first")
        with pytest.raises(PayloadTypeError, match=r"journal entry 1\['ids'\] is \{1\}"):
            journal.record({"ids": {1}})
        with pytest.raises(PayloadError, match=r"journal entry 1\['x'\] is nan"):
            journal.record({"x": float("nan")})
        deep: object = 1
        for _ in range(10_000):
            deep = [deep]
        with pytest.raises(PayloadError, match="nested more than 100 levels"):
            journal.record(deep)
        with pytest.raises(PayloadTypeError):
            journal.apply(["fine", object()])
        assert ("first",) == tuple(journal)
