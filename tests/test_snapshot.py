"""
Tests for workingctx.snapshot: freeze, hash, digest, diff and the common prefix.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import os
import pickle
import subprocess
import sys
import types
from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import json_values, messages, prefixes, scratchpads, short_names, transcripts
from workingctx import Checkpoint, FrozenContext, Message, PrefixContext, ToolCall, WorkingContext
from workingctx.exceptions import FrozenPayloadError, PayloadError
from workingctx.frozen import FrozenDict
from workingctx.persistence import rehydrate
from workingctx.snapshot import ContextDiff, common_prefix_length


@st.composite
def contexts(draw: st.DrawFn) -> WorkingContext:
    """
    A live context with a random prefix, tool-heavy tail, notes and journal.
    """
    ctx = WorkingContext(prefix=draw(prefixes), messages=draw(transcripts(max_turns=3)), scratchpad=draw(scratchpads))
    for entry in draw(st.lists(json_values(3), max_size=3)):
        ctx.journal.record(entry)
    return ctx


class TestFreezeAndResume:
    def test_freeze_hash_pickle_deepcopy(self):
        """
        A snapshot with a nested note hashes, pickles and deep-copies to an
        equal value, and a later append does not show in it.
        """
        ctx = WorkingContext()
        ctx.append(Message("user", "hello"))
        ctx.note("plan", {"steps": ["a", "b"]})

        snap = ctx.freeze()
        assert hash(snap) == hash(ctx.freeze())
        assert pickle.loads(pickle.dumps(snap)) == snap
        assert copy.deepcopy(snap) == snap

        ctx.append(Message("assistant", "hi"))
        assert (1, 2) == (len(snap.messages), len(ctx.messages))

    def test_diff(self):
        """
        A fork's diff against its parent: one message added, one note changed,
        the same prefix; the diff refuses writes.
        """
        before = WorkingContext().append(Message("user", "q1")).note("stage", "plan")
        after = before.fork().append(Message("assistant", "a1")).note("stage", "act")

        d = after.diff(before)
        assert (1, 0) == (len(d.messages_added), len(d.messages_removed))
        assert {"stage": "act"} == d.scratchpad_changes
        assert "{'stage': 'act'}" == repr(d.scratchpad_changes)
        assert d.prefix_changed is False
        with pytest.raises(TypeError) as caught:
            d.scratchpad_changes["stage"] = "tampered"  # type: ignore[index]
        assert (
            "this payload belongs to a frozen value and cannot be mutated in place" == str(caught.value).split(".")[0]
        )

    def test_snapshot_scratchpad_is_frozen_and_detached(self):
        """
        A nested write on the live context does not reach the snapshot, and
        the snapshot's nested value refuses writes.
        """
        ctx = WorkingContext().note("plan", {"steps": ["a"]})
        snap = ctx.freeze()
        ctx.scratchpad["plan"]["steps"].append("b")
        assert {"plan": {"steps": ["a"]}} == dict(snap.scratchpad)
        with pytest.raises(FrozenPayloadError) as caught:
            dict(snap.scratchpad)["plan"]["steps"].append("b")
        assert str(caught.value).startswith("this payload belongs to a frozen value and cannot be mutated in place.")

    def test_resumed_context_is_writable_at_every_depth(self):
        """
        A context rebuilt from a snapshot accepts nested writes.
        """
        snap = WorkingContext().note("plan", {"steps": ["a"]}).freeze()
        live = WorkingContext.from_snapshot(snap)
        live.scratchpad["plan"]["steps"].append("b")
        live.note("other", 1)
        assert ["a", "b"] == live.get("plan")["steps"]
        assert {"plan": {"steps": ["a"]}} == dict(snap.scratchpad)


_SHARED_VALUES = (Message, PrefixContext, type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
"""What a snapshot and a context may share by design: frozen values (their
private caches included) and code; the walk below does not enter them."""


def _mutable_parts(root: object) -> dict[int, object]:
    """
    Every plain list, dict, set and bytearray reachable from *root*, by id.
    """
    found: dict[int, object] = {}
    seen: set[int] = set()
    stack = [root]
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, _SHARED_VALUES):
            continue
        seen.add(id(item))
        if type(item) in (list, dict, set, bytearray):
            found[id(item)] = item
        stack.extend(gc.get_referents(item))
    return found


_TO_CONTEXT: dict[str, Callable[[FrozenContext], WorkingContext]] = {
    "WorkingContext.from_snapshot": WorkingContext.from_snapshot,
    "rehydrate(snapshot)": rehydrate,
    "rehydrate(checkpoint)": lambda snap: rehydrate(Checkpoint.capture(snap)),
}


class TestSnapshotToContext:
    @pytest.mark.parametrize("path", sorted(_TO_CONTEXT))
    @given(ctx=contexts())
    def test_shares_no_mutable_state_with_the_snapshot(self, path, ctx):
        """
        Every way from a snapshot to a live context gives one that reaches no
        list, dict or set the snapshot reaches (frozen values aside), equals
        the snapshot when frozen again, and whose writes never reach it.
        """
        ctx.note("nested", {"plan": {"steps": ["a"]}, "seen": [1, 2]})
        snap = ctx.freeze()
        digest, copied = snap.digest(), copy.deepcopy(snap)
        live = _TO_CONTEXT[path](snap)
        snap.chain_digest()
        hash(snap)
        assert not _mutable_parts(live).keys() & _mutable_parts(snap).keys()
        assert snap == live.freeze()
        live.scratchpad["nested"]["plan"]["steps"].append("b")
        live.get("nested")["seen"].clear()
        live.append(Message("user", "later")).note("more", [1]).journal.record({"kind": "later"})
        live.digest()
        assert copied == snap
        assert digest == snap.digest() == copied.digest()


class TestFreezeLaws:
    @given(contexts())
    def test_equal_snapshots_hash_and_digest_equal(self, ctx):
        """
        Two freezes of one state, and a copy through pickle, are equal, hash
        equal and have equal digests.
        """
        one, two = ctx.freeze(), ctx.freeze()
        assert one == two
        assert hash(one) == hash(two)
        assert one.digest() == two.digest()
        restored = pickle.loads(pickle.dumps(one))
        assert restored == one
        assert hash(restored) == hash(one)
        assert restored.digest() == one.digest()

    @given(contexts())
    def test_refreeze_of_a_resumed_context_equals_the_snapshot(self, ctx):
        """
        freeze() of a context rebuilt from a snapshot equals the snapshot.
        """
        snap = ctx.freeze()
        again = WorkingContext.from_snapshot(snap).freeze()
        assert snap == again
        assert snap.digest() == again.digest()

    @given(contexts(), messages(), short_names, json_values(4))
    def test_later_writes_never_change_a_snapshot(self, ctx, message, key, value):
        """
        Appending, noting, nested writes and journal records after freeze()
        leave the snapshot equal to a copy taken at the same time.
        """
        ctx.note("nested", {"list": [1]})
        snap = ctx.freeze()
        witness = pickle.loads(pickle.dumps(snap))
        ctx.append(message).note(key, value)
        ctx.scratchpad["nested"]["list"].append(2)
        ctx.journal.record("later")
        assert witness == snap
        assert witness.digest() == snap.digest()

    @given(contexts(), messages())
    def test_digest_tracks_content(self, ctx, message):
        """
        Appending a message changes the digest; the chain digest of the old
        length stays the old one.
        """
        before = ctx.freeze()
        after = ctx.append(message).freeze()
        assert before.digest() != after.digest()
        assert before.chain_digest() == after.chain_digest(len(before.messages))

    def test_hash_ignores_values_but_equality_does_not(self):
        """
        Snapshots differing only in a note's value share a hash bucket but are
        not equal.
        """
        one = WorkingContext().note("k", {"a": 1}).freeze()
        two = WorkingContext().note("k", {"a": 2}).freeze()
        assert hash(one) == hash(two)
        assert one != two
        assert one.digest() != two.digest()
        assert {one: "first", two: "second"}[two] == "second"

    def test_tool_call_snapshots_hash(self):
        """
        A snapshot holding tool calls with nested arguments hashes.
        """
        call = ToolCall("c1", "search", {"filters": {"tags": ["a"]}})
        snap = WorkingContext().append(Message("assistant", "", tool_calls=(call,))).freeze()
        assert isinstance(hash(snap), int)

    def test_journal_entries_are_shared_frozen(self):
        """
        A snapshot shares the journal's entries, which were frozen when recorded
        (a snapshot copies references, never entries).
        """
        entry = {"kind": "x"}
        ctx = WorkingContext()
        ctx.journal.record(entry)
        assert ctx.freeze().journal[0] is next(iter(ctx.journal))
        assert entry == ctx.freeze().journal[0]
        assert isinstance(ctx.freeze().journal[0], FrozenDict)

    def test_constructor_normalizes_and_validates(self):
        """
        A FrozenContext built by hand sorts and freezes the scratchpad and
        checks its fields.
        """
        snap = FrozenContext(messages=[Message("user", "x")], scratchpad={"b": [1], "a": {}})
        assert (("a", {}), ("b", [1])) == snap.scratchpad
        with pytest.raises(TypeError, match="messages\\[0\\]"):
            FrozenContext(messages=["x"])
        with pytest.raises(TypeError, match="scratchpad keys"):
            FrozenContext(scratchpad={1: "x"})
        with pytest.raises(TypeError, match="PrefixContext"):
            FrozenContext(prefix="system")  # type: ignore[arg-type]


class TestDigestsAcrossProcesses:
    SCRIPT = """
from workingctx import Message, PrefixContext, ToolCall, WorkingContext
ctx = WorkingContext(prefix=PrefixContext(system_prompt="s", grounding=(Message("system", "g"),)))
call = ToolCall("c1", "f", {"b": [1, {"z": 1, "a": 2}], "a": None})
ctx.append(Message("user", "q"), Message("assistant", "", tool_calls=(call,)))
ctx.append(Message("tool", "r", tool_call_id="c1"))
ctx.note("plan", {"steps": {"x", "y"}, "n": 1.5})
snap = ctx.freeze()
print(snap.digest(), ctx.messages[1].digest(), ctx.prefix.digest())
"""

    def test_same_digest_under_different_hash_seeds(self, tmp_path):
        """
        Two interpreters with different PYTHONHASHSEED values print the same
        snapshot, message and prefix digests.
        """
        outputs = []
        for seed in ("1", "4242"):
            env = {**os.environ, "PYTHONHASHSEED": seed}
            result = subprocess.run(
                [sys.executable, "-c", self.SCRIPT], capture_output=True, text=True, env=env, check=True, cwd=tmp_path
            )
            outputs.append(result.stdout.strip())
        assert outputs[0] == outputs[1]
        assert 3 == len(outputs[0].split())


class TestDiff:
    @given(transcripts(max_turns=3), transcripts(max_turns=3), scratchpads, scratchpads)
    def test_diff_applied_gives_the_other_state(self, mine, theirs, my_notes, their_notes):
        """
        b's messages minus a.diff(b).messages_removed plus messages_added equal
        a's messages as multisets; b's notes with the changes and removals are a's.
        """
        a = WorkingContext(messages=mine, scratchpad=my_notes)
        b = WorkingContext(messages=theirs, scratchpad=their_notes)
        d = a.diff(b)
        assert Counter(a.messages) == Counter(b.messages) - Counter(d.messages_removed) + Counter(d.messages_added)
        rebuilt = {k: v for k, v in b.scratchpad.items() if k not in d.scratchpad_removed}
        rebuilt.update(d.scratchpad_changes)
        assert a.scratchpad == rebuilt

    @given(contexts())
    def test_diff_with_itself_is_empty(self, ctx):
        """
        A state differs from itself in nothing, live or frozen.
        """
        assert not ctx.diff(ctx)
        assert not ctx.diff(ctx.freeze())
        assert ContextDiff() == ctx.diff(ctx.freeze())

    def test_diff_is_a_copy(self):
        """
        A later nested write on the live context does not change a diff
        already taken.
        """
        before = WorkingContext()
        after = before.fork().note("plan", {"steps": ["a"]})
        d = after.diff(before)
        after.scratchpad["plan"]["steps"].append("b")
        assert {"plan": {"steps": ["a"]}} == d.scratchpad_changes

    def test_prefix_change_is_reported(self):
        """
        A context with another prefix reports prefix_changed.
        """
        ctx = WorkingContext()
        assert ctx.with_prefix(PrefixContext(system_prompt="new")).diff(ctx).prefix_changed

    def test_diff_of_a_non_context(self):
        """
        diff() of something that is not a context raises a TypeError naming it.
        """
        with pytest.raises(TypeError, match="got 3"):
            WorkingContext().diff(3)  # type: ignore[arg-type]


class TestCommonPrefix:
    @given(transcripts(max_turns=4), st.data())
    def test_matches_a_linear_scan(self, transcript, data):
        """
        common_prefix_length equals the length of the leading run of the two
        assembled requests with equal digests (what a provider is sent).
        """
        prefix = data.draw(prefixes)
        cut = data.draw(st.integers(0, len(transcript)))
        extra = data.draw(st.lists(messages(), max_size=3))
        a = WorkingContext(prefix=prefix, messages=transcript).freeze()
        b = WorkingContext(prefix=data.draw(st.just(prefix) | prefixes), messages=transcript[:cut] + extra).freeze()
        left, right = a.assembled(), b.assembled()
        expected = 0
        while expected < min(len(left), len(right)) and left[expected].digest() == right[expected].digest():
            expected += 1
        assert expected == common_prefix_length(a, b)
        assert expected == common_prefix_length(b, a)

    def test_growing_transcript_keeps_its_whole_prefix(self):
        """
        Appending keeps the whole previous request as the shared prefix.
        """
        ctx = WorkingContext(prefix=PrefixContext(system_prompt="s")).append(Message("user", "q"))
        first = ctx.freeze()
        second = ctx.append(Message("assistant", "a")).freeze()
        assert 2 == common_prefix_length(first, second)


class TestEqualValuesEncodeEqually:
    @pytest.mark.parametrize("same", [1.0, True], ids=["float", "bool"])
    def test_python_equal_payloads_hash_equal_digest_apart(self, same):
        """
        Arguments that Python counts as equal (1, 1.0, True) give equal
        snapshots with equal hashes, so a snapshot works as a dict key; their
        digests differ, since a digest identifies the exact value a store keeps.
        """
        one = WorkingContext().append(Message("assistant", tool_calls=(ToolCall("c1", "f", {"n": 1}),))).freeze()
        two = WorkingContext().append(Message("assistant", tool_calls=(ToolCall("c1", "f", {"n": same}),))).freeze()
        assert one == two
        assert hash(one) == hash(two)
        assert one.digest() != two.digest()
        assert {one: "cached"}[two] == "cached"

    def test_different_containers_digest_differently(self):
        """
        A set and a list with the same items are different values, with different digests.
        """
        as_set = WorkingContext().note("k", {1, 2}).freeze()
        as_list = WorkingContext().note("k", [1, 2]).freeze()
        assert as_set != as_list
        assert as_set.digest() != as_list.digest()

    def test_lone_surrogates_hash_and_digest(self):
        """
        Text holding half of a surrogate pair (a streamed emoji cut in two)
        still hashes and digests.
        """
        ctx = WorkingContext().append(Message("assistant", "cut \ud83d")).note("n", "\udc00")
        snap = ctx.freeze()
        assert isinstance(hash(snap), int)
        assert 64 == len(snap.digest())
        assert snap.digest() == ctx.digest()

    def test_threads_share_one_chain_safely(self):
        """
        Two threads computing one snapshot's digest at once both get the
        digest a single thread computes.
        """
        import threading  # noqa: PLC0415

        messages = [Message("user", f"m{i}") for i in range(2000)]
        expected = WorkingContext(messages=messages).freeze().digest()
        old = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            snap = WorkingContext(messages=[Message("user", f"m{i}") for i in range(2000)]).freeze()
            results: list[str] = []
            threads = [threading.Thread(target=lambda: results.append(snap.chain_digest())) for _ in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            sys.setswitchinterval(old)
        assert expected == snap.digest()
        assert 1 == len(set(results))

    def test_diff_holds_tuples(self):
        """
        A diff built from lists keeps tuples (a copy), so it hashes and does not follow the list.
        """
        added = [Message("user", "q")]
        diff = ContextDiff(messages_added=added)
        added.append(Message("user", "later"))
        assert (Message("user", "q"),) == diff.messages_added
        assert isinstance(hash(diff), int)


class TestChainsOfForks:
    @given(
        st.lists(
            st.tuples(st.sampled_from(["fork", "append", "digest", "hash", "freeze"]), st.integers(0, 7)), max_size=30
        )
    )
    def test_every_fork_digests_its_own_transcript(self, steps):
        """
        Forks read their parent's chain digests for the messages they share
        and copy them when they grow: whatever the order of forks, appends,
        digests, hashes and snapshots in a family of contexts, each digests
        and hashes as a fresh context with its messages does.
        """
        family = [WorkingContext(messages=[Message("user", "q0"), Message("assistant", "a0")])]
        taken: list[tuple[FrozenContext, tuple[Message, ...]]] = []
        for n, (step, pick) in enumerate(steps):
            ctx = family[pick % len(family)]
            if step == "fork":
                family.append(ctx.fork())
            elif step == "append":
                ctx.append(Message("user", f"m{n}"))
            elif step == "digest":
                ctx.digest()
            elif step == "hash":
                hash(ctx.freeze())
            else:
                taken.append((ctx.freeze(), ctx.messages))
        for ctx in family:
            fresh = WorkingContext(messages=ctx.messages)
            assert fresh.digest() == ctx.digest()
            assert hash(fresh.freeze()) == hash(ctx.freeze())
        for snap, transcript in taken:
            fresh_snap = WorkingContext(messages=transcript).freeze()
            assert fresh_snap.digest() == snap.digest()
            assert hash(fresh_snap) == hash(snap)
            assert fresh_snap.chain_digest(1) == snap.chain_digest(1)


class TestSnapshotNotesAreKeepable:
    @pytest.mark.parametrize(
        "value",
        [float("nan"), float("-inf"), [1, 10**5000], {"a": {"b": float("inf")}}, {float("nan"): 1}],
        ids=["nan", "-inf", "long-int", "nested-inf", "nan-key"],
    )
    def test_a_snapshot_refuses_what_a_context_refuses(self, value):
        """
        FrozenContext(scratchpad=...) refuses a note no context can hold, with the message
        WorkingContext(scratchpad=...) gives, naming the note and the path.
        """
        with pytest.raises(PayloadError) as made:
            WorkingContext(scratchpad={"n": value})
        with pytest.raises(PayloadError) as frozen:
            FrozenContext(scratchpad={"n": value})
        assert isinstance(frozen.value, ValueError)
        assert str(made.value) == str(frozen.value)
        assert str(frozen.value).startswith("note 'n'")

    def test_a_cyclic_note_is_refused(self):
        """
        A note that contains itself is refused by the snapshot too, not frozen forever.
        """
        loop: list[object] = []
        loop.append(loop)
        with pytest.raises(PayloadError, match="note 'n'"):
            FrozenContext(scratchpad={"n": loop})

    @given(scratchpads)
    def test_what_a_context_keeps_a_snapshot_keeps(self, notes):
        """
        Every scratchpad a context accepts builds a snapshot with the same notes and digest.
        """
        ctx = WorkingContext(scratchpad=notes)
        snap = FrozenContext(scratchpad=notes)
        assert snap.scratchpad == ctx.freeze().scratchpad
        assert snap.digest() == ctx.freeze().digest()


class TestFreezeCostsTheSameAtEveryLength:
    def test_freeze_after_an_append_allocates_the_same_at_any_length(self):
        """
        Taking a snapshot after an append allocates the same on a tail of
        100,000 messages as on one of 1,000: the snapshot reads the messages
        and journal entries into tuples only when they are first read.
        """
        import tracemalloc  # noqa: PLC0415

        def peak_of_one_step(n: int) -> int:
            ctx = WorkingContext(messages=[Message("user", f"m{i}") for i in range(n)])
            ctx.journal.apply(range(n))
            ctx.freeze().digest()
            for step in range(3):
                message = Message("user", f"step {step}")
                tracemalloc.start()
                ctx.append(message)
                ctx.journal.record(step)
                ctx.freeze().digest()
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
            return peak

        assert peak_of_one_step(100_000) < 4 * peak_of_one_step(1_000) + 4096

    def test_a_lazy_snapshot_keeps_its_moment_through_every_change(self):
        """
        A snapshot taken before appends, a trim that keeps the start, a trim
        that cuts, a clear, and an apply_locked() rolled back, reads the
        messages and journal of its own moment, equal to an eager copy.
        """
        ctx = WorkingContext(messages=[Message("user", "q0"), Message("assistant", "a0")])
        ctx.journal.record({"n": 0})
        snap = ctx.freeze()
        eager = FrozenContext(prefix=ctx.prefix, messages=ctx.messages, journal=tuple(ctx.journal))
        ctx.append(Message("user", "q1"))
        ctx.journal.record({"n": 1})
        ctx.replace_tail([*ctx.messages, Message("assistant", "a1")])
        ctx.replace_tail(ctx.messages[1:])

        async def fail(c: WorkingContext) -> None:
            c.append(Message("user", "lost"))
            c.journal.record({"n": "lost"})
            msg = "boom"
            raise RuntimeError(msg)

        with pytest.raises(RuntimeError):
            asyncio.run(ctx.apply_locked(fail))
        ctx.journal.record({"n": 2})
        ctx.clear_messages()
        assert eager.messages == snap.messages
        assert eager.journal == snap.journal
        assert eager == snap
        assert eager.digest() == snap.digest()
        assert isinstance(snap.messages, tuple)
        assert snap.messages is snap.messages
