"""
Checkpoints: a snapshot made durable, and the way back to a live context.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs

from workingctx import _checks
from workingctx._canonical import EMPTY_ENTRIES, canonical_json, entries_digest
from workingctx.context import WorkingContext
from workingctx.exceptions import ArgumentTypeError, SerializationError
from workingctx.frozen import FrozenDict
from workingctx.serialization import structure
from workingctx.snapshot import FrozenContext

__all__ = ["Checkpoint", "checkpoint_id", "rehydrate"]


_ID_FIX = "pass a name of your own, or use Checkpoint.capture(ctx)"


def _id(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _checks.check_name(value, attribute.name, label=f"a checkpoint's {attribute.name}", fix=_ID_FIX)


def _opt_id(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        _id(inst, attribute, value)


_aware = _checks.aware_datetime(fix="use datetime.now(UTC) or attach a tzinfo")
_snapshot = _checks.instance_of(
    FrozenContext, "a FrozenContext", fix="use Checkpoint.capture(ctx) to take one from a live context"
)


def _metadata(value: object) -> FrozenDict:
    """
    Metadata is a JSON object of your own, deep-frozen: checked here, so any store can write it.
    """
    if isinstance(value, FrozenDict):
        items: object = dict(value)
    elif isinstance(value, Mapping):
        items = dict(value)
    else:
        raise _checks.wrong_type(value, "metadata", "a mapping (a JSON object)")
    try:
        return structure(items, FrozenDict)
    except SerializationError as exc:
        msg = f"metadata must be JSON data: {exc.problems[0][1]} at {exc.path.replace('$', 'metadata', 1)}"
        raise ArgumentTypeError(msg, argument="metadata", value=value, expected="JSON data") from None


def checkpoint_id(
    snapshot: FrozenContext,
    created_at: datetime,
    parent: str | None,
    metadata: Mapping[str, Any],
    *,
    journal_digest: str | None = None,
) -> str:
    """
    The id :meth:`Checkpoint.capture` gives: 32 hex digits of a sha256 over the
    snapshot's stable digest, the digest of its journal entries, the parent id,
    the creation time and the metadata.

    The same content captured at the same instant under the same parent gets
    the same id in every process, so saving it twice stores it once.
    *journal_digest*, when the caller has it (a live journal keeps it), must be
    ``entries_digest(snapshot.journal)``; it saves hashing the whole journal.
    """
    body = "|".join(
        (
            "checkpoint/v1",
            snapshot.digest(),
            entries_digest(snapshot.journal) if journal_digest is None else journal_digest,
            parent or "",
            created_at.isoformat(),
            canonical_json(dict(metadata)),
        )
    )
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@attrs.frozen(cache_hash=True)
class Checkpoint:
    """
    A durable record of a working context at one moment.

    Args:
        id: The name stores save it under. :meth:`capture` derives it from the
            content (see :func:`checkpoint_id`); any non-empty str of your own
            works too.
        snapshot: The frozen context.
        created_at: When it was taken (timezone-aware).
        parent: The id of the checkpoint this one continues, if any; stores
            follow it for :meth:`~CheckpointStore.lineage`.
        metadata: A JSON object of your own (deep-frozen), such as a turn
            number or a label.

    >>> from workingctx import Checkpoint, Message, WorkingContext
    >>> ctx = WorkingContext().append(Message("user", "hello"))
    >>> first = Checkpoint.capture(ctx, metadata={"turn": 1})
    >>> second = Checkpoint.capture(ctx.append(Message("assistant", "hi")), parent=first)
    >>> second.parent == first.id, len(second.snapshot.messages)
    (True, 2)
    """

    id: str = attrs.field(validator=_id)
    snapshot: FrozenContext = attrs.field(validator=_snapshot)
    created_at: datetime = attrs.field(validator=_aware)
    parent: str | None = attrs.field(default=None, validator=_opt_id)
    metadata: FrozenDict = attrs.field(factory=FrozenDict, converter=_metadata)
    # The journal's chain digests (see journal_chain), kept from the live journal
    # by capture() or computed once on first use: a value's own cache, never written or compared.
    _journal_chain: tuple[str, ...] | None = attrs.field(init=False, default=None, eq=False, repr=False)

    @classmethod
    def capture(
        cls,
        source: WorkingContext | FrozenContext,
        *,
        parent: Checkpoint | str | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | None = None,
    ) -> Checkpoint:
        """
        Take a checkpoint of a live context (or wrap a snapshot you already froze).

        Args:
            source: A :class:`~workingctx.WorkingContext` (frozen now) or a
                :class:`~workingctx.FrozenContext`.
            parent: The checkpoint this one continues, or its id.
            metadata: A JSON object of your own.
            created_at: The creation time; now (UTC) by default.

        Returns:
            The checkpoint, its id derived from its content.

        Raises:
            TypeError: *source* is neither kind of context, *parent* is not a
                checkpoint or an id, or *metadata* is not JSON data.
        """
        journal_chain: tuple[str, ...] | None = None
        if isinstance(source, WorkingContext):
            snapshot = source.freeze()
            journal_chain = source.journal._chain()[: len(snapshot.journal)]
        elif isinstance(source, FrozenContext):
            snapshot = source
        else:
            raise _checks.wrong_type(
                source, "source", "a WorkingContext or a FrozenContext", label="capture", verb="takes"
            )
        if isinstance(parent, Checkpoint):
            parent = parent.id
        elif parent is not None:
            expected = "a Checkpoint, its id (a non-empty str) or None"
            if not isinstance(parent, str):
                raise _checks.wrong_type(parent, "parent", expected)
            _checks.check_str(parent, "parent", nonempty=True, fix=f"parent must be {expected}")
        frozen_metadata = _metadata({} if metadata is None else metadata)
        when = datetime.now(UTC) if created_at is None else created_at
        _aware(None, attrs.fields(Checkpoint).created_at, when)
        checkpoint = cls(
            id=checkpoint_id(
                snapshot,
                when,
                parent,
                frozen_metadata,
                journal_digest=None
                if journal_chain is None
                else (journal_chain[-1] if journal_chain else EMPTY_ENTRIES),
            ),
            snapshot=snapshot,
            created_at=when,
            parent=parent,
            metadata=frozen_metadata,
        )
        if journal_chain is not None:
            object.__setattr__(checkpoint, "_journal_chain", journal_chain)
        if isinstance(source, WorkingContext) and source._history is not None:
            # a recorded context can restore(to=checkpoint.id) later
            source._history.captured[checkpoint.id] = len(source._history.entries)
        return checkpoint


def journal_chain(checkpoint: Checkpoint) -> Sequence[str]:
    """
    The chain digest after each of the checkpoint's journal entries, oldest
    first (the last is ``MutationJournal.digest()`` of its journal): stores
    link the entries by it. Computed once per checkpoint, and not at all for
    one captured from a live context (its journal keeps them).
    """
    chain = checkpoint._journal_chain
    if chain is None:
        known: list[str] = []
        entries_digest(checkpoint.snapshot.journal, known)
        chain = tuple(known)
        object.__setattr__(checkpoint, "_journal_chain", chain)
    return chain


def rehydrate(checkpoint: Checkpoint | FrozenContext) -> WorkingContext:
    """
    A live, writable :class:`~workingctx.WorkingContext` from a checkpoint.

    The prefix, the tail and the journal are the checkpoint's; the scratchpad
    is thawed at every depth, so a nested write works, and nothing written to
    the context reaches the checkpoint. The journal's entries start committed
    and stay frozen (a journal never rewrites an entry). Freezing the context straight away
    gives a snapshot equal to the checkpoint's, with the same digest.

    Args:
        checkpoint: A checkpoint, or a bare snapshot.

    Returns:
        A new live context.

    Raises:
        TypeError: *checkpoint* is neither.

    >>> from workingctx import Checkpoint, WorkingContext
    >>> from workingctx.persistence import rehydrate
    >>> saved = Checkpoint.capture(WorkingContext().note("plan", {"steps": ["a"]}))
    >>> ctx = rehydrate(saved)
    >>> ctx.get("plan")["steps"].append("b")
    >>> ctx.get("plan"), dict(saved.snapshot.scratchpad)
    ({'steps': ['a', 'b']}, {'plan': {'steps': ['a']}})
    """
    if isinstance(checkpoint, Checkpoint):
        snapshot = checkpoint.snapshot
    elif isinstance(checkpoint, FrozenContext):
        snapshot = checkpoint
    else:
        raise _checks.wrong_type(
            checkpoint, "checkpoint", "a Checkpoint or a FrozenContext", label="rehydrate", verb="takes"
        )
    return WorkingContext.from_snapshot(snapshot)
