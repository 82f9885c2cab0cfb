"""The egress policy of ``http`` runs as pure rules (Issue 11, SSRF): which addresses are
refused and why, over IPv4 and IPv6 and the IPv6 forms that carry an IPv4 address, and
how ``--http-allow`` entries are read."""

from __future__ import annotations

import ipaddress
from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwork.config import Config, parse_http_allow
from tickwork.errors import ValidationError
from tickwork.tasks.egress import EgressPolicy, EgressRefused, refusal

ipv4s = st.integers(0, 2**32 - 1).map(IPv4Address)
ipv6s = st.integers(0, 2**128 - 1).map(IPv6Address)


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("0.1.2.3", "unspecified"),
        ("::", "unspecified"),
        ("169.254.169.254", "link-local"),  # cloud instance metadata
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("10.0.0.1", "private"),
        ("::ffff:10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "private"),  # CGNAT
        ("100.127.255.255", "private"),
        ("fd00::1", "private"),
        ("fc00::1", "private"),
        ("fec0::1", "private"),  # site-local: ipaddress calls it global on 3.11
        ("64:ff9b:1::1", "private"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("ff02::1", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("240.0.0.1", "reserved"),
        ("192.0.2.1", "reserved"),
        ("198.18.0.1", "reserved"),
        ("2001:db8::1", "reserved"),
        ("2001::1", "reserved"),  # Teredo
        ("::7f00:1", "reserved"),  # IPv4-compatible: ipaddress calls it global on 3.11
        ("::ffff:0:7f00:1", "reserved"),  # IPv4-translated: ipaddress calls it global
        ("100::1", "reserved"),
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of 169.254.169.254
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("2002:a00:1::1", "private"),  # 6to4 of 10.0.0.1
    ],
)
def test_addresses_that_are_not_public_are_refused_with_their_reason(
    address: str, reason: str
) -> None:
    assert refusal(ip_address(address)) == reason


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "1.1.1.1",
        "100.63.255.255",  # just below CGNAT
        "100.128.0.0",  # just above
        "172.15.255.255",
        "172.32.0.0",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",  # NAT64 of 8.8.8.8
        "2002:808:808::1",  # 6to4 of 8.8.8.8
        "2606:4700:4700::1111",
        "2a00:1450:4001::1",
    ],
)
def test_public_addresses_are_not_refused(address: str) -> None:
    assert refusal(ip_address(address)) is None


@given(ipv4s)
def test_an_ipv4_mapped_address_is_judged_by_its_ipv4_address(address: IPv4Address) -> None:
    mapped = IPv6Address(f"::ffff:{address}")
    nat64 = IPv6Address(int(IPv6Address("64:ff9b::")) | int(address))

    assert refusal(mapped) == refusal(address)
    assert refusal(nat64) == refusal(address)


@given(ipv4s)
def test_no_ipv4_address_that_python_counts_as_non_global_is_let_through(
    address: IPv4Address,
) -> None:
    if refusal(address) is None:
        assert address.is_global
        assert not address.is_multicast


@given(ipv6s)
def test_an_ipv6_address_let_through_is_global_unicast_or_carries_a_public_ipv4(
    address: IPv6Address,
) -> None:
    if refusal(address) is not None:
        return
    carried = address.ipv4_mapped or address.sixtofour
    if carried is None and address in ip_network("64:ff9b::/96"):
        carried = IPv4Address(int(address) & 0xFFFFFFFF)
    if carried is not None:
        assert refusal(carried) is None
    else:
        assert address in ip_network("2000::/3")
        assert address.is_global
        assert not address.is_multicast


@given(st.one_of(ipv4s, ipv6s))
def test_allowing_everything_allows_every_address(
    address: IPv4Address | IPv6Address,
) -> None:
    policy = EgressPolicy.from_entries(["0.0.0.0/0", "::/0"])

    assert policy.allows_address(address)


# -- --http-allow entries ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "parsed"),
    [
        ("10.0.0.0/8", ip_network("10.0.0.0/8")),
        ("127.0.0.1", ip_network("127.0.0.1/32")),
        (" fd00::/8 ", ip_network("fd00::/8")),
        ("::1", ip_network("::1/128")),
        ("LocalHost.", "localhost"),
        ("*.internal.example", "*.internal.example"),
        ("metrics_exporter.svc", "metrics_exporter.svc"),
    ],
)
def test_http_allow_entries_are_networks_or_host_names(
    entry: str, parsed: ipaddress.IPv4Network | ipaddress.IPv6Network | str
) -> None:
    assert parse_http_allow(entry) == parsed


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("10.0.0.0/33", "'10.0.0.0/33'"),
        ("10.0.0.1/8", "has host bits set"),
        ("10.1", "'10.1'"),  # resolvers read it as 10.0.0.1: never a host name
        ("http://localhost", "neither a network"),
        ("*", "neither a network"),
        ("-bad.example", "neither a network"),
        ("a" * 64 + ".example", "neither a network"),
        ("", "neither a network"),
    ],
)
def test_a_bad_http_allow_entry_is_a_validation_error_naming_it(entry: str, message: str) -> None:
    with pytest.raises(ValidationError, match="--http-allow") as caught:
        parse_http_allow(entry)

    assert caught.value.field == "http_allow"
    assert message in str(caught.value)


def test_the_config_reads_http_allow_from_the_environment_and_checks_it() -> None:
    config = Config.from_env({"TICKWORK_HTTP_ALLOW": "10.0.0.0/8, localhost,"})

    assert config.http_allow == ("10.0.0.0/8", "localhost")
    with pytest.raises(ValidationError, match="has host bits set"):
        Config.from_env({"TICKWORK_HTTP_ALLOW": "10.0.0.1/8"})
    with pytest.raises(ValidationError, match="neither a network"):
        Config(http_allow=("not a host",))


def test_a_host_name_entry_allows_that_name_and_a_wildcard_its_subdomains_only() -> None:
    policy = EgressPolicy.from_entries(["localhost", "*.internal.example"])

    assert policy.allows_host("LOCALHOST.")
    assert policy.allows_host("api.internal.example")
    assert policy.allows_host("a.b.internal.example")
    assert not policy.allows_host("internal.example")
    assert not policy.allows_host("evilinternal.example")
    assert not policy.allows_host("localhost.evil.example")


def test_an_allowed_network_covers_the_ipv6_forms_of_its_ipv4_addresses() -> None:
    policy = EgressPolicy.from_entries(["127.0.0.1"])

    assert policy.allows_address(ip_address("::ffff:127.0.0.1"))
    assert not policy.allows_address(ip_address("127.0.0.2"))
    assert not policy.allows_address(ip_address("::1"))


def test_vet_refuses_a_literal_address_without_asking_the_resolver() -> None:
    def no_lookups(host: str, port: int) -> list[str]:
        raise AssertionError(f"looked up {host}")

    policy = EgressPolicy(resolver=no_lookups)

    with pytest.raises(EgressRefused) as caught:
        policy.vet("169.254.169.254", 80)
    assert str(caught.value) == (
        "http: refused destination 169.254.169.254 (link-local) for host 169.254.169.254; "
        "allow it with --http-allow"
    )
    assert policy.vet("169.254.169.254", 80, allow_private=True) == [ip_address("169.254.169.254")]


def test_a_resolver_answer_that_is_not_an_address_is_a_connection_error() -> None:
    policy = EgressPolicy(resolver=lambda host, port: ["example.com"])

    with pytest.raises(OSError, match="not an IP address"):
        policy.vet("rebind.test", 80)
    with pytest.raises(OSError, match="resolves to no address"):
        EgressPolicy(resolver=lambda host, port: []).vet("rebind.test", 80)
