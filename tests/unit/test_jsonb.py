"""JSON parameters for PostgreSQL: orjson where it can, the standard library where it
cannot, and the same value either way."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from libs.db.jsonb import dumps

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(exclude_categories=["Cs"])),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_any_json_value_reads_back_as_itself(value: object) -> None:
    assert json.loads(dumps(value)) == value


def test_an_integer_beyond_64_bits_keeps_every_digit() -> None:
    value = {"n": 2**70 + 1, "m": -(2**64) - 3, "small": 7}

    assert json.loads(dumps(value)) == value


def test_ids_and_times_are_written_as_text_on_both_paths() -> None:
    order = uuid.UUID("0b4cdcb6-3f4c-4e4e-9a53-0a8d7f1c2b3e")
    when = datetime(2026, 11, 30, 12, 0, 1, 500000, tzinfo=UTC)

    fast = json.loads(dumps({"id": order, "at": when}))
    # An integer orjson refuses sends the whole value down the standard library's path.
    slow = json.loads(dumps({"id": order, "at": when, "n": 2**65}))

    for written in (fast, slow):
        assert uuid.UUID(written["id"]) == order
        assert datetime.fromisoformat(written["at"]) == when
