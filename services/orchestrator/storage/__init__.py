"""PostgreSQL storage of the orchestrator; everything lives in this schema."""

SCHEMA = "orchestrator"
