"""The one parser of hosts (``Host``, ``Origin``, ``Referer``): strict ``host[:port]``, so
that a header which merely contains a loopback address or this site's name is not taken
for one (issue 11: ``evil.example:P@127.0.0.1`` passed as loopback)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwork.web.auth import Authority, page_authority, parse_authority

ACCEPTED = {
    "127.0.0.1": Authority("127.0.0.1", None),
    "127.0.0.1:8765": Authority("127.0.0.1", 8765),
    "localhost": Authority("localhost", None),
    "LocalHost:1": Authority("localhost", 1),
    "app.localhost:65535": Authority("app.localhost", 65535),
    "[::1]": Authority("::1", None),
    "[::1]:8765": Authority("::1", 8765),
    "[0:0:0:0:0:0:0:1]:80": Authority("::1", 80),
    "tickwork.example.com": Authority("tickwork.example.com", None),
    "xn--bcher-kva.example:443": Authority("xn--bcher-kva.example", 443),
    "a-b.c": Authority("a-b.c", None),
    "testserver": Authority("testserver", None),
    "127.0.0.1:08765": Authority("127.0.0.1", 8765),
}

REFUSED = [
    "",
    "evil.example:8765@127.0.0.1",
    "evil.example@127.0.0.1",
    "127.0.0.1:8765.evil.example",
    "127.0.0.1:8765@evil.example",
    "127.0.0.1:8765/evil.example",
    "127.0.0.1/",
    "127.0.0.1:8765#x",
    "127.0.0.1:8765?x",
    "127.0.0.1:",
    "127.0.0.1:0",
    "127.0.0.1:65536",
    "127.0.0.1:123456",
    "127.0.0.1:-1",
    "127.0.0.1:+80",
    "127.0.0.1:80:80",
    "127.0.0.1 ",
    " 127.0.0.1",
    "127.0.0.1\t",
    "127.0.0.1\n",
    "127.0.0.1\x00",
    "127.0.0.1.",
    "localhost.",
    "127.1",
    "2130706433",
    "0x7f.0.0.1",
    "127.000.000.001",
    "256.0.0.1",
    "1.2.3.4.5",
    "a.1",
    "::1",
    "[::1",
    "::1]",
    "[::1]evil.example",
    "[::1]:8765.evil.example",
    "[fe80::1%25eth0]",
    "[fe80::1%eth0]",
    "[127.0.0.1]",
    "[v1.fe80::a]",
    "[]",
    "-evil.example",
    "evil-.example",
    "evil..example",
    ".example",
    "evil_example.com",
    "évil.example",
    "ｌｏｃａｌｈｏｓｔ",
    "127。0。0。1",
    "localhost\u200b",
    "a" * 64 + ".example",
    ".".join(["a" * 63] * 4),
    "http://127.0.0.1",
    "user:pass@localhost",
]


@pytest.mark.parametrize(("value", "expected"), ACCEPTED.items())
def test_a_host_with_an_optional_port_is_parsed_to_its_canonical_form(
    value: str, expected: Authority
) -> None:
    assert parse_authority(value) == expected


@pytest.mark.parametrize("value", REFUSED)
def test_anything_but_a_host_with_an_optional_port_is_refused(value: str) -> None:
    assert parse_authority(value) is None


@pytest.mark.parametrize(
    ("value", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.9.9.9:1", True),
        ("localhost", True),
        ("dev.localhost", True),
        ("[::1]", True),
        ("localhost.example", False),
        ("127.0.0.1.nip.io", False),
        ("[::]", False),
        ("0.0.0.0", False),
        ("10.0.0.1", False),
    ],
)
def test_only_loopback_names_and_addresses_count_as_loopback(value: str, loopback: bool) -> None:
    found = parse_authority(value)

    assert found is not None
    assert found.loopback is loopback


@pytest.mark.parametrize(
    ("url", "origin", "expected"),
    [
        ("http://127.0.0.1:8765", True, Authority("127.0.0.1", 8765)),
        ("https://tickwork.example.com", True, Authority("tickwork.example.com", None)),
        ("https://tickwork.example.com:443", True, Authority("tickwork.example.com", None)),
        ("http://tickwork.example.com:443", True, Authority("tickwork.example.com", 443)),
        ("http://testserver/dead?after=3#x", False, Authority("testserver", None)),
        ("http://[::1]:8765/", False, Authority("::1", 8765)),
        ("http://testserver/", True, None),  # an origin has no path
        ("http://evil.example@testserver/", False, None),
        ("http://testserver:80@evil.example/", False, None),
        ("ftp://testserver/", False, None),
        ("//testserver/", False, None),
        ("testserver", True, None),
        ("null", True, None),
        ("http://", True, None),
    ],
)
def test_a_page_or_origin_names_its_host_strictly(
    url: str, origin: bool, expected: Authority | None
) -> None:
    assert page_authority(url, origin=origin) == expected


# -- properties ----------------------------------------------------------------------------

LABELS = st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)
NAMES = (
    st.lists(LABELS, min_size=1, max_size=5)
    .map(".".join)
    .filter(lambda name: not name.split(".")[-1].isdigit())
)
IPV4 = st.ip_addresses(v=4).map(str)
IPV6 = st.ip_addresses(v=6).map(lambda address: f"[{address}]")
PORTS = st.none() | st.integers(min_value=1, max_value=65_535)


def _text(host: str, port: int | None) -> str:
    return host if port is None else f"{host}:{port}"


@given(host=NAMES | IPV4 | IPV6, port=PORTS)
def test_every_well_formed_host_and_port_is_accepted_as_written(
    host: str, port: int | None
) -> None:
    found = parse_authority(_text(host, port))

    assert found is not None
    assert found.port == port
    bare = host.strip("[]")
    if host.startswith("["):
        assert ipaddress.ip_address(found.host) == ipaddress.ip_address(bare)
    else:
        assert found.host == bare


@given(st.text(max_size=60))
def test_whatever_is_accepted_reads_back_the_same(value: str) -> None:
    found = parse_authority(value)
    if found is None:
        return
    host = f"[{found.host}]" if ":" in found.host else found.host

    assert parse_authority(_text(host, found.port)) == found
    assert set(value.lower()) <= set("abcdefghijklmnopqrstuvwxyz0123456789.-:[]")


@given(
    before=st.text(min_size=1, max_size=30),
    loopback=st.sampled_from(["127.0.0.1", "localhost", "[::1]", "127.0.0.1:8765"]),
)
def test_text_with_user_info_before_a_loopback_host_is_refused(before: str, loopback: str) -> None:
    assert parse_authority(f"{before}@{loopback}") is None


@given(
    loopback=st.sampled_from(["127.0.0.1", "localhost", "[::1]"]),
    port=st.integers(min_value=1, max_value=65_535),
    after=st.text(min_size=1, max_size=30).filter(lambda text: not text.isdigit()),
)
def test_a_port_followed_by_anything_but_digits_is_refused(
    loopback: str, port: int, after: str
) -> None:
    assert parse_authority(f"{loopback}:{port}{after}") is None
