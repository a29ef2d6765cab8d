"""
Tests for workingctx.callids: the deterministic new name of a reused call id.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workingctx.callids import fresh_call_id, short_call_ids

IDS = st.from_regex(r"[a-zA-Z0-9_-]{1,20}", fullmatch=True)


@given(IDS, st.frozensets(IDS, max_size=20))
def test_a_fresh_id_is_new_readable_and_in_the_anthropic_alphabet(call_id: str, taken: frozenset[str]) -> None:
    fresh = fresh_call_id(call_id, taken | {call_id})
    assert fresh not in taken
    assert fresh != call_id
    assert fresh.startswith(call_id + "-")
    assert re.fullmatch(r"[a-zA-Z0-9_-]+", fresh)


@given(IDS, st.lists(IDS, max_size=20))
def test_a_fresh_id_depends_only_on_what_is_taken(call_id: str, taken: list[str]) -> None:
    assert fresh_call_id(call_id, set(taken)) == fresh_call_id(call_id, frozenset(reversed(taken)))


def test_the_first_free_number_is_taken() -> None:
    assert fresh_call_id("call_0", {"call_0", "call_0-2"}) == "call_0-3"


@pytest.mark.parametrize("bad", ["", None, 3])
def test_a_call_id_is_a_nonempty_string(bad: object) -> None:
    with pytest.raises(TypeError, match="non-empty string"):
        fresh_call_id(bad, set())  # type: ignore[arg-type]


@given(
    ids=st.lists(st.text(min_size=1, max_size=80), max_size=6),
    limit=st.integers(24, 64),
    order=st.randoms(use_true_random=False),
)
def test_short_names_fit_the_limit_and_keep_ids_apart(ids, limit, order):
    """
    Each id longer than the limit gets a name of exactly the limit, distinct
    from every other id and name of the request, whatever the ids' order.
    """
    names = short_call_ids(ids, limit)
    assert set(names) == {i for i in ids if len(i) > limit}
    assert all(len(name) == limit for name in names.values())
    kept = {i for i in ids if len(i) <= limit}
    assert len(set(names.values())) == len(names)
    assert not kept & set(names.values())
    shuffled = list(ids)
    order.shuffle(shuffled)
    assert short_call_ids(shuffled, limit) == names


def test_a_short_name_already_taken_is_skipped():
    long = "chatcmpl-tool-" + "ab" * 20
    first = short_call_ids([long], 40)[long]
    second = short_call_ids([long, first], 40)[long]
    assert second != first
    assert len(second) == 40
    with pytest.raises(ValueError, match="room for a digest"):
        short_call_ids([long], 23)
