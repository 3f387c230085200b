"""``eventflow admin keyring ...`` and ``eventflow admin audit``: the vault's
key ring (KeyRingService, operator only) and audit log (AuditService).

``keyring rotate --file`` works offline on the key ring file; the vault
replicas load the new version when restarted. The other commands call the
server.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from eventflow.vault.v1 import audit_service_pb2 as au
from eventflow.vault.v1 import key_ring_service_pb2 as kr

from cli.client import ALL_PAGE_SIZE, collect_pages
from cli.context import Context, Handler
from cli.errors import UsageError
from cli.options import add_paging, connection_options, positive_int
from cli.output import render_table, timestamp

# Rewrap visits every stored secret version; give it longer than one call.
REWRAP_DEADLINE_SECONDS = 600.0

_STATES = {
    kr.KEY_VERSION_STATE_PRIMARY: "primary",
    kr.KEY_VERSION_STATE_DECRYPT_ONLY: "decrypt-only",
    kr.KEY_VERSION_STATE_RETIRED: "retired",
    kr.KEY_VERSION_STATE_MISSING: "MISSING",
}
OPERATIONS = {
    "set": au.AUDIT_OPERATION_SET_SECRET,
    "delete": au.AUDIT_OPERATION_DELETE_SECRET,
    "purge": au.AUDIT_OPERATION_PURGE_SECRET_VERSIONS,
    "resolve": au.AUDIT_OPERATION_RESOLVE,
    "rewrap": au.AUDIT_OPERATION_REWRAP,
    "retire": au.AUDIT_OPERATION_RETIRE_KEY_VERSION,
}
_OPERATION_LABELS = {number: label for label, number in OPERATIONS.items()}
_OUTCOMES = {
    au.AUDIT_OUTCOME_OK: "ok",
    au.AUDIT_OUTCOME_NOT_FOUND: "not found",
    au.AUDIT_OUTCOME_DENIED: "DENIED",
    au.AUDIT_OUTCOME_INTEGRITY_ERROR: "INTEGRITY ERROR",
    au.AUDIT_OUTCOME_KEY_UNAVAILABLE: "KEY UNAVAILABLE",
    au.AUDIT_OUTCOME_REFUSED: "refused",
}


def keyring_list(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:
        response = client.call(client.key_ring.ListKeyVersions, kr.ListKeyVersionsRequest())

    def table() -> str:
        rows = [
            (
                k.version,
                _STATES.get(k.state, "?"),
                k.usage_count,
                k.fingerprint,
                timestamp(k.retire_time),
            )
            for k in response.key_versions
        ]
        return render_table(("VERSION", "STATE", "SECRETS", "FINGERPRINT", "RETIRED"), rows)

    ctx.emit(response, table)
    return 0


def keyring_rewrap(args: argparse.Namespace, ctx: Context) -> int:
    if not ctx.json:
        ctx.note("re-wrapping every secret not under the primary key version ...")
    with ctx.connect() as client:
        response = client.call(
            client.key_ring.Rewrap, kr.RewrapRequest(), timeout=REWRAP_DEADLINE_SECONDS
        )
    ctx.emit(
        response,
        lambda: (
            f"{response.rewrapped} secret version(s) now wrapped by key version"
            f" {response.primary_version}; {response.failed} failed"
        ),
    )
    if response.failed and not ctx.json:
        ctx.note(
            "warning: failed rows are altered or need a missing key; see"
            " `eventflow admin audit --operation rewrap` and the vault's log"
        )
    return 1 if response.failed else 0


def keyring_retire(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:
        response = client.call(
            client.key_ring.RetireKeyVersion, kr.RetireKeyVersionRequest(version=args.version)
        )
    ctx.emit(
        response.key_version,
        lambda: (
            f"key version {args.version} retired; remove it from the key ring"
            " configuration and restart the vault"
        ),
    )
    return 0


def keyring_rotate(args: argparse.Namespace, ctx: Context) -> int:
    # Imported here: the key ring code is the vault's, and only this command
    # (which runs where the key file lives) needs it.
    from services.vault.keyring import KeyRingError, read_keyring_file, rotate_keyring_file

    path = Path(args.file)
    try:
        older = read_keyring_file(path).versions if path.exists() else []
        key = rotate_keyring_file(path)
    except KeyRingError as error:
        raise UsageError(str(error)) from None
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror}") from None
    if ctx.json:
        result = {"file": str(path), "version": key.version, "fingerprint": key.fingerprint}
        print(json.dumps(result, indent=2), file=ctx.out)
        return 0
    print(
        f"added key version {key.version} (fingerprint {key.fingerprint}) to {path}",
        file=ctx.out,
    )
    steps = [
        f"restart every vault replica (or reload its key ring) so it loads version"
        f" {key.version}; new secrets are then wrapped by it"
    ]
    if older:
        listed = ", ".join(str(v) for v in older)
        steps += [
            f"eventflow admin keyring rewrap       # move secrets to version {key.version}",
            f"eventflow admin keyring retire N     # for each of {listed}, once unused",
            "remove the retired lines from the file and restart the vault again",
        ]
    print("next:", file=ctx.out)
    for number, step in enumerate(steps, start=1):
        print(f"  {number}. {step}", file=ctx.out)
    return 0


def audit_list(args: argparse.Namespace, ctx: Context) -> int:
    size = args.page_size or (ALL_PAGE_SIZE if args.all else 0)
    with ctx.connect() as client:

        def fetch(token: str) -> Any:
            request = au.ListAuditEventsRequest(
                organization_id=args.org or "",
                action=args.action_name or "",
                key=args.key or "",
                operation=OPERATIONS[args.operation] if args.operation else 0,
                page_size=size,
                page_token=token,
            )
            return client.call(client.audit.ListAuditEvents, request)

        response = collect_pages(fetch, lambda r: r.events, args.page_token, args.all)

    def table() -> str:
        if not response.events:
            return "No audit events."
        rows = [
            (
                timestamp(e.create_time),
                _OPERATION_LABELS.get(e.operation, "?"),
                _OUTCOMES.get(e.outcome, "?"),
                e.action,
                e.key,
                e.secret_version or "",
                e.caller,
                e.detail,
            )
            for e in response.events
        ]
        headers = ("TIME", "OPERATION", "OUTCOME", "ACTION", "KEY", "VER", "CALLER", "DETAIL")
        return render_table(headers, rows, max_width=60)

    ctx.emit(response, table)
    if response.next_page_token and not ctx.json:
        ctx.note(f"more results: rerun with --all or --page-token {response.next_page_token}")
    return 0


def register(areas: Any) -> None:
    """Add ``keyring`` and ``audit`` to the ``admin`` command's areas."""
    common = connection_options(with_project=False)

    def leaf(sub: Any, name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = sub.add_parser(
            name, parents=[common], help=help_, description=help_
        )
        parser.set_defaults(handler=handler)
        return parser

    keyring = areas.add_parser(
        "keyring",
        help="the vault's key-encryption keys (operator)",
        description="The vault's key ring. Rotation: `rotate --file`, restart the vault,"
        " `rewrap`, `retire` the old version, remove it from the file.",
    )
    sub = keyring.add_subparsers(dest="keyring_command", metavar="ACTION", required=True)
    leaf(sub, "list", keyring_list, "key versions with their state and usage")
    leaf(sub, "rewrap", keyring_rewrap, "re-wrap every secret under the primary key version")
    p = leaf(sub, "retire", keyring_retire, "retire an unused key version")
    p.add_argument("version", metavar="VERSION", type=positive_int)
    p = sub.add_parser(
        "rotate",
        help="add a new key version to a key ring file (offline)",
        description="Append a fresh key, one version above the newest, to the key ring"
        " file (created if missing, mode 0600). Needs no server.",
    )
    p.add_argument("--file", required=True, metavar="PATH", help="the key ring file")
    p.add_argument("-o", "--output", choices=("table", "json"), default=argparse.SUPPRESS)
    p.set_defaults(handler=keyring_rotate)

    p = leaf(areas, "audit", audit_list, "the vault's audit log, newest first (admin)")
    p.add_argument("--org", metavar="ORG", help="organization (operator: empty = platform)")
    p.add_argument("--action", dest="action_name", metavar="A", help="only this custom action")
    p.add_argument("--key", metavar="K", help="only this secret key")
    p.add_argument("--operation", choices=sorted(OPERATIONS), help="only this operation")
    add_paging(p)
