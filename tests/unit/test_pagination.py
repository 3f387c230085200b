"""SPEC §11 / AIP-158: page sizes and opaque page tokens."""

from __future__ import annotations

import base64
import json
from typing import Any

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from libs.errors import EventflowError
from libs.pagination import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    decode_token,
    encode_token,
    page_size,
)

KEYS = ("create_time", "id")


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode()


def assert_rejected_token(token: str, keys: tuple[str, ...] = KEYS) -> None:
    with pytest.raises(EventflowError) as caught:
        decode_token(token, keys)
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in caught.value.violations] == ["page_token"]


# --- page size --------------------------------------------------------------


def test_page_size_defaults_to_50() -> None:
    assert DEFAULT_PAGE_SIZE == 50
    assert page_size(0) == 50


@pytest.mark.parametrize("requested", [1, 49, 51, 199, 200])
def test_page_size_up_to_200_is_honoured(requested: int) -> None:
    assert page_size(requested) == requested


@pytest.mark.parametrize("requested", [201, 1_000, 2**31 - 1])
def test_page_size_is_capped_at_200(requested: int) -> None:
    assert MAX_PAGE_SIZE == 200
    assert page_size(requested) == 200


@pytest.mark.parametrize("requested", [-1, -50])
def test_negative_page_size_is_rejected(requested: int) -> None:
    with pytest.raises(EventflowError) as caught:
        page_size(requested)
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in caught.value.violations] == ["page_size"]


def test_page_size_violation_can_name_another_field() -> None:
    with pytest.raises(EventflowError) as caught:
        page_size(-1, field="limit")
    assert [v.field for v in caught.value.violations] == ["limit"]


# --- tokens -----------------------------------------------------------------


def test_an_empty_token_means_the_first_page() -> None:
    assert decode_token("", KEYS) is None


def test_a_token_round_trips() -> None:
    cursor = {"create_time": "2025-01-02T03:04:05.000006+00:00", "id": "3f1c2b8e"}
    assert decode_token(encode_token(cursor), KEYS) == cursor


cursor_values = st.none() | st.booleans() | st.integers() | st.text()


@given(st.dictionaries(st.text(min_size=1), cursor_values, min_size=1, max_size=4))
def test_any_json_cursor_round_trips(cursor: dict[str, Any]) -> None:
    assert decode_token(encode_token(cursor), tuple(cursor)) == cursor


@given(st.dictionaries(st.text(), st.text(), max_size=3))
def test_tokens_are_url_safe_text(cursor: dict[str, str]) -> None:
    token = encode_token(cursor)
    assert token.isascii()
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=")


@pytest.mark.parametrize(
    "token",
    [
        "not-a-token",
        "!!!!",
        "%%%",
        "e30",
        b64(b"{}"),
        b64(b"null"),
        b64(b"[1, 2]"),
        b64(b'"create_time"'),
        b64(b"\xff\xfe\x00garbage"),
        b64(b'{"create_time": "x", "id": '),
    ],
)
def test_garbage_tokens_are_rejected_on_page_token(token: str) -> None:
    assert_rejected_token(token)


def test_a_token_from_another_list_is_rejected() -> None:
    foreign = encode_token({"after": "project-7"})
    assert_rejected_token(foreign, KEYS)


@pytest.mark.parametrize(
    "cursor",
    [{"id": "x"}, {"create_time": "t", "id": "x", "extra": 1}],
    ids=["missing-key", "extra-key"],
)
def test_a_token_with_other_keys_is_rejected(cursor: dict[str, Any]) -> None:
    assert_rejected_token(encode_token(cursor))


@given(st.text())
def test_any_text_is_either_a_cursor_or_a_page_token_violation(token: str) -> None:
    try:
        cursor = decode_token(token, ("after",))
    except EventflowError as error:
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in error.violations] == ["page_token"]
    else:
        assert cursor is None or set(cursor) == {"after"}


def test_a_deeply_nested_token_is_a_page_token_violation_not_a_crash() -> None:
    # A 13 KB token of "[" decodes to JSON nested past the interpreter's recursion limit.
    assert_rejected_token(b64(b"[" * 10_000))


def test_a_token_body_that_is_json_but_not_an_object_is_rejected() -> None:
    assert_rejected_token(b64(json.dumps(["create_time", "id"]).encode()))
