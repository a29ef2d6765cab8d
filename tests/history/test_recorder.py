"""
The recorder of a recorded context: one entry per change, replay and its property over random
programs, restore, fork and finish, notes edits, pending calls, and the usage and cost it sums.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.history.programs import _Program, assert_replays, call, recorded, state, steps
from tests.strategies import block_transcripts, messages, transcripts
from workingctx import (
    Checkpoint,
    LastNTurns,
    Message,
    PrefixContext,
    RoleFilter,
    SummaryContextManager,
    ToolCall,
    Usage,
    WorkingContext,
)
from workingctx.exceptions import (
    FinishedError,
    FrozenPayloadError,
    HistoryError,
    MergeError,
    PendingCallsError,
    WorkingCtxError,
)
from workingctx.history import (
    ContextChange,
    Entry,
    Forked,
    Kept,
    Merged,
    NotesChange,
    build_tail,
    entry_from_data,
    entry_to_data,
    tail_pieces,
)


class TestEntries:
    def test_one_entry_per_change_with_turn_and_utc_time(self):
        """
        Messages, notes, trims, finish and errors each add one entry; turn counts replies.
        """
        ctx = recorded()
        ctx.append(Message("user", "hi"), Message.notice("budget low"), Message.assistant("hello"))
        ctx.note("k", 1)
        ctx.replace_tail(ctx.messages[1:])
        ctx.record_error(RuntimeError("boom"), during="tool")
        ctx.finish()
        kinds = [e.kind for e in ctx.history]
        assert ["start", "user", "notice", "reply", "notes", "context_change", "error", "finish"] == kinds
        assert [0, 0, 0, 1, 1, 1, 1, 1] == [e.turn for e in ctx.history]
        assert all(e.at.utcoffset().total_seconds() == 0 for e in ctx.history)
        change = ctx.history[5].content
        assert isinstance(change, ContextChange)
        assert "trim" == change.change
        assert (Kept(1, 3),) == change.tail

    def test_tool_outcomes(self):
        """
        A result defaults to done, a failed result block to error; close_pending closes every pending call.
        """
        from workingctx.messages import ToolResultBlock  # noqa: PLC0415

        ctx = recorded()
        ctx.append(Message.assistant(tool_calls=[ToolCall("a", "x"), ToolCall("b", "y"), ToolCall("c", "z")]))
        ctx.append(Message.tool("ok", call_id="a"))
        ctx.append(Message.tool_message([ToolResultBlock("b", "boom", is_error=True)]))
        ctx.close_pending("cancelled")
        assert ["done", "error", "cancelled"] == [e.outcome for e in ctx.history if e.kind == "tool_result"]
        assert "(cancelled)" == ctx.messages[-1].text()
        assert () == ctx.pending_calls


class TestReplay:
    def test_replay_gives_an_equal_context(self):
        """
        Same digest, messages, notes, finished state, usage, id and history.
        """
        ctx = recorded(prefix=PrefixContext("You are terse."), id="run-1", scratchpad={"repo": "api"})
        ctx.append(Message("user", "hi"), call("c1", usage=Usage(10, 2)), Message.tool("r", call_id="c1"))
        ctx.note("plan", ["a", "b"]).finish({"ok": True})
        replayed = WorkingContext.replay(ctx.history)
        assert_replays(ctx)
        assert "run-1" == replayed.id
        assert replayed.recorded

    def test_bad_histories_are_refused(self):
        """
        Not entries, no start entry, a run past the tail: clear errors naming the position.
        """
        ctx = recorded()
        ctx.append(Message("user", "x"))
        with pytest.raises(TypeError, match=r"history\[1\] is 'x'"):
            WorkingContext.replay([ctx.history[0], "x"])  # type: ignore[list-item]
        with pytest.raises(HistoryError, match="begins with a start entry"):
            WorkingContext.replay(ctx.history[1:])
        with pytest.raises(HistoryError, match="at least its start entry"):
            WorkingContext.replay([])
        bad = Entry("context_change", ContextChange("trim", (Kept(0, 5),)), 0, ctx.history[0].at)
        with pytest.raises(HistoryError, match=r"history\[2\] \(context_change\) does not apply: Kept\(0, 5\)"):
            WorkingContext.replay([*ctx.history, bad])
        with pytest.raises(TypeError, match="sequence of entries"):
            WorkingContext.replay(ctx.history[0])  # type: ignore[arg-type]

    def test_no_message_or_merge_after_finish_until_a_restore(self):
        """
        A history holding a message or a merge after its finish entry, which a
        finished context refuses, is refused by replay too; after a restore it applies.
        """
        ctx = recorded()
        ctx.append(Message("user", "q"), Message("assistant", "a"))
        child = ctx.fork()
        child.append(Message("user", "more"))
        ctx.merge(child, mode="delta")
        user, reply, merged = ctx.history[1], ctx.history[2], ctx.history[-1]
        assert "merge" == merged.kind
        ctx.finish("done")
        ctx.note("after", 1)  # notes, trims and a second finish are taken after a finish
        index = len(ctx.history)
        for late in (user, reply, merged):
            with pytest.raises(HistoryError, match=rf"history\[{index}\] \({late.kind}\) does not apply: .*finish"):
                WorkingContext.replay([*ctx.history, late])
        ctx.restore(2)
        assert user.content == WorkingContext.replay([*ctx.history, user]).messages[-1]

    def test_tail_pieces_law(self):
        """
        Building a tail from the pieces of (old, new) gives new.
        """
        old = [Message("user", str(i)) for i in range(6)]
        new = [old[0], old[3], old[4], Message("system", "s"), old[5], old[1], Message("user", "0")]
        assert new == build_tail(old, tail_pieces(old, new))
        assert (Kept(0, 1), Kept(3, 5), Message("system", "s"), Kept(5, 6), Kept(1, 2), Kept(0, 1)) == tail_pieces(
            old, new
        )


class TestReplayProperty:
    @given(st.lists(steps(), max_size=25))
    def test_replay_equals_the_recording_at_every_step(self, program):
        """
        Random programs, recorded: after every step, replaying the history gives
        an equal context; a refused step changes nothing; entries round-trip as JSON.
        """
        run = _Program()
        for step in program:
            before = (state(run.ctx), run.ctx.history)
            try:
                run.run(step)
            except (FinishedError, PendingCallsError, HistoryError, MergeError):
                assert before == (state(run.ctx), run.ctx.history)
            assert_replays(run.ctx)
        for entry in run.ctx.history:
            assert entry == entry_from_data(entry_to_data(entry))

    @given(st.lists(steps(), max_size=20), st.data())
    def test_restore_brings_back_the_state_at_that_entry(self, program, data):
        """
        restore(i) gives the messages, notes and finished state of the history's
        first i + 1 entries, and only adds one entry.
        """
        run = _Program()
        for step in program:
            with contextlib.suppress(FinishedError, PendingCallsError, HistoryError, MergeError):
                run.run(step)
        ctx = run.ctx
        run.run(("close", "interrupted")) if ctx.pending_calls and not ctx.finished else None
        if ctx.pending_calls or ctx._history.waiting:
            with pytest.raises(PendingCallsError):
                ctx.restore(0)
            return
        index = data.draw(st.integers(0, len(ctx.history) - 1))
        size = len(ctx.history)
        then = WorkingContext.replay(ctx.history[: index + 1])
        if then.pending_calls or then._history.waiting:
            with pytest.raises(HistoryError, match="middle of a turn"):
                ctx.restore(index)
            assert size == len(ctx.history)
            return
        ctx.restore(index)
        assert size + 1 == len(ctx.history)
        assert (then.digest(), then.messages, dict(then.scratchpad), then.finished, then.answer) == (
            ctx.digest(),
            ctx.messages,
            dict(ctx.scratchpad),
            ctx.finished,
            ctx.answer,
        )
        assert_replays(ctx)


class TestRestoreForkFinish:
    def test_restore_by_checkpoint(self):
        """
        A checkpoint captured from the context, or its id, names the entry to go back to.
        """
        ctx = recorded()
        ctx.append(Message("user", "q1"), Message.assistant("a1"))
        saved = Checkpoint.capture(ctx)
        ctx.append(Message("user", "q2"), Message.assistant("a2")).note("k", 1)
        ctx.restore(saved.id)
        assert saved.snapshot == ctx.freeze()
        ctx.append(Message("user", "q3"))
        elsewhere = WorkingContext.replay(ctx.history)
        elsewhere.restore(saved)
        assert saved.snapshot.digest() == elsewhere.digest()
        with pytest.raises(HistoryError, match="no checkpoint with that id"):
            ctx.restore("nope")
        with pytest.raises(TypeError, match="entry index, a checkpoint id or a Checkpoint"):
            ctx.restore(1.5)  # type: ignore[arg-type]
        with pytest.raises(HistoryError, match="entries 0 to"):
            ctx.restore(999)

    def test_restore_refused_while_calls_are_pending(self):
        """
        PendingCallsError names the pending calls; nothing changes.
        """
        ctx = recorded()
        ctx.append(Message("user", "q"), call("c1"))
        size = len(ctx.history)
        with pytest.raises(PendingCallsError, match="'c1'") as info:
            ctx.restore(0)
        assert ("c1",) == info.value.calls
        assert isinstance(info.value, ValueError)
        assert isinstance(info.value, WorkingCtxError)
        assert size == len(ctx.history)

    def test_restore_never_shrinks_the_history(self):
        """
        Going back adds a context_change entry naming the target.
        """
        ctx = recorded()
        ctx.append(Message("user", "q1"), Message.assistant("a1"), Message("user", "q2"))
        ctx.restore(1)
        assert 5 == len(ctx.history)
        assert (Message("user", "q1"),) == ctx.messages
        last = ctx.history[-1].content
        assert isinstance(last, ContextChange)
        assert ("restore", 1) == (last.change, last.to)

    def test_finish_ends_appends_and_merges_until_restore(self):
        """
        After finish, append and merge raise FinishedError; restore undoes it.
        """
        ctx = recorded()
        ctx.append(Message("user", "q"), Message.assistant("the answer"))
        assert "the answer" == ctx.answer
        child = ctx.fork()
        ctx.finish({"value": 42})
        assert ctx.finished
        assert {"value": 42} == ctx.answer
        with pytest.raises(FrozenPayloadError):
            ctx.answer["value"] = 1
        with pytest.raises(FinishedError, match="finished context"):
            ctx.append(Message("user", "more"))
        with pytest.raises(FinishedError, match="finished context"):
            ctx.merge(child, mode="delta")
        ctx.note("after", value=True)  # notes still change
        ctx.restore(2)
        assert not ctx.finished
        ctx.append(Message("user", "more"))

    def test_finish_answers_are_json(self):
        """
        A dataclass answer becomes a read-only dict; a set is refused.
        """

        @dataclasses.dataclass
        class Found:
            file: str
            line: int

        ctx = recorded().finish(Found("main.py", 3))
        assert {"file": "main.py", "line": 3} == ctx.answer
        with pytest.raises(TypeError, match=r"'answer' is \{1\} of type set"):
            recorded().finish({1})

    def test_unrecorded_contexts_say_how_to_record(self):
        """
        History features on a plain context name record=True.
        """
        ctx = WorkingContext()
        for action in (lambda: ctx.history, ctx.finish, lambda: ctx.restore(0)):
            with pytest.raises(HistoryError, match=r"WorkingContext\(record=True\)"):
                action()
        assert (None, False, 0) == (ctx.id, ctx.finished, ctx.turn)
        with pytest.raises(ValueError, match="pass record=True"):
            WorkingContext(id="x")

    def test_ids(self):
        """
        Ids are letters, digits, _ and -; random when left out.
        """
        assert 32 == len(recorded().id)
        with pytest.raises(ValueError, match="letters, digits"):
            recorded(id="has space")

    def test_fork_copies_the_history_and_names_the_parent(self):
        """
        The child's history is the parent's, then a fork entry; its own part starts there.
        """
        parent = recorded(id="parent")
        parent.append(Message("user", "q"))
        child = parent.fork()
        assert parent.history == child.history[:-1]
        fork = child.history[-1]
        assert Forked("parent", child.id) == fork.content
        assert "parent" == child.parent_id
        assert child.id != parent.id
        child.append(Message.assistant("a"))
        assert_replays(child)
        assert 2 == len(parent.history)


class TestNotes:
    def test_live_notes_are_read_only(self):
        """
        On a recorded context, the scratchpad and its values cannot be changed in place.
        """
        ctx = recorded(scratchpad={"plan": {"steps": ["a"]}})
        with pytest.raises(FrozenPayloadError):
            ctx.scratchpad["x"] = 1
        with pytest.raises(FrozenPayloadError):
            ctx.get("plan")["steps"].append("b")
        assert {"plan": {"steps": ["a"]}} == ctx.scratchpad

    def test_edit_commits_one_entry(self):
        """
        A normal exit commits the changes as one notes entry.
        """
        ctx = recorded(scratchpad={"a": 1, "b": 2})
        with ctx.edit_notes() as notes:
            notes.setdefault("found", {})["bug"] = "b.py"
            notes["a"] = 10
            del notes["b"]
        assert {"a": 10, "found": {"bug": "b.py"}} == ctx.scratchpad
        assert NotesChange({"found": {"bug": "b.py"}, "a": 10}, ("b",)) == ctx.history[-1].content
        assert 2 == len(ctx.history)

    def test_an_edit_leaves_the_notes_it_did_not_change_sealed(self):
        """
        Opening an edit reads the stored notes without reading them out: no note
        becomes open (re-read at every freeze), and the edits still commit.
        """
        ctx = WorkingContext(scratchpad={"plan": {"steps": ["a"]}, "n": 1})
        before = ctx.digest()
        with ctx.edit_notes() as notes:
            assert {"plan": {"steps": ["a"]}, "n": 1} == notes
            notes["plan"]["steps"].append("b")
            assert before == ctx.digest()
        assert set() == ctx._scratchpad._open
        assert before != ctx.digest()
        assert {"plan": {"steps": ["a", "b"]}, "n": 1} == ctx.scratchpad

    def test_an_exception_commits_nothing(self):
        """
        The block raises: no entry, notes unchanged.
        """
        ctx = recorded(scratchpad={"a": 1})

        def edit() -> None:
            with ctx.edit_notes() as notes:
                notes["a"] = 2
                raise RuntimeError

        with pytest.raises(RuntimeError):
            edit()
        assert {"a": 1} == ctx.scratchpad
        assert 1 == len(ctx.history)

    def test_values_must_be_json(self):
        """
        A set or an object raises TypeError naming the key and the type; nothing is committed.
        """
        ctx = recorded()
        with pytest.raises(TypeError, match=r"'tags' is \{'x'\} of type set.*use a list"), ctx.edit_notes() as notes:
            notes["tags"] = {"x"}
        with pytest.raises(TypeError, match=r"'cfg'\['when'\] is .* of type object"):
            ctx.note("cfg", {"when": object()})
        with pytest.raises(TypeError, match="of type set"):
            recorded(scratchpad={"s": {1}})
        assert {} == ctx.scratchpad
        assert 1 == len(ctx.history)

    def test_plain_contexts_edit_too(self):
        """
        On a context that is not recorded, the block edits the live notes (JSON only).
        """
        ctx = WorkingContext(scratchpad={"a": [1]})
        with ctx.edit_notes() as notes:
            notes["a"].append(2)
        ctx.scratchpad["a"].append(3)
        assert {"a": [1, 2, 3]} == ctx.scratchpad

    def test_threads_take_turns(self):
        """
        Two threads incrementing through edit_notes never lose an update.
        """
        ctx = recorded(scratchpad={"n": 0})

        def bump() -> None:
            for _ in range(50):
                with ctx.edit_notes() as notes:
                    value = notes["n"]
                    time.sleep(0)
                    notes["n"] = value + 1

        threads = [threading.Thread(target=bump) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert 200 == ctx.get("n")
        assert 201 == len(ctx.history)

    def test_coroutines_take_turns(self):
        """
        Coroutines that await inside `async with ctx.edit_notes()` never lose an update.
        """
        ctx = recorded(scratchpad={"n": 0})

        async def bump() -> None:
            for _ in range(20):
                async with ctx.edit_notes() as notes:
                    value = notes["n"]
                    await asyncio.sleep(0)
                    notes["n"] = value + 1

        async def main() -> None:
            await asyncio.gather(*(bump() for _ in range(3)))

        asyncio.run(main())
        assert 60 == ctx.get("n")


class TestPendingCalls:
    def test_a_user_message_waits_for_the_results(self):
        """
        Added while calls are pending, it goes in right after the last result.
        """
        ctx = recorded()
        ctx.append(Message("user", "q"), Message.assistant(tool_calls=[ToolCall("a", "x"), ToolCall("b", "y")]))
        ctx.append(Message("user", "also check c.py"))
        assert 2 == ctx.size()
        ctx.append(Message.tool("ra", call_id="a"))
        assert 3 == ctx.size()
        ctx.append(Message.tool("rb", call_id="b"))
        assert ["user", "assistant", "tool", "tool", "user"] == [m.role for m in ctx.messages]
        assert "also check c.py" == ctx.messages[-1].text()
        assert_replays(ctx)

    def test_a_summary_is_refused(self):
        """
        The summary manager raises PendingCallsError and changes nothing.
        """

        async def summarize(messages: Any, *, prompt: str, max_tokens: int) -> str:  # noqa: ARG001
            return "summary"

        ctx = recorded()
        for i in range(4):
            ctx.append(Message("user", f"q{i}"), Message.assistant(f"a{i}"))
        ctx.append(call("c1"))
        before = ctx.messages
        with pytest.raises(PendingCallsError, match="a summary is refused"):
            SummaryContextManager(summarize, max_messages=2, keep_recent=1).trim_context(ctx)
        assert before == ctx.messages
        with pytest.raises(PendingCallsError, match="a clear is refused"):
            ctx.clear_messages()

    def test_finish_works_while_pending(self):
        """
        finish is allowed with calls pending.
        """
        ctx = recorded()
        ctx.append(call("c1")).finish()
        assert ctx.finished

    def test_a_dangling_call_is_not_pending(self):
        """
        A call other messages already followed without its result is broken, not
        pending: as for ``pending_calls``, a user message does not wait for it, a
        clear is not refused, and close_pending() leaves it alone.
        """
        ctx = recorded()
        ctx.append(Message("user", "q"), call("c1"), Message.assistant("moved on"))
        assert () == ctx.pending_calls
        ctx.append(Message("user", "next"))
        assert ["q", "", "moved on", "next"] == [m.text() for m in ctx.messages]
        ctx.close_pending("cancelled")
        assert 4 == ctx.size()
        ctx.clear_messages()
        assert 0 == ctx.size()
        assert_replays(ctx)

    def test_a_user_message_carrying_results_answers_the_calls(self):
        """
        A user message with tool-result blocks (the Anthropic shape) is a result:
        it goes in at once, and the user message waiting behind it follows.
        """
        from workingctx.messages import ToolResultBlock  # noqa: PLC0415

        ctx = recorded()
        ctx.append(Message("user", "q"), call("c1"), Message("user", "late"))
        ctx.append(Message("user", (ToolResultBlock("c1", "found"),)))
        assert ["user", "assistant", "user", "user"] == [m.role for m in ctx.messages]
        assert "late" == ctx.messages[-1].text()
        assert () == ctx.pending_calls
        assert_replays(ctx)

    def test_a_user_message_waits_for_a_providers_own_call(self):
        """
        A Responses shell call waits for its output as a function call does:
        it is among ``pending_calls``, a user message added meanwhile goes in
        after the output, and a clear is refused; close_pending() has no
        result of that kind to give.
        """
        from workingctx.adapters import openai_responses  # noqa: PLC0415

        shell = {"type": "shell_call", "call_id": "c1", "action": {"commands": ["ls"]}, "status": "completed"}
        items = [{"role": "user", "content": "q"}, shell]
        items.append({"type": "shell_call_output", "call_id": "c1", "output": [], "status": "completed"})
        question, asked, output = openai_responses.read(items).messages
        ctx = recorded()
        ctx.append(question, asked, Message("user", "also this"))
        assert 2 == ctx.size()
        assert [("c1", "shell_call")] == [(c.id, c.name) for c in ctx.pending_calls]
        with pytest.raises(PendingCallsError, match="'c1'"):
            ctx.clear_messages()
        ctx.close_pending("cancelled")
        assert 2 == ctx.size()
        ctx.append(output)
        assert ["q", "", "", "also this"] == [m.text() for m in ctx.messages]
        assert ("c1",) == ctx.messages[2].result_ids
        assert 1 == ctx.turn
        assert_replays(ctx)

    def test_close_pending_answers_a_custom_tool_call(self):
        """
        A custom tool call is pending as a function call is, and a tool
        message answers it (the Responses adapter writes it as the call's
        ``custom_tool_call_output``): close_pending() closes it, and the user
        message waiting for it goes in after.
        """
        from workingctx.adapters import openai_responses  # noqa: PLC0415

        custom = {"type": "custom_tool_call", "call_id": "c1", "name": "sql", "input": "SELECT 1"}
        question, asked = openai_responses.read([{"role": "user", "content": "q"}, custom]).messages
        ctx = recorded()
        ctx.append(question, asked, Message("user", "also this"))
        assert [("c1", "sql")] == [(c.id, c.name) for c in ctx.pending_calls]
        ctx.close_pending("cancelled")
        assert [("tool", "(cancelled)"), ("user", "also this")] == [(m.role, m.text()) for m in ctx.messages[2:]]
        assert () == ctx.pending_calls
        sent = openai_responses.write(ctx)["input"]
        assert {"type": "custom_tool_call_output", "call_id": "c1", "output": "(cancelled)"} == sent[2]
        assert_replays(ctx)

    @given(
        st.one_of(transcripts(), block_transcripts(), block_transcripts(broken=True), st.lists(messages(), max_size=8))
    )
    def test_the_history_waits_on_the_contexts_pending_calls(self, transcript):
        """
        Appended one by one, any transcript (broken ones too): a user message
        waits only while ``pending_calls`` is not empty, a clear refuses naming
        exactly those calls, close_pending() answers exactly them, and the
        history replays to the same context.
        """
        ctx = recorded()
        for message in transcript:
            ctx.append(message)
            rec = ctx._history
            assert rec is not None
            pending = tuple(call.id for call in ctx.pending_calls)
            assert not rec.waiting or pending
            assert pending == tuple(call.id for call in WorkingContext(messages=ctx.messages).pending_calls)
        assert_replays(ctx)
        pending = tuple(call.id for call in ctx.pending_calls)
        if pending:
            with pytest.raises(PendingCallsError) as refused:
                ctx.clear_messages()
            assert pending == refused.value.calls
        size = ctx.size()
        ctx.close_pending("cancelled")
        answered = [m.tool_call_id for m in ctx.messages[size:] if m.role == "tool"]
        assert list(pending) == answered[: len(pending)]
        assert_replays(ctx)

    @given(st.one_of(transcripts(), block_transcripts()))
    def test_on_valid_transcripts_pending_means_unanswered(self, transcript):
        """
        On a valid transcript the context's pending calls are exactly the calls no
        later message answers, and a recorded context takes every message in order.
        """
        unanswered: dict[str, None] = {}
        for message in transcript:
            unanswered.update(dict.fromkeys(message.call_ids))
            for result in message.result_ids:
                unanswered.pop(result, None)
        ctx = recorded()
        ctx.extend(transcript)
        assert tuple(unanswered) == tuple(call.id for call in ctx.pending_calls)
        assert list(transcript) == list(ctx.messages)


class TestUsage:
    def test_usage_sums_replies_and_merged_children(self):
        """
        Every reply ever recorded counts (a trim does not lower it), and a merged
        child brings its own replies once, however often it is merged.
        """
        ctx = recorded()
        ctx.append(Message("user", "q"), Message.assistant("a", usage=Usage(100, 10, cache_read_tokens=50)))
        child = ctx.fork()
        child.append(Message("user", "sub"), Message.assistant("sub answer", usage=Usage(7, 3)))
        grandchild = child.fork()
        grandchild.append(Message.assistant("deep", usage=Usage(1, 1)))
        child.merge(grandchild, mode="delta")
        ctx.merge(child, mode="delta")
        ctx.merge(child, mode="delta")
        ctx.replace_tail(ctx.messages[-1:])
        assert Usage(108, 14, cache_read_tokens=50) == ctx.usage
        merged = [e.content for e in ctx.history if e.kind == "merge"]
        assert isinstance(merged[0], Merged)
        assert [Usage(8, 4), Usage()] == [m.usage for m in merged]
        assert child.id == merged[0].child
        assert_replays(ctx)

    def test_plain_contexts_sum_their_tail(self):
        """
        Without a history, usage is what the tail's replies carry.
        """
        ctx = WorkingContext().append(Message.assistant("a", usage=Usage(1, 2)), Message.assistant("b", usage=Usage(3)))
        assert Usage(4, 2) == ctx.usage


class TestChecks:
    def test_system_messages_and_noop_trims(self):
        """
        A system message in the tail is a system entry; a replace_tail that changes nothing records nothing.
        """
        ctx = recorded()
        ctx.append(Message("system", "rules"))
        ctx.replace_tail(ctx.messages)
        ctx.replace_tail([])
        ctx.replace_tail([])
        assert ["start", "system", "context_change"] == [e.kind for e in ctx.history]

    def test_a_second_start_is_refused(self):
        """
        A history holds one start entry.
        """
        ctx = recorded()
        with pytest.raises(HistoryError, match="one start entry"):
            WorkingContext.replay([*ctx.history, ctx.history[0]])

    def test_waiting_messages_go_in_when_a_trim_drops_the_calls(self):
        """
        A replacement without the pending calls places the waiting messages; so does a slice.
        """
        ctx = recorded()
        ctx.append(Message("user", "q"), call("c1"), Message("user", "late"))
        child = ctx.slice(LastNTurns(1) & ~RoleFilter({"assistant"}))
        assert ["q", "late"] == [m.text() for m in child.messages]
        assert_replays(child)
        ctx.replace_tail(ctx.messages[:1])
        assert ["q", "late"] == [m.text() for m in ctx.messages]
        assert_replays(ctx)

    def test_merges_of_every_kind(self):
        """
        A reducer's replacement and an unrecorded context's usage are recorded.
        """
        from workingctx import add_messages  # noqa: PLC0415

        ctx = recorded()
        ctx.append(Message("user", "q", id="1"))
        plain = WorkingContext().append(Message("user", "q2", id="1"), Message.assistant("a", usage=Usage(5, 1)))
        ctx.merge(plain, mode=add_messages)
        merged = ctx.history[-1].content
        assert isinstance(merged, Merged)
        assert ("reducer", None) == (merged.mode, merged.child)
        ctx.merge(WorkingContext().append(Message.assistant("b", usage=Usage(2, 2))), mode="concat")
        assert Usage(7, 3) == ctx.usage
        assert_replays(ctx)

    def test_restore_by_checkpoint_object_and_unknown_state(self):
        """
        A Checkpoint captured here restores by its id; one of a state never reached is refused.
        """
        ctx = recorded()
        ctx.append(Message("user", "q"))
        saved = Checkpoint.capture(ctx)
        ctx.append(Message.assistant("a"))
        ctx.restore(saved)
        assert 1 == ctx.size()
        with pytest.raises(HistoryError, match="no entry of this history has that checkpoint's state"):
            ctx.restore(Checkpoint.capture(WorkingContext().append(Message("user", "never"))))

    def test_restore_brings_the_prefix_back(self):
        """
        Restoring a fork made with another prefix to before it brings the old prefix back.
        """
        ctx = recorded(prefix=PrefixContext("one"))
        ctx.append(Message("user", "q"))
        child = ctx.with_prefix(PrefixContext("two"))
        child.restore(1)
        assert PrefixContext("one") == child.prefix
        assert_replays(child)

    def test_errors_and_closing(self):
        """
        record_error takes an exception or a str; close_pending takes a failing outcome.
        """
        ctx = recorded()
        ctx.record_error("plain text")
        with pytest.raises(TypeError, match="takes an exception or a str"):
            ctx.record_error(3)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="during must be a str"):
            ctx.record_error("x", during=3)  # type: ignore[arg-type]
        with pytest.raises(HistoryError, match="other than 'done'"):
            ctx.close_pending("done")
        with pytest.raises(HistoryError, match="takes a tool result"):
            ctx.append_result(Message("user", "x"))
        with pytest.raises(HistoryError, match="unknown outcome"):
            ctx.append_result(Message.tool("x", call_id="c"), outcome="maybe")  # type: ignore[arg-type]
        assert 1 == WorkingContext().append_result(Message.tool("x", call_id="c"), outcome="error").size()

    def test_a_blocked_editor_gives_up_with_advice(self, monkeypatch):
        """
        A `with` block that cannot get its turn says to use `async with` in coroutines.
        """
        from workingctx.history import NotesEdit  # noqa: PLC0415

        monkeypatch.setattr(NotesEdit, "timeout", 0.01)
        ctx = recorded()
        with ctx.edit_notes(), pytest.raises(HistoryError, match="async with"), ctx.edit_notes():
            pass


class TestCost:
    def test_cost_prices_every_recorded_reply_by_its_model(self):
        """
        Replies name their model in metadata; merged children bring theirs; a trim lowers nothing.
        """
        from decimal import Decimal  # noqa: PLC0415

        from workingctx.pricing import cost  # noqa: PLC0415

        sonnet = {"model": "claude-sonnet-4-6"}
        ctx = recorded()
        ctx.append(Message("user", "q"), Message("assistant", "a", usage=Usage(20_000, 200), metadata=sonnet))
        child = ctx.fork()
        child.append(Message("assistant", "b", usage=Usage(1_000, 10), metadata=sonnet))
        child.append(Message("assistant", "c", usage=Usage(500, 5)))
        ctx.merge(child, mode="delta")
        ctx.replace_tail(ctx.messages[-1:])
        expected = cost("claude-sonnet-4-6", Usage(21_000, 210)) + cost("claude-sonnet-4-6", Usage(500, 5))
        assert expected == ctx.cost("claude-sonnet-4-6")
        assert Decimal("0.063") == WorkingContext.replay(ctx.history[:3]).cost()
        assert ctx.cost("claude-sonnet-4-6") == WorkingContext.replay(ctx.history).cost("claude-sonnet-4-6")

    def test_a_reply_without_a_model_needs_one(self):
        """
        Without metadata['model'] and without cost(model=...), PricingError says what to pass.
        """
        from workingctx.exceptions import PricingError  # noqa: PLC0415

        ctx = recorded().append(Message.assistant("a", usage=Usage(10, 1)))
        with pytest.raises(PricingError, match=r"pass the model to cost\(model=...\)"):
            ctx.cost()


def test_a_user_message_waits_behind_every_call_of_joined_calling_turns():
    """
    With two calling turns one right after the other, a user message that
    comes when only the first call is answered waits for the second.
    """
    from workingctx.validity import check_messages  # noqa: PLC0415

    ctx = WorkingContext(record=True)
    ctx.append(
        Message.user("Oslo and Rome?"),
        Message("assistant", tool_calls=(ToolCall("a", "weather", {}),)),
        Message("assistant", tool_calls=(ToolCall("b", "weather", {}),)),
    )
    ctx.append(Message.tool("rain", call_id="a"))
    ctx.append(Message.user("and Paris?"))
    assert ctx.messages[-1].role == "tool"
    ctx.append(Message.tool("sun", call_id="b"))
    assert [m.role for m in ctx.messages] == ["user", "assistant", "assistant", "tool", "tool", "user"]
    assert check_messages(ctx.assembled()) == ()
