"""`kill -9` of the whole dev stack in the middle of a run, then a restart (SPEC §7, last bullet).

"At-least-once underneath, exactly-once in effect" means, for this test:

- underneath, anything may run again after a crash: a Kafka record whose offset was not
  committed is read again, and a step that had started but whose outcome was not written is
  attempted again (so its webhook may be delivered twice);
- in effect, what the system keeps and shows is as if every event had been processed once:
  every produced event is stored, starts exactly one instance of the matching workflow (no
  lost event, no second instance), and that instance completes; its event log is one dense
  history 1..n ending in a single `instance_completed`; and every webhook delivery of one
  step of one instance carries the same `webhook-id` (the receiver's idempotency key), so a
  receiver that deduplicates on it sees each (event, step) once. A repeated delivery with
  that same id is allowed; a second id for the same step never is.

The stack runs as a real `eventflow dev` subprocess on the shared test broker (its topics and
consumer groups under a namespace of its own) and its own embedded PostgreSQL, which survives
the SIGKILL and is reused by the restart. The first webhook endpoint is slow, so that when
the process dies some instances have completed, some are in the middle of a step (their
webhook received, their outcome unwritten) and some have not started; a few more events are
produced while the stack is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from aiohttp import web
from aiokafka import AIOKafkaProducer
from eventflow.orchestrator.v1 import instance_service_pb2 as inst
from eventflow.registry.v1 import workflow_pb2 as wf
from standardwebhooks import Webhook

from libs.bus import topics as bus_topics
from tests.conftest import Tenant, own_temp_dir
from tests.integration.helpers import free_port
from tests.integration.test_dev_stack import postgres_running
from tests.orchestrator.conftest import Delivery, Orchestrated, create_and_publish, structured

ROOT = Path(__file__).resolve().parents[2]
READY_LINE = "Ctrl-C stops it"
EVENTS_BEFORE_CRASH = 30
EVENTS_WHILE_DOWN = 5
SLOW_S = 0.4
# Requests the slow endpoint serves at once: with 0.4 s each, about 10 instances a second get
# through step 1, so the run is still going when the first ones complete.
SLOW_CONCURRENCY = 4
START_TIMEOUT_S = 45.0
# From the restart until every instance has completed. Generous for re-reading the topic,
# rejoining the consumer groups and re-running what the kill interrupted, and short enough
# that the whole test stays under a minute.
RECOVERY_TIMEOUT_S = 40.0
STOP_TIMEOUT_S = 30.0


@dataclass
class SlowReceiver:
    """Records every delivery on arrival (before answering), then answers 200."""

    url: str = ""
    secret: str = ""
    deliveries: list[Delivery] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # monotonic time of each delivery
    gate: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(SLOW_CONCURRENCY))

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            Webhook(self.secret).verify(raw, headers)
            verified = True
        except Exception:
            verified = False
        self.deliveries.append(Delivery(request.path, headers, json.loads(raw), verified))
        self.arrivals.append(time.monotonic())
        if request.path == "/slow":
            async with self.gate:
                await asyncio.sleep(SLOW_S)
        return web.Response(status=200)


@contextlib.asynccontextmanager
async def slow_receiver() -> AsyncIterator[SlowReceiver]:
    receiver = SlowReceiver()
    app = web.Application()
    app.router.add_route("POST", "/{tail:.*}", receiver.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    receiver.url = f"http://127.0.0.1:{port}"
    try:
        yield receiver
    finally:
        await runner.cleanup()


class DevProcess:
    """`python -m cli.main dev` as a child process; its output is drained continuously."""

    def __init__(self, env: dict[str, str], cwd: Path = ROOT) -> None:
        self.env = env
        self.cwd = cwd
        self.process: asyncio.subprocess.Process | None = None
        self.output = ""
        self._drain: asyncio.Task[None] | None = None
        # Children of every run (the sandbox's workers), to make sure none outlives the test.
        self.children: dict[int, bytes] = {}

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def start(self) -> None:
        self.output += "\n===== eventflow dev =====\n"
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "cli.main",
            "dev",
            cwd=self.cwd,
            env=self.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        mark = len(self.output)
        self._drain = asyncio.create_task(self._read(self.process))
        deadline = time.monotonic() + START_TIMEOUT_S
        while READY_LINE not in self.output[mark:]:
            if self.process.returncode is not None or self._drain.done():
                await asyncio.wait_for(self._drain, 5)
                pytest.fail(f"eventflow dev exited with {self.process.returncode}:{self.tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"eventflow dev not ready after {START_TIMEOUT_S:g} s:{self.tail()}")
            await asyncio.sleep(0.05)
        self.children.update(_descendants(self.process.pid))

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while chunk := await process.stdout.read(65536):
            self.output += chunk.decode("utf-8", "replace")
        await process.wait()

    async def kill(self) -> None:
        """SIGKILL: no handler runs, nothing is flushed or closed."""
        assert self.process is not None
        self.children.update(_descendants(self.process.pid))
        self.process.send_signal(signal.SIGKILL)
        await self._wait(10)

    async def interrupt(self) -> int | None:
        """SIGINT, as Ctrl-C: the stack stops its services and its embedded PostgreSQL."""
        assert self.process is not None
        if self.alive:
            self.children.update(_descendants(self.process.pid))
            self.process.send_signal(signal.SIGINT)
        await self._wait(STOP_TIMEOUT_S)
        return self.process.returncode

    async def _wait(self, timeout_s: float) -> None:
        assert self.process is not None and self._drain is not None
        try:
            await asyncio.wait_for(asyncio.shield(self._drain), timeout_s)
        except TimeoutError:
            self.process.kill()
            await self._drain

    def tail(self, chars: int = 8000) -> str:
        return "\n" + self.output[-chars:]

    def reap_children(self) -> None:
        """End any worker a killed run left behind (by pid, only if it is still that process)."""
        for pid, start in self.children.items():
            if _start_time(pid) == start:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _start_time(pid: int) -> bytes | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return stat.rsplit(b")", 1)[1].split()[19]


def _descendants(root: int) -> dict[int, bytes]:
    """Every live descendant of ``root`` (pid -> start time), from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_bytes()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(b")", 1)[1].split()[1])
    found: dict[int, bytes] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                start = _start_time(pid)
                if start is not None:
                    found[pid] = start
                    frontier.append(pid)
    return found


def stop_postgres(pgdata: Path) -> None:
    """Fast shutdown of a postmaster the stack left running (the test must not leak one)."""
    pid_file = pgdata / "postmaster.pid"
    if not postgres_running(pgdata):
        return
    pid = int(pid_file.read_text().split()[0])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + 15
    while postgres_running(pgdata) and time.monotonic() < deadline:
        time.sleep(0.1)


async def produce(
    producer: AIOKafkaProducer, topic: str, tenant: Tenant, event_type: str, data: dict[str, Any]
) -> str:
    value = structured(tenant, event_type, data)
    await producer.send_and_wait(
        topic, value=value, headers=[("content-type", b"application/cloudevents+json")]
    )
    return str(json.loads(value)["id"])


async def all_instances(o: Orchestrated, workflow_id: str, status: str = "") -> list[Any]:
    found: list[Any] = []
    token = ""
    while True:
        page = await o.instances.ListInstances(
            inst.ListInstancesRequest(
                project_id=o.tenant.project,
                workflow_id=workflow_id,
                status=status,
                page_size=50,
                page_token=token,
            ),
            metadata=o.md,
        )
        found.extend(page.instances)
        token = page.next_page_token
        if not token:
            return found


async def live_probes(
    o: Orchestrated, producer: AIOKafkaProducer, topic: str, trigger: str
) -> list[str]:
    """Probe until the workflow reacts (it reaches the orchestrator over Kafka); returns the
    probe events that started an instance. One partition: once a probe has reacted, every
    earlier one has been ingested, so this set is final."""
    probes: list[str] = []
    deadline = time.monotonic() + 30
    while True:
        probes.append(await produce(producer, topic, o.tenant, trigger, {"probe": len(probes)}))
        await asyncio.sleep(0.3)
        if await o.reactions(probes[-1]):
            break
        assert time.monotonic() < deadline, "the published workflow never became live"
    return [p for p in probes if await o.reactions(p)]


async def test_kill_9_mid_run_then_restart_processes_every_event_exactly_once(
    kafka_bootstrap: str, producer: AIOKafkaProducer
) -> None:
    began = time.monotonic()
    namespace = f"crash{uuid.uuid4().hex[:10]}"
    topic = f"{namespace}.{bus_topics.EVENTS}"
    grpc_port = free_port()
    with own_temp_dir("crash") as home:
        data_dir = home / "data"
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTFLOW_")}
        env.update(
            EVENTFLOW_DATA_DIR=str(data_dir),
            EVENTFLOW_GRPC_LISTEN=f"127.0.0.1:{grpc_port}",
            EVENTFLOW_INTERNAL_LISTEN=f"127.0.0.1:{free_port()}",
            EVENTFLOW_BUS="kafka",
            EVENTFLOW_KAFKA_BOOTSTRAP=kafka_bootstrap,
            EVENTFLOW_KAFKA_NAMESPACE=namespace,
            EVENTFLOW_WEBHOOKS_ALLOW_PRIVATE="true",
            EVENTFLOW_EXECUTOR_WORKERS="1",
        )
        dev = DevProcess(env)
        async with (
            slow_receiver() as receiver,
            grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel,
        ):
            try:
                await dev.start()
                credentials = json.loads((data_dir / "credentials.json").read_text())
                assert (credentials["organization"], credentials["project"]) == ("demo", "demo")
                key = credentials["api_key"]
                tenant = Tenant(
                    "demo", "demo", dict.fromkeys(("viewer", "developer"), key), channel
                )
                o = Orchestrated(tenant)
                trigger = f"orders.placed.{uuid.uuid4().hex[:6]}"
                workflow_id, receiver.secret = await create_and_publish(
                    tenant,
                    trigger,
                    [
                        wf.Step(type="webhook", name="slow", url=f"{receiver.url}/slow"),
                        wf.Step(type="webhook", name="fast", url=f"{receiver.url}/fast"),
                    ],
                )
                expected = await live_probes(o, producer, topic, trigger)
                for i in range(EVENTS_BEFORE_CRASH):
                    expected.append(await produce(producer, topic, tenant, trigger, {"n": i}))

                async def progress() -> int:
                    return len(await all_instances(o, workflow_id, "completed"))

                deadline = time.monotonic() + 20
                while (done := await progress()) < 3:
                    assert time.monotonic() < deadline, f"only {done} instances completed"
                    await asyncio.sleep(0.05)
                assert done < len(expected), "the run ended before the kill; slow it down"
                await dev.kill()
                killed_at, done_at_kill = time.monotonic(), done

                for i in range(EVENTS_WHILE_DOWN):
                    expected.append(await produce(producer, topic, tenant, trigger, {"late": i}))
                await dev.start()
                restarted_at = time.monotonic()

                deadline = restarted_at + RECOVERY_TIMEOUT_S
                while (done := await progress()) < len(expected):
                    if not dev.alive:
                        pytest.fail(f"eventflow dev died after the restart:{dev.tail()}")
                    if time.monotonic() > deadline:
                        pytest.fail(stuck_report(await all_instances(o, workflow_id), done))
                    await asyncio.sleep(0.2)
                print(
                    f"crash test: {done_at_kill}/{len(expected) - EVENTS_WHILE_DOWN} completed"
                    f" when killed at {killed_at - began:.1f} s; restarted in"
                    f" {restarted_at - killed_at:.1f} s; all {len(expected)} completed"
                    f" {time.monotonic() - restarted_at:.1f} s after the restart;"
                    f" {redelivery_summary(receiver)}"
                )
                await check_exactly_once_in_effect(o, workflow_id, expected, receiver)
            finally:
                code = await dev.interrupt() if dev.process else None
                still_running = postgres_running(data_dir / "pg")
                handles = _read(data_dir / "pg" / ".handle_pids.json")
                stop_postgres(data_dir / "pg")
                dev.reap_children()
        assert code == 0, f"eventflow dev exited with {code} on SIGINT:{dev.tail()}"
        assert not still_running, (
            "SIGINT stopped eventflow dev but its embedded PostgreSQL kept running;"
            f" .handle_pids.json: {handles}"
        )


def stuck_report(instances: list[Any], done: int) -> str:
    unfinished = [
        f"{i.event_id} {i.status} step {i.current_step} attempt {i.attempt}"
        f" (updated {i.update_time.ToDatetime():%H:%M:%S})"
        for i in instances
        if i.status != "completed"
    ]
    return (
        f"{done}/{len(instances)} instances completed {RECOVERY_TIMEOUT_S:g} s after the"
        f" restart (now {time.strftime('%H:%M:%S', time.gmtime())} UTC); unfinished:\n  "
        + "\n  ".join(unfinished)
    )


def redelivery_summary(receiver: SlowReceiver) -> str:
    first: dict[str, float] = {}
    again: dict[str, float] = {}
    for delivery, arrived in zip(receiver.deliveries, receiver.arrivals, strict=True):
        msg_id = delivery.headers["webhook-id"]
        if msg_id in first:
            again[msg_id] = arrived - first[msg_id]
        else:
            first[msg_id] = arrived
    if not again:
        return "no webhook delivered twice"
    return (
        f"{len(again)} webhooks delivered again (same webhook-id),"
        f" {min(again.values()):.1f}-{max(again.values()):.1f} s after the first delivery"
    )


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as error:
        return str(error)


async def check_exactly_once_in_effect(
    o: Orchestrated, workflow_id: str, expected: list[str], receiver: SlowReceiver
) -> None:
    assert len(set(expected)) == len(expected)

    # Every event: stored, exactly one instance, completed with both steps done.
    instance_of: dict[str, str] = {}
    for event_id in expected:
        reactions = await o.reactions(event_id)
        assert len(reactions) == 1, f"event {event_id}: {len(reactions)} instances"
        [reaction] = reactions
        assert reaction.workflow_id == workflow_id
        assert reaction.instance_status == "completed", reaction
        assert [s.status for s in reaction.steps] == ["completed", "completed"], reaction
        instance_of[event_id] = reaction.instance_id

    # Nothing else: the listing holds exactly these instances, once each.
    listed = await all_instances(o, workflow_id)
    assert len(listed) == len(expected), f"{len(listed)} instances for {len(expected)} events"
    assert sorted(i.event_id for i in listed) == sorted(expected)
    assert {i.id for i in listed} == set(instance_of.values())

    # One history per instance: dense positions 1..n, one terminal entry at the end.
    for event_id, instance_id in instance_of.items():
        entries = await o.log(instance_id)
        kinds = [e.kind for e in entries]
        assert [e.position for e in entries] == list(range(1, len(entries) + 1)), kinds
        assert kinds[0] == "instance_created" and kinds[-1] == "instance_completed", kinds
        assert kinds.count("instance_created") == kinds.count("instance_completed") == 1, kinds
        completed_steps = [e.step for e in entries if e.kind == "step_completed"]
        assert completed_steps == [0, 1], f"event {event_id}: {kinds}"

    # Webhooks: at least once, every delivery of one (event, step) under one webhook-id.
    ids: dict[tuple[str, int], set[str]] = defaultdict(set)
    count: dict[tuple[str, int], int] = defaultdict(int)
    for delivery in receiver.deliveries:
        assert delivery.verified, f"unverifiable signature: {delivery.headers}"
        assert delivery.path == ("/slow", "/fast")[delivery.body["step"]]
        assert delivery.headers["webhook-id"] == delivery.headers["idempotency-key"]
        assert delivery.body["instance"] == instance_of[delivery.body["id"]], delivery.body
        step = (delivery.body["id"], delivery.body["step"])
        ids[step].add(delivery.headers["webhook-id"])
        count[step] += 1
    assert set(ids) == {(e, s) for e in expected for s in (0, 1)}, "a step was never delivered"
    assert {k: v for k, v in ids.items() if len(v) > 1} == {}, "two webhook-ids for one step"
    assert len({next(iter(v)) for v in ids.values()}) == len(ids), "a webhook-id was reused"
    redelivered = sorted(k for k, n in count.items() if n > 1)
    assert redelivered, "the kill interrupted no webhook in flight: the test did not test"
