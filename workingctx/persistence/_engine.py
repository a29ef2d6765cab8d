"""
The store protocol, implemented once: :class:`StoreEngine`, which every store
workingctx ships subclasses, giving only its driver.

What every store does alike is here: each public method checks its
arguments (a bad one is named, and nothing is read or written), a missing
checkpoint and a record that cannot be read are named the same way in
every store, and a lineage is put together from the records the backend
reads. A backend gives the rest: the method of each public one's name with a
leading underscore (``_save``, ``_load``, ``_list``, ...), which does the work
in one transaction of its own, and ``_place``, how its errors name it.
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import Callable
from typing import TYPE_CHECKING, Self, TypeVar

from workingctx import _checks
from workingctx.checkpoint import Checkpoint
from workingctx.exceptions import CheckpointError, HeadConflictError, SerializationError
from workingctx.persistence._codec import Damage
from workingctx.persistence.histories import ContextInfo, check_context_id, check_recorded
from workingctx.persistence.listing import Listing, listed
from workingctx.persistence.stores import CheckpointInfo

if TYPE_CHECKING:
    from workingctx.context import WorkingContext

__all__ = ["StoreEngine", "head_allows", "head_conflict"]

_Row = TypeVar("_Row")

_READ_FAILURES = (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError)
"""What building a checkpoint from damaged records may raise besides Damage, named by :meth:`StoreEngine._failure`."""


def _check_id(checkpoint_id: object) -> None:
    _checks.check_instance(checkpoint_id, "checkpoint_id", str, "a str", label="a checkpoint id", verb="is")
    if checkpoint_id and not _checks.holdable_name(checkpoint_id):
        _checks.check_name(checkpoint_id, "checkpoint_id", label="a checkpoint id", fix="pass the id of a checkpoint")


def _check_thread(thread: object, *, optional: bool = True) -> None:
    if thread is None and optional:
        return
    expected = "a non-empty str"
    if not isinstance(thread, str):
        raise _checks.wrong_type(thread, "thread", expected, label="a thread", verb="is named by")
    if not thread:
        raise _checks.wrong_value(thread, "thread", f"is named by {expected}", label="a thread")
    _checks.check_name(thread, "thread", label="a thread", fix="name the thread with text a store can hold")


def head_allows(current: str | None, checkpoint: Checkpoint) -> bool:
    """
    Whether a thread whose head is *current* may move to *checkpoint*: a new
    thread, the checkpoint's parent, or the checkpoint itself (saved again).
    """
    return current is None or current in {checkpoint.parent, checkpoint.id}


def head_conflict(thread: str, checkpoint: Checkpoint, actual: str | None) -> HeadConflictError:
    msg = (
        f"cannot save checkpoint {checkpoint.id!r} to thread {thread!r}: its head is {actual!r}, not the "
        f"checkpoint's parent {checkpoint.parent!r} (another writer saved first); load the head, continue "
        "from it and save again. Nothing was written"
    )
    return HeadConflictError(msg, thread=thread, expected=checkpoint.parent, actual=actual)


def _check_checkpoint(checkpoint: object) -> None:
    _checks.check_instance(
        checkpoint,
        "checkpoint",
        Checkpoint,
        "a Checkpoint",
        label="save",
        verb="takes",
        fix="make one with Checkpoint.capture(ctx)",
    )


class StoreEngine(abc.ABC):
    """
    What every store does alike (see the module): a backend subclasses it and gives its driver.
    """

    _place: str
    """How errors and listings name the store, such as ``"the SQLite store 'runs.db'"``."""

    # -- checkpoints ----------------------------------------------------------------

    def save(self, checkpoint: Checkpoint, *, thread: str | None = None) -> str:
        """
        Save *checkpoint* in one transaction and return its id; with *thread*,
        also move that thread's head to it, in the same transaction, if the
        head is still the checkpoint's parent (or the checkpoint itself).

        Only what the store does not hold yet is written: new messages, new
        links, a changed prefix or scratchpad. Saving a checkpoint again is a
        no-op; saving another under the same id replaces it.

        Raises:
            TypeError: *checkpoint* is not a :class:`Checkpoint`, or *thread* not a str.
            HeadConflictError: Another writer moved the thread's head first; nothing was written.
            StoreUnavailableError: A server store could not reach its server, or
                lost the connection; the save was applied whole or not at all.
            CheckpointError: A store that writes checkpoints out (all but
                :class:`InMemoryStore`) found a payload (scratchpad value,
                journal entry, metadata) that is not JSON data, is read-only,
                or its database failed; nothing was written.
        """
        _check_checkpoint(checkpoint)
        _check_thread(thread)
        self._save(checkpoint, thread)
        return checkpoint.id

    def load(self, checkpoint_id: str) -> Checkpoint:
        """
        The checkpoint saved under *checkpoint_id*, equal to the one saved.
        A store that writes checkpoints out reads it in one transaction, every
        part checked against its digest on the way in.

        Raises:
            CheckpointError: No checkpoint has that id, or what is stored is
                damaged, truncated or not ours; the message names the table or
                key and the path inside the checkpoint. Nothing is changed.
            StoreUnavailableError: A server store could not reach its server.
        """
        _check_id(checkpoint_id)
        return self._load(checkpoint_id)

    def list(self) -> Listing[CheckpointInfo]:
        """
        A descriptor of every checkpoint, oldest first (by creation time, then
        by the order they were saved in), read without loading any snapshot.

        A damaged record never hides the others: it is left out, and named in
        the listing's :attr:`~workingctx.persistence.Listing.damaged` with
        the error that loading it raises (and a warning is logged).
        """
        return self._list()

    def lineage(self, checkpoint_id: str) -> Listing[CheckpointInfo]:
        """
        The checkpoints from the root to *checkpoint_id*, itself included,
        oldest first, following parent ids while the parent is in the store.

        An ancestor whose record is damaged ends the walk: the lineage starts
        after it, and names it in :attr:`~workingctx.persistence.Listing.damaged`.

        Raises:
            CheckpointError: No checkpoint has that id, or its own record is damaged.
        """
        _check_id(checkpoint_id)
        return self._lineage(checkpoint_id)

    def head(self, thread: str) -> str | None:
        """
        The id of *thread*'s latest checkpoint, or None for a thread never saved to.

        Raises:
            TypeError: *thread* is not a str.
        """
        _check_thread(thread, optional=False)
        return self._head(thread)

    def delete(self, checkpoint_id: str) -> None:
        """
        Remove a checkpoint, and every message, link and blob no other
        checkpoint uses, in one transaction. Its children stay; their lineage
        then starts after it. A thread whose head it was goes back to its
        parent (or ends, when the parent is not in the store).

        Raises:
            CheckpointError: No checkpoint has that id, or the store is read-only.
        """
        _check_id(checkpoint_id)
        self._delete(checkpoint_id)

    # -- recorded contexts -----------------------------------------------------------

    def save_context(self, ctx: WorkingContext) -> str:
        """
        Save a recorded context as its history, under its id, in one transaction,
        and return the id.

        Entries are stored once each, keyed by the chain digest of the history up
        to them: saving again after a step writes only the new entries (and the
        context's record), and a fork shares every entry it inherited.

        Raises:
            TypeError: *ctx* is not a recorded context.
            CheckpointError: The history saved under that id is not the start of
                this one (another copy of the context went its own way), or
                the database failed; nothing was written.
        """
        check_recorded(ctx)
        return self._save_context(ctx)

    def load_context(self, context_id: str) -> WorkingContext:
        """
        Replay the history saved under *context_id*: a new live context, equal
        to the one saved (every entry checked against its digest, in a store
        that writes histories out).

        Raises:
            CheckpointError: No context has that id, or its history is damaged
                (the message says where); nothing is changed.
        """
        check_context_id(context_id)
        return self._load_context(context_id)

    def list_contexts(self) -> Listing[ContextInfo]:
        """
        A descriptor of every saved context, oldest first, read without replaying any.

        A damaged record never hides the others: it is left out, and named in
        the listing's :attr:`~workingctx.persistence.Listing.damaged`.
        """
        return self._list_contexts()

    def delete_context(self, context_id: str) -> None:
        """
        Remove a saved context, and every entry no other saved context shares.

        Raises:
            CheckpointError: No context has that id.
        """
        check_context_id(context_id)
        self._delete_context(context_id)

    # -- the rest ---------------------------------------------------------------------

    @abc.abstractmethod
    def close(self) -> None:
        """
        Let go of what the store holds open.
        """

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __contains__(self, checkpoint_id: object) -> bool:
        return _checks.holdable_name(checkpoint_id) and self._contains(checkpoint_id)

    @abc.abstractmethod
    def __len__(self) -> int: ...

    # -- what each store shares with its driver ------------------------------------------

    def _missing(self, checkpoint_id: object) -> CheckpointError:
        """
        The error for a checkpoint id the store does not hold.
        """
        msg = f"no checkpoint {checkpoint_id!r} in {self._place}; list() shows the ids it holds"
        return CheckpointError(msg, path="$.id")

    def _error(self, checkpoint_id: str, what: str, path: str) -> CheckpointError:
        """
        The error for a checkpoint that cannot be read: *what* is wrong, at *path* inside it.
        """
        msg = f"cannot load checkpoint {checkpoint_id!r} from {self._place}: {what} at {path}; nothing was changed"
        return CheckpointError(msg, path=path)

    def _failure(self, checkpoint_id: str, exc: Exception) -> CheckpointError:
        """
        The error a load that failed with *exc* raises.
        """
        if isinstance(exc, Damage):
            return self._error(checkpoint_id, exc.what, exc.path)
        if isinstance(exc, SerializationError):
            return self._error(checkpoint_id, exc.problems[0][1], exc.path)
        return self._error(checkpoint_id, f"{type(exc).__name__}: {exc}", "$")

    def _built(self, checkpoint_id: str, build: Callable[[], Checkpoint]) -> Checkpoint:
        """
        What *build* makes of a stored checkpoint, any failure to read it named by :meth:`_failure`.
        """
        try:
            return build()
        except (Damage, SerializationError, *_READ_FAILURES) as exc:
            raise self._failure(checkpoint_id, exc) from None

    def _lineage_of(
        self, row: Callable[[str], _Row | None], checkpoint_id: str, read: Callable[[_Row], CheckpointInfo]
    ) -> Listing[CheckpointInfo]:
        """
        The lineage of *checkpoint_id*, root first: the stored record of an id
        is ``row(id)`` (None when the store holds none), read by *read*,
        following parent ids while the parent is stored. An ancestor whose
        record does not read ends the walk, and is named in the listing's ``damaged``.
        """
        chain: builtins.list[CheckpointInfo] = []
        damaged: dict[str, CheckpointError] = {}
        seen: set[str] = set()
        current: str | None = checkpoint_id
        while current is not None and current not in seen and (found := row(current)) is not None:
            seen.add(current)
            try:
                info = read(found)
            except CheckpointError as exc:
                if not chain:
                    raise
                damaged[current] = exc
                break
            chain.append(info)
            current = info.parent
        if not chain:
            raise self._missing(checkpoint_id)
        return listed(chain[::-1], damaged, "ancestor row", self._place)

    # -- the driver ------------------------------------------------------------------------

    @abc.abstractmethod
    def _save(self, checkpoint: Checkpoint, thread: str | None) -> None: ...

    @abc.abstractmethod
    def _load(self, checkpoint_id: str) -> Checkpoint: ...

    @abc.abstractmethod
    def _list(self) -> Listing[CheckpointInfo]: ...

    @abc.abstractmethod
    def _lineage(self, checkpoint_id: str) -> Listing[CheckpointInfo]: ...

    @abc.abstractmethod
    def _head(self, thread: str) -> str | None: ...

    @abc.abstractmethod
    def _delete(self, checkpoint_id: str) -> None: ...

    @abc.abstractmethod
    def _save_context(self, ctx: WorkingContext) -> str: ...

    @abc.abstractmethod
    def _load_context(self, context_id: str) -> WorkingContext: ...

    @abc.abstractmethod
    def _list_contexts(self) -> Listing[ContextInfo]: ...

    @abc.abstractmethod
    def _delete_context(self, context_id: str) -> None: ...

    @abc.abstractmethod
    def _contains(self, checkpoint_id: str) -> bool: ...
