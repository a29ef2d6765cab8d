"""
Tests for workingctx._notes_table: tables shared and written at random hold what plain
dicts put through the same writes hold.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from workingctx._notes_table import Table


class TableModel(RuleBasedStateMachine):
    """
    The table alone: shared tables and plain dicts under random writes.
    """

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[Table] = [Table()]
        self.models: list[dict[str, int]] = [{}]

    @rule(data=st.data(), key=st.integers(0, 3000).map(str), value=st.integers())
    def put(self, data: st.DataObject, key: str, value: int) -> None:
        i = data.draw(st.integers(0, len(self.tables) - 1))
        new = self.tables[i].put(key, value, ours=False)
        assert new == (key not in self.models[i])
        self.models[i][key] = value

    @rule(data=st.data(), start=st.integers(0, 3000), count=st.integers(1, 600))
    def put_many(self, data: st.DataObject, start: int, count: int) -> None:
        i = data.draw(st.integers(0, len(self.tables) - 1))
        for n in range(start, start + count):
            self.tables[i].put(str(n), -n, ours=False)
            self.models[i][str(n)] = -n

    @precondition(lambda self: any(self.models))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        i = data.draw(st.sampled_from([i for i, model in enumerate(self.models) if model]))
        key = data.draw(st.sampled_from(sorted(self.models[i])))
        self.tables[i].delete(key)
        del self.models[i][key]

    @precondition(lambda self: len(self.tables) < 10)
    @rule(data=st.data())
    def share(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.tables) - 1))
        self.tables.append(self.tables[i].share())
        self.models.append(dict(self.models[i]))

    @invariant()
    def same(self) -> None:
        for table, model in zip(self.tables, self.models, strict=True):
            assert len(table) == len(model)
            assert {key: note[0] for key, note in table.items()} == model
            for key, value in model.items():
                note = table.get(key)
                assert note is not None
                assert note[0] == value
            assert table.get("missing") is None


TableModel.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
TestTableModel = TableModel.TestCase
