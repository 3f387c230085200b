"""TenancyService: organizations, projects and API keys over gRPC."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc
from eventflow.registry.v1 import tenancy_service_pb2 as pb
from eventflow.registry.v1 import tenancy_service_pb2_grpc as pb_grpc

from libs.auth import Role, current_principal, requires
from services.registry.api.convert import api_key_proto, organization_proto, project_proto
from services.registry.tenancy import Tenancy

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class TenancyServicer(pb_grpc.TenancyServiceServicer):
    def __init__(self, tenancy: Tenancy) -> None:
        self._tenancy = tenancy

    @requires(Role.ADMIN)
    async def CreateOrganization(
        self, request: pb.CreateOrganizationRequest, context: Context
    ) -> pb.CreateOrganizationResponse:
        org = request.organization
        row = await self._tenancy.create_organization(
            current_principal(), org.id, org.display_name, org.plan
        )
        return pb.CreateOrganizationResponse(organization=organization_proto(row))

    @requires(Role.VIEWER)
    async def GetOrganization(
        self, request: pb.GetOrganizationRequest, context: Context
    ) -> pb.GetOrganizationResponse:
        row = await self._tenancy.get_organization(current_principal(), request.id)
        return pb.GetOrganizationResponse(organization=organization_proto(row))

    @requires(Role.ADMIN)
    async def UpdateOrganizationPlan(
        self, request: pb.UpdateOrganizationPlanRequest, context: Context
    ) -> pb.UpdateOrganizationPlanResponse:
        row = await self._tenancy.update_plan(current_principal(), request.id, request.plan)
        return pb.UpdateOrganizationPlanResponse(organization=organization_proto(row))

    @requires(Role.ADMIN)
    async def CreateProject(
        self, request: pb.CreateProjectRequest, context: Context
    ) -> pb.CreateProjectResponse:
        row = await self._tenancy.create_project(
            current_principal(),
            request.organization_id,
            request.project.id,
            request.project.display_name,
        )
        return pb.CreateProjectResponse(project=project_proto(row))

    @requires(Role.VIEWER)
    async def ListProjects(
        self, request: pb.ListProjectsRequest, context: Context
    ) -> pb.ListProjectsResponse:
        rows, token = await self._tenancy.list_projects(
            current_principal(), request.organization_id, request.page_size, request.page_token
        )
        return pb.ListProjectsResponse(
            projects=[project_proto(r) for r in rows], next_page_token=token
        )

    @requires(Role.ADMIN)
    async def CreateApiKey(
        self, request: pb.CreateApiKeyRequest, context: Context
    ) -> pb.CreateApiKeyResponse:
        row, secret = await self._tenancy.create_api_key(
            current_principal(),
            request.organization_id,
            request.project_id,
            request.role,
            request.description,
        )
        return pb.CreateApiKeyResponse(api_key=api_key_proto(row), secret=secret)

    @requires(Role.ADMIN)
    async def ListApiKeys(
        self, request: pb.ListApiKeysRequest, context: Context
    ) -> pb.ListApiKeysResponse:
        rows, token = await self._tenancy.list_api_keys(
            current_principal(), request.organization_id, request.page_size, request.page_token
        )
        return pb.ListApiKeysResponse(
            api_keys=[api_key_proto(r) for r in rows], next_page_token=token
        )

    @requires(Role.ADMIN)
    async def RevokeApiKey(
        self, request: pb.RevokeApiKeyRequest, context: Context
    ) -> pb.RevokeApiKeyResponse:
        row = await self._tenancy.revoke_api_key(current_principal(), request.id)
        return pb.RevokeApiKeyResponse(api_key=api_key_proto(row))
