"""PostgreSQL storage of governance; everything lives in this schema."""

SCHEMA = "governance"
