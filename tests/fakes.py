"""Stand-ins for unit tests that must not start a server."""

from __future__ import annotations

from typing import Any

import grpc


class RichRpcError(grpc.RpcError, grpc.Call):
    """A client-side error as grpcio raises it, carrying a google.rpc.Status."""

    def __init__(self, status: grpc.Status) -> None:
        self._status = status

    def code(self) -> grpc.StatusCode:
        return self._status.code

    def details(self) -> str:
        return self._status.details

    def trailing_metadata(self) -> Any:
        return self._status.trailing_metadata

    def initial_metadata(self) -> Any:
        return ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> float | None:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: Any) -> bool:
        return False
