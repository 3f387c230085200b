"""SPEC §4: publishing hashes the canonical form; PublishPreview shows the diff."""

from __future__ import annotations

import copy
import hashlib
import random
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from services.registry.domain.canonical import Change, canonical_json, definition_hash, diff
from services.registry.domain.definition import normalize_definition

scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=10)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, min_size=1, max_size=5)


def reordered(value: Any, rnd: random.Random) -> Any:
    """The same JSON value with every object's keys inserted in a shuffled order."""
    if isinstance(value, dict):
        keys = list(value)
        rnd.shuffle(keys)
        return {k: reordered(value[k], rnd) for k in keys}
    if isinstance(value, list):
        return [reordered(v, rnd) for v in value]
    return value


def leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in leaf_paths(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in leaf_paths(v, (*path, i))]
    return [path]


def changed_leaf(old: Any) -> Any:
    if isinstance(old, bool):
        return not old
    if isinstance(old, int):
        return old + 1
    if isinstance(old, str):
        return old + "x"
    return "was null"


def with_leaf(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    result = copy.deepcopy(value)
    target = result
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = new
    return result


def order_definition(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "Order follow-up",
        "trigger_event": "order.created",
        "steps": [
            {"type": "custom_action", "action": "enrich-order"},
            {"type": "webhook", "url": "https://hooks.example.com/a"},
        ],
    }
    raw.update(changes)
    return normalize_definition(raw)


# --- hash -------------------------------------------------------------------


def test_hash_is_the_sha256_of_compact_sorted_json() -> None:
    definition = {"b": [1, {"d": "é", "c": None}], "a": True}
    assert canonical_json(definition) == '{"a":true,"b":[1,{"c":null,"d":"é"}]}'
    assert (
        definition_hash(definition)
        == hashlib.sha256(canonical_json(definition).encode("utf-8")).hexdigest()
    )


@settings(max_examples=200)
@given(json_objects, st.randoms(use_true_random=False))
def test_hash_does_not_depend_on_key_order(definition: dict[str, Any], rnd: random.Random) -> None:
    assert definition_hash(reordered(definition, rnd)) == definition_hash(definition)


@settings(max_examples=200)
@given(json_objects, st.data())
def test_hash_changes_when_any_leaf_changes(
    definition: dict[str, Any], data: st.DataObject
) -> None:
    paths = leaf_paths(definition)
    assume(paths)
    path = data.draw(st.sampled_from(paths))
    target: Any = definition
    for part in path:
        target = target[part]
    changed = with_leaf(definition, path, changed_leaf(target))
    assert definition_hash(changed) != definition_hash(definition)


def test_hash_of_a_normalised_definition_changes_with_any_setting() -> None:
    base = order_definition()
    for path, new in [
        (("name",), "Order follow-up v2"),
        (("trigger_event",), "order.paid"),
        (("environment",), "sandbox"),
        (("steps", 0, "retry", "max_attempts"), 4),
        (("steps", 1, "url"), "https://hooks.example.com/b"),
        (("reentry", "cooldown_minutes"), 61),
    ]:
        assert definition_hash(with_leaf(base, path, new)) != definition_hash(base), path


def test_hash_treats_step_order_as_significant() -> None:
    base = order_definition()
    swapped = {**base, "steps": list(reversed(base["steps"]))}
    assert definition_hash(swapped) != definition_hash(base)


# --- diff -------------------------------------------------------------------


@given(json_values)
def test_a_value_has_no_diff_with_itself(value: Any) -> None:
    assert diff(value, value) == []
    assert diff(value, copy.deepcopy(value)) == []


@settings(max_examples=300)
@given(json_values, json_values)
def test_diff_is_empty_exactly_when_the_json_is_equal(before: Any, after: Any) -> None:
    # JSON equality, as the publish hash sees it: `true` is not `1`.
    assert (diff(before, after) == []) == (canonical_json(before) == canonical_json(after))


def test_diff_tells_true_from_one_like_the_hash_does() -> None:
    assert diff({"a": True}, {"a": 1}) == [Change("a", "changed", True, 1)]
    assert definition_hash({"a": True}) != definition_hash({"a": 1})


@given(json_objects, st.randoms(use_true_random=False))
def test_diff_ignores_key_order(value: dict[str, Any], rnd: random.Random) -> None:
    assert diff(value, reordered(value, rnd)) == []


def test_diff_names_a_changed_step_field() -> None:
    before = order_definition()
    after = with_leaf(before, ("steps", 1, "url"), "https://hooks.example.com/b")
    assert diff(before, after) == [
        Change(
            "steps[1].url", "changed", "https://hooks.example.com/a", "https://hooks.example.com/b"
        )
    ]


def test_diff_names_a_nested_object_field() -> None:
    before = order_definition()
    after = order_definition(reentry={"mode": "once"})
    assert diff(before, after) == [Change("reentry.mode", "changed", "always", "once")]


def test_diff_names_a_top_level_field_without_a_leading_dot() -> None:
    assert diff(order_definition(), order_definition(name="Renamed")) == [
        Change("name", "changed", "Order follow-up", "Renamed")
    ]


def test_diff_reports_an_added_step() -> None:
    before = order_definition()
    after = copy.deepcopy(before)
    new_step = {"type": "delay", "name": "", "duration_ms": 1_000, "retry": {}}
    after["steps"].append(new_step)
    assert diff(before, after) == [Change("steps[2]", "added", after=new_step)]


def test_diff_reports_a_removed_step() -> None:
    before = order_definition()
    after = copy.deepcopy(before)
    removed = after["steps"].pop()
    assert diff(before, after) == [Change("steps[1]", "removed", before=removed)]


def test_diff_reports_added_and_removed_object_fields() -> None:
    before = order_definition()
    after = copy.deepcopy(before)
    after["steps"][0]["version"] = 3
    del after["steps"][1]["headers"]
    assert diff(before, after) == [
        Change("steps[0].version", "added", after=3),
        Change("steps[1].headers", "removed", before={}),
    ]


def test_diff_lists_every_change_in_a_stable_order() -> None:
    before = order_definition()
    after = order_definition(name="Renamed", trigger_event="order.paid")
    assert [c.path for c in diff(before, after)] == ["name", "trigger_event"]


def test_diff_reports_a_value_replaced_by_another_kind() -> None:
    assert diff({"a": [1]}, {"a": {"0": 1}}) == [Change("a", "changed", [1], {"0": 1})]
