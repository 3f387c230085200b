"""How failures reach the user and the shell.

Exit codes let scripts tell "you called me wrong" (2: usage, unreadable or
invalid local files) from "the server said no" (1), matching argparse's own
convention for usage errors.
"""

from __future__ import annotations

from typing import TextIO

import grpc

from libs.errors import read_error

EXIT_SERVER = 1
EXIT_USAGE = 2

_HINTS = {
    grpc.StatusCode.UNAVAILABLE: "is the server running? start the dev stack with `make run`",
}
_NO_KEY_HINT = (
    "no API key was given: pass --api-key, set EVENTFLOW_API_KEY, "
    "or run inside a checkout whose dev stack is up (`make run`)"
)


class CommandError(Exception):
    """A failure with a message for the user, printed as ``error: <message>``."""

    exit_code = EXIT_SERVER


class UsageError(CommandError):
    """A problem found before any call is made (arguments, local files)."""

    exit_code = EXIT_USAGE


def print_rpc_error(error: grpc.RpcError, err: TextIO, *, has_key: bool = True) -> int:
    """Print the server's reason, message and field violations; return the exit code."""
    details = read_error(error)
    label = details.reason or details.code.name
    print(f"error: {label}: {details.message}", file=err)
    for violation in details.violations:
        print(f"  {violation.field}: {violation.description}", file=err)
    hint = _HINTS.get(details.code)
    if details.code == grpc.StatusCode.UNAUTHENTICATED and not has_key:
        hint = _NO_KEY_HINT
    if hint:
        print(f"hint: {hint}", file=err)
    return EXIT_SERVER
