"""The gauge `eventflow.dlq.depth`: open dead letters, per environment.

OpenTelemetry reads a gauge through a synchronous callback at collection
time, where no query can run on the asyncio pool; so a task counts every
``interval_s`` and the gauge reports the last count. A reading is therefore
up to ``interval_s`` older than the export, and every replica reports the
same database-wide figure (aggregate replicas with max, not sum). If a count
fails the gauge keeps the last one and the failure is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Meter, Observation
from psycopg_pool import AsyncConnectionPool

from libs.db import transaction
from services.orchestrator.environments import ENVIRONMENTS
from services.orchestrator.storage import dlq_depth

log = logging.getLogger(__name__)
REFRESH_S = 15.0


class DeadLetterDepth:
    def __init__(
        self,
        pool: AsyncConnectionPool,
        *,
        interval_s: float = REFRESH_S,
        meter: Meter | None = None,
    ) -> None:
        self._pool = pool
        self._interval = interval_s
        # None until the first count: no reading beats a made-up zero.
        self._counts: dict[str, int] | None = None
        self._task: asyncio.Task[None] | None = None
        (meter or metrics.get_meter("eventflow.orchestrator")).create_observable_gauge(
            "eventflow.dlq.depth",
            callbacks=[self._observe],
            unit="{dead_letter}",
            description=f"open dead letters by environment, counted every {interval_s:g}s",
        )

    async def refresh(self) -> dict[str, int]:
        async with transaction(self._pool) as conn:
            found = await dlq_depth.open_by_environment(conn)
        self._counts = {env: found.get(env, 0) for env in ENVIRONMENTS}
        return dict(self._counts)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="dlq-depth")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("counting dead letters failed; DLQ depth is stale", exc_info=True)
            await asyncio.sleep(self._interval)

    def _observe(self, options: CallbackOptions) -> Iterable[Observation]:
        for environment, count in (self._counts or {}).items():
            yield Observation(count, {"environment": environment})
