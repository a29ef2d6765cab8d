"""
Tests for workingctx.frozen: deep freezing and thawing payloads.
"""

from __future__ import annotations

import copy
import json
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import json_values, nested_payloads
from workingctx import thaw
from workingctx.exceptions import FrozenPayloadError, PayloadError
from workingctx.frozen import FROZEN_PAYLOAD_MESSAGE, MAX_DEPTH, FrozenDict, FrozenList, deep_freeze

PREFIX = "this payload belongs to a frozen value and cannot be mutated in place."

DICT_MUTATORS = [  # (name for the test id, mutation)
    ("item assignment", lambda d: d.__setitem__("k", 1)),
    ("del", lambda d: d.__delitem__("a")),
    ("update", lambda d: d.update({"k": 1})),
    ("pop", lambda d: d.pop("a")),
    ("popitem", lambda d: d.popitem()),
    ("clear", lambda d: d.clear()),
    ("setdefault", lambda d: d.setdefault("k", 1)),
    ("|=", lambda d: d.__ior__({"k": 1})),
]
LIST_MUTATORS = [
    ("item assignment", lambda x: x.__setitem__(0, 1)),
    ("slice assignment", lambda x: x.__setitem__(slice(0, 1), [1])),
    ("del", lambda x: x.__delitem__(0)),
    ("append", lambda x: x.append(1)),
    ("extend", lambda x: x.extend([1])),
    ("insert", lambda x: x.insert(0, 1)),
    ("pop", lambda x: x.pop()),
    ("remove", lambda x: x.remove(1)),
    ("clear", lambda x: x.clear()),
    ("sort", lambda x: x.sort()),
    ("reverse", lambda x: x.reverse()),
    ("+=", lambda x: x.__iadd__([1])),
    ("*=", lambda x: x.__imul__(2)),
]


class TestDeepFreeze:
    @given(nested_payloads)
    def test_thaw_is_the_inverse(self, payload):
        """
        thaw(deep_freeze(x)) == x, with the same container types at every depth.
        """
        thawed = thaw(deep_freeze(payload))
        assert payload == thawed
        assert _shape(payload) == _shape(thawed)

    @given(json_values())
    def test_frozen_equals_and_prints_like_the_original(self, payload):
        """
        A frozen payload compares equal to the plain data, prints like it and
        encodes to the same JSON.
        """
        frozen = deep_freeze(payload)
        assert payload == frozen
        assert repr(payload) == repr(frozen)
        assert json.dumps(payload, sort_keys=True) == json.dumps(frozen, sort_keys=True)

    @given(json_values())
    def test_equal_frozen_values_hash_equal(self, payload):
        """
        Two freezes of equal data are equal and hash equal.
        """
        one, two = deep_freeze(payload), deep_freeze(thaw(deep_freeze(payload)))
        assert one == two
        assert hash(one) == hash(two)

    @given(nested_payloads)
    def test_pickle_and_deepcopy_give_equal_frozen_values(self, payload):
        """
        Frozen payloads survive pickle and deepcopy, still frozen.
        """
        frozen = deep_freeze(payload)
        for copied in (pickle.loads(pickle.dumps(frozen)), copy.deepcopy(frozen)):
            assert frozen == copied
            assert type(frozen) is type(copied)
            assert _shape(frozen) == _shape(copied)
            if isinstance(copied, FrozenDict | FrozenList):
                with pytest.raises(FrozenPayloadError):
                    copied.clear()

    def test_leaves_pass_through_by_identity(self):
        """
        A user object inside a payload is the same object after freezing and thawing.
        """

        class Leaf:
            pass

        leaf = Leaf()
        frozen = deep_freeze({"a": [leaf]})
        assert frozen["a"][0] is leaf
        assert thaw(frozen)["a"][0] is leaf

    def test_freezing_twice_is_free(self):
        """
        Freezing an already frozen payload returns it unchanged.
        """
        frozen = deep_freeze({"a": [1]})
        assert deep_freeze(frozen) is frozen

    def test_thaw_copies_plain_containers(self):
        """
        thaw() never aliases the input's containers.
        """
        plain = {"a": [1]}
        thawed = thaw(plain)
        thawed["a"].append(2)
        assert {"a": [1]} == plain

    def test_types(self):
        """
        dict, list, set and tuple freeze to FrozenDict, FrozenList, frozenset
        and a tuple of frozen items.
        """
        frozen = deep_freeze({"d": {}, "l": [], "s": {1}, "t": ([1],)})
        assert isinstance(frozen, FrozenDict)
        assert isinstance(frozen["d"], FrozenDict)
        assert isinstance(frozen["l"], FrozenList)
        assert isinstance(frozen["s"], frozenset)
        assert isinstance(frozen["t"], FrozenList)
        assert isinstance(frozen["t"][0], FrozenList)
        assert "frozenset({1})" == repr(frozen["s"])

    def test_tuples_come_back_as_lists(self):
        """
        A tuple is payload data like a list: frozen to a FrozenList, thawed to a
        list, as a JSON round trip would give it.
        """
        assert {"t": [1, [2]]} == thaw(deep_freeze({"t": (1, (2,))}))
        assert deep_freeze([1, 2]) == deep_freeze((1, 2))


class TestMutatorsRefuse:
    @pytest.mark.parametrize("mutate", [m for _, m in DICT_MUTATORS], ids=[n for n, _ in DICT_MUTATORS])
    def test_frozen_dict(self, mutate):
        """
        Every mutator of a FrozenDict raises the frozen-payload TypeError and
        changes nothing.
        """
        frozen = deep_freeze({"a": 1, "b": [2]})
        with pytest.raises(TypeError) as caught:
            mutate(frozen)
        assert isinstance(caught.value, FrozenPayloadError)
        assert str(caught.value).startswith(PREFIX)
        assert {"a": 1, "b": [2]} == frozen

    @pytest.mark.parametrize("mutate", [m for _, m in LIST_MUTATORS], ids=[n for n, _ in LIST_MUTATORS])
    def test_frozen_list(self, mutate):
        """
        Every mutator of a FrozenList raises the frozen-payload TypeError and
        changes nothing.
        """
        frozen = deep_freeze([1, 2, {"a": 3}])
        with pytest.raises(TypeError, match="cannot be mutated in place"):
            mutate(frozen)
        assert [1, 2, {"a": 3}] == frozen

    @given(json_values(), st.data())
    def test_nested_payloads_refuse_at_every_depth(self, payload, data):
        """
        Whatever container is reached inside a frozen payload refuses appends
        and item assignment.
        """
        frozen = deep_freeze({"root": payload})
        node = frozen
        while True:
            if isinstance(node, FrozenDict):
                with pytest.raises(FrozenPayloadError):
                    node["new"] = 1
                if not node:
                    break
                node = node[data.draw(st.sampled_from(sorted(node)))]
            elif isinstance(node, FrozenList):
                with pytest.raises(FrozenPayloadError):
                    node.append(1)
                if not node:
                    break
                node = node[data.draw(st.integers(0, len(node) - 1))]
            else:
                break

    def test_message_says_how_to_get_a_writable_copy(self):
        """
        The error names thaw() and dict()/list() as the way out.
        """
        assert "thaw(value)" in FROZEN_PAYLOAD_MESSAGE
        assert "dict(value)" in FROZEN_PAYLOAD_MESSAGE

    def test_top_level_copy_is_writable(self):
        """
        dict(frozen) rebuilds a writable top level; nested values stay frozen.
        """
        frozen = deep_freeze({"plan": {"steps": ["a"]}})
        top = dict(frozen)
        top["other"] = 1
        with pytest.raises(FrozenPayloadError):
            top["plan"]["steps"].append("b")


def _shape(value: object) -> object:
    """
    The container types of a payload, at every depth (frozen and plain alike).
    """
    if isinstance(value, dict):
        return ("dict", {k: _shape(v) for k, v in value.items()})
    if isinstance(value, list):
        return ("list", [_shape(v) for v in value])
    if isinstance(value, set):
        return ("set", len(value))
    if isinstance(value, frozenset):
        return (type(value) is frozenset or "set", len(value))
    return type(value).__name__


class TestDepthAndCycles:
    @pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 10_000])
    def test_deep_values_refused_clearly(self, levels):
        """
        deep_freeze and the frozen constructors refuse data nested deeper than
        MAX_DEPTH levels with PayloadError naming the path, never RecursionError.
        """
        deep: object = 1
        for _ in range(levels):
            deep = [deep]
        with pytest.raises(PayloadError, match=r"the payload\[0\]\[0\].*nested more than 100 levels"):
            deep_freeze(deep)
        with pytest.raises(PayloadError, match="nested more than 100 levels"):
            FrozenDict({"k": deep})
        with pytest.raises(PayloadError, match="nested more than 100 levels"):
            FrozenList([deep])

    def test_cycles_refused_clearly(self):
        """
        Data that contains itself is refused with PayloadError saying where the
        cycle closes.
        """
        cyclic: dict[str, object] = {}
        cyclic["items"] = [1, {"back": cyclic}]
        with pytest.raises(PayloadError, match=r"the payload\['items'\]\[1\]\['back'\] is the payload again"):
            deep_freeze(cyclic)

    def test_frozen_parts_nested_by_hand_are_bounded(self):
        """
        Frozen values wrapped in one another, each within the limit, are refused
        once together they are too deep; at the limit everything works.
        """
        inner = deep_freeze(_nested(MAX_DEPTH - 1))
        limit = deep_freeze([inner])
        assert limit == thaw(limit) == pickle.loads(pickle.dumps(limit)) == copy.deepcopy(limit)
        with pytest.raises(PayloadError):
            deep_freeze({"k": [inner]})
        with pytest.raises(PayloadError):
            FrozenList([[inner]])


def _nested(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value
