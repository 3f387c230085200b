"""Delivering webhooks to a real receiver on 127.0.0.1 (SPEC §4, §9).

Every test runs under a tripwire on the event loop's ``sock_connect``: it
records each address dialled and refuses anything but loopback, so a guard
regression fails a test instead of sending a packet off this machine.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from ipaddress import ip_address
from typing import Any

import pytest
from aiohttp import web
from standardwebhooks import Webhook, WebhookVerificationError

from services.orchestrator.webhooks import (
    MAX_RESPONSE_BYTES,
    USER_AGENT,
    EgressPolicy,
    WebhookClient,
    WebhookRequest,
    deliver,
    new_secret,
    parse_retry_after,
)
from tests.webhooks.test_egress import StubDNS

SELF_HOSTED = EgressPolicy(allow_private=True)
BODY = b'{"type":"invoice.paid","data":{"invoiceId":"in_42"}}'
SECRET = new_secret()


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    port: int
    requests: list[Received] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@pytest.fixture
async def dialled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    loop = asyncio.get_running_loop()
    original = loop.sock_connect
    attempts: list[str] = []

    async def tripwire(sock: socket.socket, address: Any) -> None:
        host = str(address[0])
        attempts.append(host)
        ip = ip_address(host.split("%")[0])
        if not (ip.is_loopback and (ip.version == 4 or str(ip) == "::1")):
            raise ConnectionRefusedError(f"test tripwire: {host} is not loopback")
        await original(sock, address)

    monkeypatch.setattr(loop, "sock_connect", tripwire)
    return attempts


@pytest.fixture
async def receiver(dialled: list[str]) -> AsyncIterator[Receiver]:
    state = Receiver(port=0)

    @web.middleware
    async def record(request: web.Request, handler: Handler) -> web.StreamResponse:
        body = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        state.requests.append(Received(request.method, request.path_qs, headers, body))
        return await handler(request)

    async def hook(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def status(request: web.Request) -> web.Response:
        headers = {}
        if "retry_after" in request.query:
            headers["Retry-After"] = request.query["retry_after"]
        return web.Response(status=int(request.match_info["code"]), headers=headers)

    async def chain(request: web.Request) -> web.Response:
        hops = int(request.match_info["hops"])
        if hops == 0:
            return web.Response(text="arrived")
        raise web.HTTPTemporaryRedirect(f"/redirect/{hops - 1}")

    async def redirect_to(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(request.query["location"])

    async def slow(_: web.Request) -> web.Response:
        await asyncio.wait_for(state.release.wait(), timeout=5)
        return web.Response(text="late")

    async def stream(request: web.Request) -> web.StreamResponse:
        size = int(request.query["size"])
        response = web.StreamResponse()
        if request.query.get("declared"):
            response.content_length = size
        else:
            response.enable_chunked_encoding()
        await response.prepare(request)
        chunk = b"x" * (256 * 1024)
        with_chunks = size // len(chunk)
        try:
            for _ in range(with_chunks):
                await response.write(chunk)
            await response.write(b"x" * (size - with_chunks * len(chunk)))
            await response.write_eof()
        except ConnectionError:
            pass  # the client stopped reading, as it should
        return response

    app = web.Application(middlewares=[record])
    app.router.add_route("*", "/hook", hook)
    app.router.add_route("*", "/status/{code}", status)
    app.router.add_route("*", "/redirect/{hops}", chain)
    app.router.add_route("*", "/redirect-to", redirect_to)
    app.router.add_route("*", "/slow", slow)
    app.router.add_route("*", "/stream", stream)
    runner = web.AppRunner(app, shutdown_timeout=1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    state.port = runner.addresses[0][1]
    try:
        yield state
    finally:
        state.release.set()
        await runner.cleanup()


@pytest.fixture
async def client() -> AsyncIterator[WebhookClient]:
    async with WebhookClient(SELF_HOSTED) as c:
        yield c


def request(url: str, **overrides: Any) -> WebhookRequest:
    fields: dict[str, Any] = {"url": url, "body": BODY, "msg_id": "msg_01J8Z", "secret": SECRET}
    return WebhookRequest(**(fields | overrides))


async def test_delivers_body_and_headers_that_standardwebhooks_verifies(
    receiver: Receiver, client: WebhookClient
) -> None:
    forged = {
        "X-Tenant-Trace": "abc",
        "Webhook-Signature": "v1,forged",
        "Content-Type": "text/plain",
        "User-Agent": "curl/8",
        "Idempotency-Key": "mine",
        "Host": "internal.example",
    }
    result = await client.deliver(request(receiver.url("/hook"), headers=forged))

    assert (result.ok, result.status, result.error, result.refused) == (True, 200, "", False)
    [got] = receiver.requests
    assert (got.method, got.body) == ("POST", BODY)
    assert got.headers["content-type"] == "application/json"
    assert got.headers["user-agent"] == USER_AGENT
    assert got.headers["idempotency-key"] == "msg_01J8Z"
    assert got.headers["webhook-id"] == "msg_01J8Z"
    assert got.headers["x-tenant-trace"] == "abc"
    assert got.headers["host"] == f"127.0.0.1:{receiver.port}"
    assert abs(int(got.headers["webhook-timestamp"]) - time.time()) < 5
    assert Webhook(SECRET).verify(got.body, got.headers) == json.loads(BODY)
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(got.body.replace(b"in_42", b"in_43"), got.headers)


async def test_webhook_id_is_stable_across_deliveries_of_one_message(
    receiver: Receiver, client: WebhookClient, dialled: list[str]
) -> None:
    for _ in range(2):
        assert (await client.deliver(request(receiver.url("/hook")))).ok
    first, second = receiver.requests
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == "msg_01J8Z"
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"]
    for got in (first, second):
        Webhook(SECRET).verify(got.body, got.headers)
    assert dialled == ["127.0.0.1"]  # one pooled connection served both


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "localhost", "[::1]", "10.0.0.7", "[::ffff:127.0.0.1]", "0.0.0.0", "127.0.0.1.",
     "127.1", "2130706433", "0x7f000001", "0177.0.0.1"],
)  # fmt: skip
async def test_private_destinations_are_refused_without_connecting(
    receiver: Receiver, dialled: list[str], host: str
) -> None:
    async with WebhookClient(EgressPolicy()) as strict:
        result = await strict.deliver(request(receiver.url("/hook", host=host)))
    assert result.refused and not result.retryable and not result.ok
    assert result.status is None
    assert result.error.startswith("egress refused: ")
    assert receiver.requests == [] and dialled == []


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://169.254.170.2/v2/credentials",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://100.100.100.200/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://[64:ff9b::a9fe:a9fe]/",
    ],
)
async def test_metadata_is_refused_even_when_private_is_allowed(
    client: WebhookClient, dialled: list[str], url: str
) -> None:
    result = await client.deliver(request(url))
    assert result.refused and not result.retryable
    assert "cloud metadata address" in result.error
    assert dialled == []


async def test_a_name_is_dialled_only_at_its_vetted_addresses(
    receiver: Receiver, dialled: list[str]
) -> None:
    dns = StubDNS(
        {"rebind.test": ["169.254.169.254"], "mixed.test": ["169.254.169.254", "127.0.0.1"]}
    )
    async with WebhookClient(SELF_HOSTED, dns=dns) as named:
        refused = await named.deliver(request(receiver.url("/hook", host="rebind.test")))
        delivered = await named.deliver(request(receiver.url("/hook", host="mixed.test")))
    assert refused.refused and "cloud metadata address" in refused.error
    assert delivered.ok
    assert dialled == ["127.0.0.1"]


@pytest.mark.parametrize(
    "location",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://rebind.test/",
        "ftp://127.0.0.1/upload",
        "file:///etc/passwd",
    ],
)
async def test_a_redirect_to_a_refused_destination_is_refused(
    receiver: Receiver, dialled: list[str], location: str
) -> None:
    dns = StubDNS({"rebind.test": ["169.254.169.254"]})
    async with WebhookClient(SELF_HOSTED, dns=dns) as named:
        result = await named.deliver(request(receiver.url(f"/redirect-to?location={location}")))
    assert result.refused and not result.retryable and result.status is None
    assert len(receiver.requests) == 1
    assert set(dialled) == {"127.0.0.1"}


async def test_three_redirects_are_followed(receiver: Receiver, client: WebhookClient) -> None:
    result = await client.deliver(request(receiver.url("/redirect/3")))
    assert result.ok and result.status == 200
    assert [r.path for r in receiver.requests] == [f"/redirect/{n}" for n in (3, 2, 1, 0)]
    assert receiver.requests[-1].body == BODY  # 307 keeps the method and the signed body
    Webhook(SECRET).verify(receiver.requests[-1].body, receiver.requests[-1].headers)


async def test_a_fourth_redirect_is_refused(receiver: Receiver, client: WebhookClient) -> None:
    result = await client.deliver(request(receiver.url("/redirect/4")))
    assert result.refused and not result.retryable
    assert "more than 3 redirects" in result.error
    assert [r.path for r in receiver.requests] == [f"/redirect/{n}" for n in (4, 3, 2, 1)]


@pytest.mark.parametrize(
    ("code", "retryable"),
    [(410, False), (404, False), (400, False), (401, False), (422, False), (408, True),
     (429, True), (500, True), (502, True), (503, True)],
)  # fmt: skip
async def test_status_decides_whether_a_retry_is_worthwhile(
    receiver: Receiver, client: WebhookClient, code: int, retryable: bool
) -> None:
    result = await client.deliver(request(receiver.url(f"/status/{code}")))
    assert (result.ok, result.status, result.retryable, result.refused) == (
        False,
        code,
        retryable,
        False,
    )
    assert result.error.startswith(f"HTTP {code} ")
    assert result.retry_after_s is None


async def test_2xx_is_delivered(receiver: Receiver, client: WebhookClient) -> None:
    result = await client.deliver(request(receiver.url("/status/204")))
    assert (result.ok, result.status, result.retryable) == (True, 204, False)


async def test_503_with_retry_after_is_retryable_with_the_delay(
    receiver: Receiver, client: WebhookClient
) -> None:
    result = await client.deliver(request(receiver.url("/status/503?retry_after=120")))
    assert (result.retryable, result.retry_after_s) == (True, 120.0)


async def test_429_retry_after_is_capped_at_an_hour(
    receiver: Receiver, client: WebhookClient
) -> None:
    result = await client.deliver(request(receiver.url("/status/429?retry_after=86400")))
    assert (result.retryable, result.retry_after_s) == (True, 3600.0)


async def test_410_ignores_retry_after(receiver: Receiver, client: WebhookClient) -> None:
    result = await client.deliver(request(receiver.url("/status/410?retry_after=5")))
    assert not result.retryable and result.retry_after_s is None


@pytest.mark.parametrize("declared", [False, True])
async def test_a_response_over_5_mib_is_cut_off(
    receiver: Receiver, client: WebhookClient, declared: bool
) -> None:
    flag = "&declared=1" if declared else ""
    url = receiver.url(f"/stream?size={MAX_RESPONSE_BYTES + 1024 * 1024}{flag}")
    result = await client.deliver(request(url))
    assert (result.ok, result.status, result.retryable) == (False, 200, False)
    assert result.error.startswith("response_too_large")


async def test_a_response_of_exactly_5_mib_is_read(
    receiver: Receiver, client: WebhookClient
) -> None:
    result = await client.deliver(request(receiver.url(f"/stream?size={MAX_RESPONSE_BYTES}")))
    assert result.ok


async def test_a_slow_receiver_hits_the_timeout(receiver: Receiver, client: WebhookClient) -> None:
    started = time.monotonic()
    result = await client.deliver(request(receiver.url("/slow"), timeout_s=0.5))
    elapsed = time.monotonic() - started
    assert (result.ok, result.retryable, result.status) == (False, True, None)
    assert result.error == "timed out after 0.5 s"
    assert 0.4 < elapsed < 1.5


async def test_a_closed_port_is_a_retryable_network_error(
    client: WebhookClient, dialled: list[str]
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = await client.deliver(request(f"http://127.0.0.1:{port}/hook"))
    assert (result.ok, result.retryable, result.refused) == (False, True, False)
    assert "cannot connect" in result.error
    assert SECRET not in result.error and SECRET.removeprefix("whsec_") not in result.error


async def test_module_level_deliver(receiver: Receiver) -> None:
    assert (await deliver(request(receiver.url("/hook")), SELF_HOSTED)).ok
    assert (await deliver(request(receiver.url("/hook")), EgressPolicy())).refused


async def test_a_closed_client_refuses_to_deliver(receiver: Receiver) -> None:
    closed = WebhookClient(SELF_HOSTED)
    await closed.close()
    with pytest.raises(RuntimeError):
        await closed.deliver(request(receiver.url("/hook")))


@pytest.mark.parametrize(
    "overrides",
    [
        {"method": "PO ST"},
        {"timeout_s": 0},
        {"timeout_s": float("nan")},
        {"headers": {"X-Evil": "a\r\nInjected: 1"}},
        {"headers": {"Bad Name": "x"}},
        {"secret": "whsec_%%%"},
        {"msg_id": "msg 1"},
    ],
)
def test_malformed_requests_are_rejected_at_construction(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        request("https://hooks.example.com/in", **overrides)


def test_request_repr_hides_the_secret_and_body() -> None:
    text = repr(request("https://hooks.example.com/in"))
    assert SECRET not in text and "invoice" not in text


NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("0", 0.0),
        ("120", 120.0),
        (" 30 ", 30.0),
        ("999999999999", 3600.0),
        (format_datetime(NOW + timedelta(seconds=90), usegmt=True), 90.0),
        (format_datetime(NOW - timedelta(days=1), usegmt=True), 0.0),
        ("Sun, 01 Mar 2026 12:10:00 GMT", 600.0),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        ("²", None),
        (None, None),
    ],
)
def test_parse_retry_after(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header, now=NOW) == seconds


async def test_a_redirect_that_turns_the_post_into_a_get_is_not_a_delivery() -> None:
    from aiohttp import web

    got: list[str] = []

    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPFound("/final")

    async def final(request: web.Request) -> web.Response:
        got.append(request.method)
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/hook", moved)
    app.router.add_route("*", "/final", final)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with WebhookClient(EgressPolicy(allow_private=True)) as client:
            result = await client.deliver(
                WebhookRequest(
                    url=f"http://127.0.0.1:{port}/hook",
                    body=b"{}",
                    msg_id="msg_redirect",
                    secret="whsec_" + "A" * 43 + "=",
                    timeout_s=5,
                )
            )
    finally:
        await runner.cleanup()
    assert got == ["GET"]
    assert not result.ok and not result.retryable and "redirect changed POST" in result.error
