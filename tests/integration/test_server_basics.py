"""What every eventflow server offers: health checking and reflection, without a key."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc


async def test_health_reports_serving_for_each_service(channel: grpc.aio.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    for service in (
        "",
        "eventflow.registry.v1.WorkflowService",
        "eventflow.registry.v1.TenancyService",
    ):
        reply = await health.Check(health_pb2.HealthCheckRequest(service=service))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_reflection_lists_the_registry_services(channel: grpc.aio.Channel) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)

    async def requests():
        yield reflection_pb2.ServerReflectionRequest(list_services="")

    names: list[str] = []
    async for reply in stub.ServerReflectionInfo(requests()):
        names.extend(s.name for s in reply.list_services_response.service)
    assert {"eventflow.registry.v1.WorkflowService", "eventflow.registry.v1.TenancyService"} <= set(
        names
    )
