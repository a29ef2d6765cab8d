"""
A model-based test: random sequences of operations on live contexts, checked
against a plain list-and-dict model after every step.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.strategies import json_values, messages, short_names
from workingctx import FrozenContext, Message, WorkingContext
from workingctx.exceptions import MergeError


class ContextMachine(RuleBasedStateMachine):
    """
    Each live context is paired with a model: its messages as a list and its
    notes as a dict. Snapshots are paired with deep copies of the model at
    the time they were taken, and must never drift from them.
    """

    snapshots = Bundle("snapshots")

    def __init__(self) -> None:
        super().__init__()
        self.contexts: list[WorkingContext] = []
        self.models: list[tuple[list[Message], dict[str, Any]]] = []
        self.taken: list[tuple[FrozenContext, list[Message], dict[str, Any]]] = []

    @initialize()
    def start(self) -> None:
        self.contexts.append(WorkingContext())
        self.models.append(([], {}))

    def _pick(self, data: st.DataObject) -> int:
        return data.draw(st.integers(0, len(self.contexts) - 1))

    @rule(data=st.data(), batch=st.lists(messages(), max_size=3))
    def extend(self, data: st.DataObject, batch: list[Message]) -> None:
        i = self._pick(data)
        self.contexts[i].extend(batch)
        self.models[i][0].extend(batch)

    @rule(data=st.data(), key=short_names, value=json_values(4))
    def note(self, data: st.DataObject, key: str, value: Any) -> None:
        i = self._pick(data)
        self.contexts[i].note(key, copy.deepcopy(value))
        self.models[i][1][key] = copy.deepcopy(value)

    @rule(data=st.data(), key=short_names)
    def nested_write(self, data: st.DataObject, key: str) -> None:
        """Write inside a note in place, as agents do."""
        i = self._pick(data)
        for notes in (self.contexts[i].scratchpad, self.models[i][1]):
            box = notes.setdefault("box", {"items": []})
            box["items"].append(key)

    @rule(data=st.data())
    def clear(self, data: st.DataObject) -> None:
        i = self._pick(data)
        self.contexts[i].clear_messages()
        self.models[i][0].clear()

    @precondition(lambda self: len(self.contexts) < 6)
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        i = self._pick(data)
        self.contexts.append(self.contexts[i].fork())
        messages_, notes = self.models[i]
        self.models.append((list(messages_), copy.deepcopy(notes)))

    @precondition(lambda self: len(self.contexts) >= 2)
    @rule(data=st.data())
    def merge_union(self, data: st.DataObject) -> None:
        i = self._pick(data)
        j = data.draw(st.sampled_from([k for k in range(len(self.contexts)) if k != i]))
        before = self.contexts[i].freeze()
        try:
            self.contexts[i].merge(self.contexts[j], mode="union")
        except MergeError:
            # A merge that would break the tool rules is refused and changes nothing.
            assert before == self.contexts[i].freeze()
            return
        mine, notes = self.models[i]
        theirs, their_notes = self.models[j]
        present = list(mine)
        for message in theirs:
            if message in present:
                present.remove(message)
            else:
                mine.append(message)
        notes.update(copy.deepcopy(their_notes))

    @rule(target=snapshots, data=st.data())
    def freeze(self, data: st.DataObject) -> FrozenContext:
        i = self._pick(data)
        snap = self.contexts[i].freeze()
        self.taken.append((snap, list(self.models[i][0]), copy.deepcopy(self.models[i][1])))
        return snap

    @precondition(lambda self: len(self.contexts) < 6)
    @rule(snap=snapshots)
    def resume(self, snap: FrozenContext) -> None:
        """A context resumed from a snapshot is live again and freezes back to it."""
        live = WorkingContext.from_snapshot(snap)
        assert snap == live.freeze()
        self.contexts.append(live)
        self.models.append((list(snap.messages), copy.deepcopy(dict(_thawed(snap)))))

    @invariant()
    def contexts_match_models(self) -> None:
        for ctx, (messages_, notes) in zip(self.contexts, self.models, strict=True):
            assert messages_ == list(ctx.messages)
            assert notes == ctx.scratchpad
            assert len(messages_) == ctx.size()

    @invariant()
    def snapshots_never_drift(self) -> None:
        for snap, messages_, notes in self.taken:
            assert messages_ == list(snap.messages)
            assert notes == dict(snap.scratchpad)


def _thawed(snap: FrozenContext) -> dict[str, Any]:
    from workingctx import thaw  # noqa: PLC0415

    return thaw(dict(snap.scratchpad))


TestContextMachine = ContextMachine.TestCase
TestContextMachine.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
