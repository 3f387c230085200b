"""Feeds the executor's ActionCatalog from `eventflow.governance.actions`.

Every executor replica reads the whole compacted topic (its own consumer
group), so each holds the full runnable state of every action.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from eventflow.governance.v1 import action_state_pb2

from libs.bus import Bus, Record, Subscription
from libs.bus import topics as bus_topics
from services.executor.catalog import ActionCatalog


class ActionStateFeed:
    def __init__(self, catalog: ActionCatalog, bus: Bus) -> None:
        self._catalog = catalog
        self._bus = bus
        self._subscription: Subscription | None = None
        # A fresh group per process: every replica must see every record.
        self._group = f"executor-{uuid.uuid4().hex[:12]}"

    def start(self) -> None:
        self._subscription = self._bus.subscribe(
            [bus_topics.GOVERNANCE_ACTIONS], self._group, self.apply
        )

    async def stop(self) -> None:
        if self._subscription is not None:
            await self._subscription.stop()

    async def apply(self, batch: Sequence[Record]) -> None:
        for record in batch:
            if record.key is None:
                continue
            state = (
                action_state_pb2.ActionState.FromString(record.value)
                if record.value is not None
                else None
            )
            self._catalog.apply(record.key.decode(), state)
