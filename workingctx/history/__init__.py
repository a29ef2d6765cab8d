"""
Event-sourced history: every change to a recorded context is an entry.

A context built with ``WorkingContext(record=True)`` keeps :attr:`~WorkingContext.history`,
an append-only tuple of frozen :class:`Entry` values, one per change. The history is
the only source: :meth:`WorkingContext.replay` builds an equal context from it (same
digest, same notes, same finished state), and a store saves nothing else.

>>> from workingctx import Message, WorkingContext
>>> ctx = WorkingContext(record=True, id="bug-1")
>>> _ = ctx.append(Message("user", "Find the bug in main.py"))
>>> _ = ctx.append(Message.assistant("It is on line 3."))
>>> [entry.kind for entry in ctx.history]
['start', 'user', 'reply']
>>> WorkingContext.replay(ctx.history).digest() == ctx.digest()
True
"""

from workingctx.history.codec import HISTORY_ROOT, entry_from_data, entry_text, entry_to_data, history_step
from workingctx.history.entries import (
    ENTRY_KINDS,
    OUTCOMES,
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
    Started,
    freeze_json,
)
from workingctx.history.recorder import NotesEdit, Recorder, build_tail, replay, tail_pieces

__all__ = [
    "ENTRY_KINDS",
    "HISTORY_ROOT",
    "OUTCOMES",
    "ContextChange",
    "Entry",
    "EntryKind",
    "ErrorInfo",
    "Finished",
    "Forked",
    "Kept",
    "Merged",
    "NotesChange",
    "NotesEdit",
    "Outcome",
    "Recorder",
    "Started",
    "build_tail",
    "entry_from_data",
    "entry_text",
    "entry_to_data",
    "freeze_json",
    "history_step",
    "replay",
    "tail_pieces",
]
