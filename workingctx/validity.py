"""
The rules a provider applies to a conversation, as one checker.

:func:`check_messages` walks a message sequence once and returns every
:class:`Problem` it finds: a tool result whose call is nowhere, a call left
without its results, two calls with one id, a conversation that does not start
with a user turn, ... Context managers guarantee their output against these
rules, merges refuse to break them, and the provider adapters check a request
with them before writing it.

>>> from workingctx import Message, ToolCall
>>> from workingctx.validity import check_messages
>>> msgs = [
...     Message("system", "Be brief."),
...     Message("assistant", "Hello!"),
...     Message("user", "Is it raining?"),
...     Message("tool", "rain", tool_call_id="c9"),
... ]
>>> for problem in check_messages(msgs):
...     print(problem.index, problem.rule, problem.ids)
1 first-not-user ()
3 orphan-result ('c9',)
>>> [p.rule for p in check_messages(msgs, provider="openai")]
['orphan-result']

The rules, by id (:data:`RULES` holds each one's description and the providers
that apply it):

====================== ========================================================= ==================
rule                   what is wrong                                             providers
====================== ========================================================= ==================
``empty``              no message at all                                         all
``orphan-result``      a result answers a call id no earlier message asked for   all
``misplaced-result``   a result's call is earlier, but other messages sit        all
                       between them (results follow their call directly)
``duplicate-result``   a second result for a call that already has one           all
``result-without-id``  a tool message that names no call                         all
``dangling-call``      a call without its result, with messages after it         all
``pending-at-end``     the conversation ends with unanswered calls               all
                       (not reported with ``allow_pending=True``)
``duplicate-call-id``  two tool calls share one id while either waits for its    all
                       result (in one message, or an id asked again before its
                       result came): no result could say which call it answers
``reused-call-id``     a call reuses the id of an earlier call that was          anthropic, gemini
                       answered already (a new exchange); adapters for formats
                       that need unique ids re-key it when writing
``first-not-user``     the first message after the system messages is not a     gemini
                       user message
``no-user-message``    no user message at all                                    anthropic, gemini
``empty-content``      a user or assistant message with no content and no calls  anthropic, gemini
``call-not-assistant`` a message of another role than assistant holds a tool    all
                       call (only the model asks for calls)
====================== ========================================================= ==================

The adapters check what they write with more rules of the wire formats
themselves: ``id-format``, ``cache-breakpoints``, ``result-not-first``,
``trailing-whitespace``, ``media-type``, ``image-size``, ``image-dimensions``,
``media-count``, ``request-size``, ``thinking-not-first`` and ``prefill``
(Anthropic), ``blank-text`` (Anthropic, Gemini), ``name-format`` (OpenAI,
Anthropic), ``id-length``,
``empty-calls`` and ``text-length`` (OpenAI), ``invalid-base64``,
``call-after-model`` and ``split-responses`` (Gemini), ``result-kind``,
``duplicate-item-id`` and ``unstored-reasoning`` (Responses),
``unresolved-media``, ``unsendable``, ``continued-result``,
``unparsable-arguments`` and ``unencodable-text``; :data:`RULES` describes
each and names the providers that enforce it.

``provider=None`` applies every rule. A dropped system message is not in the
list: it is a property of a transformation (what went in, what came out), not
of one sequence; every manager keeps every system message by construction.
"""

from __future__ import annotations

import operator
from collections import ChainMap
from collections.abc import MutableMapping, Sequence
from typing import TYPE_CHECKING, Literal, TypeAlias

import attrs

from workingctx import _checks
from workingctx.exceptions import ArgumentTypeError, ProviderError
from workingctx.messages import (
    Message,
    ProviderBlock,
    ReasoningBlock,
    TextBlock,
    answered_id,
    asked_id,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "PROVIDERS",
    "RULES",
    "STRUCTURAL_RULES",
    "Problem",
    "Provider",
    "Rule",
    "check_messages",
    "require_valid",
]

_ROLE = operator.attrgetter("role")

LEFT_OUT_CALL = "_left_out_call"
"""The key of the block a format puts where a provider's own call it leaves out
stood (``ProviderBlock(provider, {LEFT_OUT_CALL: True})``, see the adapters'
``without_provider_calls``): the assistant message holding it still continues
the calls right before it, as it would with the call, since Anthropic and
Gemini join consecutive turns of a role."""


def _left_out(message: Message) -> bool:
    """
    Whether *message* holds the block standing for a call its format leaves out (see :data:`LEFT_OUT_CALL`).
    """
    content = message.content
    return content.__class__ is not str and any(
        isinstance(block, ProviderBlock) and LEFT_OUT_CALL in block.data for block in content
    )


Provider: TypeAlias = Literal["openai", "anthropic", "gemini"]
"""The providers whose rules :func:`check_messages` knows."""

PROVIDERS: tuple[Provider, ...] = ("openai", "anthropic", "gemini")

Rule: TypeAlias = Literal[
    "empty",
    "orphan-result",
    "misplaced-result",
    "duplicate-result",
    "result-without-id",
    "dangling-call",
    "pending-at-end",
    "duplicate-call-id",
    "reused-call-id",
    "first-not-user",
    "no-user-message",
    "empty-content",
    "call-not-assistant",
    "id-format",
    "cache-breakpoints",
    "id-length",
    "name-format",
    "result-not-first",
    "unresolved-media",
    "blank-text",
    "trailing-whitespace",
    "unsendable",
    "continued-result",
    "unparsable-arguments",
    "unencodable-text",
    "invalid-base64",
    "result-kind",
    "call-after-model",
    "split-responses",
    "media-type",
    "image-size",
    "image-dimensions",
    "media-count",
    "empty-calls",
    "duplicate-item-id",
    "text-length",
    "thinking-not-first",
    "prefill",
    "request-size",
    "unstored-reasoning",
]
"""The closed set of rule ids a :class:`Problem` can carry."""

_ALL: frozenset[str] = frozenset(PROVIDERS)
_TURNS: frozenset[str] = frozenset({"anthropic", "gemini"})

RULES: dict[str, tuple[str, frozenset[str]]] = {
    "empty": ("the conversation holds no message", _ALL),
    "orphan-result": ("a tool result answers a call id that no earlier message asked for", _ALL),
    "misplaced-result": ("a tool result is separated from its call by other messages", _ALL),
    "duplicate-result": ("a call is answered more than once", _ALL),
    "result-without-id": ("a tool message names no call", _ALL),
    "dangling-call": ("a tool call has no result, and messages follow it", _ALL),
    "pending-at-end": ("the conversation ends with tool calls that have no result yet", _ALL),
    "duplicate-call-id": ("two tool calls share one id while either waits for its result", _ALL),
    "reused-call-id": ("a call reuses the id of an earlier, answered call (a new exchange)", _TURNS),
    "first-not-user": ("the first message after the system messages is not a user message", frozenset({"gemini"})),
    "no-user-message": ("the conversation holds no user message", _TURNS),
    "empty-content": ("a user or assistant message has no content and asks for no tool", _TURNS),
    "call-not-assistant": ("a message of another role than assistant holds a tool call", _ALL),
    "id-format": ("a tool-call id has characters the provider refuses (wire format)", frozenset({"anthropic"})),
    "cache-breakpoints": (
        "more blocks carry a cache breakpoint than the provider takes in one request (wire format)",
        frozenset({"anthropic"}),
    ),
    "id-length": (
        "a tool-call id is longer than OpenAI takes: 40 characters in Chat, 64 in Responses (wire format)",
        frozenset({"openai"}),
    ),
    "name-format": (
        "a speaker's or a called function's name has characters the provider refuses (wire format)",
        frozenset({"openai", "anthropic"}),
    ),
    "result-not-first": ("tool results are not first in their user turn (wire format)", frozenset({"anthropic"})),
    "unresolved-media": ("a media-store reference whose bytes were not resolved (adapters)", _ALL),
    "blank-text": (
        "a text block is empty, or for Anthropic only whitespace (wire format)",
        frozenset({"anthropic", "gemini"}),
    ),
    "trailing-whitespace": (
        "the final assistant message (a prefill) ends with whitespace (wire format)",
        frozenset({"anthropic"}),
    ),
    "unsendable": ("a block the wire format has no place for, which writing would lose (adapters)", _ALL),
    "continued-result": ("a result answering a call of a stored Responses response (adapters)", _ALL),
    "unparsable-arguments": (
        "a tool call's arguments text is not a JSON object (cut off by max_tokens) where the wire takes an object",
        _TURNS,
    ),
    "unencodable-text": (
        "text holds a lone surrogate (cut inside an emoji), which UTF-8 cannot encode (adapters)",
        _ALL,
    ),
    "invalid-base64": ("inline data whose text is not base64 (wire format)", frozenset({"gemini"})),
    "result-kind": (
        "a tool result answers a provider's own call that only an output item of its kind answers (wire format)",
        frozenset({"openai"}),
    ),
    "call-after-model": (
        "a call turn follows another model turn, not a user or function response turn (wire format)",
        frozenset({"gemini"}),
    ),
    "split-responses": (
        "the responses to one call turn are spread over several contents (wire format)",
        frozenset({"gemini"}),
    ),
    "media-type": (
        "an inline image is labelled with another type than its bytes are (wire format)",
        frozenset({"anthropic"}),
    ),
    "image-size": ("an inline image is larger than the provider takes (wire format)", frozenset({"anthropic"})),
    "image-dimensions": (
        "an image has a side longer than the provider takes, in a request of its number of images (wire format)",
        frozenset({"anthropic"}),
    ),
    "media-count": ("a request holds more images than the provider takes (wire format)", frozenset({"anthropic"})),
    "text-length": (
        "a text (content, tool output, arguments) is longer than the provider takes in one string (wire format)",
        frozenset({"openai"}),
    ),
    "thinking-not-first": (
        "a request with thinking on ends in a tool-use loop whose turn does not start with thinking (request body)",
        frozenset({"anthropic"}),
    ),
    "request-size": (
        "a request's inline images and documents are longer than the largest body the provider takes (wire format)",
        frozenset({"anthropic"}),
    ),
    "prefill": (
        "a request ends in an assistant turn (a prefill) on a model that takes none (request body)",
        frozenset({"anthropic"}),
    ),
    "unstored-reasoning": (
        "a request with store false sends a reasoning item by its id, without its encrypted content (request body)",
        frozenset({"openai"}),
    ),
    "empty-calls": ("an assistant message has an empty list of tool calls (wire format)", frozenset({"openai"})),
    "duplicate-item-id": ("two input items hold one id (wire format)", frozenset({"openai"})),
}
"""Each rule id, with what it means and the providers that enforce it."""

STRUCTURAL_RULES: frozenset[str] = frozenset(
    {
        "orphan-result",
        "misplaced-result",
        "duplicate-result",
        "result-without-id",
        "dangling-call",
        "duplicate-call-id",
    }
)
"""The rules about tool exchanges: a transcript breaking one of them is repaired
by dropping whole exchanges, which is what context managers do."""


@attrs.frozen
class Problem:
    """
    One thing a provider would reject in a conversation.

    Attributes:
        index: The position in the checked sequence; ``None`` when the problem
            concerns the whole conversation (``empty``, ``no-user-message``).
        rule: The rule id (see :data:`Rule`).
        message: What is wrong at that position and how to fix it.
        ids: The tool-call ids involved, in order.
    """

    index: int | None
    rule: Rule
    message: str
    ids: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = "conversation" if self.index is None else f"message {self.index}"
        return f"{where}: {self.rule}: {self.message}"


def _raw_call_ids(message: Message) -> list[str]:
    """
    Every call id *message* asks for, repeats included (``Message.call_ids`` drops repeats).
    """
    ids = [call.id for call in message.tool_calls]
    content = message.content
    if content.__class__ is not str:
        ids.extend(filter(None, map(asked_id, content)))
    return ids


def _raw_result_ids(message: Message) -> list[str]:
    """
    Every call id *message* answers, repeats included (a tool message's own
    ``tool_call_id`` and a result block for that same call are one result, as
    ``Message.tool_message`` builds them).
    """
    content = message.content
    blocks = [] if content.__class__ is str else list(filter(None, map(answered_id, content)))
    own = message.tool_call_id
    return blocks if own is None or own in blocks else [own, *blocks]


def _is_empty(message: Message) -> bool:
    """
    Whether a user or assistant message carries nothing a provider would accept as content.
    """
    if message.role not in ("user", "assistant") or message.tool_calls:
        return False
    content = message.content
    if isinstance(content, str):
        return not content.strip()
    for block in content:
        if isinstance(block, TextBlock):
            if block.text.strip():
                return False
        elif not isinstance(block, ReasoningBlock) or block.summary.strip():
            return False
    return True


def _ids(ids: Iterable[str]) -> str:
    return ", ".join(repr(i) for i in ids)


_STALE_SLACK = 64
"""
How many calls past twice those it kept when it last dropped the others a
rebased rules' state stores before it drops those of dropped messages.
"""


class RuleState:
    """
    The checker's state, fed one message at a time.

    Problems found while walking are kept in order; the ones that depend on
    where the conversation ends (pending calls, the first turn) are computed
    by :meth:`finish`. A context's tail index keeps one of these, so that the
    validity of a growing transcript costs one step per appended message, and
    :meth:`probe` says what appending more would break without changing it.

    Attributes:
        size: How many messages were fed.
        problems: The problems found so far that no later message can undo.
        broken: How many of them break a tool rule (:data:`STRUCTURAL_RULES`).
        first: The index of the first non-system message (-1: none yet).
        first_role: Its role.
        users: How many user messages were fed.
        open: The ids of the calls of the message at ``open_at`` still
            waiting for a result, with nothing but results after that message.

    The calls asked and answered are kept by *stored* position: message
    ``i`` is stored at ``i + _origin``, and only entries stored at
    ``_low`` or later are the walk's (:meth:`asked_at`, :meth:`calls`). A
    trim told by :meth:`rebased` copies both dicts as they are (a C-level
    copy) and raises ``_low`` past the messages it drops, where rebuilding
    them would move every call kept; it drops the entries below ``_low``
    when the calls stored have more than doubled since they last were
    (by :data:`_STALE_SLACK` more), so each costs a constant share.
    """

    __slots__ = (
        "_answered",
        "_asked",
        "_low",
        "_origin",
        "_pruned",
        "broken",
        "calls_at",
        "first",
        "first_role",
        "open",
        "open_at",
        "problems",
        "size",
        "users",
    )

    def __init__(self) -> None:
        self.size = 0
        # call id -> stored position of the (latest) message asking for it
        self._asked: MutableMapping[str, int] = {}
        # call id -> stored position of the ask its result answered
        self._answered: MutableMapping[str, int] = {}
        self._origin = 0  # message i is stored at i + _origin
        self._low = 0  # entries stored before it are not the walk's (a trim dropped their messages)
        self._pruned = 0  # how many entries _asked held when last rid of those below _low
        self.open: list[str] = []
        self.open_at = -1
        self.calls_at = -1  # the index of the latest message, when it was an assistant's calls
        self.problems: list[Problem] = []
        self.broken = 0
        self.first = -1
        self.first_role = ""
        self.users = 0

    def _report(self, problem: Problem) -> None:
        self.problems.append(problem)
        if problem.rule in STRUCTURAL_RULES:
            self.broken += 1

    def probe(self, messages: Iterable[Message]) -> RuleState:
        """
        The state after *messages* were fed, leaving this one as it is; its
        :attr:`problems` are only those the new messages bring.
        """
        state: RuleState = RuleState.__new__(RuleState)
        state.size = self.size
        state._asked = ChainMap({}, self._asked)
        state._answered = ChainMap({}, self._answered)
        state._origin, state._low, state._pruned = self._origin, self._low, self._pruned
        state.open = list(self.open)
        state.open_at = self.open_at
        state.calls_at = self.calls_at
        state.problems = []
        state.broken = 0
        state.first = self.first
        state.first_role = self.first_role
        state.users = self.users
        for message in messages:
            state.feed(message)
        return state

    def rebased(
        self, head: Sequence[Message], rest: Sequence[Message], start: int, dropped: Sequence[Message] | None = None
    ) -> RuleState | None:
        """
        The state of a walk over *head* and then *rest*, the messages this
        state walked from *start* on, told without walking *rest* again; None
        when it cannot be told so (then walk them).

        It can when this walk found no problem, *head* holds only system
        messages that neither call nor answer, calls still waiting at the end
        were made from *start* on, and (the caller's promise) no result from
        *start* on answers a call made before it: then every exchange of
        *rest* is whole in *rest*, the new walk finds no problem either, and
        each position only moves by ``len(head) - start``. *dropped*, the
        messages this state walked before *start*, when given, tells how many
        user messages *rest* holds without a pass over it (a trim drops a few).
        A state :meth:`probe` made holds only the problems its messages
        brought, so it says nothing of those before: it is not rebased.
        """
        if self.problems or start > self.size or len(rest) != self.size - start:
            return None
        if self.open and self.open_at < start:
            return None
        state = RuleState()
        for message in head:
            if message.role != "system" or _raw_call_ids(message) or _raw_result_ids(message):
                return None
            state.feed(message)
        shift = state.size - start
        state.size = self.size + shift
        # The calls as they are stored: the messages before start are no longer the walk's.
        low = max(self._low, start + self._origin)
        asked, answered, pruned = self._asked, self._answered, self._pruned
        if len(asked) > 2 * pruned + _STALE_SLACK:  # half of them or more dropped: rid of those
            asked = {call: at for call, at in asked.items() if at >= low}
            answered = {call: at for call, at in answered.items() if at >= low}
            pruned = len(asked)
        else:
            asked, answered = asked.copy(), answered.copy()  # type: ignore[attr-defined]  # a C-level copy of each
        state._asked, state._answered, state._pruned = asked, answered, pruned
        state._origin, state._low = self._origin - shift, low
        state.open = list(self.open)
        state.open_at = self.open_at + shift if self.open_at >= start else -1
        state.calls_at = self.calls_at + shift if self.calls_at >= start else -1
        if self.first >= start:
            state.first, state.first_role = self.first + shift, self.first_role
        else:
            first = next((j for j, m in enumerate(rest) if m.role != "system"), None)
            if first is not None:
                state.first, state.first_role = first + state.size - len(rest), rest[first].role
        if dropped is not None and len(dropped) == start:
            state.users += self.users - operator.countOf(map(_ROLE, dropped), "user")
        else:
            state.users += operator.countOf(map(_ROLE, rest), "user")
        return state

    def asked_at(self, call: str) -> int | None:
        """
        The index of the message asking for *call* (the latest, when asked again), or None when none does.
        """
        at = self._asked.get(call)
        return None if at is None or at < self._low else at - self._origin

    def _answered_now(self, call: str) -> bool:
        at = self._answered.get(call)
        return at is not None and at >= self._low

    def calls(self) -> tuple[dict[str, int], set[str]]:
        """
        The calls asked (each with the index of the message asking for it)
        and those answered, as the walk tells them (to compare two states).
        """
        low, origin = self._low, self._origin
        asked = {call: at - origin for call, at in self._asked.items() if at >= low}
        return asked, {call for call, at in self._answered.items() if at >= low}

    def skip(self) -> None:
        """
        Walk past one message the request leaves out (a format writes nothing
        of it): it takes its position, and neither breaks nor joins an exchange.
        """
        if self.calls_at >= 0 and self.calls_at == self.size - 1:
            self.calls_at = self.size
        self.size += 1

    def _close(self) -> None:
        """
        The run of results after the call at ``open_at`` ended: unanswered calls dangle.
        """
        if self.open:
            ids = tuple(self.open)
            self._report(
                Problem(
                    self.open_at,
                    "dangling-call",
                    f"the tool call(s) {_ids(ids)} have no result, and other messages follow; "
                    "append each result right after the call, or drop the call with its message",
                    ids,
                )
            )
            self.open = []

    @staticmethod
    def ids_of(message: Message) -> tuple[Sequence[str], Sequence[str]]:
        """
        The ids of the calls *message* answers and of those it asks for,
        repeats included: what :meth:`feed` reads of it.
        """
        if message.content.__class__ is not str:
            return _raw_result_ids(message), _raw_call_ids(message)
        # text: a tool message answers, an assistant asks
        role = message.role
        if role == "tool":
            own = message.tool_call_id
            return ((own,) if own is not None else ()), ()
        calls = message.tool_calls
        return (), ([call.id for call in calls] if calls and role == "assistant" else ())

    def feed(self, message: Message, ids: tuple[Sequence[str], Sequence[str]] | None = None) -> None:
        """
        Walk one more message; *ids*, :meth:`ids_of` it when the caller read
        them too (a tail index does), saves reading them again.
        """
        results, calls = self.ids_of(message) if ids is None else ids
        i = self.size
        self.size += 1
        role = message.role
        if role != "system" and self.first < 0:
            self.first, self.first_role = i, role
        if role == "user":
            self.users += 1
        if results or role == "tool":
            if not results:
                self._report(
                    Problem(
                        i,
                        "result-without-id",
                        "this tool message names no call; set tool_call_id to the id of the call it answers",
                    )
                )
            for answered in results:
                self._answer(i, answered)
        # Assistant turns that only call, one right after another, are one
        # exchange (Anthropic and Gemini join consecutive turns of a role):
        # their results may follow them all.
        joined = bool(calls) and role == "assistant" and i > 0 and self.calls_at == i - 1 and not results
        if not (calls or results) and role == "assistant" and i > 0 and self.calls_at == i - 1 and _left_out(message):
            joined = True
            self.calls_at = i
        if not (results or role == "tool" or joined):
            self._close()
        if calls and role != "assistant":
            self._report(
                Problem(
                    i,
                    "call-not-assistant",
                    f"this {role} message holds the tool call(s) {_ids(calls)}, and only an assistant message "
                    "asks for calls; put each call in an assistant message (write(repair=True) moves them "
                    "into one right after this message)",
                    tuple(dict.fromkeys(calls)),
                )
            )
        if calls:
            if not joined:
                self._close()
            seen: set[str] = set()
            for call in calls:
                stored = self._asked.get(call)  # asked_at(call), inlined: most calls are new
                asked = None if stored is None or stored < self._low else stored - self._origin
                if call in seen or (asked is not None and (not self._answered_now(call) or call in self.open)):
                    self._report(
                        Problem(
                            i,
                            "duplicate-call-id",
                            f"the call id {call!r} is used by an earlier call too, and a result could not say "
                            "which one it answers; give every call its own id",
                            (call,),
                        )
                    )
                elif asked is not None:
                    self._report(
                        Problem(
                            i,
                            "reused-call-id",
                            f"the call id {call!r} was used by the call at message {asked}, answered "
                            "already; Anthropic and Gemini need each id once per request (their adapters re-key "
                            "it when writing)",
                            (call,),
                        )
                    )
                seen.add(call)
                self._asked[call] = i + self._origin
            if joined:
                self.open.extend(c for c in dict.fromkeys(calls) if c not in self.open)
            else:
                self.open = list(dict.fromkeys(calls))
                self.open_at = i
            self.calls_at = i if role == "assistant" else -1
        if (role in ("user", "assistant")) and _is_empty(message):
            self._report(
                Problem(
                    i,
                    "empty-content",
                    f"this {role} message has no content; Anthropic and Gemini refuse empty turns: "
                    "give it text or leave it out",
                )
            )

    def _answer(self, i: int, answered: str) -> None:
        if answered in self.open:
            self.open.remove(answered)
            self._answered[answered] = self._asked[answered]  # the ask this result answers
        elif self._answered_now(answered):
            self._report(
                Problem(
                    i,
                    "duplicate-result",
                    f"the call {answered!r} already has a result; keep one result per call",
                    (answered,),
                )
            )
        elif (asked := self.asked_at(answered)) is not None:
            self._report(
                Problem(
                    i,
                    "misplaced-result",
                    f"the call {answered!r} is at message {asked}, but other messages come "
                    "between it and this result; results must directly follow their call",
                    (answered,),
                )
            )
        else:
            self._report(
                Problem(
                    i,
                    "orphan-result",
                    f"no earlier message asks for the call {answered!r}; drop this result "
                    "or keep the assistant message that made the call",
                    (answered,),
                )
            )

    def pending(self) -> tuple[int, tuple[str, ...]]:
        """
        The index of the message whose calls still wait at the end, and their ids.
        """
        return self.open_at, tuple(self.open)

    def finish(self, *, allow_pending: bool) -> list[Problem]:
        """
        Every problem of the walked sequence, in order of position.
        """
        problems = list(self.problems)
        if self.size == 0:
            problems.append(Problem(None, "empty", "the conversation holds no message; add a user message"))
            return problems
        if self.open and not allow_pending:
            ids = tuple(self.open)
            problems.append(
                Problem(
                    self.open_at,
                    "pending-at-end",
                    f"the conversation ends with the unanswered call(s) {_ids(ids)}; "
                    "append their results before sending it",
                    ids,
                )
            )
        if self.first >= 0 and self.first_role != "user":
            problems.append(
                Problem(
                    self.first,
                    "first-not-user",
                    f"the first message after the system messages is a {self.first_role!r} message; "
                    "Gemini wants a user message first: keep the user's task in front of it",
                )
            )
        if self.users == 0:
            problems.append(
                Problem(None, "no-user-message", "the conversation holds no user message; add the user's request")
            )
        problems.sort(key=lambda p: (p.index is None, p.index or 0))
        return problems


def _check_provider(provider: object) -> None:
    if provider is not None and provider not in PROVIDERS:
        msg = f"unknown provider {provider!r}; use one of {', '.join(map(repr, PROVIDERS))}, or None for every rule"
        raise ProviderError(msg)


def _check_sequence(messages: object) -> Sequence[Message]:
    if isinstance(messages, Message | str) or not isinstance(messages, Sequence):
        raise _checks.wrong_type(
            messages,
            "messages",
            "a sequence of messages",
            label="check_messages()",
            verb="takes",
            fix="pass ctx.assembled() for a context",
        )
    for position, item in enumerate(messages):
        if not isinstance(item, Message):
            msg = f"check_messages(): item {position} is {_checks.described(item)}, not a Message"
            raise ArgumentTypeError(msg, argument=f"messages[{position}]", value=item, expected="a Message")
    return messages


def check_messages(
    messages: Sequence[Message],
    *,
    provider: Provider | None = None,
    allow_pending: bool = False,
) -> tuple[Problem, ...]:
    """
    Every problem *provider* would reject in *messages*, in order of position.

    Args:
        messages: The conversation as sent: system messages included (use
            ``ctx.assembled()`` for a context, prefix first).
        provider: ``"openai"``, ``"anthropic"`` or ``"gemini"``; ``None``
            applies every rule (the strictest union).
        allow_pending: Accept unanswered calls at the very end (a context
            between a model's call and its results); a request sent to a
            provider cannot end that way.

    Returns:
        The problems (an empty tuple when the conversation is valid).

    Raises:
        TypeError: *messages* is not a sequence of :class:`~workingctx.Message`.
        ProviderError: *provider* is not one of the known names.

    >>> from workingctx import Message, ToolCall
    >>> call = Message("assistant", tool_calls=(ToolCall("c1", "weather"),))
    >>> check_messages([Message("user", "Oslo?"), call], allow_pending=True)
    ()
    >>> [p.rule for p in check_messages([Message("user", "Oslo?"), call])]
    ['pending-at-end']
    """
    _check_provider(provider)
    walk = RuleState()
    for message in _check_sequence(messages):
        walk.feed(message)
    return _select(walk.finish(allow_pending=allow_pending), provider)


def _select(problems: Iterable[Problem], provider: str | None) -> tuple[Problem, ...]:
    if provider is None:
        return tuple(problems)
    return tuple(p for p in problems if provider in RULES[p.rule][1])


def require_valid(
    messages: Sequence[Message],
    *,
    provider: Provider | None = None,
    allow_pending: bool = False,
) -> None:
    """
    Raise :class:`~workingctx.exceptions.ProviderError` listing every problem
    :func:`check_messages` finds; return ``None`` when there is none.

    >>> from workingctx import Message
    >>> require_valid([Message("user", "hi")], provider="anthropic")
    >>> require_valid([Message("assistant", "hi")], provider="gemini")
    Traceback (most recent call last):
    ...
    workingctx.exceptions.ProviderError: the conversation breaks 2 gemini rule(s):
      message 0: first-not-user: ...
      conversation: no-user-message: ...
    """
    problems = check_messages(messages, provider=provider, allow_pending=allow_pending)
    if problems:
        raise ProviderError.from_problems(problems, provider=provider)
