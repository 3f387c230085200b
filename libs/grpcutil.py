"""Wrapping gRPC method handlers, the mechanism behind our interceptors.

grpc.aio interceptors see only call details, not the request, so a
cross-cutting concern (authentication, error mapping) is applied by
returning a copy of the method handler whose behaviour is wrapped.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeAlias

import grpc

from libs.errors import EventflowError

log = logging.getLogger(__name__)

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]
# A guard runs around one call: code before `yield` runs first, and an
# exception raised by the method is thrown into it at the `yield`.
Guard = Callable[[Context], Any]


def wrap_handler(handler: grpc.RpcMethodHandler, guard: Guard) -> grpc.RpcMethodHandler:
    """A copy of ``handler`` whose every call runs inside ``guard(context)``."""
    kind, factory = _kind(handler)
    inner = getattr(handler, kind)

    if kind in ("unary_unary", "stream_unary"):

        async def call(request: Any, context: Context) -> Any:
            async with guard(context):
                return await inner(request, context)

        behaviour: Any = call
    else:

        async def stream(request: Any, context: Context) -> AsyncIterator[Any]:
            async with guard(context):
                async for item in inner(request, context):
                    yield item

        behaviour = stream
    return factory(behaviour, handler.request_deserializer, handler.response_serializer)


def _kind(handler: grpc.RpcMethodHandler) -> tuple[str, Callable[..., grpc.RpcMethodHandler]]:
    if handler.unary_unary:
        return "unary_unary", grpc.unary_unary_rpc_method_handler
    if handler.unary_stream:
        return "unary_stream", grpc.unary_stream_rpc_method_handler
    if handler.stream_unary:
        return "stream_unary", grpc.stream_unary_rpc_method_handler
    return "stream_stream", grpc.stream_stream_rpc_method_handler


async def abort(context: Context, error: EventflowError) -> None:
    status = error.to_status()
    await context.abort(status.code, status.details, status.trailing_metadata)


@asynccontextmanager
async def error_guard(context: Context) -> AsyncIterator[None]:
    """Domain errors become rich google.rpc.Status.

    Unexpected exceptions are logged with their traceback and answered with a
    bare INTERNAL, so no internal detail (or secret) reaches the caller.
    """
    try:
        yield
    except EventflowError as error:
        await abort(context, error)
    except (grpc.aio.AbortError, grpc.aio.UsageError):
        raise
    except Exception:
        log.exception("unhandled error in a servicer")
        await abort(context, EventflowError(grpc.StatusCode.INTERNAL, "INTERNAL", "internal error"))


class ErrorInterceptor(grpc.aio.ServerInterceptor):
    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        return wrap_handler(handler, error_guard) if handler is not None else handler
