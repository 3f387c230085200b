"""How many dead letters wait for someone, per environment (the DLQ depth)."""

from __future__ import annotations

from services.orchestrator.storage.events import Conn


async def open_by_environment(conn: Conn) -> dict[str, int]:
    cur = await conn.execute(
        "SELECT environment, count(*) AS n FROM orchestrator.dead_letters"
        " WHERE status = 'open' GROUP BY environment"
    )
    return {row["environment"]: int(row["n"]) for row in await cur.fetchall()}
