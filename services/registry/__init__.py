"""The registry: workflows, their drafts and published versions; tenancy and API keys."""
