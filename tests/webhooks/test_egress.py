"""The egress guard's judgement of addresses and URLs (SPEC §9). No network is used."""

from __future__ import annotations

import socket
from ipaddress import IPv4Address, IPv4Network, IPv6Address, ip_address

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult
from hypothesis import given
from hypothesis import strategies as st

from services.orchestrator.webhooks import (
    METADATA_ADDRESSES,
    EgressPolicy,
    EgressRefused,
    VettingResolver,
    blocked_reason,
    check_url,
)

STRICT = EgressPolicy()
SELF_HOSTED = EgressPolicy(allow_private=True)

# (address, refused by default, refused with allow_private)
ADDRESSES = [
    # public unicast
    ("8.8.8.8", False, False),
    ("1.1.1.1", False, False),
    ("2001:4860:4860::8888", False, False),
    ("::ffff:8.8.8.8", False, False),
    ("64:ff9b::808:808", False, False),  # NAT64 of a public host (DNS64 networks)
    ("2002:808:808::1", False, False),  # 6to4 of a public host
    # loopback, private, link-local: opened by allow_private
    ("127.0.0.1", True, False),
    ("127.255.255.254", True, False),
    ("::1", True, False),
    ("10.0.0.1", True, False),
    ("172.16.0.1", True, False),
    ("172.31.255.255", True, False),
    ("192.168.1.1", True, False),
    ("fc00::1", True, False),
    ("fd12:3456::1", True, False),
    ("169.254.1.1", True, False),
    ("fe80::1", True, False),
    ("fe80::1%2", True, False),
    ("100.64.0.1", True, False),
    ("100.127.255.255", True, False),
    ("fec0::1", True, False),
    ("::ffff:127.0.0.1", True, False),
    ("::ffff:10.1.2.3", True, False),
    ("2002:a00:1::", True, False),  # 6to4 of 10.0.0.1
    ("2002:7f00:1::", True, False),  # 6to4 of 127.0.0.1
    ("64:ff9b::a00:1", True, False),  # NAT64 of 10.0.0.1
    ("64:ff9b:1::808:808", True, False),  # local-use NAT64: infrastructure of this network
    # never reachable, whatever the policy
    ("0.0.0.0", True, True),
    ("0.1.2.3", True, True),
    ("::", True, True),
    ("224.0.0.1", True, True),
    ("239.255.255.250", True, True),
    ("ff02::1", True, True),
    ("255.255.255.255", True, True),
    ("240.0.0.1", True, True),
    ("192.0.0.8", True, True),
    ("192.0.2.1", True, True),
    ("198.51.100.7", True, True),
    ("203.0.113.9", True, True),
    ("2001:db8::1", True, True),
    ("3fff::1", True, True),
    ("198.18.0.1", True, True),
    ("198.19.255.255", True, True),
    ("2001:2::1", True, True),
    ("192.88.99.1", True, True),
    ("100::1", True, True),
    ("2001::1", True, True),  # Teredo
    ("2001:10::1", True, True),
    ("5f00::1", True, True),
    ("4000::1", True, True),  # unallocated IPv6
    ("::8.8.8.8", True, True),  # IPv4-compatible: deprecated, not routable
    ("::127.0.0.1", True, True),
    # cloud metadata: refused under every policy, in every disguise
    ("169.254.169.254", True, True),
    ("169.254.170.2", True, True),
    ("fd00:ec2::254", True, True),
    ("100.100.100.200", True, True),
    ("192.0.0.192", True, True),
    ("168.63.129.16", True, True),
    ("::ffff:169.254.169.254", True, True),
    ("::ffff:a9fe:a9fe", True, True),
    ("64:ff9b::a9fe:a9fe", True, True),
    ("64:ff9b:1::a9fe:a9fe", True, True),
    ("2002:a9fe:a9fe::", True, True),
    ("::169.254.169.254", True, True),
]


@pytest.mark.parametrize(("address", "strict", "self_hosted"), ADDRESSES)
def test_blocked_reason_table(address: str, strict: bool, self_hosted: bool) -> None:
    ip = ip_address(address)
    assert (blocked_reason(ip, STRICT) is not None) is strict
    assert (blocked_reason(ip, SELF_HOSTED) is not None) is self_hosted


@pytest.mark.parametrize("address", sorted(str(a) for a in METADATA_ADDRESSES))
def test_metadata_addresses_are_named_as_such_under_every_policy(address: str) -> None:
    for policy in (STRICT, SELF_HOSTED):
        assert blocked_reason(ip_address(address), policy) == "cloud metadata address"


def test_embedded_ipv4_reason_names_the_carrier() -> None:
    reason = blocked_reason(ip_address("::ffff:127.0.0.1"))
    assert reason == "loopback address (IPv4-mapped IPv6 form)"


def test_default_policy_is_strict() -> None:
    assert blocked_reason(ip_address("127.0.0.1")) == "loopback address"


_PRIVATE_V4 = [
    IPv4Network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "127.0.0.0/8", "100.64.0.0/10")
]


def _in(net: IPv4Network) -> st.SearchStrategy[IPv4Address]:
    return st.integers(int(net.network_address), int(net.broadcast_address)).map(IPv4Address)


@given(st.one_of(*(_in(net) for net in _PRIVATE_V4)))
def test_private_ipv4_is_refused_unless_private_is_allowed(ip: IPv4Address) -> None:
    assert blocked_reason(ip, STRICT) is not None
    if ip not in METADATA_ADDRESSES:
        assert blocked_reason(ip, SELF_HOSTED) is None


@given(st.ip_addresses())
def test_nothing_python_calls_non_global_is_allowed_by_default(
    ip: IPv4Address | IPv6Address,
) -> None:
    if not ip.is_global:
        assert blocked_reason(ip, STRICT) is not None


@given(st.ip_addresses(v=4), st.booleans())
def test_ipv4_mapped_and_nat64_forms_are_judged_as_the_embedded_ipv4(
    ip: IPv4Address, allow_private: bool
) -> None:
    policy = EgressPolicy(allow_private=allow_private)
    expected = blocked_reason(ip, policy) is None
    mapped = IPv6Address((0xFFFF << 32) | int(ip))
    nat64 = IPv6Address((0x64FF9B << 96) | int(ip))
    assert (blocked_reason(mapped, policy) is None) is expected
    assert (blocked_reason(nat64, policy) is None) is expected


@given(st.ip_addresses(v=4), st.booleans())
def test_6to4_of_a_refused_ipv4_is_refused(ip: IPv4Address, allow_private: bool) -> None:
    policy = EgressPolicy(allow_private=allow_private)
    sixtofour = IPv6Address((0x2002 << 112) | (int(ip) << 80) | 1)
    if blocked_reason(ip, policy) is not None:
        assert blocked_reason(sixtofour, policy) is not None


@pytest.mark.parametrize(
    ("url", "policy"),
    [
        ("ftp://example.com/hook", STRICT),
        ("file:///etc/passwd", STRICT),
        ("gopher://example.com:70/", STRICT),
        ("javascript:alert(1)", STRICT),
        ("example.com/hook", STRICT),
        ("https://user:pass@example.com/hook", STRICT),
        ("https://token@example.com/hook", STRICT),
        ("http:///hook", STRICT),
        ("http://example.com:99999/", STRICT),
        ("http://127.0.0.1/", STRICT),
        ("http://[::1]:8080/", STRICT),
        ("http://[::ffff:127.0.0.1]/", STRICT),
        ("http://[fe80::1%25eth0]/", STRICT),
        ("http://10.1.2.3/", STRICT),
        ("http://10.1.2.3./", STRICT),
        ("http://127.1/", STRICT),
        ("http://2130706433/", STRICT),
        ("http://0x7f000001/", STRICT),
        ("http://0177.0.0.1/", STRICT),
        ("http://8.8.2056/", STRICT),  # non-canonical even when it names a public host
        ("http://0.0.0.0:8080/", SELF_HOSTED),
        ("http://169.254.169.254/latest/meta-data/", SELF_HOSTED),
        ("http://[fd00:ec2::254]/", SELF_HOSTED),
    ],
)
def test_check_url_refuses(url: str, policy: EgressPolicy) -> None:
    with pytest.raises(EgressRefused) as refused:
        check_url(url, policy)
    assert refused.value.reason


@pytest.mark.parametrize(
    ("url", "policy"),
    [
        ("https://hooks.example.com/in?x=1", STRICT),
        ("HTTP://Hooks.Example.com:8443/in", STRICT),
        ("http://8.8.8.8/", STRICT),
        ("http://[2001:4860:4860::8888]/", STRICT),
        ("http://localhost:8080/", STRICT),  # a name: judged after resolution
        ("http://127.0.0.1:8080/", SELF_HOSTED),
        ("http://[::1]:8080/", SELF_HOSTED),
    ],
)
def test_check_url_lets_through(url: str, policy: EgressPolicy) -> None:
    check_url(url, policy)


class StubDNS(AbstractResolver):
    """Answers from a table, so resolver behaviour is tested without real DNS."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.closed = False

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            ResolveResult(
                hostname=host,
                host=a,
                port=port,
                family=socket.AF_INET6 if ":" in a else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for a in self.answers[host]
        ]

    async def close(self) -> None:
        self.closed = True


async def test_resolver_keeps_only_allowed_answers() -> None:
    dns = StubDNS({"mixed.test": ["10.0.0.1", "93.184.215.14", "::1", "2606:2800:21f::1"]})
    answers = await VettingResolver(STRICT, dns).resolve("mixed.test", 443, socket.AF_UNSPEC)
    assert [a["host"] for a in answers] == ["93.184.215.14", "2606:2800:21f::1"]
    assert {a["port"] for a in answers} == {443}


async def test_resolver_refuses_a_name_with_only_blocked_answers() -> None:
    dns = StubDNS({"rebind.test": ["169.254.169.254", "192.0.2.1"]})
    with pytest.raises(EgressRefused) as refused:
        await VettingResolver(SELF_HOSTED, dns).resolve("rebind.test", 80)
    assert "cloud metadata address" in refused.value.reason


async def test_resolver_fails_closed_on_an_answer_that_is_not_an_address() -> None:
    with pytest.raises(EgressRefused):
        await VettingResolver(SELF_HOSTED, StubDNS({"odd.test": ["not-an-ip"]})).resolve("odd.test")


async def test_resolver_leaves_a_borrowed_upstream_open() -> None:
    dns = StubDNS({})
    await VettingResolver(STRICT, dns).close()
    assert not dns.closed
