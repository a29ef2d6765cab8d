"""
How contexts merge: the tails (concat, union, delta, result or a reducer), the
notes (a scratchpad policy), and the calls a merge re-keys.

:class:`MergeMethods` gives :class:`~workingctx.WorkingContext` its
:meth:`~workingctx.WorkingContext.merge`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast

import attrs

from workingctx import _checks, _rekey
from workingctx._notes import copy_notes, prepare_notes
from workingctx._state import ContextState
from workingctx._tail import TailView, rule_state
from workingctx.exceptions import (
    MergeError,
)
from workingctx.messages import Message, ToolCall, calls_of, check_messages, tool_answers
from workingctx.scopes._exchanges import is_reasoning_only
from workingctx.validity import STRUCTURAL_RULES, RuleState

if TYPE_CHECKING:
    from workingctx.context import WorkingContext

MessageReducer: TypeAlias = Callable[[Sequence[Message], Sequence[Message]], Sequence[Message]]
MergeMode: TypeAlias = Literal["concat", "union", "delta", "result"] | MessageReducer
"""How :meth:`WorkingContext.merge` combines tails: a mode name, or a reducer
``(left, right) -> messages`` such as :func:`workingctx.reducers.add_messages`."""

ValueReducer: TypeAlias = Callable[[Any, Any], Any]
ScratchpadPolicy: TypeAlias = Literal["last_write_wins", "raise"] | ValueReducer | Mapping[str, ValueReducer]
"""How :meth:`WorkingContext.merge` combines scratchpads: last write wins, raise on a
conflicting key, one reducer ``(old, new) -> value`` for every key, or one per key
(keys without a reducer: last write wins)."""

_MISSING = object()


class MergeMethods(ContextState):
    """
    The merge of :class:`~workingctx.WorkingContext` (see :meth:`merge`).
    """

    __slots__ = ()

    def _context(self) -> WorkingContext:
        return cast("WorkingContext", self)  # the class these methods are mixed into

    # -- results for re-keyed calls --------------------------------------------------

    def _routed(self, messages: Sequence[Message]) -> list[Message]:
        """
        *messages* with the results for calls a merge re-keyed while they were
        pending sent to the calls' new names (see :meth:`merge`).
        """
        with self._tail.lock:
            pending = rule_state(self._tail.view()).pending()[1]
            return _rekey.route_results(messages, self._routes, pending)

    def _routed_id(self, call_id: str) -> str:
        """
        The name the pending call a result for *call_id* answers goes by here.
        """
        if not self._routes:
            return call_id
        with self._tail.lock:
            pending = rule_state(self._tail.view()).pending()[1]
            new = _rekey.route_for(self._routes, call_id, pending)
            return call_id if new is None else new

    def _remember_routes(self, pairs: Sequence[tuple[str, str]]) -> None:
        """
        Keep the route of every re-keyed call still pending (and only those).
        """
        if not pairs and not self._routes:
            return
        with self._tail.lock:
            pending = rule_state(self._tail.view()).pending()[1]
            routes = _rekey.kept_routes(self._routes, pending)
            for old, new in pairs:  # the first call re-keyed from an id keeps its route (see _rekey.route_for)
                if new in pending:
                    routes.setdefault(old, new)
            self._routes = routes

    def _rekeyed(self, messages: Sequence[Message]) -> tuple[list[Message], tuple[tuple[str, str], ...]]:
        """
        *messages* as they join the tail: calls whose ids are in use re-keyed,
        results following them, and what was re-keyed. Call under the tail lock.
        """
        engine = _rekey.Rekeyer(rule_state(self._tail.view()), messages, self._routes)
        return [engine.take(message) for message in messages], tuple(engine.pairs)

    def _pending_exchange_start(self, view: TailView, call_id: str) -> int:
        """
        Where the exchange of the pending call *call_id* starts (its reasoning included).
        """
        at, ids = rule_state(view).pending()
        if call_id not in ids:
            known = f"the pending calls are {', '.join(map(repr, ids))}" if ids else "no call is pending"
            msg = (
                f"fork(for_call={call_id!r}): {call_id!r} is not a pending tool call of this context ({known}); "
                "fork for a call the newest assistant message made and that has no result yet"
            )
            raise MergeError(msg, ids=(call_id,))
        if not tool_answers(calls_of(view[at:], (call_id,))[0]):
            msg = (
                f"fork(for_call={call_id!r}): {call_id!r} is a call in a provider's own kind (a Responses computer "
                "or shell call, or MCP approval request), answered by an item of that kind, which a result merge "
                "cannot write; fork() without for_call and append the answer yourself"
            )
            raise MergeError(msg, ids=(call_id,))
        return at - 1 if at > 0 and is_reasoning_only(view[at - 1]) else at

    @property
    def pending_calls(self) -> tuple[ToolCall, ...]:
        """
        The tool calls that wait for their result at the end of the tail, in order.

        Every kind of call that waits for an answer is one: function calls,
        and a provider's own calls (a custom tool call, a Responses computer
        or shell call, an MCP approval request), as :class:`~workingctx.ToolCall`
        values holding their item (see :func:`workingctx.messages.calls_of`).
        They are the calls of the newest assistant message that asked for
        tools (and of the calling turns right before it, which make one
        exchange with it), when only results (or nothing) came after; a call that other
        messages followed without its result is not pending but broken (see
        :func:`workingctx.validity.check_messages`). Costs only what was
        appended since the last look.
        """
        with self._tail.lock:
            view = self._tail.view()
            at, ids = rule_state(view).pending()
            if not ids:
                return ()
            return calls_of(view[at:], ids)

    @property
    def parent_call_id(self) -> str | None:
        """
        The id of the call this context was forked for (``fork(for_call=...)``), or None.
        """
        if self._parent_call is not None:
            return self._parent_call[1]
        return None if self._history is None else self._history.parent_call_id

    def merge(
        self,
        other: WorkingContext,
        mode: MergeMode = "concat",
        *,
        scratchpad: ScratchpadPolicy = "last_write_wins",
        result: str | Message | None = None,
    ) -> WorkingContext:
        """
        Fold another context into this one (fan-in).

        Args:
            other: The context to merge, typically a fork of this one.
            mode: ``"concat"`` appends its messages verbatim; ``"union"`` adds
                only messages not already here (a multiset union: merging the
                same context twice equals merging it once); ``"delta"`` appends
                what *other* did since it forked from this context (or last
                merged into it): the messages it appended or brought in by its
                own merges, in order, whatever it replaced meanwhile (a trim, a
                summary, ``replace_tail``), never one it inherited and never a
                summary a manager wrote; ``"result"`` closes the call *other*
                was forked for (``fork(for_call=...)``) with one tool result,
                the child's final answer (or *result*), and leaves the child's
                transcript out. A callable ``(left, right) -> messages``
                decides instead (see :mod:`workingctx.reducers`).
            scratchpad: How notes combine (see :data:`ScratchpadPolicy`). In
                ``"delta"`` and ``"result"`` modes only notes the fork changed are considered.
            result: With ``mode="result"``: the text of the tool result, or the
                tool message itself; by default the child's final answer (its
                newest assistant message without tool calls).

        The other journal's uncommitted entries are applied here as they are,
        and marked committed there, as is the delta mode's watermark: merging
        the same child twice does not apply its work twice.

        Call ids are local names. An incoming tool call whose id a *different*
        call here already uses (two sub-agents both numbering their calls
        ``call_0``) comes in under a new id, and so does every result that
        answers it: :func:`~workingctx.callids.fresh_call_id` of the old id,
        given every id the merged tail uses (``call_0`` -> ``call_0-2``), so
        the same merge gives the same ids in every process. The same call
        (same id, same call, such as the history a fork shares with its
        parent under ``"union"`` and ``"delta"``) stays one call. The map is
        recorded: a journal entry ``{"kind": "merge", "mode": ..., "rekeyed":
        [[old, new], ...]}`` and, on a recorded context, the merge entry's
        ``rekeyed``. A result that comes later under the old id for a call
        re-keyed while it was pending (``append``, ``extend``, ``append_result``,
        :func:`~workingctx.reducers.add_messages_to`,
        :meth:`~workingctx.reducers.ToolResult.apply_to`, or a later merge)
        answers it under the new id, as long as the old id is not pending
        itself; ``fork(for_call=old id)`` forks for it too.

        >>> from workingctx import Message, ToolCall, WorkingContext
        >>> parent = WorkingContext().append(Message("user", "Compare Oslo and Rome."))
        >>> oslo, rome = parent.fork(), parent.fork()
        >>> _ = oslo.append(Message("assistant", tool_calls=[ToolCall("call_0", "weather", {"city": "Oslo"})]))
        >>> _ = oslo.append(Message("tool", "rain", tool_call_id="call_0"))
        >>> _ = rome.append(Message("assistant", tool_calls=[ToolCall("call_0", "weather", {"city": "Rome"})]))
        >>> _ = parent.merge(oslo, mode="delta").merge(rome, mode="delta")
        >>> [c.id for c in parent.pending_calls], list(parent.journal)[-1]["rekeyed"]
        (['call_0-2'], [['call_0', 'call_0-2']])
        >>> _ = parent.append(Message("tool", "sun", tool_call_id="call_0"))  # Rome's result, under its old id
        >>> parent.messages[-1].tool_call_id
        'call_0-2'

        Raises:
            MergeError: ``"delta"`` with a context that is not a fork of this one,
                ``"result"`` with one not forked for a call of this one (or a
                call no longer pending, or a child without an answer), a merge
                that would leave a result whose call is nowhere, a second result
                for one call, or a call without its result (``ids`` names them),
                an unknown mode, or a conflicting note under ``scratchpad="raise"``.
                Nothing changes.
            PayloadError: A merged note (as a reducer made it, or as it was
                changed in place in *other*) is one no note can keep (see
                :meth:`note`). Nothing changes.
        """
        _checks.check_instance(other, "other", MergeMethods, "a WorkingContext", owner="merge()")
        # Their messages and watermark are read together, then released, so two
        # contexts merging into each other on two threads cannot deadlock.
        if result is not None and mode != "result":
            msg = f"merge(result=...) goes with mode='result' (closing the call a child was forked for), not {mode!r}"
            raise MergeError(msg)
        with other._tail.lock:
            # a delta or a result reads only what the other appended: its tail is not read (nor copied)
            theirs = () if mode in ("delta", "result") else other._tail.messages()
            since = other._marks.get(self._token)
            own = other._tail.appended_since(since) if since is not None and mode in ("delta", "result") else []
            position = other._tail.appended
        with self._tail.lock:
            incoming, whole, base, rekeyed = self._incoming_messages(other, theirs, since, mode, own, result)
            if whole and self._tail.kept(incoming) == len(self._tail):
                # a reducer that kept the tail as it was appends the rest
                incoming, whole = incoming[len(self._tail) :], False
            self._refuse_breaks(incoming, whole=whole)
            notes = self._incoming_notes(other, mode, scratchpad)

            if self._history is not None:
                appended, replacement = (None, incoming) if whole else (incoming, None)
                self._history.merge(self._context(), other, mode, appended, replacement, notes, rekeyed)
            else:
                prepared = prepare_notes(notes.items())  # a note no context can keep is refused here
                # Everything is checked: apply.
                if whole:
                    self._tail.replace(incoming)
                else:
                    self._tail.extend(incoming)
                self._scratchpad._put_all(prepared)
                self._remember_routes(rekeyed)
            self.journal.apply(other.journal.diff())
            if rekeyed:
                name = mode if isinstance(mode, str) else "reducer"
                self.journal.record({"kind": "merge", "mode": name, "rekeyed": [list(pair) for pair in rekeyed]})
        other.journal.mark_committed()
        if base is not None:
            with other._tail.lock:
                other._marks[self._token] = position
                other._tail.retain(min(other._marks.values()))
                other._scratch_base[self._token] = other._scratchpad.fork(child=False)[1]
        return self._context()

    def _refuse_breaks(self, incoming: list[Message], *, whole: bool) -> None:
        """
        Refuse a merge that would break a tool rule the tail does not break
        already: *incoming* is appended, or becomes the *whole* tail.
        """
        view = self._tail.view()
        if not whole:
            if not incoming:
                return
            new = [p for p in rule_state(view).probe(incoming).problems if p.rule in _MERGE_BREAKS]
        else:
            before = _broken(view)
            after = RuleState()
            for message in incoming:
                after.feed(message)
            new = [p for p in after.problems if p.rule in _MERGE_BREAKS and not before.pop((p.rule, p.ids), 0)]
        if new:
            ids = tuple(dict.fromkeys(i for p in new for i in p.ids))
            lines = "; ".join(f"{p.rule} ({', '.join(map(repr, p.ids)) or 'no id'}): {p.message}" for p in new)
            msg = (
                f"merge refused, nothing changed: it would break the provider rules for the tool calls "
                f"{', '.join(map(repr, ids)) or '(none)'}: {lines}"
            )
            raise MergeError(msg, ids=ids)

    def _incoming_messages(
        self,
        other: WorkingContext,
        theirs: tuple[Message, ...],
        since: int | None,
        mode: MergeMode,
        own: list[Message],
        given: str | Message | None,
    ) -> tuple[list[Message], bool, int | None, tuple[tuple[str, str], ...]]:
        """
        The messages a merge brings, whether they are the whole new tail (a
        reducer's result) rather than an append, the delta watermark, and the
        calls re-keyed on the way in (old id, new id).
        """
        if mode == "concat":
            return self._appended(theirs, None)
        if mode == "union":
            return self._union(theirs)
        if mode == "delta":
            if since is None:
                msg = (
                    "merge(mode='delta') needs a fork of this context (or of a fork of it): "
                    f"{other!r} was not forked from {self!r}; use mode='union' to merge an unrelated context"
                )
                raise MergeError(msg)
            return self._appended(own, since)
        if mode == "result":
            return [self._result_message(other, own, given)], False, since, ()
        if callable(mode):
            for reducer, twin in _rekey.REKEYING_REDUCERS.items():
                if reducer is mode:  # add_messages: it re-keys, and says what
                    added, engine = twin(self._tail.messages(), theirs, rule_state(self._tail.view()), self._routes)
                    return added, False, None, tuple(engine.pairs)
            result = list(mode(self._tail.messages(), theirs))
            check_messages(result, f"merge reducer {mode!r} returned")
            return result, True, None, ()
        msg = (
            f"unknown merge mode {mode!r}; use 'concat', 'union', 'delta', 'result' "
            "or a reducer (left, right) -> messages"
        )
        raise MergeError(msg)

    def _appended(
        self, messages: Sequence[Message], since: int | None
    ) -> tuple[list[Message], bool, int | None, tuple[tuple[str, str], ...]]:
        """
        What a ``"concat"`` or ``"delta"`` merge appends: every message, re-keyed.
        """
        added, rekeyed = self._rekeyed(messages)
        return added, False, since, rekeyed

    def _union(self, theirs: Sequence[Message]) -> tuple[list[Message], bool, None, tuple[tuple[str, str], ...]]:
        """
        What a ``"union"`` merge appends: the messages not here already, by
        value, as a multiset, an exchange at a time.

        An exchange (a call and the results right after it) found here whole,
        under its own ids or under the ones an earlier merge gave it, adds
        nothing. One whose call is here and still pending adds the results
        not here yet. Any other comes in whole, its calls re-keyed when their
        ids are in use: the same call answered differently is another call.
        """
        view = self._tail.view()
        state = rule_state(view)
        present = Counter(self._tail.messages())
        engine = _rekey.Rekeyer(state, theirs, self._routes)
        given = self._given_names()
        added: list[Message] = []
        position, size = 0, len(theirs)
        while position < size:
            head = theirs[position]
            end = _rekey.exchange_end(theirs, position)
            if end == position:  # a message that asks for no call
                position += 1
                if present[head] > 0:
                    present[head] -= 1
                else:
                    added.append(engine.take(head))
                continue
            unit = list(theirs[position:end])
            position = end
            match = self._union_match(unit, view, state, present, given)
            if match is None:
                added.extend(engine.take(message) for message in unit)
                continue
            names, here = match
            engine.alias({call_id: names.get(call_id, call_id) for call_id in head.call_ids})
            present[here[0]] -= 1
            for message, found in zip(unit[1:], here[1:], strict=True):
                if present[found] > 0:
                    present[found] -= 1
                else:
                    added.append(engine.take(message))
        return added, False, None, tuple(engine.pairs)

    @staticmethod
    def _union_match(
        unit: list[Message],
        view: TailView,
        state: RuleState,
        present: Counter[Message],
        given: Callable[[_rekey.Pair], bool],
    ) -> tuple[dict[str, str], list[Message]] | None:
        """
        Where the exchange *unit* is here already: the names its calls go by
        here and its messages under them. A copy that holds it whole comes
        first; else the pending call at the end, whose results are still
        coming; else None (it is another exchange).
        """
        at, waiting = state.pending()
        partial = None
        for names in _rekey.matchings(unit[0], view, state, lambda message: present[message] > 0, given):
            here = [_rekey.rename(message, names, names) for message in unit]
            if all(present[message] >= count for message, count in Counter(here).items()):
                return names, here
            first = here[0].call_ids[0]
            if partial is None and waiting and state.asked_at(first) == at:
                partial = names, here
        return partial

    def _given_names(self) -> Callable[[_rekey.Pair], bool]:
        """
        Whether a merge re-keyed one id to another here, as the merge entries
        of the journal record it (this context's merges, and those of the
        contexts merged into it); the journal is read when first asked.
        """
        found: set[_rekey.Pair] | None = None

        def given(pair: _rekey.Pair) -> bool:
            nonlocal found
            if found is None:
                found = set()
                for entry in self.journal:
                    if isinstance(entry, Mapping) and entry.get("kind") == "merge":
                        rekeyed = entry.get("rekeyed")
                        found.update(
                            (item[0], item[1])
                            for item in (rekeyed if isinstance(rekeyed, Sequence) else ())
                            if isinstance(item, Sequence) and len(item) == 2
                        )
            return pair in found

        return given

    def _result_message(self, other: WorkingContext, own: list[Message], result: str | Message | None) -> Message:
        """
        The one tool result a ``"result"`` merge of *other* appends.
        """
        forked = other._parent_call
        if forked is None or forked[0] is not self._token:
            msg = (
                f"merge(mode='result') takes a context forked from this one with fork(for_call=...); {other!r} "
                "was not; use mode='delta' to bring back a plain fork's messages"
            )
            raise MergeError(msg)
        call_id = forked[1]
        view = self._tail.view()
        at, ids = rule_state(view).pending()
        if call_id not in ids:
            msg = (
                f"merge(mode='result'): the call {call_id!r} is no longer pending here (it has its result "
                "already, or other messages came after it); a sub-agent's result is merged once, right after the call"
            )
            raise MergeError(msg, ids=(call_id,))
        name = calls_of(view[at:], (call_id,))[0].name
        if result is None:
            answers = [m for m in own if m.role == "assistant" and not m.call_ids and m.text().strip()]
            if not answers:
                msg = (
                    f"merge(mode='result'): the sub-agent for {call_id!r} has no final answer (an assistant "
                    "message without tool calls); append one, or pass result='...'"
                )
                raise MergeError(msg, ids=(call_id,))
            return Message("tool", answers[-1].text(), tool_call_id=call_id, name=name)
        if isinstance(result, str):
            return Message("tool", result, tool_call_id=call_id, name=name)
        if not isinstance(result, Message):
            raise _checks.wrong_type(result, "result", "a str or a tool Message", label="merge(result=...)")
        if result.role != "tool" or (result.tool_call_id or call_id) != call_id:
            msg = (
                f"merge(result=...) must be a tool message answering {call_id!r}, got a {result.role!r} message "
                f"answering {result.tool_call_id!r}"
            )
            raise MergeError(msg, ids=(call_id,))
        if result.tool_call_id is None:
            return attrs.evolve(result, tool_call_id=call_id)
        return result

    def _incoming_notes(self, other: WorkingContext, mode: MergeMode, policy: ScratchpadPolicy) -> dict[str, Any]:
        if not (policy in ("last_write_wins", "raise") or isinstance(policy, Mapping) or callable(policy)):
            msg = f"unknown scratchpad policy {policy!r}; use 'last_write_wins', 'raise', a reducer or a mapping"
            raise MergeError(msg)
        theirs = other._scratchpad.plain()
        if mode in ("delta", "result"):
            before = other._scratch_base.get(self._token, {})
            theirs = {k: v for k, v in theirs.items() if before.get(k, _MISSING) != v}
        mine = self._scratchpad
        notes: dict[str, Any] = {}
        for key, new in copy_notes(theirs)[0].items():
            if key not in mine or policy == "last_write_wins":
                notes[key] = new
                continue
            old = mine.get(key)
            if policy == "raise":
                if old != new:
                    msg = (
                        f"scratchpad conflict on {key!r}: this context has {old!r}, the merged one {new!r}; "
                        "pass scratchpad='last_write_wins' or a reducer to decide"
                    )
                    raise MergeError(msg)
            elif isinstance(policy, Mapping):
                reducer = policy.get(key)
                notes[key] = new if reducer is None else reducer(old, new)
            else:
                notes[key] = policy(old, new)  # a reducer: checked on entry
        return notes


_MERGE_BREAKS = STRUCTURAL_RULES - {"result-without-id"}
"""The tool rules a merge may not break: two calls with one id, a result whose
call is nowhere (or elsewhere, or answered already), a call left without its result.
A tool message that names no call links to nothing and is let through."""


def _broken(view: TailView) -> Counter[tuple[str, tuple[str, ...]]]:
    """
    The tool-rule problems the tail has, by rule and ids.
    """
    return Counter((p.rule, p.ids) for p in rule_state(view).problems if p.rule in _MERGE_BREAKS)
