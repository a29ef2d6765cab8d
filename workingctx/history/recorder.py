"""
The recorder of a live context: it turns each change into entries, and entries back into a context.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

import attrs

from workingctx import _checks
from workingctx.exceptions import (
    ArgumentTypeError,
    FinishedError,
    HistoryError,
    PendingCallsError,
    PricingError,
)
from workingctx.frozen import FrozenDict, thaw
from workingctx.history.codec import HISTORY_ROOT, entry_text, history_step
from workingctx.history.entries import (
    NOTICE_PREFIX,
    SUMMARY_NAME,
    Change,
    Content,
    ContextChange,
    Entry,
    EntryKind,
    ErrorInfo,
    Finished,
    Forked,
    Kept,
    Merged,
    NotesChange,
    Outcome,
    Piece,
    Started,
    check_note_key,
    freeze_json,
)
from workingctx.messages import Message, ToolResultBlock, Usage, calls_of, tool_answers
from workingctx.prefix import PrefixContext
from workingctx.pricing import cost
from workingctx.snapshot import FrozenContext

if TYPE_CHECKING:
    from workingctx.checkpoint import Checkpoint
    from workingctx.context import WorkingContext


__all__ = [
    "NotesEdit",
    "Recorder",
    "build_tail",
    "replay",
    "tail_pieces",
]


def tail_pieces(old: Sequence[Message], new: Sequence[Message]) -> tuple[Piece, ...]:
    """
    *new* written as runs of *old* (the same objects first, equal ones next)
    and the messages *old* does not hold.
    """
    by_identity: dict[int, int] = {}
    by_value: dict[Message, int] = {}
    for position, message in enumerate(old):
        by_identity.setdefault(id(message), position)
        by_value.setdefault(message, position)
    pieces: list[Piece] = []
    start = stop = -1
    for message in new:
        if stop >= 0 and stop < len(old) and (old[stop] is message or old[stop] == message):
            stop += 1
            continue
        if stop >= 0:
            pieces.append(Kept(start, stop))
            start = stop = -1
        found = by_identity.get(id(message))
        if found is None or old[found] is not message:
            found = by_value.get(message)
        if found is None:
            pieces.append(message)
        else:
            start, stop = found, found + 1
    if stop >= 0:
        pieces.append(Kept(start, stop))
    return tuple(pieces)


def build_tail(old: Sequence[Message], pieces: Iterable[Piece]) -> list[Message]:
    """
    The tail *pieces* describe, from *old*.

    Raises:
        HistoryError: A run reaches past the end of *old*.
    """
    out: list[Message] = []
    for piece in pieces:
        if isinstance(piece, Kept):
            if piece.stop > len(old):
                msg = f"Kept({piece.start}, {piece.stop}) reaches past the {len(old)} messages of the tail"
                raise HistoryError(msg)
            out.extend(old[piece.start : piece.stop])
        else:
            out.append(piece)
    return out


def _pending_ids(ctx: WorkingContext) -> tuple[str, ...]:
    """
    The ids of the calls waiting for their result at the end of *ctx*'s tail:
    those of :attr:`WorkingContext.pending_calls`, the one notion of a pending
    call (a call other messages already followed without its result is broken,
    not pending), a provider's own calls included (a custom tool call, a
    Responses computer or shell call: see ``ProviderBlock.asks``).
    """
    view = ctx._tail.view()  # the tail alone: no prefix to render
    if not view:
        return ()
    last = view[-1]
    if last.role != "tool" and not last.call_ids and not last.result_ids:
        # A message that neither asks for tools nor answers them closes every
        # call before it: nothing is pending, and the rules need not catch up
        # with the tail (the common case: a user message after a reply).
        return ()
    index = view.tail_index  # the rules' state, kept by the tail's index (a context's view always has one)
    if index is None:  # pragma: no cover
        return tuple(call.id for call in ctx.pending_calls)
    at, ids = index.walk.pending()
    if not ids:
        return ()
    exchange = view[at:]  # the calling turns (one after another, joined) and the results after them
    return tuple(call.id for call in calls_of(exchange, ids))


def _minus(a: Usage, b: Usage) -> Usage:
    return Usage(*(max(x - y, 0) for x, y in zip(attrs.astuple(a), attrs.astuple(b), strict=True)))


def model_of(message: Message) -> str:
    """
    The model a reply names in ``metadata["model"]`` (what adapters read from
    the provider), or ``""``.
    """
    name = message.metadata.get("model")
    return name if isinstance(name, str) else ""


def _add_usage(totals: dict[str, Usage], model: str, usage: Usage) -> None:
    totals[model] = totals.get(model, Usage()) + usage


def _kind_of(message: Message) -> EntryKind:
    if message.role == "user":
        return "notice" if isinstance(message.content, str) and message.content.startswith(NOTICE_PREFIX) else "user"
    if message.role == "assistant":
        return "reply"
    if message.role == "tool":
        return "tool_result"
    return "system"


def _outcome_of(message: Message) -> Outcome:
    if not isinstance(message.content, str) and any(
        isinstance(block, ToolResultBlock) and (block.is_error or block.status == "failed") for block in message.content
    ):
        return "error"
    return "done"


def _now() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    """
    A random context id: 32 hex digits.
    """
    return uuid.uuid4().hex


# -- the recorder ------------------------------------------------------------------------------


class Recorder:
    """
    The history of one live context, and what is derived from it.

    A recorded :class:`~workingctx.WorkingContext` calls it from each mutator.
    Every change is made into an :class:`Entry` first (checked, nothing changed
    yet), then applied by :meth:`apply`, the one function replay uses too: so a
    replayed history gives the context it was recorded from. Each change holds
    the context's tail lock, so entries and state change together.
    """

    __slots__ = (
        "_chain",
        "_chain_lock",
        "_history",
        "by_model",
        "captured",
        "entries",
        "final_answer",
        "finished",
        "id",
        "parent_call_id",
        "parent_id",
        "reported",
        "turn",
        "waiting",
    )

    def __init__(self, context_id: str) -> None:
        self.entries: list[Entry] = []
        self._history: tuple[Entry, ...] | None = ()
        self.id = context_id
        self.parent_id: str | None = None
        self.parent_call_id: str | None = None
        self.turn = 0
        self.finished = False
        self.final_answer: Any = None
        # user messages appended while calls were pending, in order
        self.waiting: list[Message] = []
        # usage of every recorded reply (merged ones included) by model name
        self.by_model: dict[str, Usage] = {}
        # token of a context this one merges into -> usage already brought there
        self.reported: dict[object, dict[str, Usage]] = {}
        # checkpoint id -> how many entries the history had when it was captured
        self.captured: dict[str, int] = {}
        # chain digests of the first entries (entries never change: each is hashed once)
        self._chain: list[str] = []
        self._chain_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<Recorder id={self.id!r} entries={len(self.entries)} turn={self.turn} finished={self.finished}>"

    # -- reading ---------------------------------------------------------------------------

    @property
    def history(self) -> tuple[Entry, ...]:
        """
        Every entry, oldest first (a tuple cached until the next entry).
        """
        history = self._history
        if history is None or len(history) != len(self.entries):
            history = self._history = tuple(self.entries)
        return history

    @property
    def usage(self) -> Usage:
        """
        The usage of every recorded reply, merged ones included.
        """
        return sum(self.by_model.values(), Usage())

    def cost(self, model: str | None) -> Decimal:
        """
        What every recorded reply cost, each priced for the model it names, else for *model*.
        """

        total = Decimal(0)
        for name, usage in sorted(self.by_model.items()):
            if not name and model is None:
                msg = (
                    "some recorded replies name no model in metadata['model'] "
                    f"({usage.total_tokens} tokens); pass the model to cost(model=...)"
                )
                raise PricingError(msg)
            total += cost(name or str(model), usage)
        return total

    def chain(self) -> list[str]:
        """
        The chain digest after each entry: ``chain()[i]`` identifies entries 0 to *i*, in order.
        """
        with self._chain_lock:
            chain = self._chain
            entries = self.entries
            if len(chain) < len(entries):
                previous = chain[-1] if chain else HISTORY_ROOT
                for entry in entries[len(chain) :]:
                    previous = history_step(previous, entry_text(entry))
                    chain.append(previous)
            return list(chain)

    def answer(self, messages: Sequence[Message]) -> Any:
        """
        The answer given to ``finish``, else the text of the newest reply without tool calls, else None.
        """
        if self.final_answer is not None:
            return self.final_answer
        for message in reversed(messages):
            if message.role == "assistant" and not message.call_ids:
                return message.text()
        return None

    # -- the one way entries change a context -----------------------------------------------

    def _entry(self, kind: EntryKind, content: Content, outcome: Outcome | None = None) -> Entry:
        turn = self.turn + (1 if kind == "reply" else 0)
        return Entry(kind, content, turn, _now(), outcome)

    def commit(self, ctx: WorkingContext, entries: Sequence[Entry]) -> None:
        """
        Apply *entries* (already checked) to *ctx* and add them to the history.
        """
        for entry in entries:
            self.apply(ctx, entry)
            self.entries.append(entry)

    def apply(self, ctx: WorkingContext, entry: Entry) -> None:
        """
        Change *ctx* and the derived values as *entry* says.

        Raises:
            HistoryError: The entry cannot apply to this context (a damaged history).
        """
        kind = entry.kind
        content = entry.content
        if self.finished and isinstance(content, Message | Merged):  # as _open() refuses them live
            msg = f"a {kind} entry after the finish entry: a finished context takes no message or merge until a restore"
            raise HistoryError(msg)
        if isinstance(content, Message):
            self._place(ctx, [content])
            if kind == "reply":
                self.turn += 1
                if content.usage is not None:
                    _add_usage(self.by_model, model_of(content), content.usage)
        elif isinstance(content, NotesChange):
            ctx._set_notes(content.set, content.removed)
        elif isinstance(content, ContextChange):
            if content.prefix is not None:
                ctx._set_prefix(content.prefix)
            self._retail(ctx, build_tail(ctx.messages, content.tail))
            if content.change == "restore":
                ctx._set_notes(content.notes or FrozenDict(), (), replace=True)
                self.finished = content.finished
                self.final_answer = content.answer
        elif isinstance(content, Merged):
            self._retail(ctx, build_tail(ctx.messages, content.tail))
            ctx._remember_routes(content.rekeyed)
            ctx._set_notes(content.notes, ())
            for name, usage in content.models:
                _add_usage(self.by_model, name, usage)
        elif isinstance(content, Forked):
            self.parent_id = content.parent
            self.parent_call_id = content.call
            self.id = content.id
        elif isinstance(content, Finished):
            self.finished = True
            self.final_answer = content.answer
        elif isinstance(content, Started):
            msg = "a history holds one start entry, first"
            raise HistoryError(msg)
        # ErrorInfo changes nothing but the history.

    def _place(self, ctx: WorkingContext, messages: Sequence[Message]) -> None:
        """
        Append messages; a user message waits while calls are pending (or
        other user messages wait), and goes in once no call is pending any more.

        A user message that carries tool results is a result, not a new turn:
        it goes in at once.
        """
        for message in messages:
            if message.role == "user" and not message.result_ids and (self.waiting or _pending_ids(ctx)):
                self.waiting.append(message)
                continue
            ctx._tail.extend([message])
            self._release(ctx)

    def _release(self, ctx: WorkingContext) -> None:
        """
        Place the waiting user messages once no call is pending.
        """
        if self.waiting and not _pending_ids(ctx):
            waiting, self.waiting = self.waiting, []
            self._place(ctx, waiting)

    def _retail(self, ctx: WorkingContext, tail: list[Message]) -> None:
        ctx._replace(tail)
        self._release(ctx)

    # -- mutators (called by WorkingContext) ---------------------------------------------------

    def _open(self, what: str) -> None:
        if self.finished:
            msg = (
                f"{what} on a finished context ({self.id!r}): finish() ended it; "
                "restore() to an entry before the finish to go on"
            )
            raise FinishedError(msg)

    def append(self, ctx: WorkingContext, messages: Sequence[Message], outcome: Outcome | None = None) -> None:
        """
        Record and apply one entry per message.
        """
        with ctx._tail.lock:
            self._open("append()")
            entries = []
            for message in messages:
                _check_payloads(message)
                kind = _kind_of(message)
                result = (outcome or _outcome_of(message)) if kind == "tool_result" else None
                entries.append(self._entry(kind, message, result))
            self.commit(ctx, entries)

    def close_pending(self, ctx: WorkingContext, outcome: Outcome, text: str | None) -> None:
        """
        Give every pending call a result with *outcome*.
        """
        with ctx._tail.lock:
            self._open("close_pending()")
            words = text if text is not None else f"({outcome})"
            # a provider's own call (but a custom tool call) is answered in its own kind, never by a
            # tool message: it stays pending
            results = [Message.tool(words, call_id=call.id) for call in ctx.pending_calls if tool_answers(call)]
            self.commit(ctx, [self._entry("tool_result", m, outcome) for m in results])

    def replace(self, ctx: WorkingContext, items: Sequence[Message], change: Change | None = None) -> None:
        """
        Record and apply a new tail (a trim, a summary, any replacement, a clear).

        Raises:
            PendingCallsError: A summary or a clear while calls are pending.
        """
        with ctx._tail.lock:
            old = ctx.messages
            pieces = tail_pieces(old, items)
            if change is None:
                if pieces == (Kept(0, len(old)),) or (not pieces and not old):
                    return
                added = [piece for piece in pieces if isinstance(piece, Message)]
                if any(m.role == "system" and m.name == SUMMARY_NAME for m in added):
                    change = "summary"
                else:
                    change = "replace_tail" if added else "trim"
            if change in ("summary", "clear") and _pending_ids(ctx):
                what = f"a {change}"
                raise _pending_error(ctx, what)
            for piece in pieces:
                if isinstance(piece, Message):
                    _check_payloads(piece)
            self.commit(ctx, [self._entry("context_change", ContextChange(change, pieces))])

    def set_notes(self, ctx: WorkingContext, notes: Mapping[str, Any], removed: Sequence[str] = ()) -> None:
        """
        Record and apply notes set (checked to be JSON, frozen) and removed.
        """
        with ctx._tail.lock:
            frozen = {check_note_key(key): freeze_json(value, key) for key, value in notes.items()}
            if not frozen and not removed:
                return
            self.commit(ctx, [self._entry("notes", NotesChange(FrozenDict(frozen), tuple(removed)))])

    def merge(
        self,
        ctx: WorkingContext,
        other: WorkingContext,
        mode: object,
        appended: Sequence[Message] | None,
        replacement: Sequence[Message] | None,
        notes: Mapping[str, Any],
        rekeyed: Sequence[tuple[str, str]] = (),
    ) -> None:
        """
        Record and apply a merge whose messages, notes and re-keyed calls *ctx* has worked out.
        """
        with ctx._tail.lock:
            self._open("merge()")
            old = ctx.messages
            if replacement is None:
                pieces: tuple[Piece, ...] = (*((Kept(0, len(old)),) if old else ()), *(appended or ()))
            else:
                pieces = tail_pieces(old, replacement)
            for piece in pieces:
                if isinstance(piece, Message):
                    _check_payloads(piece)
            frozen = FrozenDict({key: freeze_json(value, key) for key, value in notes.items()})
            theirs = other._history
            models: dict[str, Usage] = {}
            if theirs is not None:
                before = theirs.reported.get(ctx._token, {})
                for model, usage in theirs.by_model.items():
                    models[model] = _minus(usage, before.get(model, Usage()))
                child: str | None = theirs.id
            else:
                for piece in pieces:
                    if isinstance(piece, Message) and piece.role == "assistant" and piece.usage is not None:
                        _add_usage(models, model_of(piece), piece.usage)
                child = None
            brought = tuple((model, usage) for model, usage in sorted(models.items()) if usage != Usage())
            name = mode if isinstance(mode, str) else "reducer"
            total = sum((usage for _, usage in brought), Usage())
            self.commit(
                ctx, [self._entry("merge", Merged(name, pieces, frozen, total, child, brought, tuple(rekeyed)))]
            )
            if theirs is not None:
                theirs.reported[ctx._token] = dict(theirs.by_model)

    def fork(self, parent: WorkingContext, child: WorkingContext, call: str | None = None) -> Recorder:
        """
        The child's recorder: this history, then a fork entry naming the parent.
        """
        with parent._tail.lock:
            copy = Recorder(self.id)
            copy.entries = list(self.entries)
            for name in ("parent_id", "parent_call_id", "turn", "finished", "final_answer"):
                setattr(copy, name, getattr(self, name))
            copy.by_model = dict(self.by_model)
            copy.waiting = list(self.waiting)
            copy.captured = dict(self.captured)
            copy._chain = list(self._chain)
            copy.reported = {parent._token: dict(self.by_model)}
            copy.commit(child, [copy._entry("fork", Forked(self.id, new_id(), call))])
            return copy

    def derived(
        self, ctx: WorkingContext, change: Change, before: Sequence[Message], prefix: PrefixContext | None
    ) -> None:
        """
        Record a change *ctx* has already made (a slice's tail, a new prefix).
        """
        with ctx._tail.lock:
            entry = self._entry("context_change", ContextChange(change, tail_pieces(before, ctx.messages), prefix))
            self.entries.append(entry)
            # what apply() does after a new tail, so a replay agrees
            self._release(ctx)

    def finish(self, ctx: WorkingContext, answer: Any) -> None:
        """
        Record and apply a finish.
        """
        with ctx._tail.lock:
            self.commit(ctx, [self._entry("finish", Finished(freeze_json(answer, "answer")))])

    def error(self, ctx: WorkingContext, exc: BaseException | str, during: str | None) -> None:
        """
        Record an error (nothing else changes).
        """
        if isinstance(exc, BaseException):
            info = ErrorInfo(type(exc).__name__, str(exc), during)
        elif isinstance(exc, str):
            info = ErrorInfo("error", exc, during)
        else:
            raise _checks.wrong_type(exc, "exc", "an exception or a str", label="record_error()", verb="takes")
        if during is not None and not isinstance(during, str):
            raise _checks.wrong_type(during, "during", "a str or None")
        with ctx._tail.lock:
            self.commit(ctx, [self._entry("error", info)])

    def restore(self, ctx: WorkingContext, to: int | str | Checkpoint) -> None:
        """
        Go back to the state after entry *to* by adding a restore entry.
        """
        with ctx._tail.lock:
            if self.waiting or _pending_ids(ctx):
                what = "restore()"
                raise _pending_error(ctx, what)
            index = self._resolve(ctx, to)
            target = replay(self.entries[: index + 1], ctx_type=type(ctx))
            found = target._history
            assert found is not None  # noqa: S101  # replay always records
            pending = _pending_ids(target)
            if pending or found.waiting:
                msg = (
                    f"entry {index} is in the middle of a turn (calls {', '.join(map(repr, pending))} "
                    "were pending there); restore to an entry between turns"
                )
                raise HistoryError(msg)
            prefix = target.prefix if target.prefix != ctx.prefix else None
            change = ContextChange(
                "restore",
                tail_pieces(ctx.messages, target.messages),
                prefix,
                index,
                FrozenDict(target._scratchpad),
                found.finished,
                found.final_answer,
            )
            self.commit(ctx, [self._entry("context_change", change)])

    def _resolve(self, ctx: WorkingContext, to: object) -> int:
        size = len(self.entries)
        if isinstance(to, int) and not isinstance(to, bool):
            index = to + size if to < 0 else to
            if not 0 <= index < size:
                msg = f"restore(to={to!r}): the history has entries 0 to {size - 1}"
                raise HistoryError(msg)
            return index
        if isinstance(to, str):
            if to not in self.captured:
                msg = (
                    f"restore(to={to!r}): no checkpoint with that id was captured from this context; "
                    "pass an entry index or the Checkpoint itself"
                )
                raise HistoryError(msg)
            return self.captured[to] - 1
        if isinstance(getattr(to, "snapshot", None), FrozenContext) and isinstance(getattr(to, "id", None), str):
            # a Checkpoint (the checkpoint module sits above the context it captures)
            to = cast("Checkpoint", to)
            if to.id in self.captured:
                return self.captured[to.id] - 1
            wanted = to.snapshot.digest()
            matches = [i for i, digest in enumerate(_digests(self.entries, type(ctx))) if digest == wanted]
            if not matches:
                msg = f"restore(to=<checkpoint {to.id!r}>): no entry of this history has that checkpoint's state"
                raise HistoryError(msg)
            return matches[-1]
        expected = "an entry index, a checkpoint id or a Checkpoint"
        raise _checks.wrong_type(to, "to", expected, label="restore()", verb="takes")


def _pending_error(ctx: WorkingContext, what: str) -> PendingCallsError:
    calls = _pending_ids(ctx)
    msg = (
        f"{what} is refused while tool calls are pending ({', '.join(map(repr, calls))}): "
        "append their results first, or close them with close_pending()"
    )
    return PendingCallsError(msg, calls=calls)


def _check_payloads(message: Message) -> None:
    """
    Refuse a message whose payloads (metadata, tool arguments) are not JSON: a history is JSON.
    """
    if message.metadata:
        freeze_json(message.metadata, "metadata")
    for call in message.tool_calls:
        if call.arguments:
            freeze_json(call.arguments, f"arguments of call {call.id}")


def _digests(entries: Sequence[Entry], ctx_type: type[WorkingContext]) -> Iterator[str]:
    """
    The digest of the context after each entry, in one pass.
    """
    ctx, recorder = _started(entries, ctx_type, None, None)
    yield ctx.digest()
    for entry in entries[1:]:
        recorder.apply(ctx, entry)
        yield ctx.digest()


def _started(
    entries: Sequence[Entry], ctx_type: type[WorkingContext], counter: Any, limit: int | None
) -> tuple[WorkingContext, Recorder]:
    if not entries:
        msg = "replay() needs a history with at least its start entry"
        raise HistoryError(msg)
    first = entries[0]
    if not isinstance(first, Entry) or first.kind != "start":
        msg = f"a history begins with a start entry, got {first!r}"
        raise HistoryError(msg)
    start = first.content
    assert isinstance(start, Started)  # noqa: S101  # Entry checks content against kind
    ctx = ctx_type(prefix=start.prefix, messages=start.messages, counter=counter, limit=limit)
    recorder = Recorder(start.id)
    ctx._set_notes(start.notes, ())
    recorder.entries.append(first)
    ctx._history = recorder
    return ctx, recorder


def replay(
    history: Iterable[Entry],
    *,
    ctx_type: type[WorkingContext],
    counter: Any = None,
    limit: int | None = None,
) -> WorkingContext:
    """
    The context *history* describes (see :meth:`WorkingContext.replay`).
    """
    if isinstance(history, Entry | str | bytes | Mapping):
        expected = "a sequence of entries (ctx.history)"
        raise _checks.wrong_type(history, "history", expected, label="replay()", verb="takes")
    entries = list(history)
    for position, entry in enumerate(entries):
        if not isinstance(entry, Entry):
            msg = f"history[{position}] is {_checks.described(entry)}, not an Entry"
            raise ArgumentTypeError(msg, argument=f"history[{position}]", value=entry, expected="an Entry")
    ctx, recorder = _started(entries, ctx_type, counter, limit)
    for position in range(1, len(entries)):
        entry = entries[position]
        try:
            recorder.apply(ctx, entry)
        except HistoryError as exc:
            msg = f"history[{position}] ({entry.kind}) does not apply: {exc}"
            raise HistoryError(msg) from None
        recorder.entries.append(entry)
    return ctx


def start(ctx: WorkingContext, context_id: str | None) -> Recorder:
    """
    The recorder of a context built with ``record=True``: its start entry.
    """
    started = Started(
        new_id() if context_id is None else context_id,
        ctx.prefix,
        ctx.messages,
        {check_note_key(key): freeze_json(value, key) for key, value in ctx._scratchpad.items()},
    )
    recorder = Recorder(started.id)
    ctx._set_notes(started.notes, (), replace=True)
    recorder.entries.append(Entry("start", started, 0, _now()))
    return recorder


# -- editing notes ------------------------------------------------------------------------


_MISSING = object()


class NotesEdit:
    """
    ``with ctx.edit_notes() as notes:``: a plain, writable copy of the notes,
    committed as one change when the block ends normally.

    Nothing is committed when the block raises. Values must be JSON data
    (a ``TypeError`` names the key and the type, and nothing is committed).
    Two threads editing at once take turns; coroutines take turns with
    ``async with ctx.edit_notes() as notes:``.
    """

    __slots__ = ("_before", "_ctx", "_held", "_lock", "notes")

    def __init__(self, ctx: WorkingContext, lock: threading.Lock) -> None:
        self._ctx = ctx
        self._lock = lock
        self._held = False
        self._before: dict[str, Any] = {}
        self.notes: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"<NotesEdit open={self._held} notes={sorted(self.notes)!r}>"

    def _begin(self) -> dict[str, Any]:
        self._held = True
        self._before = self._ctx._scratchpad.raw()
        self.notes = thaw(self._before)
        return self.notes

    timeout = 60.0
    """Seconds a ``with`` block waits for another editor before giving up."""

    def __enter__(self) -> dict[str, Any]:
        if not self._lock.acquire(timeout=self.timeout):
            msg = (
                f"edit_notes() waited {self.timeout:g} s for another editor; in coroutines use "
                "`async with ctx.edit_notes() as notes:` so editors take turns without blocking the loop"
            )
            raise HistoryError(msg)
        return self._begin()

    async def __aenter__(self) -> dict[str, Any]:
        delay = 0.0005
        while not self._lock.acquire(blocking=False):
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.02)
        return self._begin()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        try:
            if kind is None:
                self._commit()
        finally:
            self._held = False
            self._lock.release()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.__exit__(kind, exc, traceback)

    def _commit(self) -> None:
        notes = self.notes
        changed: dict[str, Any] = {}
        for key, value in notes.items():
            check_note_key(key)
            frozen = freeze_json(value, key)
            if self._before.get(key, _MISSING) != frozen or key not in self._before:
                changed[key] = frozen
        removed = tuple(key for key in self._before if key not in notes)
        ctx = self._ctx
        if ctx._history is not None:
            ctx._history.set_notes(ctx, changed, removed)
        elif changed or removed:
            ctx._set_notes(thaw(changed), removed)
