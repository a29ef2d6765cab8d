"""
LangGraph checkpoints in any workingctx store: :class:`ContextSaver`.

LangGraph's own savers write the whole message list into every checkpoint, so
a run's storage grows with the square of its length. ``ContextSaver`` keeps the
``messages`` channel (``MessagesState``, the state of LangChain's
``create_agent``) as a workingctx transcript: each message is stored once, by
its digest, however many checkpoints and threads hold it, and every checkpoint
points into the chain. A task's pending writes continue their checkpoint's
transcript, so the messages a node returns share the chain the next
checkpoint holds. The other channels and the values written to them go
through LangGraph's own serializer.

Install the ``[langgraph]`` extra; this module imports LangGraph, ``import
workingctx`` does not.

>>> from langchain_core.messages import HumanMessage
>>> from workingctx import InMemoryStore
>>> from workingctx.integrations.langgraph import ContextSaver
>>> saver = ContextSaver(InMemoryStore())
>>> config = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
>>> from langgraph.checkpoint.base import empty_checkpoint
>>> checkpoint = empty_checkpoint()
>>> checkpoint["channel_values"] = {"messages": [HumanMessage("hi", id="m1")]}
>>> saved = saver.put(config, checkpoint, {"source": "input", "step": -1}, {})
>>> saver.get_tuple(saved).checkpoint["channel_values"]["messages"]
[HumanMessage(content='hi', additional_kwargs={}, response_metadata={}, id='m1')]
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import contextlib
import copy
import functools
import hashlib
import io
import json
import operator
import pickle
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs

from workingctx.adapters import langchain as lc
from workingctx.checkpoint import Checkpoint
from workingctx.context import WorkingContext
from workingctx.exceptions import ArgumentTypeError, CheckpointError, HeadConflictError, WorkingCtxError
from workingctx.frozen import thaw
from workingctx.messages import Message
from workingctx.persistence import CheckpointInfo, CheckpointStore
from workingctx.snapshot import FrozenContext

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        CheckpointMetadata,
        CheckpointTuple,
        get_checkpoint_id,
        get_serializable_checkpoint_metadata,
    )
    from langgraph.checkpoint.base import Checkpoint as GraphCheckpoint
    from langgraph.checkpoint.serde.base import SerializerProtocol
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
except ImportError as exc:  # pragma: no cover - the dev extra installs it
    msg = f"workingctx.integrations.langgraph needs LangGraph ({exc}): pip install 'workingctx[langgraph]'"
    raise ImportError(msg) from exc

__all__ = ["ContextSaver"]

_TAG = "langgraph"
_WRITES_TAG = {_TAG: {"kind": "writes"}}
_NOTE = "langgraph"
_RETRIES = 64
_REMEMBERED = 4096  # pending-writes records read once and kept, by id (records never change)
_BASES = 64  # transcripts of the checkpoints put or read last, which their pending writes continue
_WAIT = 5.0  # seconds a put_writes waits at most for the transcript of its checkpoint's put
_GRACE = 0.005  # seconds a put_writes waits for its checkpoint's put to start, once the put before it ended


@functools.lru_cache(maxsize=4096)  # a run names the same thread and checkpoints on every call
def _name(kind: str, *parts: str) -> str:
    """
    A short store name for LangGraph ids (22 characters of a sha256 after *kind*):
    the readable ids ride in each checkpoint's metadata.
    """
    digest = hashlib.sha256(json.dumps(parts).encode("utf-8", "surrogatepass")).digest()
    return kind + base64.urlsafe_b64encode(digest[:16]).decode("ascii").rstrip("=")


def _log_name(thread_id: str, ns: str) -> str:
    """
    The store thread whose head is the newest checkpoint put to a LangGraph thread and namespace.
    """
    return _name("lg-thread:", thread_id, ns)


def _checkpoint_key(thread_id: str, ns: str, checkpoint_id: str) -> str:
    return _name("lg:", thread_id, ns, checkpoint_id)


def _writes_name(thread_id: str, ns: str, checkpoint_id: str) -> str:
    """
    The store thread of the pending writes of one checkpoint, one record per ``put_writes``.
    """
    return _name("lg-writes:", thread_id, ns, checkpoint_id)


def _record_key() -> str:
    return "lg-w:" + base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


def _encode(typed: tuple[str, bytes]) -> list[str]:
    return [typed[0], base64.b64encode(typed[1]).decode("ascii")]


def _decode(value: Any) -> tuple[str, bytes]:
    if not (isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        msg = f"expected a [type, base64] pair, got {value!r}"
        raise ValueError(msg)
    return value[0], base64.b64decode(value[1].encode("ascii"), validate=True)


def _json_exact(value: Any) -> bool:
    """
    Whether *value* comes back equal from JSON (then it is kept as JSON, where it can be filtered on).
    """
    try:
        return bool(json.loads(json.dumps(value, allow_nan=False)) == value)
    except (TypeError, ValueError, RecursionError):
        return False


def _convert(items: list[Any]) -> list[Message] | None:
    """
    workingctx messages for LangChain messages, or None when LangChain would not give them back equal
    (or workingctx cannot hold them: then the serializer keeps them).
    """
    if not items:
        return []
    try:
        read = lc.read(items, state=True)
        converted = [*read.prefix.grounding, *read.messages]
        written = lc.write(converted, state=True)
        # equal is not enough: an enum or a str subclass equals the plain value JSON gives back
        same = written == items and _same(written, items)
    except (WorkingCtxError, TypeError, ValueError):  # data JSON cannot hold (bytes, NaN), or not a LangChain kind
        return None
    return converted if same else None


def _same(a: Any, b: Any) -> bool:
    """
    Whether *a* and *b* are equal and of the same types all the way down (an
    enum equals its value, ``1`` equals ``1.0`` and ``True``: not the same).
    """
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return len(a) == len(b) and all(
            _same(key, other_key) and _same(value, other_value)
            for (key, value), (other_key, other_value) in zip(a.items(), b.items(), strict=True)
        )
    if type(a) in {list, tuple}:
        return len(a) == len(b) and all(map(_same, a, b))
    if hasattr(a, "__dict__") and not isinstance(a, type):  # a LangChain message: its fields
        return _same(vars(a), vars(b))
    return bool(a == b)


def _spec(parts: list[tuple[str | None, list[Message]]], start: int) -> tuple[list[list[Any]], int]:
    """
    Where each carried list lies in a transcript that holds them from *start* on: ``[key, start, count]`` each.
    """
    spec = []
    for key, messages in parts:
        spec.append([key, start, len(messages)])
        start += len(messages)
    return spec, start


def _parts(messages: Sequence[Message], spec: Any) -> tuple[tuple[str | None, tuple[Message, ...]], ...]:
    """
    The messages of each carried list :func:`_spec` described, with its key.
    """
    parts = []
    for key, start, count in spec:
        if not (isinstance(start, int) and isinstance(count, int) and 0 <= start <= start + count <= len(messages)):
            msg = f"a carried value lies at messages[{start!r}:{start!r}+{count!r}], outside the transcript"
            raise ValueError(msg)
        parts.append((key, tuple(messages[start : start + count])))
    return tuple(parts)


def _value(parts: Sequence[tuple[str | None, Sequence[Message]]]) -> Any:
    """
    The value carried *parts* make: a list of LangChain messages, or a dict of them.
    """
    value = {key: lc.write(list(messages), state=True) for key, messages in parts}
    if list(value) == [None]:
        return value[None]
    return value


def _restore(messages: Sequence[Message], spec: Any) -> Any:
    """
    The value :func:`_spec` described: a list of LangChain messages, or a dict of them.
    """
    return _value(_parts(messages, spec))


def _is_messages(value: Any) -> bool:
    return type(value) is list and all(
        isinstance(getattr(item, "type", None), str) and callable(getattr(item, "model_dump", None)) for item in value
    )


@attrs.frozen
class _Entry:
    """
    What a store's descriptor says of one LangGraph checkpoint, read without loading it.
    """

    key: str
    parent_key: str | None
    thread_id: str
    ns: str
    checkpoint_id: str
    parent_id: str | None
    metadata: Any  # the LangGraph metadata as JSON, or None when it rides serialized in the note
    created_at: datetime


def _entry(info: CheckpointInfo) -> _Entry | None:
    """
    The LangGraph checkpoint a store descriptor describes, or None for anything else.
    """
    tag = info.metadata.get(_TAG)
    if not isinstance(tag, Mapping) or tag.get("kind") != "checkpoint":
        return None
    thread_id, ns, checkpoint_id = tag.get("thread_id"), tag.get("checkpoint_ns"), tag.get("checkpoint_id")
    if not (isinstance(thread_id, str) and isinstance(ns, str) and isinstance(checkpoint_id, str)):
        return None
    parent = tag.get("parent_checkpoint_id")
    metadata = tag.get("metadata")
    return _Entry(
        key=info.id,
        parent_key=info.parent,
        thread_id=thread_id,
        ns=ns,
        checkpoint_id=checkpoint_id,
        parent_id=parent if isinstance(parent, str) else None,
        metadata=None if metadata is None else thaw(metadata),
        created_at=info.created_at,
    )


class _Cached:
    """
    The last transcript put to one LangGraph thread and namespace: the LangGraph
    message objects, their fields as they were then, and a live context
    holding their workingctx messages, so the next put converts and hashes
    only the messages added since.

    A message is reused when it is the same object with the same fields: a
    field set again in place (``message.content = ...``, then the message
    returned to replace itself by id) makes it new, and so does a change deep
    inside a field's own dict or list (``message.tool_calls[0]["args"] = ...``,
    ``message.response_metadata[...] = ...``): the fields are kept as deep copies.
    """

    __slots__ = ("ctx", "fields", "last", "objects")

    def __init__(self, objects: list[Any], ctx: WorkingContext, before: _Cached | None = None, kept: int = 0) -> None:
        self.objects = objects
        # the fields of the first *kept* messages are *before*'s: the same objects, found unchanged
        known: list[dict[str, Any]] = [] if before is None else before.fields[:kept]
        # deep copies: a change inside a field's dict or list (by the graph, or by a reader of the state) is seen
        self.fields: list[dict[str, Any]] = [*known, *(copy.deepcopy(vars(item)) for item in objects[len(known) :])]
        self.ctx = ctx
        messages = ctx.messages
        self.last: Message | None = messages[-1] if messages else None

    def holds(self, messages: Sequence[Message], count: int) -> bool:
        """
        Whether this transcript is the first *count* of *messages* (the same
        values, as a checkpoint taken from it holds them), its LangChain
        messages still unchanged: then copies of them can be handed out.
        """
        return (
            len(self.objects) == count
            and (count == 0 or self.last is messages[count - 1])
            and _unchanged(self.objects, self.fields)
        )

    def continued_by(self, value: list[Any]) -> bool:
        """
        Whether *value* starts with this transcript's messages, unchanged.
        """
        count = len(self.objects)
        head = value[:count]
        return len(head) == count and all(map(operator.is_, head, self.objects)) and _unchanged(head, self.fields)


def _unchanged(objects: Sequence[Any], fields: Sequence[dict[str, Any]]) -> bool:
    """
    Whether each of *objects* still has the *fields* copied from it, the same
    values of the same types: equal is not enough (a ``1`` set to ``1.0`` or
    ``True`` in place, or a str to an enum of it, is a change the store must
    see). The types are compared by the values' pickles, which name them, at a
    fraction of :func:`_same`'s cost.
    """
    current: list[Any] = list(map(vars, objects))
    if current != fields:
        return False
    try:
        return _pickled(current) == _pickled(fields)
    except Exception:  # noqa: BLE001  # a value pickle refuses (a cycle, a lambda): compared field by field
        return _same(current, fields)


def _pickled(value: Any) -> bytes:
    """
    *value* pickled without the memo, so values shared between messages
    pickle as the copies :class:`_Cached` keeps of them do.
    """
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.fast = True
    pickler.dump(value)
    return out.getvalue()


_ATOMS = frozenset({str, int, float, bool, bytes, type(None)})


def _plain_copy(value: Any) -> Any:
    """
    A deep copy of *value*, the JSON-like parts (dicts, lists, text, numbers)
    copied without :func:`copy.deepcopy`'s bookkeeping, anything else by it.
    """
    kind = value.__class__
    if kind in _ATOMS:
        return value
    if kind is dict:
        return {key: _plain_copy(item) for key, item in value.items()}
    if kind is list:
        return list(map(_plain_copy, value))
    return copy.deepcopy(value)


def _fresh(message: Any) -> Any:
    """
    A new LangChain message equal to *message* sharing nothing a reader could
    change in place with it: as :func:`copy.deepcopy` makes it, at a fraction of its cost.
    """
    new = message.model_copy()  # a shallow copy: its own field dicts
    fields = new.__dict__
    for key, value in fields.items():
        kind = value.__class__
        if kind is dict:
            fields[key] = {name: _plain_copy(item) for name, item in value.items()} if value else {}
        elif kind is list:
            fields[key] = list(map(_plain_copy, value)) if value else []
        elif kind not in _ATOMS:
            fields[key] = copy.deepcopy(value)
    extra = new.__pydantic_extra__
    if extra:
        for key, value in extra.items():
            extra[key] = _plain_copy(value)
    return new


_Parts = tuple[tuple[str | None, tuple[Message, ...]], ...]


@attrs.frozen
class _Record:
    """
    One ``put_writes`` record, read: its task, and each write as ``(index,
    channel, carried, serialized)``, the carried messages with their keys or
    the ``[type, base64]`` pair of a serialized value. It holds only the
    messages written, not the transcript the record continues.
    """

    task_id: str
    task_path: str
    writes: tuple[tuple[int, str, _Parts | None, tuple[str, str] | None], ...]

    @classmethod
    def read(cls, snapshot: FrozenContext) -> _Record:
        note = dict(snapshot.scratchpad)[_NOTE]
        writes: list[tuple[int, str, _Parts | None, tuple[str, str] | None]] = []
        for index, channel, kind, data in note["writes"]:
            if not (isinstance(index, int) and isinstance(channel, str) and isinstance(kind, str)):
                msg = f"a write is [index, channel, kind, data], got {[index, channel, kind, data]!r}"
                raise TypeError(msg)
            if kind == "carried":
                writes.append((index, channel, _parts(snapshot.messages, data), None))
            else:
                writes.append((index, channel, None, (kind, data)))
        return cls(str(note["task_id"]), str(note["task_path"]), tuple(writes))


class ContextSaver(BaseCheckpointSaver[int]):
    """
    A LangGraph checkpointer over a workingctx store: swap it in for
    ``InMemorySaver``, ``SqliteSaver`` or ``PostgresSaver`` in one line.

    Each LangGraph checkpoint is one workingctx :class:`~workingctx.Checkpoint`.
    The *channel* (``"messages"`` by default) is its transcript, so each
    message is stored once, by digest, and checked against its digest on load;
    a channel value that is not a list of LangChain messages, or that LangChain
    would not give back equal, goes through the serializer like every other
    channel. A store thread per LangGraph thread and namespace keeps the order
    checkpoints were put in, with a compare-and-set head, so writers sharing a
    thread on PostgreSQL or Redis lose nothing; so does a store thread per
    checkpoint for its pending writes, one record per ``put_writes``, whose
    transcript continues the checkpoint's.

    Args:
        store: Any workingctx store: :class:`~workingctx.InMemoryStore`,
            :class:`~workingctx.SQLiteStore`, ``PostgresStore``, ``RedisStore``.
        serde: LangGraph's serializer for the other channels and the writes
            (LangGraph's default when None). With an ``EncryptedSerializer``
            every channel and write, messages included, goes through it, so
            the store holds no message in the clear (and no transcript).
        channel: The channel kept as a transcript.

    Raises:
        TypeError: *store* is not a checkpoint store.

    Every method raises :class:`~workingctx.exceptions.CheckpointError`,
    naming the thread and the checkpoint id, when the store holds something
    other than a LangGraph checkpoint where one is expected or a damaged
    transcript, and when a put continues a checkpoint the thread does not
    hold; nothing is written then. The async methods run the store's calls in
    a worker thread.
    """

    def __init__(
        self, store: CheckpointStore, *, serde: SerializerProtocol | None = None, channel: str = "messages"
    ) -> None:
        if not isinstance(store, CheckpointStore):
            msg = (
                f"ContextSaver takes a workingctx checkpoint store (InMemoryStore, SQLiteStore, PostgresStore, "
                f"RedisStore), got {store!r} of type {type(store).__name__}"
            )
            raise ArgumentTypeError(msg, argument="store", value=store, expected="a workingctx checkpoint store")
        super().__init__(serde=serde)
        self.store = store
        self.channel = channel
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # notified when a put ends or has its transcript
        self._heads: dict[str, str | None] = {}  # store thread -> the head this saver last saw or wrote
        # store thread -> the turn of this saver's threads to save to it, and how many want it (see _turn)
        self._turns: dict[str, tuple[threading.Lock, list[int]]] = {}
        # head key -> (key, id) of the newest LangGraph checkpoint (the greatest id) up to it
        self._latest: dict[str, tuple[str, str]] = {}
        self._cached: dict[str, _Cached] = {}  # log name -> the last transcript put there
        # log name -> the checkpoint this saver last saved there: read back from memory while it is the head
        self._saved: dict[str, tuple[Checkpoint, _Cached | None]] = {}
        # checkpoint key -> a live context holding its transcript channel: its pending writes continue it
        self._bases: OrderedDict[str, WorkingContext] = OrderedDict()
        self._converting: set[str] = set()  # keys of the checkpoints whose puts are making their transcripts
        self._putting: dict[str, int] = {}  # log name -> how many puts to it are under way
        self._ended: dict[str, float] = {}  # log name -> when the last put to it ended (time.monotonic)
        # writes store thread -> (its head, the ids of its records in order), as this saver last saw it
        self._record_ids: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._records: OrderedDict[str, _Record] = OrderedDict()  # record id -> the record, read

    def __repr__(self) -> str:
        return f"ContextSaver({self.store!r}, channel={self.channel!r})"

    # -- config ---------------------------------------------------------------------

    @staticmethod
    def _ids(config: RunnableConfig) -> tuple[str, str, str | None]:
        configurable = config.get("configurable") or {}
        if "thread_id" not in configurable:
            msg = f"a LangGraph config names its thread: config['configurable']['thread_id'] is missing in {config!r}"
            raise CheckpointError(msg, path="$.configurable.thread_id")
        checkpoint_id = configurable.get("checkpoint_id")
        return (
            str(configurable["thread_id"]),
            str(configurable.get("checkpoint_ns") or ""),
            None if checkpoint_id is None else str(checkpoint_id),
        )

    @staticmethod
    def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}

    # -- saving ---------------------------------------------------------------------

    def _transcript(self, log: str, value: list[Any]) -> WorkingContext | None:
        """
        A live context holding *value*'s messages, or None when LangChain would
        not give one of them back equal (the channel is serialized instead).
        """
        with self._lock:
            cached = self._cached.get(log)
        start = len(cached.objects) if cached is not None and cached.continued_by(value) else 0
        if not _is_messages(value[start:]):
            return None
        converted = _convert(value[start:])
        if converted is None:
            return None
        if start and cached is not None:
            ctx = cached.ctx.fork()
            ctx.extend(converted)
        else:
            ctx = WorkingContext(messages=converted)
        # the digest chain is computed here, once: the next put's fork shares it and hashes only what it adds
        ctx.digest()
        with self._lock:
            self._cached[log] = _Cached(list(value), ctx, cached, start)
        return ctx.fork()

    def _loads(self, value: Any) -> Any:
        """
        A value the serializer wrote, from its ``[type, base64]`` pair.

        Raises:
            ValueError: The pair is damaged, or the serializer cannot read it
                (an unknown type, bytes it cannot decode or decrypt), whatever
                it raised.
        """
        typed = _decode(value)
        try:
            return self.serde.loads_typed(typed)
        except Exception as exc:  # a serializer raises what it likes: reported as damage
            msg = f"the serializer cannot read a stored {typed[0]!r} value ({type(exc).__name__}: {exc})"
            raise ValueError(msg) from exc

    def _encrypted(self) -> bool:
        """
        Whether the serializer encrypts (LangGraph's ``EncryptedSerializer``):
        then no channel or write is kept as a transcript, whose messages the
        store holds as they are; every value goes through the serializer.
        """
        return isinstance(self.serde, EncryptedSerializer)

    def _carry(self, value: Any) -> list[tuple[str | None, list[Message]]] | None:
        """
        The messages of a value that is a list of LangChain messages (or a dict
        of such lists, as a graph's input is), converted, each list with its
        key; None for any other value, or when LangChain would not give one
        back equal, or when the serializer encrypts (the value is serialized instead).
        """
        if self._encrypted():
            return None
        if _is_messages(value):
            parts: list[tuple[str | None, list[Any]]] = [(None, value)]
        elif type(value) is dict and value and all(type(k) is str and _is_messages(v) for k, v in value.items()):
            parts = list(value.items())
        else:
            return None
        out: list[tuple[str | None, list[Message]]] = []
        for key, items in parts:
            converted = _convert(items)
            if converted is None:
                return None
            out.append((key, converted))
        return out

    def _head(self, name: str, *, fresh: bool = False) -> str | None:
        with self._lock:
            if not fresh and name in self._heads:
                return self._heads[name]
        head = self.store.head(name)
        with self._lock:
            self._heads[name] = head
        return head

    def _save_to(self, name: str, build: Any, what: str) -> Checkpoint:
        """
        Save the checkpoint ``build(parent)`` makes to the store thread *name*,
        continuing its head; on a lost race, continue the new head and save again.
        """
        with self._turn(name):
            head = self._head(name)
            for _ in range(_RETRIES):
                checkpoint: Checkpoint = build(head)
                try:
                    self.store.save(checkpoint, thread=name)
                except HeadConflictError as exc:
                    head = exc.actual
                    with self._lock:
                        self._heads[name] = head
                    continue
                with self._lock:
                    self._heads[name] = checkpoint.id
                return checkpoint
        msg = (
            f"cannot save {what}: the head of store thread {name!r} kept moving ({_RETRIES} tries); nothing was written"
        )
        raise CheckpointError(msg, path="$.parent")

    @contextlib.contextmanager
    def _turn(self, name: str) -> Iterator[None]:
        """
        This saver's turn to save to the store thread *name*: its threads (a
        step's tasks putting their writes to one checkpoint) take turns, each
        continuing the head the one before saved. Racing instead, all but one
        would lose each round and save again: with many, the last would run
        out of tries. Only other savers' writers can still move the head first.
        """
        with self._lock:
            lock, waiting = self._turns.setdefault(name, (threading.Lock(), [0]))
            waiting[0] += 1
        try:
            with lock:
                yield
        finally:
            with self._lock:
                waiting[0] -= 1
                if not waiting[0]:
                    del self._turns[name]

    def _split(self, log: str, channel_values: Mapping[str, Any]) -> tuple[WorkingContext, dict[str, Any], list[Any]]:
        """
        A context whose transcript holds the checkpoint's messages (the
        *channel* first, then those other channels carry), the channels left
        to serialize, and where each carried channel lies in the transcript.
        """
        values = dict(channel_values)
        ctx: WorkingContext | None = None
        carried: list[list[Any]] = []
        if self.channel in values and type(values[self.channel]) is list and not self._encrypted():
            ctx = self._transcript(log, values[self.channel])
            if ctx is not None:
                carried.append([self.channel, [[None, 0, ctx.size()]]])
                del values[self.channel]
        ctx = WorkingContext() if ctx is None else ctx
        for channel in sorted(values):  # other channels holding messages (a graph's input) share them too
            parts = self._carry(values[channel])
            if parts is not None:
                spec, _ = _spec(parts, ctx.size())
                ctx.extend(message for _, messages in parts for message in messages)
                carried.append([channel, spec])
                del values[channel]
        return ctx, values, carried

    def _state_note(
        self, checkpoint: Mapping[str, Any], values: dict[str, Any], checkpoint_id: str, created_at: datetime
    ) -> dict[str, Any]:
        """
        What a checkpoint's note keeps of it besides its transcript: its
        bookkeeping (channel versions, versions seen) as JSON when JSON gives
        it back equal, as LangGraph's ``PostgresSaver`` keeps it, without the
        id and the time the store's record holds already; the other channels'
        values serialized. Otherwise the whole checkpoint, serialized.
        """
        state = {key: value for key, value in checkpoint.items() if key != "channel_values"}
        if state.get("id") == checkpoint_id:
            del state["id"]
        if "ts" in state and state["ts"] == _iso(created_at):
            del state["ts"]
        if not _json_exact(state):
            return {"checkpoint": _encode(self.serde.dumps_typed({**checkpoint, "channel_values": values}))}
        return {"state": state, "values": _encode(self.serde.dumps_typed(values))} if values else {"state": state}

    def _read_state(self, note: Mapping[str, Any], checkpoint_id: str, created_at: datetime) -> dict[str, Any]:
        """
        The checkpoint :meth:`_state_note` kept, its transcript's channels still to add.
        """
        if "state" in note:
            checkpoint = {"id": checkpoint_id, "ts": _iso(created_at), **thaw(note["state"])}
            checkpoint["channel_values"] = self._loads(note["values"]) if "values" in note else {}
        else:  # the first layout, and a checkpoint JSON cannot carry
            checkpoint = self._loads(note["checkpoint"])
        if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("channel_values"), dict):
            msg = f"its serialized checkpoint is a {type(checkpoint).__name__}, not a LangGraph checkpoint"
            raise TypeError(msg)
        return checkpoint

    def put(
        self,
        config: RunnableConfig,
        checkpoint: GraphCheckpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,  # noqa: ARG002  # every channel is kept whole: versions need no blobs
    ) -> RunnableConfig:
        """
        Store a checkpoint: its transcript adds only the messages the store lacks.

        Raises:
            CheckpointError: The config names a parent checkpoint the thread does
                not hold, or the store refused the checkpoint; nothing was written.
        """
        thread_id, ns, parent_id = self._ids(config)
        log = _log_name(thread_id, ns)
        with self._lock:
            self._putting[log] = self._putting.get(log, 0) + 1
        try:
            return self._put(config, thread_id, ns, parent_id, checkpoint, metadata)
        finally:
            with self._lock:
                self._putting[log] -= 1
                if not self._putting[log]:
                    del self._putting[log]
                self._ended[log] = time.monotonic()
                self._changed.notify_all()

    def _put(
        self,
        config: RunnableConfig,
        thread_id: str,
        ns: str,
        parent_id: str | None,
        checkpoint: GraphCheckpoint,
        metadata: CheckpointMetadata,
    ) -> RunnableConfig:
        checkpoint_id = str(checkpoint["id"])
        log = _log_name(thread_id, ns)
        key = _checkpoint_key(thread_id, ns, checkpoint_id)
        where = f"checkpoint {checkpoint_id!r} of thread {thread_id!r} (namespace {ns!r})"
        ctx, values, carried, transcript = self._prepare(thread_id, ns, parent_id, key, checkpoint, where)
        created_at = _timestamp(checkpoint.get("ts"))
        graph_metadata = dict(get_serializable_checkpoint_metadata(config, metadata))
        as_json = _json_exact(graph_metadata)
        note = {**self._state_note(checkpoint, values, checkpoint_id, created_at), "carried": carried}
        if not as_json:
            note["metadata"] = _encode(self.serde.dumps_typed(graph_metadata))
        ctx.note(_NOTE, note)
        snapshot = ctx.freeze()
        tag = {
            "kind": "checkpoint",
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
            "parent_checkpoint_id": parent_id,
            "metadata": graph_metadata if as_json else None,
        }

        def build(head: str | None) -> Checkpoint:
            parent = head
            if head == key:  # put again: it keeps its place in the thread
                lineage = self.store.lineage(key)
                parent = lineage[-2].id if len(lineage) > 1 else None
            return Checkpoint(id=key, snapshot=snapshot, created_at=created_at, parent=parent, metadata={_TAG: tag})

        try:
            known = self._put_again(thread_id, ns, key, checkpoint_id)
            if known is not None:  # an older checkpoint put again is replaced where it is, never moved
                saved = Checkpoint(
                    id=key, snapshot=snapshot, created_at=created_at, parent=known.parent_key, metadata={_TAG: tag}
                )
                self.store.save(saved)
                return self._config(thread_id, ns, checkpoint_id)
            saved = self._save_to(log, build, where)
            with self._lock:
                self._saved[log] = (saved, transcript)
        except CheckpointError as exc:
            msg = f"cannot put {where}: {exc}"
            raise CheckpointError(msg, path=exc.path) from exc
        with self._lock:
            before = None if saved.parent is None else self._latest.get(saved.parent)
            if before is not None:
                self._latest[key] = before if before[1] > checkpoint_id else (key, checkpoint_id)
            elif saved.parent is None:
                self._latest[key] = (key, checkpoint_id)
            # else another writer put the checkpoint before it: the newest is read from the thread when asked
            # a checkpoint this saver just wrote has no writes yet: its first put_writes needs no head
            self._heads.setdefault(_writes_name(thread_id, ns, checkpoint_id), None)
        return self._config(thread_id, ns, checkpoint_id)

    def _prepare(
        self, thread_id: str, ns: str, parent_id: str | None, key: str, checkpoint: GraphCheckpoint, where: str
    ) -> tuple[WorkingContext, dict[str, Any], list[Any], _Cached | None]:
        """
        Check a put's parent and split its channels (see :meth:`_split`); also
        the transcript it made, when the channel is one, remembered for the
        checkpoint's writes (see :meth:`_base`).
        """
        log = _log_name(thread_id, ns)
        with self._lock:
            self._converting.add(key)
        try:
            if parent_id is not None and not self._holds(thread_id, ns, parent_id):
                msg = (
                    f"cannot put {where}: its parent checkpoint {parent_id!r} is not in the thread; "
                    "continue from a checkpoint get_tuple or list returns. Nothing was written"
                )
                raise CheckpointError(msg, path="$.configurable.checkpoint_id")
            ctx, values, carried = self._split(log, checkpoint["channel_values"])
            with self._lock:
                transcript = self._cached.get(log) if carried and carried[0][0] == self.channel else None
            self._remember_base(key, None if transcript is None else transcript.ctx)
        finally:
            with self._lock:
                self._converting.discard(key)
                self._changed.notify_all()
        return ctx, values, carried, transcript

    def _base(self, log: str, key: str, checkpoint_id: str) -> WorkingContext | None:
        """
        The transcript channel of checkpoint *key*, which its writes continue,
        or None when this saver does not hold it.

        LangGraph puts a checkpoint once the one before it is saved, and may
        put a task's writes first, from another thread: while the checkpoint's
        put is making its transcript, or a put to the same thread is under way
        and the checkpoint is newer than any this saver saved there, this
        waits for it (a few milliseconds: the writes share its links then).
        A put that ended a moment ago counts as under way: the next one may
        not have started yet.
        """
        deadline = time.monotonic() + _WAIT
        with self._changed:
            ended = self._ended.get(log)
            grace = None if ended is None or not self._newer(log, checkpoint_id) else ended + _GRACE
            while (base := self._bases.get(key)) is None:
                now = time.monotonic()
                if key in self._converting or (self._putting.get(log) and self._newer(log, checkpoint_id)):
                    grace = now + _GRACE  # once no put is under way, the next may still take a moment to start
                    until = deadline
                elif grace is not None and now < grace:
                    until = grace
                else:
                    return None
                if now >= deadline:
                    return None
                self._changed.wait(min(until, deadline) - now)
        return base

    def _newer(self, log: str, checkpoint_id: str) -> bool:
        """
        Whether *checkpoint_id* is newer than the newest checkpoint this saver
        knows in *log* (the caller holds the lock).
        """
        head = self._heads.get(log)
        latest = None if head is None else self._latest.get(head)
        return latest is None or checkpoint_id > latest[1]

    def _remember_base(self, key: str, ctx: WorkingContext | None) -> None:
        """
        Remember the transcript channel of checkpoint *key* (forget it with None):
        its pending writes' messages continue it, so the store shares their links
        with the checkpoint's and with the next checkpoint's, which usually
        holds the same messages in the same order.
        """
        with self._lock:
            self._bases.pop(key, None)
            if ctx is not None:
                self._bases[key] = ctx
                while len(self._bases) > _BASES:
                    self._bases.popitem(last=False)
            self._changed.notify_all()

    def _put_again(self, thread_id: str, ns: str, key: str, checkpoint_id: str) -> _Entry | None:
        """
        The thread's entry for *key* when a put repeats a checkpoint older than
        the thread's newest (LangGraph's ids grow, so a new checkpoint is never
        older, and costs no lookup); None otherwise.
        """
        with self._lock:
            head = self._heads.get(_log_name(thread_id, ns))
            latest = None if head is None else self._latest.get(head)
        if latest is None:  # a thread this saver has not read, or another writer put to: read its newest
            latest = self._latest_key(thread_id, ns)
        if latest is None or checkpoint_id >= latest[1]:
            return None
        return next((entry for entry in self._log(thread_id, ns)[:-1] if entry.key == key), None)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """
        Store the writes of one task, linked to a checkpoint. A write already
        stored under the same task and index is kept (the first one wins); the
        special channels (errors, interrupts, ...) overwrite, as LangGraph's rules say.
        """
        thread_id, ns, checkpoint_id = self._ids(config)
        if checkpoint_id is None:
            msg = f"put_writes needs config['configurable']['checkpoint_id'] (thread {thread_id!r})"
            raise CheckpointError(msg, path="$.configurable.checkpoint_id")
        base = self._base(_log_name(thread_id, ns), _checkpoint_key(thread_id, ns, checkpoint_id), checkpoint_id)
        # the written messages continue the checkpoint's transcript (when this saver holds it)
        ctx = WorkingContext() if base is None else base.fork()
        items: list[list[Any]] = []
        written: list[tuple[int, str, _Parts | None, tuple[str, str] | None]] = []  # the record, as read back
        for index, (channel, value) in enumerate(writes):
            parts = self._carry(value)
            number = WRITES_IDX_MAP.get(channel, index)
            if parts is None:
                kind, data = _encode(self.serde.dumps_typed(value))
                items.append([number, channel, kind, data])
                written.append((number, channel, None, (kind, data)))
            else:  # messages written to a channel share the transcript's items
                spec, _ = _spec(parts, ctx.size())
                ctx.extend(message for _, messages in parts for message in messages)
                items.append([number, channel, "carried", spec])
                written.append((number, channel, tuple((k, tuple(m)) for k, m in parts), None))
        if not items:
            return
        ctx.note(_NOTE, {"task_id": str(task_id), "task_path": str(task_path), "writes": items})
        snapshot = ctx.freeze()
        name = _writes_name(thread_id, ns, checkpoint_id)
        key = _record_key()
        now = datetime.now(UTC)
        with self._lock:
            # a checkpoint's writes seldom have a store thread yet (its put may still be under way): save
            # this record as the first without asking; when another is there, the save says so and continues it
            self._heads.setdefault(name, None)
        saved = self._save_to(
            name,
            # the store thread names the checkpoint, the note the task: the tag only says what the record is
            lambda head: Checkpoint(id=key, snapshot=snapshot, created_at=now, parent=head, metadata=_WRITES_TAG),
            f"the writes of task {task_id!r} for checkpoint {checkpoint_id!r} of thread {thread_id!r}",
        )
        with self._lock:
            self._remember_record(key, _Record(str(task_id), str(task_path), tuple(written)))
            known = self._record_ids.get(name)
            if saved.parent is None:
                self._record_ids[name] = (key, (key,))
            elif known is not None and known[0] == saved.parent:
                self._record_ids[name] = (key, (*known[1], key))

    # -- loading --------------------------------------------------------------------

    def _log(self, thread_id: str, ns: str) -> list[_Entry]:
        """
        The checkpoints put to a thread and namespace, in the order they were put.
        """
        name = _log_name(thread_id, ns)
        head = self.store.head(name)
        with self._lock:
            self._heads[name] = head
        if head is None:
            return []
        entries = []
        for info in self.store.lineage(head):
            entry = _entry(info)
            if entry is None:
                msg = (
                    f"store thread {name!r} of LangGraph thread {thread_id!r} (namespace {ns!r}) holds checkpoint "
                    f"{info.id!r}, which is not a LangGraph checkpoint; use another store, or another thread id"
                )
                raise CheckpointError(msg, path="$.metadata.langgraph")
            entries.append(entry)
        return entries

    def _holds(self, thread_id: str, ns: str, checkpoint_id: str) -> bool:
        key = _checkpoint_key(thread_id, ns, checkpoint_id)
        with self._lock:
            head = self._heads.get(_log_name(thread_id, ns))
            if head is not None and key in {head, self._latest.get(head, (None,))[0]}:
                return True
        return any(entry.key == key for entry in self._log(thread_id, ns))

    def _latest_key(self, thread_id: str, ns: str) -> tuple[str, str] | None:
        """
        The key and id of the thread's newest checkpoint (the greatest id, as LangGraph orders them).
        """
        head = self._head(_log_name(thread_id, ns), fresh=True)
        if head is None:
            return None
        with self._lock:
            known = self._latest.get(head)
        if known is not None:
            return known
        entries = self._log(thread_id, ns)
        if not entries:
            return None
        newest = max(entries, key=lambda entry: entry.checkpoint_id)
        with self._lock:
            self._latest[entries[-1].key] = (newest.key, newest.checkpoint_id)
        return newest.key, newest.checkpoint_id

    def _load(
        self, thread_id: str, ns: str, checkpoint_id: str, *, head: str | None = None, resume: bool = False
    ) -> CheckpointTuple:
        """
        A checkpoint as LangGraph reads it. When *head* (the thread's head, just
        read) is the checkpoint this saver saved last, it is read from memory,
        as the store keeps the items it wrote; its pending writes always come
        from the store. With *resume* (a run continues from it), the
        transcript is remembered, so the run's next put adds only its new messages.
        """
        key = _checkpoint_key(thread_id, ns, checkpoint_id)
        where = f"checkpoint {checkpoint_id!r} of LangGraph thread {thread_id!r} (namespace {ns!r})"
        with self._lock:
            mine, transcript = self._saved.get(_log_name(thread_id, ns), (None, None))
        if mine is None or not head == mine.id == key:
            mine, transcript = None, None
        try:
            saved = mine if mine is not None else self.store.load(key)
        except CheckpointError as exc:
            msg = f"cannot load {where}: {exc}"
            raise CheckpointError(msg, path=exc.path) from exc
        try:
            return self._tuple(saved, thread_id, ns, checkpoint_id, transcript=transcript, resume=resume)
        except CheckpointError as exc:  # a damaged record of its writes
            msg = f"cannot load the pending writes of {where}: {exc}"
            raise CheckpointError(msg, path=exc.path) from exc
        except (KeyError, TypeError, ValueError) as exc:
            msg = (
                f"cannot load {where}: store checkpoint {key!r} is not a LangGraph checkpoint ContextSaver "
                f"wrote ({type(exc).__name__}: {exc}); nothing was changed"
            )
            raise CheckpointError(msg, path="$.snapshot.scratchpad.langgraph") from exc

    def _tuple(
        self,
        saved: Checkpoint,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        *,
        transcript: _Cached | None = None,
        resume: bool = False,
    ) -> CheckpointTuple:
        tag = saved.metadata.get(_TAG)
        if not isinstance(tag, Mapping) or tag.get("kind") != "checkpoint":
            msg = "its metadata has no langgraph checkpoint record"
            raise ValueError(msg)
        if [tag.get("thread_id"), tag.get("checkpoint_ns"), tag.get("checkpoint_id")] != [thread_id, ns, checkpoint_id]:
            msg = f"its record names another checkpoint: {dict(thaw(tag))!r}"
            raise ValueError(msg)
        note = dict(saved.snapshot.scratchpad)[_NOTE]
        checkpoint = self._read_state(note, checkpoint_id, saved.created_at)
        for channel, spec in note["carried"]:
            checkpoint["channel_values"][channel] = self._carried(
                saved.snapshot.messages, channel, spec, _log_name(thread_id, ns), saved.id, transcript, resume=resume
            )
        serialized = "metadata" in note
        metadata = self._loads(note["metadata"]) if serialized else thaw(tag["metadata"])
        if not isinstance(metadata, dict):
            msg = f"its metadata is a {type(metadata).__name__}, not a dict"
            raise TypeError(msg)
        parent_id = tag.get("parent_checkpoint_id")
        return CheckpointTuple(
            config=self._config(thread_id, ns, checkpoint_id),
            checkpoint=checkpoint,  # type: ignore[arg-type]  # a dict, checked above
            metadata=metadata,  # type: ignore[arg-type]  # a dict, checked above
            parent_config=None if parent_id is None else self._config(thread_id, ns, parent_id),
            pending_writes=self._writes(thread_id, ns, checkpoint_id),
        )

    def _carried(
        self,
        messages: Sequence[Message],
        channel: str,
        spec: Any,
        log: str,
        key: str,
        transcript: _Cached | None,
        *,
        resume: bool,
    ) -> Any:
        """
        A carried channel's value, new objects on every read, as LangGraph's
        own savers give: a reader, or the run resuming from it, that edits a
        message in place changes no other read's messages, nor the run's that
        put them. The transcript channel is copied from *transcript* when it
        still holds it unchanged (the LangChain messages the last put was
        given); otherwise it is built anew. With *resume* the value is
        remembered, so the run's next put finds its messages converted.
        """
        main = channel == self.channel and len(spec) == 1 and spec[0][0] is None and spec[0][1] == 0
        if main and transcript is not None and transcript.holds(messages, spec[0][2]):
            copies = list(map(_fresh, transcript.objects))
            if resume:
                with self._lock:
                    self._cached[log] = _Cached(copies, transcript.ctx, transcript, len(copies))
            return copies
        value = _restore(messages, spec)
        if main and resume:
            ctx = WorkingContext(messages=list(messages[: spec[0][2]]))
            ctx.digest()
            with self._lock:
                self._cached[log] = _Cached(list(value), ctx)
            self._remember_base(key, ctx)
        return value

    def _write_records(self, thread_id: str, ns: str, checkpoint_id: str) -> builtins.list[str]:
        """
        The ids of the pending-writes records of a checkpoint, in the order they were put.
        """
        name = _writes_name(thread_id, ns, checkpoint_id)
        head = self.store.head(name)
        with self._lock:
            known = self._record_ids.get(name)
        if head is None:
            return []
        if known is not None and known[0] == head:
            return list(known[1])
        ids = tuple(info.id for info in self.store.lineage(head))
        with self._lock:
            self._record_ids[name] = (head, ids)
        return list(ids)

    def _remember_record(self, key: str, record: _Record) -> None:
        """
        Keep a record read or written (the caller holds the lock).
        """
        self._records[key] = record
        self._records.move_to_end(key)
        while len(self._records) > _REMEMBERED:
            self._records.popitem(last=False)

    def _record(self, key: str) -> _Record:
        """
        A pending-writes record: from memory once read or written (a record
        never changes: another gets a new id), else loaded, which reads the
        transcript it continues.
        """
        with self._lock:
            record = self._records.get(key)
            if record is not None:
                self._records.move_to_end(key)
                return record
        record = _Record.read(self.store.load(key).snapshot)
        with self._lock:
            self._remember_record(key, record)
        return record

    def _writes(self, thread_id: str, ns: str, checkpoint_id: str) -> builtins.list[tuple[str, str, Any]]:
        """
        The pending writes of a checkpoint, by LangGraph's rules, in ``writes_sort_key`` order.
        """
        kept: dict[tuple[str, int], tuple[str, str, Any]] = {}
        for key in self._write_records(thread_id, ns, checkpoint_id):
            record = self._record(key)
            for index, channel, parts, typed in record.writes:
                if index >= 0 and (record.task_id, index) in kept:
                    continue
                value = _value(parts) if parts is not None else self._loads(typed)
                kept[record.task_id, index] = (record.task_path, channel, value)
        ordered = sorted(kept.items(), key=lambda item: (item[1][0], item[0][0], item[0][1]))
        return [(task_id, channel, value) for (task_id, _), (_, channel, value) in ordered]

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """
        The checkpoint the config names, or the thread's newest one; None when there is none.

        Raises:
            CheckpointError: The store holds something else under that
                checkpoint, or its transcript is damaged (the error names the
                thread and the id).
        """
        thread_id, ns, checkpoint_id = self._ids(config)
        if checkpoint_id is None:
            latest = self._latest_key(thread_id, ns)
            if latest is None:
                return None
            with self._lock:
                head = self._heads.get(_log_name(thread_id, ns))
            return self._load(thread_id, ns, latest[1], head=head, resume=True)
        try:
            return self._load(thread_id, ns, checkpoint_id, resume=True)
        except CheckpointError:
            if not self._holds(thread_id, ns, checkpoint_id):
                return None  # LangGraph's contract: an id the thread does not hold reads as None
            raise

    def _entries(self, config: RunnableConfig | None) -> list[_Entry]:
        if config is None:
            return self._scan()
        thread_id, _, _ = self._ids(config)
        configurable = config.get("configurable") or {}
        if "checkpoint_ns" in configurable:
            return self._log(thread_id, str(configurable["checkpoint_ns"] or ""))
        return [entry for ns in self._namespaces(thread_id) for entry in self._log(thread_id, ns)]

    def _scan(self) -> list[_Entry]:
        """
        Every LangGraph checkpoint in the store.
        """
        return [entry for entry in map(_entry, self.store.list()) if entry is not None]

    def _namespaces(self, thread_id: str) -> list[str]:
        return sorted({entry.ns for entry in self._scan() if entry.thread_id == thread_id})

    def _metadata_of(self, entry: _Entry) -> Any:
        if isinstance(entry.metadata, Mapping):
            return entry.metadata
        if entry.metadata is not None:
            msg = (
                f"cannot read the metadata of checkpoint {entry.checkpoint_id!r} of LangGraph thread "
                f"{entry.thread_id!r} (namespace {entry.ns!r}): store checkpoint {entry.key!r} holds a "
                f"{type(entry.metadata).__name__}, not a dict"
            )
            raise CheckpointError(msg, path="$.metadata.langgraph.metadata")
        return self._load(entry.thread_id, entry.ns, entry.checkpoint_id).metadata

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002  # LangGraph's name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """
        The checkpoints of a thread (all threads when *config* is None), newest
        first; *filter* keeps those whose metadata holds its items, *before*
        those older than a checkpoint, *limit* the first so many.
        """
        entries = self._entries(config)
        wanted = None if config is None else get_checkpoint_id(config)
        cursor = None if before is None else get_checkpoint_id(before)
        chosen = [
            entry
            for entry in entries
            if (wanted is None or entry.checkpoint_id == wanted) and (cursor is None or entry.checkpoint_id < cursor)
        ]
        chosen.sort(key=lambda entry: entry.checkpoint_id, reverse=True)
        count = 0
        for entry in chosen:
            if limit is not None and count >= limit:
                return
            if filter:
                metadata = self._metadata_of(entry)
                if not all(metadata.get(k) == v for k, v in filter.items()):
                    continue
            count += 1
            yield self._load(entry.thread_id, entry.ns, entry.checkpoint_id)

    # -- removing and copying -----------------------------------------------------------

    def _drop_writes(self, thread_id: str, ns: str, checkpoint_id: str) -> None:
        for key in reversed(self._write_records(thread_id, ns, checkpoint_id)):
            self.store.delete(key)
        name = _writes_name(thread_id, ns, checkpoint_id)
        with self._lock:
            self._heads.pop(name, None)
            self._record_ids.pop(name, None)
            self._bases.pop(_checkpoint_key(thread_id, ns, checkpoint_id), None)

    def _remove(self, thread_id: str, ns: str, doomed: set[str]) -> None:
        """
        Delete the checkpoints of a thread and namespace whose keys are in
        *doomed*, with their writes; the survivors are linked again in the
        order they were put, so the thread lists them all.
        """
        entries = self._log(thread_id, ns)
        for entry in reversed(entries):
            if entry.key in doomed:
                self._drop_writes(thread_id, ns, entry.checkpoint_id)
                self.store.delete(entry.key)
        survivors = [entry for entry in entries if entry.key not in doomed]
        previous: str | None = None
        for entry in survivors:
            if entry.parent_key != previous:
                self.store.save(attrs.evolve(self.store.load(entry.key), parent=previous))
            previous = entry.key
        name = _log_name(thread_id, ns)
        if survivors and self.store.head(name) != previous:
            self.store.save(self.store.load(survivors[-1].key), thread=name)
        with self._lock:
            self._heads.pop(name, None)
            self._cached.pop(name, None)
            self._saved.pop(name, None)
            for entry in entries:
                self._latest.pop(entry.key, None)

    def delete_thread(self, thread_id: str) -> None:
        """
        Delete every checkpoint and write of a thread, in every namespace; what
        no other checkpoint uses (messages included) leaves the store.
        """
        thread_id = str(thread_id)
        for ns in self._namespaces(thread_id):
            self._remove(thread_id, ns, {entry.key for entry in self._log(thread_id, ns)})

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """
        Delete the checkpoints (and their writes) whose metadata names one of *run_ids*.

        Raises:
            ArgumentTypeError: *run_ids* is one str, not a sequence of them.
        """
        runs = {str(run) for run in _ids_of("delete_for_runs", "run_ids", run_ids)}
        if not runs:
            return
        doomed: dict[tuple[str, str], set[str]] = {}
        for entry in self._scan():
            run = self._metadata_of(entry).get("run_id")
            if run is not None and str(run) in runs:
                doomed.setdefault((entry.thread_id, entry.ns), set()).add(entry.key)
        for (thread_id, ns), keys in doomed.items():
            self._remove(thread_id, ns, keys)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """
        Keep only the newest checkpoint of each namespace of each thread
        (``"keep_latest"``), or none (``"delete"``). Messages only the pruned
        checkpoints used leave the store; a message a kept checkpoint holds stays.

        As in LangGraph's ``PostgresSaver``, a subgraph call's namespace (its
        task id after a ``:``) goes whole with the checkpoint the call started
        from, once that one is pruned: each call has a namespace of its own,
        which would keep a checkpoint forever. A ``checkpointer=True``
        subgraph's namespace keeps its newest.

        Raises:
            ArgumentTypeError: *thread_ids* is one str, not a sequence of them.
            ValueError: An unknown *strategy*.
            NotImplementedError: ``"keep_latest"`` would keep a checkpoint
                whose ``DeltaChannel`` LangGraph rebuilds from the checkpoints
                before it (its metadata counts updates since the channel's
                last snapshot), as LangGraph's ``PostgresSaver`` refuses;
                nothing is pruned then.
        """
        thread_ids = [str(thread_id) for thread_id in _ids_of("prune", "thread_ids", thread_ids)]
        if strategy not in {"keep_latest", "delete"}:
            msg = f"prune's strategy is 'keep_latest' or 'delete', got {strategy!r}"
            raise ValueError(msg)
        plan: list[tuple[str, str, set[str]]] = []
        rebuilt: list[str] = []
        for thread_id in thread_ids:
            logs = {ns: self._log(thread_id, ns) for ns in self._namespaces(thread_id)}
            kept = self._newest(logs) if strategy == "keep_latest" else {}
            for ns, entries in logs.items():
                if ns in kept and self._metadata_of(kept[ns]).get("counters_since_delta_snapshot"):
                    rebuilt.append(thread_id)
                plan.append((thread_id, ns, {entry.key for entry in entries if entry is not kept.get(ns)}))
        if rebuilt:
            msg = (
                "prune(strategy='keep_latest') cannot prune threads whose newest checkpoint has a DeltaChannel "
                f"LangGraph rebuilds from the checkpoints before it: {', '.join(dict.fromkeys(rebuilt))}; "
                "nothing was pruned (strategy='delete' removes such a thread)"
            )
            raise NotImplementedError(msg)
        for thread_id, ns, doomed in plan:
            self._remove(thread_id, ns, doomed)

    def _newest(self, logs: Mapping[str, Sequence[_Entry]]) -> dict[str, _Entry]:
        """
        The checkpoint ``keep_latest`` keeps in each namespace of a thread (its
        newest), but none in a subgraph call's whose root checkpoint is pruned.
        """
        newest = {ns: max(entries, key=lambda entry: entry.checkpoint_id) for ns, entries in logs.items() if entries}
        roots = {entry.checkpoint_id for entry in logs.get("", ())}
        kept_root = newest[""].checkpoint_id if "" in newest else None
        kept = {}
        for ns, entry in newest.items():
            parents = self._metadata_of(entry).get("parents")
            root = parents.get("") if isinstance(parents, Mapping) else None
            if not (":" in ns and root in roots and root != kept_root):
                kept[ns] = entry
        return kept

    def delete_threads_before(self, when: datetime) -> builtins.list[str]:
        """
        Delete every thread whose newest checkpoint was made before *when*
        (timezone-aware), and return their ids, oldest first.
        """
        if not isinstance(when, datetime) or when.tzinfo is None:
            msg = f"delete_threads_before takes a timezone-aware datetime, got {when!r}; use datetime.now(UTC)"
            raise TypeError(msg)
        newest: dict[str, datetime] = {}
        for entry in self._scan():
            newest[entry.thread_id] = max(entry.created_at, newest.get(entry.thread_id, entry.created_at))
        old = sorted((at, thread_id) for thread_id, at in newest.items() if at < when)
        for _, thread_id in old:
            self.delete_thread(thread_id)
        return [thread_id for _, thread_id in old]

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """
        Copy every checkpoint and write of a thread to another thread, in order;
        the copies share the source's messages (nothing is stored twice).

        Raises:
            CheckpointError: The source holds something else than a LangGraph
                checkpoint or writes record where one is expected (the error
                names the thread and the checkpoint id); nothing is copied then.
        """
        source, target = str(source_thread_id), str(target_thread_id)
        copies: list[tuple[str, _Entry, Checkpoint, list[Checkpoint]]] = []
        for ns in self._namespaces(source):  # everything is read and checked before anything is written
            present = {entry.key for entry in self._log(target, ns)}
            for entry in self._log(source, ns):
                if _checkpoint_key(target, ns, entry.checkpoint_id) in present:
                    continue  # copied before: the target keeps its own
                copies.append((ns, entry, *self._copy_source(source, target, ns, entry)))
        for ns, entry, saved, records in copies:
            key = _checkpoint_key(target, ns, entry.checkpoint_id)
            tag = {**thaw(saved.metadata[_TAG]), "thread_id": target}
            self._save_to(
                _log_name(target, ns),
                lambda head, saved=saved, tag=tag, key=key: Checkpoint(
                    id=key, snapshot=saved.snapshot, created_at=saved.created_at, parent=head, metadata={_TAG: tag}
                ),
                f"the copy of checkpoint {entry.checkpoint_id!r} to thread {target!r}",
            )
            for record in records:
                record_tag = thaw(record.metadata[_TAG])
                if "thread_id" in record_tag:  # a record of the first layout names its thread
                    record_tag["thread_id"] = target
                record_key = _record_key()
                self._save_to(
                    _writes_name(target, ns, entry.checkpoint_id),
                    lambda head, record=record, record_tag=record_tag, record_key=record_key: Checkpoint(
                        id=record_key,
                        snapshot=record.snapshot,
                        created_at=record.created_at,
                        parent=head,
                        metadata={_TAG: record_tag},
                    ),
                    f"the copy of the writes of checkpoint {entry.checkpoint_id!r} to thread {target!r}",
                )

    def _copy_source(
        self, source: str, target: str, ns: str, entry: _Entry
    ) -> tuple[Checkpoint, builtins.list[Checkpoint]]:
        """
        A checkpoint :meth:`copy_thread` copies and the records of its writes, checked.
        """
        where = f"cannot copy checkpoint {entry.checkpoint_id!r} of LangGraph thread {source!r} (namespace {ns!r})"
        try:
            saved = self.store.load(entry.key)
            records = [self.store.load(key) for key in self._write_records(source, ns, entry.checkpoint_id)]
        except CheckpointError as exc:
            msg = f"{where} to thread {target!r}: {exc}; nothing was copied"
            raise CheckpointError(msg, path=exc.path) from exc
        for record in records:
            tag = record.metadata.get(_TAG)
            if not isinstance(tag, Mapping) or tag.get("kind") != "writes":
                msg = (
                    f"{where} to thread {target!r}: its pending writes hold store checkpoint {record.id!r}, "
                    "which is not a LangGraph writes record; nothing was copied"
                )
                raise CheckpointError(msg, path="$.metadata.langgraph")
        return saved, records

    # -- async ------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """
        :meth:`get_tuple`, run in a worker thread.
        """
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002  # LangGraph's name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """
        :meth:`list`, run in a worker thread.
        """
        found = await asyncio.to_thread(lambda: [*self.list(config, filter=filter, before=before, limit=limit)])
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: GraphCheckpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """
        :meth:`put`, run in a worker thread.
        """
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """
        :meth:`put_writes`, run in a worker thread.
        """
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """
        :meth:`delete_thread`, run in a worker thread.
        """
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """
        :meth:`delete_for_runs`, run in a worker thread.
        """
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """
        :meth:`copy_thread`, run in a worker thread.
        """
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """
        :meth:`prune`, run in a worker thread.
        """
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


def _ids_of(method: str, argument: str, ids: Sequence[str]) -> Sequence[str]:
    """
    *ids*, checked to be a sequence of ids: one str would be read as its characters.
    """
    if isinstance(ids, str):
        msg = f"{method} takes a list of ids, got the str {ids!r}; pass [{ids!r}]"
        raise ArgumentTypeError(msg, argument=argument, value=ids, expected="a list of ids")
    return ids


def _iso(when: datetime) -> str:
    """
    A checkpoint's time as LangGraph writes it (``datetime.now(UTC).isoformat()``).
    """
    return when.astimezone(UTC).isoformat()


def _timestamp(ts: object) -> datetime:
    if isinstance(ts, str):
        try:
            when = datetime.fromisoformat(ts)
        except ValueError:
            return datetime.now(UTC)
        if when.tzinfo is not None:
            return when
    return datetime.now(UTC)
