"""
The codec the stores share: a chain of links read and checked in one walk
down, and the cache of items read, which starts again at its limit.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.persistence.runs import arguments_run
from tests.persistence.stored import fresh_path, saved_pair, sha
from workingctx import SQLiteStore
from workingctx.persistence import _codec
from workingctx.persistence._codec import MESSAGES, Damage, check_links, check_steps, follow, step, walk


def link_table(count: int, root: str = MESSAGES.root) -> tuple[dict[object, tuple[Any, ...]], str]:
    """
    A table of *count* message links ``(chain, prev, item, position)``, by
    chain digest, and the head of their chain, which starts at *root*.
    """
    table: dict[object, tuple[Any, ...]] = {}
    previous = root
    for position in range(count):
        item = sha(f"message {position}")
        link = step(previous, item)
        table[link] = (link, previous, item, position)
        previous = link
    return table, previous


def checked_slowly(table: dict[object, tuple[Any, ...]], head: str, count: int) -> tuple[list[str], list[str]]:
    """
    The chain as the walk, the order check and the step check read it, one after another.
    """
    pairs = check_links(walk(table, head, count), count, MESSAGES.root, MESSAGES.path, "table message_links")
    check_steps(MESSAGES, pairs, "table message_links")
    return [chain for chain, _ in pairs], [digest for _, digest in pairs]


def outcome(read: Any) -> Any:
    try:
        return "read", read()
    except Damage as exc:
        return "damage", exc.what, exc.path


class TestFollow:
    @given(
        count=st.integers(1, 8),
        target=st.integers(0, 7),
        field=st.sampled_from(["nothing", "drop", "prev", "item", "position", "chain"]),
        replacement=st.sampled_from(["root", "self", "other", "none", "text", "number"]),
        claimed=st.integers(-1, 9),
        root=st.sampled_from([MESSAGES.root, sha("another root")]),
    )
    def test_it_reads_and_refuses_as_the_three_checks_in_turn(self, count, target, field, replacement, claimed, root):
        """
        One walk down that checks each link as it goes accepts exactly the
        chains the walk, the order check and the step check accept, reads
        them the same, and refuses any other with the same error.
        """
        table, head = link_table(count, root)
        links = list(table)
        link = links[target % count]
        other = links[(target + 1) % count]
        value = {
            "root": MESSAGES.root,
            "self": link,
            "other": other,
            "none": None,
            "text": "not a digest",
            "number": target,
        }[replacement]
        row = list(table[link])
        if field == "nothing":
            pass
        elif field == "drop":
            del table[link]
        elif field == "position":
            row[3] = value if replacement in {"none", "text"} else claimed
        elif field == "chain":
            del table[link]
            row[0] = value
            table[value] = tuple(row)
        else:
            row[1 if field == "prev" else 2] = value
        if field in {"prev", "item", "position"}:
            table[link] = tuple(row)
        claimed_count = count if claimed % 3 else max(claimed, 0)
        expected = outcome(lambda: checked_slowly(table, head, claimed_count))
        assert outcome(lambda: follow(MESSAGES, table, head, claimed_count, "table message_links")) == expected

    def test_an_intact_chain_is_read_root_first(self):
        """
        An intact chain reads as its chain digests and item digests, root first.
        """
        table, head = link_table(5)
        chain, digests = follow(MESSAGES, table, head, 5, "table message_links")
        assert chain[-1] == head
        assert digests == [sha(f"message {position}") for position in range(5)]
        assert [table[link][2] for link in chain] == digests

    def test_a_link_that_does_not_match_its_item_is_refused_where_it_is(self):
        """
        A link naming another item than its key was made from is refused at its position.
        """
        table, head = link_table(4)
        link = next(link for link, row in table.items() if row[3] == 2)
        table[link] = (*table[link][:2], sha("another message"), 2)
        with pytest.raises(Damage, match="the link does not match its message") as info:
            follow(MESSAGES, table, head, 4, "table message_links")
        assert info.value.path == "$.snapshot.messages[2]"


class TestCacheLimit:
    def test_a_load_that_fills_the_cache_keeps_the_items_it_found_there(self, scratch_dir, monkeypatch):
        """
        When the items read would take the cache past its limit, the cache
        starts again, and the items the chain found in it are still loaded.
        """
        path = fresh_path(scratch_dir)
        ctx = arguments_run()
        first, second = saved_pair(path, ctx)
        with SQLiteStore(path) as store:
            assert store.load(first.id) == first
            monkeypatch.setattr(_codec, "CACHE_LIMIT", len(first.snapshot.messages) + 1)
            assert store.load(second.id) == second
            assert store.load(first.id) == first


class TestStoredLength:
    """
    How much of a chain a store holds: on a server in a few rounds of
    batched asks, in this process one position at a time.
    """

    @given(
        st.integers(0, 5000).flatmap(lambda count: st.tuples(st.just(count), st.integers(0, count))),
        st.sampled_from([1, 16]),
    )
    def test_finds_the_stored_prefix_in_few_rounds_asking_only_positions_of_the_chain(self, drawn, last):
        count, stored = drawn
        rounds: list[list[int]] = []

        def ask(positions: list[int]) -> list[int]:
            assert positions
            assert all(1 <= position <= count for position in positions)
            assert len(positions) <= 64 or not rounds
            rounds.append(positions)
            return [position for position in positions if position <= stored]

        assert stored == _codec.stored_length(count, ask, last=last)
        assert len(rounds) <= 4
        assert len(rounds[0]) <= 40 if rounds else True
        assert (count == 0) == (not rounds)

    def test_a_chain_saved_again_with_a_few_more_items_takes_one_round(self):
        rounds = []

        def ask(positions):
            rounds.append(positions)
            return [position for position in positions if position <= 990]

        assert 990 == _codec.stored_length(1000, ask)
        assert 1 == len(rounds)

    def test_the_first_round_can_be_answered_before(self):
        asked = []
        first = [position for position in _codec.probes(300) if position <= 120]
        assert 120 == _codec.stored_length(
            300, lambda positions: asked.append(positions) or [p for p in positions if p <= 120], first
        )
        assert _codec.probes(300) not in asked

    @given(st.integers(0, 600).flatmap(lambda count: st.tuples(st.just(count), st.integers(0, count))))
    def test_in_this_process_one_position_at_a_time_finds_it_exactly(self, case: tuple[int, int]):
        count, stored = case
        asked: list[int] = []

        def holds(position: int) -> bool:
            assert 1 <= position <= count
            asked.append(position)
            return position <= stored

        assert stored == _codec.galloped_length(count, holds)
        assert len(asked) <= 2 * count.bit_length() + 2

    @pytest.mark.parametrize(("new", "asks"), [(0, 1), (1, 2), (2, 3), (3, 5)])
    def test_in_this_process_a_few_new_links_cost_a_few_asks(self, new: int, asks: int):
        asked: list[int] = []

        def holds(position: int) -> bool:
            asked.append(position)
            return position <= 1000 - new

        assert 1000 - new == _codec.galloped_length(1000, holds)
        assert asks == len(asked)
