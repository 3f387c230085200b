"""The orchestrator: ingest, instances, steps, retries, the dead-letter queue."""
