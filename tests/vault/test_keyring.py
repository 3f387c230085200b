"""The key ring from configuration: parsing, the file, generation and rotation."""

from __future__ import annotations

import base64
import logging
import os
import stat
from pathlib import Path

import pytest

from libs.config import Settings
from services.vault.keyring import (
    KeyEncryptionKey,
    KeyRing,
    KeyRingError,
    generate_keyring_file,
    keyring_from_settings,
    load_keyring,
    read_keyring_file,
    rotate_keyring_file,
)

KEY_A = bytes(range(32))
KEY_B = bytes(range(32, 64))


def b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def test_inline_entries_with_versions_the_highest_is_primary() -> None:
    ring = load_keyring(f"1:{b64(KEY_A)}, 3:{b64(KEY_B)}")
    assert ring.versions == [1, 3]
    assert ring.primary.version == 3 and ring.primary.material == KEY_B
    assert ring.get(1) is not None and ring.get(2) is None


def test_url_safe_base64_is_accepted() -> None:
    key = b"\xfb\xff" * 16
    ring = load_keyring(f"1:{base64.urlsafe_b64encode(key).decode()}")
    assert ring.primary.material == key


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no key"),
        ("# only a comment", "no key"),
        (f"{b64(KEY_A)}", "entry 1 is not VERSION:BASE64KEY"),
        (f"1:{b64(KEY_A)},x:{b64(KEY_B)}", "entry 2 is not VERSION:BASE64KEY"),
        ("1:!!!notbase64", "entry 1 is not VERSION:BASE64KEY"),
        ("1:abc", "entry 1 is not valid base64"),
        (f"1:{b64(KEY_A[:16])}", "entry 1 must decode to 32 bytes"),
        (f"1:{b64(KEY_A)},1:{b64(KEY_B)}", "version 1 appears twice"),
        (f"0:{b64(KEY_A)}", "positive"),
    ],
)
def test_bad_rings_are_refused_without_showing_key_material(text: str, message: str) -> None:
    with pytest.raises(KeyRingError, match=message) as caught:
        load_keyring(text) if text else KeyRing([])
    assert b64(KEY_A) not in str(caught.value) and b64(KEY_B) not in str(caught.value)


def test_a_ring_never_shows_its_keys() -> None:
    ring = load_keyring(f"1:{b64(KEY_A)}")
    for text in (repr(ring), repr(ring.primary), str(ring.primary)):
        assert b64(KEY_A) not in text and KEY_A.hex() not in text
    assert ring.primary.fingerprint and len(ring.primary.fingerprint) == 16


def test_fingerprints_tell_keys_apart_but_are_stable() -> None:
    assert KeyEncryptionKey(1, KEY_A).fingerprint == KeyEncryptionKey(2, KEY_A).fingerprint
    assert KeyEncryptionKey(1, KEY_A).fingerprint != KeyEncryptionKey(1, KEY_B).fingerprint


def test_inline_and_file_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(KeyRingError, match="not both"):
        load_keyring(f"1:{b64(KEY_A)}", tmp_path / "ring")


def test_no_ring_configured_says_how_to_make_one() -> None:
    with pytest.raises(KeyRingError, match="EVENTFLOW_VAULT_KEYRING_FILE"):
        load_keyring()


def test_the_ring_comes_from_settings(tmp_path: Path) -> None:
    path = generate_keyring_file(tmp_path / "ring")
    from_file = keyring_from_settings(
        Settings.load(environ={"EVENTFLOW_VAULT_KEYRING_FILE": str(path)})
    )
    assert from_file.versions == [1]
    inline = keyring_from_settings(
        Settings.load(environ={"EVENTFLOW_VAULT_KEYRING": f"4:{b64(KEY_A)}"})
    )
    assert inline.primary.version == 4


def test_settings_do_not_show_an_inline_ring() -> None:
    settings = Settings.load(environ={"EVENTFLOW_VAULT_KEYRING": f"1:{b64(KEY_A)}"})
    assert b64(KEY_A) not in repr(settings)


def test_generate_creates_a_private_file_with_one_key_and_keeps_it(tmp_path: Path) -> None:
    path = generate_keyring_file(tmp_path / "data" / "vault_keyring")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    first = path.read_text()
    ring = read_keyring_file(path)
    assert ring.versions == [1]
    generate_keyring_file(path)
    assert path.read_text() == first


def test_rotate_appends_a_newer_version_and_keeps_the_old(tmp_path: Path) -> None:
    path = generate_keyring_file(tmp_path / "ring")
    before = read_keyring_file(path)
    added = rotate_keyring_file(path)
    after = read_keyring_file(path)
    assert added.version == 2 and after.versions == [1, 2]
    assert after.get(1) == before.get(1)
    assert after.primary == added
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["ring"]  # no temporary left behind


def test_rotate_creates_a_missing_file(tmp_path: Path) -> None:
    added = rotate_keyring_file(tmp_path / "new-ring")
    assert added.version == 1 and read_keyring_file(tmp_path / "new-ring").versions == [1]


def test_rotate_refuses_a_broken_file_and_leaves_it_alone(tmp_path: Path) -> None:
    path = tmp_path / "ring"
    path.write_text("1:garbage\n")
    with pytest.raises(KeyRingError):
        rotate_keyring_file(path)
    assert path.read_text() == "1:garbage\n"


def test_a_hand_edited_file_with_comments_and_gaps_loads(tmp_path: Path) -> None:
    path = tmp_path / "ring"
    path.write_text(f"# old\n\n5:{b64(KEY_A)}  # from the HSM export\n9:{b64(KEY_B)}\n")
    os.chmod(path, 0o600)
    assert read_keyring_file(path).versions == [5, 9]


def test_a_world_readable_file_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = generate_keyring_file(tmp_path / "ring")
    os.chmod(path, 0o644)
    with caplog.at_level(logging.WARNING):
        read_keyring_file(path)
    assert "chmod 600" in caplog.text


def test_an_unreadable_file_is_a_key_ring_error(tmp_path: Path) -> None:
    with pytest.raises(KeyRingError, match="cannot read"):
        read_keyring_file(tmp_path / "missing")
