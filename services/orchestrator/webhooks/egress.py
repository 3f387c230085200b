"""The egress guard: which addresses a webhook may reach, and where that is enforced.

A webhook URL is tenant input, so every delivery is a potential server-side
request forgery. The guard judges *addresses*, not names: a hostname is only
trusted once it has resolved, and the connection is then made to the very
address that was judged (``VettingResolver``), so a DNS answer that changes
between the check and the connect (rebinding) cannot slip through. IP-literal
hosts never reach a resolver in aiohttp, so a client middleware judges every
hop's URL as well (``egress_middleware``); together they cover the first
request and every redirect.

The ranges are spelled out here rather than taken from ``ipaddress.is_global``
because that property changes between Python patch releases (3.11.7 calls
192.0.0.192, an Oracle Cloud metadata address, global).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address
from typing import Final

from aiohttp import ClientHandlerType, ClientMiddlewareType, ClientRequest, ClientResponse
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from yarl import URL

__all__ = [
    "DEFAULT_POLICY",
    "METADATA_ADDRESSES",
    "EgressPolicy",
    "EgressRefused",
    "VettingResolver",
    "blocked_reason",
    "check_url",
    "egress_middleware",
]

IPAddress = IPv4Address | IPv6Address


@dataclass(frozen=True, slots=True)
class EgressPolicy:
    """What a deployment lets webhooks reach.

    ``allow_private`` exists for self-hosted deployments whose receivers live
    on the internal network (and for tests with a local receiver). It opens
    loopback, RFC 1918, ULA, link-local, CGNAT and site-local space, never the
    cloud metadata endpoints.
    """

    allow_private: bool = False


DEFAULT_POLICY: Final = EgressPolicy()


class EgressRefused(Exception):
    """The guard refused a destination; retrying the same URL cannot succeed."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# Instance-metadata endpoints hand out cloud credentials: refused under every policy.
METADATA_ADDRESSES: Final[frozenset[IPAddress]] = frozenset(
    ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP (metadata.google.internal), Azure, OpenStack, DO
        "169.254.170.2",  # AWS ECS task metadata and credentials
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "168.63.129.16",  # Azure WireServer (a public address that serves host config)
    )
)

_PRIVATE: Final = True  # opened by allow_private
_NEVER: Final = False  # refused under every policy

_V4_RANGES: Final[tuple[tuple[IPv4Network, str, bool], ...]] = tuple(
    (IPv4Network(net), reason, private)
    for net, reason, private in (
        ("0.0.0.0/8", "this-network address (0.0.0.0/8 reaches the local host)", _NEVER),
        ("10.0.0.0/8", "private address (RFC 1918)", _PRIVATE),
        ("100.64.0.0/10", "shared address space (CGNAT, RFC 6598)", _PRIVATE),
        ("127.0.0.0/8", "loopback address", _PRIVATE),
        ("169.254.0.0/16", "link-local address", _PRIVATE),
        ("172.16.0.0/12", "private address (RFC 1918)", _PRIVATE),
        ("192.0.0.0/24", "IETF protocol assignment (RFC 6890)", _NEVER),
        ("192.0.2.0/24", "documentation address (TEST-NET-1)", _NEVER),
        ("192.88.99.0/24", "6to4 relay anycast (deprecated)", _NEVER),
        ("192.168.0.0/16", "private address (RFC 1918)", _PRIVATE),
        ("198.18.0.0/15", "benchmarking address (RFC 2544)", _NEVER),
        ("198.51.100.0/24", "documentation address (TEST-NET-2)", _NEVER),
        ("203.0.113.0/24", "documentation address (TEST-NET-3)", _NEVER),
        ("224.0.0.0/4", "multicast address", _NEVER),
        ("240.0.0.0/4", "reserved address (includes broadcast)", _NEVER),
    )
)

_V6_RANGES: Final[tuple[tuple[IPv6Network, str, bool], ...]] = tuple(
    (IPv6Network(net), reason, private)
    for net, reason, private in (
        ("::/128", "unspecified address (reaches the local host)", _NEVER),
        ("::1/128", "loopback address", _PRIVATE),
        ("64:ff9b:1::/48", "local-use NAT64 prefix (RFC 8215)", _PRIVATE),
        ("100::/64", "discard-only address (RFC 6666)", _NEVER),
        ("2001::/32", "Teredo tunnel address", _NEVER),
        ("2001:2::/48", "benchmarking address (RFC 5180)", _NEVER),
        ("2001:10::/28", "ORCHID identifier (not routable)", _NEVER),
        ("2001:20::/28", "ORCHIDv2 identifier (not routable)", _NEVER),
        ("2001:db8::/32", "documentation address", _NEVER),
        ("3fff::/20", "documentation address (RFC 9637)", _NEVER),
        ("5f00::/16", "segment routing SID (RFC 9602)", _NEVER),
        ("fc00::/7", "unique local address (ULA)", _PRIVATE),
        ("fe80::/10", "link-local address", _PRIVATE),
        ("fec0::/10", "site-local address (deprecated)", _PRIVATE),
        ("ff00::/8", "multicast address", _NEVER),
    )
)

_GLOBAL_UNICAST_V6: Final = IPv6Network("2000::/3")
_NAT64_WELL_KNOWN: Final = IPv6Network("64:ff9b::/96")
_NAT64_LOCAL: Final = IPv6Network("64:ff9b:1::/48")


def blocked_reason(ip: IPAddress, policy: EgressPolicy = DEFAULT_POLICY) -> str | None:
    """Why ``ip`` may not be reached under ``policy``, or None when it may.

    IPv6 forms that carry an IPv4 address (mapped, compatible, 6to4, NAT64)
    are judged by the address they carry, because that is where the packets
    end up.
    """
    if isinstance(ip, IPv6Address):
        ip = IPv6Address(int(ip))  # a zone id (fe80::1%eth0) changes nothing here
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            carrier, v4 = embedded
            reason = blocked_reason(v4, policy)
            if reason is not None:
                return f"{reason} ({carrier} form)"
            if ip.ipv4_mapped is not None or ip in _NAT64_WELL_KNOWN:
                return None  # the packets go to a public IPv4 host
            if carrier == "IPv4-compatible IPv6":
                return "IPv4-compatible IPv6 address (deprecated, not routable)"
    if ip in METADATA_ADDRESSES:
        return "cloud metadata address"
    ranges = _V4_RANGES if isinstance(ip, IPv4Address) else _V6_RANGES
    for net, reason, private in ranges:
        if ip in net:
            return None if private and policy.allow_private else reason
    if isinstance(ip, IPv6Address) and ip not in _GLOBAL_UNICAST_V6:
        return "reserved IPv6 address (outside 2000::/3)"
    if not ip.is_global:
        return "address is not globally routable"
    return None


def _embedded_ipv4(ip: IPv6Address) -> tuple[str, IPv4Address] | None:
    if ip.ipv4_mapped is not None:
        return "IPv4-mapped IPv6", ip.ipv4_mapped
    if ip.sixtofour is not None:
        return "6to4", ip.sixtofour
    if ip in _NAT64_WELL_KNOWN or ip in _NAT64_LOCAL:
        return "NAT64", IPv4Address(int(ip) & 0xFFFFFFFF)
    value = int(ip)
    if value >> 32 == 0 and value > 1:
        return "IPv4-compatible IPv6", IPv4Address(value)
    return None


def check_url(url: str | URL, policy: EgressPolicy = DEFAULT_POLICY) -> None:
    """Refuse a URL the guard can judge without DNS: scheme, userinfo, IP-literal host.

    Hostnames pass here; they are judged after resolution by ``VettingResolver``.
    Parsing uses yarl, the parser aiohttp itself connects with, so the guard and
    the client can never disagree about which host a URL names.
    """
    try:
        parsed = url if isinstance(url, URL) else URL(url)
        host = parsed.host
    except (ValueError, TypeError) as exc:
        raise EgressRefused(f"invalid URL ({exc})") from None
    if parsed.scheme not in ("http", "https"):
        raise EgressRefused(f"scheme {parsed.scheme or '(none)'!r} is not http or https")
    if parsed.user is not None or parsed.password is not None:
        raise EgressRefused("URLs with credentials (userinfo) are not allowed")
    if not host:
        raise EgressRefused("URL has no host")
    literal = _ip_literal(host)
    if literal is None:
        return  # a hostname: judged once resolved
    reason = blocked_reason(literal, policy)
    if reason is not None:
        raise EgressRefused(f"{host}: {reason}")


def _ip_literal(host: str) -> IPAddress | None:
    bare = host.removesuffix(".")
    try:
        return ip_address(bare)
    except ValueError:
        pass
    # Legacy numeric forms (127.1, 0x7f000001, 2130706433, 0177.0.0.1) are
    # addresses to the C library but not to ipaddress; nobody names a real
    # receiver that way, so they are refused rather than interpreted.
    try:
        socket.inet_aton(bare)
    except (OSError, ValueError):
        return None
    raise EgressRefused(f"{host}: non-canonical numeric IPv4 address")


class VettingResolver(AbstractResolver):
    """Resolves through ``upstream`` and keeps only the addresses the policy allows.

    aiohttp connects to what the resolver returns, so the address judged is the
    address dialled. When nothing survives, resolution fails with
    ``EgressRefused`` and no connection is attempted. An ``upstream`` passed in
    stays its owner's to close.
    """

    def __init__(self, policy: EgressPolicy, upstream: AbstractResolver | None = None) -> None:
        self._policy = policy
        self._owns_upstream = upstream is None
        self._upstream = upstream if upstream is not None else DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        answers = await self._upstream.resolve(host, port, family)
        allowed: list[ResolveResult] = []
        reasons: list[str] = []
        for answer in answers:
            reason = _answer_reason(answer["host"], self._policy)
            if reason is None:
                allowed.append(answer)
            else:
                reasons.append(f"{answer['host']}: {reason}")
        if not allowed:
            detail = "; ".join(reasons) if reasons else "no addresses"
            raise EgressRefused(f"{host} resolves to no allowed address ({detail})")
        return allowed

    async def close(self) -> None:
        if self._owns_upstream:
            await self._upstream.close()


def _answer_reason(host: str, policy: EgressPolicy) -> str | None:
    try:
        return blocked_reason(ip_address(host), policy)
    except ValueError:
        return "resolver returned something that is not an IP address"  # fail closed


def egress_middleware(policy: EgressPolicy) -> ClientMiddlewareType:
    """A client middleware that judges every hop's URL before aiohttp connects.

    It runs for the first request and for each redirect aiohttp follows, which
    is where IP-literal hosts (never handed to the resolver) are caught.
    """

    async def guard(req: ClientRequest, handler: ClientHandlerType) -> ClientResponse:
        check_url(req.url, policy)
        return await handler(req)

    return guard
