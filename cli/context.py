"""What every command handler receives besides its arguments.

Streams and the connection factory are injected rather than taken from
globals so the unit tests can run whole commands against fake stubs and
capture exactly what a user would see.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, TextIO

from google.protobuf.message import Message

from cli.client import Client
from cli.errors import CommandError
from cli.output import primary_ids, print_json
from cli.profile import Settings

Connect = Callable[[Settings], AbstractContextManager[Client]]


@dataclass
class Context:
    settings: Settings
    connect_with: Connect
    out: TextIO
    err: TextIO
    stdin: TextIO

    def connect(self) -> AbstractContextManager[Client]:
        return self.connect_with(self.settings)

    @property
    def json(self) -> bool:
        return self.settings.output == "json"

    def emit(self, message: Message, table: Callable[[], str]) -> None:
        """Print ``message`` as JSON, its id(s), or the text ``table()`` builds."""
        if self.json:
            print_json(message, self.out)
        elif self.settings.output == "id":
            ids = primary_ids(message)
            if not ids and message.ListFields():
                raise CommandError("this command's result has no id; use -o json or -o table")
            for ident in ids:
                print(ident, file=self.out)
        else:
            print(table(), file=self.out)

    def note(self, text: str) -> None:
        """Side remarks (hints, warnings) go to stderr so stdout stays parseable."""
        print(text, file=self.err)

    def more_hint(self, response: Any) -> None:
        """Tell a table reader there are more pages (JSON readers see next_page_token)."""
        if response.next_page_token and not self.json:
            self.note(f"more results: rerun with --all or --page-token {response.next_page_token}")


Handler = Callable[[argparse.Namespace, Context], int]
