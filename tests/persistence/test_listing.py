"""
Tests for the listings stores return: the descriptors read, and the ids that could not be.
"""

from __future__ import annotations

import copy
import logging
import pickle

import pytest

from workingctx.exceptions import CheckpointError
from workingctx.frozen import FrozenDict
from workingctx.persistence import Listing
from workingctx.persistence.listing import listed, shown


class TestListing:
    def test_a_listing_is_the_list_of_what_was_read(self):
        """
        A listing is a list, equal to the plain list of its items, in order,
        whatever it names as damaged.
        """
        listing = Listing(["a", "b"], damaged={"c": CheckpointError("damaged row")})
        assert isinstance(listing, list)
        assert ["a", "b"] == listing
        assert ["a", "b"] == list(listing)
        assert ["c"] == list(listing.damaged)
        assert isinstance(listing.damaged, FrozenDict)
        assert {} == Listing(["a"]).damaged

    def test_damaged_cannot_be_changed_in_place(self):
        """
        The damaged ids are a frozen mapping.
        """
        listing = Listing([], damaged={"c": CheckpointError("damaged row")})
        with pytest.raises(TypeError):
            listing.damaged["d"] = CheckpointError("another")  # type: ignore[index]

    def test_repr_is_the_list_unless_something_is_damaged(self):
        """
        With nothing damaged a listing shows as the plain list it equals
        (so eval(repr(x)) == x); with damage it names the damaged ids.
        """
        assert "['a']" == repr(Listing(["a"]))
        assert Listing(["a"]) == eval(repr(Listing(["a"])))  # noqa: S307  # the repr of a value
        shown_ = repr(Listing(["a"], damaged={"c": CheckpointError("damaged row")}))
        assert shown_.startswith("Listing(['a'], damaged={'c': CheckpointError(")

    def test_pickle_and_copy_keep_the_damaged_ids(self):
        """
        A listing pickles and copies with its items and its damaged ids.
        """
        listing = Listing(["a"], damaged={"c": CheckpointError("damaged row", path="$.id")})
        for again in (pickle.loads(pickle.dumps(listing)), copy.deepcopy(listing), copy.copy(listing)):
            assert isinstance(again, Listing)
            assert ["a"] == again
            assert ["c"] == list(again.damaged)
            assert "$.id" == again.damaged["c"].path


class TestListed:
    def test_damage_is_logged_once_naming_every_id(self, caplog):
        """
        A listing with damaged records logs one warning naming where and every id; one without logs nothing.
        """
        with caplog.at_level(logging.WARNING, logger="workingctx.persistence"):
            listed(["a"], {}, "checkpoint row", "the store")
            assert [] == caplog.records
            listed(["a"], {"b": CheckpointError("x"), "c": CheckpointError("y")}, "checkpoint row", "the store")
        [record] = caplog.records
        assert "the store: left out 2 checkpoint rows that cannot be read ('b', 'c')" in record.getMessage()


@pytest.mark.parametrize(
    ("key", "expected"),
    [("abc", "abc"), (b"abc", "abc"), (b"\xff\xfeab", "\\xff\\xfeab"), (memoryview(b"a\xff"), "a\\xff"), (7, "7")],
)
def test_shown_gives_any_stored_id_as_text(key, expected):
    """
    An id as stored (text, bytes that may not be UTF-8, anything else) is shown as text.
    """
    assert expected == shown(key)
