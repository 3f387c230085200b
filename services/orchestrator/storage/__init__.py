"""PostgreSQL storage of the orchestrator; everything lives in this schema."""

from typing import Any

from psycopg import AsyncCursor

SCHEMA = "orchestrator"


async def returned_rows(cur: AsyncCursor[Any]) -> list[Any]:
    """Every row that ``executemany(..., returning=True)`` returned, statement by statement
    (a statement that inserted nothing returns no row)."""
    rows = []
    while True:
        row = await cur.fetchone()
        if row is not None:
            rows.append(row)
        if not cur.nextset():
            return rows
