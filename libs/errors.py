"""One error vocabulary for every service.

Domain code raises an ``EventflowError`` carrying a gRPC code, an ErrorInfo
reason and, for bad input, field violations. ``to_status`` turns it into a
``google.rpc.Status`` (grpcio-status), so every client -- Python, Go,
TypeScript -- reads the same typed details.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status


@dataclass(frozen=True)
class FieldViolation:
    field: str
    description: str


@dataclass
class EventflowError(Exception):
    code: grpc.StatusCode
    reason: str
    message: str
    domain: str = "eventflow"
    violations: list[FieldViolation] = field(default_factory=list)
    metadata: Mapping[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"

    def to_status(self) -> grpc.Status:
        details: list[any_pb2.Any] = []
        info = any_pb2.Any()
        info.Pack(
            error_details_pb2.ErrorInfo(
                reason=self.reason, domain=self.domain, metadata=dict(self.metadata)
            )
        )
        details.append(info)
        if self.violations:
            bad_request = any_pb2.Any()
            bad_request.Pack(
                error_details_pb2.BadRequest(
                    field_violations=[
                        error_details_pb2.BadRequest.FieldViolation(
                            field=v.field, description=v.description
                        )
                        for v in self.violations
                    ]
                )
            )
            details.append(bad_request)
        return rpc_status.to_status(
            status_pb2.Status(
                code=getattr(code_pb2, self.code.name),
                message=self.message,
                details=details,
            )
        )


def invalid_argument(
    violations: Iterable[FieldViolation], reason: str = "INVALID_ARGUMENT"
) -> EventflowError:
    violations = list(violations)
    summary = "; ".join(f"{v.field}: {v.description}" for v in violations)
    return EventflowError(grpc.StatusCode.INVALID_ARGUMENT, reason, summary, violations=violations)


def invalid_field(field_path: str, description: str) -> EventflowError:
    return invalid_argument([FieldViolation(field_path, description)])


def not_found(kind: str, ident: str) -> EventflowError:
    return EventflowError(grpc.StatusCode.NOT_FOUND, "NOT_FOUND", f"{kind} {ident!r} not found")


def failed_precondition(reason: str, message: str) -> EventflowError:
    return EventflowError(grpc.StatusCode.FAILED_PRECONDITION, reason, message)


def permission_denied(reason: str, message: str) -> EventflowError:
    return EventflowError(grpc.StatusCode.PERMISSION_DENIED, reason, message)


def unauthenticated(reason: str, message: str) -> EventflowError:
    return EventflowError(grpc.StatusCode.UNAUTHENTICATED, reason, message)


def already_exists(kind: str, ident: str) -> EventflowError:
    return EventflowError(
        grpc.StatusCode.ALREADY_EXISTS, "ALREADY_EXISTS", f"{kind} {ident!r} already exists"
    )


@dataclass(frozen=True)
class ErrorDetails:
    """What a client reads back from a rich status (used by the CLI and tests)."""

    code: grpc.StatusCode
    message: str
    reason: str
    violations: list[FieldViolation]


def read_error(error: grpc.RpcError) -> ErrorDetails:
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    message = error.details() if hasattr(error, "details") else str(error)
    reason, violations = "", []
    status = rpc_status.from_call(error) if hasattr(error, "trailing_metadata") else None
    for detail in status.details if status else []:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason = info.reason
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            violations = [FieldViolation(v.field, v.description) for v in bad.field_violations]
    return ErrorDetails(code, message or "", reason, violations)
