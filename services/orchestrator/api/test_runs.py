"""TestRunService: protobuf in, test run use case, protobuf out."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc
from eventflow.orchestrator.v1 import test_run_service_pb2 as pb
from eventflow.orchestrator.v1 import test_run_service_pb2_grpc as pb_grpc

from libs.auth import Role, current_principal, requires
from services.orchestrator.step_plan import PlannedStep
from services.orchestrator.test_runs import DryRun, TestRuns

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class TestRunServicer(pb_grpc.TestRunServiceServicer):
    __test__ = False  # a servicer, not a pytest class

    def __init__(self, runs: TestRuns) -> None:
        self._runs = runs

    @requires(Role.DEVELOPER)
    async def DryRunWorkflow(
        self, request: pb.DryRunWorkflowRequest, context: Context
    ) -> pb.DryRunWorkflowResponse:
        run = await self._runs.dry_run(
            current_principal(), request.workflow_id, request.draft, request.payload_json
        )
        return dry_run_proto(run)

    @requires(Role.DEVELOPER)
    async def HotRunWorkflow(
        self, request: pb.HotRunWorkflowRequest, context: Context
    ) -> pb.HotRunWorkflowResponse:
        run = await self._runs.hot_run(
            current_principal(), request.workflow_id, request.draft, request.payload_json
        )
        return pb.HotRunWorkflowResponse(event_id=run.event_id, instance_id=str(run.instance_id))


def dry_run_proto(run: DryRun) -> pb.DryRunWorkflowResponse:
    return pb.DryRunWorkflowResponse(
        workflow_id=run.workflow_id,
        workflow_version=run.workflow_version,
        environment=run.environment,
        trigger_event=run.trigger_event,
        reentry=pb.ReentryDecision(
            subject=run.reentry.subject,
            mode=run.reentry.mode,
            allowed=run.reentry.allowed,
            reason=run.reentry.reason,
        ),
        steps=[_step_proto(step) for step in run.steps],
        would_run=run.would_run,
    )


def _step_proto(step: PlannedStep) -> pb.PlannedStep:
    return pb.PlannedStep(
        index=step.index,
        name=step.name,
        type=step.type,
        runnable=step.runnable,
        problem_reason=step.problem_reason,
        problem=step.problem,
        action=step.action,
        action_id=step.action_id,
        action_version=step.action_version,
        url=step.url,
        addresses=step.addresses,
        duration_ms=step.duration_ms,
        max_attempts=step.max_attempts,
    )
