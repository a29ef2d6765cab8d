"""
The OpenAI Agents SDK on workingctx: a session over any workingctx store, and a model-input filter.

:class:`ContextSession` is a drop-in for the SDK's ``SQLiteSession``: it
implements the SDK's ``Session`` protocol (``get_items``, ``add_items``,
``pop_item``, ``clear_session``) over an :class:`~workingctx.InMemoryStore`,
a :class:`~workingctx.SQLiteStore`, a
:class:`~workingctx.persistence.PostgresStore` or a
:class:`~workingctx.persistence.RedisStore`. Items come back exactly as they
were added (equal dicts, keys in their order), also from a store opened
again. With a *manager*, ``get_items`` returns the trimmed history a model
should get, always a valid request, while the store keeps every item.

:func:`input_filter` makes a ``RunConfig.call_model_input_filter`` of a
manager: every model call of a run gets the trimmed, valid input.

Items are read into workingctx messages with
:mod:`workingctx.adapters.openai_responses` (a run of output items, such as a
reasoning item and its function calls, is one assistant message, so an
exchange is never split from its reasoning; an item of a kind the adapter does
not read rides with the one before it); each message keeps the items it was
read from, which is what is given back.

The SDK is imported only when a filter runs (extra ``workingctx[openai-agents]``).

>>> import asyncio
>>> from workingctx.integrations.openai_agents import ContextSession
>>> session = ContextSession("user-42")
>>> asyncio.run(session.add_items([{"role": "user", "content": "Weather in Paris?"}]))
>>> asyncio.run(session.get_items())
[{'role': 'user', 'content': 'Weather in Paris?'}]
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from workingctx.adapters import openai_responses
from workingctx.context import WorkingContext
from workingctx.exceptions import (
    ArgumentTypeError,
    CheckpointError,
    HeadConflictError,
    StoreUnavailableError,
    WorkingCtxError,
)
from workingctx.frozen import freeze_json, thaw
from workingctx.integrations._window import Window, check_manager
from workingctx.managers import BaseContextManager
from workingctx.messages import Message, ProviderBlock, TextBlock, item_call_ids
from workingctx.persistence import Checkpoint, CheckpointStore, InMemoryStore
from workingctx.prefix import PrefixContext

if TYPE_CHECKING:
    from agents.memory import SessionSettings
    from agents.run_config import CallModelData, ModelInputData

__all__ = ["ContextSession", "input_filter"]

logger = logging.getLogger(__name__)

KEY = "openai_agents"
"""The metadata key under which a message keeps the items it was read from."""

_THREAD = "openai-agents:"
_RETRIES = 20  # compare-and-set attempts against other writers of the same session
_T = TypeVar("_T")


# -- items and messages ----------------------------------------------------------------


def _plain(item: Any, position: int) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        data = dump(exclude_unset=True)
        if isinstance(data, dict):
            return data
    msg = (
        f"items[{position}] must be a Responses input item (a dict), got {item!r} of type "
        f"{type(item).__name__}; pass run items through their to_input_item()"
    )
    raise ArgumentTypeError(msg, argument=f"items[{position}]", value=item, expected="a Responses input item")


def _read(group: Sequence[dict[str, Any]]) -> Message:
    """
    The one message *group* reads as (a run of output items, or one input item).

    What the adapter cannot read (an item of a shape it does not know) is kept
    as a user message holding the items as provider blocks, so a session never
    refuses what the SDK hands it.
    """
    try:
        messages: list[Message] = openai_responses.read(list(group)).assembled()
    except (WorkingCtxError, KeyError, TypeError, ValueError):
        messages = []
    if len(messages) == 1:
        return messages[0]
    return Message("user", tuple(ProviderBlock(openai_responses.PROVIDER, item) for item in group))


def _rides(item: Mapping[str, Any], single: Message) -> bool:
    """
    Whether *item* is one the adapter does not know (read as the user's, though
    it names no role), that asks for and answers no call: a kind the SDK or the
    API added since (a ``program_output``, ...). It is no turn of its own.
    """
    return "role" not in item and single.role == "user" and item_call_ids(item) == (None, None)


_LOCAL = "openai-agents-"
"""What the local ids of calls other than function calls begin with (see :func:`_local_id`)."""

_KINDS: dict[str, str] = {
    "function_call": "function_call",
    "function_call_output": "function_call",
    "custom_tool_call": "custom_tool_call",
    "custom_tool_call_output": "custom_tool_call",
    "computer_call": "computer_call",
    "computer_call_output": "computer_call",
    "local_shell_call": "local_shell_call",
    "local_shell_call_output": "local_shell_call",
    "shell_call": "shell_call",
    "shell_call_output": "shell_call",
    "apply_patch_call": "apply_patch_call",
    "apply_patch_call_output": "apply_patch_call",
    "tool_search_call": "tool_search_call",
    "tool_search_output": "tool_search_call",
    "mcp_approval_request": "mcp_approval_request",
    "mcp_approval_response": "mcp_approval_request",
}
"""The kind of call an item asks for or answers, by its type: the SDK pairs an output only with a call of its kind."""

_FIELDS: dict[str, tuple[str, ...]] = {
    "mcp_approval_request": ("id",),
    "mcp_approval_response": ("approval_request_id",),
    "local_shell_call_output": ("call_id", "id"),  # the SDK writes call_id, the API's type names it id
}
"""The fields naming the call, by item type, where it is not ``call_id``."""


def _local_id(kind: str, call_id: str) -> str:
    """
    The id workingctx reads the call *call_id* of *kind* under: a function
    call's own id, any other's (and an empty or a local-looking function call
    id) marked with its kind, one to one. So an output pairs only with a call of
    its kind, as the SDK pairs them (a ``computer_call_output`` never answers a
    ``function_call`` of the same id), and an empty id is an id.
    """
    if kind == "function_call" and call_id and not call_id.startswith(_LOCAL):
        return call_id
    return f"{_LOCAL}{kind}:{call_id}"


def _readable(item: dict[str, Any]) -> dict[str, Any]:
    """
    *item* as workingctx reads it: the call it asks for or answers under its
    local id (see :func:`_local_id`). What goes back is always the item itself.
    """
    kind = item.get("type")
    if not isinstance(kind, str) or kind not in _KINDS:
        return item
    fields = _FIELDS.get(kind, ("call_id",))
    local = {f: (v, _local_id(_KINDS[kind], v)) for f in fields if isinstance(v := item.get(f), str)}
    changed = {f: new for f, (old, new) in local.items() if new != old}
    return {**item, **changed} if changed else item


def _groups(items: Sequence[dict[str, Any]]) -> list[tuple[int, int, Message]]:
    """
    ``(start, stop, message)`` for each message *items* read as, in order.

    A run of output items is one assistant message. An item of a kind the
    adapter does not know (see :func:`_rides`) rides with the message before
    it, counted with it and kept or dropped with it: it never stands for the
    user's turn, so a cut cannot open the request there and leave out the
    user's question, nor part a reasoning item from the calls after it.
    """
    items = [_readable(item) for item in items]
    singles = [_read([item]) for item in items]
    rides = [_rides(item, single) for item, single in zip(items, singles, strict=True)]
    groups: list[tuple[int, int, Message]] = []
    start = 0
    while start < len(items):
        run = singles[start].role == "assistant"
        stop = start + 1
        while stop < len(items) and (rides[stop] or (run and singles[stop].role == "assistant")):
            stop += 1
        hosts = [i for i in range(start, stop) if i == start or not rides[i]]
        message = singles[start] if len(hosts) == 1 else _read([items[i] for i in hosts])
        riders = [ProviderBlock(openai_responses.PROVIDER, items[i]) for i in range(start, stop) if i not in hosts]
        if riders:
            content = message.content
            blocks = (TextBlock(content),) if isinstance(content, str) and content else ()
            message = attrs.evolve(message, content=(*(content if isinstance(content, tuple) else blocks), *riders))
        groups.append((start, stop, message))
        start = stop
    return groups


def _tagged(message: Message, data: Mapping[str, Any]) -> Message:
    return attrs.evolve(message, metadata={**thaw(message.metadata), KEY: dict(data)})


def _stored(items: Sequence[dict[str, Any]]) -> list[Message]:
    """
    The messages a session stores for *items*: each keeps its items verbatim.
    """
    return [_tagged(m, {"items": list(items[a:b])}) for a, b, m in _groups(items)]


def _written(message: Message) -> list[dict[str, Any]]:
    """
    The items of a message workingctx made (a summary), written by the adapter.
    """
    body = openai_responses.write(WorkingContext(messages=[Message("user", "-"), message]))
    return list(body["input"][1:])


def _items_of(messages: Sequence[Message], source: Sequence[Any] | None = None) -> list[Any]:
    """
    The items of *messages*: those each was read from (the very objects of
    *source* for a filter), or, for one workingctx made, the adapter's.
    """
    items: list[Any] = []
    for message in messages:
        data = message.metadata.get(KEY)
        if data is None:
            items.extend(_written(message))
        elif source is not None and "at" in data:
            items.extend(source[i] for i in data["at"])
        else:
            items.extend(thaw(data["items"]))
    return items


def _answered(items: Sequence[Any]) -> tuple[list[Any], int]:
    """
    *items* without the outputs (``function_call_output``, ``computer_call_output``,
    ...) whose call is not before them, and how many were dropped.
    """
    calls: set[str] = set()
    kept: list[Any] = []
    for item in items:
        asks, answers = item_call_ids(item) if isinstance(item, Mapping) else (None, None)
        if asks is None and answers is None and isinstance(item, Mapping):  # a kind workingctx does not know yet
            call_id, kind = item.get("call_id"), item.get("type")
            if isinstance(call_id, str) and isinstance(kind, str):
                asks, answers = (None, call_id) if kind.endswith("_output") else (call_id, None)
        if answers is not None and answers not in calls:
            continue
        if asks is not None:
            calls.add(asks)
        kept.append(item)
    return kept, len(items) - len(kept)


async def _whole(work: Callable[[], _T]) -> _T:
    """
    *work()* in a worker thread, waited for to its end even when the caller is
    cancelled (the cancellation is raised then): a thread cannot be stopped,
    so the gate is never let go while it still reads or writes the store.
    """
    task = asyncio.ensure_future(asyncio.to_thread(work))
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as error:
            cancelled = cancelled or error
    if cancelled is not None:
        raise cancelled
    return task.result()


class _Gate:
    """
    One at a time, for the coroutines of every event loop in every thread.

    An asyncio lock belongs to the loop it first waits in, so each loop
    queues its own coroutines on one of its own (made on first use); across
    loops (``Runner.run_sync`` and ``asyncio.run`` in several threads) a
    thread lock is then taken without blocking the loop: it is polled.
    """

    def __init__(self) -> None:
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()
        self._made = threading.Lock()  # guards _loops
        self._thread = threading.Lock()

    def _loop_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        with self._made:
            lock = self._loops.get(loop)
            if lock is None:
                lock = self._loops[loop] = asyncio.Lock()
        return lock

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """
        Hold the gate for the ``async with`` block.
        """
        async with self._loop_lock():
            delay = 0.0005
            while not self._thread.acquire(blocking=False):
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.02)
            try:
                yield
            finally:
                self._thread.release()


# -- the session -------------------------------------------------------------------------


class ContextSession:
    """
    An Agents SDK session kept in a workingctx store, optionally trimmed by a manager.

    It implements the SDK's ``Session`` protocol structurally (the SDK asks
    third parties not to subclass ``SessionABC``). Each change saves a
    checkpoint on the store thread :attr:`thread` (``"openai-agents:" +
    session_id``); messages are content-addressed, so each is stored once
    however many checkpoints hold it. Several processes may share a session:
    a writer that loses the race to the thread's head reloads it and applies
    its change again. One session object may be used from several threads,
    each with its own event loop (``Runner.run_sync``): its calls take turns.

    Args:
        session_id: The conversation's id.
        store: Any workingctx checkpoint store; an
            :class:`~workingctx.InMemoryStore` when None.
        manager: A context manager (such as
            :class:`~workingctx.TokenBudgetContextManager`); ``get_items`` then
            returns what it keeps, a valid request that fits its budget. The
            store keeps everything.
        session_settings: The SDK's ``SessionSettings`` (or a dict of them);
            its ``limit`` applies when ``get_items`` is given none.

    Raises:
        TypeError: *session_id* is not a non-empty str, *store* is not a
            checkpoint store, or *manager* is not a context manager (the error
            names the argument).

    History that arrives broken (a ``function_call_output`` whose call is not
    before it) is never passed on: the orphaned output is left out of what
    ``get_items`` returns, and a warning is logged on this module's logger.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        store: CheckpointStore | None = None,
        *,
        manager: BaseContextManager[WorkingContext] | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            msg = f"ContextSession: session_id must be a non-empty str, got {session_id!r}"
            raise ArgumentTypeError(msg, argument="session_id", value=session_id, expected="a non-empty str")
        if store is not None and not isinstance(store, CheckpointStore):
            msg = (
                f"ContextSession: store must be a workingctx checkpoint store, got {store!r} of type "
                f"{type(store).__name__}; pass InMemoryStore(), SQLiteStore(path), PostgresStore(dsn) or "
                "RedisStore(url)"
            )
            raise ArgumentTypeError(msg, argument="store", value=store, expected="a checkpoint store")
        if manager is not None:
            check_manager(manager, "manager", "ContextSession")
        self.session_id = session_id
        self.store: CheckpointStore = InMemoryStore() if store is None else store
        self.manager = manager
        self.thread = _THREAD + session_id
        if session_settings is not None:
            from agents.memory.session_settings import coerce_session_settings  # noqa: PLC0415  # the [openai-agents] extra

            self.session_settings = coerce_session_settings(session_settings)  # type: ignore[arg-type]
        self._window = None if manager is None else Window(manager, logger)
        # the head last read or written and its messages, one value: a thread never sees half of it
        self._cache: tuple[str | None, list[Message]] = (None, [])
        self._gate = _Gate()  # one call at a time, from any event loop in any thread

    def __repr__(self) -> str:
        manager = "" if self.manager is None else f", manager={self.manager!r}"
        return f"ContextSession({self.session_id!r}, {self.store!r}{manager})"

    # -- the store, synchronous (run in a worker thread) ---------------------------------

    def _load(self) -> tuple[str | None, list[Message]]:
        for _ in range(_RETRIES):
            head = self.store.head(self.thread)
            if head is None:
                return None, []
            cached, known = self._cache
            if head == cached:
                return head, known
            try:
                messages = list(self.store.load(head).snapshot.messages)
            except StoreUnavailableError:
                raise
            except CheckpointError:
                if self.store.head(self.thread) != head:  # another handle cleared the session meanwhile
                    continue
                raise
            self._cache = (head, messages)
            return head, messages
        msg = f"ContextSession {self.session_id!r}: other writers kept clearing the session; nothing was read"
        raise HeadConflictError(msg, thread=self.thread, expected=None, actual=None)

    def _commit(self, change: Callable[[list[Message]], list[Message] | None]) -> str | None:
        """
        Apply *change* to the stored messages and save the result as the new head, retrying on a lost race.

        Returns the head the change ended on (the one read when *change* changed nothing).
        """
        for _ in range(_RETRIES):
            head, messages = self._load()
            new = change(list(messages))
            if new is None:
                return head
            checkpoint = Checkpoint.capture(
                WorkingContext(messages=new), parent=head, metadata={"session_id": self.session_id}
            )
            try:
                self.store.save(checkpoint, thread=self.thread)
            except HeadConflictError:
                continue
            self._cache = (checkpoint.id, new)
            return checkpoint.id
        msg = f"ContextSession {self.session_id!r}: other writers kept moving the head; nothing was saved"
        raise HeadConflictError(msg, thread=self.thread, expected=None, actual=None)

    def _add(self, items: list[dict[str, Any]]) -> None:
        def change(messages: list[Message]) -> list[Message]:
            if not messages:
                return _stored(items)
            # read again with the newest message: the output items of one response may arrive in
            # two calls, and an item of a kind the adapter does not know rides with the one before
            return [*messages[:-1], *_stored([*thaw(messages[-1].metadata[KEY]["items"]), *items])]

        self._commit(change)

    def _pop(self) -> Any:
        popped: list[Any] = []

        def change(messages: list[Message]) -> list[Message] | None:
            popped.clear()
            if not messages:
                return None
            items = thaw(messages[-1].metadata[KEY]["items"])
            popped.append(items[-1])
            return [*messages[:-1], *_stored(items[:-1])]

        self._commit(change)
        return popped[0] if popped else None

    def _clear(self) -> None:
        # An empty checkpoint becomes the head, compare-and-set like every change, and stays
        # the head: a writer racing the clear then continues from nothing, never from the
        # history cleared (a thread with no head would take any checkpoint as its next).
        # The checkpoints before it go.
        empty = self._commit(lambda messages: [] if messages else None)
        if empty is not None:
            try:
                before = [info.id for info in self.store.lineage(empty)][:-1]
            except StoreUnavailableError:
                raise
            except CheckpointError:  # another handle's clear removed it already
                before = []
            for checkpoint_id in before:
                try:
                    self.store.delete(checkpoint_id)
                except StoreUnavailableError:
                    raise
                except CheckpointError:  # removed by another handle's clear meanwhile
                    continue
        self._cache = (empty, [])
        if self._window is not None:
            self._window.reset()

    # -- the Session protocol -----------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """
        The session's items, oldest first: all of them, or, with a manager,
        those it keeps; with *limit* (or the settings' limit), the newest
        *limit* of those, as the SDK's own sessions give them (its runner
        drops an output whose call the limit cut off when it builds the
        model's input, and rewinds a retried turn by the exact tail).
        """
        async with self._gate.held():
            _, messages = await _whole(self._load)
            kept = messages if self._window is None else await self._window.trim(messages)
        items, dropped = _answered(_items_of(kept))
        if dropped:
            logger.warning(
                "ContextSession %r: %d stored tool output(s) answer no call before them; left out of get_items()",
                self.session_id,
                dropped,
            )
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        if limit is None:
            return items
        return items[max(len(items) - limit, 0) :] if limit > 0 else []

    async def add_items(self, items: list[Any]) -> None:
        """
        Append *items* (Responses input items) to the session, as they are.

        Raises:
            TypeError: *items* is not a list of items (the error names the one
                that is not).
            PayloadError: An item is not JSON data (a NaN, a cycle, an int too
                long to write, a set, ...): the error names it and where in
                it, and nothing is written.
        """
        if not isinstance(items, Sequence) or isinstance(items, str | bytes):
            msg = f"add_items: items must be a list of Responses input items, got {type(items).__name__}"
            raise ArgumentTypeError(msg, argument="items", value=items, expected="a list of items")
        plain = [_plain(item, position) for position, item in enumerate(items)]
        for position, item in enumerate(plain):  # refused before anything is written, naming the item
            freeze_json(item, f"items[{position}]")
        if not plain:
            return
        async with self._gate.held():
            await _whole(lambda: self._add(plain))

    async def pop_item(self) -> Any:
        """
        Remove the newest item and return it (None when the session is empty).
        """
        async with self._gate.held():
            return await _whole(self._pop)

    async def clear_session(self) -> None:
        """
        Remove every item: an empty checkpoint becomes the thread's head and the
        session's checkpoints before it are deleted from the store. The empty
        head stays, so a writer on another handle that read the head before the
        clear continues from nothing, never from the history cleared.
        """
        async with self._gate.held():
            await _whole(self._clear)


# -- the model-input filter ---------------------------------------------------------------


def input_filter(
    manager: BaseContextManager[WorkingContext],
) -> Callable[[CallModelData[Any]], Awaitable[ModelInputData]]:
    """
    A ``RunConfig.call_model_input_filter`` that trims each model call's input with *manager*.

    The instructions are the context's prefix (a manager's budget counts
    them). What the model gets is always a valid request: no output without
    its call before it, no call separated from its reasoning, the first
    message after the system ones the user's. Items kept are the very objects
    the SDK passed. The filter keeps one live window, so a manager with
    watermarks cuts rarely and the cached prefix of the requests holds
    between cuts; an input that does not continue the last one starts a new
    window. One filter may serve runs in several threads and event loops:
    its calls take turns.

    An input that arrives broken (an orphaned ``function_call_output``) has
    its broken exchange dropped whole, and a warning is logged.

    Raises:
        TypeError: *manager* is not a context manager (the error names it).
    """
    check_manager(manager, "manager", "input_filter()")
    window = Window(manager, logger)
    gate = _Gate()  # one RunConfig may serve runs in several threads and event loops

    async def call_model_input_filter(data: CallModelData[Any]) -> ModelInputData:
        from agents.run_config import ModelInputData  # noqa: PLC0415  # the [openai-agents] extra

        model_data = data.model_data
        source = list(model_data.input)
        plain = [_plain(item, position) for position, item in enumerate(source)]
        messages = [_tagged(m, {"at": list(range(a, b))}) for a, b, m in _groups(plain)]
        prefix = PrefixContext(system_prompt=model_data.instructions)
        async with gate.held():
            kept = await window.trim(messages, prefix, sendable=True)
        items, dropped = _answered(_items_of(kept, source))
        if dropped:
            logger.warning("input_filter: %d tool output(s) answer no call before them; left out", dropped)
        return ModelInputData(input=items, instructions=model_data.instructions)

    return call_model_input_filter
