"""``eventflow actions ...``: one subcommand per ActionService method.

Actions belong to the key's organization; every ``ACTION`` argument takes
the action's name or id. Local input (module, signature and payload files,
permissions, secrets) is read and checked before connecting.
"""

from __future__ import annotations

import argparse
import io
import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO

import grpc
from eventflow.governance.v1 import action_service_pb2 as pb

from cli import action_views as views
from cli.client import collect_pages
from cli.context import Context, Handler
from cli.errors import UsageError, print_rpc_error
from cli.options import add_paging, connection_options, positive_int, requested_page_size

# The server takes module chunks of up to 1 MiB.
CHUNK_BYTES = 1024 * 1024
# `actions simulate`: the action ran but failed (trap, fuel, bad output...).
EXIT_RUN_FAILED = 3
REDACTED = "***"
# What a `read_secret:<NAME>` permission can name.
_SECRET_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")
# The guest-controlled text of a simulation result, where a secret can surface.
_RESULT_TEXT = (
    "failure_reason",
    "failure_message",
    "output_json",
    "projection_json",
    "derived_event_json",
)


# ------------------------------------------------------------- local input


def _read_bytes(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise UsageError(f"{what} not found: {path}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def _read_text(path: str, what: str) -> str:
    try:
        return _read_bytes(path, what).decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{what} {path} is not UTF-8 text") from None


def _text_or_file(value: str, what: str, stdin: TextIO) -> tuple[str, str]:
    """``value`` itself, or with ``@PATH`` that file's text (``@-``: stdin).

    Returns the text and the name to use in messages.
    """
    if not value.startswith("@"):
        return value, what
    path = value[1:]
    if path == "-":
        return stdin.read(), "<stdin>"
    return _read_text(path, f"{what} file"), path


def _payload(value: str, stdin: TextIO) -> str:
    text, name = _text_or_file(value, "--payload", stdin)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{name}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{name}: the payload must be a JSON object, got {type(data).__name__}")
    return text


def _secrets(args: argparse.Namespace) -> dict[str, str]:
    """``--secret NAME=VALUE`` and ``--secret-file NAME=PATH``.

    Messages name the option, the position and the secret's name once it is
    known to be a name -- never the value, nor an argument that may hold one.
    """
    secrets: dict[str, str] = {}
    given = [("--secret", i, item) for i, item in enumerate(args.secret or [], start=1)]
    given += [("--secret-file", i, item) for i, item in enumerate(args.secret_file or [], 1)]
    for option, position, item in given:
        name, equals, rest = item.partition("=")
        if not equals or not _SECRET_NAME.fullmatch(name):
            shape = "NAME=VALUE" if option == "--secret" else "NAME=PATH"
            raise UsageError(
                f"{option} #{position}: expected {shape} with a NAME of letters, "
                "digits and _ (at most 64); the argument is not shown as it may hold a secret"
            )
        if name in secrets:
            raise UsageError(f"secret {name} is given twice")
        if option == "--secret":
            secrets[name] = rest
        else:
            # Files written by editors and `echo` end with a newline that is
            # not part of the secret.
            text = _read_text(rest, f"--secret-file {name}: file")
            secrets[name] = text.removesuffix("\n").removesuffix("\r")
    return secrets


def _redactor(values: Iterable[str]) -> Callable[[str], str]:
    """Replaces every secret value, also in its JSON-escaped forms, by ``***``."""
    needles = set()
    for value in values:
        if value:
            needles |= {
                value,
                json.dumps(value)[1:-1],
                json.dumps(value, ensure_ascii=False)[1:-1],
            }
    if not needles:
        return lambda text: text
    # Longest first, so a secret that contains another is hidden whole.
    pattern = re.compile("|".join(re.escape(n) for n in sorted(needles, key=len, reverse=True)))
    return lambda text: pattern.sub(REDACTED, text)


# ---------------------------------------------------------------- uploads


class _Progress:
    """``uploading 3.2 MiB…`` on stderr, with a live percentage on a terminal."""

    def __init__(self, err: TextIO, total: int) -> None:
        self._err = err
        self._total = total
        self._tty = _isatty(err)
        self._label = f"uploading {views.size(total)}…"
        self._active = self._tty or total > CHUNK_BYTES
        self._open = False

    def start(self) -> None:
        if not self._active:
            return
        if self._tty:
            self._err.write(f"\r{self._label}")
            self._open = True
        else:
            self._err.write(f"{self._label}\n")
            self._active = False
        self._err.flush()

    def sent(self, done: int) -> None:
        # Called from gRPC's request-sending thread.
        if self._open:
            self._err.write(f"\r{self._label} {done * 100 // max(self._total, 1)}%")
            self._err.flush()

    def finish(self) -> None:
        if self._open:
            self._open = False
            self._err.write("\n")
            self._err.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _upload_requests(
    header: Any, module: bytes, progress: _Progress
) -> Iterator[pb.UploadActionVersionRequest]:
    yield pb.UploadActionVersionRequest(header=header)
    for start in range(0, len(module), CHUNK_BYTES):
        chunk = module[start : start + CHUNK_BYTES]
        yield pb.UploadActionVersionRequest(chunk=chunk)
        progress.sent(start + len(chunk))


def upload(args: argparse.Namespace, ctx: Context) -> int:
    module = _read_bytes(args.file, "module file")
    permissions = ""
    if args.permissions is not None:
        permissions, _ = _text_or_file(args.permissions, "--permissions", ctx.stdin)
    signature = _read_text(args.signature, "signature file") if args.signature else ""
    header = pb.UploadHeader(
        name=args.name,
        description=args.description or "",
        permissions=permissions,
        signature=signature,
    )
    progress = _Progress(ctx.err, len(module))
    with ctx.connect() as client:
        progress.start()
        try:
            response = client.call(
                client.actions.UploadActionVersion, _upload_requests(header, module, progress)
            )
        finally:
            progress.finish()
    # UNCHANGED is a normal outcome (re-running a deploy script), so both exit 0.
    ctx.emit(response, lambda: views.upload_outcome(response))
    version = response.version
    if (
        response.outcome == pb.UPLOAD_OUTCOME_CREATED
        and version.review_status == "pending_review"
        and not ctx.json
    ):
        ctx.note(
            "hint: workflows run it once an admin approves it: "
            f"eventflow actions review {version.action_name or args.name} "
            f"{version.version} --approve"
        )
    return 0


# --------------------------------------------------------------- reading


def list_(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:

        def fetch(token: str) -> pb.ListActionsResponse:
            request = pb.ListActionsRequest(page_size=requested_page_size(args), page_token=token)
            return client.call(client.actions.ListActions, request)

        response = collect_pages(fetch, lambda r: r.actions, args.page_token, args.all)
    ctx.emit(response, lambda: views.action_list(response.actions))
    ctx.more_hint(response)
    return 0


def get(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:
        response = client.call(client.actions.GetAction, pb.GetActionRequest(action=args.ref))
    ctx.emit(response.action, lambda: views.action_detail(response.action))
    return 0


def versions(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:

        def fetch(token: str) -> pb.ListActionVersionsResponse:
            request = pb.ListActionVersionsRequest(
                action=args.ref, page_size=requested_page_size(args), page_token=token
            )
            return client.call(client.actions.ListActionVersions, request)

        response = collect_pages(fetch, lambda r: r.versions, args.page_token, args.all)
    ctx.emit(response, lambda: views.versions_table(response.versions))
    ctx.more_hint(response)
    return 0


def version(args: argparse.Namespace, ctx: Context) -> int:
    request = pb.GetActionVersionRequest(action=args.ref, version=args.number)
    with ctx.connect() as client:
        response = client.call(client.actions.GetActionVersion, request)
    ctx.emit(response.version, lambda: views.version_detail(response.version))
    return 0


def usages(args: argparse.Namespace, ctx: Context) -> int:
    request = pb.ListActionUsagesRequest(action=args.ref)
    with ctx.connect() as client:
        response = client.call(client.actions.ListActionUsages, request)
    ctx.emit(response, lambda: views.usages_table(response.usages))
    return 0


# --------------------------------------------------------------- changing


def review(args: argparse.Namespace, ctx: Context) -> int:
    request = pb.ReviewActionVersionRequest(
        action=args.ref, version=args.number, decision=args.decision, comment=args.comment or ""
    )
    with ctx.connect() as client:
        response = client.call(client.actions.ReviewActionVersion, request)
    ctx.emit(response.version, lambda: views.review_outcome(response.version))
    return 0


def _toggle(method: str, request_type: Any) -> Handler:
    def run(args: argparse.Namespace, ctx: Context) -> int:
        with ctx.connect() as client:
            response = client.call(getattr(client.actions, method), request_type(action=args.ref))
        action = response.action
        state = "enabled" if action.enabled else "disabled"
        ctx.emit(action, lambda: f"action {action.name or args.ref} is now {state}")
        return 0

    return run


def delete(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:
        response = client.call(client.actions.DeleteAction, pb.DeleteActionRequest(action=args.ref))
    ctx.emit(response, lambda: f"deleted action {args.ref}")
    return 0


# -------------------------------------------------------------- simulation


def simulate(args: argparse.Namespace, ctx: Context) -> int:
    payload = _payload(args.payload, ctx.stdin)
    secrets = _secrets(args)
    redact = _redactor(secrets.values())
    request = pb.SimulateActionRequest(
        action=args.ref, version=args.version or 0, payload_json=payload, secrets=secrets
    )
    try:
        with ctx.connect() as client:
            response = client.call(client.actions.SimulateAction, request)
    except grpc.RpcError as exc:
        # The server's message may quote what it was sent: print it scrubbed.
        text = io.StringIO()
        code = print_rpc_error(exc, text, has_key=bool(ctx.settings.api_key))
        ctx.err.write(redact(text.getvalue()))
        return code
    result = response.result
    redacted = False
    for field in _RESULT_TEXT:
        value = getattr(result, field)
        scrubbed = redact(value)
        if scrubbed != value:
            setattr(result, field, scrubbed)
            redacted = True
    ctx.emit(response, lambda: views.simulation(response))
    if redacted:
        ctx.note(f"note: secret values in the result are shown as {REDACTED}")
    return 0 if result.ok else EXIT_RUN_FAILED


# ------------------------------------------------------------------ parser


SIMULATE_EPILOG = (
    "Exit status: 0 when the run succeeded; 3 when the action ran and failed (the reason "
    "and message are printed); 1 when the server refused the call; 2 for usage errors "
    "(including an invalid --payload or an unreadable --secret-file). Secret values are "
    f"never printed: wherever the result or an error contains one, it shows as {REDACTED}."
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # Actions belong to the key's organization, not to a project: like the
    # admin commands, they leave the global --project out of their parents.
    common = connection_options(with_project=False)
    group = commands.add_parser(
        "actions", help="upload, review, switch and simulate custom WebAssembly actions"
    )
    # `dest` is not "action": that is the positional ACTION of the subcommands.
    sub = group.add_subparsers(dest="verb", metavar="COMMAND", required=True)

    def leaf(name: str, handler: Handler, help_: str, **kwargs: Any) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, parents=[common], help=help_, description=help_, **kwargs)
        parser.set_defaults(handler=handler)
        return parser

    def with_ref(name: str, handler: Handler, help_: str, **kwargs: Any) -> argparse.ArgumentParser:
        parser = leaf(name, handler, help_, **kwargs)
        parser.add_argument("ref", metavar="ACTION", help="action name or id")
        return parser

    p = leaf("upload", upload, "upload a module as a new version (pending review)")
    p.add_argument("name", metavar="NAME", help="action name; created on first upload")
    p.add_argument("--file", required=True, metavar="F.wasm", help="the WebAssembly module")
    p.add_argument(
        "--permissions", metavar="P",
        help="read_secret:<KEY> entries as a JSON array or comma list, or @FILE (@- = stdin)",
    )  # fmt: skip
    p.add_argument(
        "--signature", metavar="S.json",
        help='ed25519 signature file: {"alg", "public_key", "signature"} over the sha256 hex',
    )  # fmt: skip
    p.add_argument("--description", metavar="D", help="what the action does")

    p = leaf("list", list_, "list the organization's actions")
    add_paging(p)
    with_ref("get", get, "show an action")
    p = with_ref("versions", versions, "list an action's versions, newest first")
    add_paging(p)
    p = with_ref("version", version, "show one version with its review history")
    p.add_argument("number", metavar="N", type=positive_int, help="version number")

    p = with_ref("review", review, "approve or reject a version (admin; not its uploader)")
    p.add_argument("number", metavar="VERSION", type=positive_int, help="version number")
    decision = p.add_mutually_exclusive_group(required=True)
    decision.add_argument(
        "--approve", dest="decision", action="store_const", const="approved",
        help="let workflows run this version",
    )  # fmt: skip
    decision.add_argument(
        "--reject", dest="decision", action="store_const", const="rejected",
        help="refuse this version",
    )  # fmt: skip
    p.add_argument("--comment", metavar="C", help="review comment")

    with_ref("enable", _toggle("EnableAction", pb.EnableActionRequest), "turn the action on")
    with_ref(
        "disable",
        _toggle("DisableAction", pb.DisableActionRequest),
        "kill switch: every step using the action fails until it is enabled",
    )
    with_ref("usages", usages, "list the workflows that reference the action")
    with_ref("delete", delete, "delete an action no workflow uses")

    p = with_ref(
        "simulate",
        simulate,
        "run a version on a payload in the sandbox (nothing is stored or emitted)",
        epilog=SIMULATE_EPILOG,
    )
    p.add_argument(
        "--version", type=positive_int, metavar="V",
        help="version to run, approved or not (default: the latest uploaded)",
    )  # fmt: skip
    p.add_argument(
        "--payload", required=True, metavar="JSON",
        help="the event payload: a JSON object, or @FILE (@- = stdin)",
    )  # fmt: skip
    p.add_argument(
        "--secret", action="append", metavar="K=V",
        help="a secret the run may read (repeatable; stored secrets are never used)",
    )  # fmt: skip
    p.add_argument(
        "--secret-file", action="append", metavar="K=PATH",
        help="a secret read from a file, minus one trailing newline (repeatable)",
    )  # fmt: skip
