"""``-o id``: what a script needs from a result, one per line."""

from __future__ import annotations

from eventflow.orchestrator.v1 import event_service_pb2 as es
from eventflow.orchestrator.v1 import instance_pb2
from eventflow.orchestrator.v1 import instance_service_pb2 as ins
from eventflow.registry.v1 import tenancy_service_pb2 as ten
from eventflow.registry.v1 import workflow_pb2, workflow_service_pb2

from cli.output import primary_ids


def test_a_resource_prints_its_id() -> None:
    created = workflow_service_pb2.CreateWorkflowResponse(workflow=workflow_pb2.Workflow(id="w-1"))
    assert primary_ids(created) == ["w-1"]
    assert primary_ids(es.PublishResponse(event_id="e-1")) == ["e-1"]


def test_a_new_key_prints_its_secret_not_its_id() -> None:
    response = ten.CreateApiKeyResponse(api_key=ten.ApiKey(id="k-1"), secret="efk_k-1_s")
    assert primary_ids(response) == ["efk_k-1_s"]


def test_a_listing_prints_each_item_and_a_batch_each_id() -> None:
    listing = ins.ListDeadLettersResponse(
        dead_letters=[instance_pb2.DeadLetter(id="d-2"), instance_pb2.DeadLetter(id="d-1")],
        next_page_token="more",
    )
    assert primary_ids(listing) == ["d-2", "d-1"]
    assert primary_ids(es.PublishBatchResponse(event_ids=["a", "b"])) == ["a", "b"]
    assert primary_ids(ins.ListDeadLettersResponse()) == []
