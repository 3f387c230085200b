"""An async psycopg pool with eventflow's defaults."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from libs.db import jsonb


async def open_pool(
    url: str, *, max_size: int = 10, name: str = "eventflow"
) -> AsyncConnectionPool:
    """Open a pool of ``max_size`` connections, waiting until one works so that start-up
    fails fast. The pool is opened full: a connection opened mid-burst costs a backend
    start and cold catalog caches right when the load arrives."""
    jsonb.install()
    pool = AsyncConnectionPool(
        url,
        min_size=max_size,
        max_size=max_size,
        name=name,
        kwargs={"row_factory": dict_row, "autocommit": False},
        open=False,
    )
    await pool.open(wait=True, timeout=30)
    return pool


@asynccontextmanager
async def transaction(pool: AsyncConnectionPool) -> AsyncIterator[AsyncConnection[Any]]:
    """A pooled connection inside one transaction: commit on success, else roll back."""
    async with pool.connection() as conn, conn.transaction():
        yield conn
