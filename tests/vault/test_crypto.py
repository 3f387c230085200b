"""Envelope encryption (no database): AES-256-GCM with a data key per version,
associated data binding every ciphertext to its record, re-wrapping without
touching the value."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest

from services.vault.domain.envelope import (
    FORMAT_VERSION,
    NONCE_BYTES,
    IntegrityError,
    KeyUnavailable,
    SecretRecord,
    open_sealed,
    rewrap,
    seal,
)
from services.vault.domain.key_ring import KeyEncryptionKey, KeyRing
from services.vault.domain.values import SecretValue

RECORD = SecretRecord("acme", "score-order", "RISK_THRESHOLD", 3)
VALUE = SecretValue("sk_live_CANARY_4f9a2c")


@pytest.fixture
def ring() -> KeyRing:
    return KeyRing([KeyEncryptionKey.generate(1), KeyEncryptionKey.generate(2)])


def flip(data: bytes, index: int = 0) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


def test_a_sealed_value_opens_with_its_record(ring: KeyRing) -> None:
    sealed = seal(RECORD, VALUE, ring.primary)
    assert open_sealed(RECORD, sealed, ring) == VALUE
    assert sealed.format == FORMAT_VERSION and sealed.kek_version == 2


def test_the_plaintext_appears_nowhere_in_the_envelope(ring: KeyRing) -> None:
    sealed = seal(RECORD, VALUE, ring.primary)
    for part in (sealed.ciphertext, sealed.wrapped_dek, sealed.dek_nonce, sealed.value_nonce):
        assert VALUE.encode() not in part
    assert "CANARY" not in repr(sealed)


def test_unicode_and_large_values_round_trip(ring: KeyRing) -> None:
    for text in ("ünïcødé ✓ 秘密", "x" * 65536, "line\nbreaks\r\n"):
        assert open_sealed(
            RECORD, seal(RECORD, SecretValue(text), ring.primary), ring
        ).reveal() == (text)


@pytest.mark.parametrize(
    "moved",
    [
        dataclasses.replace(RECORD, organization_id="globex"),
        dataclasses.replace(RECORD, action="other-action"),
        dataclasses.replace(RECORD, key="OTHER_KEY"),
        dataclasses.replace(RECORD, version=4),
    ],
    ids=["organization", "action", "key", "version"],
)
def test_a_ciphertext_moved_to_another_record_fails(ring: KeyRing, moved: SecretRecord) -> None:
    sealed = seal(RECORD, VALUE, ring.primary)
    with pytest.raises(IntegrityError) as caught:
        open_sealed(moved, sealed, ring)
    assert "CANARY" not in str(caught.value)
    assert caught.value.record == moved


def test_records_that_concatenate_alike_are_still_different() -> None:
    ring = KeyRing([KeyEncryptionKey.generate(1)])
    a = SecretRecord("ab", "c", "KEY", 1)
    b = SecretRecord("a", "bc", "KEY", 1)
    with pytest.raises(IntegrityError):
        open_sealed(b, seal(a, VALUE, ring.primary), ring)


def test_swapping_ciphertexts_between_two_rows_fails(ring: KeyRing) -> None:
    other = dataclasses.replace(RECORD, key="API_TOKEN")
    first = seal(RECORD, VALUE, ring.primary)
    second = seal(other, SecretValue("another"), ring.primary)
    with pytest.raises(IntegrityError):
        open_sealed(RECORD, second, ring)
    # Only the value ciphertext swapped, each row keeping its own data key.
    with pytest.raises(IntegrityError):
        open_sealed(
            RECORD,
            dataclasses.replace(
                first, value_nonce=second.value_nonce, ciphertext=second.ciphertext
            ),
            ring,
        )


@pytest.mark.parametrize("field", ["ciphertext", "wrapped_dek", "dek_nonce", "value_nonce"])
def test_a_flipped_bit_anywhere_is_detected(ring: KeyRing, field: str) -> None:
    sealed = seal(RECORD, VALUE, ring.primary)
    for index in (0, len(getattr(sealed, field)) - 1):
        changes: dict[str, Any] = {field: flip(getattr(sealed, field), index)}
        tampered = dataclasses.replace(sealed, **changes)
        with pytest.raises(IntegrityError):
            open_sealed(RECORD, tampered, ring)


def test_a_truncated_ciphertext_is_detected(ring: KeyRing) -> None:
    sealed = seal(RECORD, VALUE, ring.primary)
    with pytest.raises(IntegrityError):
        open_sealed(RECORD, dataclasses.replace(sealed, ciphertext=sealed.ciphertext[:-1]), ring)
    with pytest.raises(IntegrityError):
        open_sealed(RECORD, dataclasses.replace(sealed, ciphertext=b""), ring)


def test_claiming_another_key_version_fails(ring: KeyRing) -> None:
    sealed = seal(RECORD, VALUE, ring.primary)
    with pytest.raises(IntegrityError):
        open_sealed(RECORD, dataclasses.replace(sealed, kek_version=1), ring)


def test_an_unknown_format_version_is_refused(ring: KeyRing) -> None:
    sealed = seal(RECORD, VALUE, ring.primary)
    with pytest.raises(IntegrityError, match="format"):
        open_sealed(RECORD, dataclasses.replace(sealed, format=2), ring)


def test_a_key_version_missing_from_the_ring_is_reported_as_such(ring: KeyRing) -> None:
    sealed = seal(RECORD, VALUE, KeyEncryptionKey.generate(7))
    with pytest.raises(KeyUnavailable) as caught:
        open_sealed(RECORD, sealed, ring)
    assert caught.value.kek_version == 7


def test_the_same_version_under_another_key_of_that_number_fails() -> None:
    ours = KeyRing([KeyEncryptionKey.generate(1)])
    theirs = KeyRing([KeyEncryptionKey.generate(1)])
    with pytest.raises(IntegrityError):
        open_sealed(RECORD, seal(RECORD, VALUE, theirs.primary), ours)


def test_nonces_and_data_keys_are_fresh_for_every_seal(ring: KeyRing) -> None:
    sealed = [seal(RECORD, VALUE, ring.primary) for _ in range(500)]
    nonces = [s.value_nonce for s in sealed] + [s.dek_nonce for s in sealed]
    assert all(len(n) == NONCE_BYTES for n in nonces)
    assert len(set(nonces)) == len(nonces)
    assert len({s.ciphertext for s in sealed}) == len(sealed)
    assert len({s.wrapped_dek for s in sealed}) == len(sealed)


def test_rewrap_keeps_the_value_ciphertext_and_opens_under_the_new_key() -> None:
    old = KeyRing([KeyEncryptionKey.generate(1)])
    rotated, new_key = old.with_new_key()
    sealed = seal(RECORD, VALUE, old.primary)
    moved = rewrap(RECORD, sealed, rotated, new_key)
    assert moved.kek_version == 2
    assert (moved.ciphertext, moved.value_nonce) == (sealed.ciphertext, sealed.value_nonce)
    assert moved.wrapped_dek != sealed.wrapped_dek and moved.dek_nonce != sealed.dek_nonce
    only_new = KeyRing([new_key])
    assert open_sealed(RECORD, moved, only_new) == VALUE


def test_rewrap_refuses_a_tampered_row(ring: KeyRing) -> None:
    sealed = seal(RECORD, VALUE, ring.get(1))  # type: ignore[arg-type]
    with pytest.raises(IntegrityError):
        rewrap(dataclasses.replace(RECORD, key="MOVED"), sealed, ring, ring.primary)


def test_envelope_errors_name_the_record_not_the_value(ring: KeyRing) -> None:
    with pytest.raises(IntegrityError) as caught:
        open_sealed(RECORD, dataclasses.replace(seal(RECORD, VALUE, ring.primary), format=9), ring)
    text = str(caught.value)
    assert "RISK_THRESHOLD" in text and "acme" in text and "CANARY" not in text


# ----------------------------------------------------------------- SecretValue


def test_a_secret_value_never_shows_itself() -> None:
    for rendered in (repr(VALUE), str(VALUE), f"{VALUE}", f"{VALUE!r}", f"{VALUE:>40}"):
        assert "CANARY" not in rendered and "redacted" in rendered
    assert "CANARY" not in repr([VALUE, {"v": VALUE}])
    assert VALUE.reveal() == "sk_live_CANARY_4f9a2c"


def test_a_secret_value_cannot_be_pickled() -> None:
    with pytest.raises(TypeError):
        pickle.dumps(VALUE)


def test_secret_values_compare_by_content_and_are_unhashable() -> None:
    assert SecretValue("a") == SecretValue("a") and SecretValue("a") != SecretValue("b")
    with pytest.raises(TypeError):
        hash(SecretValue("a"))


def test_size_counts_utf8_bytes() -> None:
    assert SecretValue("é").size == 2
