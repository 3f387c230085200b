"""One webhook delivery attempt, and what the retry machinery should make of it.

``deliver`` never raises for anything the network or the receiver does: every
outcome is a ``DeliveryResult`` whose ``retryable`` flag the step's retry
policy acts on. Retries, backoff and the attempt budget live with the step
runner; this module only answers "did it land, and is another try worthwhile".
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from types import TracebackType
from typing import Final

import aiohttp
from aiohttp.abc import AbstractResolver

from services.orchestrator.webhooks.egress import (
    DEFAULT_POLICY,
    EgressPolicy,
    EgressRefused,
    VettingResolver,
    check_url,
    egress_middleware,
)
from services.orchestrator.webhooks.signing import sign, signature_headers

__all__ = [
    "MAX_REDIRECTS",
    "MAX_RESPONSE_BYTES",
    "MAX_RETRY_AFTER_S",
    "USER_AGENT",
    "DeliveryResult",
    "WebhookClient",
    "WebhookRequest",
    "deliver",
    "parse_retry_after",
]

MAX_REDIRECTS: Final = 3
MAX_RESPONSE_BYTES: Final = 5 * 1024 * 1024
MAX_RETRY_AFTER_S: Final = 3600.0
USER_AGENT: Final = "eventflow-webhooks/1"

# Set by the delivery itself; a tenant header of the same name is dropped so a
# workflow cannot forge its own signature or idempotency key. Message framing
# headers belong to the HTTP client: a tenant value would desynchronise the request.
_DROPPED_HEADERS: Final = frozenset(
    {
        *("webhook-id", "webhook-timestamp", "webhook-signature", "idempotency-key"),
        *("content-type", "user-agent"),
        *("host", "content-length", "transfer-encoding", "connection", "keep-alive"),
        *("upgrade", "te", "trailer", "expect"),
    }
)
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE: Final = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
_READ_CHUNK: Final = 64 * 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class WebhookRequest:
    """One webhook step's request. ``msg_id`` stays the same across retries of an event."""

    url: str
    body: bytes = field(repr=False)
    msg_id: str
    secret: str = field(repr=False)
    # Set during a rotation's grace period: deliveries carry both signatures.
    previous_secret: str = field(default="", repr=False)
    method: str = "POST"
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        # Reject malformed input here, where the caller can see it, not mid-delivery.
        if not _TOKEN.fullmatch(self.method):
            raise ValueError(f"invalid HTTP method {self.method!r}")
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ValueError("timeout_s must be a positive number of seconds")
        for name, value in self.headers.items():
            if not _TOKEN.fullmatch(name) or not _HEADER_VALUE.fullmatch(value):
                raise ValueError(f"invalid header {name!r}")
        for secret in self.secrets:
            sign(secret, self.msg_id, 0, b"")  # validates the secrets and the id

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self.secret, self.previous_secret) if self.previous_secret else (self.secret,)


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    """The outcome of one attempt. ``error`` is for people: it never holds the secret or body."""

    ok: bool
    status: int | None
    retryable: bool
    retry_after_s: float | None = None
    error: str = ""
    refused: bool = False


class WebhookClient:
    """Delivers webhooks over one pooled ``aiohttp`` session guarded by an egress policy.

    Workers keep one client for their lifetime so connections and DNS answers
    are reused; ``dns`` replaces the upstream resolver (the policy still judges
    its answers), which tests use to stand in for public DNS.
    """

    def __init__(
        self, policy: EgressPolicy = DEFAULT_POLICY, *, dns: AbstractResolver | None = None
    ) -> None:
        self._policy = policy
        self._dns = dns
        self._session: aiohttp.ClientSession | None = None
        self._resolver: VettingResolver | None = None
        self._closed = False

    async def __aenter__(self) -> WebhookClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        self._closed = True
        if self._session is not None:
            await self._session.close()
        if self._resolver is not None:
            await self._resolver.close()

    async def deliver(self, request: WebhookRequest) -> DeliveryResult:
        """Send one attempt; the Standard Webhooks timestamp is this attempt's."""
        try:
            check_url(request.url, self._policy)  # userinfo is stripped before middlewares
        except EgressRefused as exc:
            return _refused(exc.reason)
        session = self._open_session()
        headers = _outgoing_headers(request, int(time.time()))
        try:
            # aiohttp may round its own timeouts up to whole seconds; this one is exact
            # and also covers DNS and reading the body.
            async with asyncio.timeout(request.timeout_s):
                async with session.request(
                    request.method,
                    request.url,
                    data=request.body,
                    headers=headers,
                    max_redirects=MAX_REDIRECTS + 1,  # aiohttp fails on reaching the limit
                    timeout=aiohttp.ClientTimeout(total=request.timeout_s),
                ) as response:
                    if response.method != request.method.upper():
                        # A 301/302/303 turned the signed POST into a bodiless GET: the
                        # receiver never got the event, so this must not count as sent.
                        return DeliveryResult(
                            ok=False,
                            status=response.status,
                            retryable=False,
                            error=f"a redirect changed {request.method} to {response.method};"
                            " point the webhook at the final URL",
                        )
                    if not await _body_within_limit(response):
                        response.close()
                        return _too_large(response.status)
                    return _result_for_response(response.status, response.headers)
        except (EgressRefused, aiohttp.ClientError, OSError) as exc:
            return _result_for_error(exc, request)

    def _open_session(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("WebhookClient is closed")
        if self._session is None:
            self._resolver = VettingResolver(self._policy, self._dns)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(resolver=self._resolver, ttl_dns_cache=10),
                middlewares=(egress_middleware(self._policy),),
                # An environment proxy would resolve and connect on our behalf, past the guard.
                trust_env=False,
                # Deliveries for different tenants share this session: no cookies carried over.
                cookie_jar=aiohttp.DummyCookieJar(),
                # The limit is on bytes received; we never decode, so ask for none encoded.
                auto_decompress=False,
                skip_auto_headers=("Accept-Encoding",),
            )
        return self._session


async def deliver(request: WebhookRequest, policy: EgressPolicy = DEFAULT_POLICY) -> DeliveryResult:
    """One delivery on a short-lived client; long-running workers keep a ``WebhookClient``."""
    async with WebhookClient(policy) as client:
        return await client.deliver(request)


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delay-seconds or HTTP-date), capped at 1 h.

    The cap keeps a receiver from parking a step for days with one header.
    """
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        seconds = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)  # HTTP-dates are GMT
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _outgoing_headers(request: WebhookRequest, timestamp: int) -> dict[str, str]:
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED_HEADERS}
    headers.update(
        signature_headers(
            request.secret, request.msg_id, timestamp, request.body, *request.secrets[1:]
        )
    )
    headers["content-type"] = "application/json"
    headers["user-agent"] = USER_AGENT
    headers["idempotency-key"] = request.msg_id
    return headers


async def _body_within_limit(response: aiohttp.ClientResponse) -> bool:
    """Drain the body (so the connection can be reused) unless it exceeds the limit."""
    declared = response.content_length
    if declared is not None and declared > MAX_RESPONSE_BYTES:
        return False
    received = 0
    async for chunk in response.content.iter_chunked(_READ_CHUNK):
        received += len(chunk)
        if received > MAX_RESPONSE_BYTES:
            return False
    return True


def _result_for_response(status: int, headers: Mapping[str, str]) -> DeliveryResult:
    if 200 <= status < 300:
        return DeliveryResult(ok=True, status=status, retryable=False)
    # 408 and 429 say "not now"; 5xx is the receiver's fault. Any other 4xx (410
    # included) is a client error a retry cannot fix; a 3xx here was not followed.
    retryable = status in (408, 429) or status >= 500
    retry_after = parse_retry_after(headers.get("Retry-After")) if retryable else None
    error = f"HTTP {status} {_phrase(status)}".rstrip()
    if 300 <= status < 400:
        error += " (redirect without a usable Location)"
    return DeliveryResult(
        ok=False, status=status, retryable=retryable, retry_after_s=retry_after, error=error
    )


def _result_for_error(exc: Exception, request: WebhookRequest) -> DeliveryResult:
    refusal = _refusal_in(exc)
    if refusal is not None:
        return _refused(refusal.reason)
    if isinstance(exc, aiohttp.TooManyRedirects):
        return _refused(f"more than {MAX_REDIRECTS} redirects")
    if isinstance(exc, aiohttp.NonHttpUrlRedirectClientError):
        return _refused("redirect to a URL that is not http or https")
    if isinstance(exc, aiohttp.InvalidURL):
        what = (
            "redirect to an invalid URL"
            if isinstance(exc, aiohttp.RedirectClientError)
            else "invalid URL"
        )
        return DeliveryResult(ok=False, status=None, retryable=False, error=f"{what} ({exc})")
    if isinstance(exc, TimeoutError):
        error = f"timed out after {request.timeout_s:g} s"
    elif isinstance(exc, aiohttp.ClientConnectorError):
        error = f"cannot connect to {exc.host}:{exc.port}: {exc.os_error.strerror or exc.os_error}"
    else:
        error = f"network error: {type(exc).__name__}: {exc}"[:300]
    # Defence in depth: exception texts are the receiver's and the OS's words, not ours.
    for secret in request.secrets:
        error = error.replace(secret, "[redacted]")
    return DeliveryResult(ok=False, status=None, retryable=True, error=error)


def _refusal_in(exc: BaseException) -> EgressRefused | None:
    """The guard's refusal, also when aiohttp wrapped it in one of its own errors."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, EgressRefused):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _refused(reason: str) -> DeliveryResult:
    return DeliveryResult(
        ok=False, status=None, retryable=False, error=f"egress refused: {reason}", refused=True
    )


def _too_large(status: int) -> DeliveryResult:
    return DeliveryResult(
        ok=False,
        status=status,
        retryable=False,
        error=f"response_too_large: the response body exceeds {MAX_RESPONSE_BYTES} bytes",
    )


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""
