"""``eventflow workflows ...``: one subcommand per WorkflowService method."""

from __future__ import annotations

import argparse
import json
from typing import Any

from eventflow.registry.v1 import workflow_service_pb2 as ws
from google.protobuf import field_mask_pb2

from cli import test_runs
from cli import workflow_views as views
from cli.client import ALL_PAGE_SIZE, collect_pages
from cli.context import Context, Handler
from cli.options import add_paging, positive_int
from cli.output import render_fields, to_dict
from cli.workflow_file import MASK_PATHS, load_workflow, update_mask

SIGNING_SECRET_WARNING = (
    "warning: this is the only time the webhook signing secret is shown. Store it now; "
    "if it is lost, `eventflow workflows rotate-secret {id}` issues a new one."
)


def _show(ctx: Context, workflow: Any) -> int:
    ctx.emit(workflow, lambda: views.workflow_detail(workflow))
    return 0


def _status_line(ctx: Context, workflow: Any) -> int:
    ctx.emit(workflow, lambda: f"workflow {workflow.id} is now {workflow.status}")
    return 0


def create(args: argparse.Namespace, ctx: Context) -> int:
    file = load_workflow(args.file, ctx.stdin)
    request = ws.CreateWorkflowRequest(project_id=ctx.settings.project, workflow=file.workflow)
    with ctx.connect() as client:
        response = client.call(client.workflows.CreateWorkflow, request)
    workflow, secret = response.workflow, response.webhook_signing_secret
    if not secret:  # a server from before signing secrets
        return _show(ctx, workflow)
    if ctx.settings.output == "id":
        print(workflow.id, file=ctx.out)
    elif ctx.json:
        # The workflow as `get` prints it, plus the secret: scripts reading
        # `.id` keep working and find the secret beside it.
        shown = {**to_dict(workflow), "webhook_signing_secret": secret}
        print(json.dumps(shown, indent=2, ensure_ascii=False), file=ctx.out)
    else:
        signing = render_fields([("Webhook signing secret", secret)])
        print(f"{views.workflow_detail(workflow)}\n\n{signing}", file=ctx.out)
    ctx.note(SIGNING_SECRET_WARNING.format(id=workflow.id))
    return 0


def rotate_secret(args: argparse.Namespace, ctx: Context) -> int:
    request = ws.RotateWebhookSigningSecretRequest(id=args.id)
    with ctx.connect() as client:
        response = client.call(client.workflows.RotateWebhookSigningSecret, request)
    secret = response.webhook_signing_secret
    ctx.emit(response, lambda: render_fields([("Webhook signing secret", secret)]))
    ctx.note(SIGNING_SECRET_WARNING.format(id=args.id))
    ctx.note("the previous secret stays valid for 24 hours, so receivers can switch meanwhile")
    return 0


def get(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:
        response = client.call(client.workflows.GetWorkflow, ws.GetWorkflowRequest(id=args.id))
    return _show(ctx, response.workflow)


def list_(args: argparse.Namespace, ctx: Context) -> int:
    size = args.page_size or (ALL_PAGE_SIZE if args.all else 0)
    with ctx.connect() as client:

        def fetch(token: str) -> ws.ListWorkflowsResponse:
            request = ws.ListWorkflowsRequest(
                project_id=ctx.settings.project,
                environment=args.environment or "",
                status=args.status or "",
                trigger_event=args.trigger or "",
                page_size=size,
                page_token=token,
            )
            return client.call(client.workflows.ListWorkflows, request)

        response = collect_pages(fetch, lambda r: r.workflows, args.page_token, args.all)
    ctx.emit(response, lambda: views.workflow_list(response.workflows))
    ctx.more_hint(response)
    return 0


def update(args: argparse.Namespace, ctx: Context) -> int:
    file = load_workflow(args.file, ctx.stdin)
    paths = update_mask(args.mask, file.present, file.name)
    workflow = file.workflow
    if workflow.id and workflow.id != args.id:
        ctx.note(f"warning: {file.name} has id {workflow.id}; updating {args.id} as asked")
    workflow.id = args.id
    request = ws.UpdateWorkflowRequest(
        workflow=workflow, update_mask=field_mask_pb2.FieldMask(paths=paths)
    )
    with ctx.connect() as client:
        response = client.call(client.workflows.UpdateWorkflow, request)
    return _show(ctx, response.workflow)


def delete(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:
        response = client.call(
            client.workflows.DeleteWorkflow, ws.DeleteWorkflowRequest(id=args.id)
        )
    ctx.emit(response, lambda: f"deleted workflow {args.id}")
    return 0


def publish(args: argparse.Namespace, ctx: Context) -> int:
    request = ws.PublishWorkflowRequest(id=args.id, message=args.message or "")
    with ctx.connect() as client:
        response = client.call(client.workflows.PublishWorkflow, request)
    # UNCHANGED is a normal outcome, not a failure: scripts re-publishing the
    # same file must not break, so both exit 0 and the text tells them apart.
    ctx.emit(response, lambda: views.publish_outcome(response))
    return 0


def preview(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:
        response = client.call(
            client.workflows.PreviewPublish, ws.PreviewPublishRequest(id=args.id)
        )
    ctx.emit(response, lambda: views.preview(response))
    return 0


def versions(args: argparse.Namespace, ctx: Context) -> int:
    size = args.page_size or (ALL_PAGE_SIZE if args.all else 0)
    with ctx.connect() as client:

        def fetch(token: str) -> ws.ListWorkflowVersionsResponse:
            request = ws.ListWorkflowVersionsRequest(
                workflow_id=args.id, page_size=size, page_token=token
            )
            return client.call(client.workflows.ListWorkflowVersions, request)

        response = collect_pages(fetch, lambda r: r.versions, args.page_token, args.all)
    ctx.emit(response, lambda: views.versions_table(response.versions))
    ctx.more_hint(response)
    return 0


def version(args: argparse.Namespace, ctx: Context) -> int:
    request = ws.GetWorkflowVersionRequest(workflow_id=args.id, version=args.number)
    with ctx.connect() as client:
        response = client.call(client.workflows.GetWorkflowVersion, request)
    # The table form is the bare definition: it is a valid workflow file, so
    # `workflows version ID N > wf.json && workflows update ID -f wf.json`
    # rolls the draft back to version N.
    definition = to_dict(response.version.definition)
    ctx.emit(response.version, lambda: json.dumps(definition, indent=2, ensure_ascii=False))
    return 0


def _toggle(method: str, request_type: Any) -> Handler:
    def run(args: argparse.Namespace, ctx: Context) -> int:
        with ctx.connect() as client:
            response = client.call(getattr(client.workflows, method), request_type(id=args.id))
        return _status_line(ctx, response.workflow)

    return run


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    group = commands.add_parser("workflows", help="create, edit, publish and inspect workflows")
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    def leaf(name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, parents=[common], help=help_, description=help_)
        parser.set_defaults(handler=handler)
        return parser

    def with_id(name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        parser = leaf(name, handler, help_)
        parser.add_argument("id", metavar="ID", help="workflow id")
        return parser

    p = leaf("create", create, "create a workflow from a JSON file (draft)")
    p.add_argument("-f", "--file", required=True, metavar="FILE", help="workflow JSON, - = stdin")

    with_id("get", get, "show a workflow and its steps")

    p = leaf("list", list_, "list workflows")
    p.add_argument("--environment", choices=("production", "sandbox"))
    p.add_argument("--status", choices=("draft", "active", "paused", "archived"))
    p.add_argument("--trigger", metavar="EVENT_TYPE", help="only this trigger event")
    add_paging(p)

    p = with_id("update", update, "edit the draft from a JSON file")
    p.add_argument("-f", "--file", required=True, metavar="FILE", help="workflow JSON, - = stdin")
    p.add_argument(
        "--mask",
        metavar="PATHS",
        help=f"comma-separated fields to replace among {', '.join(MASK_PATHS)} "
        "(default: those present in the file)",
    )

    with_id("delete", delete, "delete a never-published workflow")
    p = with_id("publish", publish, "publish the draft as a new version")
    p.add_argument("-m", "--message", metavar="MSG", help="version message")
    with_id("preview", preview, "show what publishing would change")
    p = with_id("versions", versions, "list published versions, newest first")
    add_paging(p)
    p = with_id("version", version, "print one published version's definition as JSON")
    p.add_argument("number", metavar="N", type=positive_int, help="version number")
    with_id("enable", _toggle("EnableWorkflow", ws.EnableWorkflowRequest), "paused -> active")
    with_id("disable", _toggle("DisableWorkflow", ws.DisableWorkflowRequest), "active -> paused")
    with_id("archive", _toggle("ArchiveWorkflow", ws.ArchiveWorkflowRequest), "archive for good")
    p = with_id("test", test_runs.run, "try a workflow on a payload: --dry-run or --hot-run")
    test_runs.register(p)
    with_id(
        "rotate-secret",
        rotate_secret,
        "issue a new webhook signing secret and show it once (the old one stays valid 24 h)",
    )
