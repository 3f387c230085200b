"""SPEC §11: errors are google.rpc.Status with ErrorInfo reasons and BadRequest violations."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import code_pb2, error_details_pb2, status_pb2

from libs.errors import (
    EventflowError,
    FieldViolation,
    already_exists,
    failed_precondition,
    invalid_argument,
    invalid_field,
    not_found,
    permission_denied,
    read_error,
    unauthenticated,
)
from tests.fakes import RichRpcError

DETAILS_KEY = "grpc-status-details-bin"


def rich_status(error: EventflowError) -> status_pb2.Status:
    """Decode what a client receives in the trailing metadata."""
    status = error.to_status()
    payloads = [v for k, v in status.trailing_metadata if k == DETAILS_KEY]
    assert len(payloads) == 1
    return status_pb2.Status.FromString(payloads[0])


def error_info(status: status_pb2.Status) -> error_details_pb2.ErrorInfo:
    infos = [d for d in status.details if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)]
    assert len(infos) == 1
    info = error_details_pb2.ErrorInfo()
    infos[0].Unpack(info)
    return info


def bad_requests(status: status_pb2.Status) -> list[error_details_pb2.BadRequest]:
    result = []
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            result.append(bad)
    return result


def test_status_carries_the_grpc_code_and_message() -> None:
    error = failed_precondition("SANDBOX_DISABLED", "the starter plan has no sandbox")
    status = error.to_status()
    assert status.code == grpc.StatusCode.FAILED_PRECONDITION
    assert status.details == "the starter plan has no sandbox"
    decoded = rich_status(error)
    assert decoded.code == code_pb2.FAILED_PRECONDITION
    assert decoded.message == "the starter plan has no sandbox"


def test_status_carries_error_info_reason_domain_and_metadata() -> None:
    error = EventflowError(
        grpc.StatusCode.PERMISSION_DENIED,
        "PROJECT_NOT_ALLOWED",
        "not for this project",
        domain="eventflow.registry",
        metadata={"project_id": "billing"},
    )
    info = error_info(rich_status(error))
    assert info.reason == "PROJECT_NOT_ALLOWED"
    assert info.domain == "eventflow.registry"
    assert dict(info.metadata) == {"project_id": "billing"}


def test_the_default_error_domain_is_eventflow() -> None:
    assert error_info(rich_status(not_found("workflow", "w1"))).domain == "eventflow"


def test_field_violations_travel_as_bad_request_in_order() -> None:
    error = invalid_argument(
        [
            FieldViolation("name", "is required"),
            FieldViolation("steps[2].type", "unsupported step type: email"),
        ]
    )
    status = rich_status(error)
    assert status.code == code_pb2.INVALID_ARGUMENT
    assert error_info(status).reason == "INVALID_ARGUMENT"
    [bad] = bad_requests(status)
    assert [(v.field, v.description) for v in bad.field_violations] == [
        ("name", "is required"),
        ("steps[2].type", "unsupported step type: email"),
    ]


def test_an_error_without_violations_has_no_bad_request() -> None:
    assert bad_requests(rich_status(permission_denied("ROLE_TOO_LOW", "needs admin"))) == []


def test_invalid_argument_message_summarises_every_violation() -> None:
    error = invalid_argument([FieldViolation("a", "is bad"), FieldViolation("b.c", "is worse")])
    assert error.message == "a: is bad; b.c: is worse"
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT


def test_invalid_argument_may_carry_its_own_reason() -> None:
    error = invalid_argument([FieldViolation("wasm", "not a module")], reason="INVALID_MODULE")
    assert error_info(rich_status(error)).reason == "INVALID_MODULE"


def test_invalid_field_names_one_field() -> None:
    error = invalid_field("page_token", "is not a token this list returned")
    assert error.violations == [FieldViolation("page_token", "is not a token this list returned")]


@pytest.mark.parametrize(
    ("error", "code", "reason"),
    [
        (not_found("workflow", "w1"), grpc.StatusCode.NOT_FOUND, "NOT_FOUND"),
        (already_exists("project", "p"), grpc.StatusCode.ALREADY_EXISTS, "ALREADY_EXISTS"),
        (failed_precondition("X", "m"), grpc.StatusCode.FAILED_PRECONDITION, "X"),
        (permission_denied("Y", "m"), grpc.StatusCode.PERMISSION_DENIED, "Y"),
        (unauthenticated("Z", "m"), grpc.StatusCode.UNAUTHENTICATED, "Z"),
    ],
)
def test_each_helper_sets_its_code_and_reason(
    error: EventflowError, code: grpc.StatusCode, reason: str
) -> None:
    assert (error.code, error.reason) == (code, reason)
    status = rich_status(error)
    assert status.code == code.value[0]
    assert error_info(status).reason == reason


def test_str_shows_reason_and_message() -> None:
    assert str(not_found("workflow", "w1")) == "NOT_FOUND: workflow 'w1' not found"


def test_a_client_reads_back_code_reason_and_violations() -> None:
    error = invalid_argument([FieldViolation("steps[0].url", "must name a host")])
    details = read_error(RichRpcError(error.to_status()))
    assert details.code == grpc.StatusCode.INVALID_ARGUMENT
    assert details.reason == "INVALID_ARGUMENT"
    assert details.message == "steps[0].url: must name a host"
    assert details.violations == [FieldViolation("steps[0].url", "must name a host")]


def test_a_client_reads_a_plain_error_without_details() -> None:
    details = read_error(RichRpcError(failed_precondition("WORKFLOW_ARCHIVED", "gone").to_status()))
    assert (details.code, details.reason, details.violations) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "WORKFLOW_ARCHIVED",
        [],
    )
