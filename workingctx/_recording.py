"""
The recorded side of a context: its history, turns, usage and cost, finish,
restore, results with outcomes, errors and note edits.

:class:`RecordingMethods` gives :class:`~workingctx.WorkingContext` these
methods; the entries and the recorder are in :mod:`workingctx.history`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from workingctx._state import ContextState
from workingctx.exceptions import (
    HistoryError,
    PricingError,
)
from workingctx.history import NotesEdit, Recorder, replay
from workingctx.history.entries import OUTCOMES
from workingctx.messages import Message, Usage, check_messages
from workingctx.pricing import cost as price
from workingctx.tokens import TokenCounter

if TYPE_CHECKING:
    from workingctx.checkpoint import Checkpoint
    from workingctx.context import WorkingContext
    from workingctx.history import Entry, Outcome


class RecordingMethods(ContextState):
    """
    What a context built with ``record=True`` adds (see :mod:`workingctx.history`).
    """

    __slots__ = ()

    if TYPE_CHECKING:

        @property
        def messages(self) -> tuple[Message, ...]: ...
        def append(self, *messages: Message) -> WorkingContext: ...
        def _routed_id(self, call_id: str) -> str: ...
        def _routed(self, messages: Sequence[Message]) -> list[Message]: ...

    # -- history -------------------------------------------------------------------

    def _recorder(self, what: str) -> Recorder:
        if self._history is None:
            msg = f"{what} needs a recorded context: build it with WorkingContext(record=True)"
            raise HistoryError(msg)
        return self._history

    def _context(self) -> WorkingContext:
        return cast("WorkingContext", self)  # the class these methods are mixed into

    @classmethod
    def replay(
        cls, history: Iterable[Entry], *, counter: TokenCounter | None = None, limit: int | None = None
    ) -> WorkingContext:
        """
        The recorded context *history* describes: its digest, notes, finished
        state, usage and history are those of the context it was recorded from.

        Raises:
            TypeError: *history* is not a sequence of :class:`~workingctx.history.Entry`.
            HistoryError: It does not begin with a start entry, or an entry
                does not apply (the message names its index).
        """
        return replay(history, ctx_type=cast("type[WorkingContext]", cls), counter=counter, limit=limit)

    @property
    def history(self) -> tuple[Entry, ...]:
        """
        Every change to a recorded context, oldest first (see :mod:`workingctx.history`).
        """
        return self._recorder("history").history

    @property
    def recorded(self) -> bool:
        """
        Whether this context keeps a :attr:`history`.
        """
        return self._history is not None

    @property
    def id(self) -> str | None:
        """
        The name a store saves a recorded context under; None when not recorded.
        """
        return None if self._history is None else self._history.id

    @property
    def parent_id(self) -> str | None:
        """
        The id of the recorded context this one was forked from, or None.
        """
        return None if self._history is None else self._history.parent_id

    @property
    def turn(self) -> int:
        """
        How many model replies a recorded context received (0 when not recorded).
        """
        return 0 if self._history is None else self._history.turn

    @property
    def finished(self) -> bool:
        """
        Whether :meth:`finish` ended this context.
        """
        return self._history is not None and self._history.finished

    @property
    def answer(self) -> Any:
        """
        The answer given to :meth:`finish` (JSON data, frozen); otherwise the
        text of the newest reply without tool calls; otherwise None.
        """
        if self._history is None:
            return None
        return self._history.answer(self.messages)

    @property
    def usage(self) -> Usage:
        """
        The token usage of every reply: on a recorded context, every reply
        ever recorded and what merged sub-agents brought; otherwise the
        replies in the tail.
        """
        if self._history is not None:
            return self._history.usage
        return sum((m.usage for m in self.messages if m.usage is not None), Usage())

    def finish(self, answer: Any = None) -> WorkingContext:
        """
        End a recorded context: appends and merges raise afterwards; only
        :meth:`restore` undoes it.

        Raises:
            TypeError: *answer* is not JSON data.
            HistoryError: The context is not recorded.
        """
        self._recorder("finish()").finish(self._context(), answer)
        return self._context()

    def restore(self, to: int | str | Checkpoint) -> WorkingContext:
        """
        Bring messages, notes and the finished state back to what they were
        after entry *to* (an index, negative from the end; a checkpoint id
        captured from this context; or a :class:`~workingctx.Checkpoint`),
        by adding an entry: the history never shrinks.

        Raises:
            PendingCallsError: Calls are pending.
            HistoryError: *to* names no entry, or one in the middle of a turn.
        """
        self._recorder("restore()").restore(self._context(), to)
        return self._context()

    def append_result(self, message: Message, *, outcome: Outcome = "done") -> WorkingContext:
        """
        Append a tool result, recording how the call ended (``"done"``,
        ``"error"``, ``"denied"``, ``"cancelled"`` or ``"interrupted"``).

        Raises:
            TypeError: *message* is not a message.
            ValueError: it is not a tool result, or *outcome* is unknown.
        """
        check_messages([message], "append_result()")
        if message.role != "tool":
            msg = f"append_result() takes a tool result (role 'tool'), got a {message.role!r} message"
            raise HistoryError(msg)
        if outcome not in OUTCOMES:
            msg = f"unknown outcome {outcome!r}; use one of {', '.join(OUTCOMES)}"
            raise HistoryError(msg)
        if self._history is None:
            return self.append(message)
        if self._routes:
            message = self._routed([message])[0]
        self._history.append(self._context(), [message], outcome)
        return self._context()

    def close_pending(self, outcome: Outcome = "interrupted", text: str | None = None) -> WorkingContext:
        """
        Give every pending tool call of a recorded context a result (``text``,
        by default ``"(<outcome>)"``) with *outcome*; messages waiting for them go in next.
        A provider's own call answered by an item of its own kind (a Responses
        computer or shell call, an MCP approval request) stays pending: a tool
        message cannot answer it.
        """
        if outcome not in OUTCOMES or outcome == "done":
            msg = f"close_pending() takes an outcome other than 'done', got {outcome!r}"
            raise HistoryError(msg)
        self._recorder("close_pending()").close_pending(self._context(), outcome, text)
        return self._context()

    def record_error(self, error: BaseException | str, *, during: str | None = None) -> WorkingContext:
        """
        Add an ``error`` entry to a recorded context's history (nothing else changes).
        """
        self._recorder("record_error()").error(self._context(), error, during)
        return self._context()

    def edit_notes(self) -> NotesEdit:
        """
        ``with ctx.edit_notes() as notes:`` edit a plain copy of the notes;
        a normal exit commits the changes (one ``notes`` entry on a recorded
        context), an exception commits nothing. Values must be JSON data.
        Editors take turns (``async with`` in coroutines).
        """
        lock = self._edit_lock
        if lock is None:
            with self._tail.lock:  # two first uses at once make one lock
                lock = self._edit_lock
                if lock is None:
                    lock = self._edit_lock = threading.Lock()
        return NotesEdit(self._context(), lock)

    # -- snapshots ---------------------------------------------------------------

    # -- cost ----------------------------------------------------------------------

    def cost(self, model: str | None = None) -> Decimal:
        """
        What the replies in the context's tail cost, in US dollars; on a
        recorded context, every reply ever recorded and those merged sub-agents
        brought, as :attr:`usage` counts them.

        Each reply is priced for the model named in its ``metadata["model"]``
        (the name the provider reported), or else for *model*.

        >>> from workingctx import Message, Usage, WorkingContext
        >>> ctx = WorkingContext().append(Message.assistant("a", usage=Usage(input_tokens=20_000, output_tokens=200)))
        >>> ctx.cost("claude-sonnet-4-6")
        Decimal('0.063')

        Raises:
            PricingError: a reply's model has no price, or a reply names no
                model and *model* is not given (the message says which reply).
        """
        if self._history is not None:
            return self._history.cost(model)

        total = Decimal(0)
        for position, message in enumerate(self.messages):
            if message.usage is None:
                continue
            named = message.metadata.get("model", model)
            if not isinstance(named, str):
                msg = (
                    f"message {position} carries usage but names no model in metadata['model']; "
                    "pass the model to cost(model=...)"
                )
                raise PricingError(msg)
            total += price(named, message.usage)
        return total
