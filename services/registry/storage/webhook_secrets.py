"""Webhook signing secrets in PostgreSQL, one row per workflow.

Methods take the connection of the caller's transaction: a workflow and its
first secret are created together or not at all.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from services.registry.storage.workflows import Conn


@dataclass(frozen=True)
class WebhookSecretRow:
    workflow_id: uuid.UUID
    # Kept out of repr so a logged row never shows a secret.
    secret: str = field(repr=False)
    previous_secret: str | None = field(repr=False)
    rotate_time: datetime | None
    create_time: datetime


class WebhookSecretStore:
    async def insert(self, conn: Conn, workflow_id: uuid.UUID, secret: str) -> None:
        await conn.execute(
            "INSERT INTO registry.webhook_secrets (workflow_id, secret) VALUES (%s, %s)",
            (workflow_id, secret),
        )

    async def rotate(self, conn: Conn, workflow_id: uuid.UUID, secret: str) -> None:
        """Make ``secret`` current; the current one becomes the previous one.

        An upsert, so the secret handed back to the caller is always the one
        stored, even for a workflow that somehow has no row yet.
        """
        await conn.execute(
            "INSERT INTO registry.webhook_secrets (workflow_id, secret) VALUES (%s, %s)"
            " ON CONFLICT (workflow_id) DO UPDATE SET secret = EXCLUDED.secret,"
            " previous_secret = webhook_secrets.secret, rotate_time = now()",
            (workflow_id, secret),
        )

    async def get(self, conn: Conn, workflow_id: uuid.UUID) -> WebhookSecretRow | None:
        cur = await conn.execute(
            "SELECT workflow_id, secret, previous_secret, rotate_time, create_time"
            " FROM registry.webhook_secrets WHERE workflow_id = %s",
            (workflow_id,),
        )
        row = await cur.fetchone()
        return WebhookSecretRow(**row) if row else None
