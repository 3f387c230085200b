"""Authenticates every call before the servicer runs.

Health checks and reflection are public. A call over the internal mTLS
listener is the service named by its client certificate; everything else
needs ``authorization: Bearer <api key or operator token>``. Failures never say
whether a key id exists.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import grpc

from libs.auth.keys import KeyStore, parse_api_key, verify
from libs.auth.principal import Principal, _current
from libs.errors import unauthenticated
from libs.grpcutil import wrap_handler
from libs.identity import peer_service

PUBLIC_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.v1")


def current_principal() -> Principal:
    principal = _current.get()
    if principal is None:
        raise unauthenticated("MISSING_CREDENTIALS", "an API key is required")
    return principal


class AuthInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, keys: KeyStore, operator_token: str = "") -> None:
        self._keys = keys
        self._operator_token = operator_token

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(PUBLIC_PREFIXES):
            return handler

        @asynccontextmanager
        async def authenticated(context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
            principal = await self._authenticate(context)
            token = _current.set(principal)
            try:
                yield
            finally:
                _current.reset(token)

        return wrap_handler(handler, authenticated)

    async def _authenticate(self, context: grpc.aio.ServicerContext) -> Principal:
        service = peer_service(context)
        if service is not None:
            return Principal.of_service(service)
        token = _bearer(context)
        if token is None:
            raise unauthenticated("MISSING_CREDENTIALS", "send authorization: Bearer <api key>")
        if self._operator_token and hmac.compare_digest(token, self._operator_token):
            return Principal.operator()
        presented = parse_api_key(token)
        record = await self._keys.find_key(presented.key_id) if presented else None
        principal = verify(record, presented) if record and presented else None
        if principal is None:
            raise unauthenticated("INVALID_API_KEY", "the API key is not valid")
        return principal


def _bearer(context: grpc.aio.ServicerContext) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            text = value.decode() if isinstance(value, bytes) else value
            scheme, _, token = text.partition(" ")
            return token.strip() if scheme.lower() == "bearer" and token.strip() else None
    return None
