"""
Tests for checkpoints: capturing one from a context, the id that names its
content, and rehydrating a context from it.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import attrs
import pytest
from hypothesis import given

from tests.persistence.runs import T0, run_context
from tests.strategies import json_objects, working_contexts
from workingctx import Checkpoint, Message
from workingctx.checkpoint import journal_chain
from workingctx.context import WorkingContext
from workingctx.exceptions import FrozenPayloadError
from workingctx.frozen import FrozenDict
from workingctx.persistence import _codec, checkpoint_id, rehydrate
from workingctx.serialization import from_json, to_json
from workingctx.snapshot import FrozenContext


class TestCapture:
    def test_capture_takes_a_snapshot(self):
        """
        capture freezes the live context: later writes do not show in the checkpoint.
        """
        ctx = run_context(2)
        checkpoint = Checkpoint.capture(ctx, metadata={"turn": 2})
        ctx.append(Message("user", "later")).note("turn", 99)
        assert len(checkpoint.snapshot.messages) == 8
        assert dict(checkpoint.snapshot.scratchpad) == {"turn": 1}
        assert checkpoint.metadata == {"turn": 2}
        assert type(checkpoint.metadata) is FrozenDict
        assert checkpoint.created_at.tzinfo is not None

    def test_capture_of_a_snapshot(self):
        """
        A FrozenContext is wrapped as it is.
        """
        snapshot = run_context(1).freeze()
        assert Checkpoint.capture(snapshot).snapshot is snapshot

    def test_id_is_derived_from_content(self):
        """
        The same content, parent, time and metadata give the same id; any change gives another.
        """
        snapshot = run_context(2).freeze()
        first = Checkpoint.capture(snapshot, created_at=T0, metadata={"a": 1})
        again = Checkpoint.capture(run_context(2), created_at=T0, metadata={"a": 1})
        assert first.id == again.id
        assert re.fullmatch(r"[0-9a-f]{32}", first.id)
        assert first.id == checkpoint_id(snapshot, T0, None, {"a": 1})
        others = {
            Checkpoint.capture(snapshot, created_at=T0 + timedelta(microseconds=1), metadata={"a": 1}).id,
            Checkpoint.capture(snapshot, created_at=T0, metadata={"a": 2}).id,
            Checkpoint.capture(snapshot, created_at=T0, metadata={"a": 1}, parent="p").id,
            Checkpoint.capture(run_context(3), created_at=T0, metadata={"a": 1}).id,
        }
        assert first.id not in others
        assert len(others) == 4

    @given(ctx=working_contexts(max_turns=3))
    def test_the_journal_chain_is_the_journals_own_digest(self, ctx):
        """
        The chain a store links a checkpoint's journal entries by ends in the
        journal's own digest, and is the same whether the checkpoint was
        captured from the live context (its journal keeps the chain) or built
        around a bare snapshot (computed from the entries); evolving the
        checkpoint computes it again for the new snapshot.
        """
        ctx.journal.record({"kind": "step", "n": 1})
        captured = Checkpoint.capture(ctx, created_at=T0)
        built = Checkpoint(id="built", snapshot=ctx.freeze(), created_at=T0)
        chain = journal_chain(captured)
        assert len(ctx.journal) == len(chain)
        assert ctx.journal.digest() == chain[-1]
        assert list(chain) == list(journal_chain(built))
        shorter = attrs.evolve(built, snapshot=FrozenContext(journal=ctx.freeze().journal[:-1]))
        assert list(chain[:-1]) == list(journal_chain(shorter))

    @given(ctx=working_contexts(max_turns=3))
    def test_every_store_row_names_the_journals_digest(self, ctx):
        """
        The row every store writes for a checkpoint names the head of its
        journal chain: the journal's own digest, and its length.
        """
        ctx.journal.record({"kind": "step", "n": 2})
        row = _codec.encode(Checkpoint.capture(ctx, created_at=T0)).row
        assert (ctx.journal.digest(), len(ctx.journal)) == (row[9], row[10])

    def test_parent_as_checkpoint_or_id(self):
        """
        parent takes a checkpoint or its id.
        """
        first = Checkpoint.capture(run_context(1))
        assert Checkpoint.capture(run_context(2), parent=first).parent == first.id
        assert Checkpoint.capture(run_context(2), parent=first.id).parent == first.id

    @pytest.mark.parametrize(
        ("kwargs", "error", "match"),
        [
            ({"parent": 5}, TypeError, "parent must be a Checkpoint"),
            ({"parent": ""}, ValueError, "parent must be a Checkpoint"),
            ({"created_at": datetime(2026, 1, 1)}, ValueError, "timezone-aware"),  # noqa: DTZ001  # the naive time under test
            ({"created_at": "2026-01-01"}, TypeError, "timezone-aware"),
            ({"metadata": {"seen": {1, 2}}}, TypeError, r"metadata must be JSON data: .* at metadata\['seen'\]"),
            ({"metadata": ["not", "a", "mapping"]}, TypeError, "metadata must be a mapping"),
        ],
    )
    def test_bad_arguments(self, kwargs, error, match):
        """
        Bad arguments raise an error naming the value: a TypeError for a wrong
        type, a ValueError for a wrong value (an empty id, a naive time).
        """
        with pytest.raises(error, match=match):
            Checkpoint.capture(run_context(1), **kwargs)

    def test_capture_refuses_other_things(self):
        """
        capture takes a context or a snapshot only.
        """
        with pytest.raises(TypeError, match="capture takes a WorkingContext or a FrozenContext"):
            Checkpoint.capture([Message("user", "hi")])  # type: ignore[arg-type]

    @given(working_contexts(), json_objects)
    def test_checkpoint_round_trips_through_json(self, ctx, metadata):
        """
        A checkpoint is a value the converter writes and reads back equal.
        """
        checkpoint = Checkpoint.capture(ctx, parent="p", metadata=metadata)
        back = from_json(to_json(checkpoint), Checkpoint)
        assert checkpoint == back
        assert checkpoint.snapshot.digest() == back.snapshot.digest()

    def test_other_time_zones_kept(self):
        """
        A creation time in another zone comes back as the same instant, in the same zone.
        """
        when = datetime(2026, 5, 1, 9, 30, tzinfo=timezone(timedelta(hours=5, minutes=30)))
        checkpoint = Checkpoint.capture(run_context(1), created_at=when)
        back = from_json(to_json(checkpoint), Checkpoint)
        assert back.created_at == when
        assert back.created_at.utcoffset() == when.utcoffset()


class TestRehydrate:
    def test_nested_writes_work(self):
        """
        The rehydrated scratchpad is writable at every depth, and writes never
        reach the checkpoint.
        """
        ctx = WorkingContext().note("plan", {"steps": ["a"], "meta": {"tries": [1]}})
        checkpoint = Checkpoint.capture(ctx)
        live = rehydrate(checkpoint)
        live.get("plan")["steps"].append("b")
        live.get("plan")["meta"]["tries"].append(2)
        live.scratchpad["plan"]["new"] = True
        assert live.get("plan") == {"steps": ["a", "b"], "meta": {"tries": [1, 2]}, "new": True}
        assert dict(checkpoint.snapshot.scratchpad) == {"plan": {"steps": ["a"], "meta": {"tries": [1]}}}

    def test_prefix_tail_and_journal_restored(self):
        """
        The prefix, tail and journal come back; the journal starts committed
        and its entries stay frozen, so the checkpoint cannot be reached through them.
        """
        ctx = run_context(3)
        checkpoint = Checkpoint.capture(ctx)
        live = rehydrate(checkpoint)
        assert live.prefix is checkpoint.snapshot.prefix
        assert live.messages == checkpoint.snapshot.messages
        assert tuple(live.journal) == checkpoint.snapshot.journal
        assert not live.journal.has_uncommitted()
        with pytest.raises(FrozenPayloadError):
            next(iter(live.journal))["n"] = 100
        assert checkpoint.snapshot.journal[0]["n"] == 0
        live.append(Message("user", "more"))
        assert len(checkpoint.snapshot.messages) == 12

    def test_frozen_context_accepted(self):
        """
        rehydrate also takes a bare snapshot; anything else is a TypeError.
        """
        snapshot = run_context(1).freeze()
        assert rehydrate(snapshot).freeze() == snapshot
        with pytest.raises(TypeError, match="rehydrate takes a Checkpoint or a FrozenContext"):
            rehydrate("abc")  # type: ignore[arg-type]

    @given(working_contexts())
    def test_freeze_after_rehydrate_is_the_snapshot(self, ctx):
        """
        rehydrate(capture(ctx)).freeze() equals ctx.freeze(), with the same digest.
        """
        snapshot = ctx.freeze()
        again = rehydrate(Checkpoint.capture(ctx)).freeze()
        assert snapshot == again
        assert snapshot.digest() == again.digest()
