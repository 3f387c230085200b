"""``eventflow events ...``: publish events over gRPC and read them back (EventService).

Events are checked locally before connecting (type, environment, ``data`` a
JSON object of at most 1 MiB). A batch file is read and checked whole, so a
bad line is named before the first event is sent rather than after half the
file went out.
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

import grpc
from eventflow.orchestrator.v1 import event_pb2
from eventflow.orchestrator.v1 import event_service_pb2 as es
from google.protobuf.timestamp_pb2 import Timestamp

from cli import orchestrator_views as views
from cli.context import Context, Handler
from cli.errors import CommandError, UsageError, print_rpc_error
from cli.options import positive_int

# PublishBatch takes at most this many events per call.
BATCH_SIZE = 500
MAX_DATA_BYTES = 1024 * 1024
TERMINAL = ("completed", "failed", "canceled")
WAIT_POLL_S = 0.5
ENVIRONMENTS = ("production", "sandbox")
# SPEC §3: event types are the producer's own names in this alphabet.
EVENT_TYPE = re.compile(r"[a-z0-9_.\-]{1,120}")
TYPE_RULE = "must be 1-120 characters of lowercase letters, digits, '_', '-' or '.'"
LINE_KEYS = ("id", "type", "data", "subject", "env")
# Bad lines listed in one error; a wholly wrong file must not flood the terminal.
MAX_REPORTED = 10
STDIN = "-"
_BATCH_INDEX = re.compile(r"events\[(\d+)\]")


# ------------------------------------------------------------- local input


def _read_text(path: str, what: str, stdin: TextIO) -> tuple[str, str]:
    """The text of ``path`` (``-``: stdin) and the name to use in messages."""
    if path == STDIN:
        return stdin.read(), "<stdin>"
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(), path
    except FileNotFoundError:
        raise UsageError(f"{what} not found: {path}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{what} {path} is not UTF-8 text") from None
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def _json_kind(value: object) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


def _reject_constant(name: str) -> Any:
    # Python's json reads NaN and Infinity, which are not JSON.
    raise ValueError(f"{name} is not a JSON value")


def _loads(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def _data(value: str, stdin: TextIO) -> str:
    """``--data``: a JSON object given inline or as ``@FILE`` (``@-``: stdin), sent verbatim."""
    if value.startswith("@"):
        text, name = _read_text(value[1:], "--data file", stdin)
    else:
        text, name = value, "--data"
    try:
        data = _loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{name}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except ValueError as exc:
        raise UsageError(f"{name}: invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{name}: the data must be a JSON object, got {_json_kind(data)}")
    size = len(text.encode())
    if size > MAX_DATA_BYTES:
        raise UsageError(f"{name}: the data is {size} bytes; at most 1 MiB ({MAX_DATA_BYTES})")
    return text


def _event_type(value: str) -> str:
    if not EVENT_TYPE.fullmatch(value):
        raise UsageError(f"--type {value!r}: {TYPE_RULE}")
    return value


class _BadLine(Exception):
    def __init__(self, message: str, column: int | None = None) -> None:
        super().__init__(message)
        self.column = column


def _optional_text(item: dict[str, Any], key: str) -> str:
    value = item.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _BadLine(f'"{key}" must be a string, got {_json_kind(value)}')
    return value


def _line_event(raw: str, defaults: event_pb2.EventInput) -> event_pb2.EventInput:
    try:
        item = _loads(raw)
    except json.JSONDecodeError as exc:
        raise _BadLine(f"invalid JSON: {exc.msg}", exc.colno) from None
    except ValueError as exc:
        raise _BadLine(f"invalid JSON: {exc}") from None
    if not isinstance(item, dict):
        raise _BadLine(f"expected a JSON object, got {_json_kind(item)}")
    for key in item:
        if key not in LINE_KEYS:
            close = difflib.get_close_matches(key, LINE_KEYS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"keys are {', '.join(LINE_KEYS)}"
            raise _BadLine(f"unknown key {key!r}: {hint}")
    if item.get("type") is None:
        raise _BadLine('"type" is required')
    type_ = _optional_text(item, "type")
    if not EVENT_TYPE.fullmatch(type_):
        raise _BadLine(f'"type" {type_!r} {TYPE_RULE}')
    if "data" not in item:
        raise _BadLine('"data" is required')
    data = item["data"]
    if not isinstance(data, dict):
        raise _BadLine(f'"data" must be a JSON object, got {_json_kind(data)}')
    try:
        data_json = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        raise _BadLine('"data" holds a number too large for JSON') from None
    if len(data_json.encode()) > MAX_DATA_BYTES:
        raise _BadLine(f'"data" is over 1 MiB ({MAX_DATA_BYTES} bytes)')
    environment = _optional_text(item, "env")
    if environment and environment not in ENVIRONMENTS:
        raise _BadLine(f'"env" must be one of {", ".join(ENVIRONMENTS)}, got {environment!r}')
    event = event_pb2.EventInput()
    event.CopyFrom(defaults)
    event.id = _optional_text(item, "id")
    event.type = type_
    event.subject = _optional_text(item, "subject")
    event.data_json = data_json
    if environment:
        event.environment = environment
    return event


def _batch(
    text: str, name: str, defaults: event_pb2.EventInput
) -> tuple[list[event_pb2.EventInput], list[int]]:
    """The events of a JSON Lines file and the line each came from (blank lines skipped)."""
    events: list[event_pb2.EventInput] = []
    lines: list[int] = []
    problems: list[tuple[int, _BadLine]] = []
    # Not splitlines(): it also splits at U+2028 and other characters that
    # JSON strings may hold unescaped.
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            events.append(_line_event(raw.removesuffix("\r"), defaults))
            lines.append(number)
        except _BadLine as bad:
            problems.append((number, bad))
    if len(problems) == 1:
        number, first = problems[0]
        column = f":{first.column}" if first.column else ""
        raise UsageError(f"{name}:{number}{column}: {first}; nothing was sent")
    if problems:
        listed = [
            f"  line {number}{f', column {bad.column}' if bad.column else ''}: {bad}"
            for number, bad in problems[:MAX_REPORTED]
        ]
        if len(problems) > MAX_REPORTED:
            listed.append(f"  ... and {len(problems) - MAX_REPORTED} more")
        head = f"{name}: {len(problems)} bad lines; nothing was sent"
        raise UsageError("\n".join([head, *listed]))
    if not events:
        raise UsageError(f"{name}: no events (expected one JSON object per line)")
    return events, lines


# ------------------------------------------------------------------ publish


class _Progress:
    """``published 1500/4000…`` on stderr: rewritten in place on a terminal,
    one line per call otherwise (only for batches of more than one call)."""

    def __init__(self, err: TextIO, total: int) -> None:
        self._err = err
        self._total = total
        self._tty = _isatty(err)
        self._active = self._tty or total > BATCH_SIZE
        self._open = False

    def published(self, done: int) -> None:
        if not self._active:
            return
        text = f"published {done}/{self._total}…"
        if self._tty:
            self._err.write(f"\r{text}")
            self._open = True
        else:
            self._err.write(f"{text}\n")
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


def _defaults(args: argparse.Namespace, ctx: Context) -> event_pb2.EventInput:
    return event_pb2.EventInput(
        source=args.source or "",
        project_id=ctx.settings.project,
        environment=args.env or "",
    )


def publish(args: argparse.Namespace, ctx: Context) -> int:
    if args.file is not None:
        given = [f"--{name}" for name in ("type", "data", "id", "subject") if getattr(args, name)]
        if given:
            raise UsageError(
                f"{', '.join(given)} cannot be used with --file: each line gives its own"
            )
        return _publish_batch(args, ctx)
    if args.type is None or args.data is None:
        raise UsageError("give --type and --data, or --file with one event per line")
    event = _defaults(args, ctx)
    event.type = _event_type(args.type)
    event.data_json = _data(args.data, ctx.stdin)
    event.id = args.id or ""
    event.subject = args.subject or ""
    with ctx.connect() as client:
        response = client.call(client.events.Publish, es.PublishRequest(event=event))
    ctx.emit(response, lambda: response.event_id)
    return 0


def _publish_batch(args: argparse.Namespace, ctx: Context) -> int:
    text, name = _read_text(args.file, "events file", ctx.stdin)
    events, lines = _batch(text, name, _defaults(args, ctx))
    published = es.PublishBatchResponse()
    progress = _Progress(ctx.err, len(events))
    with ctx.connect() as client:
        for start in range(0, len(events), BATCH_SIZE):
            request = es.PublishBatchRequest(events=events[start : start + BATCH_SIZE])
            try:
                response = client.call(client.events.PublishBatch, request)
            except grpc.RpcError as exc:
                progress.finish()
                code = _batch_failed(exc, ctx, name, lines, start)
                if published.event_ids:
                    _emit_ids(ctx, published)
                return code
            published.event_ids.extend(response.event_ids)
            progress.published(len(published.event_ids))
    progress.finish()
    _emit_ids(ctx, published)
    return 0


def _emit_ids(ctx: Context, response: es.PublishBatchResponse) -> None:
    ctx.emit(response, lambda: "\n".join(response.event_ids))


def _batch_failed(
    error: grpc.RpcError, ctx: Context, name: str, lines: list[int], start: int
) -> int:
    """The server's error, where its ``events[i]`` are in the file, and what went out."""
    text = io.StringIO()
    code = print_rpc_error(error, text, has_key=bool(ctx.settings.api_key))
    ctx.err.write(text.getvalue())
    end = min(start + BATCH_SIZE, len(lines))
    indexes = sorted({int(i) for i in _BATCH_INDEX.findall(text.getvalue())})
    for index in indexes:
        if index < end - start:
            ctx.note(f"  events[{index}] is {name} line {lines[start + index]}")
    done = f"published {start} of {len(lines)} events"
    if start:
        done += f" (up to line {lines[start - 1]})"
    done += f"; the call for lines {lines[start]}-{lines[end - 1]} failed"
    if end < len(lines):
        done += "; later lines were not sent"
    ctx.note(done)
    return code


# ------------------------------------------------------------------ reading


def get(args: argparse.Namespace, ctx: Context) -> int:
    request = es.GetEventRequest(
        id=args.id, project_id=ctx.settings.project, environment=args.env or ""
    )
    with ctx.connect() as client:
        response = client.call(client.events.GetEvent, request)
    ctx.emit(response.event, lambda: views.event_detail(response.event))
    return 0


def reactions(args: argparse.Namespace, ctx: Context) -> int:
    request = es.ListEventReactionsRequest(
        event_id=args.id, project_id=ctx.settings.project, environment=args.env or ""
    )
    with ctx.connect() as client:
        response = client.call(client.events.ListEventReactions, request)
        deadline = time.monotonic() + args.timeout
        while args.wait and not _settled(response) and time.monotonic() < deadline:
            time.sleep(WAIT_POLL_S)
            response = client.call(client.events.ListEventReactions, request)
    ctx.emit(response, lambda: views.reactions(response.reactions))
    if args.wait and not _settled(response):
        raise CommandError(f"event {args.id}: reactions still running after {args.timeout} s")
    return 0


def _settled(response: es.ListEventReactionsResponse) -> bool:
    """At least one reaction, and every instance completed, failed or canceled."""
    return bool(response.reactions) and all(
        r.instance_status in TERMINAL for r in response.reactions
    )


# ------------------------------------------------------------------ replay

_AGO = re.compile(r"(\d+)([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_time(text: str, option: str) -> Timestamp:
    """ISO 8601 (UTC when no offset is given), or a span ago like 30m, 2h, 7d."""
    ago = _AGO.fullmatch(text)
    if ago:
        when = datetime.now(UTC) - timedelta(**{_UNITS[ago[2]]: int(ago[1])})
    else:
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            raise UsageError(
                f"{option}: {text!r} is neither an ISO 8601 time nor a span like 30m, 2h, 7d"
            ) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
    stamp = Timestamp()
    stamp.FromDatetime(when)
    return stamp


def replay(args: argparse.Namespace, ctx: Context) -> int:
    ranged = args.type or args.since or args.until
    if args.id and ranged:
        raise UsageError("give an event ID or --type/--since/--until, not both")
    if not args.id and not ranged:
        raise UsageError("give an event ID, or --type and/or --since/--until to replay a range")
    if args.id:
        request = es.ReplayEventRequest(
            event_id=args.id,
            project_id=ctx.settings.project,
            environment=args.env or "",
            with_side_effects=args.with_side_effects,
        )
        with ctx.connect() as client:
            response = client.call(client.events.ReplayEvent, request)
        ctx.emit(response, lambda: _replayed_one(response))
        return 0
    return _replay_range(args, ctx)


def _replayed_one(response: es.ReplayEventResponse) -> str:
    if not response.instance_ids:
        return f"replay {response.replay_id}: no active workflow matches this event's type"
    started = "\n".join(f"  {i}" for i in response.instance_ids)
    return (
        f"replay {response.replay_id}: started {len(response.instance_ids)} instance(s)\n{started}"
    )


def _replay_range(args: argparse.Namespace, ctx: Context) -> int:
    request = es.ReplayEventsRequest(
        project_id=ctx.settings.project,
        environment=args.env or "",
        type=args.type or "",
        with_side_effects=args.with_side_effects,
    )
    if args.since:
        request.start_time.CopyFrom(parse_time(args.since, "--since"))
    if args.until:
        request.end_time.CopyFrom(parse_time(args.until, "--until"))
    tty = _isatty(ctx.err)
    last = es.ReplayEventsResponse()
    with ctx.connect() as client:
        # No deadline: a large range takes as long as it takes, and shows progress.
        for update in client.call(client.events.ReplayEvents, request, timeout=None):
            last = update
            if not update.done:
                text = f"replayed {update.replayed}/{update.matched} events…"
                ctx.err.write(f"\r{text}" if tty else f"{text}\n")
                ctx.err.flush()
    if tty and last.replayed:
        ctx.err.write("\n")
    ctx.emit(
        last,
        lambda: (
            f"replay {last.replay_id}: replayed {last.replayed} of {last.matched} events,"
            f" started {last.instances_started} instance(s)"
        ),
    )
    return 0


# ------------------------------------------------------------------ parser


REPLAY_EPILOG = (
    "A replay starts new instances of every active workflow whose trigger is the event's "
    "type. Custom actions run and projections are rewritten; webhooks are recorded as "
    "step_skipped and not fired unless --with-side-effects is given; derived events are "
    "replays too. Re-entry rules do not block a replay. A range replay goes oldest first "
    "and prints progress; interrupting it keeps what was already replayed."
)

PUBLISH_EPILOG = (
    "A batch file (--file) holds one JSON object per line with the keys type and data "
    "(required) and id, subject, env (optional); --env and --source apply to every line "
    "that does not say otherwise. The whole file is checked before anything is sent, and "
    f"it goes out in calls of {BATCH_SIZE} events. The event ids are printed one per line. "
    "Re-sending an event with the same id is a no-op; events without an id get a new one "
    "each time they are sent."
)


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    group = commands.add_parser("events", help="publish events and see how workflows reacted")
    sub = group.add_subparsers(dest="verb", metavar="COMMAND", required=True)

    def leaf(name: str, handler: Handler, help_: str, **kwargs: Any) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, parents=[common], help=help_, description=help_, **kwargs)
        parser.set_defaults(handler=handler)
        return parser

    def env_option(parser: argparse.ArgumentParser, help_: str) -> None:
        parser.add_argument("--env", choices=ENVIRONMENTS, help=help_)

    p = leaf("publish", publish, "publish one event, or a batch from a file", epilog=PUBLISH_EPILOG)
    p.add_argument("--type", metavar="T", help="event type, e.g. order.created")
    p.add_argument(
        "--data", metavar="JSON", help="the payload: a JSON object, or @FILE (@- = stdin)"
    )
    p.add_argument("--id", metavar="ID", help="event id (default: a new UUID)")
    p.add_argument("--subject", metavar="S", help="CloudEvents subject")
    env_option(p, "environment (default: production)")
    p.add_argument("--source", metavar="SRC", help="CloudEvents source (default: grpc)")
    p.add_argument(
        "--file", metavar="FILE.jsonl", help="publish a batch, one event per line (- = stdin)"
    )

    p = leaf(
        "replay", replay, "re-run the workflows of one event, or of a range", epilog=REPLAY_EPILOG
    )
    p.add_argument("id", metavar="ID", nargs="?", help="the event to replay")
    p.add_argument("--type", metavar="T", help="replay every event of this type")
    p.add_argument(
        "--since", metavar="TIME", help="received at or after (ISO 8601, or 30m, 2h, 7d ago)"
    )
    p.add_argument("--until", metavar="TIME", help="received before (default: now)")
    p.add_argument(
        "--with-side-effects", action="store_true", help="fire webhooks again (needs admin)"
    )
    env_option(p, "the events' environment (default: production)")

    for name, handler, help_ in (
        ("get", get, "show an event and its payload"),
        ("reactions", reactions, "show which workflows reacted and each step's outcome"),
    ):
        p = leaf(name, handler, help_)
        p.add_argument("id", metavar="ID", help="event id")
        env_option(p, "the event's environment (default: production)")
    p.add_argument("--wait", action="store_true", help="wait until every reaction has finished")
    p.add_argument(
        "--timeout", type=positive_int, default=60, metavar="S", help="--wait gives up after S s"
    )
