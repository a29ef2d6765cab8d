"""
Tests for recorded contexts in stores: saved as their history, loaded by replaying it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.history.programs import _Program, state, steps
from tests.stores import Stores, kind_params
from workingctx import Checkpoint, Message, SQLiteStore, ToolCall, Usage, WorkingContext
from workingctx.exceptions import CheckpointError, FinishedError, HistoryError, MergeError, PendingCallsError
from workingctx.persistence import ContextInfo, ContextStore


@pytest.fixture(params=kind_params())
def store(request, tmp_path):
    """
    A fresh store of every kind: in memory, SQLite, PostgreSQL and Redis.
    """
    made = Stores(request.param, tmp_path)
    yield made.new()
    made.close()


def run_of(turns: int) -> WorkingContext:
    ctx = WorkingContext(record=True, id="run")
    for turn in range(turns):
        ctx.append(
            Message.user(f"question {turn}"),
            Message.assistant(tool_calls=[ToolCall(f"c{turn}", "search", {"q": turn})], usage=Usage(10, 1)),
            Message.tool(f"result {turn}", call_id=f"c{turn}"),
            Message.assistant(f"answer {turn}", usage=Usage(12, 3)),
        )
        ctx.note("turn", turn)
    return ctx


def rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT count(*) FROM history_entries").fetchone()[0])


class TestSaveLoad:
    def test_both_stores_follow_the_protocol(self, store):
        """
        Every store is a ContextStore.
        """
        assert isinstance(store, ContextStore)

    def test_load_replays_an_equal_context(self, store):
        """
        The loaded context has the saved one's digest, history, usage, turn and finished state.
        """
        ctx = run_of(3).finish({"done": True})
        assert "run" == store.save_context(ctx)
        loaded = store.load_context("run")
        assert state(ctx) == state(loaded)
        assert ctx.history == loaded.history

    def test_saving_after_every_step(self, store):
        """
        Each save continues the saved history; the last load equals the context.
        """
        ctx = WorkingContext(record=True, id="run")
        for turn in range(5):
            ctx.append(Message.user(f"q{turn}"), Message.assistant(f"a{turn}"))
            store.save_context(ctx)
            assert ctx.digest() == store.load_context("run").digest()

    def test_list_gives_descriptors_without_replaying(self, store):
        """
        id, first user message, times, turn, finished, parent id and entry count.
        """
        ctx = run_of(2)
        child = ctx.fork()
        child.append(Message.user("sub-task")).finish()
        store.save_context(ctx)
        store.save_context(child)
        infos = {info.id: info for info in store.list_contexts()}
        assert ContextInfo.of(ctx) == infos["run"]
        first, last = ctx.history[0].at, ctx.history[-1].at
        expected = ContextInfo("run", "question 0", first, last, 4, finished=False, parent_id=None, entries=11)
        assert expected == infos["run"]
        assert ("run", True, "question 0") == (
            infos[child.id].parent_id,
            infos[child.id].finished,
            infos[child.id].first_message,
        )

    def test_a_first_message_holding_nul_saves_in_every_store(self, store):
        """
        A first user message holding NUL (which PostgreSQL's text cannot)
        saves and loads in every store; its descriptor shows "?" there, as
        every store lists it.
        """
        ctx = WorkingContext(record=True, id="nul")
        ctx.append(Message.user("a\x00b"), Message.assistant("c\x00d"))
        store.save_context(ctx)
        assert state(ctx) == state(store.load_context("nul"))
        assert "a?b" == ContextInfo.of(ctx).first_message
        assert [ContextInfo.of(ctx)] == list(store.list_contexts())

    def test_unknown_ids_and_plain_contexts(self, store):
        """
        A missing id raises CheckpointError; a context that is not recorded, TypeError.
        """
        with pytest.raises(CheckpointError, match="no recorded context 'nope'"):
            store.load_context("nope")
        with pytest.raises(CheckpointError, match="no recorded context 'nope'"):
            store.delete_context("nope")
        with pytest.raises(TypeError, match=r"WorkingContext\(record=True\)"):
            store.save_context(WorkingContext())
        with pytest.raises(TypeError, match="a context id is a str"):
            store.load_context(3)

    def test_a_diverged_copy_is_refused(self, store):
        """
        Saving a history that does not continue the saved one raises and writes nothing.
        """
        ctx = run_of(1)
        store.save_context(ctx)
        other = WorkingContext.replay(ctx.history)
        ctx.append(Message.user("mine"))
        other.append(Message.user("theirs"))
        store.save_context(ctx)
        with pytest.raises(CheckpointError, match="not the start of this one"):
            store.save_context(other)
        assert ctx.history == store.load_context("run").history

    def test_delete(self, store):
        """
        A deleted context is gone; a fork saved beside it still loads.
        """
        ctx = run_of(2)
        child = ctx.fork()
        child.append(Message.user("more"))
        store.save_context(ctx)
        store.save_context(child)
        store.delete_context("run")
        assert [child.id] == [info.id for info in store.list_contexts()]
        assert child.digest() == store.load_context(child.id).digest()

    def test_restore_after_load(self, store):
        """
        A loaded context goes back like the one recorded, and saves on.
        """
        ctx = run_of(3)
        store.save_context(ctx)
        loaded = store.load_context("run")
        loaded.restore(5)
        assert WorkingContext.replay(ctx.history[:6]).messages == loaded.messages
        store.save_context(loaded)
        assert loaded.history == store.load_context("run").history


class TestSQLite:
    def test_saving_again_writes_only_the_new_entries(self, tmp_path):
        """
        One row per entry, however often the context is saved; a fork adds only its own.
        """
        path = tmp_path / "run.db"
        with SQLiteStore(path) as store:
            ctx = WorkingContext(record=True, id="run")
            for turn in range(10):
                ctx.append(Message.user(f"q{turn}"), Message.assistant(f"a{turn}"))
                store.save_context(ctx)
                store.save_context(ctx)
            assert len(ctx.history) == rows(path)
            child = ctx.fork()
            child.append(Message.user("more"))
            store.save_context(child)
            assert len(ctx.history) + 2 == rows(path)
            store.delete_context(child.id)
            assert len(ctx.history) == rows(path)

    def test_a_fresh_store_resumes(self, tmp_path):
        """
        Another store on the same file loads and continues the saved context.
        """
        path = tmp_path / "run.db"
        ctx = run_of(3)
        with SQLiteStore(path) as store:
            store.save_context(ctx)
        with SQLiteStore(path) as store:
            resumed = store.load_context("run")
            resumed.append(Message.user("and now?"))
            store.save_context(resumed)
        with SQLiteStore(path) as store:
            assert resumed.history == store.load_context("run").history

    @pytest.mark.parametrize(
        ("statement", "match"),
        [
            (
                "UPDATE history_entries SET data = replace(data, 'question 1', 'question 9')",
                "does not match its digest",
            ),
            ("DELETE FROM history_entries WHERE position = 3", "expected 16 entries, found 12"),
            ("UPDATE contexts SET turn = 99", "does not match its seal"),
        ],
    )
    def test_damage_is_refused(self, tmp_path, statement, match):
        """
        A changed entry, a missing one or a changed row raises CheckpointError naming it.
        """
        path = tmp_path / "run.db"
        with SQLiteStore(path) as store:
            store.save_context(run_of(3))
        with sqlite3.connect(path) as db:
            db.execute(statement)
        with SQLiteStore(path) as store, pytest.raises(CheckpointError, match=match):
            store.load_context("run")

    def test_checkpoints_and_histories_share_a_file(self, tmp_path):
        """
        Checkpoints saved beside recorded contexts load as before, and delete collects only their own.
        """
        path = tmp_path / "both.db"
        ctx = run_of(2)
        with SQLiteStore(path) as store:
            saved = store.save(Checkpoint.capture(ctx))
            store.save_context(ctx)
            store.delete(saved)
            assert ctx.digest() == store.load_context("run").digest()
            assert [] == store.list()

    def test_a_checkpoint_store_without_histories_lists_none(self, tmp_path):
        """
        A file that never held a recorded context has none to list or load.
        """
        with SQLiteStore(tmp_path / "old.db") as store:
            assert [] == store.list_contexts()
            with pytest.raises(CheckpointError, match="no recorded context"):
                store.load_context("run")


class TestProperty:
    @settings(max_examples=30)
    @given(st.lists(steps(), max_size=15))
    def test_saved_after_every_step_loads_equal(self, program):
        """
        Random recorded programs saved to SQLite after every step load equal at every step.
        """
        with SQLiteStore(":memory:") as store:
            run = _Program()
            for step in program:
                # A refused step (a merge that would break the tool rules included) changes nothing.
                with contextlib.suppress(FinishedError, PendingCallsError, HistoryError, MergeError):
                    run.run(step)
                store.save_context(run.ctx)
                assert state(run.ctx) == state(store.load_context(str(run.ctx.id)))
