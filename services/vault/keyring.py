"""Loading the vault's key ring from configuration, and the key ring file.

The ring comes from ``EVENTFLOW_VAULT_KEYRING`` (inline entries) or
``EVENTFLOW_VAULT_KEYRING_FILE`` (one entry per line), never both: a stale
second source silently ignored is how keys get lost. See
``services/vault/domain/key_ring.py`` for the format.

Rotation is offline and additive: ``rotate_keyring_file`` appends a new
version; vault replicas pick it up when restarted (or reloaded), new secrets
are wrapped by it, and the KeyRingService's Rewrap moves old ones over.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import tempfile
from pathlib import Path

from libs.config import Settings
from services.vault.domain.key_ring import (
    KeyEncryptionKey,
    KeyRing,
    KeyRingError,
    parse_key_ring,
)

__all__ = [
    "KeyEncryptionKey",
    "KeyRing",
    "KeyRingError",
    "generate_keyring_file",
    "keyring_from_settings",
    "load_keyring",
    "read_keyring_file",
    "rotate_keyring_file",
]

log = logging.getLogger("eventflow.vault")

INLINE_ENV = "EVENTFLOW_VAULT_KEYRING"
FILE_ENV = "EVENTFLOW_VAULT_KEYRING_FILE"

_HEADER = """\
# eventflow vault key ring: one VERSION:BASE64KEY entry per line.
# The highest version wraps new secrets; older ones still unwrap what they
# wrapped until `eventflow admin keyring rewrap` moves it. Keep this file
# private (mode 0600) and backed up: a secret whose key is lost is lost.
"""


def load_keyring(inline: str = "", file: str | Path | None = None) -> KeyRing:
    if inline and file:
        raise KeyRingError(f"set {INLINE_ENV} or {FILE_ENV}, not both")
    if inline:
        return parse_key_ring(inline, INLINE_ENV)
    if file:
        return read_keyring_file(Path(file))
    raise KeyRingError(
        f"no vault key ring: set {FILE_ENV} (create one with"
        f" `eventflow admin keyring rotate --file PATH`) or {INLINE_ENV}"
    )


def keyring_from_settings(settings: Settings) -> KeyRing:
    return load_keyring(settings.vault_keyring, settings.vault_keyring_file or None)


def read_keyring_file(path: Path) -> KeyRing:
    try:
        text = path.read_text(encoding="utf-8")
        mode = path.stat().st_mode
    except OSError as error:
        raise KeyRingError(f"{path}: cannot read the key ring: {error.strerror}") from None
    if mode & 0o077:
        log.warning("vault key ring file %s is readable by others; chmod 600 it", path)
    return parse_key_ring(text, str(path))


def generate_keyring_file(path: Path) -> Path:
    """Create ``path`` with one fresh key (version 1), mode 0600; keep an existing file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(_HEADER + _stamped(KeyEncryptionKey.generate(1)))
        fh.flush()
        os.fsync(fh.fileno())
    return path


def rotate_keyring_file(path: Path) -> KeyEncryptionKey:
    """Append a new key one version above the newest; create the file if missing.

    The file is replaced atomically, so a crash leaves the old ring or the
    new one, never half of either.
    """
    if not path.exists():
        generate_keyring_file(path)
        ring = read_keyring_file(path)
        return ring.primary
    ring = read_keyring_file(path)
    _, key = ring.with_new_key()
    text = path.read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        text += "\n"
    _replace(path, text + _stamped(key))
    return key


def _stamped(key: KeyEncryptionKey) -> str:
    added = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"# version {key.version} added {added}\n{key.entry()}\n"


def _replace(path: Path, text: str) -> None:
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
