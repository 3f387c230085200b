"""Canonical form, hash and diff of workflow definitions.

Publishing compares hashes of the canonical JSON (sorted keys, no spaces,
UTF-8), so two drafts that differ only in key order or formatting are the
same version.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any


def canonical_json(definition: dict[str, Any]) -> str:
    return json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def definition_hash(definition: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(definition).encode()).hexdigest()


@dataclass(frozen=True)
class Change:
    path: str
    kind: str  # added | removed | changed
    before: Any = None
    after: Any = None


def diff(before: Any, after: Any, path: str = "") -> list[Change]:
    """Leaf-level differences between two JSON values, with readable paths."""
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[Change] = []
        for key in sorted(set(before) | set(after)):
            child = f"{path}.{key}" if path else str(key)
            if key not in before:
                changes.append(Change(child, "added", after=after[key]))
            elif key not in after:
                changes.append(Change(child, "removed", before=before[key]))
            else:
                changes.extend(diff(before[key], after[key], child))
        return changes
    if isinstance(before, list) and isinstance(after, list):
        changes = []
        for i in range(max(len(before), len(after))):
            child = f"{path}[{i}]"
            if i >= len(before):
                changes.append(Change(child, "added", after=after[i]))
            elif i >= len(after):
                changes.append(Change(child, "removed", before=before[i]))
            else:
                changes.extend(diff(before[i], after[i], child))
        return changes
    # Compare types too: JSON tells `true` from `1`, and so does the hash.
    same = type(before) is type(after) and before == after
    return [] if same else [Change(path, "changed", before, after)]
