"""
The exchanges of a transcript: the one-pass labelling of the messages that are
kept or dropped together.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import block_transcripts, scope_transcripts
from workingctx.scopes._exchanges import _merged_units, exchange_units


class TestWholeExchanges:
    @given(st.one_of(scope_transcripts(broken=True), block_transcripts(broken=True)))
    def test_labelling_matches_union_find(self, messages):
        """
        The one-pass exchange labelling agrees with union-find on every transcript.
        """
        assert _merged_units(messages) == exchange_units(messages)
