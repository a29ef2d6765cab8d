"""
Tests for workingctx._tail: a trim carrying its index and running sums over, and forks
sharing their parent's message list: a model-based test and a
threaded test showing that a parent and its forks, whatever the order of their appends,
trims, merges and reads, each see exactly their own messages.

A fork holds the parent's list and how many of its items are its own; the
first tail to append at the end of the list appends in place, and any other
keeps its messages aside until it is read. So the interesting orders are the
ones where several tails append to one list before any of them is read, which
is why the machine below reads only when a rule says so, and compares every
context with its model when the run ends.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, multiple, precondition, rule

from tests.strategies import system_heads as heads
from tests.strategies import trim_runs as runs
from workingctx import FrozenContext, Message, ToolCall, WorkingContext, _rekey
from workingctx._tail import Tail
from workingctx.context import TailView
from workingctx.exceptions import MergeError
from workingctx.scopes import Newest, TokenBudget
from workingctx.tokens import ApproxTokenCounter


def test_a_trimmed_context_keeps_its_system_positions():
    """
    The system positions carried over by a trim are those of the new tail.
    """
    ctx = WorkingContext(messages=[Message("system", "s"), Message("user", "q0"), Message("assistant", "a0")])
    ctx.append(Message("system", "late"), Message("user", "q1"), Message("assistant", "a1"))
    view = ctx.tail_view()
    assert view.tail_index.size == 6
    ctx.replace_tail([ctx.messages[0], *ctx.messages[3:]])
    assert ctx.tail_view().system_positions == (0, 1)
    assert ctx._tail._tail_index is not None  # noqa: SLF001  # carried over, not indexed again


@given(runs, heads, st.data())
def test_a_trim_carries_the_running_sums_over(run, head, data):
    """
    Property: a tail replaced by a few system messages and its newest messages
    keeps running sums equal to counting the new tail, without counting it again.
    """
    ctx = WorkingContext(messages=run)
    ctx.count_tokens()
    start = data.draw(st.integers(0, len(run)))
    kept = [*head, *run[start:]]
    ctx.replace_tail(kept)
    running = ctx._tail._running  # noqa: SLF001  # carried over before any read
    if kept and start < len(run):
        assert running is not None
        assert [running.upto(i) for i in range(len(kept) + 1)] == [
            ctx.counter.count(kept[:i]) for i in range(len(kept) + 1)
        ]
    assert ctx.count_tokens() == WorkingContext(messages=kept).count_tokens()


MAX_CONTEXTS = 8

small_messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant"]),
    content=st.text(max_size=6),
    id=st.none() | st.integers(0, 5),
)
"""Cheap messages, some with an explicit id; equal ones are still distinct objects."""


class UndoError(Exception):
    """Raised inside apply_locked() to roll a context back."""


class Model:
    """
    What one context must hold: its messages, its lineage log (every message
    its lineage appended, numbered from the lineage's first append, as a delta
    merge counts them) and, per ancestor, where its delta into that ancestor starts.
    """

    def __init__(self, messages: list[Message], log: list[Message], marks: dict[int, int]) -> None:
        self.messages = messages
        self.log = log
        self.marks = marks

    def appended(self, batch: list[Message]) -> None:
        self.messages.extend(batch)
        self.log.extend(batch)

    def child(self, me: int, messages: list[Message]) -> Model:
        return Model(messages, list(self.log), {**self.marks, me: len(self.log)})


def _without_ids(message: Message) -> Message:
    """
    *message* with its call and result ids blanked: what a re-key keeps.
    """
    return _rekey.rename(message, dict.fromkeys(message.call_ids, "?"), dict.fromkeys(message.result_ids, "?"))


def _same(expected: list[Message], actual: Any) -> None:
    """
    *actual* holds exactly the message objects of *expected*, in order.
    """
    got = list(actual)
    assert len(got) == len(expected), (len(got), len(expected))
    for position, (want, have) in enumerate(zip(expected, got, strict=True)):
        assert want is have, position


class SharedTailMachine(RuleBasedStateMachine):
    """
    Contexts forked from one another, each paired with a :class:`Model`. The
    same message objects go to several contexts (a fork's append then finds
    its own message in a slot another tail took), views and snapshots taken
    along the way must never change, and every read is checked against a
    context built from scratch with the model's messages.
    """

    pool = Bundle("pool")

    def __init__(self) -> None:
        super().__init__()
        self.contexts: list[WorkingContext] = []
        self.models: list[Model] = []
        self.views: list[tuple[TailView, list[Message]]] = []
        self.snapshots: list[tuple[FrozenContext, list[Message]]] = []
        self.calls = 0

    @initialize(target=pool, first=st.lists(small_messages, min_size=2, max_size=6))
    def start(self, first: list[Message]) -> Any:
        self.contexts.append(WorkingContext(messages=first))
        self.models.append(Model(list(first), [], {}))
        return multiple(*first)

    def _pick(self, data: st.DataObject, label: str = "context") -> int:
        return data.draw(st.integers(0, len(self.contexts) - 1), label=label)

    # -- messages ------------------------------------------------------------------

    @rule(target=pool, message=small_messages)
    def new_message(self, message: Message) -> Message:
        return message

    @rule(target=pool, data=st.data(), answered=st.booleans())
    def exchange(self, data: st.DataObject, answered: bool) -> Any:
        """A tool call, with its result or still pending: the cut index and the provider rules see it."""
        i = self._pick(data)
        self.calls += 1
        call = ToolCall(f"c{self.calls}", "lookup", {})
        batch = [Message("assistant", tool_calls=(call,))]
        if answered:
            batch.append(Message("tool", "found", tool_call_id=call.id, name=call.name))
        self.contexts[i].extend(batch)
        self.models[i].appended(batch)
        return multiple(*batch)

    @rule(data=st.data(), message=pool)
    def append(self, data: st.DataObject, message: Message) -> None:
        i = self._pick(data)
        self.contexts[i].append(message)
        self.models[i].appended([message])

    @rule(data=st.data(), batch=st.lists(pool, max_size=4))
    def extend(self, data: st.DataObject, batch: list[Message]) -> None:
        i = self._pick(data)
        self.contexts[i].extend(batch)
        self.models[i].appended(batch)

    @rule(data=st.data(), keep=st.integers(0, 8), suffix=st.booleans())
    def trim(self, data: st.DataObject, keep: int, suffix: bool) -> None:
        """Keep the newest (or the oldest) messages, as a manager's trim does."""
        i = self._pick(data)
        model = self.models[i]
        kept = model.messages[max(0, len(model.messages) - keep) :] if suffix else model.messages[:keep]
        self.contexts[i].replace_tail(kept)
        model.messages[:] = kept

    @rule(data=st.data(), batch=st.lists(pool, min_size=1, max_size=3))
    def replace_keeping_all(self, data: st.DataObject, batch: list[Message]) -> None:
        """A replacement that keeps every message in place appends the rest (and logs it)."""
        i = self._pick(data)
        model = self.models[i]
        self.contexts[i].replace_tail([*self.contexts[i].messages, *batch])
        model.appended(batch)

    @rule(data=st.data())
    def clear(self, data: st.DataObject) -> None:
        i = self._pick(data)
        self.contexts[i].clear_messages()
        self.models[i].messages.clear()

    @rule(data=st.data(), batch=st.lists(pool, max_size=3), trim=st.booleans())
    def rolled_back(self, data: st.DataObject, batch: list[Message], trim: bool) -> None:
        """Work that fails under apply_locked() leaves the context as it was."""
        i = self._pick(data)
        ctx = self.contexts[i]

        def work(target: WorkingContext) -> None:
            target.extend(batch)
            if trim:
                target.replace_tail(target.messages[1:])
            raise UndoError

        with pytest.raises(UndoError):
            asyncio.run(ctx.apply_locked(work))

    # -- forks and merges ----------------------------------------------------------------

    @precondition(lambda self: len(self.contexts) < MAX_CONTEXTS)
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        i = self._pick(data)
        self.contexts.append(self.contexts[i].fork())
        self.models.append(self.models[i].child(i, list(self.models[i].messages)))

    @precondition(lambda self: len(self.contexts) < MAX_CONTEXTS)
    @rule(data=st.data(), newest=st.integers(0, 6))
    def slice_newest(self, data: st.DataObject, newest: int) -> None:
        i = self._pick(data)
        self.contexts.append(self.contexts[i].slice(Newest(newest)))
        kept = self.models[i].messages[-newest:] if newest else []
        self.models.append(self.models[i].child(i, list(kept)))

    @precondition(lambda self: len(self.contexts) >= 2)
    @rule(data=st.data(), delta=st.booleans())
    def merge(self, data: st.DataObject, delta: bool) -> None:
        i = self._pick(data, "into")
        j = self._pick(data, "from")
        if i == j:
            return
        mine, theirs = self.models[i], self.models[j]
        if delta and i not in theirs.marks:
            with pytest.raises(MergeError):
                self.contexts[i].merge(self.contexts[j], mode="delta")
            return
        incoming = theirs.log[theirs.marks[i] :] if delta else list(theirs.messages)
        try:
            self.contexts[i].merge(self.contexts[j], mode="delta" if delta else "concat")
        except MergeError:
            # it would break the tool rules (a result without its call): nothing changed
            _same(mine.messages, self.contexts[i].messages)
            return
        # a call whose id is used here already comes in re-keyed, with its results: a new message
        # equal but for its ids; every other message is the very object merged
        arrived = list(self.contexts[i].messages[len(mine.messages) :])
        assert len(incoming) == len(arrived)
        for want, have in zip(incoming, arrived, strict=True):
            assert want is have or (_without_ids(want) == _without_ids(have) and want != have)
        mine.appended(arrived)
        if delta:
            theirs.marks[i] = len(theirs.log)

    # -- reads ---------------------------------------------------------------------------

    @rule(data=st.data())
    def read_messages(self, data: st.DataObject) -> None:
        i = self._pick(data)
        _same(self.models[i].messages, self.contexts[i].messages)

    @rule(data=st.data())
    def take_view(self, data: st.DataObject) -> None:
        i = self._pick(data)
        view = self.contexts[i].tail_view()
        model = list(self.models[i].messages)
        self.views.append((view, model))
        fresh = WorkingContext(messages=model).tail_view()
        assert fresh.system_positions == view.system_positions

    @rule(data=st.data())
    def take_snapshot(self, data: st.DataObject) -> None:
        """A snapshot reads its messages lazily: they are checked at the end."""
        i = self._pick(data)
        self.snapshots.append((self.contexts[i].freeze(), list(self.models[i].messages)))

    @rule(data=st.data())
    def digest_and_count(self, data: st.DataObject) -> None:
        i = self._pick(data)
        fresh = WorkingContext(messages=self.models[i].messages)
        assert fresh.digest() == self.contexts[i].digest()
        assert fresh.count_tokens() == self.contexts[i].count_tokens()

    @rule(data=st.data(), budget=st.integers(0, 60))
    def slice_by_budget(self, data: st.DataObject, budget: int) -> None:
        """A budget reads the cut index and the running sums of the tail."""
        i = self._pick(data)
        fresh = WorkingContext(messages=self.models[i].messages)
        _same(list(fresh.slice(TokenBudget(budget)).messages), self.contexts[i].slice(TokenBudget(budget)).messages)

    @rule(data=st.data(), budget=st.integers(0, 60))
    def slice_by_budget_again(self, data: st.DataObject, budget: int) -> None:
        """Asked twice, a budget reads the tail's own cut index and running sums."""
        i = self._pick(data)
        fresh = WorkingContext(messages=self.models[i].messages)
        for _ in range(2):
            expected = fresh.slice(TokenBudget(budget, start_on="user")).messages
            _same(list(expected), self.contexts[i].slice(TokenBudget(budget, start_on="user")).messages)

    @rule(data=st.data())
    def pending_calls(self, data: st.DataObject) -> None:
        i = self._pick(data)
        assert WorkingContext(messages=self.models[i].messages).pending_calls == self.contexts[i].pending_calls

    @rule(data=st.data(), wanted=st.integers(0, 6))
    def has_id(self, data: st.DataObject, wanted: int) -> None:
        i = self._pick(data)
        assert self.contexts[i].has_id(wanted) == any(m.id == wanted for m in self.models[i].messages)

    @invariant()
    def sizes_match(self) -> None:
        """size() reads no message, so it is checked after every step without placing any."""
        for ctx, model in zip(self.contexts, self.models, strict=True):
            assert len(model.messages) == ctx.size()

    def teardown(self) -> None:
        for ctx, model in zip(self.contexts, self.models, strict=True):
            _same(model.messages, ctx.messages)
            fresh = WorkingContext(messages=model.messages)
            assert fresh.digest() == ctx.digest()
            built, snapshot = fresh.freeze(), ctx.freeze()  # its journal holds what merges re-keyed
            assert (built.prefix, built.messages, built.scratchpad) == (
                snapshot.prefix,
                snapshot.messages,
                snapshot.scratchpad,
            )
        for view, expected in self.views:
            _same(expected, view)
            _same(expected, view[:])
            _same(expected[::-1], reversed(view))
            if expected:
                assert view[-1] is expected[-1]
        for snapshot, expected in self.snapshots:
            _same(expected, snapshot.messages)
            assert WorkingContext(messages=expected).digest() == snapshot.digest()


TestSharedTailMachine = SharedTailMachine.TestCase
TestSharedTailMachine.settings = settings(max_examples=300, stateful_step_count=50, deadline=None)


# -- threads -------------------------------------------------------------------------------


def _together(*work: Callable[[], None]) -> None:
    """
    Run each function on its own thread, all released at once; re-raise the first failure.
    """
    go = threading.Event()
    failures: list[BaseException] = []

    def guarded(one: Callable[[], None]) -> None:
        go.wait()
        try:
            one()
        except BaseException as error:  # re-raised on the test thread
            failures.append(error)

    threads = [threading.Thread(target=guarded, args=(one,)) for one in work]
    for thread in threads:
        thread.start()
    go.set()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


@pytest.mark.usefixtures("fast_switching")
class TestForksOnThreads:
    def test_children_forked_and_appended_on_many_threads_hold_their_own_messages(self) -> None:
        """
        Eight threads fork one parent over and over while another thread
        appends to the parent and digests it. Each child appends its own
        messages (some of them the very objects other children append),
        sometimes reads and digests between appends (the digest chain is the
        parent's, shared), sometimes forks a grandchild that appends too. Every child
        then holds the parent's messages as they were at some moment, followed
        by exactly its own; the parent holds exactly what it appended.
        """
        start = [Message("user", f"m{i}") for i in range(50)]
        parent = WorkingContext(messages=start)
        shared = [Message("assistant", f"shared {i}") for i in range(3)]
        grown: list[Message] = []
        results: list[tuple[WorkingContext, list[Message]]] = []
        digests: list[tuple[str, tuple[Message, ...]]] = []
        lock = threading.Lock()

        def parent_writer() -> None:
            for step in range(400):
                message = Message("user", f"parent {step}")
                parent.append(message)
                grown.append(message)
                if step % 10 == 0:
                    parent.digest()  # grows the digest chain the forks share

        def forker(worker: int) -> None:
            for round_ in range(60):
                child = parent.fork()
                own: list[Message] = []
                for step in range(1 + round_ % 4):
                    message = (
                        shared[step % 3] if (worker + step) % 3 == 0 else Message("tool", f"{worker}.{round_}.{step}")
                    )
                    child.append(message)
                    own.append(message)
                    if (round_ + step) % 5 == 0:
                        assert child.messages[-len(own) :] == tuple(own)
                    if (round_ + step) % 3 == 0:
                        digests.append((child.digest(), child.messages))
                made = [(child, own)]
                if round_ % 7 == 0:
                    grandchild = child.fork()
                    extra = Message("assistant", f"grandchild {worker}.{round_}")
                    grandchild.append(extra)
                    made.append((grandchild, [*own, extra]))
                with lock:
                    results.extend(made)

        _together(parent_writer, *(functools.partial(forker, worker) for worker in range(8)))

        _same(start + grown, parent.messages)
        everything = start + grown
        assert len(results) > 8 * 60
        for child, own in results:
            got = list(child.messages)
            inherited = len(got) - len(own)
            assert inherited >= len(start)
            _same(everything[:inherited], got[:inherited])
            _same(own, got[inherited:])
            assert WorkingContext(messages=got).digest() == child.digest()
        assert digests
        for digest, messages in digests:  # the digests the forks took on their threads
            assert WorkingContext(messages=messages).digest() == digest

    def test_siblings_appending_at_once_never_see_each_other(self) -> None:
        """
        Many forks of one parent append at the same moment, each to the same
        free end of the shared list: exactly the parent's messages, then each
        fork's own, whichever won the slot.
        """
        parent = WorkingContext(messages=[Message("user", "q")])
        for _ in range(50):
            children = [parent.fork() for _ in range(16)]
            barrier = threading.Barrier(len(children))
            mine = [[Message("assistant", f"{c}.{k}") for k in range(3)] for c in range(len(children))]

            def append_all(child: WorkingContext, messages: list[Message], wall: threading.Barrier = barrier) -> None:
                wall.wait()
                for message in messages:
                    child.append(message)

            threads = [
                threading.Thread(target=append_all, args=(child, own))
                for child, own in zip(children, mine, strict=True)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            for child, own in zip(children, mine, strict=True):
                _same([*parent.messages, *own], child.messages)
        assert 1 == parent.size()


class _Overtaken(Sequence[Message]):
    """
    Messages that, while a tail appends them, let another tail sharing the
    list append first: the race between one tail's check that the end of the
    list is free and its append, made to happen every time.
    """

    def __init__(self, messages: list[Message], rival: Tail, theirs: list[Message]) -> None:
        self._messages = messages
        self._rival = rival
        self._theirs = theirs

    def __len__(self) -> int:
        return len(self._messages)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        return self._messages[index]

    def __iter__(self) -> Iterator[Message]:
        if self._theirs:  # the first time only: the tail's append
            theirs, self._theirs = self._theirs, []
            self._rival.extend(theirs)
        return iter(self._messages)


class TestTheEndOfASharedList:
    @pytest.mark.parametrize("count", [1, 3])
    def test_a_tail_overtaken_between_its_check_and_its_append_keeps_its_own_messages(self, count: int) -> None:
        """
        Two forks share their parent's list; one checks that the end is free,
        and the other appends there before it does. The first finds slots that
        do not hold its messages and keeps them aside: each fork, and the
        parent, hold exactly their own messages.
        """
        first = [Message("user", "q")]
        parent = Tail(list(first), ApproxTokenCounter(), incremental=True)
        mine, theirs = parent.copy(retain=0), parent.copy(retain=0)
        own = [Message("assistant", f"mine {k}") for k in range(count)]
        rival = [Message("assistant", f"theirs {k}") for k in range(count)]

        mine.extend(_Overtaken(own, theirs, rival))

        _same([*first, *own], mine.messages())
        _same([*first, *rival], theirs.messages())
        _same(first, parent.messages())
        assert 1 + count == len(mine) == len(theirs)

    def test_a_tail_overtaken_by_the_same_message_holds_it_once(self) -> None:
        """
        When the other fork appended the very same message object, the slot
        holds this tail's message too: it is taken as its own, and a later
        append by either fork does not reach the other.
        """
        first = [Message("user", "q")]
        parent = Tail(list(first), ApproxTokenCounter(), incremental=True)
        mine, theirs = parent.copy(retain=0), parent.copy(retain=0)
        same = Message("assistant", "the same object")

        mine.extend(_Overtaken([same], theirs, [same]))
        mine.extend([Message("user", "mine")])
        theirs.extend([Message("user", "theirs")])

        assert ["q", "the same object", "mine"] == [m.text() for m in mine.messages()]
        assert ["q", "the same object", "theirs"] == [m.text() for m in theirs.messages()]
        _same(first, parent.messages())

    def test_a_replacement_ending_in_a_message_a_fork_appended_is_still_an_append(self) -> None:
        """
        A fork appends a message at the end of the list it shares with its
        parent; the parent then replaces its tail by its messages plus that
        same message. The replacement keeps every message of the parent, so it
        is an append, and a delta merge brings the message to the grandparent.
        """
        question, answer = Message("user", "q"), Message("assistant", "a")
        root = WorkingContext(messages=[question])
        parent = root.fork()
        parent.fork().append(answer)  # takes the end of the list the parent holds too

        parent.replace_tail([*parent.messages, answer])
        root.merge(parent, mode="delta")

        _same([question, answer], root.messages)

    @pytest.mark.parametrize("length", [3, 300])
    def test_the_cut_index_of_a_shared_list_reads_only_the_tails_own_messages(self, length: int) -> None:
        """
        A fork appends a pending tool call in place at the end of the list its
        parent holds. The parent's cut index (built now, over a few messages
        or many) reads none of it: the parent has no pending call and slices
        as a context built from its own messages does; the fork has the call.
        """
        turns = [Message("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(length)]
        parent = WorkingContext(messages=turns)
        child = parent.fork()
        call = ToolCall("c1", "lookup", {})
        child.append(Message("assistant", tool_calls=(call,)))  # the end of the shared list

        fresh = WorkingContext(messages=turns)
        assert () == parent.pending_calls
        for _ in range(2):  # the second slice reads the index and the running sums
            _same(list(fresh.slice(TokenBudget(40)).messages), parent.slice(TokenBudget(40)).messages)
        assert (call,) == child.pending_calls


class TestPick:
    @given(
        size=st.integers(0, 40),
        grown=st.integers(0, 5),
        data=st.data(),
    )
    def test_pick_is_indexing_one_by_one(self, size, grown, data):
        """
        ``TailView._pick`` of ascending indices gives what indexing one by one
        gives, for runs and scattered picks alike, bounded by the view even
        when the list has grown past it; an index out of the view is refused.
        """
        ctx = WorkingContext(messages=[Message("user", f"m{i}") for i in range(size)])
        view = ctx.tail_view()
        for i in range(grown):
            ctx.append(Message("assistant", f"later {i}"))
        indices = sorted(data.draw(st.sets(st.integers(0, max(size - 1, 0)), max_size=size)))
        picked = view._pick(indices)  # noqa: SLF001
        assert [view[i] for i in indices] == picked
        assert all(a is b for a, b in zip(picked, (view[i] for i in indices), strict=True))
        with pytest.raises(IndexError, match="out of range"):
            view._pick([*indices, size])  # noqa: SLF001
        with pytest.raises(IndexError, match="out of range"):
            view._pick([-1, *indices])  # noqa: SLF001
