"""One publish/consume interface with a Kafka adapter and an in-process adapter.

Services depend on ``Bus`` only. The embedded stack and unit tests use
``InProcessBus``; production uses ``KafkaBus``. Consumers receive batches and
their offsets are committed only after the handler returns, so a crash in
the handler redelivers the batch instead of losing it.
"""

from libs.bus.base import Bus, Handler, Record, Subscription, trace_context
from libs.bus.inprocess import InProcessBus
from libs.bus.kafka import KafkaBus

__all__ = ["Bus", "Handler", "InProcessBus", "KafkaBus", "Record", "Subscription", "trace_context"]


def create_bus(
    kind: str, kafka_bootstrap: str, client_id: str = "eventflow", namespace: str = ""
) -> Bus:
    if kind == "kafka":
        return KafkaBus(kafka_bootstrap, client_id=client_id, namespace=namespace)
    return InProcessBus()
