"""
Re-keying tool calls on merge: the engine every merge mode and ``add_messages`` share.

A call id names "the result that answers this call" inside one transcript
(see :mod:`workingctx.callids`). When messages from another transcript come in
and one of their calls uses an id a *different* call here already uses, that
call and every result answering it get a new name from
:func:`~workingctx.callids.fresh_call_id`. The new name depends only on the
messages, so the same merge gives the same ids in every process.

A result that comes in after the merge for a call that was re-keyed while it
was still pending (its result had not come yet) is sent to the new name: the
caller keeps the routes (old id -> new id) of the re-keyed calls that are
pending, and :func:`route_results` applies them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import TypeAlias

import attrs

from workingctx.callids import SEPARATOR, fresh_call_id
from workingctx.messages import Message, ProviderBlock, RemoteToolCallBlock, ToolCallBlock, ToolResultBlock
from workingctx.validity import RuleState

__all__ = [
    "REKEYING_REDUCERS",
    "Pair",
    "Rekeyer",
    "derived_from",
    "derived_routes",
    "exchange_end",
    "kept_routes",
    "matchings",
    "rebuilt_routes",
    "rename",
    "route_for",
    "route_results",
]

Pair: TypeAlias = tuple[str, str]
"""An old call id and the new one it was given."""


def _call_ids(message: Message) -> list[str]:
    """
    The ids *message* asks for, in order, without repeats.
    """
    return list(message.call_ids) if message.tool_calls or message.content.__class__ is not str else []


def _result_ids(message: Message) -> tuple[str, ...]:
    return message.result_ids if message.tool_call_id is not None or message.content.__class__ is not str else ()


def rename(message: Message, calls: Mapping[str, str], results: Mapping[str, str]) -> Message:
    """
    *message* with the ids of its calls renamed by *calls* and the ids its
    results answer renamed by *results* (ids not named stay); the same object
    when nothing changes.

    Calls are renamed in ``tool_calls``, in tool-call blocks and in provider
    blocks that ask for an answer; results in ``tool_call_id``, in tool-result
    blocks and in provider blocks that answer a call.
    """
    if not calls and not results:
        return message
    changes: dict[str, object] = {}
    if calls and any(call.id in calls for call in message.tool_calls):
        changes["tool_calls"] = tuple(
            attrs.evolve(call, id=calls[call.id]) if call.id in calls else call for call in message.tool_calls
        )
    own = message.tool_call_id
    if own is not None and own in results:
        changes["tool_call_id"] = results[own]
    content = message.content
    if content.__class__ is not str:
        blocks = []
        changed = False
        for block in content:
            if isinstance(block, ToolCallBlock | RemoteToolCallBlock) and block.id in calls:
                block = attrs.evolve(block, id=calls[block.id])  # noqa: PLW2901  # the renamed block replaces it
                changed = True
            elif isinstance(block, ToolResultBlock) and block.call_id in results:
                block = attrs.evolve(block, call_id=results[block.call_id])  # noqa: PLW2901  # as above
                changed = True
            elif isinstance(block, ProviderBlock) and (block.asks in calls or block.answers in results):
                asked = block.asks
                block = block.renamed(calls[asked] if asked in calls else results[block.answers])  # type: ignore[index]  # noqa: PLW2901
                changed = True
            blocks.append(block)
        if changed:
            changes["content"] = tuple(blocks)
    return attrs.evolve(message, **changes) if changes else message  # type: ignore[arg-type]  # field values


def derived_from(new: str, old: str) -> bool:
    """
    Whether *new* is a name :func:`~workingctx.callids.fresh_call_id` gives *old* (``call_0-2`` for ``call_0``).
    """
    return _given_for(new) == old


def derived_routes(state: RuleState) -> dict[str, str]:
    """
    The routes a plain message list implies, which keeps no map: each pending
    call whose name was given to another id (``call_0-2``) takes the results
    for that id (``call_0``) while that id itself is not pending (checked
    when a result comes, see :func:`route_for`: ``call_0`` may wait too, and
    have its result first).
    """
    _, pending = state.pending()
    routes: dict[str, str] = {}
    for new in pending:
        old = _given_for(new)
        if old is not None:
            routes.setdefault(old, new)
    return routes


def _given_for(new: str) -> str | None:
    """
    The id *new* would be the name :func:`~workingctx.callids.fresh_call_id`
    gives (``call_0`` for ``call_0-2``), or None for a name it never gives.
    """
    head, separator, number = new.rpartition(SEPARATOR)
    return head if separator and head and number.isdigit() else None


def rebuilt_routes(messages: Sequence[Message], state: Callable[[], RuleState]) -> dict[str, str]:
    """
    The routes (see :func:`derived_routes`) of a context rebuilt from
    *messages* (a snapshot, a store, a list), which come without the map its
    merges kept. Only the calls of the trailing exchange can be pending:
    *state* (the messages' rule state) is asked for only when one of them goes
    by a name :func:`~workingctx.callids.fresh_call_id` gives.
    """
    position = len(messages)
    while position and not messages[position - 1].call_ids:  # the results at the end
        last = messages[position - 1]
        if not (last.result_ids or last.role == "tool"):
            return {}
        position -= 1
    while position:  # the calling turns, one right after another, that opened them
        message = messages[position - 1]
        calls = message.call_ids
        if not calls:
            break
        if any(map(_given_for, calls)):
            return derived_routes(state())
        if message.role != "assistant" or message.result_ids:
            break
        position -= 1
    return {}


def route_for(routes: Mapping[str, str], old: str, waiting: Collection[str]) -> str | None:
    """
    The pending call (of *waiting*, in order) a result for *old* answers
    through *routes*: the call its route names while that call waits, then the
    next waiting call given a name for *old* (a merge re-keyed several calls
    from one id while they waited: each result takes the first of them still
    waiting, as a rebuilt context's :func:`derived_routes` do). None when *old*
    has no route or waits itself.
    """
    target = routes.get(old)
    if target is None:
        return None
    if old in waiting:
        return None
    if target in waiting:
        return target
    return next((new for new in waiting if derived_from(new, old)), None)


def kept_routes(routes: Mapping[str, str], pending: Collection[str]) -> dict[str, str]:
    """
    The *routes* that still lead to a *pending* call (in order), each moved to
    the call :func:`route_for` sends its results to.
    """
    kept: dict[str, str] = {}
    for old, target in routes.items():
        if target in pending:
            kept[old] = target
        elif (new := route_for(routes, old, pending)) is not None:
            kept[old] = new
    return kept


def route_results(
    messages: Sequence[Message], routes: MutableMapping[str, str], pending: Collection[str]
) -> list[Message]:
    """
    *messages* with the results for re-keyed pending calls sent to their new
    names: in the leading run of messages that only answer calls, a result
    for an id that is not pending, whose route (old id -> new id) names a
    pending call, answers that call (see :func:`route_for`). Every route whose
    call is no longer pending is dropped from *routes* (its result came, or the
    call was left behind), or moved to the next call given a name for its id.
    """
    kept = kept_routes(routes, pending)
    if kept != routes:
        routes.clear()
        routes.update(kept)
    if not routes:
        return list(messages)
    waiting = dict.fromkeys(pending)  # in order: a route moves to the first call still waiting
    out: list[Message] = []
    for position, message in enumerate(messages):
        answered = _result_ids(message)
        if not answered or _call_ids(message):
            out.extend(messages[position:])
            break
        sent: dict[str, str] = {}
        for old in answered:
            new = route_for(routes, old, waiting)
            if new is not None:
                sent[old] = new
        for old in answered:
            waiting.pop(sent.get(old, old), None)
        out.append(rename(message, {}, sent))
    return out


class _Taken:
    """
    The names in use: *base* (the receiving transcript's), what the merge
    added so far, and the names the incoming messages use (a new name never
    takes one; gathered on the first new name, since most merges need none).
    """

    __slots__ = ("_avoid", "_incoming", "added", "base")

    def __init__(self, base: Container[str], incoming: Iterable[Message]) -> None:
        self.base = base
        self.added: set[str] = set()
        self._incoming = incoming
        self._avoid: set[str] | None = None

    def used(self, call_id: str) -> bool:
        return call_id in self.added or call_id in self.base

    def __contains__(self, call_id: object) -> bool:
        avoid = self._avoid
        if avoid is None:
            avoid = self._avoid = set()
            for message in self._incoming:
                avoid.update(_call_ids(message))
                avoid.update(_result_ids(message))
        return call_id in self.added or call_id in avoid or call_id in self.base


class Rekeyer:
    """
    Re-keys incoming messages, in order, against the transcript they join.

    Args:
        state: The receiving transcript's rule state (which calls it asked,
            answered, and which are pending at its end).
        incoming: Every message that may come in (their ids are never given
            as new names; read when the first new name is needed).
        routes: The routes of re-keyed pending calls (old id -> new id) of the
            receiving transcript; results at the head of the incoming messages
            follow them.

    Attributes:
        pairs: Every re-key made, ``(old id, new id)``, in order.
        routes: A copy of *routes* (the messages taken never change the caller's).
    """

    __slots__ = ("_leading", "_pending", "_taken", "current", "pairs", "routes")

    def __init__(self, state: RuleState, incoming: Sequence[Message], routes: Mapping[str, str]) -> None:
        self._taken = _Taken(_Known(state), incoming)
        self._pending = dict.fromkeys(state.pending()[1])  # in order (see route_for)
        self.routes = dict(routes)
        self._leading = True
        # incoming id -> its name here, for the newest incoming call with that id
        self.current: dict[str, str] = {}
        self.pairs: list[Pair] = []

    def alias(self, names: Mapping[str, str]) -> None:
        """
        Incoming calls found here already (the same calls, under *names*): their results follow them there.
        """
        self.current.update(names)
        self._leading = False

    def take(self, message: Message) -> Message:
        """
        *message* as it joins: its calls renamed when their ids are in use,
        its results renamed as the calls they answer were.
        """
        calls = _call_ids(message)
        answered = _result_ids(message)
        if not calls and not answered:
            self._leading = False
            return message
        if self._leading and answered and not calls:
            # results for calls of the receiving transcript: a re-keyed pending call takes its old id's
            routed = route_results([message], self.routes, self._pending)[0]
            for answered_id in _result_ids(routed):
                self._pending.pop(answered_id, None)
            return routed
        self._leading = False
        renamed: dict[str, str] = {}
        taken = self._taken
        for call_id in calls:
            if taken.used(call_id):
                new = fresh_call_id(call_id, taken)
                renamed[call_id] = new
                self.pairs.append((call_id, new))
            else:
                new = call_id
            taken.added.add(new)
        out = self._results(message, renamed)
        for call_id in calls:
            self.current[call_id] = renamed.get(call_id, call_id)
        return out

    def _results(self, message: Message, renamed: Mapping[str, str]) -> Message:
        sent: dict[str, str] = {}
        for answered in _result_ids(message):
            new = renamed.get(answered)  # a block answering a call of its own message
            if new is None:
                new = self.current.get(answered, answered)
            if new != answered:
                sent[answered] = new
        return rename(message, renamed, sent)


class _Known:
    """
    The call ids a transcript uses, read from its rule state (every call
    answered was asked, so the calls asked are all of them).
    """

    __slots__ = ("_state",)

    def __init__(self, state: RuleState) -> None:
        self._state = state

    def __contains__(self, call_id: object) -> bool:
        return isinstance(call_id, str) and self._state.asked_at(call_id) is not None


def matchings(
    head: Message,
    messages: Sequence[Message],
    state: RuleState,
    available: Callable[[Message], bool],
    given: Callable[[Pair], bool],
) -> Iterator[dict[str, str]]:
    """
    Every way the incoming call message *head* is here already: ``{}`` when
    it is here as it is, ``{old: new, ...}`` for each copy whose calls an
    earlier merge gave new names, each ``(old, new)`` a pair *given* says a
    merge made (copies spoken for by *available* are skipped). A call here
    that only looks re-keyed (a transcript may name its own calls
    ``call_0-2``) is another call.
    """
    if available(head):
        yield {}
    ids = _call_ids(head)
    if not ids:
        return
    first = ids[0]
    number = 1  # the first call may have kept its name while another was re-keyed
    while (index := state.asked_at(first if number == 1 else f"{first}{SEPARATOR}{number}")) is not None:
        number += 1
        found = messages[index]
        theirs = _call_ids(found)
        if len(theirs) != len(ids):
            continue
        names = {old: new for old, new in zip(ids, theirs, strict=True) if old != new}
        if names and all(derived_from(new, old) and given((old, new)) for old, new in names.items()):
            renamed = rename(head, names, names)
            if renamed == found and available(found):
                yield names


REKEYING_REDUCERS: dict[object, Callable[..., tuple[list[Message], Rekeyer]]] = {}
"""Message reducers that re-key (``add_messages``), each mapped to a twin
``(left, right, left's rule state, routes) -> (new messages, engine)`` whose
engine's ``pairs`` say what it re-keyed, so a merge through the reducer can
record it."""


def exchange_end(messages: Sequence[Message], start: int) -> int:
    """
    Where the exchange that starts at *start* ends: after the message asking
    for calls there and the results right after it that answer only those
    calls. *start* itself when that message asks for no call.
    """
    calls = _call_ids(messages[start])
    if not calls:
        return start
    asked = set(calls)
    end = start + 1
    while end < len(messages):
        message = messages[end]
        answered = _result_ids(message)
        if not answered or _call_ids(message) or not asked.issuperset(answered):
            break
        end += 1
    return end
