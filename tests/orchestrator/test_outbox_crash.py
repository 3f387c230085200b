"""A derived event committed with its step result goes out once, even if the
process dies between that commit and the relay's publish (SPEC §7).

The first run of a real `eventflow dev` polls its outbox once an hour, so
every derived event its steps commit is still in the outbox when the run is
killed with SIGKILL. The restart's relay publishes them; ingest stores each
once and each starts exactly one instance of the workflow listening for it.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from typing import Any

import grpc
import pytest
from aiokafka import AIOKafkaProducer
from eventflow.orchestrator.v1 import event_service_pb2 as ev
from eventflow.registry.v1 import tenancy_service_pb2 as tenancy
from eventflow.registry.v1 import workflow_pb2 as wf

from libs.bus import topics as bus_topics
from tests.conftest import Tenant, own_temp_dir
from tests.governance.conftest import ActionsClient
from tests.governance.modules import constant, wasm
from tests.integration.helpers import free_port
from tests.orchestrator.conftest import Orchestrated, create_and_publish
from tests.orchestrator.test_crash_recovery import (
    DevProcess,
    all_instances,
    live_probes,
    produce,
    stop_postgres,
)

EVENTS = 6
HOLD_OUTBOX_MS = "3600000"
SETTLE_S = 40.0


async def until(check: Any, what: str, dev: DevProcess) -> Any:
    deadline = time.monotonic() + SETTLE_S
    while not (result := await check()):
        if not dev.alive:
            pytest.fail(f"eventflow dev died while waiting for {what}:{dev.tail()}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)
    return result


async def stored(o: Orchestrated, event_id: str) -> bool:
    try:
        await o.events.GetEvent(
            ev.GetEventRequest(id=event_id, project_id=o.tenant.project), metadata=o.md
        )
        return True
    except grpc.aio.AioRpcError as error:
        assert error.code() == grpc.StatusCode.NOT_FOUND
        return False


async def test_kill_between_commit_and_publish_still_sends_each_derived_event_once(
    kafka_bootstrap: str, producer: AIOKafkaProducer
) -> None:
    namespace = f"outbox{uuid.uuid4().hex[:10]}"
    topic = f"{namespace}.{bus_topics.EVENTS}"
    grpc_port = free_port()
    with own_temp_dir("outbox-crash") as home:
        data_dir = home / "data"
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTFLOW_")}
        env.update(
            EVENTFLOW_DATA_DIR=str(data_dir),
            EVENTFLOW_GRPC_LISTEN=f"127.0.0.1:{grpc_port}",
            EVENTFLOW_INTERNAL_LISTEN=f"127.0.0.1:{free_port()}",
            EVENTFLOW_BUS="kafka",
            EVENTFLOW_KAFKA_BOOTSTRAP=kafka_bootstrap,
            EVENTFLOW_KAFKA_NAMESPACE=namespace,
            EVENTFLOW_EXECUTOR_WORKERS="1",
            EVENTFLOW_OUTBOX_POLL_MS=HOLD_OUTBOX_MS,
        )
        dev = DevProcess(env)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            try:
                await dev.start()
                key = json.loads((data_dir / "credentials.json").read_text())["api_key"]
                admin = Tenant("demo", "demo", dict.fromkeys(("developer", "admin"), key), channel)
                # The key that uploads an action may not approve it: a second admin reviews.
                second = await admin.tenancy.CreateApiKey(
                    tenancy.CreateApiKeyRequest(role="admin", description="reviewer"),
                    metadata=admin.metadata("admin"),
                )
                reviewer = Tenant("demo", "demo", {"admin": second.secret}, channel)
                derived_type = f"orders.scored.{uuid.uuid4().hex[:6]}"
                emitter, listener = f"emit-{uuid.uuid4().hex[:6]}", f"sink-{uuid.uuid4().hex[:6]}"
                document: dict[str, object] = {
                    "derived_event": {"type": derived_type, "payload": {"s": 1}}
                }
                sink: dict[str, object] = {"ok": True}
                for name, module in ((emitter, document), (listener, sink)):
                    await ActionsClient(admin).upload(name, wasm(constant(module)))
                    await ActionsClient(reviewer).review(name, 1)
                trigger = f"orders.placed.{uuid.uuid4().hex[:6]}"
                await create_and_publish(
                    admin, trigger, [wf.Step(type="custom_action", action=emitter)]
                )
                sink_id, _ = await create_and_publish(
                    admin, derived_type, [wf.Step(type="custom_action", action=listener)]
                )
                o = Orchestrated(admin)
                sources = await live_probes(o, producer, topic, trigger)
                for i in range(EVENTS):
                    sources.append(await produce(producer, topic, admin, trigger, {"n": i}))

                async def emitted() -> list[str] | None:
                    ids = []
                    for source in sources:
                        reactions = await o.reactions(source)
                        if not reactions or reactions[0].instance_status != "completed":
                            return None
                        output = json.loads(reactions[0].steps[0].output_json)
                        ids.append(output["derived_event_id"])
                    return ids

                derived = await until(emitted, "every source instance to complete", dev)
                # Committed with the step result, not yet published: nothing ingested them.
                assert [await stored(o, d) for d in derived] == [False] * len(derived)
                await dev.kill()

                del env["EVENTFLOW_OUTBOX_POLL_MS"]
                await dev.start()

                async def all_ingested() -> bool:
                    return all([await stored(o, d) for d in derived])

                await until(all_ingested, "the restart's relay to publish the outbox", dev)

                async def sinks_done() -> list[Any] | None:
                    found = await all_instances(o, sink_id)
                    done = [i for i in found if i.status == "completed"]
                    return found if len(done) >= len(derived) else None

                sinks = await until(sinks_done, "the derived events' workflow to run", dev)
                assert sorted(i.event_id for i in sinks) == sorted(derived)
                for derived_id in derived:
                    reactions = await o.reactions(derived_id)
                    assert [r.instance_status for r in reactions] == ["completed"]
            finally:
                if dev.process:
                    await dev.interrupt()
                stop_postgres(data_dir / "pg")
                dev.reap_children()
