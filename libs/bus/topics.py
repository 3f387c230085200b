"""Every Kafka topic eventflow reads or writes, in one place."""

EVENTS = "eventflow.events"
EVENTS_INVALID = "eventflow.events.invalid"
EVENTS_DLQ = "eventflow.events.dlq"

# Compacted state topics: the newest record per key is the current state.
REGISTRY_WORKFLOWS = "eventflow.registry.workflows"
# Projects and their organization's plan, keyed "<org>/<project>".
REGISTRY_TENANTS = "eventflow.registry.tenants"
GOVERNANCE_ACTIONS = "eventflow.governance.actions"

COMPACTED = frozenset({REGISTRY_WORKFLOWS, REGISTRY_TENANTS, GOVERNANCE_ACTIONS})
