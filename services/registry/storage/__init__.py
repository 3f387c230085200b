"""PostgreSQL storage of the registry; everything lives in this schema."""

SCHEMA = "registry"
