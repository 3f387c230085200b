"""PostgreSQL access shared by the services: a connection pool and migrations."""

from libs.db.migrations import Migration, MigrationError, apply_migrations, load_migrations
from libs.db.pool import open_pool, transaction

__all__ = [
    "Migration",
    "MigrationError",
    "apply_migrations",
    "load_migrations",
    "open_pool",
    "transaction",
]
