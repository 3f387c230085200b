"""datetime -> google.protobuf.Timestamp, the one conversion every API needs."""

from __future__ import annotations

from datetime import datetime

from google.protobuf.timestamp_pb2 import Timestamp


def timestamp(value: datetime | None) -> Timestamp | None:
    """None stays None, so an unset time leaves the field unset."""
    if value is None:
        return None
    ts = Timestamp()
    ts.FromDatetime(value)
    return ts
